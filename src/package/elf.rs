//! The dynamic-linking facts of a host ELF shared library that the export gate and the packagers
//! need: `DT_SONAME`, `DT_NEEDED`, the dynamic symbols it defines and the ones it leaves undefined,
//! each with its GNU symbol version, and the highest glibc version it requires.
//!
//! Source: the System V gABI (dynamic section, symbol table) and the LSB "Symbol Versioning" chapter
//! (`SHT_GNU_versym`, `SHT_GNU_verdef`, `SHT_GNU_verneed`), read with the `object` crate's ELF API.

use std::collections::BTreeMap;
use std::path::Path;

use object::elf;
use object::read::elf::{Dyn as _, FileHeader, Sym as _};
use object::Endianness;

/// A dynamic symbol: its name as stored (possibly C++-mangled) and its GNU symbol version, if any.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DynSymbol {
    /// Raw `.dynstr` name, e.g. `ncclAllReduce` or `_Z12ncclCommDumpP8ncclComm…`.
    pub name: String,
    /// Version name (`GLIBC_2.14`, `RCCL_1`), or `None` for an unversioned (base) symbol.
    pub version: Option<String>,
}

/// What the dynamic linker sees of one shared library.
#[derive(Debug, Clone, Default)]
pub struct ElfInfo {
    /// `DT_SONAME`, if present.
    pub soname: Option<String>,
    /// `DT_NEEDED` entries, in file order.
    pub needed: Vec<String>,
    /// Defined, exported (global or weak binding, default or protected visibility) dynamic symbols,
    /// keyed by raw name. Hidden versions (`sym@VER` rather than `sym@@VER`) are included.
    pub exports: BTreeMap<String, Vec<Option<String>>>,
    /// Undefined dynamic symbols (what this object needs from others), keyed by raw name; the
    /// value is the required version and the file that version belongs to (`vn_file`).
    pub imports: BTreeMap<String, (Option<String>, Option<String>)>,
    /// `e_machine` as a Python/Debian architecture word: `x86_64`/`amd64`, `aarch64`/`arm64`.
    pub machine: Machine,
    /// Highest `GLIBC_2.N` version required from `libc.so.6` (or any other glibc library), as
    /// `(2, N)`; `None` when the library needs no versioned glibc symbol.
    pub glibc: Option<(u32, u32)>,
}

/// The CPU architecture of a library, from `e_machine`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Machine {
    /// `EM_X86_64` (62).
    #[default]
    X86_64,
    /// `EM_AARCH64` (183).
    Aarch64,
}

impl Machine {
    /// The Debian architecture name (`amd64`, `arm64`).
    pub fn debian(self) -> &'static str {
        match self {
            Machine::X86_64 => "amd64",
            Machine::Aarch64 => "arm64",
        }
    }
    /// The architecture as used in wheel platform tags and multiarch triplets (`x86_64`, `aarch64`).
    pub fn uname(self) -> &'static str {
        match self {
            Machine::X86_64 => "x86_64",
            Machine::Aarch64 => "aarch64",
        }
    }
}

