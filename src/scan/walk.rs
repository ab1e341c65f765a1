//! Walking device code: a `.hip_fatbin` (or a raw bundle / CCOB file) → bundles → entries → code
//! objects, turning each into [`ImageReport`]s or [`Unreadable`] records on a [`FileReport`].
//!
//! Source: clang `ClangOffloadBundler.rst` (bundles, rdc sections), CLR `hipamd/src/hip_fatbin.cpp`
//! (the walk), docs/scan-json.md (states). Offsets in the
//! records are file offsets; inside a CCOB they point at the CCOB header, and the reason names the
//! offset inside the decompressed bundle.

use super::bundle::{self, EntryId, Item};
use super::meta::Detail;
use super::model::{FileReport, HiddenArg, ImageReport, KernelReport, Unreadable};
use super::{ccob, codeobj, elf, offload, stream, verdict, Problem, Settings};

pub use super::bundle::is_bitcode;

/// What one unit of work found: images and unreadable records, appended to its file in order.
#[derive(Debug, Default)]
pub struct Part {
    /// Images, in file order.
    pub images: Vec<ImageReport>,
    /// Unreadable records, in file order.
    pub unreadable: Vec<Unreadable>,
}

impl Part {
    /// Append to `file` (images and records keep their order).
    pub fn append_to(self, file: &mut FileReport) {
        file.images.extend(self.images);
        file.unreadable.extend(self.unreadable);
    }

    /// A part of one record.
    pub fn unreadable(u: Unreadable) -> Part {
        Part {
            images: Vec::new(),
            unreadable: vec![u],
        }
    }

    /// Add one bundle entry's record (as [`entry_record`] gives it): its image or why it is
    /// unreadable; `None` (the host entry) adds nothing.
    pub(crate) fn push(&mut self, r: Option<Result<ImageReport, Unreadable>>) {
        match r {
            Some(Ok(i)) => self.images.push(i),
            Some(Err(u)) => self.unreadable.push(u),
            None => {}
        }
    }

    /// [`Part::push`] each record of a bundle's entries (with their bundle index).
    pub(crate) fn push_records(
        &mut self,
        got: Vec<(usize, Option<Result<ImageReport, Unreadable>>)>,
    ) {
        for (_, r) in got {
            self.push(r);
        }
    }
}

/// One unit of work over bytes in memory, independent of every other: a plain bundle, a CCOB,
/// an `-fgpu-rdc` section or a bare code object. [`Job::run`] may run on any thread; a job never
/// starts other parallel work, so each worker holds at most one decoded code object at a time.
#[derive(Debug)]
pub enum Job<'a> {
    /// A parsed plain bundle at file offset `base`: its entries are parsed in place.
    Plain {
        /// The bundle.
        bundle: bundle::Bundle<'a>,
        /// File offset of the bundle.
        base: u64,
    },
    /// The CCOB at `data[0]` (file offset `base`): decoded as a stream.
    Ccob {
        /// From the CCOB header to the end of the container.
        data: &'a [u8],
        /// File offset of the CCOB header.
        base: u64,
    },
    /// An `-fgpu-rdc` section `__CLANG_OFFLOAD_BUNDLE__<id>` at file offset `off`.
    Rdc {
        /// The entry ID from the section name.
        id: &'a str,
        /// File offset of the section.
        off: u64,
        /// The section bytes.
        bytes: &'a [u8],
    },
    /// A device image of an LLVM offload binary ([`offload::Image`]) in an object file.
    Offload(offload::Image<'a>),
    /// A bare code object file.
    CodeObject {
        /// The whole file.
        data: &'a [u8],
    },
    /// Records found while locating the work (kpack markers, bad bundle headers, unknown data).
    Done(Part),
}

