//! Fuzz target: the `.deb`'s stripper (`package::strip::strip`) on one in-memory ELF file. Its
//! output must stay within `strip::MAX_GROWTH` bytes of the input, be readable to the end, and
//! parse again.
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use rcclfix::package::strip;

fuzz_target!(|data: &[u8]| {
    if let Ok(out) = strip::strip(Arc::new(data.to_vec())) {
        assert!(out.len() <= data.len() as u64 + strip::MAX_GROWTH);
        let bytes = out.to_vec();
        assert_eq!(bytes.len() as u64, out.len());
        strip::has_debug_info(&bytes).expect("the stripped file parses again");
    }
});
