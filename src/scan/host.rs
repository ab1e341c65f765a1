//! A host ELF's device code located as the runtime finds it: the `__hip_fatbin_wrapper`s
//! ([`wrapper`]) and the bundles they point at, the rest of `.hip_fatbin` ([`elf`]), the
//! `-fgpu-rdc` sections, and an object's LLVM offload binaries ([`offload`]); each becomes
//! [`Job`]s for [`walk`] to run.
//!
//! The rule (ARCHITECTURE.md): scan reads what the loader and comgr read; where they could
//! disagree, unknown.

use super::model::{FileReport, Unreadable};
use super::walk::{kpack_record, locate_fatbin_at, locate_pointed, Job, Part};
use super::wrapper::{self, Wrapper};
use super::{elf, offload, Settings};

/// The [`Job`]s of a host ELF, in file order: kpack markers, the bundles its
/// `__hip_fatbin_wrapper`s point at ([`wrapper::find`]) and the rest of `.hip_fatbin`, the
/// `-fgpu-rdc` sections, the images of the LLVM offload binaries in `.llvm.offloading`
/// ([`offload`]). Sets `kind` (`host-elf`, or `rdc-object` for an object whose device code is
/// not yet linked). Returns `false` when the ELF carries no device code (no wrapper, no
/// device-code section).
///
/// What the runtime loads is what the wrappers point at, whatever the sections are called or
/// whether they are there: a wrapper that cannot be followed, and a bundle in `.hip_fatbin` that
/// no wrapper points at while wrappers exist, are `wrapper` / `unreferenced` records (unknown);
/// the bundles of such a `.hip_fatbin` are still read.
pub fn locate_host_elf<'a>(
    data: &'a [u8],
    kind: &mut String,
    opts: &Settings,
    jobs: &mut Vec<Job<'a>>,
) -> bool {
    let mut h = match elf::inspect(data) {
        Ok(h) => h,
        Err(p) => {
            jobs.push(Job::Done(Part::unreadable(p.unreadable(0, None, None))));
            return true;
        }
    };
    let wrappers = match wrapper::find(data) {
        Ok(w) => w,
        Err(p) => {
            jobs.push(Job::Done(Part::unreadable(p.unreadable(0, None, None))));
            return true;
        }
    };
    for w in &wrappers {
        if !h.wrappers.iter().any(|(o, _)| *o == w.offset) {
            h.wrappers.push((w.offset, w.magic));
        }
    }
    h.wrappers.sort_unstable();
    let offloading = match offload::sections(data) {
        Ok(o) => o,
        Err(p) => {
            jobs.push(Job::Done(Part::unreadable(p.unreadable(0, None, None))));
            return true;
        }
    };
    if !h.has_device_code() && offloading.is_empty() {
        return false;
    }
    if let Some(u) = kpack_record(&h) {
        jobs.push(Job::Done(Part::unreadable(u)));
    }
    let (pointed, records) = pointed(&wrappers, !h.rdc.is_empty());
    jobs.extend(records.into_iter().map(|u| Job::Done(Part::unreadable(u))));
    // The bundles in `.hip_fatbin` (where it is there): read, and each that no wrapper points
    // at is reported.
    let mut starts = Vec::new();
    if let Some((off, bytes)) = h.fatbin {
        *kind = "host-elf".into();
        locate_fatbin_at(bytes, off, opts, jobs, &mut starts);
        if h.wrappers.iter().any(|(_, m)| *m == elf::HIPF) {
            for &at in starts
                .iter()
                .filter(|s| !pointed.iter().any(|p| p.0 == **s))
            {
                jobs.push(Job::Done(Part::unreadable(unreferenced(at))));
            }
        }
    }
    // What the wrappers point at elsewhere (a renamed section, no sections, the middle of one).
    for &(t, end, w) in pointed.iter().filter(|p| !starts.contains(&p.0)) {
        *kind = "host-elf".into();
        locate_pointed(&data[t as usize..end as usize], t, w, opts, jobs);
    }
    if !h.rdc.is_empty() || !offloading.is_empty() {
        if h.fatbin.is_none() && pointed.is_empty() {
            *kind = "rdc-object".into();
        }
        for (id, off, bytes) in h.rdc {
            jobs.push(Job::Rdc { id, off, bytes });
        }
        for (off, bytes) in offloading {
            match offload::images(bytes, off) {
                Ok(images) => jobs.extend(images.into_iter().map(Job::Offload)),
                Err(p) => jobs.push(Job::Done(Part::unreadable(p.unreadable(0, None, None)))),
            }
        }
    }
    true
}

/// What the runtime reads through `wrappers`: each HIPF wrapper's target, once (the fat binary's
/// file offset, the end of the loaded bytes that hold it, the wrapper's file offset), in wrapper
/// order, and a `wrapper` record (unknown) for each wrapper that cannot be followed. An
/// `-fgpu-rdc` object's wrapper (`has_rdc`) names the fat binary its device link makes; its rdc
/// sections are the device code, reported as not yet linked, so it is no record.
pub fn pointed(wrappers: &[Wrapper], has_rdc: bool) -> (Vec<(u64, u64, u64)>, Vec<Unreadable>) {
    let mut pointed: Vec<(u64, u64, u64)> = Vec::new();
    let mut records = Vec::new();
    for w in wrappers.iter().filter(|w| w.magic == elf::HIPF) {
        match &w.target {
            Ok((t, end)) => {
                if !pointed.iter().any(|p| p.0 == *t) {
                    pointed.push((*t, *end, w.offset));
                }
            }
            Err(_) if w.unlinked && has_rdc => {}
            Err(why) => records.push(Unreadable {
                offset: w.offset,
                processor: None,
                entry_id: None,
                class: "wrapper".into(),
                reason: format!(
                    "the __hip_fatbin_wrapper at file offset {} cannot be followed: {why}",
                    w.offset
                ),
            }),
        }
    }
    (pointed, records)
}

/// The record (unknown) of a bundle at file offset `at` in `.hip_fatbin` that no wrapper points
/// at, in a file with wrappers.
pub fn unreferenced(at: u64) -> Unreadable {
    Unreadable {
        offset: at,
        processor: None,
        entry_id: None,
        class: "unreferenced".into(),
        reason: format!("the bundle at file offset {at} in .hip_fatbin is not one a __hip_fatbin_wrapper points at: the runtime does not load it, and what it loads may differ"),
    }
}

/// Scan a host ELF's device code into `file` on this thread. Returns `false` when the ELF carries
/// none.
pub fn scan_host_elf(data: &[u8], file: &mut FileReport, opts: &Settings) -> bool {
    let mut jobs = Vec::new();
    let found = locate_host_elf(data, &mut file.kind, opts, &mut jobs);
    for j in jobs {
        j.run(opts).append_to(file);
    }
    found
}
