//! Building a rootfs toolchain: debootstrap from the host's Debian mirror, the packages of
//! `containers/<name>/toolchain.toml` (some pinned to another suite of the same mirror, e.g.
//! experimental), and the [`Stamp`] that records every installed version (debootstrap(8),
//! apt_preferences(5)).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::desc::{toolchains_dir, Stamp, ToolchainDesc};
use crate::process::Cmd;
/// The Debian mirror the host's apt uses: `RCCLFIX_DEBIAN_MIRROR`, else the first `URIs:` of a
/// non-security deb822 stanza in `/etc/apt/sources.list.d/*.sources`, else the first `deb` line of
/// `/etc/apt/sources.list` (sources.list(5)). No registry host is written in rcclfix.
///
/// Errors: none of those name a mirror.
pub fn host_debian_mirror() -> anyhow::Result<String> {
    if let Ok(m) = std::env::var("RCCLFIX_DEBIAN_MIRROR") {
        if !m.is_empty() {
            return Ok(m);
        }
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir("/etc/apt/sources.list.d")
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "sources"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        if let Some(m) = mirror_from_deb822(&text) {
            return Ok(m);
        }
    }
    if let Ok(text) = std::fs::read_to_string("/etc/apt/sources.list") {
        if let Some(m) = mirror_from_one_line(&text) {
            return Ok(m);
        }
    }
    bail!("cannot find the host's Debian mirror in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list\nhelp: set RCCLFIX_DEBIAN_MIRROR to a Debian mirror URL")
}

/// The first `URIs:` of a deb822 stanza with `Types: deb` whose suites are not `*-security`.
pub fn mirror_from_deb822(text: &str) -> Option<String> {
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza
                .lines()
                .find(|l| {
                    l.to_ascii_lowercase()
                        .starts_with(&format!("{}:", name.to_ascii_lowercase()))
                })
                .map(|l| l[name.len() + 1..].trim().to_owned())
        };
        let (Some(types), Some(uris)) = (field("Types"), field("URIs")) else {
            continue;
        };
        let suites = field("Suites").unwrap_or_default();
        if types.split_whitespace().any(|t| t == "deb") && !suites.contains("-security") {
            if let Some(u) = uris.split_whitespace().next() {
                return Some(u.to_owned());
            }
        }
    }
    None
}

/// The URL of the first `deb` line (options in `[...]` skipped) whose suite is not `*-security`.
pub fn mirror_from_one_line(text: &str) -> Option<String> {
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("deb ") else {
            continue;
        };
        let rest = rest.trim_start();
        let rest = if rest.starts_with('[') {
            rest.split_once(']').map(|x| x.1).unwrap_or("")
        } else {
            rest
        };
        let mut it = rest.split_whitespace();
        let (Some(url), suite) = (it.next(), it.next().unwrap_or("")) else {
            continue;
        };
        if !suite.contains("-security") {
            return Some(url.to_owned());
        }
    }
    None
}

