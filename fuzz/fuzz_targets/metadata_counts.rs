//! Fuzz target: the count handling of the metadata note readers (`scan::meta::merge_msgpack` and
//! `patch::msgpack::parse`). The input's first byte picks where an array32/map32 header goes
//! (the `amdhsa.kernels` array, a kernel's `.args` array, an argument map, the top-level map),
//! the next four bytes are its count, the rest follows it. A count larger than the bytes left
//! must be refused, never sized: run with `-malloc_limit_mb=64`, so any single allocation over
//! 64 MiB is reported as a crash (the note is at most a few KiB).
#![no_main]
use libfuzzer_sys::fuzz_target;
use rcclfix::scan::meta;

fn fixstr(out: &mut Vec<u8>, s: &str) {
    out.push(0xa0 | s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let (sel, count, rest) = (data[0], &data[1..5], &data[5..]);
    let mut note = Vec::new();
    let (marker, wrap) = match sel % 5 {
        0 => (0xdd, 0), // amdhsa.kernels: array32
        1 => (0xdd, 1), // .args: array32
        2 => (0xdf, 2), // an argument: map32
        3 => (0xdf, 3), // the top level: map32
        _ => (0xdc, 0), // amdhsa.kernels: array16 (first two count bytes)
    };
    if wrap != 3 {
        note.push(0x81);
        fixstr(&mut note, "amdhsa.kernels");
    }
    if wrap >= 1 && wrap <= 2 {
        note.push(0x91);
        note.push(0x82);
        fixstr(&mut note, ".name");
        fixstr(&mut note, "k");
        fixstr(&mut note, ".args");
    }
    if wrap == 2 {
        note.push(0x91);
    }
    note.push(marker);
    note.extend_from_slice(if marker == 0xdc { &count[..2] } else { count });
    note.extend_from_slice(rest);
    let mut md = meta::Metadata::default();
    if meta::merge_msgpack(&note, &mut md).is_ok() {
        // Whatever was read fits in the note: each kernel and argument took bytes of it.
        assert!(md.kernels.len() <= note.len());
        assert!(md.kernels.iter().map(|k| k.args.len()).sum::<usize>() <= note.len());
    }
    let _ = rcclfix::patch::msgpack::parse(&note);
});
