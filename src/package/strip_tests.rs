//! Unit tests of [`super`] (the section-header reader and the name table).
use super::*;

#[test]
fn debug_names() {
    for n in [
        ".debug_info",
        ".zdebug_line",
        ".gnu.debuglto_.debug_info",
        ".stabstr",
    ] {
        assert!(is_debug_name(n), "{n}");
    }
    for n in [".comment", ".hip_fatbin", ".gnu_debuglink", ".shstrtab"] {
        assert!(!is_debug_name(n), "{n}");
    }
}

#[test]
fn garbage_is_an_error() {
    assert!(Elf::parse(b"not an elf").is_err());
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[0x10] = 3;
    // No section headers.
    assert!(Elf::parse(&h).is_err());
    // A section header table past the end.
    h[0x28] = 0xff;
    h[0x3c] = 1;
    h[0x3a] = 64;
    assert!(Elf::parse(&h).is_err());
}

#[test]
fn names_are_shared() {
    let s = |n: &str| Shdr {
        name: n.into(),
        typ: 1,
        flags: 0,
        addr: 0,
        offset: 0,
        size: 0,
        link: 0,
        info: 0,
        align: 0,
        entsize: 0,
    };
    let (t, o) = name_table(&[s(""), s(".a"), s(".b"), s(".a")]);
    assert_eq!(t, b"\0.a\0.b\0");
    assert_eq!(o, [0, 1, 4, 1]);
}
