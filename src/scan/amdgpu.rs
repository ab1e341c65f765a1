//! Facts about AMDGPU code objects that the code object reader and the call graph both need,
//! kept in a leaf module so neither imports the other for them: the processor names of
//! `EF_AMDGPU_MACH` and the symbols known to use the hostcall buffer.
//!
//! Source: llvm `BinaryFormat/ELF.h` (`EF_AMDGPU_MACH_*`), llvm `AMDGPUUsage.rst`.

/// `EF_AMDGPU_MACH` values → processor name: LLVM's complete AMDGCN table (llvm
/// `BinaryFormat/ELF.h`, `AMDGPUUsage.rst` "AMDGPU `EF_AMDGPU_MACH` Values"), in value order; the
/// test `mach_table_is_llvms` compares it with `tests/data/scan/llvm-amdgpu-mach.txt`, which
/// names where each value was copied from.
const MACH: &[(u32, &str)] = &[
    (0x020, "gfx600"),
    (0x021, "gfx601"),
    (0x022, "gfx700"),
    (0x023, "gfx701"),
    (0x024, "gfx702"),
    (0x025, "gfx703"),
    (0x026, "gfx704"),
    (0x028, "gfx801"),
    (0x029, "gfx802"),
    (0x02a, "gfx803"),
    (0x02b, "gfx810"),
    (0x02c, "gfx900"),
    (0x02d, "gfx902"),
    (0x02e, "gfx904"),
    (0x02f, "gfx906"),
    (0x030, "gfx908"),
    (0x031, "gfx909"),
    (0x032, "gfx90c"),
    (0x033, "gfx1010"),
    (0x034, "gfx1011"),
    (0x035, "gfx1012"),
    (0x036, "gfx1030"),
    (0x037, "gfx1031"),
    (0x038, "gfx1032"),
    (0x039, "gfx1033"),
    (0x03a, "gfx602"),
    (0x03b, "gfx705"),
    (0x03c, "gfx805"),
    (0x03d, "gfx1035"),
    (0x03e, "gfx1034"),
    (0x03f, "gfx90a"),
    (0x041, "gfx1100"),
    (0x042, "gfx1013"),
    (0x043, "gfx1150"),
    (0x044, "gfx1103"),
    (0x045, "gfx1036"),
    (0x046, "gfx1101"),
    (0x047, "gfx1102"),
    (0x048, "gfx1200"),
    (0x049, "gfx1250"),
    (0x04a, "gfx1151"),
    (0x04c, "gfx942"),
    (0x04e, "gfx1201"),
    (0x04f, "gfx950"),
    (0x050, "gfx1310"),
    (0x051, "gfx9-generic"),
    (0x052, "gfx10-1-generic"),
    (0x053, "gfx10-3-generic"),
    (0x054, "gfx11-generic"),
    (0x055, "gfx1152"),
    (0x057, "gfx1154"),
    (0x058, "gfx1153"),
    (0x059, "gfx12-generic"),
    (0x05a, "gfx1251"),
    (0x05b, "gfx12-5-generic"),
    (0x05c, "gfx1172"),
    (0x05d, "gfx1170"),
    (0x05e, "gfx1171"),
    (0x05f, "gfx9-4-generic"),
    (0x062, "gfx11-7-generic"),
    (0x063, "gfx13-generic"),
];

/// Values LLVM assigned and later withdrew (now `RESERVED` in `ELF.h`): gfx940 and gfx941 until
/// LLVM 20. Code objects built by older compilers still carry them.
const HISTORICAL: &[(u32, &str)] = &[(0x040, "gfx940"), (0x04b, "gfx941")];

/// Processor name for an `EF_AMDGPU_MACH` value, e.g. `0x041` → `gfx1100`.
pub fn mach_name(mach: u32) -> Option<&'static str> {
    MACH.iter()
        .chain(HISTORICAL)
        .find(|(m, _)| *m == mach)
        .map(|(_, n)| *n)
}

