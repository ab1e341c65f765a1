//! The one integration-test binary: one module per feature.
mod build;
mod scan;
