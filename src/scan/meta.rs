//! Kernel metadata from AMDGPU metadata notes: MessagePack (`NT_AMDGPU_METADATA`, code object
//! v3–v6) and the legacy YAML of code object v2 (`NT_AMD_HSA_METADATA`, owner `AMD`, type 10).
//!
//! Source: llvm `AMDGPUUsage.rst` ("Code Object V3 Metadata" and later, "Code Object V2 Metadata"),
//! llvm `AMDGPUHSAMetadataStreamer.cpp`. Unknown keys are
//! ignored; integers of any msgpack width are accepted; every note is merged.
//!
//! Two readers of the msgpack note share one pass ([`merge_msgpack`], every kernel with every
//! field; [`merge_msgpack_declaring`], only the kernels that declare `hidden_hostcall_buffer`,
//! the others counted: what the compact report needs, [`Detail`]); the token reader is
//! `meta/rd.rs`, the v2 YAML reader `meta/yaml.rs`.

use std::borrow::Cow;

mod rd;
mod yaml;

use rd::{utf8, Rd, Tok, RESERVE_ITEMS};
pub use yaml::merge_yaml_v2;
#[cfg(test)]
use yaml::push_kernel;

#[cfg(test)]
use rmpv::ValueRef;

/// How much of each kernel a scan keeps ([`super::Settings::kernels`]); the verdicts, the counts
/// and every declaring kernel are the same either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    /// Every kernel with every field (`--json=full`, `scan.json`, `--kernels`, the library API).
    #[default]
    All,
    /// Only the kernels that declare `hidden_hostcall_buffer`; the others are counted
    /// ([`Metadata::unlisted`]). What the compact `--json` and the table print.
    Declaring,
}

/// Metadata merged from every note of one code object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    /// `amdhsa.version` (e.g. `[1, 1]` for v4), or `Version` for v2.
    pub version: Vec<u64>,
    /// `amdhsa.target` (v4+).
    pub target: Option<String>,
    /// Whether `amdhsa.printf` (OpenCL printf formats) is present.
    pub has_printf_formats: bool,
    /// Kernels, in note order; the union over all notes.
    pub kernels: Vec<KernelMeta>,
    /// Notes merged.
    pub notes: u32,
    /// Kernels read and counted but not kept in [`Metadata::kernels`]: those that do not declare
    /// `hidden_hostcall_buffer`, when the note was read by [`merge_msgpack_declaring`] (0
    /// otherwise).
    pub unlisted: usize,
}

/// One kernel's metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelMeta {
    /// `.name`.
    pub name: String,
    /// `.symbol` (v3+), `SymbolName` (v2).
    pub symbol: String,
    /// `.kernarg_segment_size` in bytes (v2: `CodeProps.KernargSegmentSize`).
    pub kernarg_segment_size: u64,
    /// Every argument, explicit and hidden, in metadata order.
    pub args: Vec<ArgMeta>,
}

/// One kernel argument.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgMeta {
    /// `.value_kind` in the v3+ snake_case spelling (v2 CamelCase is normalised); a known kind
    /// borrows the spelling from [`intern_value_kind`] instead of allocating.
    pub value_kind: Cow<'static, str>,
    /// `.offset` in the kernarg segment, bytes (v2: computed from `Size` and `Align`).
    pub offset: u64,
    /// `.size` in bytes.
    pub size: u64,
}

/// The v3+ value kinds (llvm `AMDGPUUsage.rst`, CLR `kernel_init.hpp`), used to normalise v2 names.
const VALUE_KINDS: &[&str] = &[
    "by_value",
    "global_buffer",
    "dynamic_shared_pointer",
    "sampler",
    "image",
    "pipe",
    "queue",
    "hidden_global_offset_x",
    "hidden_global_offset_y",
    "hidden_global_offset_z",
    "hidden_none",
    "hidden_printf_buffer",
    "hidden_hostcall_buffer",
    "hidden_default_queue",
    "hidden_completion_action",
    "hidden_multigrid_sync_arg",
    "hidden_block_count_x",
    "hidden_block_count_y",
    "hidden_block_count_z",
    "hidden_group_size_x",
    "hidden_group_size_y",
    "hidden_group_size_z",
    "hidden_remainder_x",
    "hidden_remainder_y",
    "hidden_remainder_z",
    "hidden_grid_dims",
    "hidden_heap_v1",
    "hidden_dynamic_lds_size",
    "hidden_private_base",
    "hidden_shared_base",
    "hidden_queue_ptr",
];

