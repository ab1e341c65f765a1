//! The `.deb`'s stripper and the `-dbgsym` debug-file writer (`rcclfix::package::strip`) on
//! corrupted section headers, and `prove`'s comparison on builds that are not comparable.
//!
//! The stripper reads headers a build folder someone else made controls. Its input here is the
//! committed `tests/fixtures/package/librccl-unstripped.so` (compiled from our own sources by
//! `cargo xtask fixtures-package`, not on this machine), so every corruption lands on the same
//! byte on every machine. Rows: every field of every section header set to each boundary value,
//! every byte of the section header table and of the ELF header's table fields flipped, and a
//! fixed-seed mutation run over all headers. The oracle for each input: `strip` and
//! `only_keep_debug` either refuse it with a one-line error, or return a file at most
//! `strip::MAX_GROWTH` bytes larger than the input, whose every byte can be read, and which the
//! stripper parses again as ELF. Never a panic, never an output sized by a claim.

use std::path::Path;
use std::sync::Arc;

use rcclfix::package::strip;

fn committed() -> Vec<u8> {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/package/librccl-unstripped.so");
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn u16_at(d: &[u8], at: usize) -> usize {
    u16::from_le_bytes([d[at], d[at + 1]]) as usize
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

/// How the corrupted inputs fared.
#[derive(Default, Debug)]
struct Tally {
    inputs: usize,
    rewritten: usize,
    refused: usize,
}

/// Run the stripper and the debug-file writer on `bad` and check the oracle (module docs).
fn check(bad: &[u8], what: &str, tally: &mut Tally) {
    tally.inputs += 1;
    let data = Arc::new(bad.to_vec());
    for (name, r) in [
        ("strip", strip::strip(data.clone())),
        ("only_keep_debug", strip::only_keep_debug(data.clone())),
    ] {
        match r {
            Ok(out) => {
                assert!(
                    out.len() <= bad.len() as u64 + strip::MAX_GROWTH,
                    "{what}: {name} returned a {}-byte file for a {}-byte input",
                    out.len(),
                    bad.len()
                );
                let bytes = out.to_vec();
                assert_eq!(bytes.len() as u64, out.len(), "{what}: {name}");
                if let Err(e) = strip::has_debug_info(&bytes) {
                    panic!("{what}: {name} wrote a file it cannot read again: {e:#}");
                }
                tally.rewritten += 1;
            }
            Err(e) => {
                let msg = format!("{e:#}");
                assert!(!msg.contains('\n'), "{what}: {name}: {msg}");
                tally.refused += 1;
            }
        }
    }
    let _ = strip::build_id(bad);
    let _ = strip::has_debug_info(bad);
}

/// `Elf64_Shdr` fields: (name, offset, width).
const FIELDS: [(&str, usize, usize); 10] = [
    ("sh_name", 0, 4),
    ("sh_type", 4, 4),
    ("sh_flags", 8, 8),
    ("sh_addr", 16, 8),
    ("sh_offset", 24, 8),
    ("sh_size", 32, 8),
    ("sh_link", 40, 4),
    ("sh_info", 44, 4),
    ("sh_addralign", 48, 8),
    ("sh_entsize", 56, 8),
];

fn put(bad: &mut [u8], at: usize, width: usize, v: u64) {
    bad[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
}

#[test]
fn the_fixture_is_what_the_stripper_expects() {
    let good = committed();
    let shnum = u16_at(&good, 0x3c);
    assert!(shnum > 30, "{shnum} section headers");
    let out = strip::strip(Arc::new(good.clone())).unwrap();
    assert!(
        out.len() < good.len() as u64 / 2,
        "{} of {}",
        out.len(),
        good.len()
    );
    assert!(out.changed_sections.iter().any(|s| s == ".debug_info"));
    assert!(out.changed_sections.iter().any(|s| s == ".symtab"));
    let debug = strip::only_keep_debug(Arc::new(good.clone())).unwrap();
    assert!(debug.changed_sections.iter().any(|s| s == ".hip_fatbin"));
    assert!(strip::build_id(&good).unwrap().is_some());
}

/// The issue-20 case, named: a `SHT_NOBITS` section (`.bss`) whose `sh_offset` claims 3 × 2^48
/// made the stripper size its output at 844 TB. An empty section's offset is never read now.
#[test]
fn a_nobits_offset_does_not_size_the_output() {
    let good = committed();
    let shoff = u64_at(&good, 0x28) as usize;
    let shnum = u16_at(&good, 0x3c);
    let bss = (0..shnum)
        .find(|i| {
            let h = shoff + i * 64;
            u32::from_le_bytes(good[h + 4..h + 8].try_into().unwrap()) == 8
        })
        .expect("the fixture has a NOBITS section");
    let mut bad = good.clone();
    put(&mut bad, shoff + bss * 64 + 24, 8, 3 << 48);
    let out = strip::strip(Arc::new(bad.clone())).unwrap();
    assert!(out.len() < good.len() as u64, "{}", out.len());
    let _ = out.to_vec();
    let mut t = Tally::default();
    check(&bad, ".bss sh_offset 3<<48", &mut t);
}

/// Every field of every section header, set to each boundary value.
#[test]
fn every_section_header_field_at_every_boundary() {
    let good = committed();
    let len = good.len() as u64;
    let shoff = u64_at(&good, 0x28) as usize;
    let shnum = u16_at(&good, 0x3c);
    let mut t = Tally::default();
    for i in 0..shnum {
        for (field, off, width) in FIELDS {
            let at = shoff + i * 64 + off;
            let mut cur = [0u8; 8];
            cur[..width].copy_from_slice(&good[at..at + width]);
            let orig = u64::from_le_bytes(cur);
            let top = 1u64 << (width * 8 - 1);
            for v in [
                0,
                1,
                orig.wrapping_add(1),
                orig.wrapping_sub(1),
                orig ^ top,
                u64::MAX,
                len - 1,
                len,
                len + 1,
                shoff as u64,
                3 << 48,
                0x1000,
                1 << 17,
            ] {
                let mut bad = good.clone();
                put(&mut bad, at, width, v);
                check(&bad, &format!("section {i} {field} = {v:#x}"), &mut t);
            }
        }
    }
    eprintln!("section header fields: {t:?}");
    assert!(t.rewritten > 0 && t.refused > 0, "{t:?}");
}

/// Every byte of the section header table and of the ELF header's table fields (0x20–0x3f:
/// e_phoff, e_shoff, e_flags, e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx),
/// each set to 0x00 and 0xff and flipped in its lowest and highest bit.
#[test]
fn every_header_table_byte_flipped() {
    let good = committed();
    let shoff = u64_at(&good, 0x28) as usize;
    let shnum = u16_at(&good, 0x3c);
    let mut t = Tally::default();
    for at in (0x20..0x40).chain(shoff..shoff + shnum * 64) {
        let b = good[at];
        for v in [0x00, 0xff, b ^ 0x01, b ^ 0x80] {
            if v == b {
                continue;
            }
            let mut bad = good.clone();
            bad[at] = v;
            check(&bad, &format!("byte {at} = {v:#04x}"), &mut t);
        }
    }
    eprintln!("header bytes: {t:?}");
    assert!(t.rewritten > 0 && t.refused > 0, "{t:?}");
}

/// A fixed-seed mutation run (the in-process stand-in for a fuzzer): 1–6 random bytes of the
/// ELF header, the program headers or the section header table, and sometimes a truncation.
#[test]
fn seeded_header_mutations() {
    let good = committed();
    let shoff = u64_at(&good, 0x28) as usize;
    let shnum = u16_at(&good, 0x3c);
    let phoff = u64_at(&good, 0x20) as usize;
    let phnum = u16_at(&good, 0x38);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let runs: usize = std::env::var("RCCLFIX_STRIP_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut t = Tally::default();
    for n in 0..runs {
        let mut bad = good.clone();
        for _ in 0..1 + next() % 6 {
            let at = match next() % 8 {
                0 => (next() % 64) as usize,
                1 => phoff + (next() as usize) % (phnum * 56),
                _ => shoff + (next() as usize) % (shnum * 64),
            };
            bad[at] = next() as u8;
        }
        if next() % 16 == 0 {
            bad.truncate((next() as usize) % good.len());
        }
        check(&bad, &format!("mutation {n}"), &mut t);
    }
    eprintln!("seeded mutations: {t:?}");
    assert_eq!(t.inputs, runs);
}

/// The input the `debug_file` fuzz target found (issue 20, committed under `fuzz/crashes/`): a
/// mutation of the committed fixture whose section header 0 claims bytes (`sh_type` 1,
/// `sh_offset` 11328). `only_keep_debug` copied header 0 as it was and wrote a debug file its own
/// reader refused ("section 0 outside the file"). A header 0 that is not the null header is
/// refused by every reader and writer now; the same header zeroed is accepted.
#[test]
fn the_debug_file_fuzz_crash_is_refused() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/crashes/debug_file/crash-b2a651f39e7a88784baaba49d4619784fd85f9ec");
    let bad = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut t = Tally::default();
    check(&bad, "fuzz crash b2a651f3", &mut t);
    for (name, r) in [
        ("strip", strip::strip(Arc::new(bad.clone()))),
        (
            "only_keep_debug",
            strip::only_keep_debug(Arc::new(bad.clone())),
        ),
    ] {
        let e = r.expect_err(name);
        assert!(
            format!("{e:#}").contains("section header 0 is not the null header"),
            "{name}: {e:#}"
        );
    }
    assert!(strip::build_id(&bad).is_err());
    // Header 0 of the committed fixture, each field alone set to a value that claims bytes.
    let good = committed();
    let shoff = u64_at(&good, 0x28) as usize;
    for (field, off, width) in FIELDS {
        let mut bad = good.clone();
        put(&mut bad, shoff + off, width, 1);
        let e = strip::only_keep_debug(Arc::new(bad.clone())).expect_err(field);
        assert!(format!("{e:#}").contains("header 0"), "{field}: {e:#}");
        check(&bad, &format!("section 0 {field} = 1"), &mut t);
    }
    assert_eq!(t.refused, 2 * (1 + FIELDS.len()), "{t:?}");
}

/// A synthetic ELF whose 60,000 section headers each name a different tail of one 1 MiB
/// `.shstrtab` (names that share bytes, as linkers write them, but 60 GB once copied out):
/// refused by the name bound before anything sized by the names is allocated.
#[test]
fn names_sharing_one_long_string_are_bounded() {
    const L: usize = 1 << 20;
    const N: usize = 60_000;
    let shoff = 64 + L;
    let mut d = vec![0u8; shoff + N * 64];
    d[..4].copy_from_slice(b"\x7fELF");
    d[4] = 2;
    d[5] = 1;
    d[6] = 1;
    put(&mut d, 0x10, 2, 3);
    put(&mut d, 0x28, 8, shoff as u64);
    put(&mut d, 0x34, 2, 64);
    put(&mut d, 0x3a, 2, 64);
    put(&mut d, 0x3c, 2, N as u64);
    put(&mut d, 0x3e, 2, 1);
    d[64..64 + L - 1].fill(b'a');
    for i in 1..N {
        let h = shoff + i * 64;
        put(&mut d, h, 4, i as u64);
        put(&mut d, h + 4, 4, if i == 1 { 3 } else { 1 });
        if i == 1 {
            put(&mut d, h + 24, 8, 64);
            put(&mut d, h + 32, 8, L as u64);
        }
    }
    for (name, r) in [
        ("strip", strip::strip(Arc::new(d.clone()))),
        (
            "only_keep_debug",
            strip::only_keep_debug(Arc::new(d.clone())),
        ),
    ] {
        let e = r.expect_err(name);
        assert!(
            format!("{e:#}").contains("section names add up"),
            "{name}: {e:#}"
        );
    }
    assert!(strip::has_debug_info(&d).is_err());
}
