//! Fuzz target: the whole scanner on one in-memory input (format sniffing, ELF, archives).
#![no_main]
use libfuzzer_sys::fuzz_target;
use rcclfix::scan::{scan_bytes, ScanOptions};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = scan_bytes("fuzz", data, &ScanOptions::default()) {
        let _ = r.target_states(&["gfx1100".to_string()]);
    }
});
