//! `rcclfix patch`: post-link removal of a provably unused hostcall declaration. The arguments,
//! the call into [`crate::patch::patch_file`], and the rendering (status lines, `--explain`,
//! `--json`).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::patch::{
    patch_file, NoCodeObject, PatchOptions, PatchRecord, PatchRefused, RefusalKind,
};
use crate::ui::Ui;

/// The subcommand's arguments (clap): `rcclfix patch LIB --out NEW`.
#[derive(Debug, clap::Args)]
pub struct Args {
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
    /// Also write the patch record (the `--json` document) to FILE, atomically, when the patch
    /// is written: what `package` and a build folder's `manifest.json` (`patched`) hold as the
    /// provenance of a patched library.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Where hostcall code is reachable only through device asserts (RCCL built without NDEBUG),
    /// fill the device-assert handler (__assert_fail, when its code shows it never returns) and
    /// every hostcall user no kernel reaches with `s_trap 2; s_endpgm`, and patch when no kernel
    /// reaches a hostcall user any more: a failing assert then aborts without its message. Every
    /// rewritten function is in the record (--explain). NOT verified on AMD hardware here: run
    /// `rcclfix verify --lib NEW` on the target machine before you use the result.
    #[arg(long)]
    pub asserts: bool,
}

/// Run the patch. Exit codes: 0 patched, or nothing to patch (then nothing is written and stderr
/// says "nothing to patch"); 1 refused because hostcall code is present (a
/// [`crate::CheckFailed`]); 2 refused because the proof is incomplete, `--target` names no code
/// object in the input, or any other error.
pub fn run(a: Args, _ui: &Ui) -> anyhow::Result<ExitCode> {
    let opts = PatchOptions {
        targets: a.target.clone(),
        asserts: a.asserts,
    };
    let rec = match patch_file(&a.lib, &a.out, &opts) {
        Ok(r) => r,
        Err(err) => {
            let uses_hostcall = match err.downcast_ref::<PatchRefused>() {
                Some(r) => r.refusal.kind == RefusalKind::UsesHostcall,
                None if err.downcast_ref::<NoCodeObject>().is_some() => false,
                None => return Err(err),
            };
            // The refusal and what it means for the output, as one error `main` prints.
            let text = format!("{err:#}\nnote: nothing was written");
            return Err(if uses_hostcall {
                crate::CheckFailed::new(text).into()
            } else {
                anyhow::Error::msg(text)
            });
        }
    };
    let n: usize = rec.images.iter().map(|i| i.kernels.len()).sum();
    if !rec.written {
        let mut targets: Vec<String> = rec.clean.iter().map(|c| c.processor.clone()).collect();
        targets.sort();
        targets.dedup();
        crate::ui::message(format_args!(
            "nothing to patch: no kernel of {} declares hidden_hostcall_buffer; {} was not written",
            if targets.is_empty() {
                "the input".to_string()
            } else {
                targets.join(", ")
            },
            a.out.display()
        ));
        if a.json {
            crate::outln!("{}", serde_json::to_string_pretty(&rec)?)?;
        } else if a.explain {
            crate::out!("{}", explain(&rec))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(r) = &a.record {
        let mut doc = serde_json::to_vec_pretty(&rec)?;
        doc.push(b'\n');
        crate::fsutil::atomic_write(r, &doc).map_err(|e| {
            anyhow::anyhow!("{}: cannot write the patch record: {e:#}", r.display())
        })?;
    }
    crate::ui::status(
        "Patched",
        format!(
            "{} kernel argument(s) in {} code object(s) -> {}",
            n,
            rec.images.len(),
            a.out.display()
        ),
    );
    if a.json {
        if a.explain {
            crate::err!("{}", explain(&rec));
        }
        crate::outln!("{}", serde_json::to_string_pretty(&rec)?)?;
    } else {
        if a.explain {
            crate::out!("{}", explain(&rec))?;
        }
        crate::outln!("{}", a.out.display())?;
    }
    if !rec.skipped_declaring.is_empty() {
        crate::ui::warn(format!(
            "left declaring hidden_hostcall_buffer, not requested by --target: {}",
            crate::ui::escape(&rec.skipped_declaring.join(", "))
        ));
    }
    crate::ui::warn(&rec.unverified);
    Ok(ExitCode::SUCCESS)
}

/// The proof of a record as text, one block per rewritten kernel (what `--explain` prints).
fn explain(rec: &PatchRecord) -> String {
    use std::fmt::Write;
    // Entry IDs, processors and kernel names come from the input: escaped for the terminal.
    use crate::ui::escape as e;
    let mut s = String::new();
    for img in &rec.images {
        let place = if img.entry_id.is_empty() {
            "code object".to_string()
        } else {
            e(&img.entry_id).into_owned()
        };
        let _ = writeln!(
            s,
            "{place} ({}, code object v{}, {}):",
            e(&img.processor),
            img.code_object_version,
            img.container
        );
        for k in &img.kernels {
            let _ = writeln!(
                s,
                "  kernel {}: {} -> {} at kernarg offset {} size {} (kernarg segment {} bytes, unchanged)",
                e(&k.name),
                k.from,
                k.to,
                k.arg_offset,
                k.arg_size,
                k.kernarg_segment_size
            );
            let _ = writeln!(s, "    declared because: {}", e(&k.cause.to_string()));
        }
        let _ = writeln!(s, "  proof:");
        for st in &img.proof.statements {
            let _ = writeln!(s, "    - {}", e(&st.to_string()));
        }
        for i in &img.instructions {
            let at = match i.file_offset {
                Some(f) => format!("file offset 0x{f:x}"),
                None => "inside the compressed bundle".to_string(),
            };
            let _ = writeln!(
                s,
                "  rewrote {} at 0x{:x}, {} bytes (code-object offset 0x{:x}, {at}; {}): {}… -> {}… ({} over the whole extent)",
                e(&i.symbol),
                i.address,
                i.size,
                i.code_object_offset,
                i.why,
                i.old,
                i.new,
                i.new_text
            );
        }
        for c in &img.cut_paths {
            let _ = writeln!(s, "  no longer reaches a hostcall user: {}", e(&c.before));
            let _ = writeln!(s, "    because {}", e(&c.now));
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