impl Job<'_> {
    /// A rough size of the work in bytes, for running the largest jobs first: the decompressed
    /// size a CCOB header states (0 when it does not read), a plain bundle's end, the section or
    /// file length. Only an order: a header that lies makes its job start early, nothing more.
    pub fn cost(&self) -> u64 {
        match self {
            Job::Plain { bundle, .. } => bundle.end,
            Job::Ccob { data, .. } => ccob::parse_header(data).map_or(0, |h| h.uncompressed_size),
            Job::Rdc { bytes, .. } => bytes.len() as u64,
            Job::Offload(i) => i.bytes.len() as u64,
            Job::CodeObject { data } => data.len() as u64,
            Job::Done(_) => 0,
        }
    }

    /// Do the work.
    pub fn run(self, opts: &Settings) -> Part {
        match self {
            Job::Plain { bundle, base } => {
                let mut part = Part::default();
                scan_entries(&bundle, base, "plain", None, opts.kernels, &mut part);
                part
            }
            Job::Ccob { data, base } => scan_ccob(data, base, opts).0,
            Job::Rdc { id, off, bytes } => rdc_section(id, off, bytes, opts.kernels),
            Job::Offload(i) => offload_image(&i, opts.kernels),
            Job::CodeObject { data } => {
                let mut part = Part::default();
                match codeobj::parse_with(data, opts.kernels) {
                    Ok(co) => {
                        let id = EntryId::parse("");
                        let img = image("", &id, "none", 0, data.len() as u64, co);
                        part.images.push(img);
                    }
                    Err(p) => part.unreadable.push(p.unreadable(0, None, None)),
                }
                part
            }
            Job::Done(p) => p,
        }
    }
}

/// Walk a buffer holding bundles back to back (a `.hip_fatbin`, a raw bundle or CCOB file) and
/// process every bundle on this thread. `base` is the buffer's offset in the file.
pub fn scan_fatbin(data: &[u8], base: u64, file: &mut FileReport, opts: &Settings) {
    let mut jobs = Vec::new();
    locate_fatbin(data, base, opts, &mut jobs);
    for j in jobs {
        j.run(opts).append_to(file);
    }
}

/// Find the bundles of a buffer holding them back to back and turn each into a [`Job`], in
/// file order. Only headers are read here (a plain bundle's entry table, a CCOB's sizes); a v1
/// zlib CCOB, whose end only its stream knows, is decoded here.
pub fn locate_fatbin<'a>(data: &'a [u8], base: u64, opts: &Settings, jobs: &mut Vec<Job<'a>>) {
    locate_fatbin_at(data, base, opts, jobs, &mut Vec::new());
}

/// [`locate_fatbin`], also noting in `starts` the file offset of every bundle or CCOB magic it
/// met (what a `__hip_fatbin_wrapper` may point at).
pub fn locate_fatbin_at<'a>(
    data: &'a [u8],
    base: u64,
    opts: &Settings,
    jobs: &mut Vec<Job<'a>>,
    starts: &mut Vec<u64>,
) {
    let mut pos = 0usize;
    while let Some(item) = bundle::next_item(data, pos) {
        if let Item::Plain { offset } | Item::Ccob { offset } = item {
            starts.push(base + offset as u64);
        }
        pos = locate_item(data, item, base, opts, jobs);
    }
}

/// The [`Job`] of the bundle a `__hip_fatbin_wrapper` points at: `data` runs from the pointer
/// (file offset `base`) to the end of the loaded bytes that hold it, and the one bundle or CCOB
/// there is what the runtime reads (`wrapper`: the wrapper's file offset, for the record when
/// neither magic is there).
pub fn locate_pointed<'a>(
    data: &'a [u8],
    base: u64,
    wrapper: u64,
    opts: &Settings,
    jobs: &mut Vec<Job<'a>>,
) {
    let item = if data.starts_with(bundle::BUNDLE_MAGIC) {
        Item::Plain { offset: 0 }
    } else if data.starts_with(bundle::CCOB_MAGIC) {
        Item::Ccob { offset: 0 }
    } else {
        jobs.push(Job::Done(Part::unreadable(Unreadable {
            offset: base,
            processor: None,
            entry_id: None,
            class: "wrapper".into(),
            reason: format!("the __hip_fatbin_wrapper at file offset {wrapper} points here, and no offload bundle or CCOB magic is here"),
        })));
        return;
    };
    locate_item(data, item, base, opts, jobs);
}

