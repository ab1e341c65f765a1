//! Hostile inputs to `rcclfix scan` (issue 40, item 1, streamed): the libraries of
//! `tests/it/hostile_scan_runtime.rs`'s first class (device code found through the
//! `__hip_fatbin_wrapper` and its relocation, not by section name), stored as archive members
//! larger than the memory budget (`--memory-budget 4K`) with no spill folder
//! (`RCCLFIX_SCAN_SPILL_DIR` empty), so each is read from a stream in passes
//! (`src/scan/input/stream_elf.rs`). Before, the streamed path found device code by the name
//! `.hip_fatbin` only, and every row that expects exit 1 or 3 here said "no device code found"
//! or "clean", exit 0.
//!
//! One row per mutant and container: `.tar.gz`, `.tar.xz`, `.tar.zst`, a `.deb`'s
//! `data.tar.xz`, and a `.whl` with the member deflated (a plain `.tar`, an `ar` archive and a
//! stored zip member are read in place, never streamed).

use std::ffi::OsString;
use std::io::Write as _;
use std::path::Path;

use crate::hostile_scan::{check_rows, deb_with_data, fixture, row, tar_archive, write, xz, Row};
use crate::hostile_scan_runtime::{headerless, renamed, section, shdrs, wrapper_reloc};

fn lib(p: &str) -> Vec<u8> {
    std::fs::read(fixture(p)).unwrap()
}

/// `lib` with its `.hip_fatbin` section header pointed at a copy of `clean`'s `.hip_fatbin`
/// appended at the end of the file (4096-aligned): the section holds a clean bundle, while the
/// wrapper still points at the declaring one, which stays where it was.
pub(crate) fn decoy(lib: &[u8], clean: &[u8]) -> Vec<u8> {
    let mut d = lib.to_vec();
    let cs = shdrs(clean);
    let c = section(&cs, ".hip_fatbin");
    let bytes = clean[c.offset as usize..(c.offset + c.size) as usize].to_vec();
    let s = shdrs(&d);
    let at = section(&s, ".hip_fatbin").at;
    d.resize(d.len().next_multiple_of(4096), 0);
    let off = d.len() as u64;
    d.extend_from_slice(&bytes);
    d[at + 24..at + 32].copy_from_slice(&off.to_le_bytes());
    d[at + 32..at + 40].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
    d
}

/// `lib` followed by `n` wrapper magics with version 1 (HIPF), 8-byte aligned.
fn many_magics(lib: &[u8], n: usize) -> Vec<u8> {
    let mut d = lib.to_vec();
    d.resize(d.len().next_multiple_of(8), 0);
    for _ in 0..n {
        d.extend_from_slice(&0x4849_5046u32.to_le_bytes());
        d.extend_from_slice(&1u32.to_le_bytes());
    }
    d
}

/// The containers a member is streamed from: file name and bytes holding `lib` as
/// `usr/lib/libk.so` (`pkg/libk.so` in the wheel).
fn containers(lib: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let tar = tar_archive(&[("usr/lib/libk.so", lib)], true);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    z.start_file(
        "pkg/libk.so",
        zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated),
    )
    .unwrap();
    z.write_all(lib).unwrap();
    vec![
        ("lib.tar.gz", gz.finish().unwrap()),
        ("lib.tar.xz", xz(&tar)),
        ("lib.tar.zst", zstd::bulk::compress(&tar, 3).unwrap()),
        ("lib.deb", deb_with_data(&xz(&tar))),
        ("lib.whl", z.finish().unwrap().into_inner()),
    ]
}

/// One row per container for the mutant `lib`.
fn rows_for(
    rows: &mut Vec<Row>,
    name: &'static str,
    lib: &[u8],
    json: bool,
    code: i32,
    fragment: &str,
) {
    for (file, bytes) in containers(lib) {
        let arg = format!("in/{file}");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"scan", &"--memory-budget", &"4K"];
        if json {
            args.push(&"--json=full");
        }
        args.push(&arg);
        let mut r = row(
            name,
            move |d: &Path| write(&d.join("in").join(file), &bytes),
            &args,
            code,
            fragment,
        );
        r.env = vec![("RCCLFIX_SCAN_SPILL_DIR", OsString::new())];
        rows.push(r);
    }
}

fn rows() -> Vec<Row> {
    let mut rows = vec![];
    let k = lib("sid/kernels.so");
    let clean = lib("sid/implicit.so");
    rows_for(
        &mut rows,
        "class 1 streamed: .hip_fatbin renamed",
        &renamed(&k),
        false,
        1,
        "HOSTCALL k_assert",
    );
    rows_for(
        &mut rows,
        "class 1 streamed: .hip_fatbin renamed in a CCOB library",
        &renamed(&lib("sid/kernels-ccob.so")),
        false,
        1,
        "HOSTCALL k_assert",
    );
    rows_for(
        &mut rows,
        "class 1 streamed: section headers gone",
        &headerless(&k),
        false,
        1,
        "HOSTCALL k_assert",
    );
    rows_for(
        &mut rows,
        "class 1 streamed: section headers gone from a CCOB library",
        &headerless(&lib("sid/kernels-ccob.so")),
        false,
        1,
        "HOSTCALL k_assert",
    );
    rows_for(
        &mut rows,
        "class 1 streamed: two wrappers, section headers gone",
        &headerless(&lib("sid/two-tu.so")),
        false,
        1,
        "HOSTCALL k_table",
    );
    rows_for(
        &mut rows,
        "class 1 streamed: a decoy .hip_fatbin (a clean bundle) the wrapper does not point at",
        &decoy(&k, &clean),
        true,
        1,
        "\"class\": \"unreferenced\"",
    );
    rows_for(
        &mut rows,
        "class 1 streamed: no relocation fills the wrapper's pointer (a clean library)",
        &wrapper_reloc(&clean, |r| {
            let o = u64::from_le_bytes(r[..8].try_into().unwrap()) + 8;
            r[..8].copy_from_slice(&o.to_le_bytes());
        }),
        false,
        3,
        "cannot be followed: no dynamic relocation fills its pointer",
    );
    rows_for(
        &mut rows,
        "class 1 streamed: the wrapper points 8 bytes into the bundle (a clean library)",
        &wrapper_reloc(&clean, |r| {
            let a = u64::from_le_bytes(r[16..24].try_into().unwrap()) + 8;
            r[16..24].copy_from_slice(&a.to_le_bytes());
        }),
        false,
        3,
        "no offload bundle or CCOB magic is here",
    );
    rows_for(
        &mut rows,
        "class 1 streamed: the wrapper's relocation has another type (a clean library)",
        &wrapper_reloc(&clean, |r| r[8] = 6),
        false,
        3,
        "neither R_X86_64_RELATIVE nor R_X86_64_64",
    );
    rows_for(
        &mut rows,
        "class 1 streamed: more wrapper magics than are kept (a clean library)",
        &many_magics(&clean, 65540),
        false,
        3,
        "more than 65536 __hip_fatbin_wrapper magics",
    );
    rows_for(
        &mut rows,
        "class 1 streamed: a clean library without section headers stays clean",
        &headerless(&clean),
        false,
        0,
        "gfx1100          clean",
    );
    rows
}

#[test]
fn hostile_scan_streamed_table() {
    check_rows(rows());
}
