//! The legacy YAML metadata of code object v2 (`NT_AMD_HSA_METADATA`, owner `AMD`, type 10),
//! merged into a [`Metadata`]. Source: llvm `AMDGPUUsage.rst` ("Code Object V2 Metadata").

use super::{intern_value_kind, normalise_value_kind, ArgMeta, KernelMeta, Metadata};

/// Add a kernel unless a kernel with the same name and symbol is already there (notes repeated by
/// a link are merged, not double-counted).
pub(super) fn push_kernel(md: &mut Metadata, k: KernelMeta) {
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
                value_kind: intern_value_kind(&vk),
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