/// Turn the `item` of `data` (file offset `base`) into its [`Job`]; returns where the walk goes
/// on.
fn locate_item<'a>(
    data: &'a [u8],
    item: Item,
    base: u64,
    opts: &Settings,
    jobs: &mut Vec<Job<'a>>,
) -> usize {
    match item {
        Item::Plain { offset } => match bundle::parse_bundle(&data[offset..]) {
            Ok(b) => {
                let next = bundle::align_up(offset + (b.end as usize).max(1));
                jobs.push(Job::Plain {
                    bundle: b,
                    base: base + offset as u64,
                });
                next
            }
            Err(p) => {
                jobs.push(Job::Done(Part::unreadable(p.unreadable(
                    base + offset as u64,
                    None,
                    None,
                ))));
                bundle::resync(data, offset + 1)
            }
        },
        Item::Ccob { offset } => {
            let at = &data[offset..];
            let extent = match ccob::parse_header(at) {
                Err(p) => {
                    jobs.push(Job::Done(Part::unreadable(p.unreadable(
                        base + offset as u64,
                        None,
                        None,
                    ))));
                    return bundle::resync(data, offset + 1);
                }
                Ok(h) => match (h.total_size, h.method) {
                    (Some(t), _) => Some(t as usize),
                    (None, ccob::Method::Zstd) => {
                        zstd::zstd_safe::find_frame_compressed_size(&at[h.header_len..])
                            .ok()
                            .map(|n| h.header_len + n)
                    }
                    (None, ccob::Method::Zlib) => None,
                },
            };
            let base = base + offset as u64;
            match extent {
                Some(n) if n <= at.len() => {
                    jobs.push(Job::Ccob { data: at, base });
                    bundle::align_up(offset + n.max(1))
                }
                _ => {
                    let (part, consumed) = scan_ccob(at, base, opts);
                    jobs.push(Job::Done(part));
                    match consumed {
                        Some(n) => bundle::align_up(offset + n.max(1)),
                        None => bundle::resync(data, offset + 1),
                    }
                }
            }
        }
        Item::Unknown { offset, end } => {
            jobs.push(Job::Done(Part::unreadable(unknown_data(
                base + offset as u64,
                (end - offset) as u64,
            ))));
            end
        }
    }
}

/// The record for `len` bytes of unknown data at file offset `at` in a `.hip_fatbin`.
pub fn unknown_data(at: u64, len: u64) -> Unreadable {
    Unreadable {
        offset: at,
        processor: None,
        entry_id: None,
        class: "bad-magic".into(),
        reason: format!(
            "{len} bytes of unknown data (no offload bundle or CCOB magic at a 4096-byte boundary)"
        ),
    }
}

/// Decode the CCOB at `data[0]` (file offset `base`) as a stream and read its bundle entry by
/// entry. Returns what it found and the bytes the CCOB occupies (`None` when its header or
/// payload could not be read).
pub fn scan_ccob(data: &[u8], base: u64, opts: &Settings) -> (Part, Option<usize>) {
    let (header, payload) = match ccob::open(data) {
        Ok(x) => x,
        Err(p) => return (Part::unreadable(p.unreadable(base, None, None)), None),
    };
    if header.total_size.is_some() || header.method == ccob::Method::Zstd {
        // The whole payload is read once, in order (a v1 zlib payload's end is not known yet).
        crate::fsutil::populate_read(payload);
    }
    let (mut part, consumed) = scan_ccob_as(&header, payload, base, opts.verify_hash, opts);
    if !opts.verify_hash && !part.unreadable.is_empty() {
        // Something inside did not read: say whether the payload itself is corrupt (the hash is
        // not checked on good input, so this costs nothing there).
        let (check, _) = scan_ccob_as(&header, payload, base, true, opts);
        if check.unreadable.iter().any(|u| u.class == "hash-mismatch") {
            part = check;
        }
    }
    (part, consumed)
}

fn scan_ccob_as(
    header: &ccob::Header,
    payload: &[u8],
    base: u64,
    verify_hash: bool,
    opts: &Settings,
) -> (Part, Option<usize>) {
    let mut part = Part::default();
    let used = ccob_bundle_into(&mut part, header, payload, base, verify_hash, opts);
    (part, used.map(|u| consumed(header, payload.len(), u)))
}

