//! The scanner against an independent reader (issue 40): `tests/fixtures/comgr/comgr_kernels.cpp`,
//! built against the `libamd_comgr` of the debian-sid toolchain by `cargo xtask comgr-reader`,
//! reads each code object's metadata as the runtime does (`amd_comgr_get_data_metadata`) and
//! says which kernels declare `hidden_hostcall_buffer`. `rcclfix scan --json=full` may say
//! unknown where comgr reads; it must never say clean where comgr says a kernel declares, and
//! where both read, they name the same declaring kernels.
//!
//! Inputs: every bare code object fixture, and the code objects `clang-offload-bundler-21`
//! unbundles from every bundle of each sid library fixture (plain bundles) (the oracle's own tools), each as
//! it is and mutated (section headers gone, the note section or the `PT_NOTE` segment pointed at
//! a copy that declares nothing); and the sid libraries themselves (plain and compressed offload
//! bundles, CCOB) as they are, with `.hip_fatbin` renamed, the section headers gone, the
//! `.hip_fatbin` header on a clean copy, or a clean `.hip_fatbin` added by `llvm-objcopy-21`,
//! compared with comgr on the code objects their wrapper points at; and a library built from
//! `tests/fixtures/src/note-decoy.hip` whose embedded code object has its note section or its
//! `PT_NOTE` segment pointed (one field) at a copy of its note that declares nothing, which scan
//! must call unknown (exit 3). Every case again as the one
//! member of each archive scan reads (`.tar`, stored `.zip`, `ar` `.a`, `.tar.gz`, `.tar.xz`,
//! deflated `.whl`, `.deb`), the compressed ones also as members larger than the memory budget
//! read from a stream.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::hostile_scan::{ar_archive, deb_with_data, tar_archive, xz};
use crate::hostile_scan_runtime::{headerless, note_views_disagree, renamed, shdrs};
use crate::hostile_scan_streamed::decoy;
use crate::support::{in_toolchain_ok, rcclfix, repo, slow_or_note};

/// What comgr says per file: `None` when it does not read the metadata, else the declaring
/// kernels.
fn comgr(work: &Path, files: &[String]) -> BTreeMap<String, Option<BTreeSet<String>>> {
    let mut argv = vec!["./comgr-kernels"];
    argv.extend(files.iter().map(String::as_str));
    let out = in_toolchain_ok("sid", work, &argv);
    let mut m = BTreeMap::new();
    let mut cur = String::new();
    for l in out.lines() {
        let mut w = l.splitn(3, ' ');
        match (w.next(), w.next(), w.next()) {
            (Some("file"), Some(f), _) => {
                cur = f.to_owned();
                m.insert(cur.clone(), Some(BTreeSet::new()));
            }
            (Some("error"), _, _) => {
                m.insert(cur.clone(), None);
            }
            (Some("kernel"), Some(k), Some(d)) => {
                if d == "1" {
                    if let Some(Some(s)) = m.get_mut(&cur) {
                        s.insert(k.to_owned());
                    }
                }
            }
            _ => panic!("comgr-kernels said {l:?}"),
        }
    }
    m
}

/// `bytes` as the one member (`usr/lib/libk.so`) of every archive scan reads: file extension and
/// bytes. The compressed ones come twice: `EXT` read as usual, `EXT, streamed` read with a
/// 4 KiB memory budget and no spill folder.
fn archives(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    use std::io::Write as _;
    let tar = tar_archive(&[("usr/lib/libk.so", bytes)], true);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    let zip = |m: zip::CompressionMethod| {
        let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        z.start_file(
            "pkg/libk.so",
            zip::write::SimpleFileOptions::default().compression_method(m),
        )
        .unwrap();
        z.write_all(bytes).unwrap();
        z.finish().unwrap().into_inner()
    };
    let compressed = [
        ("tar.gz", gz.finish().unwrap()),
        ("tar.xz", xz(&tar)),
        ("whl", zip(zip::CompressionMethod::Deflated)),
        ("deb", deb_with_data(&xz(&tar))),
    ];
    let mut out = vec![
        ("tar".to_owned(), tar.clone()),
        ("zip".to_owned(), zip(zip::CompressionMethod::Stored)),
        ("a".to_owned(), ar_archive(&[("libk.so", bytes)])),
    ];
    for (e, b) in compressed {
        out.push((e.to_owned(), b.clone()));
        out.push((format!("{e}, streamed"), b));
    }
    out
}

