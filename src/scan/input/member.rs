//! Archive members too large to hold ([`crate::scan::Settings::memory_budget`]) that were not
//! spilled to a mapped file ([`super::budget::spill`]), streamed: a raw bundle or CCOB in one pass
//! ([`super::stream_bundle`]), a host ELF in a few ([`super::stream_elf`]), each reopened through
//! [`Reopen`]. Nothing is extracted to a named file.

use std::io::Read;

use super::budget::{over_budget, size_lie, Reopen};
use super::stream_bundle::{rest_of, stream_failed, walk_stream};
use super::{io_unreadable, kpack_file, new_file, scan_buffer, too_deep, Format, MAX_DEPTH};
use crate::scan::model::FileReport;
use crate::scan::stream::Stream;
use crate::scan::walk::{self, Part};
use crate::scan::Settings;

/// Scan a member of `size` bytes that is too large to hold: `first` reads it once from its start
/// (bytes already sniffed included; `None`: `again` opens it for the first pass too), `again`
/// reads it again. A bare code object is held (it is
/// the code object); a raw bundle or CCOB file is streamed in one pass; a host ELF in a few, as
/// the runtime finds its device code ([`super::stream_elf::stream_elf`]). Nested archives are
/// not streamed (unknown, naming the budget).
#[allow(clippy::too_many_arguments)]
pub(super) fn stream_member(
    mname: &str,
    what: &str,
    fmt: Format,
    size: u64,
    first: Option<&mut dyn Read>,
    again: &mut dyn Reopen,
    depth: u32,
    opts: &Settings,
) -> Vec<FileReport> {
    let mut files = Vec::new();
    if fmt == Format::HostElf {
        files.extend(super::stream_elf::stream_elf(
            mname, what, size, first, again, opts,
        ));
        return files;
    }
    let mut own;
    let first: &mut dyn Read = match first {
        Some(r) => r,
        None => match again.reopen() {
            Ok(r) => {
                own = r;
                &mut own
            }
            Err(e) => {
                files.push(io_unreadable(mname, "io", format!("{what}: {e}")));
                return files;
            }
        },
    };
    match fmt {
        Format::CodeObject => {
            if size > opts.max_code_object {
                files.push(io_unreadable(
                    mname,
                    "too-large",
                    walk::too_large(what, size, opts.max_code_object),
                ));
                return files;
            }
            let mut s = Stream::new(first);
            let mut body = Vec::new();
            match s.read_to(&mut body, size + 1) {
                Ok(n) if n == size => {
                    if let Err(e) = scan_buffer(mname, &body, false, depth + 1, &mut files, opts) {
                        files.push(io_unreadable(mname, "io", format!("{e:#}")));
                    }
                }
                Ok(n) => files.push(size_lie(mname, what, size, n)),
                Err(e) => files.push(io_unreadable(mname, "io", format!("{what}: {e}"))),
            }
        }
        Format::Bundle | Format::Ccob => {
            let mut f = new_file(
                mname,
                if fmt == Format::Bundle {
                    "bundle"
                } else {
                    "ccob"
                },
            );
            let mut s = Stream::new(first);
            let mut part = Part::default();
            let r = walk_stream(&mut s, size, 0, &mut part, &mut Vec::new(), opts);
            part.append_to(&mut f);
            if let Err(e) = r {
                f.unreadable.push(stream_failed(what, size, s.pos(), e));
            } else if let Some(u) = rest_of(&mut s, what, size) {
                f.unreadable.push(u);
            }
            files.push(f);
        }
        Format::Kpack => files.push(kpack_file(mname)),
        _ if depth + 1 >= MAX_DEPTH => files.push(too_deep(mname)),
        _ => files.push(over_budget(mname, what, size, opts)),
    }
    files
}