impl ElfInfo {
    /// Read `path` (memory-mapped, after checking it is a regular file, so a FIFO never blocks).
    /// Errors (one line, naming the file): missing, not a regular file, not an ELF file, not
    /// 64-bit little-endian, no dynamic section, or a malformed table.
    pub fn read(path: &Path) -> anyhow::Result<ElfInfo> {
        super::regular_file(path, "an ELF shared library")?;
        let map = super::strip::map_file(path)
            .map_err(|e| anyhow::anyhow!("{}: cannot read: {e:#}", path.display()))?;
        Self::parse(&map).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a readable ELF shared library: {e:#}",
                path.display()
            )
        })
    }

    /// Parse ELF bytes (see [`ElfInfo::read`]).
    pub fn parse(data: &[u8]) -> anyhow::Result<ElfInfo> {
        let header =
            elf::FileHeader64::<Endianness>::parse(data).map_err(|e| anyhow::anyhow!("{e}"))?;
        let endian = header.endian().map_err(|e| anyhow::anyhow!("{e}"))?;
        if endian != Endianness::Little {
            anyhow::bail!("big-endian ELF is not supported");
        }
        let machine = match header.e_machine(endian) {
            elf::EM_X86_64 => Machine::X86_64,
            elf::EM_AARCH64 => Machine::Aarch64,
            m => anyhow::bail!("unsupported e_machine {m} (expected x86_64 or aarch64)"),
        };
        let sections = header
            .sections(endian, data)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut info = ElfInfo {
            machine,
            ..Default::default()
        };

        let (dynamic, link) = sections
            .dynamic(endian, data)
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .ok_or_else(|| anyhow::anyhow!("no dynamic section (a static object?)"))?;
        let dynstr = sections
            .strings(endian, data, link)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for d in dynamic {
            let tag = d.d_tag(endian) as u32;
            if tag != elf::DT_NEEDED && tag != elf::DT_SONAME {
                continue;
            }
            let s = d
                .string(endian, dynstr)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let s = String::from_utf8_lossy(s).into_owned();
            if tag == elf::DT_NEEDED {
                info.needed.push(s);
            } else {
                info.soname = Some(s);
            }
        }

        let symbols = sections
            .symbols(endian, data, elf::SHT_DYNSYM)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let versions = sections
            .versions(endian, data)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for (index, sym) in symbols.enumerate() {
            let name = sym
                .name(endian, symbols.strings())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            if name.is_empty() {
                continue;
            }
            let name = String::from_utf8_lossy(name).into_owned();
            let (version, file) = match &versions {
                Some(v) => {
                    let vi = v.version_index(endian, index);
                    match v.version(vi).map_err(|e| anyhow::anyhow!("{e}"))? {
                        Some(ver) => (
                            Some(String::from_utf8_lossy(ver.name()).into_owned()),
                            ver.file().map(|f| String::from_utf8_lossy(f).into_owned()),
                        ),
                        None => (None, None),
                    }
                }
                None => (None, None),
            };
            let bind = sym.st_bind();
            if bind != elf::STB_GLOBAL && bind != elf::STB_WEAK && bind != elf::STB_GNU_UNIQUE {
                continue;
            }
            if sym.is_undefined(endian) {
                if let Some(v) = version.as_deref() {
                    if let Some(n) = glibc_version(v) {
                        info.glibc = info.glibc.max(Some(n));
                    }
                }
                info.imports.insert(name, (version, file));
            } else {
                let vis = sym.st_other() & 0x3;
                if vis != elf::STV_DEFAULT && vis != elf::STV_PROTECTED {
                    continue;
                }
                // A version definition named like the SONAME is the base version (VER_FLG_BASE);
                // it is reported as unversioned.
                let version = version.filter(|v| Some(v) != info.soname.as_ref());
                info.exports.entry(name).or_default().push(version);
            }
        }
        Ok(info)
    }

    /// The exported symbols that belong to the NCCL API (see [`is_nccl_name`]), raw names.
    pub fn nccl_exports(&self) -> impl Iterator<Item = &str> {
        self.exports
            .keys()
            .map(String::as_str)
            .filter(|n| is_nccl_name(n))
    }

    /// The undefined symbols that belong to the NCCL API, raw names with their required version.
    pub fn nccl_imports(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.imports
            .iter()
            .filter(|(n, _)| is_nccl_name(n))
            .map(|(n, (v, _))| (n.as_str(), v.as_deref()))
    }
}

/// `GLIBC_2.34` → `(2, 34)`; other version names → `None`.
pub fn glibc_version(v: &str) -> Option<(u32, u32)> {
    let rest = v.strip_prefix("GLIBC_")?;
    let mut it = rest.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next().unwrap_or("0").parse().ok()?;
    Some((major, minor))
}

/// The function name a symbol stands for: the raw name for a C symbol, or, for a C++-mangled name
/// (`_Z…`), the unqualified name of the demangled entity (`_Z12ncclCommDumpP8ncclCommRSt13unordered_map…`
/// → `ncclCommDump`). Demangling uses `cpp_demangle` (Itanium C++ ABI); a name that does not
/// demangle is returned as it is.
pub fn base_name(raw: &str) -> String {
    match demangle(raw) {
        Some(full) => unqualified(&full),
        None => raw.to_owned(),
    }
}

