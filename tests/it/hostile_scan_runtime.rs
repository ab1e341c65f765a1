//! Hostile inputs to `rcclfix scan` (issue 40, items 1–3): device code hidden from a reader that
//! looks where the compiler usually puts it, while the HIP runtime and comgr still find it.
//! One table row per case, run by [`crate::hostile_scan::check_rows`], grouped by class:
//! 1. device code found as the runtime finds it: through the `__hip_fatbin_wrapper` and its
//!    relocation, whatever the sections are called or whether they are there,
//! 2. notes read as comgr reads them: the `PT_NOTE` segment, and a note section that disagrees
//!    with it is unknown,
//! 3. new offload driver objects (`.llvm.offloading`): unknown until linked, or read where the
//!    image is a complete code object.
//!
//! The rows of the first table edit committed fixtures byte by byte (what the tools below do,
//! reduced to the bytes a reader looks at); the slow table makes the same cases with the real
//! toolchain (`llvm-objcopy-21`, `clang++-21`, `llvm-ar-21`, `clang-offload-packager-21` in
//! `debian-sid`) at test time, from `tests/fixtures/src`; its `class 3 streamed` rows store the
//! objects as `.tar.gz` members larger than the memory budget, read from a stream (before, that
//! path did not read `.llvm.offloading` and said "no device code found", exit 0).

use std::path::Path;

use crate::hostile_scan::{check_rows, fixture, row, write, Row};
use crate::support::{in_toolchain_ok, require_tool, slow_or_note};

fn u16_at(d: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(d[at..at + 2].try_into().unwrap())
}

fn u32_at(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

/// A section header of a 64-bit ELF: its position in the file, name, type, address, offset, size.
pub(crate) struct Shdr {
    pub(crate) at: usize,
    pub(crate) name: String,
    pub(crate) ty: u32,
    pub(crate) addr: u64,
    pub(crate) offset: u64,
    pub(crate) size: u64,
}

/// The section headers of the 64-bit little-endian ELF `d`.
pub(crate) fn shdrs(d: &[u8]) -> Vec<Shdr> {
    let (shoff, num, strndx) = (
        u64_at(d, 0x28) as usize,
        u16_at(d, 0x3c) as usize,
        u16_at(d, 0x3e) as usize,
    );
    let raw = |i: usize| {
        let at = shoff + 64 * i;
        (
            at,
            u32_at(d, at),
            u32_at(d, at + 4),
            u64_at(d, at + 16),
            u64_at(d, at + 24),
            u64_at(d, at + 32),
        )
    };
    let names = raw(strndx).4 as usize;
    (0..num)
        .map(|i| {
            let (at, name, ty, addr, offset, size) = raw(i);
            let s = &d[names + name as usize..];
            let n = s.iter().position(|&c| c == 0).unwrap();
            Shdr {
                at,
                name: String::from_utf8_lossy(&s[..n]).into_owned(),
                ty,
                addr,
                offset,
                size,
            }
        })
        .collect()
}

pub(crate) fn section<'a>(s: &'a [Shdr], name: &str) -> &'a Shdr {
    s.iter().find(|h| h.name == name).unwrap()
}

/// `lib` with `.hip_fatbin` renamed `.hip_fatbiX` in the section name table (one byte).
pub(crate) fn renamed(lib: &[u8]) -> Vec<u8> {
    let mut d = lib.to_vec();
    let at = d
        .windows(12)
        .position(|w| w == b".hip_fatbin\0")
        .expect(".hip_fatbin in the name table");
    d[at + 10] = b'X';
    d
}

/// `lib` without section headers (`e_shoff`, `e_shnum`, `e_shstrndx` zeroed): what a reader
/// that needs them sees after `llvm-objcopy --strip-sections`.
pub(crate) fn headerless(lib: &[u8]) -> Vec<u8> {
    let mut d = lib.to_vec();
    d[0x28..0x30].fill(0);
    d[0x3c..0x40].fill(0);
    d
}

/// `lib` with the dynamic relocation that fills its wrapper's pointer changed by `edit`
/// (the `Elf64_Rela` bytes: offset, info, addend).
pub(crate) fn wrapper_reloc(lib: &[u8], edit: impl Fn(&mut [u8])) -> Vec<u8> {
    let mut d = lib.to_vec();
    let s = shdrs(&d);
    let ptr = section(&s, ".hipFatBinSegment").addr + 8;
    let rela = section(&s, ".rela.dyn");
    let at = (rela.offset as usize..(rela.offset + rela.size) as usize)
        .step_by(24)
        .find(|&a| u64_at(&d, a) == ptr)
        .expect("the wrapper's relocation");
    edit(&mut d[at..at + 24]);
    d
}

