//! Walking device code: a `.hip_fatbin` (or a raw bundle / CCOB file) → bundles → entries → code
//! objects, turning each into [`ImageReport`]s or [`Unreadable`] records on a [`FileReport`].
//!
//! Source: shared/reference/formats.md §6 (walk), §8 (rdc sections), §13 (states). Offsets in the
//! records are file offsets; inside a CCOB they point at the CCOB header, and the reason names the
//! offset inside the decompressed bundle.

use super::bundle::{self, EntryId, Item};
use super::model::{FileReport, HiddenArg, ImageReport, KernelReport, Unreadable};
use super::{ccob, codeobj, elf, verdict, Problem, Settings};

/// Bitcode magics: raw `BC C0 DE` and the bitcode wrapper `DE C0 17 0B`.
pub fn is_bitcode(b: &[u8]) -> bool {
    b.starts_with(b"BC\xC0\xDE") || b.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
}

/// Walk a buffer holding bundles back to back (a `.hip_fatbin`, a raw bundle or CCOB file).
/// `base` is the buffer's offset in the file.
pub fn scan_fatbin(data: &[u8], base: u64, file: &mut FileReport, opts: &Settings) {
    let mut pos = 0usize;
    while let Some(item) = bundle::next_item(data, pos) {
        match item {
            Item::Plain { offset } => match bundle::parse_bundle(&data[offset..]) {
                Ok(b) => {
                    scan_entries(&b, base + offset as u64, "plain", None, file);
                    pos = bundle::align_up(offset + (b.end as usize).max(1));
                }
                Err(p) => {
                    file.unreadable
                        .push(p.unreadable(base + offset as u64, None, None));
                    pos = bundle::resync(data, offset + 1);
                }
            },
            Item::Ccob { offset } => match ccob::decode_mapped(&data[offset..], opts.verify_hash) {
                Ok(d) => {
                    let label = d.header.label();
                    match bundle::parse_bundle(&d.bundle) {
                        Ok(b) => scan_entries(&b, base + offset as u64, &label, Some(&label), file),
                        Err(p) => file.unreadable.push(Unreadable {
                            offset: base + offset as u64,
                            processor: None,
                            entry_id: None,
                            class: p.class.to_owned(),
                            reason: format!(
                                "{label}: decompressed bundle at +{}: {}",
                                p.offset, p.reason
                            ),
                        }),
                    }
                    pos = bundle::align_up(offset + d.consumed.max(1));
                }
                Err(p) => {
                    file.unreadable
                        .push(p.unreadable(base + offset as u64, None, None));
                    pos = bundle::resync(data, offset + 1);
                }
            },
            Item::Unknown { offset, end } => {
                file.unreadable.push(Unreadable {
                    offset: base + offset as u64,
                    processor: None,
                    entry_id: None,
                    class: "bad-magic".into(),
                    reason: format!("{} bytes of unknown data (no offload bundle or CCOB magic at a 4096-byte boundary)", end - offset),
                });
                pos = end;
            }
        }
    }
}

/// Process the entries of one parsed bundle at file offset `bundle_offset`. `inner` is set when
/// the bundle was decompressed (offsets inside it are not file offsets).
fn scan_entries(
    b: &bundle::Bundle<'_>,
    bundle_offset: u64,
    container: &str,
    inner: Option<&str>,
    file: &mut FileReport,
) {
    for e in &b.entries {
        let id = EntryId::parse(e.id);
        if id.is_host() {
            continue;
        }
        let at = match inner {
            None => bundle_offset + e.offset,
            Some(_) => bundle_offset,
        };
        let where_ = |p: &Problem| match inner {
            None => String::new(),
            Some(l) => format!("{l}: entry at +{} (+{} inside it): ", e.offset, p.offset),
        };
        let processor = Some(id.processor().to_owned()).filter(|p| !p.is_empty());
        if !id.is_amdgcn() {
            let what = if id.triple.starts_with("spirv") {
                "SPIR-V (compiled by the runtime's JIT; its hidden arguments are decided then)"
            } else {
                "not an AMDGPU entry"
            };
            file.unreadable.push(Unreadable {
                offset: at,
                processor: Some(if id.target_id.is_empty() {
                    id.triple.clone()
                } else {
                    id.target_id.to_owned()
                }),
                entry_id: Some(e.id.to_owned()),
                class: "unsupported".into(),
                reason: format!("bundle entry {}: {what}", e.id),
            });
            continue;
        }
        if e.data.is_empty() {
            file.unreadable.push(Unreadable {
                offset: at,
                processor,
                entry_id: Some(e.id.to_owned()),
                class: "truncated".into(),
                reason: format!("bundle entry {} is empty", e.id),
            });
            continue;
        }
        if is_bitcode(e.data) {
            file.unreadable.push(Unreadable {
                offset: at,
                processor,
                entry_id: Some(e.id.to_owned()),
                class: "bitcode".into(),
                reason: format!("bundle entry {}: not yet linked (bitcode); the hostcall declaration is decided at the device link", e.id),
            });
            continue;
        }
        match codeobj::parse(e.data) {
            Ok(co) => {
                let img = image(e.id, &id, container, bundle_offset, e.data.len() as u64, co);
                file.images.push(img);
            }
            Err(p) => {
                let reason = format!("{}bundle entry {}: {}", where_(&p), e.id, p.reason);
                let off = if inner.is_some() {
                    bundle_offset
                } else {
                    at + p.offset
                };
                file.unreadable.push(Unreadable {
                    offset: off,
                    processor,
                    entry_id: Some(e.id.to_owned()),
                    class: p.class.to_owned(),
                    reason,
                });
            }
        }
    }
}

