//! Malformed inputs, each made from a real fixture by one precise edit: every case must give a
//! clear error or an `unknown` record naming the file and a byte offset — never a panic, never
//! `clean` — and decompression must stay bounded. Plus positive CCOB v1 / zlib cases assembled
//! from the real sid payload, since the layout is documented (clang `OffloadBundler.cpp`, `CompressedOffloadBundle`).

use std::io::Write;
use std::path::{Path, PathBuf};

use rcclfix::scan::{self, ccob, ScanOptions, TargetState};

use super::{fixture, verdicts};

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(fixture(rel)).unwrap()
}

/// The `.hip_fatbin` bytes of a fixture (section contents) and their file offset.
fn fatbin(rel: &str) -> (Vec<u8>, usize) {
    let data = read(rel);
    let h = scan::elf::inspect(&data).unwrap();
    let (off, bytes) = h.fatbin.unwrap();
    let first = bytes.iter().position(|&b| b != 0).unwrap();
    (bytes[first..].to_vec(), off as usize + first)
}

fn tmp(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    (d, p)
}

/// The outcome of scanning a malformed file: the error text, or the rendered unreadable records.
fn outcome(p: &Path) -> (String, bool) {
    match scan::scan_path(p, &ScanOptions::default()) {
        Err(e) => (format!("{e:#}"), true),
        Ok(r) => {
            let procs = r.processors();
            let states = r.target_states(&if procs.is_empty() {
                vec!["gfx1100".to_string()]
            } else {
                procs
            });
            for (t, s) in &states {
                assert!(
                    !matches!(s, TargetState::Clean { .. }),
                    "{}: {t} reported clean: {r:?}",
                    p.display()
                );
            }
            let lines: Vec<String> = r
                .files
                .iter()
                .flat_map(|f| {
                    f.unreadable.iter().map(move |u| {
                        format!(
                            "{} at offset {} ({}): {}",
                            f.path, u.offset, u.class, u.reason
                        )
                    })
                })
                .collect();
            (lines.join("\n"), false)
        }
    }
}

/// `bad(name, bytes, expect)`: the scan names the file, an offset, and `expect`.
fn bad(name: &str, bytes: &[u8], expect: &str) {
    let (_d, p) = tmp(name, bytes);
    let (text, _) = outcome(&p);
    assert!(
        text.contains(&p.display().to_string()),
        "{name}: message does not name the file: {text}"
    );
    assert!(
        text.contains("offset"),
        "{name}: message names no offset: {text}"
    );
    assert!(
        text.contains(expect),
        "{name}: expected {expect:?} in: {text}"
    );
}

#[test]
fn empty_file() {
    bad("empty.so", b"", "file is empty");
}

#[test]
fn wrong_magic() {
    bad(
        "junk.bin",
        b"this is not device code at all",
        "not a recognised input",
    );
}

#[test]
fn bundle_truncated_at_every_header_boundary() {
    let (b, _) = fatbin("trixie/kernels.so");
    let parsed = scan::bundle::parse_bundle(&b).unwrap();
    let first_id_end = 32 + 24 + parsed.entries[0].id.len();
    let gfx = parsed
        .entries
        .iter()
        .find(|e| !e.id.starts_with("host"))
        .unwrap();
    let cuts = [
        (24, "not a recognised input"), // magic only: fine as a prefix, but no count
        (28, "entry count needs 8 bytes"),
        (32, "claims 2 entries"),
        (40, "claims 2 entries"),
        (56, "claims 2 entries"),
        (first_id_end, "runs past the end"),
        (gfx.offset as usize + 10, "runs past the end"),
        (
            (gfx.offset as usize + gfx.data.len()) - 1,
            "runs past the end",
        ),
    ];
    for (cut, expect) in cuts {
        let expect = if cut == 24 {
            "entry count needs 8 bytes"
        } else {
            expect
        };
        bad(&format!("bundle-cut-{cut}.bin"), &b[..cut], expect);
    }
}

#[test]
fn bundle_entry_count_huge() {
    let (mut b, _) = fatbin("trixie/kernels.so");
    b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    bad("count.bin", &b, "entries but only");
}

#[test]
fn bundle_id_len_past_end() {
    let (mut b, _) = fatbin("trixie/kernels.so");
    b[48..56].copy_from_slice(&(1u64 << 40).to_le_bytes());
    bad("idlen.bin", &b, "entry ID length");
}