/// The bare code object `co` with its metadata note copied to the end of the file, the copy's
/// `hidden_hostcall_buffer` renamed `hidden_global_offset_x` (same length: a note that
/// declares nothing), and either the note section (`section: true`) or the `PT_NOTE` segment
/// pointed at the copy. The other view still declares.
pub(crate) fn note_views_disagree(co: &[u8], section_clean: bool) -> Vec<u8> {
    let mut d = co.to_vec();
    let s = shdrs(&d);
    let note = s.iter().find(|h| h.ty == 7).expect("a note section");
    let (off, size) = (note.offset as usize, note.size as usize);
    let mut copy = d[off..off + size].to_vec();
    let from: &[u8] = b"hidden_hostcall_buffer";
    let mut hits = 0;
    while let Some(i) = copy.windows(from.len()).position(|w| w == from) {
        copy[i..i + from.len()].copy_from_slice(b"hidden_global_offset_x");
        hits += 1;
    }
    assert!(hits > 0, "the fixture's note declares");
    while !d.len().is_multiple_of(8) {
        d.push(0);
    }
    let new_off = d.len() as u64;
    d.extend_from_slice(&copy);
    if section_clean {
        d[note.at + 24..note.at + 32].copy_from_slice(&new_off.to_le_bytes());
    } else {
        let (phoff, phnum) = (u64_at(&d, 0x20) as usize, u16_at(&d, 0x38) as usize);
        let ph = (0..phnum)
            .map(|i| phoff + 56 * i)
            .find(|&p| u32_at(&d, p) == 4 && u64_at(&d, p + 8) == off as u64)
            .expect("the PT_NOTE that holds the note section");
        d[ph + 8..ph + 16].copy_from_slice(&new_off.to_le_bytes());
    }
    d
}

/// `lib` with `n` wrapper magics (HIPF, version 1) appended on a page boundary and its last
/// `PT_LOAD` moved to map them: each one a wrapper the reader must consider. Before the bound,
/// following them compared each with every other (8 million in 64 MB ran past ten minutes).
fn loaded_magics(lib: &[u8], n: usize) -> Vec<u8> {
    let mut d = lib.to_vec();
    d.resize(d.len().next_multiple_of(4096), 0);
    let start = d.len() as u64;
    for _ in 0..n {
        d.extend_from_slice(&0x4849_5046u32.to_le_bytes());
        d.extend_from_slice(&1u32.to_le_bytes());
    }
    let len = d.len() as u64 - start;
    let (phoff, phnum) = (u64_at(&d, 0x20) as usize, u16_at(&d, 0x38) as usize);
    let last = (0..phnum)
        .map(|i| phoff + 56 * i)
        .rfind(|&p| u32_at(&d, p) == 1)
        .expect("a PT_LOAD");
    for (k, v) in [start, 0x1000_0000, 0x1000_0000, len, len]
        .iter()
        .enumerate()
    {
        d[last + 8 + 8 * k..last + 16 + 8 * k].copy_from_slice(&v.to_le_bytes());
    }
    d
}

fn put(d: &Path, name: &str, bytes: Vec<u8>) {
    write(&d.join("in").join(name), &bytes);
}

fn read_fixture(p: &str) -> Vec<u8> {
    std::fs::read(fixture(p)).unwrap()
}