/// Build the rootfs toolchain `name` into `toolchains/<name>/` (temp folder, renamed at the end).
/// Skipped when the stamp already matches the description, unless `force`.
///
/// Steps: debootstrap from the host mirror; write `apt_conf`; `apt-get update` and install the
/// packages inside the rootfs (a private mount + pid namespace via `unshare`, /proc mounted);
/// `apt-get clean`; record package versions; write `stamp.json`. Full output goes to
/// `toolchains/<name>.log`.
///
/// Errors: not root (debootstrap needs it), debootstrap or unshare missing, any step fails (the error
/// carries the step's last output lines). A failed build leaves no `toolchains/<name>` behind.
pub fn build_rootfs(name: &str, force: bool) -> anyhow::Result<PathBuf> {
    let desc = ToolchainDesc::embedded(name)?;
    let dest = toolchains_dir().join(name);
    let hash = desc.hash();
    if !force {
        if let Ok(Some(bytes)) = crate::fsutil::read_state(
            &dest.join("stamp.json"),
            super::desc::MAX_STAMP_BYTES,
            "a toolchain stamp",
        ) {
            if let Ok(stamp) = serde_json::from_slice::<Stamp>(&bytes) {
                if stamp.description_sha256 == hash {
                    crate::ui::status(
                        "Fresh",
                        format_args!("toolchain {name} ({})", dest.display()),
                    );
                    return Ok(dest);
                }
                crate::ui::status(
                    "Outdated",
                    format_args!("toolchain {name}: description changed, rebuilding"),
                );
            }
        }
    }
    if !super::engine::running_as_root() {
        bail!("building toolchain {name} needs root (debootstrap creates device nodes and chroots)\nhelp: run `sudo rcclfix toolchain build {name}`, with RCCLFIX_HOME set to where your builds look");
    }
    for prog in ["debootstrap", "unshare"] {
        which::which(prog).map_err(|_| {
            anyhow::anyhow!(
                "`{prog}` is not installed\nhelp: apt-get install debootstrap util-linux"
            )
        })?;
    }
    let mirror = host_debian_mirror()?;
    fs_err::create_dir_all(toolchains_dir())?;
    let log_path = toolchains_dir().join(format!("{name}.log"));
    let mut log = std::io::LineWriter::new(fs_err::File::from_parts(
        crate::fsutil::create_log(&log_path)?,
        &log_path,
    ));
    let out = crate::fsutil::AtomicDir::new(&dest)?;
    let rootfs = out.path().join("rootfs");
    let started = std::time::Instant::now();

    crate::ui::status(
        "Creating",
        format_args!(
            "{name}: debian {} ({}) from {mirror}",
            desc.suite, desc.variant
        ),
    );
    let phase = crate::ui::Phase::start(&format!("debootstrapping {name}"));
    Cmd::new(format!("debootstrap {}", desc.suite), "debootstrap")
        .arg(format!("--variant={}", desc.variant))
        .arg(format!("--components={}", desc.components.join(",")))
        .arg(&desc.suite)
        .arg(&rootfs)
        .arg(&mirror)
        .stream(&mut log, |_| {})
        .with_context(|| {
            format!(
                "toolchain {name}: debootstrap failed (full log: {})",
                log_path.display()
            )
        })?;
    drop(phase);

    let mut conf = desc.apt_conf.join("\n");
    conf.push('\n');
    crate::fsutil::atomic_write(
        &rootfs.join("etc/apt/apt.conf.d/99rcclfix"),
        conf.as_bytes(),
    )?;
    write_pins(&rootfs, &desc, &mirror)?;

    let in_root = |summary: &str, argv: &[&str]| {
        Cmd::new(format!("{name}: {summary}"), "unshare")
            .args(["--mount", "--pid", "--fork", "--mount-proc"])
            .arg(format!("--root={}", rootfs.display()))
            .args([
                "/usr/bin/env",
                "-i",
                "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                "DEBIAN_FRONTEND=noninteractive",
                "LANG=C.UTF-8",
            ])
            .args(argv)
    };
    crate::ui::status(
        "Installing",
        format_args!("{} packages into {name}", desc.packages.len()),
    );
    let phase = crate::ui::Phase::start(&format!("installing packages into {name}"));
    in_root("apt-get update", &["apt-get", "update", "-q"]).stream(&mut log, |_| {})?;
    let mut install = vec!["apt-get", "install", "-y", "-q", "--no-install-recommends"];
    install.extend(desc.packages.iter().map(|s| s.as_str()));
    in_root("apt-get install", &install).stream(&mut log, |_| {})?;
    in_root("apt-get clean", &["apt-get", "clean"]).stream(&mut log, |_| {})?;
    drop(phase);
    let listing = in_root(
        "list packages",
        &["dpkg-query", "-W", "-f=${Package}=${Version}\\n"],
    )
    .read()?;
    let mut packages: Vec<String> = listing
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect();
    packages.sort();
    let from_suites = pinned_origins(&rootfs, &desc, &packages)?;
    for (suite, pkgs) in &from_suites {
        writeln!(log, "# from {suite}: {}", pkgs.join(" "))?;
    }

    let rootfs_bytes: u64 = walkdir::WalkDir::new(&rootfs)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .sum();
    let stamp = Stamp {
        name: name.into(),
        description_sha256: hash,
        suite: desc.suite.clone(),
        mirror,
        built_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        rootfs_bytes,
        packages,
        from_suites,
    };
    let mut text = serde_json::to_string_pretty(&stamp)?;
    text.push('\n');
    crate::fsutil::atomic_write(&out.path().join("stamp.json"), text.as_bytes())?;
    drop(log);
    let dest = out.commit()?;
    crate::ui::status(
        "Built",
        format_args!(
            "toolchain {name} in {:.0}s, {:.2} GB ({})",
            started.elapsed().as_secs_f64(),
            rootfs_bytes as f64 / 1e9,
            dest.display()
        ),
    );
    Ok(dest)
}