/// A value kind as a shared string when it is one of the known kinds (no allocation for the
/// millions of arguments of a large library), else owned.
pub fn intern_value_kind(k: &str) -> Cow<'static, str> {
    match VALUE_KINDS.iter().find(|v| **v == k) {
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned(k.to_owned()),
    }
}

/// Normalise a v2 CamelCase value kind (`HiddenMultiGridSyncArg`, `HiddenMultigridSyncArg`) to the
/// v3 spelling by comparing case- and underscore-insensitively; unknown kinds become snake_case.
pub fn normalise_value_kind(v2: &str) -> String {
    let squash = |s: &str| {
        s.chars()
            .filter(|c| *c != '_')
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    let key = squash(v2);
    if let Some(k) = VALUE_KINDS.iter().find(|k| squash(k) == key) {
        return (*k).to_owned();
    }
    let mut out = String::new();
    for (i, c) in v2.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

#[cfg(test)]
fn get<'a>(map: &'a [(ValueRef<'a>, ValueRef<'a>)], key: &str) -> Option<&'a ValueRef<'a>> {
    map.iter()
        .find(|(k, _)| as_str(k) == Some(key))
        .map(|(_, v)| v)
}

#[cfg(test)]
fn as_str<'a>(v: &'a ValueRef<'a>) -> Option<&'a str> {
    match v {
        ValueRef::String(s) => s.as_str(),
        _ => None,
    }
}

#[cfg(test)]
fn as_u64(v: &ValueRef<'_>) -> Option<u64> {
    match v {
        ValueRef::Integer(i) => i.as_u64(),
        _ => None,
    }
}

/// Parse one `NT_AMDGPU_METADATA` descriptor (a msgpack map) and merge it into `md`.
///
/// The whole value is validated first (as one msgpack value, at most 32 containers deep), then
/// read in one pass that keeps only the fields below; for a key given twice the first counts.
///
/// Errors: not msgpack, not a map, `amdhsa.kernels` not an array of maps, a kernel without a
/// string `.name`, `.args` not an array of maps, an arg without a string `.value_kind`.
pub fn merge_msgpack(desc: &[u8], md: &mut Metadata) -> Result<(), String> {
    let before = md.kernels.len();
    let r = merge_pass(desc, md, None).map_err(|e| match (Rd { b: desc, p: 0 }).skip(0) {
        // Invalid msgpack anywhere is reported as such, before any shape problem.
        Err(v) => format!("metadata note is not valid msgpack: {v}"),
        Ok(()) => e,
    });
    dedupe(md, before);
    r
}

/// The `(.name, .symbol)` pairs of the kernels [`merge_msgpack_declaring`] has met in one code
/// object's notes, borrowed from the notes (the first of a repeated pair counts). Hashed with
/// foldhash's seeded hasher: SipHash over 160,240 mangled names was a twentieth of a large
/// library's scan; the per-process random seed keeps crafted names from colliding on purpose.
#[derive(Debug, Default)]
pub struct Seen<'a>(foldhash::HashSet<(&'a str, &'a str)>);

/// [`merge_msgpack`] for a report that lists only the kernels declaring `hidden_hostcall_buffer`
/// (the compact `--json` and the table): every kernel is read and validated as there, but only a
/// declaring one is kept (read again in full); the others are counted in [`Metadata::unlisted`]
/// without a string being copied. `seen` carries the kernels of the code object's earlier notes,
/// so a kernel repeated by a link counts once, as [`merge_msgpack`]'s merge does.
///
/// Errors: the note is not one this reader takes as it is (anything [`merge_msgpack`] would
/// refuse; the reason is this reader's, not worded for a report): the caller then reads the whole
/// code object with [`merge_msgpack`], which words the problem.
pub fn merge_msgpack_declaring<'a>(
    desc: &'a [u8],
    md: &mut Metadata,
    seen: &mut Seen<'a>,
) -> Result<(), String> {
    merge_pass(desc, md, Some(seen))
}

