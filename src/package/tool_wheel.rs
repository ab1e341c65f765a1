//! The wheel that carries rcclfix itself, so that `pip install rcclfix-<ver>-….whl` puts the
//! `rcclfix` command on a virtual environment's PATH with no Rust toolchain: a "bin" wheel in
//! maturin's sense (`bindings = "bin"`), made by `cargo xtask wheel` from the release binary.
//!
//! Flow: read the executable's dynamic symbols ([`super::elf::ElfInfo`]) → the platform tag from
//! the highest `GLIBC_2.N` version it imports ([`platform_of`]) → write the zip into a temporary
//! file in the output folder ([`write`]) → rename it to its PEP 427 name ([`write_into`]).
//!
//! Layout (nothing importable; no Python code runs at install or start-up):
//! - `rcclfix-<ver>.data/data/share/…`: the man pages and shell completions ([`DataFile`], made
//!   by `rcclfix self-docs`), mode 0644. pip copies a wheel's `.data/data/` into the
//!   environment's prefix (the venv's root), so they land in `<venv>/share/man/man1/`,
//!   `<venv>/share/bash-completion/completions/` and so on, and RECORD lists them for
//!   `pip uninstall`;
//! - `rcclfix-<ver>.data/scripts/rcclfix`: the executable, mode 0755. pip copies a wheel's
//!   `.data/scripts/` into the environment's `bin/` and leaves a file that does not start with
//!   `#!python` as it is;
//! - `rcclfix-<ver>.dist-info/METADATA`, `WHEEL` (`Root-Is-Purelib: false`, tag
//!   `py3-none-manylinux_2_N_<arch>`) and `RECORD` (sha256 and size of every other entry, last).
//!
//! Sources: PEP 427 (wheel format, `.data` folders, RECORD), PEP 600 (`manylinux_x_y` tags: a
//! wheel may use glibc symbols up to version x.y), core metadata 2.1, maturin
//! module writer (`write_bin`: a binary goes under `<name>-<ver>.data/scripts/`).

use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::elf::{ElfInfo, Machine};
use super::wheel_writer::WheelWriter;

/// The distribution name on Python package indexes and in the file name.
pub const DISTRIBUTION: &str = "rcclfix";

/// The shared libraries a manylinux wheel's executable may need (`DT_NEEDED`): glibc's own
/// libraries, the dynamic linker, libgcc_s and libstdc++, which every manylinux system has
/// (PEP 600 defers to the auditwheel policy's library list; these are its glibc and GCC
/// runtime entries). Anything else must be linked in, or pip would install a command that cannot
/// start where the library is missing.
pub const MANYLINUX_LIBRARIES: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
];

/// A file the wheel installs under the environment's prefix (`<venv>/<path>`), through the
/// wheel's `.data/data/` folder (PEP 427: the `data` scheme is the prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    /// Path under the prefix, `/`-separated and relative, e.g. `share/man/man1/rcclfix.1`
    /// ([`check_data_path`]).
    pub path: String,
    /// Contents.
    pub bytes: Vec<u8>,
}

/// What the tool wheel is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolWheel {
    /// Version (PEP 440): this crate's version, e.g. `0.1.0`.
    pub version: String,
    /// Platform tag from the binary, e.g. `manylinux_2_34_x86_64` ([`platform_of`]).
    pub platform: String,
    /// The executable on this machine (shipped as `.data/scripts/rcclfix`).
    pub binary: PathBuf,
    /// The executable's size in bytes, as measured when the wheel was planned.
    pub binary_bytes: u64,
    /// Modification time of every entry, seconds since the epoch (`SOURCE_DATE_EPOCH` or a fixed
    /// date, [`super::source_date_epoch`]).
    pub mtime: u64,
    /// The files installed under the prefix (man pages, completions), sorted by path.
    pub data: Vec<DataFile>,
}

impl ToolWheel {
    /// Plan the wheel for `binary` (an x86_64 or aarch64 ELF executable linked against glibc),
    /// without data files ([`ToolWheel::with_data`] adds them).
    ///
    /// Errors (one line, naming the file): not a regular file, not a readable 64-bit
    /// little-endian ELF with a dynamic section, or importing no versioned glibc symbol
    /// ([`platform_of`]); `SOURCE_DATE_EPOCH` set but not a number.
    pub fn plan(binary: &Path) -> anyhow::Result<ToolWheel> {
        let meta = super::regular_file(binary, "the rcclfix executable")?;
        let map = super::strip::map_file(binary)
            .map_err(|e| anyhow::anyhow!("{}: cannot read: {e:#}", binary.display()))?;
        let info = ElfInfo::parse(&map).map_err(|e| {
            anyhow::anyhow!("{}: not a readable ELF executable: {e:#}", binary.display())
        })?;
        let platform =
            platform_of(&info).map_err(|e| anyhow::anyhow!("{}: {e}", binary.display()))?;
        if let Some(lib) = outside_manylinux(&info) {
            anyhow::bail!(
                "{}: needs {lib}, which a manylinux wheel may not need (link it statically)",
                binary.display()
            );
        }
        let version = env!("CARGO_PKG_VERSION").to_owned();
        super::fields::pep440_version(&version)
            .map_err(|e| anyhow::anyhow!("crate version {version:?}: {e}"))?;
        Ok(ToolWheel {
            version,
            platform,
            binary: binary.to_owned(),
            binary_bytes: meta.len(),
            mtime: super::source_date_epoch()?,
            data: vec![],
        })
    }

