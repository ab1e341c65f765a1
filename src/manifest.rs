//! Build provenance: `manifest.json` in every output folder and package.
