//! The evidence doctor reads, as one value ([`Sources`]): the sysfs and procfs roots (or a
//! snapshot's), the kernel log, the `--log`, `--vm-config` and `--lspci` files, the libraries to
//! scan and the HIP probe. `gather` fills it; `overall` and `coverage` read it after the verdicts,
//! so they depend on this module, not on `gather`.

use std::path::PathBuf;

use super::hip::HipProbe;
use super::kmsg::KernelLog;
use super::library;

/// Where the evidence comes from; [`super::diagnose`] reads only these.
#[derive(Debug, Clone)]
pub struct Sources {
    /// sysfs root (`/sys` or a snapshot's `sys/`).
    pub sysfs: PathBuf,
    /// procfs root.
    pub proc: PathBuf,
    /// The kernel log, already read.
    pub kernel_log: KernelLog,
    /// `--log` files.
    pub logs: Vec<PathBuf>,
    /// `--vm-config` files.
    pub vm_configs: Vec<PathBuf>,
    /// `--lspci` files: when given, the PCI devices come from them, and sysfs/procfs are not read.
    pub lspci: Vec<PathBuf>,
    /// What the PCI devices are read from, for the report (`/sys`, `snapshot snap.tar`, …).
    pub pci_origin: String,
    /// Libraries to scan (explicit or discovered).
    pub libraries: Vec<library::Candidate>,
    /// The HIP probe result (or why it was not run).
    pub hip: HipProbe,
    /// The installed ROCm release (`/opt/rocm/.info/version`), live mode only.
    pub installed_rocm: Option<String>,
    /// Whether this is the live system (not a snapshot).
    pub live: bool,
    /// A snapshot tar's temporary extraction folder and the name the report uses for it
    /// (`snap.tar!`): a path inside the folder is shown as `snap.tar!sys/…`, never as the
    /// temporary path, which is gone after the run.
    pub extracted: Option<(PathBuf, String)>,
}

impl Sources {
    /// `s` with the temporary extraction folder of a snapshot tar replaced by the tar's name.
    pub fn shown(&self, s: &str) -> String {
        match &self.extracted {
            Some((dir, name)) => s.replace(&format!("{}/", dir.display()), name),
            None => s.to_owned(),
        }
    }
}
