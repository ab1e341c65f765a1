//! `pip install rcclfix-<ver>-….whl` (slow): the wheel that carries the `rcclfix` executable
//! (`rcclfix self-wheel`, which `cargo xtask wheel` runs from the release build) goes into a
//! fresh venv with real pip, puts a working `rcclfix` in the venv's `bin/` and the man pages and
//! shell completions of `rcclfix self-docs` under the venv's `share/` (where man and
//! bash-completion find them), passes `pip check`, and `pip uninstall` takes it all away again.
//!
//! The wheel here carries the test build's executable (debug profile), not a release build: what
//! is under test is the packaging (tag, layout, RECORD, pip's install and uninstall), which is the
//! same code for either profile, and a release build inside the test would add minutes of
//! compiling to every run. `cargo xtask wheel` differs only in building `--release` first.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::package::{ok, sha256, tool, tree};
use crate::support::{rcclfix, slow_or_note, BIN};

/// Checks every RECORD line of a wheel with Python's own zipfile, hashlib and base64: each
/// entry but RECORD has `sha256=<urlsafe b64, no padding>` and its size, every entry is listed
/// once, RECORD is last; prints the names, modes and the WHEEL and METADATA files as JSON.
const CHECK_RECORD_PY: &str = r#"
import base64, hashlib, json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
record = [n for n in names if n.endswith(".dist-info/RECORD")]
assert len(record) == 1 and names[-1] == record[0], names
rows = [l.split(",") for l in z.read(record[0]).decode().splitlines()]
listed = [r[0] for r in rows]
assert sorted(listed) == sorted(names) and len(set(listed)) == len(listed), (listed, names)
for path, h, size in rows:
    if path == record[0]:
        assert h == "" and size == "", (path, h, size)
        continue
    data = z.read(path)
    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert h == want and int(size) == len(data), (path, h, want, size, len(data))
wheel = [n for n in names if n.endswith(".dist-info/WHEEL")][0]
meta = [n for n in names if n.endswith(".dist-info/METADATA")][0]
print(json.dumps({
    "names": names,
    "modes": {n: z.getinfo(n).external_attr >> 16 for n in names},
    "wheel": z.read(wheel).decode(),
    "metadata": z.read(meta).decode(),
}))
"#;

/// The highest `GLIBC_2.N` the executable needs, read with binutils' `objdump -T` (a reader
/// independent of rcclfix's own ELF code).
fn glibc_minor_by_objdump(bin: &Path) -> u32 {
    let dump = ok(Command::new(tool("objdump", "binutils")).arg("-T").arg(bin));
    dump.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|w| w.strip_prefix("GLIBC_2."))
        .filter_map(|v| v.split('.').next()?.parse().ok())
        .max()
        .expect("objdump -T shows no GLIBC_2.N symbol version")
}

