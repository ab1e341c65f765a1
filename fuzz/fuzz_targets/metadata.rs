//! Fuzz target: metadata note parsers (msgpack v3+, YAML v2) and the code object reader.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rcclfix::scan::{codeobj, meta};

fuzz_target!(|data: &[u8]| {
    let mut md = meta::Metadata::default();
    let _ = meta::merge_msgpack(data, &mut md);
    let _ = meta::merge_yaml_v2(data, &mut md);
    let _ = codeobj::parse(data);
});