/// Scan the offload bundle that the CCOB `header` decodes `payload` to (at file offset `at`)
/// into `part`: its entries in bundle order, each as [`entry_or_too_large`] reads it, or what
/// stopped the decompression or the bundle. Returns the bytes the zlib stream used (see
/// [`consumed`]), `None` when the CCOB could not be decoded at all. Shared by the in-memory
/// scan and the streamed one (`scan::input::stream_bundle`).
pub(crate) fn ccob_bundle_into<P: std::io::BufRead>(
    part: &mut Part,
    header: &ccob::Header,
    payload: P,
    at: u64,
    verify_hash: bool,
    opts: &Settings,
) -> Option<u64> {
    let label = header.label();
    let r = ccob::decode_streamed(header, payload, verify_hash, |s| {
        let mut found = Vec::new();
        stream::read_bundle(
            s,
            header.uncompressed_size,
            opts.max_code_object,
            |e, body| {
                found.push((
                    e.index,
                    entry_or_too_large(e, body, at, &label, Some(&label), opts.kernels),
                ));
            },
        )?;
        found.sort_by_key(|(i, _)| *i);
        Ok(found)
    });
    match r {
        Err(p) => {
            part.unreadable.push(p.unreadable(at, None, None));
            None
        }
        Ok((Err(p), used)) => {
            part.unreadable.push(Unreadable {
                offset: at,
                processor: None,
                entry_id: None,
                class: p.class.to_owned(),
                reason: format!(
                    "{label}: decompressed bundle at +{}: {}",
                    p.offset, p.reason
                ),
            });
            Some(used)
        }
        Ok((Ok(found), used)) => {
            part.push_records(found);
            Some(used)
        }
    }
}

/// Bytes a CCOB occupies: its total size (v2/v3), its zstd frame (v1 zstd: the payload [`ccob::open`]
/// cut), or what the zlib stream used (v1 zlib).
fn consumed(h: &ccob::Header, payload_len: usize, zlib_used: u64) -> usize {
    match (h.total_size, h.method) {
        (Some(t), _) => t as usize,
        (None, ccob::Method::Zstd) => h.header_len + payload_len,
        (None, ccob::Method::Zlib) => h.header_len + zlib_used as usize,
    }
}

/// The record for one entry met in a decompressed (or streamed) bundle at file offset
/// `bundle_offset`; `None` for the host. `inner`: the container label when the bundle was
/// decompressed.
pub fn entry_or_too_large(
    e: &stream::StreamEntry,
    body: stream::Body<'_>,
    bundle_offset: u64,
    container: &str,
    inner: Option<&str>,
    detail: Detail,
) -> Option<Result<ImageReport, Unreadable>> {
    match body {
        stream::Body::Bytes(data) => entry_record(
            &e.id,
            e.offset,
            data,
            bundle_offset,
            container,
            inner,
            detail,
        ),
        stream::Body::TooLarge { limit } => {
            let id = EntryId::parse(&e.id);
            let what = match inner {
                Some(l) => format!("{l}: bundle entry {} at +{}", e.id, e.offset),
                None => format!(
                    "bundle entry {} at file offset {}",
                    e.id,
                    bundle_offset + e.offset
                ),
            };
            Some(Err(Unreadable {
                offset: bundle_offset + if inner.is_some() { 0 } else { e.offset },
                processor: Some(id.processor().to_owned()).filter(|p| !p.is_empty()),
                entry_id: Some(e.id.clone()),
                class: "too-large".into(),
                reason: too_large(&what, e.size, limit),
            }))
        }
    }
}

/// The reason for a code object over the limit: what, its size, the limit, and how to raise it.
pub fn too_large(what: &str, size: u64, limit: u64) -> String {
    format!("{what} is a {size}-byte code object, more than the {limit}-byte limit on one code object held in memory; raise it with --max-code-object SIZE or RCCLFIX_SCAN_MAX_CODE_OBJECT")
}

/// Process the entries of one parsed bundle at file offset `bundle_offset`. `inner` is set when
/// the bundle was decompressed (offsets inside it are not file offsets).
fn scan_entries(
    b: &bundle::Bundle<'_>,
    bundle_offset: u64,
    container: &str,
    inner: Option<&str>,
    detail: Detail,
    part: &mut Part,
) {
    for e in &b.entries {
        part.push(entry_record(
            e.id,
            e.offset,
            e.data,
            bundle_offset,
            container,
            inner,
            detail,
        ));
    }
}