/// Keep the first of kernels with the same name and symbol (notes repeated by a link are
/// merged, not double-counted); `from`: where the kernels just added start.
fn dedupe(md: &mut Metadata, from: usize) {
    if md.kernels.len() == from {
        return;
    }
    let mut seen =
        foldhash::HashSet::with_capacity_and_hasher(md.kernels.len(), Default::default());
    let keep: Vec<bool> = md
        .kernels
        .iter()
        .map(|k| seen.insert((k.name.as_str(), k.symbol.as_str())))
        .collect();
    if keep.iter().all(|&k| k) {
        return;
    }
    let mut i = 0;
    md.kernels.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

/// One pass over a note: every value is read or skipped (and so validated) once.
/// With `light`, kernels are deduplicated through it and only declaring ones are kept
/// ([`merge_msgpack_declaring`]).
fn merge_pass<'a>(
    desc: &'a [u8],
    md: &mut Metadata,
    mut light: Option<&mut Seen<'a>>,
) -> Result<(), String> {
    let bad = |e: String| format!("metadata note is not valid msgpack: {e}");
    let mut r = Rd { b: desc, p: 0 };
    let Tok::Map(n) = r.next().map_err(bad)? else {
        return Err("metadata note: top level is not a msgpack map".into());
    };
    md.notes += 1;
    let (mut seen_version, mut seen_target, mut seen_kernels) = (false, false, false);
    for _ in 0..n {
        let key = r.key(1).map_err(bad)?;
        match key {
            Some(b"amdhsa.version") if !seen_version => {
                seen_version = true;
                let Tok::Array(k) = r.next().map_err(bad)? else {
                    return Err("metadata note: amdhsa.version is not an array".into());
                };
                md.version.clear();
                for _ in 0..k {
                    if let Some(v) = r.u64_value(2).map_err(bad)? {
                        md.version.push(v);
                    }
                }
            }
            Some(b"amdhsa.target") if !seen_target => {
                seen_target = true;
                let t = r
                    .str_value(1)
                    .map_err(bad)?
                    .and_then(utf8)
                    .ok_or("metadata note: amdhsa.target is not a string")?;
                md.target = Some(t.to_owned());
            }
            Some(b"amdhsa.printf") => {
                md.has_printf_formats = true;
                r.skip(1).map_err(bad)?;
            }
            Some(b"amdhsa.kernels") if !seen_kernels => {
                seen_kernels = true;
                let Tok::Array(k) = r.next().map_err(bad)? else {
                    return Err("metadata note: amdhsa.kernels is not an array".into());
                };
                // The count is bounded by the note's bytes ([`Rd::check_count`]); reserve no
                // more than a small start so the vector grows with kernels actually read.
                md.kernels.reserve((k as usize).min(RESERVE_ITEMS));
                for i in 0..k as usize {
                    let Some(seen) = light.as_deref_mut() else {
                        let kernel = read_kernel(&mut r, i, bad)?;
                        md.kernels.push(kernel);
                        continue;
                    };
                    let at = r.p;
                    let (name, symbol, declares) = peek_kernel(&mut r, i, bad)?;
                    if !seen.0.insert((name, symbol)) {
                        continue;
                    }
                    if declares {
                        r.p = at;
                        let kernel = read_kernel(&mut r, i, bad)?;
                        md.kernels.push(kernel);
                    } else {
                        md.unlisted += 1;
                    }
                }
            }
            _ => r.skip(1).map_err(bad)?,
        }
    }
    Ok(())
}