/// The apt sources and preferences of `desc`'s `[[pin]]`s inside `rootfs`: one
/// `sources.list.d/rcclfix-<suite>.list` per pinned suite (`deb <mirror> <suite> <components>`) and
/// `preferences.d/rcclfix` giving the named packages priority 990 in their suite
/// (apt_preferences(5)). A suite such as experimental is `NotAutomatic`, so nothing else is taken
/// from it. Nothing is written for a description without pins.
///
/// Errors: the mirror has whitespace (it would split the sources line), or a write fails.
pub fn write_pins(rootfs: &Path, desc: &ToolchainDesc, mirror: &str) -> anyhow::Result<()> {
    if desc.pin.is_empty() {
        return Ok(());
    }
    if mirror.is_empty() || mirror.chars().any(|c| c.is_whitespace() || c.is_control()) {
        bail!("the Debian mirror {mirror:?} has whitespace; it cannot go in a sources line");
    }
    let mut prefs = String::from("# Written by rcclfix from the toolchain's [[pin]] tables.\n");
    for p in &desc.pin {
        crate::fsutil::atomic_write(
            &rootfs.join(format!("etc/apt/sources.list.d/rcclfix-{}.list", p.suite)),
            format!("deb {mirror} {} {}\n", p.suite, desc.components.join(" ")).as_bytes(),
        )?;
        prefs.push_str(&format!(
            "\nPackage: {}\nPin: release a={}\nPin-Priority: 990\n",
            p.packages.join(" "),
            p.suite
        ));
    }
    crate::fsutil::atomic_write(
        &rootfs.join("etc/apt/preferences.d/rcclfix"),
        prefs.as_bytes(),
    )
}

/// Which installed packages (`name=version`, from `dpkg-query`) came from each pinned suite: those
/// whose exact version the suite's `Packages` index under `var/lib/apt/lists/` lists and the base
/// suite's does not.
///
/// Errors: a pinned package is installed in a version its suite does not have (the pin did not
/// take), or an index cannot be read (not a regular file, more than [`MAX_APT_LIST_BYTES`]).
pub fn pinned_origins(
    rootfs: &Path,
    desc: &ToolchainDesc,
    installed: &[String],
) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let mut out = BTreeMap::new();
    if desc.pin.is_empty() {
        return Ok(out);
    }
    let lists = rootfs.join("var/lib/apt/lists");
    let base = index_versions(&lists, &desc.suite)?;
    for p in &desc.pin {
        let suite = index_versions(&lists, &p.suite)?;
        let from: Vec<String> = installed
            .iter()
            .filter(|nv| suite.contains(nv.as_str()) && !base.contains(nv.as_str()))
            .cloned()
            .collect();
        for name in &p.packages {
            let prefix = format!("{name}=");
            if let Some(nv) = installed.iter().find(|nv| nv.starts_with(&prefix)) {
                if !from.contains(nv) {
                    bail!(
                        "{} is installed, but [[pin]] wants {name} from {}",
                        crate::ui::escape(nv),
                        p.suite
                    );
                }
            }
        }
        out.insert(p.suite.clone(), from);
    }
    Ok(out)
}

/// The largest apt `Packages` list read (1 GiB; a whole suite's is tens of MB), as `package`'s
/// stock lookup reads them.
pub const MAX_APT_LIST_BYTES: u64 = 1 << 30;