/// A demangled name is cut at this many bytes (and ends in `…`): back-references make the output
/// grow exponentially with the input (issue 40: a 3.5 KB `doctor --log` of nested names took
/// 1.3 GB and wrote a 327 MB report), and no real kernel or API name comes near it.
pub const MAX_DEMANGLED_BYTES: usize = 8 << 10;
/// A mangled name longer than this is not demangled (the parser's own work grows with it).
pub const MAX_MANGLED_BYTES: usize = 4 << 10;

/// A `fmt::Write` that takes at most [`MAX_DEMANGLED_BYTES`] and then fails, which stops the
/// demangler at once.
struct Bounded {
    out: String,
    full: bool,
}

impl std::fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.out.len() + s.len() > MAX_DEMANGLED_BYTES {
            let mut end = MAX_DEMANGLED_BYTES
                .saturating_sub(self.out.len())
                .min(s.len());
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.out.push_str(&s[..end]);
            self.full = true;
            return Err(std::fmt::Error);
        }
        self.out.push_str(s);
        Ok(())
    }
}

/// The demangled form of a C++-mangled name (`_Z…`), or `None` for C names, undemanglable input
/// and mangled names over [`MAX_MANGLED_BYTES`]; an output over [`MAX_DEMANGLED_BYTES`] is cut
/// there and ends in `…`.
pub fn demangle(raw: &str) -> Option<String> {
    if !raw.starts_with("_Z") || raw.len() > MAX_MANGLED_BYTES {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(raw).ok()?;
    let opts = cpp_demangle::DemangleOptions::new();
    let mut w = Bounded {
        out: String::new(),
        full: false,
    };
    match sym.structured_demangle(&mut w, &opts) {
        Ok(()) => Some(w.out),
        Err(_) if w.full => Some(format!("{}…", w.out)),
        Err(_) => None,
    }
}

/// `ns::ncclCommDump(ncclComm*, std::unordered_map<…>&)` → `ncclCommDump`: the identifier right
/// before the top-level parameter list, without its scope.
fn unqualified(full: &str) -> String {
    // Cut at the first '(' outside template brackets.
    let mut depth = 0i32;
    let mut end = full.len();
    for (i, c) in full.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let head = &full[..end];
    // Drop template arguments of the function itself, then the scope.
    let head = match head.find('<') {
        Some(i) => &head[..i],
        None => head,
    };
    let name = head.rsplit("::").next().unwrap_or(head);
    // A return type may precede the name in template function signatures ("int foo<…>").
    name.rsplit(' ').next().unwrap_or(name).to_owned()
}

/// Whether a raw symbol name belongs to the NCCL/RCCL API: its base name (demangled for C++)
/// starts with `nccl`, `pnccl` (the profiling aliases) or `rccl`. Selection is by the demangled
/// name, so `_Z12ncclCommDump…` is an NCCL symbol and a raw prefix test would miss it.
pub fn is_nccl_name(raw: &str) -> bool {
    let b = base_name(raw);
    b.starts_with("nccl") || b.starts_with("pnccl") || b.starts_with("rccl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_name_of_mangled_and_plain() {
        assert_eq!(base_name("ncclAllReduce"), "ncclAllReduce");
        // g++ 12 mangling of ncclResult_t ncclCommDump(ncclComm*, std::unordered_map<std::string,std::string>&).
        let m = "_Z12ncclCommDumpP8ncclCommRSt13unordered_mapINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEES6_St4hashIS6_ESt8equal_toIS6_ESaISt4pairIKS6_S6_EEE";
        assert_eq!(base_name(m), "ncclCommDump");
        assert!(is_nccl_name(m));
        assert_eq!(base_name("_ZN3foo3barEv"), "bar");
        assert!(!is_nccl_name("_ZN3foo3barEv"));
        assert!(is_nccl_name("pncclAllReduce"));
        assert!(is_nccl_name("rcclGetVersion"));
        assert!(!is_nccl_name("hipMalloc"));
    }

    #[test]
    fn glibc_versions() {
        assert_eq!(glibc_version("GLIBC_2.34"), Some((2, 34)));
        assert_eq!(glibc_version("GLIBC_2.2.5"), Some((2, 2)));
        assert_eq!(glibc_version("GLIBCXX_3.4"), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(ElfInfo::parse(b"not an elf").is_err());
        assert!(ElfInfo::parse(&[0x7f, b'E', b'L', b'F', 2, 1, 1]).is_err());
    }
}
