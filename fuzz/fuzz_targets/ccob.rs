//! Fuzz target: the CCOB header parser and bounded decoder (v1/v2/v3, zlib/zstd).
#![no_main]
use libfuzzer_sys::fuzz_target;
use rcclfix::scan::ccob;

fuzz_target!(|data: &[u8]| {
    let mut buf = b"CCOB".to_vec();
    buf.extend_from_slice(data);
    if let Ok(d) = ccob::decode(&buf) {
        assert_eq!(d.bundle.len() as u64, d.header.uncompressed_size);
    }
    let _ = ccob::decode_with(data, false);
});