fn rows() -> Vec<Row> {
    let mut rows = vec![];
    // Class 1: the wrapper leads to the device code; a wrapper that cannot be followed is
    // unknown, never clean.
    rows.push(row(
        "class 1: .hip_fatbin renamed (one byte of the name table)",
        |d| put(d, "lib.so", renamed(&read_fixture("sid/kernels.so"))),
        &[&"scan", &"in/lib.so"],
        1,
        "HOSTCALL k_assert",
    ));
    rows.push(row(
        "class 1: section headers gone",
        |d| put(d, "lib.so", headerless(&read_fixture("sid/kernels.so"))),
        &[&"scan", &"in/lib.so"],
        1,
        "HOSTCALL k_assert",
    ));
    rows.push(row(
        "class 1: section headers gone from a CCOB library",
        |d| {
            put(
                d,
                "lib.so",
                headerless(&read_fixture("sid/kernels-ccob.so")),
            )
        },
        &[&"scan", &"in/lib.so"],
        1,
        "HOSTCALL k_assert",
    ));
    rows.push(row(
        "class 1: two wrappers, section headers gone",
        |d| put(d, "lib.so", headerless(&read_fixture("sid/two-tu.so"))),
        &[&"scan", &"in/lib.so"],
        1,
        "HOSTCALL k_table",
    ));
    rows.push(row(
        "class 1: no relocation fills the wrapper's pointer (a clean library)",
        |d| {
            let lib = wrapper_reloc(&read_fixture("sid/implicit.so"), |r| {
                // The loader now writes the null field after the pointer instead.
                let o = u64::from_le_bytes(r[..8].try_into().unwrap()) + 8;
                r[..8].copy_from_slice(&o.to_le_bytes());
            });
            put(d, "lib.so", lib)
        },
        &[&"scan", &"in/lib.so"],
        3,
        "cannot be followed: no dynamic relocation fills its pointer",
    ));
    rows.push(row(
        "class 1: the wrapper points 8 bytes into the bundle (a clean library)",
        |d| {
            let lib = wrapper_reloc(&read_fixture("sid/implicit.so"), |r| {
                let a = u64::from_le_bytes(r[16..24].try_into().unwrap()) + 8;
                r[16..24].copy_from_slice(&a.to_le_bytes());
            });
            put(d, "lib.so", lib)
        },
        &[&"scan", &"in/lib.so"],
        3,
        "no offload bundle or CCOB magic is here",
    ));
    rows.push(row(
        "class 1: the wrapper's relocation has another type (a clean library)",
        |d| {
            let lib = wrapper_reloc(&read_fixture("sid/implicit.so"), |r| r[8] = 6);
            put(d, "lib.so", lib)
        },
        &[&"scan", &"in/lib.so"],
        3,
        "neither R_X86_64_RELATIVE nor R_X86_64_64",
    ));
    rows.push(row(
        "class 1: a clean library without section headers stays clean",
        |d| put(d, "lib.so", headerless(&read_fixture("sid/implicit.so"))),
        &[&"scan", &"in/lib.so"],
        0,
        "gfx1100          clean",
    ));
    rows.push(row(
        "class 1: more wrapper magics in the loaded bytes than are followed (a clean library)",
        |d| {
            put(
                d,
                "lib.so",
                loaded_magics(&read_fixture("sid/implicit.so"), 65540),
            )
        },
        &[&"scan", &"in/lib.so"],
        3,
        "more than 65536 __hip_fatbin_wrapper magics",
    ));
    // Class 2: comgr reads the PT_NOTE segment; a note section that disagrees is unknown.
    rows.push(row(
        "class 2: the note section clean, the PT_NOTE segment declaring",
        |d| {
            let co = note_views_disagree(&read_fixture("sid/kernels.co"), true);
            put(d, "k.co", co)
        },
        &[&"scan", &"in/k.co"],
        3,
        "the metadata in the note section (at offset",
    ));
    rows.push(row(
        "class 2: the PT_NOTE segment clean, the note section declaring",
        |d| {
            let co = note_views_disagree(&read_fixture("sid/kernels.co"), false);
            put(d, "k.co", co)
        },
        &[&"scan", &"in/k.co"],
        3,
        "comgr reads the segment",
    ));
    rows.push(row(
        "class 2: no section headers: the PT_NOTE segment is read",
        |d| put(d, "k.co", headerless(&read_fixture("sid/kernels.co"))),
        &[&"scan", &"in/k.co"],
        1,
        "HOSTCALL k_assert",
    ));
    rows
}

#[test]
fn hostile_scan_runtime_table() {
    check_rows(rows());
}

/// Run `argv` in toolchain `debian-sid` in the row folder `d` (paths relative to it).
fn sid(d: &Path, argv: &[&str]) {
    in_toolchain_ok("sid", d, argv);
}

/// Copy `tests/fixtures/<p>` to `d/in/<name>`.
fn copy_in(d: &Path, p: &str, name: &str) {
    put(d, name, read_fixture(p));
}

/// Compile `kernels.hip` (its `k_assert` and `k_printf` declare) into `in/nd.o` with the new
/// offload driver as an `-fgpu-rdc` object.
fn new_driver_object(d: &Path) {
    copy_in(d, "src/kernels.hip", "kernels.hip");
    sid(
        d,
        &[
            "clang++-21",
            "-x",
            "hip",
            "--offload-new-driver",
            "-fgpu-rdc",
            "-c",
            "--offload-arch=gfx1100",
            "-O3",
            "in/kernels.hip",
            "-o",
            "in/nd.o",
        ],
    );
}