/// Every `name=version` in the `Packages` indexes of `suite` under an apt lists folder (files named
/// `…_dists_<suite>_<component>_binary-<arch>_Packages`, deb822 paragraphs).
fn index_versions(lists: &Path, suite: &str) -> anyhow::Result<BTreeSet<String>> {
    let needle = format!("_dists_{suite}_");
    let mut set = BTreeSet::new();
    let mut found = false;
    for e in fs_err::read_dir(lists)? {
        let path = e?.path();
        let fname = path.file_name().unwrap_or_default().to_string_lossy();
        if !(fname.contains(&needle) && fname.ends_with("_Packages")) {
            continue;
        }
        found = true;
        let text = crate::fsutil::read_capped(&path, MAX_APT_LIST_BYTES, "an apt list")?;
        set.extend(package_versions(&String::from_utf8_lossy(&text)));
    }
    if !found {
        bail!("{}: no Packages index for suite {suite}", lists.display());
    }
    Ok(set)
}

/// The largest `var/lib/dpkg/status` read (64 MiB; a ROCm toolchain's is a few MiB).
pub const MAX_DPKG_STATUS_BYTES: u64 = 64 << 20;

/// The packages installed in `rootfs` as `name=version`, sorted, read from its dpkg database
/// (`var/lib/dpkg/status`, a regular file of at most [`MAX_DPKG_STATUS_BYTES`]): what decides the
/// library's bytes, whatever the toolchain's stamp says.
///
/// Errors: the status file is missing, not a regular file, or too large (naming it).
pub fn dpkg_installed(rootfs: &Path) -> anyhow::Result<Vec<String>> {
    let path = rootfs.join("var/lib/dpkg/status");
    let bytes = crate::fsutil::read_capped(&path, MAX_DPKG_STATUS_BYTES, "a dpkg status file")?;
    Ok(installed_versions(&String::from_utf8_lossy(&bytes)))
}