/// One kernel of `amdhsa.kernels` read as [`read_kernel`] reads it (the same keys at the same
/// depths, the same checks), keeping only its `.name`, its `.symbol` (empty when it has none) and
/// whether an argument's `.value_kind` is `hidden_hostcall_buffer`.
fn peek_kernel<'a>(
    r: &mut Rd<'a>,
    i: usize,
    bad: impl Fn(String) -> String + Copy,
) -> Result<(&'a str, &'a str, bool), String> {
    let Tok::Map(n) = r.next().map_err(bad)? else {
        return Err(format!("metadata note: amdhsa.kernels[{i}] is not a map"));
    };
    let mut name: Option<Option<&'a str>> = None;
    let mut symbol: Option<Option<&'a str>> = None;
    let mut seen_args = false;
    let mut declares = false;
    for _ in 0..n {
        let key = r.key(3).map_err(bad)?;
        match key {
            Some(b".name") if name.is_none() => {
                name = Some(r.str_value(3).map_err(bad)?.and_then(utf8))
            }
            Some(b".symbol") if symbol.is_none() => {
                symbol = Some(r.str_value(3).map_err(bad)?.and_then(utf8))
            }
            Some(b".args") if !seen_args => {
                seen_args = true;
                let Tok::Array(k) = r.next().map_err(bad)? else {
                    return Err(format!("metadata note: amdhsa.kernels[{i}]: .args"));
                };
                for j in 0..k as usize {
                    let Tok::Map(m) = r.next().map_err(bad)? else {
                        return Err(format!("metadata note: amdhsa.kernels[{i}]: .args[{j}]"));
                    };
                    let mut kind: Option<Option<&str>> = None;
                    for _ in 0..m {
                        match r.key(5).map_err(bad)? {
                            Some(b".value_kind") if kind.is_none() => {
                                kind = Some(r.str_value(5).map_err(bad)?.and_then(utf8))
                            }
                            _ => r.skip(5).map_err(bad)?,
                        }
                    }
                    match kind.flatten() {
                        Some(k) => declares |= k == "hidden_hostcall_buffer",
                        None => {
                            return Err(format!("metadata note: amdhsa.kernels[{i}]: .args[{j}]"))
                        }
                    }
                }
            }
            _ => r.skip(3).map_err(bad)?,
        }
    }
    let name = name
        .flatten()
        .ok_or_else(|| format!("metadata note: amdhsa.kernels[{i}] has no string .name"))?;
    Ok((name, symbol.flatten().unwrap_or_default(), declares))
}

fn read_kernel(
    r: &mut Rd<'_>,
    i: usize,
    bad: impl Fn(String) -> String + Copy,
) -> Result<KernelMeta, String> {
    let Tok::Map(n) = r.next().map_err(bad)? else {
        return Err(format!("metadata note: amdhsa.kernels[{i}] is not a map"));
    };
    let mut name: Option<Option<&str>> = None;
    let mut symbol: Option<Option<&str>> = None;
    let mut kss: Option<Option<u64>> = None;
    // The first .args: its arguments, or how it is malformed (worded once the name is known).
    enum Args {
        Ok(Vec<ArgMeta>),
        NotArray,
        NotMap(usize),
        NoKind(usize),
    }
    let mut args: Option<Args> = None;
    for _ in 0..n {
        let key = r.key(3).map_err(bad)?;
        match key {
            Some(b".name") if name.is_none() => {
                name = Some(r.str_value(3).map_err(bad)?.and_then(utf8))
            }
            Some(b".symbol") if symbol.is_none() => {
                symbol = Some(r.str_value(3).map_err(bad)?.and_then(utf8))
            }
            Some(b".kernarg_segment_size") if kss.is_none() => {
                kss = Some(r.u64_value(3).map_err(bad)?)
            }
            Some(b".args") if args.is_none() => {
                let at = r.p;
                let Tok::Array(k) = r.next().map_err(bad)? else {
                    r.p = at;
                    r.skip(3).map_err(bad)?;
                    args = Some(Args::NotArray);
                    continue;
                };
                let mut v = Vec::with_capacity((k as usize).min(RESERVE_ITEMS));
                let mut problem = None;
                for j in 0..k as usize {
                    if problem.is_some() {
                        r.skip(4).map_err(bad)?;
                        continue;
                    }
                    let at = r.p;
                    let Tok::Map(m) = r.next().map_err(bad)? else {
                        r.p = at;
                        r.skip(4).map_err(bad)?;
                        problem = Some(Args::NotMap(j));
                        continue;
                    };
                    let mut kind: Option<Option<&str>> = None;
                    let (mut off, mut size): (Option<Option<u64>>, Option<Option<u64>>) =
                        (None, None);
                    for _ in 0..m {
                        let key = r.key(5).map_err(bad)?;
                        match key {
                            Some(b".value_kind") if kind.is_none() => {
                                kind = Some(r.str_value(5).map_err(bad)?.and_then(utf8))
                            }
                            Some(b".offset") if off.is_none() => {
                                off = Some(r.u64_value(5).map_err(bad)?)
                            }
                            Some(b".size") if size.is_none() => {
                                size = Some(r.u64_value(5).map_err(bad)?)
                            }
                            _ => r.skip(5).map_err(bad)?,
                        }
                    }
                    match kind.flatten() {
                        Some(k) => v.push(ArgMeta {
                            value_kind: intern_value_kind(k),
                            offset: off.flatten().unwrap_or(0),
                            size: size.flatten().unwrap_or(0),
                        }),
                        None => problem = Some(Args::NoKind(j)),
                    }
                }
                args = Some(problem.unwrap_or(Args::Ok(v)));
            }
            _ => r.skip(3).map_err(bad)?,
        }
    }
    let name = name
        .flatten()
        .ok_or_else(|| format!("metadata note: amdhsa.kernels[{i}] has no string .name"))?
        .to_owned();
    let args = match args {
        None => Vec::new(),
        Some(Args::Ok(v)) => v,
        Some(Args::NotArray) => {
            return Err(format!(
                "metadata note: kernel {name}: .args is not an array"
            ))
        }
        Some(Args::NotMap(j)) => {
            return Err(format!(
                "metadata note: kernel {name}: .args[{j}] is not a map"
            ))
        }
        Some(Args::NoKind(j)) => {
            return Err(format!(
                "metadata note: kernel {name}: .args[{j}] has no string .value_kind"
            ))
        }
    };
    Ok(KernelMeta {
        name,
        symbol: symbol.flatten().unwrap_or_default().to_owned(),
        kernarg_segment_size: kss.flatten().unwrap_or(0),
        args,
    })
}