#[test]
fn bundle_payload_offset_past_end() {
    let (mut b, _) = fatbin("trixie/kernels.so");
    let parsed = scan::bundle::parse_bundle(&b).unwrap();
    let rec2 = 32 + 24 + parsed.entries[0].id.len();
    b[rec2..rec2 + 8].copy_from_slice(&(u64::MAX - 4).to_le_bytes());
    bad("payload-off.bin", &b, "runs past the end");
}

/// The CCOB bytes of the sid compressed fixture.
fn ccob_bytes() -> Vec<u8> {
    let (b, _) = fatbin("sid/kernels-ccob.so");
    let h = ccob::parse_header(&b).unwrap();
    b[..h.total_size.unwrap() as usize].to_vec()
}

#[test]
fn ccob_truncated_headers() {
    let c = ccob_bytes();
    for (cut, expect) in [
        (6, "CCOB header truncated"),
        (12, "needs 24 bytes"),
        (20, "needs 24 bytes"),
        (100, "runs past the end"),
    ] {
        bad(&format!("ccob-cut-{cut}.bin"), &c[..cut], expect);
    }
}

#[test]
fn ccob_unknown_version_and_method() {
    let mut c = ccob_bytes();
    c[4] = 9;
    bad("ccob-v9.bin", &c, "unknown CCOB version 9");
    let mut c = ccob_bytes();
    c[6] = 7;
    bad("ccob-m7.bin", &c, "unknown compression method 7");
}

#[test]
fn ccob_total_size_smaller_than_header() {
    let mut c = ccob_bytes();
    c[8..12].copy_from_slice(&10u32.to_le_bytes());
    bad("ccob-total.bin", &c, "smaller than its 24-byte header");
}

/// A wrong stored hash over a good payload: the runtime loads the payload (nothing checks the
/// hash, docs/scan-json.md), so the default scan reads it; `--verify-hash` reports the mismatch.
#[test]
fn ccob_hash_mismatch() {
    let mut c = ccob_bytes();
    c[16] ^= 0xff;
    let (_d, p) = tmp("ccob-hash.bin", &c);
    let r = scan::scan_path(&p, &ScanOptions::default()).unwrap();
    assert_eq!(verdicts(&r), "gfx1100: declares k_assert k_printf");
    let settings = scan::Settings {
        verify_hash: true,
        ..Default::default()
    };
    let r = scan::scan_path_with(&p, &ScanOptions::default(), &settings).unwrap();
    let u = &r.files[0].unreadable;
    assert!(
        u.len() == 1 && u[0].class == "hash-mismatch" && u[0].reason.contains("CCOB hash mismatch"),
        "{u:?}"
    );
    assert!(r.files[0].images.is_empty());
}

/// A corrupt payload says what is wrong (corrupt stream, size mismatch, hash mismatch), never
/// zstd's own "Destination buffer is too small", wherever the damage is.
#[test]
fn ccob_corrupt_payload() {
    let c = ccob_bytes();
    let usize_at = 12;
    let claimed = u32::from_le_bytes(c[usize_at..usize_at + 4].try_into().unwrap());
    let mut cases: Vec<(String, Vec<u8>, &str)> = Vec::new();
    let mut mid = c.clone();
    let m = c.len() / 2;
    for b in &mut mid[m..m + 64] {
        *b ^= 0x5a;
    }
    // Decodes to other bytes: the scan checks the hash then, and says so.
    cases.push((
        "mid".into(),
        mid,
        "CCOB hash mismatch (the payload is corrupt",
    ));
    for at in [24usize, 29, 31, 33] {
        let mut x = c.clone();
        x[at] ^= 0xff;
        cases.push((format!("at{at}"), x, "CCOB "));
    }
    let mut short = c.clone();
    short[usize_at..usize_at + 4].copy_from_slice(&(claimed - 1000).to_le_bytes());
    cases.push(("short".into(), short, "decompressed size mismatch"));
    let mut long = c.clone();
    long[usize_at..usize_at + 4].copy_from_slice(&(claimed + 1000).to_le_bytes());
    cases.push(("long".into(), long, "CCOB decompressed size mismatch"));
    for (name, bytes, expect) in cases {
        let (_d, p) = tmp(&format!("ccob-{name}.bin"), &bytes);
        let (text, _) = outcome(&p);
        assert!(
            text.contains(expect),
            "{name}: expected {expect:?} in {text}"
        );
        assert!(
            ["payload is corrupt", "size mismatch", "hash mismatch"]
                .iter()
                .any(|w| text.contains(w)),
            "{name}: says neither corrupt nor size mismatch: {text}"
        );
        assert!(
            !text.contains("Destination buffer"),
            "{name}: zstd's words leak: {text}"
        );
    }
}