    /// Add `data` (installed under the prefix), sorted by path.
    ///
    /// Errors (one line, naming the path): a path [`check_data_path`] refuses, or one given
    /// twice.
    pub fn with_data(mut self, mut data: Vec<DataFile>) -> anyhow::Result<ToolWheel> {
        data.sort_by(|a, b| a.path.cmp(&b.path));
        for (i, d) in data.iter().enumerate() {
            check_data_path(&d.path)?;
            if i > 0 && data[i - 1].path == d.path {
                anyhow::bail!("wheel data file {:?} given twice", d.path);
            }
        }
        self.data = data;
        Ok(self)
    }

    /// `py3-none-<platform>`: any Python 3, no ABI (nothing is imported).
    pub fn tag(&self) -> String {
        format!("py3-none-{}", self.platform)
    }

    /// `rcclfix-<version>-py3-none-<platform>.whl` (PEP 427).
    pub fn file_name(&self) -> String {
        format!("{DISTRIBUTION}-{}-{}.whl", self.version, self.tag())
    }

    /// The entry pip installs as `<env>/bin/rcclfix`.
    pub fn script_entry(&self) -> String {
        format!(
            "{DISTRIBUTION}-{}.data/scripts/{DISTRIBUTION}",
            self.version
        )
    }

    /// The entry pip installs as `<prefix>/<path>`.
    pub fn data_entry(&self, path: &str) -> String {
        format!("{DISTRIBUTION}-{}.data/data/{path}", self.version)
    }

    fn dist_info(&self) -> String {
        format!("{DISTRIBUTION}-{}.dist-info", self.version)
    }
}

/// The manylinux tag of an executable: `manylinux_2_N_<arch>`, N the minor of the highest
/// `GLIBC_2.N` symbol version it imports (PEP 600: pip installs it where glibc is 2.N or newer,
/// exactly where the dynamic linker can resolve those symbols).
///
/// Errors: the executable imports no versioned glibc symbol (a static binary would need a
/// `musllinux` or no platform tag, which this does not write).
pub fn platform_of(info: &ElfInfo) -> anyhow::Result<String> {
    let (_, minor) = info.glibc.ok_or_else(|| {
        anyhow::anyhow!("imports no versioned glibc symbol, so no manylinux tag fits it")
    })?;
    let arch = match info.machine {
        Machine::X86_64 => "x86_64",
        Machine::Aarch64 => "aarch64",
    };
    Ok(format!("manylinux_2_{minor}_{arch}"))
}

/// Check a [`DataFile`] path: relative, `/`-separated, each part non-empty, not `.` or `..`, of
/// ASCII letters, digits, `.`, `_`, `-` and `+` (so RECORD, a CSV file, needs no quoting, and pip
/// installs it inside the prefix).
///
/// Errors (one line): the path and what is wrong.
pub fn check_data_path(path: &str) -> anyhow::Result<()> {
    let ok_part = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
    };
    if !path.split('/').all(ok_part) {
        anyhow::bail!(
            "wheel data file {path:?}: not a relative path of letters, digits, '.', '_', '-' and '+'"
        );
    }
    Ok(())
}

/// The first `DT_NEEDED` library of `info` that is not in [`MANYLINUX_LIBRARIES`], if any.
pub fn outside_manylinux(info: &ElfInfo) -> Option<&str> {
    info.needed
        .iter()
        .map(String::as_str)
        .find(|n| !MANYLINUX_LIBRARIES.contains(n))
}

/// Write the wheel to `out` through [`WheelWriter`] (the zip crate's default deflate level): the
/// data files, the script, then `METADATA`, `WHEEL` and `RECORD` last (PEP 427 recommends it), one
/// fixed timestamp.
///
/// Errors: the binary cannot be read; an output write fails.
pub fn write<W: Write + Seek>(w: &ToolWheel, out: W) -> anyhow::Result<W> {
    let mut zip = WheelWriter::new(out, w.mtime, None)?;
    // Sorted: `.data/data/…` < `.data/scripts/…`.
    for d in &w.data {
        zip.add_bytes(&w.data_entry(&d.path), 0o644, &d.bytes)?;
    }
    let mut bin = fs_err::File::open(&w.binary)?;
    zip.add(&w.script_entry(), 0o755, &mut bin)?;
    let di = w.dist_info();
    zip.add_bytes(&format!("{di}/METADATA"), 0o644, metadata(w).as_bytes())?;
    zip.add_bytes(&format!("{di}/WHEEL"), 0o644, wheel_file(w).as_bytes())?;
    zip.finish(&di)
}