#[cfg(test)]
/// The former `rmpv` tree reader, kept as the oracle of the tests.
///
/// Errors: not msgpack, not a map, `amdhsa.kernels` not an array of maps, a kernel without a
/// string `.name`, `.args` not an array of maps, an arg without a string `.value_kind`.
pub(crate) fn merge_msgpack_rmpv(desc: &[u8], md: &mut Metadata) -> Result<(), String> {
    let mut rd = desc;
    let root = rmpv::decode::read_value_ref_with_max_depth(&mut rd, 32)
        .map_err(|e| format!("metadata note is not valid msgpack: {e}"))?;
    let ValueRef::Map(top) = &root else {
        return Err("metadata note: top level is not a msgpack map".into());
    };
    md.notes += 1;
    if let Some(v) = get(top, "amdhsa.version") {
        let ValueRef::Array(a) = v else {
            return Err("metadata note: amdhsa.version is not an array".into());
        };
        md.version = a.iter().filter_map(as_u64).collect();
    }
    if let Some(v) = get(top, "amdhsa.target") {
        md.target = Some(
            as_str(v)
                .ok_or("metadata note: amdhsa.target is not a string")?
                .to_owned(),
        );
    }
    if get(top, "amdhsa.printf").is_some() {
        md.has_printf_formats = true;
    }
    let Some(kernels) = get(top, "amdhsa.kernels") else {
        return Ok(());
    };
    let ValueRef::Array(kernels) = kernels else {
        return Err("metadata note: amdhsa.kernels is not an array".into());
    };
    for (i, k) in kernels.iter().enumerate() {
        let ValueRef::Map(k) = k else {
            return Err(format!("metadata note: amdhsa.kernels[{i}] is not a map"));
        };
        let name = get(k, ".name")
            .and_then(as_str)
            .ok_or_else(|| format!("metadata note: amdhsa.kernels[{i}] has no string .name"))?
            .to_owned();
        let symbol = get(k, ".symbol")
            .and_then(as_str)
            .unwrap_or_default()
            .to_owned();
        let kernarg_segment_size = get(k, ".kernarg_segment_size")
            .and_then(as_u64)
            .unwrap_or(0);
        let mut args = Vec::new();
        if let Some(a) = get(k, ".args") {
            let ValueRef::Array(a) = a else {
                return Err(format!(
                    "metadata note: kernel {name}: .args is not an array"
                ));
            };
            for (j, arg) in a.iter().enumerate() {
                let ValueRef::Map(arg) = arg else {
                    return Err(format!(
                        "metadata note: kernel {name}: .args[{j}] is not a map"
                    ));
                };
                let value_kind = get(arg, ".value_kind")
                    .and_then(as_str)
                    .ok_or_else(|| {
                        format!(
                            "metadata note: kernel {name}: .args[{j}] has no string .value_kind"
                        )
                    })?
                    .to_owned();
                let offset = get(arg, ".offset").and_then(as_u64).unwrap_or(0);
                let size = get(arg, ".size").and_then(as_u64).unwrap_or(0);
                args.push(ArgMeta {
                    value_kind: intern_value_kind(&value_kind),
                    offset,
                    size,
                });
            }
        }
        push_kernel(
            md,
            KernelMeta {
                name,
                symbol,
                kernarg_segment_size,
                args,
            },
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `NT_AMDGPU_METADATA` descriptor of a code object file.
    fn note_desc(co: &[u8]) -> &[u8] {
        let at = co
            .windows(8)
            .position(|w| w == b"AMDGPU\0\0")
            .expect("an AMDGPU note");
        let h = at - 12;
        let descsz = u32::from_le_bytes(co[h + 4..h + 8].try_into().unwrap()) as usize;
        &co[at + 8..at + 8 + descsz]
    }

    fn same(d: &[u8]) {
        let (mut a, mut b) = (Metadata::default(), Metadata::default());
        let (ra, rb) = (merge_msgpack(d, &mut a), merge_msgpack_rmpv(d, &mut b));
        match (&ra, &rb) {
            (Ok(()), Ok(())) => {
                assert_eq!(
                    (
                        &a.version,
                        &a.target,
                        a.has_printf_formats,
                        &a.kernels,
                        a.notes
                    ),
                    (
                        &b.version,
                        &b.target,
                        b.has_printf_formats,
                        &b.kernels,
                        b.notes
                    )
                );
            }
            (Err(x), Err(y)) if y.starts_with("metadata note is not valid msgpack") => {
                assert!(
                    x.starts_with("metadata note is not valid msgpack"),
                    "{x} / {y}"
                )
            }
            (Err(x), Err(y)) => assert_eq!(x, y),
            _ => panic!("new {ra:?}, rmpv {rb:?} on {d:02x?}"),
        }
    }

    /// The streaming reader agrees with the `rmpv` tree reader on real notes and on every
    /// single-byte change and every truncation of them.
    #[test]
    fn msgpack_reader_matches_rmpv() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for rel in [
            "tests/fixtures/sid/kernels.co",
            "tests/fixtures/trixie/kernels.co",
            "tests/fixtures/patch/table-printf-v6.co",
        ] {
            let co = std::fs::read(root.join(rel)).unwrap();
            let desc = note_desc(&co);
            same(desc);
            for i in 0..desc.len() {
                for x in [0x01u8, 0x10, 0x80, 0xff] {
                    let mut d = desc.to_vec();
                    d[i] ^= x;
                    same(&d);
                }
            }
            for cut in 0..desc.len() {
                same(&desc[..cut]);
            }
        }
    }

    #[test]
    fn v2_value_kinds() {
        assert_eq!(
            normalise_value_kind("HiddenHostcallBuffer"),
            "hidden_hostcall_buffer"
        );
        assert_eq!(
            normalise_value_kind("HiddenMultiGridSyncArg"),
            "hidden_multigrid_sync_arg"
        );
        assert_eq!(
            normalise_value_kind("HiddenMultigridSyncArg"),
            "hidden_multigrid_sync_arg"
        );
        assert_eq!(normalise_value_kind("GlobalBuffer"), "global_buffer");
    }

    #[test]
    fn v2_yaml() {
        let y = "---\nVersion: [ 1, 0 ]\nKernels:\n  - Name:            k\n    SymbolName:      'k@kd'\n    Language:        OpenCL C\n    Args:\n      - Size:            8\n        Align:           8\n        ValueKind:       GlobalBuffer\n      - Size:            4\n        Align:           4\n        ValueKind:       ByValue\n      - Size:            8\n        Align:           8\n        ValueKind:       HiddenHostcallBuffer\n    CodeProps:\n      KernargSegmentSize: 24\n  - Name: k2\n    SymbolName: 'k2@kd'\n...\n";
        let mut md = Metadata::default();
        merge_yaml_v2(y.as_bytes(), &mut md).unwrap();
        assert_eq!(md.version, vec![1, 0]);
        assert_eq!(md.kernels.len(), 2);
        let k = &md.kernels[0];
        assert_eq!(
            (k.name.as_str(), k.symbol.as_str(), k.kernarg_segment_size),
            ("k", "k@kd", 24)
        );
        let kinds: Vec<_> = k
            .args
            .iter()
            .map(|a| (a.value_kind.as_ref(), a.offset))
            .collect();
        assert_eq!(
            kinds,
            [
                ("global_buffer", 0),
                ("by_value", 8),
                ("hidden_hostcall_buffer", 16)
            ]
        );
        assert!(md.kernels[1].args.is_empty());
    }
}