/// Build the report of one code object, with each declaring kernel's `why` ([`verdict::explain`]).
pub fn image(
    entry_id: &str,
    id: &EntryId<'_>,
    container: &str,
    bundle_offset: u64,
    size: u64,
    co: codeobj::CodeObject,
) -> ImageReport {
    let target_id = if id.target_id.is_empty() {
        co.target_id.clone()
    } else {
        id.target_id.to_owned()
    };
    let processor = target_id.split(':').next().unwrap_or("").to_owned();
    let kernels = co
        .metadata
        .kernels
        .iter()
        .map(|k| {
            let hidden_args: Vec<HiddenArg> = k
                .args
                .iter()
                .filter(|a| a.value_kind.starts_with("hidden_"))
                .map(|a| HiddenArg {
                    value_kind: a.value_kind.clone(),
                    offset: a.offset,
                    size: a.size,
                })
                .collect();
            let declares_hostcall = hidden_args
                .iter()
                .any(|a| a.value_kind == "hidden_hostcall_buffer");
            KernelReport {
                name: k.name.clone(),
                symbol: k.symbol.clone(),
                kernarg_segment_size: k.kernarg_segment_size,
                hidden_args,
                declares_hostcall,
                why: None,
            }
        })
        .collect();
    let mut img = ImageReport {
        entry_id: entry_id.to_owned(),
        processor,
        target_id,
        code_object_version: co.version,
        container: container.to_owned(),
        bundle_offset,
        kernels,
        hostcall_users: co.hostcall_users,
        e_flags: co.e_flags,
        metadata_target: co.metadata.target.clone(),
        metadata_version: co.metadata.version.clone(),
        metadata_notes: co.metadata.notes,
        size,
    };
    verdict::explain(&mut img, &co.traces);
    img
}

/// Scan a bare code object file (no bundle around it).
pub fn scan_code_object_file(data: &[u8], file: &mut FileReport) {
    match codeobj::parse(data) {
        Ok(co) => {
            let id = EntryId::parse("");
            let img = image("", &id, "none", 0, data.len() as u64, co);
            file.images.push(img);
        }
        Err(p) => file.unreadable.push(p.unreadable(0, None, None)),
    }
}

/// Scan a host ELF's device code into `file`. Returns `false` when the ELF carries none.
pub fn scan_host_elf(data: &[u8], file: &mut FileReport, opts: &Settings) -> bool {
    let h = match elf::inspect(data) {
        Ok(h) => h,
        Err(p) => {
            file.unreadable.push(p.unreadable(0, None, None));
            return true;
        }
    };
    if !h.has_device_code() {
        return false;
    }
    let hipk = h.wrappers.iter().find(|(_, m)| *m == elf::HIPK);
    if let Some(off) = h.fatbin_nobits {
        let why = if hipk.is_some() || h.kpack_ref.is_some() {
            " (kpack split: HIPK wrapper / .rocm_kpack_ref)"
        } else {
            ""
        };
        file.unreadable.push(Unreadable {
            offset: off,
            processor: None,
            entry_id: None,
            class: "kpack".into(),
            reason: format!("device code externalized{why}: .hip_fatbin is NOBITS, the code objects live in a separate .kpack file"),
        });
    } else if let Some((off, _)) = hipk {
        file.unreadable.push(Unreadable {
            offset: *off,
            processor: None,
            entry_id: None,
            class: "kpack".into(),
            reason: "device code externalized (kpack): HIPK fat binary wrapper".into(),
        });
    }
    if let Some((off, bytes)) = h.fatbin {
        file.kind = "host-elf".into();
        scan_fatbin(bytes, off, file, opts);
    }
    if !h.rdc.is_empty() {
        if h.fatbin.is_none() {
            file.kind = "rdc-object".into();
        }
        for (id_str, off, bytes) in &h.rdc {
            let id = EntryId::parse(id_str);
            if id.is_host() {
                continue;
            }
            if is_bitcode(bytes) {
                file.unreadable.push(Unreadable {
                    offset: *off,
                    processor: Some(id.processor().to_owned()).filter(|p| !p.is_empty()),
                    entry_id: Some((*id_str).to_owned()),
                    class: "bitcode".into(),
                    reason: format!("section __CLANG_OFFLOAD_BUNDLE__{id_str}: not yet linked (bitcode, -fgpu-rdc object); the hostcall declaration is decided at the device link"),
                });
            } else {
                match codeobj::parse(bytes) {
                    Ok(co) => {
                        let img = image(id_str, &id, "rdc-section", *off, bytes.len() as u64, co);
                        file.images.push(img);
                    }
                    Err(p) => file.unreadable.push(p.unreadable(
                        *off,
                        Some(id.processor().to_owned()),
                        Some((*id_str).to_owned()),
                    )),
                }
            }
        }
    }
    true
}
