//! The `.whl` overlay: a platform wheel holding the fixed `librccl.so.1` in its own import package
//! (`rcclfix_rccl/lib/`), `manifest.json` and `scan.json`, and a start-up hook (`rcclfix_rccl.pth`)
//! that loads the library with `RTLD_GLOBAL` before PyTorch does, so torch's own `librccl.so.1`
//! dependency is satisfied by this copy (glibc matches an already-loaded object by SONAME;
//! dlopen(3)), and sets `VLLM_NCCL_SO_PATH` unless the user did. `RCCLFIX_DISABLE=1` turns it off.
//!
//! Sources: PEP 427 (wheel format, RECORD), PEP 491 (wheel 1.9 draft: file name escaping), PEP 600
//! (`manylinux_x_y` tags), PEP 376 / the "Recording installed projects" spec (RECORD hashes are
//! urlsafe base64 without padding), core metadata 2.1, site(3) (`.pth` lines starting with `import`
//! are executed), maturin `src/module_writer/{wheel_writer,util}.rs`. The zip and its RECORD are
//! written by [`super::wheel_writer::WheelWriter`], which [`super::tool_wheel`] shares.

use std::io::{Seek, Write};
use std::path::PathBuf;

use super::wheel_writer::WheelWriter;

/// The import package (folder in site-packages) every rcclfix wheel installs.
pub const IMPORT_PACKAGE: &str = "rcclfix_rccl";

/// Environment variable that turns the start-up hook off (`1`, `true`, `yes`).
pub const DISABLE_ENV: &str = "RCCLFIX_DISABLE";

/// Everything the wheel is made of.
#[derive(Debug, Clone)]
pub struct WheelSpec {
    /// Distribution name, already escaped for file names (`rcclfix_rccl_gfx1100`).
    pub distribution: String,
    /// Version (PEP 440), e.g. `2.13.4+rcclfix1`.
    pub version: String,
    /// Platform tag, e.g. `manylinux_2_28_x86_64`.
    pub platform: String,
    /// One-line summary.
    pub summary: String,
    /// Long description (markdown).
    pub description: String,
    /// The fixed library on this machine (shipped as `rcclfix_rccl/lib/librccl.so.1`).
    pub library: PathBuf,
    /// `manifest.json` bytes.
    pub manifest_json: Vec<u8>,
    /// `scan.json` bytes.
    pub scan_json: Vec<u8>,
    /// Modification time of every entry, seconds since the epoch (clamped to 1980, zip's floor).
    pub mtime: u64,
}

impl WheelSpec {
    /// The tag triple: `py3-none-<platform>` (no extension module: the hook uses ctypes).
    pub fn tag(&self) -> String {
        format!("py3-none-{}", self.platform)
    }
    /// `<distribution>-<version>-<tag>.whl` (PEP 427).
    pub fn file_name(&self) -> String {
        format!("{}-{}-{}.whl", self.distribution, self.version, self.tag())
    }
    /// `<distribution>-<version>.dist-info`.
    pub fn dist_info(&self) -> String {
        format!("{}-{}.dist-info", self.distribution, self.version)
    }
}

/// The platform tag for a library needing glibc `(2, minor)`: `manylinux_2_<max(minor, 28)>_<arch>`.
/// The floor is 2.28 because ROCm's own wheels (torch, `rocm[libraries]`) are `manylinux_2_28`, so
/// no environment that can load RCCL has an older glibc; a library needing newer symbols gets the
/// higher tag, so pip refuses it where it could not load (PEP 600).
pub fn platform_tag(glibc: Option<(u32, u32)>, arch: &str) -> String {
    let minor = glibc.map(|(_, m)| m).unwrap_or(0).max(28);
    format!("manylinux_2_{minor}_{arch}")
}

/// PEP 427 escaping of a name component: runs of characters other than ASCII letters, digits and
/// `.` become `_`, lowercased.
pub fn escape_name(s: &str) -> String {
    let mut out = String::new();
    let mut last_us = false;
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            out.push(c.to_ascii_lowercase());
            last_us = false;
        } else if !last_us {
            out.push('_');
            last_us = true;
        }
    }
    out.trim_matches('_').to_owned()
}

/// Check the values that reach the file name, `METADATA` and the Python hook: the distribution
/// name is escaped (`[a-z0-9_.]`, no `-`, so the file name splits into its five parts), the version
/// is canonical PEP 440, the platform tag a `manylinux_2_N_<arch>`, and summary one line without
/// `"` or `\` (it is also written into the hook's docstring).
///
/// Errors (one line): the field, the value and what is wrong.
pub fn validate(spec: &WheelSpec) -> anyhow::Result<()> {
    let bad = |field: &str, v: &str, why: &str| anyhow::anyhow!("wheel {field} {v:?} {why}");
    let d = &spec.distribution;
    if d.is_empty()
        || !d
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.')
        || !d.starts_with(|c: char| c.is_ascii_alphanumeric())
    {
        return Err(bad(
            "distribution name",
            d,
            "is not an escaped name (a-z 0-9 _ .; wheel file name spec)",
        ));
    }
    super::fields::pep440_version(&spec.version).map_err(|e| bad("version", &spec.version, &e))?;
    if !spec.platform.starts_with("manylinux_2_")
        || !spec
            .platform
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(bad(
            "platform tag",
            &spec.platform,
            "is not manylinux_2_N_<arch>",
        ));
    }
    super::fields::single_line(&spec.summary).map_err(|e| bad("summary", &spec.summary, &e))?;
    if spec.summary.contains(['"', '\\']) {
        return Err(bad("summary", &spec.summary, "contains '\"' or '\\'"));
    }
    if spec.description.contains("\"\"\"")
        || spec
            .description
            .chars()
            .any(|c| c.is_control() && c != '\n')
    {
        return Err(bad(
            "description",
            "…",
            "contains control characters or \"\"\"",
        ));
    }
    Ok(())
}

