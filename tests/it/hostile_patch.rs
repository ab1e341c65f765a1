//! Hostile inputs for `rcclfix patch --asserts`, one table row each: a code object made by the
//! test from the committed `tests/fixtures/patch/assert-v6.co` with one field changed. Every row
//! runs the real binary in a fresh folder (`support::run_row`) and checks the exit code, a
//! fragment of the message, that nothing was written (not even under `out/`), and that no control
//! character reached stderr.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use object::read::elf::{FileHeader, SectionHeader, Sym};

/// The file offset of the `.symtab` entry of `name` in `data` (a 64-bit little-endian ELF).
fn symbol_entry(data: &[u8], name: &str) -> usize {
    let e = object::LittleEndian;
    let hdr = object::elf::FileHeader64::<object::LittleEndian>::parse(data).unwrap();
    let sections = hdr.sections(e, data).unwrap();
    let (_, sh) = sections
        .iter()
        .enumerate()
        .find(|(_, s)| s.sh_type(e) == object::elf::SHT_SYMTAB)
        .unwrap();
    let syms = sections.symbols(e, data, object::elf::SHT_SYMTAB).unwrap();
    let i = syms
        .iter()
        .position(|s| syms.symbol_name(e, s).unwrap() == name.as_bytes() && s.st_size(e) > 0)
        .unwrap();
    sh.sh_offset(e) as usize + 24 * i
}

/// One row: the input's bytes, the expected exit code and message fragment.
struct Row {
    name: &'static str,
    input: Vec<u8>,
    code: i32,
    fragment: &'static str,
}

fn rows() -> Vec<Row> {
    let good = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/patch/assert-v6.co"),
    )
    .unwrap();
    let sym = symbol_entry(&good, "__assert_fail");
    let mut v = vec![];
    let mut short = good.clone();
    short[sym + 16..sym + 24].copy_from_slice(&4u64.to_le_bytes());
    v.push(Row {
        name: "a handler too short for the trap",
        input: short,
        code: 2,
        fragment: "is 4 bytes long, too short for s_trap 2; s_endpgm",
    });
    let mut away = good.clone();
    away[sym + 8..sym + 16].copy_from_slice(&0x7fff_0000u64.to_le_bytes());
    v.push(Row {
        name: "a handler outside every executable section",
        input: away,
        code: 2,
        fragment: "lies in no executable section of the file",
    });
    let mut other = good.clone();
    other[48] = 0x36; // EF_AMDGPU_MACH gfx1030 under gfx1100 metadata
    v.push(Row {
        name: "e_flags and amdhsa.target disagree",
        input: other,
        code: 2,
        fragment: "name different instruction sets",
    });
    v
}

#[test]
fn hostile_asserts_inputs_table() {
    let mut failures = vec![];
    for r in rows() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        for sub in ["in", "out", "home", "tmp"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::fs::write(d.join("in/x.co"), &r.input).unwrap();
        let before = crate::support::listing(d, &["home", "tmp"]);
        let args: Vec<OsString> = ["patch", "in/x.co", "--out", "out/x.co", "--asserts"]
            .iter()
            .map(OsString::from)
            .collect();
        let (code, _, err) = crate::support::run_row(d, &args, &[], None, Duration::from_secs(60));
        let after = crate::support::listing(d, &["home", "tmp"]);
        let mut why = vec![];
        if code != r.code {
            why.push(format!("exit {code}, expected {}", r.code));
        }
        if !err.contains(r.fragment) || !err.starts_with("error: in/x.co: ") {
            why.push(format!("stderr lacks {:?}", r.fragment));
        }
        if before != after {
            why.push("something was written".into());
        }
        if !crate::support::control_chars(&err).is_empty() {
            why.push("control characters on stderr".into());
        }
        if !why.is_empty() {
            failures.push(format!("{}: {}\n  stderr: {err}", r.name, why.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