/// Write the wheel into folder `dir` (created if missing) under [`ToolWheel::file_name`],
/// through a temporary file renamed into place; returns its path.
///
/// Errors (one line, naming the file or folder): the folder cannot be created, the write fails
/// (nothing is left behind), or the destination exists and is not a regular file.
pub fn write_into(dir: &Path, w: &ToolWheel) -> anyhow::Result<PathBuf> {
    fs_err::create_dir_all(dir)?;
    let dest = dir.join(w.file_name());
    let mut tmp = crate::fsutil::TempFile::new_in(dir)?;
    write(w, tmp.as_file_mut()).with_context(|| format!("cannot write {}", dest.display()))?;
    tmp.persist(&dest, 0o644)?;
    Ok(dest)
}

fn metadata(w: &ToolWheel) -> String {
    format!(
        "Metadata-Version: 2.1\n\
         Name: {DISTRIBUTION}\n\
         Version: {ver}\n\
         Summary: {summary}\n\
         License: {license}\n\
         Classifier: Operating System :: POSIX :: Linux\n\
         Classifier: Environment :: Console\n\
         Description-Content-Type: text/markdown\n\
         \n\
         The `rcclfix` command ({size} bytes, an ELF executable for {platform}): \
         `rcclfix doctor` says which fix an RCCL that fails with hipErrorIllegalState needs.\n",
        ver = w.version,
        summary = env!("CARGO_PKG_DESCRIPTION"),
        license = env!("CARGO_PKG_LICENSE"),
        size = w.binary_bytes,
        platform = w.platform,
    )
}

fn wheel_file(w: &ToolWheel) -> String {
    format!(
        "Wheel-Version: 1.0\nGenerator: rcclfix {}\nRoot-Is-Purelib: false\nTag: {}\n",
        env!("CARGO_PKG_VERSION"),
        w.tag()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(glibc: Option<(u32, u32)>, machine: Machine) -> ElfInfo {
        ElfInfo {
            glibc,
            machine,
            ..Default::default()
        }
    }

    #[test]
    fn the_tag_is_the_highest_glibc_version_imported() {
        assert_eq!(
            platform_of(&info(Some((2, 34)), Machine::X86_64)).unwrap(),
            "manylinux_2_34_x86_64"
        );
        assert_eq!(
            platform_of(&info(Some((2, 17)), Machine::Aarch64)).unwrap(),
            "manylinux_2_17_aarch64"
        );
        let e = platform_of(&info(None, Machine::X86_64)).unwrap_err();
        assert!(e.to_string().contains("no versioned glibc symbol"), "{e}");
    }

    #[test]
    fn only_glibc_and_gcc_runtime_libraries_may_be_needed() {
        let mut i = info(Some((2, 34)), Machine::X86_64);
        i.needed = [
            "libgcc_s.so.1",
            "libm.so.6",
            "libc.so.6",
            "ld-linux-x86-64.so.2",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(outside_manylinux(&i), None);
        i.needed.insert(0, "liblzma.so.5".into());
        assert_eq!(outside_manylinux(&i), Some("liblzma.so.5"));
    }

    /// A wheel of version 0.1.0 for `manylinux_2_34_x86_64` with no data files.
    fn sample() -> ToolWheel {
        ToolWheel {
            version: "0.1.0".into(),
            platform: "manylinux_2_34_x86_64".into(),
            binary: "/x".into(),
            binary_bytes: 1,
            mtime: 0,
            data: vec![],
        }
    }

    #[test]
    fn names_follow_pep_427() {
        let w = sample();
        assert_eq!(
            w.file_name(),
            "rcclfix-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
        );
        assert_eq!(w.script_entry(), "rcclfix-0.1.0.data/scripts/rcclfix");
        assert_eq!(
            w.data_entry("share/man/man1/rcclfix.1"),
            "rcclfix-0.1.0.data/data/share/man/man1/rcclfix.1"
        );
        assert!(wheel_file(&w).contains("Tag: py3-none-manylinux_2_34_x86_64\n"));
    }

    #[test]
    fn data_paths_stay_inside_the_prefix_and_are_sorted() {
        let w = sample();
        let file = |p: &str| DataFile {
            path: p.into(),
            bytes: vec![],
        };
        let w2 = w
            .clone()
            .with_data(vec![
                file("share/man/man1/rcclfix.1"),
                file("share/bash-completion/completions/rcclfix.bash"),
            ])
            .unwrap();
        assert_eq!(
            w2.data[0].path,
            "share/bash-completion/completions/rcclfix.bash"
        );
        for bad in [
            "/etc/x",
            "share/../x",
            "share//x",
            "share/a,b",
            "",
            "share/x/",
            "./x",
        ] {
            let e = w.clone().with_data(vec![file(bad)]).unwrap_err();
            assert!(e.to_string().contains("not a relative path"), "{bad}: {e}");
        }
        let e = w
            .with_data(vec![file("share/x"), file("share/x")])
            .unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
    }
}