/// Why a code object whose `e_flags` holds an `EF_AMDGPU_MACH` (low byte) missing from the table
/// is not read: "target not known to this rcclfix (EF_AMDGPU_MACH 0x..)", a value newer than
/// this rcclfix, never a malformed file.
pub fn unknown_mach(e_flags: u32) -> String {
    format!(
        "target not known to this rcclfix (EF_AMDGPU_MACH 0x{:02x})",
        e_flags & 0xff
    )
}

/// Why a code object's `e_flags` and its metadata's processor cannot be compared for the
/// instruction set: [`unknown_mach`] when the machine value is not in the table, else that the
/// two name different instruction sets.
pub fn mach_disagreement(e_flags: u32, processor: &str) -> String {
    match mach_name(e_flags & 0xff) {
        None => unknown_mach(e_flags),
        Some(_) => format!(
            "e_flags (EF_AMDGPU_MACH 0x{:03x}) and amdhsa.target ({processor}) name different instruction sets",
            e_flags & 0xff
        ),
    }
}

/// Whether a symbol name is a known user of the hostcall buffer (printf, assert, device malloc,
/// sanitizers, the hostcall primitive itself). Every name starts with `_`, `p`, `m` or `f`
/// (the code object reader's `parse` skips other symbols by their first byte). Source: ROCm-Device-Libs `ockl/src/hostcall.cl`,
/// `services.cl`, `dm.cl`, `cprintf.cl`; HIP `amd_device_functions.h` (`__assert_fail`).
pub fn is_hostcall_user(name: &str) -> bool {
    is_hostcall_user_bytes(name.as_bytes())
}

/// [`is_hostcall_user`] on a name's bytes (every known name is ASCII, so this holds for a byte
/// string exactly when it holds for the same bytes read as UTF-8), for symbol-table walks that
/// check a name's encoding only when it matches.
pub fn is_hostcall_user_bytes(name: &[u8]) -> bool {
    const EXACT: &[&str] = &[
        "__assert_fail",
        "__assertfail",
        "printf",
        "malloc",
        "free",
        "__hip_hc_malloc",
        "__hip_hc_free",
    ];
    const PREFIX: &[&str] = &[
        "__ockl_hostcall",
        "__ockl_call_host_function",
        "__ockl_fprintf",
        "__ockl_printf",
        "__ockl_devmem_request",
        "__ockl_dm_alloc",
        "__ockl_dm_dealloc",
        "__ockl_sanitizer",
        "__ockl_trap",
        "__asan_",
        "__ockl_fputs",
    ];
    EXACT.iter().any(|e| e.as_bytes() == name)
        || PREFIX.iter().any(|p| name.starts_with(p.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is LLVM's, value for value and name for name, and nothing more than it and the
    /// withdrawn values.
    #[test]
    fn mach_table_is_llvms() {
        let llvm: Vec<(u32, String)> = include_str!("../../tests/data/scan/llvm-amdgpu-mach.txt")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let (v, n) = l.split_once(' ').unwrap();
                (
                    u32::from_str_radix(v.trim_start_matches("0x"), 16).unwrap(),
                    n.to_owned(),
                )
            })
            .collect();
        let ours: Vec<(u32, String)> = MACH.iter().map(|(v, n)| (*v, n.to_string())).collect();
        assert_eq!(ours, llvm);
        for (v, _) in HISTORICAL {
            assert!(
                !llvm.iter().any(|(l, _)| l == v),
                "0x{v:x} is in LLVM's table"
            );
        }
        assert_eq!(mach_name(0x5a), Some("gfx1251"));
        assert_eq!(mach_name(0x40), Some("gfx940"));
        assert_eq!(
            unknown_mach(0x1ff),
            "target not known to this rcclfix (EF_AMDGPU_MACH 0xff)"
        );
    }
}