#[test]
fn ccob_decompression_bomb_refused() {
    // A v3 header claiming 1 TiB from a few KB of payload is refused before any allocation.
    let c = ccob_bytes();
    let payload = &c[24..];
    let mut v3 = b"CCOB".to_vec();
    v3.extend_from_slice(&3u16.to_le_bytes());
    v3.extend_from_slice(&1u16.to_le_bytes());
    v3.extend_from_slice(&((32 + payload.len()) as u64).to_le_bytes());
    v3.extend_from_slice(&(1u64 << 40).to_le_bytes());
    v3.extend_from_slice(&0u64.to_le_bytes());
    v3.extend_from_slice(payload);
    bad("bomb.bin", &v3, "refusing to decompress");
    // A real zstd bomb: 64 MiB of zeros compress to a few KB; the header says 1 KiB.
    let zeros = vec![0u8; 64 << 20];
    let z = zstd::bulk::compress(&zeros, 19).unwrap();
    let mut v2 = b"CCOB".to_vec();
    v2.extend_from_slice(&2u16.to_le_bytes());
    v2.extend_from_slice(&1u16.to_le_bytes());
    v2.extend_from_slice(&((24 + z.len()) as u32).to_le_bytes());
    v2.extend_from_slice(&1024u32.to_le_bytes());
    v2.extend_from_slice(&0u64.to_le_bytes());
    v2.extend_from_slice(&z);
    bad("bomb2.bin", &v2, "more than the stored size");
}

/// Positive: CCOB v1 (zstd and zlib) and v2 zlib assembled from the real decompressed bundle.
#[test]
fn ccob_v1_and_zlib_assembled_from_real_payload() {
    let c = ccob_bytes();
    let plain = ccob::decode(&c).unwrap().bundle;
    let hash = ccob::md5_low64(&plain);
    let zstd_payload = &c[24..];
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&plain).unwrap();
    let zlib_payload = z.finish().unwrap();
    let v1 = |method: u16, payload: &[u8]| {
        let mut v = b"CCOB".to_vec();
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&method.to_le_bytes());
        v.extend_from_slice(&(plain.len() as u32).to_le_bytes());
        v.extend_from_slice(&hash.to_le_bytes());
        v.extend_from_slice(payload);
        v
    };
    let mut v2z = b"CCOB".to_vec();
    v2z.extend_from_slice(&2u16.to_le_bytes());
    v2z.extend_from_slice(&0u16.to_le_bytes());
    v2z.extend_from_slice(&((24 + zlib_payload.len()) as u32).to_le_bytes());
    v2z.extend_from_slice(&(plain.len() as u32).to_le_bytes());
    v2z.extend_from_slice(&hash.to_le_bytes());
    v2z.extend_from_slice(&zlib_payload);
    for (name, bytes, label) in [
        ("v1-zstd.ccob", v1(1, zstd_payload), "ccob-v1-zstd"),
        ("v1-zlib.ccob", v1(0, &zlib_payload), "ccob-v1-zlib"),
        ("v2-zlib.ccob", v2z, "ccob-v2-zlib"),
    ] {
        let mut bytes = bytes;
        // A second copy 4096-aligned after the first: the v1 walk must find its end by itself.
        let first = bytes.len();
        bytes.resize(first.div_ceil(4096) * 4096, 0);
        bytes.extend_from_within(..first);
        let (_d, p) = tmp(name, &bytes);
        let r = scan::scan_path(&p, &ScanOptions::default()).unwrap();
        assert_eq!(
            verdicts(&r),
            "gfx1100: declares k_assert k_assert k_printf k_printf",
            "{name}"
        );
        assert_eq!(r.files[0].images.len(), 2, "{name}");
        assert!(
            r.files[0].images.iter().all(|i| i.container == label),
            "{name}"
        );
        assert!(
            r.files[0].unreadable.is_empty(),
            "{name}: {:?}",
            r.files[0].unreadable
        );
    }
}

