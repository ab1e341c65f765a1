//! Scan result types, serialised as the versioned `--json` schema (`scan.json` in build outputs).
//!
//! Shape: [`ScanReport`] → files ([`FileReport`]) → device images ([`ImageReport`], one per code
//! object, i.e. per bundle entry) → kernels ([`KernelReport`]). Anything that could not be read is an
//! [`Unreadable`] record with a byte offset and reason, never silently dropped.

use serde::{Deserialize, Serialize};

/// Version of the JSON schema below; bumped on any incompatible change. Version 2: `scan --json`
/// writes the compact document by default (`--json=full` this full one); this full report (the
/// build's `scan.json`) has the same fields as version 1. Version 3: a target with no image and
/// nothing unreadable is the state `no-code` ([`TargetState::NoCode`]), no longer `unknown`.
pub const SCHEMA_VERSION: u32 = 3;

/// The whole result of one `rcclfix scan`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScanReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// rcclfix version that produced the report.
    pub rcclfix_version: String,
    /// Each file that carries device code (or failed to be read).
    pub files: Vec<FileReport>,
}

/// One scanned file (a member of an archive is named `archive!member`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileReport {
    /// Display path.
    pub path: String,
    /// What it was read as: `host-elf`, `code-object`, `bundle`, `ccob`, `rdc-object`, ….
    pub kind: String,
    /// Device images found, in file order.
    pub images: Vec<ImageReport>,
    /// Device code that could not be read (offset within `path`, reason).
    pub unreadable: Vec<Unreadable>,
}

/// One AMDGPU code object (one bundle entry).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ImageReport {
    /// The bundle entry ID, e.g. `hipv4-amdgcn-amd-amdhsa--gfx1100` (empty for a bare code object).
    pub entry_id: String,
    /// Processor from the target ID / `e_flags`, e.g. `gfx1100`, `gfx11-generic`.
    pub processor: String,
    /// Full target ID with features, e.g. `gfx90a:xnack-`.
    pub target_id: String,
    /// Code object version (ABI version + 2), e.g. 4 or 5.
    pub code_object_version: u32,
    /// How the image was stored: `plain`, `ccob-v2-zstd`, ….
    pub container: String,
    /// Byte offset of the containing bundle within the file (section offset included).
    pub bundle_offset: u64,
    /// Kernels, in metadata order.
    pub kernels: Vec<KernelReport>,
    /// Hostcall-using functions referenced or defined in this image (`__ockl_hostcall_internal`, …).
    pub hostcall_users: Vec<String>,
    /// Of those, the ones whose entry is `s_trap 2; s_endpgm`: made to trap, e.g. by
    /// `rcclfix patch --asserts` (left out of the JSON when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trapped_users: Vec<String>,
    /// `e_flags` of the code object (`EF_AMDGPU_MACH` in bits 0–7, xnack/sramecc above).
    #[serde(default)]
    pub e_flags: u32,
    /// `amdhsa.target` from the metadata note (v4+), e.g. `amdgcn-amd-amdhsa--gfx1100`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_target: Option<String>,
    /// `amdhsa.version` from the metadata note, e.g. `[1, 1]` for code object v4.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metadata_version: Vec<u64>,
    /// How many metadata notes were merged (an `-fgpu-rdc` link can carry one per kernel).
    #[serde(default)]
    pub metadata_notes: u32,
    /// Size of the code object in bytes (after decompression).
    #[serde(default)]
    pub size: u64,
    /// Kernels counted but not in [`ImageReport::kernels`]: a scan with
    /// [`super::meta::Detail::Declaring`] (the compact `--json`, the table) lists only the kernels
    /// that declare `hidden_hostcall_buffer` and counts the others here; 0 in a full report, and
    /// never serialised ([`ImageReport::kernel_count`] is the count).
    #[serde(skip)]
    pub unlisted_kernels: usize,
}

impl ImageReport {
    /// How many kernels the image has: those listed plus [`ImageReport::unlisted_kernels`].
    pub fn kernel_count(&self) -> usize {
        self.kernels.len() + self.unlisted_kernels
    }
}

/// One kernel of one code object.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelReport {
    /// `.name`.
    pub name: String,
    /// `.symbol` (name + `.kd`).
    pub symbol: String,
    /// `.kernarg_segment_size` in bytes.
    pub kernarg_segment_size: u64,
    /// Hidden arguments declared (value kind and kernarg offset), in order.
    pub hidden_args: Vec<HiddenArg>,
    /// Whether `hidden_hostcall_buffer` is declared (`hidden_none` at the v4 slot is not).
    pub declares_hostcall: bool,
    /// For declaring kernels: the likely cause, read from the code object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A hidden kernel argument.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HiddenArg {
    /// `.value_kind`, normalised to the v3+ snake_case spelling (a known kind is shared, not
    /// allocated per argument).
    pub value_kind: std::borrow::Cow<'static, str>,
    /// `.offset` within the kernarg segment, in bytes.
    pub offset: u64,
    /// `.size` in bytes.
    pub size: u64,
}

/// Device code that could not be read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Unreadable {
    /// Byte offset within the file.
    pub offset: u64,
    /// Which target it belongs to, when known. `None` means it may belong to any target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processor: Option<String>,
    /// The bundle entry ID, when the problem is inside a known entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    /// Short machine-readable class: `kpack`, `bitcode`, `truncated`, `bad-magic`, `hash-mismatch`,
    /// `decompress`, `bomb`, `metadata`, `io`, `not-regular`, `unsupported`, `too-large`.
    #[serde(default)]
    pub class: String,
    /// Why, e.g. `device code externalized (kpack)`, `CCOB hash mismatch`.
    pub reason: String,
}

/// The verdict for one gfx target (docs/scan-json.md, "states").
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum TargetState {
    /// At least one kernel declares `hidden_hostcall_buffer`.
    Declares {
        /// `file: kernel` names of the declaring kernels.
        kernels: Vec<String>,
    },
    /// Every image for the target was read and no kernel declares it.
    Clean {
        /// Kernels read.
        kernels: usize,
    },
    /// Something that may belong to this target could not be read.
    Unknown {
        /// Why.
        reason: String,
    },
    /// Everything was read and no image is for this target (or a generic target covering it):
    /// the input has no code for it. Not clean: a build or package that asked for the target
    /// fails on it, and the exit code is 3 as for `unknown`; but it is not `unknown` either,
    /// which means that something could not be read.
    NoCode {
        /// `no device code for gfx1030` (the scan command adds the targets it found).
        reason: String,
    },
}
