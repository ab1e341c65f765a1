//! The bytes of both wheels rcclfix writes, pinned: the overlay wheel
//! (`rcclfix::package::wheel::write_wheel`) and the wheel that carries rcclfix itself
//! (`rcclfix::package::tool_wheel::write`), each from fixed inputs, so a change to either
//! wheel's bytes shows here. Both go through one RECORD and zip writer
//! (`src/package/wheel_writer.rs`); the pins were taken from the two separate writers before
//! that, and hold after.
//!
//! The member list (name, mode, compression, CRC-32, size) and RECORD pin the content; the
//! sha256 of the whole file pins the zip framing and the deflate stream as well, which an update
//! of the zip or deflate crates in `Cargo.lock` may change while the content stays the same. A
//! change of the crate's version or description changes the `WHEEL` or `METADATA` member (and
//! so every pin of that wheel): update the pins together with the version.

use std::io::{Cursor, Read};

use sha2::Digest as _;

/// One zip member as the central directory describes it, and RECORD's text.
fn members(bytes: &[u8]) -> (Vec<String>, String) {
    let mut z = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
    let mut list = vec![];
    let mut record = None;
    for i in 0..z.len() {
        let mut f = z.by_index(i).unwrap();
        list.push(format!(
            "{} {:o} {:?} {:08x} {}",
            f.name(),
            f.unix_mode().unwrap(),
            f.compression(),
            f.crc32(),
            f.size()
        ));
        if f.name().ends_with(".dist-info/RECORD") {
            let mut s = String::new();
            f.read_to_string(&mut s).unwrap();
            record = Some(s);
        }
    }
    (list, record.expect("the wheel has a RECORD"))
}

fn sha256_hex(b: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(b))
}