/// `name=version` of every paragraph of a dpkg `status` file whose `Status:` ends in `installed`
/// (its files are unpacked and configured: dpkg(1), "package states"), sorted and without
/// duplicates (a package installed for two architectures is listed once per version).
pub fn installed_versions(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .split("\n\n")
        .filter_map(|para| {
            let field = |f: &str| {
                para.lines()
                    .find_map(|l| l.strip_prefix(f).map(|v| v.trim().to_owned()))
            };
            let installed = field("Status:")?.split_whitespace().last() == Some("installed");
            installed.then_some(())?;
            Some(format!("{}={}", field("Package:")?, field("Version:")?))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `name=version` of every paragraph of a `Packages` index (deb-control(5) fields `Package`,
/// `Version`).
pub fn package_versions(text: &str) -> Vec<String> {
    let mut out = vec![];
    for para in text.split("\n\n") {
        let field = |f: &str| {
            para.lines()
                .find_map(|l| l.strip_prefix(f).map(|v| v.trim().to_owned()))
        };
        if let (Some(p), Some(v)) = (field("Package:"), field("Version:")) {
            out.push(format!("{p}={v}"));
        }
    }
    out
}

/// Build the local toolchain `name` now if it has never been built (first `rcclfix build` on a fresh
/// machine); an existing one, even outdated, is left alone. Nothing to do for `host`.
///
/// Errors: as [`build_rootfs`] (e.g. not root, debootstrap missing).
pub fn ensure_built(name: &str) -> anyhow::Result<()> {
    if name == "host" || toolchains_dir().join(name).join("stamp.json").exists() {
        return Ok(());
    }
    crate::ui::status(
        "Toolchain",
        format_args!(
            "{name} is not built yet: building it first (once; 1.3–1.4 GB, 1–4 min measured: 191 s on a busy 2-core machine)"
        ),
    );
    build_rootfs(name, false).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_index_paragraphs() {
        let t = "Package: hipcc\nSource: rocm-hipamd\nVersion: 7.2.4+dfsg-1~exp1\nDepends: clang-22\n\nPackage: libx\nVersion: 1\n";
        assert_eq!(package_versions(t), ["hipcc=7.2.4+dfsg-1~exp1", "libx=1"]);
    }

    /// An index under the rootfs's apt lists that is a FIFO or a link to `/dev/zero` is refused
    /// naming it, never opened (the read blocked for ever on the FIFO before).
    #[test]
    fn an_apt_list_that_is_no_regular_file_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let list = t.path().join("m_dists_sid_main_binary-amd64_Packages");
        let st = std::process::Command::new("mkfifo")
            .arg(&list)
            .status()
            .unwrap();
        assert!(st.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let dir = t.path().to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(index_versions(&dir, "sid").map_err(|e| format!("{e:#}")));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("hung on the FIFO");
        let e = got.unwrap_err();
        assert!(e.contains("_Packages: not a regular file (a FIFO)"), "{e}");
        std::fs::remove_file(&list).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &list).unwrap();
        let e = index_versions(t.path(), "sid").unwrap_err().to_string();
        assert!(
            e.contains("_Packages: not a regular file (a character device)"),
            "{e}"
        );
    }

    /// What a `[[pin]]` writes into the rootfs, and which installed packages then count as coming
    /// from the pinned suite (in its index, not in the base suite's at that version).
    #[test]
    fn pins_and_their_origins() {
        let d = ToolchainDesc::parse(
            "description = \"x\"\nsuite = \"sid\"\npackages = [\"hipcc\", \"cmake\"]\n[[pin]]\nsuite = \"experimental\"\npackages = [\"hipcc\", \"libhip-dev\"]\n",
            "t.toml",
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        std::fs::create_dir_all(r.join("etc/apt/sources.list.d")).unwrap();
        std::fs::create_dir_all(r.join("etc/apt/preferences.d")).unwrap();
        assert!(write_pins(r, &d, "http://m.example/debian bad").is_err());
        write_pins(r, &d, "http://m.example/debian").unwrap();
        assert_eq!(
            std::fs::read_to_string(r.join("etc/apt/sources.list.d/rcclfix-experimental.list"))
                .unwrap(),
            "deb http://m.example/debian experimental main\n"
        );
        let prefs = std::fs::read_to_string(r.join("etc/apt/preferences.d/rcclfix")).unwrap();
        assert!(
            prefs.contains(
                "Package: hipcc libhip-dev\nPin: release a=experimental\nPin-Priority: 990\n"
            ),
            "{prefs}"
        );
        let lists = r.join("var/lib/apt/lists");
        std::fs::create_dir_all(&lists).unwrap();
        std::fs::write(
            lists.join("m.example_debian_dists_sid_main_binary-amd64_Packages"),
            "Package: hipcc\nVersion: 7.0\n\nPackage: cmake\nVersion: 4\n",
        )
        .unwrap();
        std::fs::write(lists.join("m.example_debian_dists_experimental_main_binary-amd64_Packages"), "Package: hipcc\nVersion: 7.2\n\nPackage: libhip7\nVersion: 7.2\n\nPackage: cmake\nVersion: 4\n").unwrap();
        let installed: Vec<String> = ["cmake=4", "hipcc=7.2", "libhip7=7.2"]
            .map(String::from)
            .to_vec();
        let o = pinned_origins(r, &d, &installed).unwrap();
        assert_eq!(o["experimental"], ["hipcc=7.2", "libhip7=7.2"]);
        // The pin did not take: hipcc came from sid.
        let installed: Vec<String> = ["cmake=4", "hipcc=7.0"].map(String::from).to_vec();
        let e = pinned_origins(r, &d, &installed).unwrap_err();
        assert!(format!("{e}").contains("hipcc=7.0 is installed"), "{e}");
    }

    #[test]
    fn mirror_deb822_skips_security() {
        let t = "Types: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\n\nTypes: deb\nURIs: http://m.example/debian\nSuites: bookworm\n";
        assert_eq!(
            mirror_from_deb822(t).as_deref(),
            Some("http://m.example/debian")
        );
    }

    #[test]
    fn mirror_one_line_with_options() {
        let t = "# c\ndeb [signed-by=/k.gpg] http://m.example/debian bookworm main\n";
        assert_eq!(
            mirror_from_one_line(t).as_deref(),
            Some("http://m.example/debian")
        );
    }
}
