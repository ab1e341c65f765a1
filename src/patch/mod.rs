//! `rcclfix patch`: remove a provably unused `hidden_hostcall_buffer` declaration after the link.
//!
//! RCCL 2.30.x's device linker compiles the `ncclDevKernel_Generic_*` dispatcher on its own; it
//! reaches the collective functions only through an external function table, so the compiler
//! keeps `hidden_hostcall_buffer` in those kernels' metadata even when no code in the image uses
//! hostcall (ROCm/ROCm#6520). The runtime refuses such kernels on platforms without
//! PCIe AtomicOps because of the declaration alone.
//!
//! For every requested code object, [`codeobj`] proves that nothing in the image can use the
//! hostcall buffer and rewrites each declaring argument to `hidden_none` at the same offset and
//! size ([`msgpack`] keeps the note's length); [`walk`] finds the code objects in host ELFs,
//! plain bundles and CCOBs and writes them back. Anything unproven refuses the whole file (a
//! [`Refusal`], [`refusal`]) and nothing is written.
//!
//! Spec basis for `hidden_none`: llvm `AMDGPUUsage.rst`, code object v3 kernel argument metadata
//! ("an argument that is not used by the kernel; space needs to be left for it, but it does not
//! need to be set up"); v4, v5 and v6 keep that value kind (v5/v6 only add kinds). CLR
//! `rocvirtual.cpp` skips `HiddenNone` when it fills the kernarg segment, and only
//! `HiddenHostcallBuffer` makes it require the hostcall buffer and PCIe atomics.

pub mod asserts;
pub mod codeobj;
mod explain;
pub mod msgpack;
pub mod refusal;
pub mod walk;
pub mod zfit;

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

pub use asserts::{CutPath, InstructionRecord, ASSERT_HANDLERS};
pub use codeobj::{KernelRecord, Proof};
pub use refusal::{Refusal, RefusalKind};
pub use walk::{CcobRecord, CleanImage, ImageRecord};

/// Version of the [`PatchRecord`] JSON shape (2: `asserts`, and per image `instructions` and
/// `cut_paths` when `--asserts` rewrote code; 3: each instruction record is a whole function
/// filled with `s_trap 2; s_endpgm`, with its `size`, `old_sha256` and `why`).
pub const PATCH_SCHEMA_VERSION: u32 = 3;

/// What stays unverified after a patch, said in every record and by the CLI.
pub const UNVERIFIED: &str = "not verified on AMD hardware here: that the runtime loads the patched code objects and \
dispatches the rewritten kernels without a hostcall buffer; run `rcclfix verify` on the target machine";

/// What stays unverified after `--asserts` rewrote code, said in the record beside
/// [`UNVERIFIED`].
pub const UNVERIFIED_ASSERTS: &str = "also not verified on AMD hardware: that a failing device assert still aborts the dispatch \
(now through s_trap 2; s_endpgm, which fills the handler, without its message); run `rcclfix verify --lib <patched library>` \
on the target machine before you trust it";

/// Options for [`patch_file`].
#[derive(Debug, Clone, Default)]
pub struct PatchOptions {
    /// Only patch code objects for these gfx targets (empty: all). Generic entries that run on a
    /// listed target are included.
    pub targets: Vec<String>,
    /// `--asserts`: where hostcall code is present, fill the device-assert handler
    /// ([`ASSERT_HANDLERS`], when its code shows it never returns) and every hostcall user no
    /// kernel reaches with `s_trap 2; s_endpgm`, and patch when no kernel reaches a hostcall user
    /// any more ([`asserts`]). Off: the code is never changed.
    pub asserts: bool,
}