/// A file of `len` bytes of a fixed pattern, compressible but not trivially so.
fn pattern_file(dir: &std::path::Path, name: &str, len: usize) -> std::path::PathBuf {
    let bytes: Vec<u8> = (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 & 0x3f)
        .collect();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn the_overlay_wheel_bytes_are_pinned() {
    let t = tempfile::tempdir().unwrap();
    let spec = rcclfix::package::wheel::WheelSpec {
        distribution: "rcclfix_rccl_gfx1100".into(),
        version: "2.21.5+rcclfix1".into(),
        platform: "manylinux_2_28_x86_64".into(),
        summary: "RCCL 2.21.5 without hidden_hostcall_buffer (gfx1100)".into(),
        description: "A fixed librccl.\n\nSecond paragraph.".into(),
        library: pattern_file(t.path(), "librccl.so.1", 300_000),
        manifest_json: br#"{"recipe":"2.21.5-debian-sid"}"#.to_vec(),
        scan_json: br#"{"verdict":"clean"}"#.to_vec(),
        mtime: 1_700_000_000,
    };
    let bytes = rcclfix::package::wheel::write_wheel(&spec, Cursor::new(Vec::new()))
        .unwrap()
        .into_inner();
    let (list, record) = members(&bytes);
    assert_eq!(list, OVERLAY_MEMBERS, "{list:#?}");
    assert_eq!(record, OVERLAY_RECORD);
    assert_eq!(sha256_hex(&bytes), OVERLAY_SHA256);
}

#[test]
fn the_tool_wheel_bytes_are_pinned() {
    let t = tempfile::tempdir().unwrap();
    let binary = pattern_file(t.path(), "rcclfix", 200_000);
    let w = rcclfix::package::tool_wheel::ToolWheel {
        version: "0.1.0".into(),
        platform: "manylinux_2_34_x86_64".into(),
        binary,
        binary_bytes: 200_000,
        mtime: 1_700_000_000,
        // Without the man pages and completions `self-wheel` adds: the wheel as it was before
        // it carried them.
        data: vec![],
    };
    let bytes = rcclfix::package::tool_wheel::write(&w, Cursor::new(Vec::new()))
        .unwrap()
        .into_inner();
    let (list, record) = members(&bytes);
    assert_eq!(list, TOOL_MEMBERS, "{list:#?}");
    assert_eq!(record, TOOL_RECORD);
    assert_eq!(sha256_hex(&bytes), TOOL_SHA256);
}

const OVERLAY_MEMBERS: &[&str] = &[
    "rcclfix_rccl.pth 100644 Deflated 6dc17a37 20",
    "rcclfix_rccl/__init__.py 100644 Deflated ac7a3fdd 1831",
    "rcclfix_rccl/lib/librccl.so.1 100755 Deflated 145a2c1c 300000",
    "rcclfix_rccl/manifest.json 100644 Deflated b8aafc9d 30",
    "rcclfix_rccl/scan.json 100644 Deflated e44a8d1f 19",
    "rcclfix_rccl_gfx1100-2.21.5+rcclfix1.dist-info/METADATA 100644 Deflated fcc2b2c4 377",
    "rcclfix_rccl_gfx1100-2.21.5+rcclfix1.dist-info/WHEEL 100644 Deflated 06f9863c 103",
    "rcclfix_rccl_gfx1100-2.21.5+rcclfix1.dist-info/top_level.txt 100644 Deflated 83f2112c 13",
    "rcclfix_rccl_gfx1100-2.21.5+rcclfix1.dist-info/RECORD 100644 Deflated 5188c329 788",
];
const OVERLAY_RECORD: &str = "\
rcclfix_rccl.pth,sha256=Cmblx1VmLmb33VY6FkLCDS52WMjfnJEwPQNJE4JZ6uY,20
rcclfix_rccl/__init__.py,sha256=7CgEKXVSdBPjfPOX39oYvPN_U5rqwYSyvKH7K69rATo,1831
rcclfix_rccl/lib/librccl.so.1,sha256=kne_b2ytVci402nARs8xK6Fef3XT7ZB3N8zX_6R7XqA,300000
rcclfix_rccl/manifest.json,sha256=FoxDp8Mg2UgT0rLdzLJr4IsNJqI_ZMcjEHiiglown2Y,30
rcclfix_rccl/scan.json,sha256=ToXPcNunjFpCGMi9pdHT3YLkAOFZVG608GpLsdcSH7s,19
rcclfix_rccl_gfx1100-2.21.5+rcclfix1.dist-info/METADATA,sha256=uqaj1LMYdUmCW8zK2RM9bncMFO8b2fxWzIbi1LCCHpo,377
rcclfix_rccl_gfx1100-2.21.5+rcclfix1.dist-info/WHEEL,sha256=ksx2daI5cRuWkF6n7mUUOQSxsVNg0IywEwOxYRlKMZU,103
rcclfix_rccl_gfx1100-2.21.5+rcclfix1.dist-info/top_level.txt,sha256=pjyqk0BVF8a2y3CrOyd4Oy30iL8gX9GzZYZv8RrhjTQ,13
rcclfix_rccl_gfx1100-2.21.5+rcclfix1.dist-info/RECORD,,
";
const OVERLAY_SHA256: &str = "3afafdca442d51ac432b35b5a76894a14f3047f3ba03d33fedfce0ad2349f92b";

const TOOL_MEMBERS: &[&str] = &[
    "rcclfix-0.1.0.data/scripts/rcclfix 100755 Deflated 272cfa4d 200000",
    "rcclfix-0.1.0.dist-info/METADATA 100644 Deflated 3ca280a5 467",
    "rcclfix-0.1.0.dist-info/WHEEL 100644 Deflated 0f0f1e16 103",
    "rcclfix-0.1.0.dist-info/RECORD 100644 Deflated 2e5f75e9 299",
];
const TOOL_RECORD: &str = "\
rcclfix-0.1.0.data/scripts/rcclfix,sha256=Yzk3_ku5kxunGZ7zUemLITYdvlSSlAP5kVlM0s15y70,200000
rcclfix-0.1.0.dist-info/METADATA,sha256=in2xjODZXShv7uuJr2geqoT1BDCOPkeBrcJkmewr4lQ,467
rcclfix-0.1.0.dist-info/WHEEL,sha256=E8of3cPrUEZetK9NtlupBMWefrfjBEEFBiETN6s-hcM,103
rcclfix-0.1.0.dist-info/RECORD,,
";
const TOOL_SHA256: &str = "deb97e108ccec7421f2f33c796ed5cc69127cf7954af84de533a2cfb59340948";