fn slow_rows() -> Vec<Row> {
    let mut rows = vec![];
    rows.push(row(
        "class 1: llvm-objcopy --strip-sections",
        |d| {
            copy_in(d, "sid/kernels.so", "k.so");
            sid(
                d,
                &[
                    "llvm-objcopy-21",
                    "--strip-sections",
                    "in/k.so",
                    "in/lib.so",
                ],
            );
        },
        &[&"scan", &"in/lib.so"],
        1,
        "HOSTCALL k_assert",
    ));
    rows.push(row(
        "class 1: llvm-objcopy --rename-section .hip_fatbin",
        |d| {
            copy_in(d, "sid/kernels.so", "k.so");
            sid(
                d,
                &[
                    "llvm-objcopy-21",
                    "--rename-section",
                    ".hip_fatbin=.rodata.hip",
                    "in/k.so",
                    "in/lib.so",
                ],
            );
        },
        &[&"scan", &"in/lib.so"],
        1,
        "HOSTCALL k_assert",
    ));
    rows.push(row(
        "class 1: a decoy .hip_fatbin (a clean bundle) beside the renamed real one",
        |d| {
            copy_in(d, "sid/kernels.so", "k.so");
            copy_in(d, "sid/implicit.so", "clean.so");
            sid(
                d,
                &[
                    "llvm-objcopy-21",
                    "--dump-section",
                    ".hip_fatbin=in/clean.bin",
                    "in/clean.so",
                ],
            );
            sid(
                d,
                &[
                    "llvm-objcopy-21",
                    "--rename-section",
                    ".hip_fatbin=.rodata.hip",
                    "in/k.so",
                    "in/renamed.so",
                ],
            );
            sid(
                d,
                &[
                    "llvm-objcopy-21",
                    "--add-section",
                    ".hip_fatbin=in/clean.bin",
                    "in/renamed.so",
                    "in/lib.so",
                ],
            );
        },
        &[&"scan", &"--json=full", &"in/lib.so"],
        1,
        "\"class\": \"unreferenced\"",
    ));
    // Class 3: new offload driver objects.
    rows.push(row(
        "class 3: --offload-new-driver -fgpu-rdc -c object",
        new_driver_object,
        &[&"scan", &"in/nd.o"],
        3,
        "not yet linked (bitcode, new offload driver object)",
    ));
    rows.push(row(
        "class 3: a static library of new offload driver objects",
        |d| {
            new_driver_object(d);
            sid(d, &["llvm-ar-21", "rcs", "in/libnd.a", "in/nd.o"]);
        },
        &[&"scan", &"in/libnd.a"],
        3,
        "not yet linked (bitcode, new offload driver object)",
    ));
    rows.push(row(
        "class 3: an offload binary holding a complete code object is read",
        |d| {
            new_driver_object(d);
            copy_in(d, "sid/kernels.co", "kernels.co");
            sid(
                d,
                &[
                    "clang-offload-packager-21",
                    "-o",
                    "in/pkg.bin",
                    "--image=file=in/kernels.co,triple=amdgcn-amd-amdhsa,arch=gfx1100,kind=hip",
                ],
            );
            sid(
                d,
                &[
                    "llvm-objcopy-21",
                    "--remove-section",
                    ".llvm.offloading",
                    "--add-section",
                    ".llvm.offloading=in/pkg.bin",
                    "in/nd.o",
                    "in/co.o",
                ],
            );
        },
        &[&"scan", &"in/co.o"],
        1,
        "HOSTCALL k_assert",
    ));
    // The same objects as members too large to hold, read from a stream (no spill folder).
    for (name, make, code, fragment) in [
        (
            "class 3 streamed: a new offload driver object in a .tar.gz",
            "nd.o",
            3,
            "not yet linked (bitcode, new offload driver object)",
        ),
        (
            "class 3 streamed: an offload binary holding a complete code object, in a .tar.gz",
            "co.o",
            1,
            "HOSTCALL k_assert",
        ),
    ] {
        let mut r = row(
            name,
            move |d| {
                new_driver_object(d);
                if make == "co.o" {
                    copy_in(d, "sid/kernels.co", "kernels.co");
                    sid(d, &["clang-offload-packager-21", "-o", "in/pkg.bin", "--image=file=in/kernels.co,triple=amdgcn-amd-amdhsa,arch=gfx1100,kind=hip"]);
                    sid(
                        d,
                        &[
                            "llvm-objcopy-21",
                            "--remove-section",
                            ".llvm.offloading",
                            "--add-section",
                            ".llvm.offloading=in/pkg.bin",
                            "in/nd.o",
                            "in/co.o",
                        ],
                    );
                }
                let obj = std::fs::read(d.join("in").join(make)).unwrap();
                let tar = crate::hostile_scan::tar_archive(&[("lib/x.o", &obj)], true);
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                std::io::Write::write_all(&mut gz, &tar).unwrap();
                put(d, "obj.tar.gz", gz.finish().unwrap());
            },
            &[&"scan", &"--memory-budget", &"4K", &"in/obj.tar.gz"],
            code,
            fragment,
        );
        r.env = vec![("RCCLFIX_SCAN_SPILL_DIR", std::ffi::OsString::new())];
        rows.push(r);
    }
    rows
}

/// The slow table: the same cases made by the real toolchain at test time.
#[test]
fn slow_hostile_scan_runtime_toolchain_table() {
    if !slow_or_note() {
        return;
    }
    for t in [
        "llvm-objcopy-21",
        "clang++-21",
        "llvm-ar-21",
        "clang-offload-packager-21",
    ] {
        require_tool("sid", t);
    }
    check_rows(slow_rows());
}