/// The record of one patch run: what was rewritten, per kernel, and why it is safe. `build`
/// stores it as `manifest.patched`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PatchRecord {
    /// [`PATCH_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// rcclfix version.
    pub rcclfix_version: String,
    /// Input path as given.
    pub input: String,
    /// Output path as given.
    pub output: String,
    /// sha256 of the input, lowercase hex.
    pub input_sha256: String,
    /// sha256 of the output, lowercase hex (empty when nothing was written).
    pub output_sha256: String,
    /// Whether a file was written: false when no requested code object declares
    /// `hidden_hostcall_buffer` (then `patch` writes no copy; in place, the file is left as it was).
    pub written: bool,
    /// Size of both files in bytes (the patch never changes it).
    pub size: u64,
    /// How the input was read: `host-elf`, `code-object`, `bundle`, `ccob`.
    pub kind: String,
    /// Targets requested (empty: all).
    pub targets: Vec<String>,
    /// Rewritten code objects.
    pub images: Vec<ImageRecord>,
    /// Code objects read that declare nothing.
    pub clean: Vec<CleanImage>,
    /// Bundle entries not requested, left as they were.
    pub skipped: Vec<String>,
    /// Of `skipped`, those in which a kernel still declares `hidden_hostcall_buffer` (or whose
    /// metadata cannot be read): the output still holds them as they were.
    pub skipped_declaring: Vec<String>,
    /// Whether `--asserts` was given (device-assert handlers may have been rewritten to trap; the
    /// images' `instructions` list each one).
    pub asserts: bool,
    /// Byte ranges `[start, end)` where output and input differ.
    pub changed_ranges: Vec<(u64, u64)>,
    /// What remains unverified ([`UNVERIFIED`]).
    pub unverified: String,
}

/// A refused patch: names the file, the place, the kernels and the reason. Nothing was written.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {location}: refusing to patch{kernels}: {reason}", kernels = fmt_kernels(&refusal.kernels), reason = refusal.reason)]
pub struct PatchRefused {
    /// The input file.
    pub file: String,
    /// Where in the file.
    pub location: String,
    /// What and why.
    pub refusal: Refusal,
}

/// `--target` names no code object in the input. Nothing was written.
#[derive(Debug, thiserror::Error)]
#[error("no code object for {} in {file} (targets present: {})", requested.join(","), if present.is_empty() { "none".to_string() } else { present.join(", ") })]
pub struct NoCodeObject {
    /// The input file.
    pub file: String,
    /// The targets asked for.
    pub requested: Vec<String>,
    /// The gfx targets the input holds (from the skipped entries).
    pub present: Vec<String>,
}

