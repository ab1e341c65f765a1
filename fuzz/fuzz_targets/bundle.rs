//! Fuzz target: the plain offload bundle parser and the `.hip_fatbin` walk.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rcclfix::scan::{bundle, model::FileReport, walk, Settings};

fuzz_target!(|data: &[u8]| {
    let _ = bundle::parse_bundle(data);
    let mut f = FileReport {
        path: "fuzz".into(),
        kind: "bundle".into(),
        images: vec![],
        unreadable: vec![],
    };
    walk::scan_fatbin(data, 0, &mut f, &Settings::default());
});