/// Edit the code object inside the trixie plain bundle, then scan the edited host library.
fn edit_code_object(edit: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut data = read("trixie/kernels.so");
    let (b, off) = fatbin("trixie/kernels.so");
    let parsed = scan::bundle::parse_bundle(&b).unwrap();
    let e = parsed
        .entries
        .iter()
        .find(|e| !e.id.starts_with("host"))
        .unwrap();
    let start = off + e.offset as usize;
    let len = e.data.len();
    edit(&mut data[start..start + len]);
    data
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).unwrap()
}

#[test]
fn code_object_wrong_machine() {
    bad(
        "machine.so",
        &edit_code_object(|co| co[18] = 0x3e),
        "not an AMDGPU code object",
    );
}

#[test]
fn code_object_pal_osabi() {
    bad("pal.so", &edit_code_object(|co| co[7] = 65), "PAL");
}

#[test]
fn code_object_unknown_mach() {
    bad(
        "mach.so",
        &edit_code_object(|co| co[48] = 0xfe),
        "target not known to this rcclfix (EF_AMDGPU_MACH 0xfe)",
    );
}

#[test]
fn code_object_section_table_past_end() {
    bad(
        "shoff.so",
        &edit_code_object(|co| co[0x28..0x30].copy_from_slice(&(1u64 << 40).to_le_bytes())),
        "section table",
    );
}

#[test]
fn code_object_no_metadata_note() {
    // Rename the note owner AMDGPU → AMDGPX: the note is no longer a metadata note.
    bad(
        "nonote.so",
        &edit_code_object(|co| co[find(co, b"AMDGPU\0") + 5] = b'X'),
        "no AMDGPU metadata note",
    );
}

#[test]
fn metadata_msgpack_wrong_shape() {
    // `amdhsa.kernels` followed by nil instead of an array.
    bad(
        "shape.so",
        &edit_code_object(|co| {
            let k = find(co, b"amdhsa.kernels") + "amdhsa.kernels".len();
            co[k] = 0xc0;
        }),
        "metadata",
    );
    // An argument map without `.value_kind`.
    bad(
        "novk.so",
        &edit_code_object(|co| co[find(co, b".value_kind") + 10] = b'X'),
        "has no string .value_kind",
    );
    // A kernel without `.name`.
    bad(
        "noname.so",
        &edit_code_object(|co| co[find(co, b"\xa5.name") + 5] = b'X'),
        "has no string .name",
    );
}

#[test]
fn fatbin_unknown_data() {
    let mut data = read("trixie/kernels.so");
    let (_, off) = fatbin("trixie/kernels.so");
    data[off] = b'X';
    bad("nomagic.so", &data, "unknown data");
}

#[test]
fn fatbin_nobits_is_kpack_unknown() {
    let mut data = read("trixie/kernels.so");
    // Find the .hip_fatbin section header and make it NOBITS.
    use object::read::elf::FileHeader;
    let hdr = object::elf::FileHeader64::<object::LittleEndian>::parse(&data[..]).unwrap();
    let e = object::LittleEndian;
    let shoff = hdr.e_shoff(e) as usize;
    let secs = hdr.sections(e, &data[..]).unwrap();
    let idx = secs
        .iter()
        .position(|s| secs.section_name(e, s).unwrap() == b".hip_fatbin")
        .unwrap();
    let at = shoff + idx * 64 + 4;
    data[at..at + 4].copy_from_slice(&object::elf::SHT_NOBITS.to_le_bytes());
    bad("nobits.so", &data, "device code externalized");
}

#[test]
fn hipk_wrapper_is_kpack_unknown() {
    let data = read("trixie/kernels.so");
    let h = scan::elf::inspect(&data).unwrap();
    let (woff, magic) = h.wrappers[0];
    assert_eq!(magic, scan::elf::HIPF);
    let mut data = data.clone();
    data[woff as usize..woff as usize + 4].copy_from_slice(&scan::elf::HIPK.to_le_bytes());
    bad("hipk.so", &data, "kpack");
}

#[test]
fn truncated_host_elf() {
    let data = read("trixie/kernels.so");
    bad("short.so", &data[..100], "section table");
}

#[test]
fn ar_member_past_end() {
    let mut ar = b"!<arch>\n".to_vec();
    ar.extend_from_slice(
        format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            "data.tar/", 0, 0, 0, 644, 999_999
        )
        .as_bytes(),
    );
    ar.extend_from_slice(b"short");
    bad("short.deb", &ar, "runs past the end of the archive");
}