#[test]
fn the_wheel_installs_runs_and_uninstalls_with_real_pip() {
    if !slow_or_note() {
        return;
    }
    let python = tool("python3", "python3-venv");
    let t = tempfile::Builder::new()
        .prefix("pip-install-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let started = std::time::Instant::now();
    let stdout = ok(rcclfix()
        .args(["self-wheel", "--out-dir"])
        .arg(t.path().join("wheels")));
    let whl = PathBuf::from(stdout.trim());
    eprintln!(
        "wheel: {} ({:.1} MB from a {:.1} MB executable) in {:.1}s",
        whl.display(),
        std::fs::metadata(&whl).unwrap().len() as f64 / 1e6,
        std::fs::metadata(BIN).unwrap().len() as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    // The name carries the crate's version and the tag measured from the executable.
    let minor = glibc_minor_by_objdump(Path::new(BIN));
    let version = env!("CARGO_PKG_VERSION");
    let tag = format!("py3-none-manylinux_2_{minor}_x86_64");
    assert_eq!(
        whl.file_name().unwrap().to_string_lossy(),
        format!("rcclfix-{version}-{tag}.whl")
    );

    // RECORD, WHEEL and METADATA as Python reads them.
    let checked: serde_json::Value = serde_json::from_str(
        ok(Command::new(&python)
            .arg("-c")
            .arg(CHECK_RECORD_PY)
            .arg(&whl))
        .trim(),
    )
    .unwrap();
    let script = format!("rcclfix-{version}.data/scripts/rcclfix");
    let di = format!("rcclfix-{version}.dist-info");
    // What `self-docs` writes, and where under the prefix each file belongs.
    let docs = t.path().join("docs");
    ok(rcclfix().args(["-q", "self-docs", "--out-dir"]).arg(&docs));
    let data: Vec<(String, PathBuf)> = tree(&docs)
        .into_iter()
        .filter(|rel| docs.join(rel).is_file())
        .map(|rel| {
            let under = rcclfix::cmd::self_docs::prefix_path(&rel)
                .unwrap_or_else(|| panic!("self-docs wrote {rel}, which has no prefix path"));
            (under, docs.join(rel))
        })
        .collect();
    for want in [
        "share/man/man1/rcclfix.1",
        "share/man/man1/rcclfix-build.1",
        "share/man/man1/rcclfix-toolchain-run.1",
        "share/bash-completion/completions/rcclfix.bash",
        "share/zsh/site-functions/_rcclfix",
        "share/fish/vendor_completions.d/rcclfix.fish",
    ] {
        assert!(data.iter().any(|(p, _)| p == want), "no {want} in {data:?}");
    }
    let mut entries: Vec<String> = data
        .iter()
        .map(|(p, _)| format!("rcclfix-{version}.data/data/{p}"))
        .collect();
    entries.sort();
    entries.extend([
        script.clone(),
        format!("{di}/METADATA"),
        format!("{di}/WHEEL"),
        format!("{di}/RECORD"),
    ]);
    assert_eq!(checked["names"], serde_json::json!(entries));
    assert_eq!(checked["modes"][&script], 0o100755, "{checked}");
    for e in entries.iter().filter(|e| e.contains(".data/data/")) {
        assert_eq!(checked["modes"][e], 0o100644, "{e}");
    }
    let wheel = checked["wheel"].as_str().unwrap();
    assert!(wheel.contains("Root-Is-Purelib: false\n"), "{wheel}");
    assert!(wheel.contains(&format!("Tag: {tag}\n")), "{wheel}");
    let meta = checked["metadata"].as_str().unwrap();
    assert!(
        meta.starts_with(&format!(
            "Metadata-Version: 2.1\nName: rcclfix\nVersion: {version}\n"
        )),
        "{meta}"
    );

    // The executable needs no shared library a manylinux system may lack (objdump's reading).
    let dynamic = ok(Command::new(tool("objdump", "binutils")).arg("-p").arg(BIN));
    for lib in dynamic
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED"))
        .map(str::trim)
    {
        assert!(
            rcclfix::package::tool_wheel::MANYLINUX_LIBRARIES.contains(&lib),
            "the executable needs {lib}"
        );
    }

    // A fresh venv; its bin/ and site-packages before the install.
    let venv = t.path().join("venv");
    ok(Command::new(&python).args(["-m", "venv"]).arg(&venv));
    let py = venv.join("bin/python");
    let site = PathBuf::from(
        ok(Command::new(&py).args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['platlib'])",
        ]))
        .trim(),
    );
    let bin_before = tree(&venv.join("bin"));
    let venv_before = files_under(&venv);
    let started = std::time::Instant::now();
    ok(Command::new(&py)
        .args(["-m", "pip", "install", "--no-index", "--no-deps", "-q"])
        .arg(&whl));
    eprintln!("pip install: {:.1}s", started.elapsed().as_secs_f64());
    let installed = venv.join("bin/rcclfix");
    assert_eq!(sha256(&installed), sha256(Path::new(BIN)));
    let check = ok(Command::new(&py).args(["-m", "pip", "check"]));
    assert!(check.contains("No broken requirements"), "{check}");
    let show = ok(Command::new(&py).args(["-m", "pip", "show", "rcclfix"]));
    assert!(show.contains(&format!("Version: {version}")), "{show}");

    // The man pages and completions are under the venv's prefix, byte for byte what
    // self-docs wrote.
    for (under, src) in &data {
        let installed = venv.join(under);
        assert_eq!(
            std::fs::read(&installed).unwrap_or_else(|e| panic!("{installed:?}: {e}")),
            std::fs::read(src).unwrap(),
            "{under}"
        );
    }

    // The installed command runs, by its bare name on the venv's PATH.
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // man finds the page through PATH alone (man-db: `<dir>/../share/man` for `<dir>` on PATH),
    // as in an activated venv; README says so.
    let page = ok(Command::new(tool("man", "man-db"))
        .args(["-w", "rcclfix-doctor"])
        .env("PATH", &path)
        .env_remove("MANPATH"));
    assert_eq!(
        Path::new(page.trim()),
        venv.join("share/man/man1/rcclfix-doctor.1")
    );
    // bash-completion loads the completion from the venv's share/ once XDG_DATA_DIRS names it
    // (README's instruction; bash-completion 2.12 and newer also look next to PATH's bin/).
    let loader = "/usr/share/bash-completion/bash_completion";
    assert!(
        Path::new(loader).is_file(),
        "{loader} is missing; install the Debian package bash-completion (listed in .ci/apt.d/package.txt)"
    );
    let spec = ok(Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {loader}; if declare -F _comp_load >/dev/null; then _comp_load rcclfix; \
             else __load_completion rcclfix; fi; complete -p rcclfix"
        ))
        .env("PATH", &path)
        .env(
            "XDG_DATA_DIRS",
            format!(
                "{}:/usr/local/share:/usr/share",
                venv.join("share").display()
            ),
        ));
    assert!(spec.contains("-F _rcclfix rcclfix"), "{spec}");
    let v = ok(Command::new("rcclfix").arg("--version").env("PATH", &path));
    assert_eq!(v.trim(), format!("rcclfix {version}"));
    // doctor answers from the venv too: a verdict on stdout, whatever this machine's GPUs are
    // (exit 0 not affected, 1 affected, 2 inconclusive: never a crash or a signal).
    let d = Command::new("rcclfix")
        .args(["doctor", "--json"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        matches!(d.status.code(), Some(0..=2)),
        "rcclfix doctor from the venv: {}\n{}",
        d.status,
        String::from_utf8_lossy(&d.stderr)
    );
    let verdict: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&d.stderr)
        )
    });
    assert!(verdict.is_object(), "{verdict}");

    // Uninstall leaves neither the command nor the metadata.
    ok(Command::new(&py).args(["-m", "pip", "uninstall", "-y", "-q", "rcclfix"]));
    assert!(!installed.exists(), "pip uninstall left {installed:?}");
    assert_eq!(tree(&venv.join("bin")), bin_before);
    let left: Vec<String> = tree(&site)
        .into_iter()
        .filter(|p| p.contains("rcclfix"))
        .collect();
    assert!(left.is_empty(), "pip uninstall left {left:?}");
    // No file at all is left under the venv: the man pages and completions went too. (pip
    // removes the folders it emptied wholly, `man1/` and `completions/`, but leaves their
    // parents such as `share/man/`, empty.)
    assert_eq!(files_under(&venv), venv_before);
    for (under, _) in &data {
        assert!(!venv.join(under).exists(), "pip uninstall left {under}");
    }
}

/// The files (not folders) under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    tree(dir)
        .into_iter()
        .filter(|p| !dir.join(p).is_dir())
        .collect()
}

/// A file that is no glibc-linked executable gets no wheel, and a one-line error naming it.
#[test]
fn self_wheel_refuses_what_is_no_glibc_executable() {
    let t = tempfile::tempdir().unwrap();
    let not_elf = t.path().join("script.sh");
    std::fs::write(&not_elf, "#!/bin/sh\n").unwrap();
    let out = rcclfix()
        .args(["self-wheel", "--out-dir"])
        .arg(t.path().join("wheels"))
        .arg("--binary")
        .arg(&not_elf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&not_elf.display().to_string()) && err.contains("not a readable ELF"),
        "{err}"
    );
    assert!(!t.path().join("wheels").exists() || tree(&t.path().join("wheels")) == [""]);
}