/// `rcclfix scan --json=full FILE` (`streamed`: with a 4 KiB memory budget and no spill folder):
/// its exit code and the declaring kernels.
fn scan(file: &Path, streamed: bool) -> (i32, BTreeSet<String>) {
    let mut c = rcclfix();
    c.args(["scan", "--json=full"]).arg(file);
    if streamed {
        c.env("RCCLFIX_SCAN_MEMORY_BUDGET", "4K")
            .env("RCCLFIX_SCAN_SPILL_DIR", "");
    }
    let o = c.output().unwrap();
    let code = o.status.code().unwrap_or(-1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let mut declaring = BTreeSet::new();
    for f in v["files"].as_array().into_iter().flatten() {
        for img in f["images"].as_array().into_iter().flatten() {
            for k in img["kernels"].as_array().into_iter().flatten() {
                if k["declares_hostcall"] == true {
                    declaring.insert(k["name"].as_str().unwrap_or("").to_owned());
                }
            }
        }
    }
    (code, declaring)
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

/// The one AMDGPU code object in the plain offload bundle of `lib`'s `.hip_fatbin`: its offset
/// in `lib` and its size (clang `OffloadBundler.cpp`: the magic, the entry count, then per entry
/// offset, size, target ID length and target ID; offsets from the bundle's start).
fn embedded_code_object(lib: &[u8]) -> (usize, usize) {
    let fb = shdrs(lib)
        .into_iter()
        .find(|h| h.name == ".hip_fatbin")
        .expect("a .hip_fatbin")
        .offset as usize;
    assert!(
        lib[fb..].starts_with(b"__CLANG_OFFLOAD_BUNDLE__"),
        "a plain bundle"
    );
    let mut at = fb + 32;
    for _ in 0..u64_at(lib, fb + 24) {
        let (off, size, len) = (
            u64_at(lib, at) as usize,
            u64_at(lib, at + 8) as usize,
            u64_at(lib, at + 16) as usize,
        );
        let id = &lib[at + 24..at + 24 + len];
        at += 24 + len;
        if id.windows(6).any(|w| w == b"amdgcn") {
            return (fb + off, size);
        }
    }
    panic!("no amdgcn entry in the bundle");
}

/// The metadata note section of the code object `co`: (its section header's position, its offset,
/// its bytes).
fn note_section(co: &[u8]) -> (usize, usize, Vec<u8>) {
    let h = shdrs(co)
        .into_iter()
        .find(|h| h.ty == 7)
        .expect("a note section");
    let (off, size) = (h.offset as usize, h.size as usize);
    (h.at, off, co[off..off + size].to_vec())
}

/// `tests/fixtures/src/note-decoy.hip` built twice with the sid toolchain's hipcc in `w`: first
/// to learn its code object's metadata note, then with `decoy.inc` filling the device array with
/// that note, `hidden_hostcall_buffer` renamed (the note itself does not change: the array is
/// no kernel's metadata). Then one field of the embedded code object is edited in the library,
/// the note section's `sh_offset` or the `PT_NOTE` segment's `p_offset`, to point at the copy.
/// Returns the two libraries and their code objects cut out for comgr: (kind, library file, code
/// object file), all written in `w`.
fn note_decoy_libraries(w: &Path) -> Vec<(&'static str, String, String)> {
    std::fs::copy(
        repo().join("tests/fixtures/src/note-decoy.hip"),
        w.join("note-decoy.hip"),
    )
    .unwrap();
    let build = |out: &str| {
        in_toolchain_ok(
            "sid",
            w,
            &[
                "hipcc",
                "-x",
                "hip",
                "--offload-arch=gfx1100",
                "-O3",
                "-fPIC",
                "-shared",
                "-o",
                out,
                "note-decoy.hip",
            ],
        );
        std::fs::read(w.join(out)).unwrap()
    };
    std::fs::write(w.join("decoy.inc"), "1\n").unwrap();
    let first = build("nd-1.so");
    let (s, n) = embedded_code_object(&first);
    let note = note_section(&first[s..s + n]).2;
    let from: &[u8] = b"hidden_hostcall_buffer";
    assert!(
        note.windows(from.len()).any(|x| x == from),
        "k_printf declares"
    );
    let mut clean = note.clone();
    while let Some(i) = clean.windows(from.len()).position(|x| x == from) {
        clean[i..i + from.len()].copy_from_slice(b"hidden_global_offset_x");
    }
    let inc: Vec<String> = clean.iter().map(u8::to_string).collect();
    std::fs::write(w.join("decoy.inc"), inc.join(",") + "\n").unwrap();
    let lib = build("nd-2.so");
    let (s, n) = embedded_code_object(&lib);
    let co = &lib[s..s + n];
    let (sh, off, again) = note_section(co);
    assert_eq!(again, note, "the decoy array changed the note");
    let decoy = co
        .windows(clean.len())
        .position(|x| x == clean.as_slice())
        .expect("the decoy note in the code object") as u64;
    assert!(decoy.is_multiple_of(4), "a note is 4-aligned");
    let (phoff, phnum) = (
        u64_at(co, 0x20) as usize,
        u16::from_le_bytes([co[0x38], co[0x39]]) as usize,
    );
    let ph = (0..phnum)
        .map(|i| phoff + 56 * i)
        .find(|&p| co[p..p + 4] == 4u32.to_le_bytes() && u64_at(co, p + 8) == off as u64)
        .expect("the PT_NOTE that holds the note section");
    let mut out = vec![];
    for (kind, field, tag) in [
        (
            "library, note section clean, PT_NOTE declaring (one field edited)",
            sh + 24,
            "section",
        ),
        (
            "library, PT_NOTE clean, note section declaring (one field edited)",
            ph + 8,
            "segment",
        ),
    ] {
        let mut d = lib.clone();
        d[s + field..s + field + 8].copy_from_slice(&decoy.to_le_bytes());
        let (l, c) = (format!("nd-{tag}.so"), format!("nd-{tag}.co"));
        std::fs::write(w.join(&l), &d).unwrap();
        std::fs::write(w.join(&c), &d[s..s + n]).unwrap();
        out.push((kind, l, c));
    }
    out
}

#[test]
fn slow_scan_never_says_clean_where_comgr_says_declares() {
    if !slow_or_note() {
        return;
    }
    let reader = repo().join("target/comgr-reader/comgr-kernels");
    assert!(
        reader.exists(),
        "RCCLFIX_SLOW_TESTS=1 but {} is missing\nhelp: run `cargo xtask comgr-reader` (cargo xtask test builds it)",
        reader.display()
    );
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    std::fs::copy(&reader, w.join("comgr-kernels")).unwrap();
    let fixtures = repo().join("tests/fixtures");
    // The code objects: bare fixtures, then unbundled from each sid library.
    let mut cos: Vec<(String, String)> = Vec::new(); // (file in w, the library it came from)
    for suite in ["trixie", "sid", "rocm7.2"] {
        for f in ["kernels.co", "indirect-rel.co"] {
            let p = fixtures.join(suite).join(f);
            if p.exists() {
                let n = format!("{suite}-{f}");
                std::fs::copy(&p, w.join(&n)).unwrap();
                cos.push((n, String::new()));
            }
        }
    }
    let mut libs: Vec<String> = Vec::new();
    for e in std::fs::read_dir(fixtures.join("sid")).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n.ends_with(".so") {
            std::fs::copy(&p, w.join(format!("lib-{n}"))).unwrap();
            libs.push(format!("lib-{n}"));
        }
    }
    libs.sort();
    in_toolchain_ok(
        "sid",
        w,
        &[
            "sh",
            "-c",
            "for f in lib-*.so; do llvm-objcopy-21 --dump-section .hip_fatbin=$f.fb $f /tmp/copy; done",
        ],
    );
    in_toolchain_ok(
        "sid",
        w,
        &[
            "sh",
            "-c",
            "for f in lib-*.so; do llvm-objcopy-21 --add-section .hip_fatbin=lib-implicit.so.fb $f $f.dup; done",
        ],
    );
    let clean = std::fs::read(w.join("lib-implicit.so")).unwrap();
    // Split each fat binary at its 4096-aligned bundle magics (the oracle's own walk), then
    // unbundle every AMDGPU entry of every bundle.
    for lib in &libs {
        let fb = std::fs::read(w.join(format!("{lib}.fb"))).unwrap();
        let starts: Vec<usize> = (0..fb.len())
            .step_by(4096)
            .filter(|&o| {
                fb[o..].starts_with(b"__CLANG_OFFLOAD_BUNDLE__") || fb[o..].starts_with(b"CCOB")
            })
            .collect();
        for (i, &s) in starts.iter().enumerate() {
            let mut e = starts.get(i + 1).copied().unwrap_or(fb.len());
            // A CCOB v2 or v3 ends at its total size (clang `OffloadBundler.cpp`, the
            // compressed bundle header); the bundler does not read one with padding after it.
            let version = u16::from_le_bytes([fb[s + 4], fb[s + 5]]);
            if fb[s..].starts_with(b"CCOB") && (2..=3).contains(&version) {
                let total = if version == 2 {
                    u32::from_le_bytes(fb[s + 8..s + 12].try_into().unwrap()) as usize
                } else {
                    u64::from_le_bytes(fb[s + 8..s + 16].try_into().unwrap()) as usize
                };
                e = e.min(s + total);
            }
            std::fs::write(w.join(format!("{lib}.b{i}")), &fb[s..e]).unwrap();
        }
    }
    let script = "for b in lib-*.so.b*; do for id in $(clang-offload-bundler-21 --list --type=o --input=$b | grep amdgcn); do clang-offload-bundler-21 --unbundle --type=o --input=$b --targets=$id --output=$b.$(echo $id | tr ':' '_').co; done; done";
    in_toolchain_ok("sid", w, &["sh", "-c", script]);
    for e in std::fs::read_dir(w).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        if n.starts_with("lib-") && n.ends_with(".co") {
            let lib = n.split(".so.").next().unwrap().to_owned() + ".so";
            cos.push((n, lib));
        }
    }
    cos.sort();
    // The mutants, by kind: (kind, file, the code objects comgr reads for it).
    let mut cases: Vec<(String, String, Vec<String>)> = Vec::new();
    for (co, _) in &cos {
        let bytes = std::fs::read(w.join(co)).unwrap();
        cases.push(("code object as it is".into(), co.clone(), vec![co.clone()]));
        let mut put = |kind: &'static str, b: Vec<u8>| {
            let n = format!("{co}.{}", cases.len());
            std::fs::write(w.join(&n), b).unwrap();
            cases.push((kind.into(), n.clone(), vec![n]));
        };
        put("code object, section headers gone", headerless(&bytes));
        let segments = u16::from_le_bytes([bytes[0x38], bytes[0x39]]) > 0;
        if segments && bytes.windows(22).any(|x| x == b"hidden_hostcall_buffer") {
            put(
                "code object, note section clean, PT_NOTE declaring",
                note_views_disagree(&bytes, true),
            );
            put(
                "code object, PT_NOTE clean, note section declaring",
                note_views_disagree(&bytes, false),
            );
        }
    }
    for lib in &libs {
        let bytes = std::fs::read(w.join(lib)).unwrap();
        let mine: Vec<String> = cos
            .iter()
            .filter(|(_, l)| l == lib)
            .map(|(c, _)| c.clone())
            .collect();
        if mine.is_empty() {
            continue;
        }
        let dup = std::fs::read(w.join(format!("{lib}.dup"))).unwrap();
        for (kind, b) in [
            ("library as it is", bytes.clone()),
            ("library, .hip_fatbin renamed", renamed(&bytes)),
            ("library, section headers gone", headerless(&bytes)),
            (
                "library, .hip_fatbin header on a clean copy",
                decoy(&bytes, &clean),
            ),
            ("library, a clean .hip_fatbin added (llvm-objcopy)", dup),
        ] {
            let n = format!("{lib}.{}", cases.len());
            std::fs::write(w.join(&n), b).unwrap();
            cases.push((kind.into(), n, mine.clone()));
        }
    }
    // A library whose embedded code object's note section and PT_NOTE disagree: scan must say
    // unknown (comgr reads the segment, other readers the section).
    for (kind, lib, co) in note_decoy_libraries(w) {
        cases.push((kind.into(), lib, vec![co]));
    }
    // Every case again as the one member of each archive scan reads, and, compressed, as a
    // member larger than the memory budget read from a stream (kind `…, streamed`).
    let direct = cases.len();
    for i in 0..direct {
        let (kind, file, read) = cases[i].clone();
        let bytes = std::fs::read(w.join(&file)).unwrap();
        for (ext, b) in archives(&bytes) {
            let n = match ext.strip_suffix(", streamed") {
                Some(e) => format!("{file}.s.{e}"),
                None => format!("{file}.{ext}"),
            };
            std::fs::write(w.join(&n), b).unwrap();
            cases.push((format!("{kind}, in .{ext}"), n, read.clone()));
        }
    }
    let all: BTreeSet<String> = cases.iter().flat_map(|c| c.2.clone()).collect();
    let truth = comgr(w, &all.into_iter().collect::<Vec<_>>());
    // Per kind: cases, comgr declares, scan declares, scan unknown, false cleans, disagreements.
    let mut counts: BTreeMap<String, [usize; 6]> = BTreeMap::new();
    let mut bad = Vec::new();
    for (kind, file, read) in &cases {
        let mut declares = BTreeSet::new();
        let mut unread = false;
        for r in read {
            match &truth[r] {
                Some(s) => declares.extend(s.iter().cloned()),
                None => unread = true,
            }
        }
        let streamed = kind.ends_with(", streamed");
        let (code, ours) = scan(&w.join(file), streamed);
        let c = counts.entry(kind.clone()).or_default();
        c[0] += 1;
        c[1] += usize::from(!declares.is_empty());
        c[2] += usize::from(code == 1);
        c[3] += usize::from(code == 3);
        if !declares.is_empty() && code == 0 {
            c[4] += 1;
            bad.push(format!(
                "{kind}: {file}: scan clean, comgr says {declares:?} declare"
            ));
        }
        if kind.contains("(one field edited)") && code != 3 {
            bad.push(format!(
                "{kind}: {file}: exit {code}, expected unknown (3); comgr says {declares:?} declare"
            ));
        }
        if !unread && code == 1 && ours != declares {
            c[5] += 1;
            bad.push(format!(
                "{kind}: {file}: scan names {ours:?}, comgr {declares:?}"
            ));
        }
    }
    eprintln!(
        "kind: [cases, comgr declares, scan declares, scan unknown, false cleans, disagreements]"
    );
    let mut total = [0usize; 6];
    for (k, c) in &counts {
        eprintln!("{k}: {c:?}");
        for (t, v) in total.iter_mut().zip(c) {
            *t += v;
        }
    }
    eprintln!("all {} kinds: {total:?}", counts.len());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