/// Write the wheel to `out` through [`WheelWriter`] (deflate level 9). Entries are in sorted
/// order with the `.dist-info` folder last and `RECORD` its last entry (PEP 427 recommends it);
/// mode 0644 (0755 for the library), one fixed timestamp. Errors: the library cannot be read; an
/// output write fails.
pub fn write_wheel<W: Write + Seek>(spec: &WheelSpec, out: W) -> anyhow::Result<W> {
    validate(spec)?;
    let mut zip = WheelWriter::new(out, spec.mtime, Some(9))?;

    let pkg = IMPORT_PACKAGE;
    // Sorted: "rcclfix_rccl.pth" < "rcclfix_rccl/…" ('.' < '/').
    zip.add_bytes(&format!("{pkg}.pth"), 0o644, pth().as_bytes())?;
    zip.add_bytes(
        &format!("{pkg}/__init__.py"),
        0o644,
        init_py(spec).as_bytes(),
    )?;
    let mut lib = fs_err::File::open(&spec.library)?;
    zip.add(&format!("{pkg}/lib/librccl.so.1"), 0o755, &mut lib)?;
    zip.add_bytes(&format!("{pkg}/manifest.json"), 0o644, &spec.manifest_json)?;
    zip.add_bytes(&format!("{pkg}/scan.json"), 0o644, &spec.scan_json)?;
    let di = spec.dist_info();
    zip.add_bytes(&format!("{di}/METADATA"), 0o644, metadata(spec).as_bytes())?;
    zip.add_bytes(&format!("{di}/WHEEL"), 0o644, wheel_file(spec).as_bytes())?;
    zip.add_bytes(
        &format!("{di}/top_level.txt"),
        0o644,
        format!("{pkg}\n").as_bytes(),
    )?;
    zip.finish(&di)
}

/// The `.pth` file: site.py executes lines that start with `import`.
fn pth() -> String {
    format!("import {IMPORT_PACKAGE}\n")
}

fn init_py(spec: &WheelSpec) -> String {
    format!(
        r#""""rcclfix overlay: {summary}.

Imported at interpreter start-up by {pkg}.pth. It loads the bundled lib/librccl.so.1 with
RTLD_GLOBAL before PyTorch is imported, so that torch's own dependency on librccl.so.1 is
satisfied by this copy (glibc reuses an already-loaded object whose SONAME matches), and it
points vLLM at the same file through VLLM_NCCL_SO_PATH unless that variable is already set.

Set {disable}=1 to turn the hook off; `pip uninstall {dist}` removes it.
"""

import os as _os

#: The bundled library.
LIBRARY = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "lib", "librccl.so.1")
#: Build provenance and the scanner's report, as produced by rcclfix.
MANIFEST = _os.path.join(_os.path.dirname(LIBRARY), _os.pardir, "manifest.json")
SCAN = _os.path.join(_os.path.dirname(LIBRARY), _os.pardir, "scan.json")

#: The ctypes handle once loaded, else None.
handle = None
#: The OSError from a failed load, else None.
error = None


def disabled():
    """True when {disable} is set to anything but empty, 0, false or no."""
    return _os.environ.get("{disable}", "").strip().lower() not in ("", "0", "false", "no")


def preload():
    """Load LIBRARY with RTLD_GLOBAL (once) and set VLLM_NCCL_SO_PATH; returns the handle."""
    global handle, error
    if handle is not None or disabled():
        return handle
    try:
        import ctypes

        handle = ctypes.CDLL(LIBRARY, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        error = e
        import sys

        sys.stderr.write(
            "rcclfix: cannot preload %s: %s (set {disable}=1 to turn the overlay off)\n" % (LIBRARY, e)
        )
        return None
    _os.environ.setdefault("VLLM_NCCL_SO_PATH", LIBRARY)
    return handle


preload()
"#,
        summary = spec.summary,
        pkg = IMPORT_PACKAGE,
        disable = DISABLE_ENV,
        dist = spec.distribution,
    )
}

fn metadata(spec: &WheelSpec) -> String {
    format!(
        "Metadata-Version: 2.1\n\
         Name: {name}\n\
         Version: {ver}\n\
         Summary: {summary}\n\
         License: BSD-3-Clause AND (MIT OR Apache-2.0)\n\
         Requires-Python: >=3.8\n\
         Classifier: Operating System :: POSIX :: Linux\n\
         Classifier: Programming Language :: Python :: 3\n\
         Description-Content-Type: text/markdown\n\
         \n\
         {desc}\n",
        name = spec.distribution,
        ver = spec.version,
        summary = spec.summary,
        desc = spec.description,
    )
}

fn wheel_file(spec: &WheelSpec) -> String {
    format!(
        "Wheel-Version: 1.0\nGenerator: rcclfix {}\nRoot-Is-Purelib: false\nTag: {}\n",
        env!("CARGO_PKG_VERSION"),
        spec.tag()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_tags() {
        assert_eq!(
            escape_name("rcclfix-rccl-gfx90a:xnack-"),
            "rcclfix_rccl_gfx90a_xnack"
        );
        assert_eq!(
            platform_tag(Some((2, 14)), "x86_64"),
            "manylinux_2_28_x86_64"
        );
        assert_eq!(
            platform_tag(Some((2, 34)), "x86_64"),
            "manylinux_2_34_x86_64"
        );
        assert_eq!(platform_tag(None, "aarch64"), "manylinux_2_28_aarch64");
    }
}
