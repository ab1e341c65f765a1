//! The one integration-test binary: one module per feature.
mod patch;
mod verify;
mod build;
mod doctor;
mod package;
mod scan;
mod matrix;
mod recipes;
