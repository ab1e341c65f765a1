//! The one integration-test binary: one module per feature.
mod build;
mod build_plan;
mod cli;
mod doctor;
mod fsutil;
mod hostile;
mod hostile_package;
mod matrix;
mod package;
mod patch;
mod prove;
mod recipes;
mod scan;
mod source;
mod support;
mod tidy;
mod verify;
