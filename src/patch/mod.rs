//! `rcclfix patch`: remove a provably unused `hidden_hostcall_buffer` declaration after the link.
//!
//! RCCL 2.30.x's device linker compiles the `ncclDevKernel_Generic_*` dispatcher on its own; it
//! reaches the collective functions only through an external function table, so the compiler
//! keeps `hidden_hostcall_buffer` in those kernels' metadata even when no code in the image uses
//! hostcall (shared/reference/rccl.md §4). The runtime refuses such kernels on platforms without
//! PCIe AtomicOps because of the declaration alone.
//!
//! For every requested code object, [`codeobj`] proves that nothing in the image can use the
//! hostcall buffer and rewrites each declaring argument to `hidden_none` at the same offset and
//! size ([`msgpack`] keeps the note's length); [`container`] finds the code objects in host ELFs,
//! plain bundles and CCOBs and writes them back. Anything unproven refuses the whole file and
//! nothing is written.
//!
//! Spec basis for `hidden_none`: llvm `AMDGPUUsage.rst`, code object v3 kernel argument metadata
//! ("an argument that is not used by the kernel; space needs to be left for it, but it does not
//! need to be set up"); v4, v5 and v6 keep that value kind (v5/v6 only add kinds). CLR
//! `rocvirtual.cpp` skips `HiddenNone` when it fills the kernarg segment, and only
//! `HiddenHostcallBuffer` makes it require the hostcall buffer and PCIe atomics.

pub mod codeobj;
pub mod container;
pub mod msgpack;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

pub use codeobj::{KernelRecord, Proof, Refusal, RefusalKind};
pub use container::{CcobRecord, CleanImage, ImageRecord};

/// Version of the [`PatchRecord`] JSON shape.
pub const PATCH_SCHEMA_VERSION: u32 = 1;

/// What stays unverified after a patch, said in every record and by the CLI.
pub const UNVERIFIED: &str = "not verified on AMD hardware here: that the runtime loads the patched code objects and \
dispatches the rewritten kernels without a hostcall buffer; run `rcclfix verify` on the target machine";

/// Options for [`patch_file`].
#[derive(Debug, Clone, Default)]
pub struct PatchOptions {
    /// Only patch code objects for these gfx targets (empty: all). Generic entries that run on a
    /// listed target are included.
    pub targets: Vec<String>,
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

fn fmt_kernels(k: &[String]) -> String {
    if k.is_empty() {
        String::new()
    } else {
        format!(" {}", k.join(", "))
    }
}

/// Patch `data` in memory. Returns the new bytes (same length) and the record (with empty paths
/// and digests, filled in by [`patch_file`]).
///
/// Errors: [`PatchRefused`] when any requested code object cannot be proven or rewritten.
pub fn patch_bytes(
    name: &str,
    data: &[u8],
    opts: &PatchOptions,
) -> Result<(Vec<u8>, PatchRecord), PatchRefused> {
    let w = container::walk(data, &opts.targets).map_err(|l| PatchRefused {
        file: name.to_string(),
        location: l.location,
        refusal: l.refusal,
    })?;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for (i, (a, b)) in data.iter().zip(&w.bytes).enumerate() {
        if a != b {
            match ranges.last_mut() {
                Some((_, end)) if *end == i as u64 => *end += 1,
                _ => ranges.push((i as u64, i as u64 + 1)),
            }
        }
    }
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
        changed_ranges: ranges,
        unverified: UNVERIFIED.to_string(),
    };
    Ok((w.bytes, rec))
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
    let cannot_read = |e: std::io::Error| anyhow::anyhow!("cannot read {}: {e}", input.display());
    let meta = std::fs::metadata(input).map_err(cannot_read)?;
    if meta.is_dir() {
        anyhow::bail!("cannot read {}: is a directory", input.display());
    }
    let perms = meta.permissions();
    let data = std::fs::read(input).map_err(cannot_read)?;
    let (bytes, mut rec) = patch_bytes(&input.display().to_string(), &data, opts)?;
    if !opts.targets.is_empty() && rec.images.is_empty() && rec.clean.is_empty() {
        return Err(NoCodeObject {
            file: input.display().to_string(),
            requested: opts.targets.clone(),
            present: gfx_names(&rec.skipped),
        }
        .into());
    }
    use sha2::Digest;
    rec.input = input.display().to_string();
    rec.output = output.display().to_string();
    rec.input_sha256 = hex::encode(sha2::Sha256::digest(&data));
    if rec.images.is_empty() {
        // Nothing to rewrite: no copy is written; in place, the file is the (unchanged) output.
        if input == output {
            rec.output_sha256 = rec.input_sha256.clone();
        }
        return Ok(rec);
    }
    // Re-check a changed result before writing it: the patched images must now read as clean.
    if !rec.images.is_empty() {
        let (_, again) = patch_bytes(&output.display().to_string(), &bytes, opts)
            .context("internal: the patched output does not re-read")?;
        if !again.images.is_empty() {
            anyhow::bail!("internal: the patched output still declares hidden_hostcall_buffer");
        }
    }
    crate::fsutil::atomic_write(output, &bytes)
        .with_context(|| format!("writing {}", output.display()))?;
    fs_err::set_permissions(output, perms)?;
    rec.output_sha256 = hex::encode(sha2::Sha256::digest(&bytes));
    rec.written = true;
    Ok(rec)
}

