//! `rcclfix scan --json`'s compact document, streamed: one JSON object per line for every
//! target, image, declaring kernel and unreadable record, so a scan of a large tree never holds
//! the document as one value (docs/scan-json.md, "Compact"). [`super::output`] decides when it is
//! written; this module only writes it.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use super::model::{ImageReport, KernelReport, ScanReport, TargetState};

/// A target's line in the compact document.
#[derive(Debug, Serialize)]
struct TargetLine {
    state: &'static str,
    images: usize,
    kernels: usize,
    declaring: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// An image's line in the compact document: its facts and counts, no kernels.
#[derive(Debug, Serialize)]
struct ImageLine<'a> {
    entry_id: &'a str,
    processor: &'a str,
    target_id: &'a str,
    code_object_version: u32,
    container: &'a str,
    bundle_offset: u64,
    size: u64,
    e_flags: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata_target: Option<&'a str>,
    #[serde(skip_serializing_if = "<[u64]>::is_empty")]
    metadata_version: &'a [u64],
    metadata_notes: u32,
    kernels: usize,
    declaring: usize,
    hostcall_users: &'a [String],
}

/// A declaring kernel's line in the compact document (`image`: index into the file's `images`).
#[derive(Debug, Serialize)]
struct KernelLine<'a> {
    image: usize,
    processor: &'a str,
    #[serde(flatten)]
    kernel: &'a KernelReport,
}

/// Write the compact document: one JSON object per line for every target, image, declaring
/// kernel and unreadable record (docs/scan-json.md, "Compact").
///
/// Errors: writing to `out` failed.
pub fn write_compact(
    out: &mut impl Write,
    report: &ScanReport,
    states: &BTreeMap<String, TargetState>,
    unattributed: usize,
    code: u8,
) -> anyhow::Result<()> {
    writeln!(out, "{{")?;
    writeln!(out, "  \"schema_version\": {},", report.schema_version)?;
    writeln!(
        out,
        "  \"rcclfix_version\": {},",
        serde_json::to_string(&report.rcclfix_version)?
    )?;
    writeln!(out, "  \"shape\": \"compact\",")?;
    writeln!(out, "  \"targets\": {{")?;
    let n = states.len();
    for (i, (t, st)) in states.iter().enumerate() {
        let imgs: Vec<&ImageReport> = report
            .files
            .iter()
            .flat_map(|f| &f.images)
            .filter(|img| super::verdict::runs_on(&img.processor, t))
            .collect();
        let line = TargetLine {
            state: match st {
                TargetState::Declares { .. } => "declares",
                TargetState::Clean { .. } => "clean",
                TargetState::Unknown { .. } => "unknown",
                TargetState::NoCode { .. } => "no-code",
            },
            images: imgs.len(),
            kernels: imgs.iter().map(|i| i.kernel_count()).sum(),
            declaring: match st {
                TargetState::Declares { kernels } => kernels.len(),
                _ => 0,
            },
            reason: match st {
                TargetState::Unknown { reason } | TargetState::NoCode { reason } => {
                    Some(reason.clone())
                }
                _ => None,
            },
        };
        writeln!(
            out,
            "    {}: {}{}",
            serde_json::to_string(t)?,
            serde_json::to_string(&line)?,
            comma(i, n)
        )?;
    }
    writeln!(out, "  }},")?;
    writeln!(out, "  \"unattributed_unknown\": {unattributed},")?;
    writeln!(out, "  \"exit_code\": {code},")?;
    writeln!(out, "  \"files\": [")?;
    let nf = report.files.len();
    for (fi, f) in report.files.iter().enumerate() {
        writeln!(out, "    {{")?;
        writeln!(out, "      \"path\": {},", serde_json::to_string(&f.path)?)?;
        writeln!(out, "      \"kind\": {},", serde_json::to_string(&f.kind)?)?;
        let images: Vec<ImageLine> = f
            .images
            .iter()
            .map(|i| ImageLine {
                entry_id: &i.entry_id,
                processor: &i.processor,
                target_id: &i.target_id,
                code_object_version: i.code_object_version,
                container: &i.container,
                bundle_offset: i.bundle_offset,
                size: i.size,
                e_flags: i.e_flags,
                metadata_target: i.metadata_target.as_deref(),
                metadata_version: &i.metadata_version,
                metadata_notes: i.metadata_notes,
                kernels: i.kernel_count(),
                declaring: i.kernels.iter().filter(|k| k.declares_hostcall).count(),
                hostcall_users: &i.hostcall_users,
            })
            .collect();
        let kernels: Vec<KernelLine> = f
            .images
            .iter()
            .enumerate()
            .flat_map(|(ii, i)| {
                i.kernels
                    .iter()
                    .filter(|k| k.declares_hostcall)
                    .map(move |k| KernelLine {
                        image: ii,
                        processor: &i.processor,
                        kernel: k,
                    })
            })
            .collect();
        write_lines(out, "images", &images, false)?;
        write_lines(out, "kernels", &kernels, false)?;
        write_lines(out, "unreadable", &f.unreadable, true)?;
        writeln!(out, "    }}{}", comma(fi, nf))?;
    }
    writeln!(out, "  ]")?;
    writeln!(out, "}}")?;
    Ok(())
}

fn comma(i: usize, n: usize) -> &'static str {
    if i + 1 < n {
        ","
    } else {
        ""
    }
}

/// `"key": [` one compact object per line `]` at file level.
fn write_lines<T: Serialize>(
    out: &mut impl Write,
    key: &str,
    items: &[T],
    last: bool,
) -> anyhow::Result<()> {
    let end = if last { "" } else { "," };
    if items.is_empty() {
        writeln!(out, "      \"{key}\": []{end}")?;
        return Ok(());
    }
    writeln!(out, "      \"{key}\": [")?;
    for (i, it) in items.iter().enumerate() {
        writeln!(
            out,
            "        {}{}",
            serde_json::to_string(it)?,
            comma(i, items.len())
        )?;
    }
    writeln!(out, "      ]{end}")?;
    Ok(())
}