/// The image (or the record of why not) for one bundle entry `id` at `e_offset` in a bundle at
/// file offset `bundle_offset`; `None` for the host entry. `inner` is set (the container label)
/// when the bundle was decompressed: offsets inside it are not file offsets.
fn entry_record(
    e_id: &str,
    e_offset: u64,
    data: &[u8],
    bundle_offset: u64,
    container: &str,
    inner: Option<&str>,
    detail: Detail,
) -> Option<Result<ImageReport, Unreadable>> {
    let id = EntryId::parse(e_id);
    if id.is_host() {
        return None;
    }
    let at = match inner {
        None => bundle_offset + e_offset,
        Some(_) => bundle_offset,
    };
    let where_ = |p: &Problem| match inner {
        None => String::new(),
        Some(l) => format!("{l}: entry at +{e_offset} (+{} inside it): ", p.offset),
    };
    let processor = Some(id.processor().to_owned()).filter(|p| !p.is_empty());
    if !id.is_amdgcn() {
        let what = if id.triple.starts_with("spirv") {
            "SPIR-V (compiled by the runtime's JIT; its hidden arguments are decided then)"
        } else {
            "not an AMDGPU entry"
        };
        return Some(Err(Unreadable {
            offset: at,
            processor: Some(if id.target_id.is_empty() {
                id.triple.clone()
            } else {
                id.target_id.to_owned()
            }),
            entry_id: Some(e_id.to_owned()),
            class: "unsupported".into(),
            reason: format!("bundle entry {e_id}: {what}"),
        }));
    }
    if data.is_empty() {
        return Some(Err(Unreadable {
            offset: at,
            processor,
            entry_id: Some(e_id.to_owned()),
            class: "truncated".into(),
            reason: format!("bundle entry {e_id} is empty"),
        }));
    }
    if is_bitcode(data) {
        return Some(Err(Unreadable {
            offset: at,
            processor,
            entry_id: Some(e_id.to_owned()),
            class: "bitcode".into(),
            reason: format!("bundle entry {e_id}: not yet linked (bitcode); the hostcall declaration is decided at the device link"),
        }));
    }
    Some(match codeobj::parse_with(data, detail) {
        Ok(co) => {
            let img = image(e_id, &id, container, bundle_offset, data.len() as u64, co);
            Ok(img)
        }
        Err(p) => {
            let reason = format!("{}bundle entry {e_id}: {}", where_(&p), p.reason);
            let off = if inner.is_some() {
                bundle_offset
            } else {
                at + p.offset
            };
            Err(Unreadable {
                offset: off,
                processor,
                entry_id: Some(e_id.to_owned()),
                class: p.class.to_owned(),
                reason,
            })
        }
    })
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
    let meta = co.metadata;
    // The metadata's strings move into the report (160,000 kernels in one library).
    let kernels = meta
        .kernels
        .into_iter()
        .map(|k| {
            let n = k
                .args
                .iter()
                .filter(|a| a.value_kind.starts_with("hidden_"))
                .count();
            let mut hidden_args: Vec<HiddenArg> = Vec::with_capacity(n);
            hidden_args.extend(
                k.args
                    .into_iter()
                    .filter(|a| a.value_kind.starts_with("hidden_"))
                    .map(|a| HiddenArg {
                        value_kind: a.value_kind,
                        offset: a.offset,
                        size: a.size,
                    }),
            );
            let declares_hostcall = hidden_args
                .iter()
                .any(|a| a.value_kind == "hidden_hostcall_buffer");
            KernelReport {
                name: k.name,
                symbol: k.symbol,
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
        trapped_users: co.trapped_users,
        e_flags: co.e_flags,
        metadata_target: meta.target,
        metadata_version: meta.version,
        metadata_notes: meta.notes,
        size,
        unlisted_kernels: meta.unlisted,
    };
    verdict::explain(&mut img, &co.traces);
    img
}

/// Scan a bare code object file (no bundle around it).
pub fn scan_code_object_file(data: &[u8], file: &mut FileReport) {
    Job::CodeObject { data }
        .run(&Settings::default())
        .append_to(file);
}

/// The kpack record of a host ELF: `.hip_fatbin` NOBITS, or an HIPK wrapper.
pub fn kpack_record(h: &elf::HostElf<'_>) -> Option<Unreadable> {
    let hipk = h.wrappers.iter().find(|(_, m)| *m == elf::HIPK);
    if let Some(off) = h.fatbin_nobits {
        let why = if hipk.is_some() || h.kpack_ref.is_some() {
            " (kpack split: HIPK wrapper / .rocm_kpack_ref)"
        } else {
            ""
        };
        Some(Unreadable {
            offset: off,
            processor: None,
            entry_id: None,
            class: "kpack".into(),
            reason: format!("device code externalized{why}: .hip_fatbin is NOBITS, the code objects live in a separate .kpack file"),
        })
    } else {
        hipk.map(|(off, _)| Unreadable {
            offset: *off,
            processor: None,
            entry_id: None,
            class: "kpack".into(),
            reason: "device code externalized (kpack): HIPK fat binary wrapper".into(),
        })
    }
}

/// One `-fgpu-rdc` section `__CLANG_OFFLOAD_BUNDLE__<id_str>` at file offset `off`, its kernels
/// kept as `detail` says.
pub fn rdc_section(id_str: &str, off: u64, bytes: &[u8], detail: Detail) -> Part {
    let mut part = Part::default();
    let id = EntryId::parse(id_str);
    if id.is_host() {
        return part;
    }
    if is_bitcode(bytes) {
        part.unreadable.push(Unreadable {
            offset: off,
            processor: Some(id.processor().to_owned()).filter(|p| !p.is_empty()),
            entry_id: Some(id_str.to_owned()),
            class: "bitcode".into(),
            reason: format!("section __CLANG_OFFLOAD_BUNDLE__{id_str}: not yet linked (bitcode, -fgpu-rdc object); the hostcall declaration is decided at the device link"),
        });
    } else {
        match codeobj::parse_with(bytes, detail) {
            Ok(co) => {
                let img = image(id_str, &id, "rdc-section", off, bytes.len() as u64, co);
                part.images.push(img);
            }
            Err(p) => part.unreadable.push(p.unreadable(
                off,
                Some(id.processor().to_owned()),
                Some(id_str.to_owned()),
            )),
        }
    }
    part
}

/// One device image of an LLVM offload binary, its kernels kept as `detail` says: a complete
/// code object (`ET_DYN`) is read; bitcode and a relocatable code object are not yet linked
/// (the device link decides the hostcall declaration), anything else is not read.
pub fn offload_image(i: &offload::Image<'_>, detail: Detail) -> Part {
    let mut part = Part::default();
    let id_str = format!("offload-{}--{}", i.triple, i.arch);
    let processor = i.arch.split(':').next().unwrap_or("").to_owned();
    let processor = Some(processor).filter(|p| !p.is_empty());
    let what = format!(
        "offload binary at file offset {} (.llvm.offloading, {} {})",
        i.offset, i.triple, i.arch
    );
    let record = |class: &str, reason: String| Unreadable {
        offset: i.offset,
        processor: processor.clone(),
        entry_id: Some(id_str.clone()),
        class: class.into(),
        reason,
    };
    let elf_type = (i.bytes.starts_with(b"\x7fELF") && i.bytes.len() >= 20)
        .then(|| u16::from_le_bytes([i.bytes[16], i.bytes[17]]));
    if !i.triple.starts_with("amdgcn") {
        part.unreadable.push(record(
            "unsupported",
            format!("{what}: not an AMDGPU image"),
        ));
    } else if is_bitcode(i.bytes) || i.kind == offload::IMG_BITCODE || elf_type == Some(1) {
        let form = if elf_type == Some(1) {
            "a relocatable code object"
        } else {
            "bitcode"
        };
        part.unreadable.push(record(
            "bitcode",
            format!("{what}: not yet linked ({form}, new offload driver object); the hostcall declaration is decided at the device link"),
        ));
    } else {
        match codeobj::parse_with(i.bytes, detail) {
            Ok(co) => {
                let id = EntryId::parse(&id_str);
                let mut img = image(
                    &id_str,
                    &id,
                    "offload-binary",
                    i.offset,
                    i.bytes.len() as u64,
                    co,
                );
                if !i.arch.is_empty() {
                    img.target_id = i.arch.clone();
                    img.processor = processor.clone().unwrap_or_default();
                }
                part.images.push(img);
            }
            Err(p) => part
                .unreadable
                .push(record(p.class, format!("{what}: {}", p.reason))),
        }
    }
    part
}