/// The gfx processor names (`gfx1100`, `gfx11-generic`, with a `:xnack-` feature suffix cut off)
/// found in bundle entry IDs and skipped-entry descriptions, sorted and deduplicated.
fn gfx_names(items: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for s in items {
        let mut rest = s.as_str();
        while let Some(i) = rest.find("gfx") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(tail.len());
            let name = tail[..end].trim_end_matches('-');
            out.push(name.to_string());
            rest = &tail[end..];
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The kernels of a refusal for its one line: at most five names, then how many more.
fn fmt_kernels(k: &[String]) -> String {
    const SHOWN: usize = 5;
    match k.len() {
        0 => String::new(),
        n if n <= SHOWN => format!(" {}", k.join(", ")),
        n => format!(
            " {} and {} more kernel(s)",
            k[..SHOWN].join(", "),
            n - SHOWN
        ),
    }
}

/// The environment variable that raises (or lowers) [`DEFAULT_MAX_BUNDLE_BYTES`]: a byte count,
/// optionally with a `K`, `M`, `G` (or `KiB`, `MiB`, `GiB`) suffix, powers of 1024.
pub const MAX_BUNDLE_ENV: &str = "RCCLFIX_MAX_BUNDLE_BYTES";
/// The largest uncompressed size a compressed bundle (CCOB) may claim for `patch` to decompress
/// it (1 GiB): the patched bundle is held in memory while it is recompressed.
pub const DEFAULT_MAX_BUNDLE_BYTES: u64 = 1 << 30;

/// The walk limits: [`DEFAULT_MAX_BUNDLE_BYTES`], or [`MAX_BUNDLE_ENV`] when set.
///
/// Errors: the variable is set but is not a size.
pub fn limits_from_env() -> anyhow::Result<walk::Limits> {
    let max = match std::env::var(MAX_BUNDLE_ENV) {
        Ok(v) => parse_size(&v)
            .with_context(|| format!("{MAX_BUNDLE_ENV}={v:?}: not a size (e.g. 4G)"))?,
        Err(_) => DEFAULT_MAX_BUNDLE_BYTES,
    };
    Ok(walk::Limits {
        max_bundle_bytes: max,
    })
}

/// `4096`, `64K`, `512MiB`, `4G` → bytes (powers of 1024). `None` for anything else.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// Walk `data` and return the edits and the record (with empty paths and digests).
fn plan(
    name: &str,
    data: &[u8],
    opts: &PatchOptions,
    limits: &walk::Limits,
) -> Result<(Vec<walk::Edit>, PatchRecord), PatchRefused> {
    let w = walk::walk(data, &opts.targets, opts.asserts, limits).map_err(|l| PatchRefused {
        file: name.to_string(),
        location: l.location,
        refusal: l.refusal,
    })?;
    let rec = PatchRecord {
        schema_version: PATCH_SCHEMA_VERSION,
        rcclfix_version: env!("CARGO_PKG_VERSION").to_string(),
        input: String::new(),
        output: String::new(),
        input_sha256: String::new(),
        output_sha256: String::new(),
        written: false,
        size: data.len() as u64,
        kind: w.kind,
        targets: opts.targets.clone(),
        images: w.images,
        clean: w.clean,
        skipped: w.skipped,
        skipped_declaring: w.skipped_declaring,
        asserts: opts.asserts,
        changed_ranges: walk::changed_ranges(data, &w.edits),
        unverified: UNVERIFIED.to_string(),
    };
    let mut rec = rec;
    if rec.images.iter().any(|i| !i.instructions.is_empty()) {
        rec.unverified = format!("{UNVERIFIED}; {UNVERIFIED_ASSERTS}");
    }
    Ok((w.edits, rec))
}

/// Patch `data` in memory. Returns the new bytes (same length) and the record (with empty paths
/// and digests, filled in by [`patch_file`]). Uses [`DEFAULT_MAX_BUNDLE_BYTES`].
///
/// Errors: [`PatchRefused`] when any requested code object cannot be proven or rewritten.
pub fn patch_bytes(
    name: &str,
    data: &[u8],
    opts: &PatchOptions,
) -> Result<(Vec<u8>, PatchRecord), PatchRefused> {
    let limits = walk::Limits {
        max_bundle_bytes: DEFAULT_MAX_BUNDLE_BYTES,
    };
    let (edits, rec) = plan(name, data, opts, &limits)?;
    Ok((walk::apply_edits(data, &edits), rec))
}

/// Patch the library at `input` and write the result to `output` atomically (temp + rename),
/// with the input's permission bits. Nothing is written when the patch is refused or fails, and
/// nothing when no requested code object declares `hidden_hostcall_buffer` (the record says
/// `written: false`; no byte-identical copy is made).
/// `output` may not be `input` (see [`patch_in_place`]).
///
/// Errors: the input cannot be read ("cannot read FILE: <os error>"), the output cannot be
/// written, [`NoCodeObject`] (`--target` matches no code object), or [`PatchRefused`] (find it
/// with `err.downcast_ref::<PatchRefused>()`).
pub fn patch_file(input: &Path, output: &Path, opts: &PatchOptions) -> anyhow::Result<PatchRecord> {
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if let (Ok(a), Ok(b), Some(n)) = (
        fs_err::canonicalize(input),
        fs_err::canonicalize(&parent),
        output.file_name(),
    ) {
        if b.join(n) == a {
            anyhow::bail!("{}: --out must differ from the input", output.display());
        }
    }
    write_patched(input, output, opts)
}

/// Patch the library at `path` in place, for `build`'s output folder: the file is replaced
/// atomically, and only when the patch succeeds. Errors as [`patch_file`].
pub fn patch_in_place(path: &Path, opts: &PatchOptions) -> anyhow::Result<PatchRecord> {
    write_patched(path, path, opts)
}

fn write_patched(input: &Path, output: &Path, opts: &PatchOptions) -> anyhow::Result<PatchRecord> {
    let limits = limits_from_env()?;
    // A FIFO, device or folder is refused before it is opened (reading one could block forever).
    let (file, meta) = crate::fsutil::open_regular(input)?;
    let perms = meta.permissions();
    let reading = || format!("cannot read {}", input.display());
    // The input is mapped, not read: the walk touches only the device code, and the hashes and
    // the copy go through the file, so memory is the device code plus one code object (or one
    // CCOB's bundle) at a time, whatever the file's size.
    let map = map_file(&file, meta.len()).with_context(reading)?;
    let data: &[u8] = map.as_deref().unwrap_or(&[]);
    let (edits, mut rec) = plan(&input.display().to_string(), data, opts, &limits)?;
    if !opts.targets.is_empty() && rec.images.is_empty() && rec.clean.is_empty() {
        return Err(NoCodeObject {
            file: input.display().to_string(),
            requested: opts.targets.clone(),
            present: gfx_names(&rec.skipped),
        }
        .into());
    }
    rec.input = input.display().to_string();
    rec.output = output.display().to_string();
    rec.input_sha256 = sha256_of(&file).with_context(reading)?;
    if rec.images.is_empty() {
        // Nothing to rewrite: no copy is written; in place, the file is the (unchanged) output.
        if input == output {
            rec.output_sha256 = rec.input_sha256.clone();
        }
        return Ok(rec);
    }
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let writing = || format!("writing {}", output.display());
    let mut tmp = crate::fsutil::TempFile::new_in(dir).with_context(writing)?;
    copy_with_edits(&file, &edits, tmp.as_file_mut())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", output.display()))?;
    drop(edits);
    drop(map);
    drop(file);
    // Re-check the written result before it replaces anything: the patched images must now read
    // as clean. This reads the temporary file itself, through a mapping of its own.
    let out_map = map_file(tmp.as_file(), meta.len()).with_context(writing)?;
    let out_data: &[u8] = out_map.as_deref().unwrap_or(&[]);
    let (_, again) = plan(&output.display().to_string(), out_data, opts, &limits)
        .context("internal: the patched output does not re-read")?;
    if !again.images.is_empty() {
        anyhow::bail!("internal: the patched output still declares hidden_hostcall_buffer");
    }
    drop(out_map);
    rec.output_sha256 = sha256_of(tmp.as_file()).with_context(writing)?;
    use std::os::unix::fs::PermissionsExt;
    tmp.persist(output, perms.mode() & 0o7777)
        .with_context(writing)?;
    rec.written = true;
    Ok(rec)
}

/// Copy `input` to `out` with `edits` applied: the unchanged stretches are copied file to file
/// (`copy_file_range`, so they never pass through this process's memory), the edits written.
fn copy_with_edits(
    input: &std::fs::File,
    edits: &[walk::Edit],
    out: &mut std::fs::File,
) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let len = input.metadata()?.len();
    let mut src = input;
    let mut copy = |out: &mut std::fs::File, from: u64, to: u64| -> std::io::Result<()> {
        src.seek(SeekFrom::Start(from))?;
        let n = std::io::copy(&mut Read::take(&mut src, to - from), out)?;
        if n != to - from {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the input changed while it was patched",
            ));
        }
        Ok(())
    };
    let mut pos = 0u64;
    for e in edits {
        copy(out, pos, e.offset as u64)?;
        out.write_all(&e.bytes)?;
        pos = (e.offset + e.bytes.len()) as u64;
    }
    copy(out, pos, len)?;
    out.flush()
}

/// sha256 of an open file from its start, lowercase hex, streamed in 1 MiB steps.
fn sha256_of(file: &std::fs::File) -> std::io::Result<String> {
    use sha2::Digest;
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::Start(0))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// A read-only mapping of `file` (`None` for an empty file, which cannot be mapped).
fn map_file(file: &std::fs::File, len: u64) -> std::io::Result<Option<memmap2::Mmap>> {
    if len == 0 {
        return Ok(None);
    }
    crate::fsutil::map_readonly(file).map(Some)
}