#[test]
fn tar_member_truncated() {
    let lib = read("sid/kernels-ccob.so");
    let mut t = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(lib.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    t.append_data(&mut h, "lib/libk.so", &lib[..]).unwrap();
    let bytes = t.into_inner().unwrap();
    let cut = 512 + lib.len() / 2;
    bad("cut.tar", &bytes[..cut], "tar");
}

#[test]
fn directory_with_unreadable_entries() {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("sid/kernels-ccob.so"), d.path().join("libk.so")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/libgone.so", d.path().join("libgone.so")).unwrap();
    let fifo = d.path().join("libpipe.so.1");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(d.path().join("README"), "text").unwrap();
    // Unreadable entries that cannot be device code by their name are not reported.
    std::os::unix::fs::symlink("/nonexistent/site.py", d.path().join("site.py")).unwrap();
    let st = std::process::Command::new("mkfifo")
        .arg(d.path().join("control"))
        .status()
        .unwrap();
    assert!(st.success());
    let r = scan::scan_path(d.path(), &ScanOptions::default()).unwrap();
    let paths: Vec<_> = r
        .files
        .iter()
        .map(|f| {
            (
                f.path.rsplit('/').next().unwrap().to_owned(),
                f.kind.clone(),
            )
        })
        .collect();
    assert_eq!(
        paths,
        [
            ("libgone.so".to_string(), "unreadable".to_string()),
            ("libk.so".into(), "host-elf".into()),
            ("libpipe.so.1".into(), "unreadable".into())
        ]
    );
    assert!(r.files[0].unreadable[0].reason.contains("dangling symlink"));
    assert!(r.files[2].unreadable[0]
        .reason
        .contains("not a regular file"));
    // The readable library still declares; unreadable entries make nothing clean.
    assert!(matches!(
        r.target_states(&["gfx1100".into()])["gfx1100"],
        TargetState::Declares { .. }
    ));
}

/// Archives: a tar.zst and a zip holding a fixture are scanned in memory, members named `a!m`.
#[test]
fn archives_tar_zstd_and_zip() {
    let lib = read("sid/kernels-ccob.so");
    let mut t = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(lib.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    t.append_data(&mut h, "./usr/lib/libk.so", &lib[..])
        .unwrap();
    let tar_bytes = t.into_inner().unwrap();
    let zst = zstd::bulk::compress(&tar_bytes, 3).unwrap();
    let (_d, p) = tmp("k.tar.zst", &zst);
    let r = scan::scan_path(&p, &ScanOptions::default()).unwrap();
    assert!(
        r.files[0].path.ends_with("k.tar.zst!usr/lib/libk.so"),
        "{}",
        r.files[0].path
    );
    assert_eq!(verdicts(&r), "gfx1100: declares k_assert k_printf");

    let mut zw = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, method) in [
        ("pkg/stored.so", zip::CompressionMethod::Stored),
        ("pkg/deflated.so", zip::CompressionMethod::Deflated),
    ] {
        zw.start_file(
            name,
            zip::write::SimpleFileOptions::default().compression_method(method),
        )
        .unwrap();
        zw.write_all(&lib).unwrap();
    }
    let z = zw.finish().unwrap().into_inner();
    let (_d2, p2) = tmp("k.whl", &z);
    let r = scan::scan_path(&p2, &ScanOptions::default()).unwrap();
    assert_eq!(r.files.len(), 2);
    assert_eq!(r.files[0].images, r.files[1].images);
}

/// Legacy code object v2: the real trixie code object rewritten in place to carry a YAML
/// `NT_AMD_HSA_METADATA` note (owner `AMD`, type 10) and `EI_ABIVERSION` 0. The note keeps its
/// size: the shorter owner name gives its 4 bytes to the descriptor, which is padded with spaces.
#[test]
fn code_object_v2_yaml_note() {
    let yaml = "---\nVersion: [ 1, 0 ]\nKernels:\n  - Name:            k_v2\n    SymbolName:      'k_v2@kd'\n    Args:\n      - Size:            8\n        Align:           8\n        ValueKind:       GlobalBuffer\n      - Size:            8\n        Align:           8\n        ValueKind:       HiddenGlobalOffsetX\n      - Size:            8\n        Align:           8\n        ValueKind:       HiddenHostcallBuffer\n    CodeProps:\n      KernargSegmentSize: 24\n  - Name:            k_v2_plain\n    SymbolName:      'k_v2_plain@kd'\n    Args:\n      - Size:            8\n        Align:           8\n        ValueKind:       HiddenNone\n...\n";
    let data = edit_code_object(|co| {
        co[8] = 0; // EI_ABIVERSION 0: code object v2
        let name = find(co, b"AMDGPU\0");
        let hdr = name - 12;
        let descsz = u32::from_le_bytes(co[hdr + 4..hdr + 8].try_into().unwrap()) as usize;
        let padded = descsz.div_ceil(4) * 4;
        let room = padded + 4;
        assert!(yaml.len() <= room);
        co[hdr..hdr + 4].copy_from_slice(&4u32.to_le_bytes());
        co[hdr + 4..hdr + 8].copy_from_slice(&(room as u32).to_le_bytes());
        co[hdr + 8..hdr + 12].copy_from_slice(&10u32.to_le_bytes());
        co[name..name + 4].copy_from_slice(b"AMD\0");
        let desc = &mut co[name + 4..name + 4 + room];
        desc.fill(b' ');
        desc[..yaml.len()].copy_from_slice(yaml.as_bytes());
    });
    let (_d, p) = tmp("v2.so", &data);
    let r = scan::scan_path(&p, &ScanOptions::default()).unwrap();
    assert!(
        r.files[0].unreadable.is_empty(),
        "{:?}",
        r.files[0].unreadable
    );
    let img = &r.files[0].images[0];
    assert_eq!(
        (img.code_object_version, img.metadata_version.as_slice()),
        (2, &[1u64, 0][..])
    );
    assert_eq!(verdicts(&r), "gfx1100: declares k_v2");
    let k = &img.kernels[0];
    let kinds: Vec<_> = k
        .hidden_args
        .iter()
        .map(|a| (a.value_kind.as_ref(), a.offset))
        .collect();
    assert_eq!(
        kinds,
        [
            ("hidden_global_offset_x", 8),
            ("hidden_hostcall_buffer", 16)
        ]
    );
    assert!(!img.kernels[1].declares_hostcall);
}

/// `rcclfix scan FILE` under a 3 GB address-space limit (`ulimit -v`): returns (exit code, output).
fn scan_under_memory_limit(p: &Path) -> (Option<i32>, String) {
    let o = crate::support::rcclfix_under_ulimit(3000000)
        .arg("scan")
        .arg(p)
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), all)
}

