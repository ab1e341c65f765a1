//! Fuzz target: the `-dbgsym` debug-file writer (`package::strip::only_keep_debug`) and the
//! build-ID reader on one in-memory ELF file. The debug file must stay within
//! `strip::MAX_GROWTH` bytes of the input, be readable to the end, and parse again.
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use rcclfix::package::strip;

fuzz_target!(|data: &[u8]| {
    let _ = strip::build_id(data);
    if let Ok(out) = strip::only_keep_debug(Arc::new(data.to_vec())) {
        assert!(out.len() <= data.len() as u64 + strip::MAX_GROWTH);
        let bytes = out.to_vec();
        assert_eq!(bytes.len() as u64, out.len());
        strip::has_debug_info(&bytes).expect("the debug file parses again");
    }
});