/// The proof of a record as text, one block per rewritten kernel (what `--explain` prints).
pub fn explain(rec: &PatchRecord) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for img in &rec.images {
        let place = if img.entry_id.is_empty() {
            "code object".to_string()
        } else {
            img.entry_id.clone()
        };
        let _ = writeln!(
            s,
            "{place} ({}, code object v{}, {}):",
            img.processor, img.code_object_version, img.container
        );
        for k in &img.kernels {
            let _ = writeln!(
                s,
                "  kernel {}: {} -> {} at kernarg offset {} size {} (kernarg segment {} bytes, unchanged)",
                k.name, k.from, k.to, k.arg_offset, k.arg_size, k.kernarg_segment_size
            );
            let _ = writeln!(s, "    declared because: {}", k.cause);
        }
        let _ = writeln!(s, "  proof:");
        for st in &img.proof.statements {
            let _ = writeln!(s, "    - {st}");
        }
        for n in &img.notes {
            let _ = writeln!(s, "  metadata note descriptor at code-object offset {} ({} bytes) rewritten at the same length", n.offset, n.size);
        }
        if let Some(c) = &img.ccob {
            let _ = writeln!(
                s,
                "  compressed bundle at 0x{:x}: recompressed at level {} into {} bytes + {} bytes of padding (total size {} unchanged), hash {} -> {}",
                c.offset, c.level, c.frame_bytes, c.padding_bytes, c.total_size, c.hash_before, c.hash_after
            );
        }
    }
    if rec.images.is_empty() {
        let _ = writeln!(
            s,
            "no requested code object declares hidden_hostcall_buffer; nothing was written"
        );
    }
    let _ = writeln!(s, "unverified: {}", rec.unverified);
    s
}

/// `rcclfix patch LIB --out NEW`
#[derive(Debug, clap::Args)]
pub struct PatchArgs {
    /// The library (host ELF with .hip_fatbin), code object, offload bundle or CCOB to patch.
    pub lib: PathBuf,
    /// Where to write the patched file (written atomically; never the input).
    #[arg(long, value_name = "NEW")]
    pub out: PathBuf,
    /// Only patch code objects for these gfx targets (comma-separated), e.g. gfx1100.
    #[arg(long, value_delimiter = ',')]
    pub target: Vec<String>,
    /// Print the proof per kernel (on stderr when --json is given).
    #[arg(long)]
    pub explain: bool,
    /// Print the patch record as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

impl PatchArgs {
    /// Run the patch. Exit codes: 0 patched, or nothing to patch (then nothing is written and
    /// stderr says "nothing to patch"), 1 refused because hostcall code is present, 2 refused
    /// because the proof is incomplete, `--target` names no code object in the input, or any other
    /// error.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let opts = PatchOptions {
            targets: self.target.clone(),
        };
        let rec = match patch_file(&self.lib, &self.out, &opts) {
            Ok(r) => r,
            Err(err) => {
                let code = match err.downcast_ref::<PatchRefused>() {
                    Some(r) if r.refusal.kind == RefusalKind::UsesHostcall => {
                        crate::EXIT_CHECK_FAILED
                    }
                    Some(_) => crate::EXIT_ERROR,
                    None if err.downcast_ref::<NoCodeObject>().is_some() => crate::EXIT_ERROR,
                    None => return Err(err),
                };
                crate::ui::print_error(&err);
                eprintln!("note: nothing was written");
                return Ok(ExitCode::from(code));
            }
        };
        let n: usize = rec.images.iter().map(|i| i.kernels.len()).sum();
        if !rec.written {
            let mut targets: Vec<String> = rec.clean.iter().map(|c| c.processor.clone()).collect();
            targets.sort();
            targets.dedup();
            eprintln!(
                "nothing to patch: no kernel of {} declares hidden_hostcall_buffer; {} was not written",
                if targets.is_empty() { "the input".to_string() } else { targets.join(", ") },
                self.out.display()
            );
            if self.json {
                println!("{}", serde_json::to_string_pretty(&rec)?);
            } else if self.explain {
                print!("{}", explain(&rec));
            }
            return Ok(ExitCode::SUCCESS);
        }
        crate::ui::status(
            "Patched",
            format!(
                "{} kernel argument(s) in {} code object(s) -> {}",
                n,
                rec.images.len(),
                self.out.display()
            ),
        );
        if self.json {
            if self.explain {
                eprint!("{}", explain(&rec));
            }
            println!("{}", serde_json::to_string_pretty(&rec)?);
        } else {
            if self.explain {
                print!("{}", explain(&rec));
            }
            println!("{}", self.out.display());
        }
        crate::ui::warn(UNVERIFIED);
        Ok(ExitCode::SUCCESS)
    }
}