#[test]
fn zip_member_lying_about_its_size_is_unknown_not_reserved() {
    let lib = read("sid/kernels.so");
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    w.start_file("pkg/lib/librccl.so", o).unwrap();
    w.write_all(&lib).unwrap();
    let mut d = w.finish().unwrap().into_inner();
    // Central and local headers both claim 4 GiB - 2 uncompressed bytes.
    let c = find(&d, b"PK\x01\x02");
    d[c + 24..c + 28].copy_from_slice(&0xFFFF_FFFEu32.to_le_bytes());
    let l = find(&d, b"PK\x03\x04");
    d[l + 22..l + 26].copy_from_slice(&0xFFFF_FFFEu32.to_le_bytes());
    let (_t, p) = tmp("liar.whl", &d);
    let (code, out) = scan_under_memory_limit(&p);
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains("liar.whl!pkg/lib/librccl.so")
            && out.contains("zip member at byte 0 claims 4294967294 bytes but holds"),
        "{out}"
    );
}

#[test]
fn tar_member_claiming_15_gib_is_unknown_not_reserved() {
    let lib = read("sid/kernels.so");
    let mut h = tar::Header::new_gnu();
    h.set_path("usr/lib/big.so").unwrap();
    h.set_size(15 << 30);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    let mut d = h.as_bytes().to_vec();
    d.extend_from_slice(&lib);
    d.resize(d.len().div_ceil(512) * 512 + 1024, 0);
    let (_t, p) = tmp("liar.tar", &d);
    let (code, out) = scan_under_memory_limit(&p);
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains("liar.tar!usr/lib/big.so")
            && out.contains(
                "tar member at byte 0 claims 16106127360 bytes at 512, past the end of the archive"
            ),
        "{out}"
    );
}
