//! Kernel metadata from AMDGPU metadata notes: MessagePack (`NT_AMDGPU_METADATA`, code object
//! v3–v6) and the legacy YAML of code object v2 (`NT_AMD_HSA_METADATA`, owner `AMD`, type 10).
//!
//! Source: llvm `AMDGPUUsage.rst` ("Code Object V3 Metadata" and later, "Code Object V2 Metadata"),
//! llvm `AMDGPUHSAMetadataStreamer.cpp`; shared/reference/formats.md §10, §11. Unknown keys are
//! ignored; integers of any msgpack width are accepted; every note is merged.

use rmpv::ValueRef;

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
    /// `.value_kind` in the v3+ snake_case spelling (v2 CamelCase is normalised).
    pub value_kind: String,
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

fn get<'a>(map: &'a [(ValueRef<'a>, ValueRef<'a>)], key: &str) -> Option<&'a ValueRef<'a>> {
    map.iter()
        .find(|(k, _)| as_str(k) == Some(key))
        .map(|(_, v)| v)
}

fn as_str<'a>(v: &'a ValueRef<'a>) -> Option<&'a str> {
    match v {
        ValueRef::String(s) => s.as_str(),
        _ => None,
    }
}

fn as_u64(v: &ValueRef<'_>) -> Option<u64> {
    match v {
        ValueRef::Integer(i) => i.as_u64(),
        _ => None,
    }
}

/// Parse one `NT_AMDGPU_METADATA` descriptor (a msgpack map) and merge it into `md`.
///
/// Errors: not msgpack, not a map, `amdhsa.kernels` not an array of maps, a kernel without a
/// string `.name`, `.args` not an array of maps, an arg without a string `.value_kind`.
pub fn merge_msgpack(desc: &[u8], md: &mut Metadata) -> Result<(), String> {
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
                    value_kind,
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

/// Add a kernel unless a kernel with the same name and symbol is already there (notes repeated by
/// a link are merged, not double-counted).
fn push_kernel(md: &mut Metadata, k: KernelMeta) {
    if !md
        .kernels
        .iter()
        .any(|o| o.name == k.name && o.symbol == k.symbol)
    {
        md.kernels.push(k);
    }
}

/// Parse one code object v2 `NT_AMD_HSA_METADATA` descriptor (YAML text) and merge it into `md`.
///
/// Only the subset LLVM writes is understood: `Version`, `Kernels:` as a block sequence of maps
/// with `Name`, `SymbolName`, `Args:` (a block sequence with `Size`, `Align`, `ValueKind`) and
/// `CodeProps:` → `KernargSegmentSize`. Offsets are computed from `Size` and `Align`, as the v2
/// runtime does.
///
/// Errors: not UTF-8, no `Kernels` key while kernel-like text is present, a kernel without `Name`,
/// an arg without `ValueKind`.
pub fn merge_yaml_v2(desc: &[u8], md: &mut Metadata) -> Result<(), String> {
    let text =
        std::str::from_utf8(desc).map_err(|_| "v2 metadata note is not UTF-8 text".to_string())?;
    let text = text.trim_end_matches('\0');
    md.notes += 1;
    #[derive(Default)]
    struct K {
        name: Option<String>,
        symbol: String,
        kss: u64,
        args: Vec<(Option<String>, u64, u64)>,
    }
    let mut kernels: Vec<K> = Vec::new();
    let mut in_kernels = false;
    let mut kernel_indent = usize::MAX;
    let mut section = "";
    let mut arg_indent = usize::MAX;
    for raw in text.lines() {
        let line = raw.trim_end();
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') || t == "---" || t == "..." {
            continue;
        }
        let indent = line.len() - t.len();
        if indent == 0 {
            in_kernels = t.starts_with("Kernels:");
            if let Some(v) = t.strip_prefix("Version:") {
                md.version = v
                    .trim()
                    .trim_matches(|c| c == '[' || c == ']')
                    .split(',')
                    .filter_map(|s| s.trim().parse().ok())
                    .collect();
            }
            continue;
        }
        if !in_kernels {
            continue;
        }
        let (is_item, body, body_indent) = match t.strip_prefix("- ") {
            Some(b) => (
                true,
                b.trim_start(),
                indent + 2 + (b.len() - b.trim_start().len()),
            ),
            None => (false, t, indent),
        };
        if is_item && (kernel_indent == usize::MAX || body_indent <= kernel_indent) {
            kernel_indent = body_indent;
            kernels.push(K::default());
            section = "";
        }
        let Some(k) = kernels.last_mut() else {
            continue;
        };
        let (key, val) = match body.split_once(':') {
            Some((a, b)) => (a.trim(), b.trim().trim_matches('\'').trim_matches('"')),
            None => continue,
        };
        if body_indent == kernel_indent {
            section = key;
            match key {
                "Name" => k.name = Some(val.to_owned()),
                "SymbolName" => k.symbol = val.to_owned(),
                _ => {}
            }
            continue;
        }
        match section {
            "Args" => {
                if is_item {
                    arg_indent = body_indent;
                    k.args.push((None, 0, 1));
                }
                if body_indent != arg_indent {
                    continue;
                }
                if let Some(a) = k.args.last_mut() {
                    match key {
                        "ValueKind" => a.0 = Some(normalise_value_kind(val)),
                        "Size" => a.1 = val.parse().unwrap_or(0),
                        "Align" => a.2 = val.parse().unwrap_or(1),
                        _ => {}
                    }
                }
            }
            "CodeProps" if key == "KernargSegmentSize" => k.kss = val.parse().unwrap_or(0),
            _ => {}
        }
    }
    for (i, k) in kernels.into_iter().enumerate() {
        let name = k
            .name
            .ok_or_else(|| format!("v2 metadata note: Kernels[{i}] has no Name"))?;
        let mut off = 0u64;
        let mut args = Vec::new();
        for (j, (vk, size, align)) in k.args.into_iter().enumerate() {
            let vk = vk.ok_or_else(|| {
                format!("v2 metadata note: kernel {name}: Args[{j}] has no ValueKind")
            })?;
            let align = align.max(1);
            off = off.div_ceil(align).saturating_mul(align);
            args.push(ArgMeta {
                value_kind: vk,
                offset: off,
                size,
            });
            off = off.saturating_add(size);
        }
        push_kernel(
            md,
            KernelMeta {
                name,
                symbol: k.symbol,
                kernarg_segment_size: k.kss,
                args,
            },
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
            .map(|a| (a.value_kind.as_str(), a.offset))
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
