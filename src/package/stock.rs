//! The stock RCCL package of the distribution a Debian toolchain is: Debian's `librccl1` as the
//! toolchain's own apt lists (`var/lib/apt/lists/*_Packages` inside its rootfs,
//! `$RCCLFIX_HOME/toolchains/<name>/rootfs`) describe it. The `.deb` overlay depends on that
//! package's upstream version, not on the recipe's `rocm_release`: no Debian suite has a
//! `librccl1` of every ROCm release (trixie and sid have 5.4.3, experimental 7.2.4), so a
//! dependency derived from the release can name a package that exists nowhere.
//!
//! A toolchain whose lists hold several suites (sid plus experimental for the ROCm 7.2 line)
//! gets the highest version, compared as dpkg does (Debian Policy §5.6.12), which is the suite
//! the ROCm packages came from.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

/// `librccl1` as a toolchain's apt lists describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StockPackage {
    /// The binary package, `librccl1`.
    pub package: String,
    /// Its Debian version, e.g. `5.4.3-3+b1` or `7.2.4-1~exp3`.
    pub version: String,
    /// The apt list it was read from (file name under `var/lib/apt/lists/`).
    pub list: String,
    /// Its own `Depends:` field as the list gives it (empty when it has none).
    pub depends_field: String,
}

impl StockPackage {
    /// The upstream part of [`StockPackage::version`]: without the epoch and the Debian
    /// revision (`1:7.2.4-1~exp3` → `7.2.4`).
    pub fn upstream(&self) -> &str {
        let v = self
            .version
            .split_once(':')
            .map_or(&self.version[..], |x| x.1);
        v.rsplit_once('-').map_or(v, |x| x.0)
    }

    /// `librccl1 (>= U~), librccl1 (<< U'~)` where `U'` is `U` with its last number
    /// incremented: any Debian revision of the same upstream release (`7.2.4-1~exp3` included).
    pub fn depends(&self) -> String {
        let u = self.upstream();
        let next = match u.rsplit_once('.') {
            Some((head, last)) => match last.parse::<u64>() {
                Ok(n) => format!("{head}.{}", n + 1),
                Err(_) => format!("{u}.1"),
            },
            None => match u.parse::<u64>() {
                Ok(n) => (n + 1).to_string(),
                Err(_) => format!("{u}.1"),
            },
        };
        format!("{p} (>= {u}~), {p} (<< {next}~)", p = self.package)
    }
}

/// The rootfs of the Debian toolchain `name` (`$RCCLFIX_HOME/toolchains/<name>/rootfs`).
///
/// Errors: `name` is not a plain toolchain name (letters, digits, `.`, `-`, `_`; no `..`), so a
/// manifest cannot point this at another folder.
pub fn toolchain_rootfs(name: &str) -> anyhow::Result<PathBuf> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !plain {
        anyhow::bail!("toolchain {name:?} is not a toolchain name");
    }
    Ok(crate::paths::toolchain_rootfs(name))
}

/// Read `package` (e.g. `librccl1`) for `arch` (e.g. `amd64`) from the apt lists of `rootfs`;
/// the highest version wins.
///
/// Errors (one line): the rootfs or its apt lists are missing; no list describes the package.
///
/// A package run asks this up to three times (the export gate's stock library, the `.deb`'s
/// `Depends:`, the overlay's stock path), and the lists of a suite are tens of MB: a successful
/// answer is kept for the rest of the process, keyed by the lists' folder, package and arch and
/// by the folder's modification time (apt replaces its list files when it updates them).
pub fn read(rootfs: &Path, package: &str, arch: &str) -> anyhow::Result<StockPackage> {
    type Key = (PathBuf, String, String, Option<std::time::SystemTime>);
    static SEEN: std::sync::Mutex<Vec<(Key, StockPackage)>> = std::sync::Mutex::new(Vec::new());
    let lists = rootfs.join("var/lib/apt/lists");
    let key: Key = (
        lists.clone(),
        package.to_owned(),
        arch.to_owned(),
        std::fs::metadata(&lists).and_then(|m| m.modified()).ok(),
    );
    if let Some((_, p)) = SEEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(k, _)| *k == key)
    {
        return Ok(p.clone());
    }
    let p = read_lists(rootfs, package, arch)?;
    SEEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((key, p.clone()));
    Ok(p)
}

/// [`read`] without the cache.
fn read_lists(rootfs: &Path, package: &str, arch: &str) -> anyhow::Result<StockPackage> {
    let lists = rootfs.join("var/lib/apt/lists");
    let dir = std::fs::read_dir(&lists).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot read the toolchain's apt lists: {e}",
            lists.display()
        )
    })?;
    let mut names: Vec<PathBuf> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("_Packages"))
        })
        .collect();
    names.sort();
    let mut best: Option<StockPackage> = None;
    for list in names {
        let Ok(meta) = std::fs::metadata(&list) else {
            continue;
        };
        // A Packages list of a whole suite is tens of MB; anything far larger is not one.
        if !meta.is_file() || meta.len() > crate::container::rootfs::MAX_APT_LIST_BYTES {
            continue;
        }
        let text = crate::fsutil::read_capped(
            &list,
            crate::container::rootfs::MAX_APT_LIST_BYTES,
            "an apt list",
        )?;
        let text = String::from_utf8_lossy(&text);
        for para in text.split("\n\n") {
            let field = |k: &str| super::fields::deb822_field(para, k);
            if field("Package") != Some(package) {
                continue;
            }
            if !matches!(field("Architecture"), Some(a) if a == arch || a == "all") {
                continue;
            }
            let Some(version) = field("Version") else {
                continue;
            };
            if super::fields::debian_version(version).is_err() {
                continue;
            }
            let cand = StockPackage {
                package: package.to_owned(),
                version: version.to_owned(),
                list: list
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                depends_field: field("Depends").unwrap_or("").to_owned(),
            };
            if best
                .as_ref()
                .is_none_or(|b| compare_versions(&cand.version, &b.version) == Ordering::Greater)
            {
                best = Some(cand);
            }
        }
    }
    best.ok_or_else(|| {
        anyhow::anyhow!(
            "{}: no apt list describes {package} for {arch}, so there is no stock package to overlay",
            lists.display()
        )
    })
}

/// Compare two Debian versions as dpkg does (`deb-version(7)`): epoch numerically, then upstream
/// version and revision, each alternating non-digit parts (letters before non-letters, `~` before
/// everything, even the end) and numeric parts.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    fn split(v: &str) -> (u64, &str, &str) {
        let (epoch, rest) = match v.split_once(':') {
            Some((e, r)) => (e.parse().unwrap_or(0), r),
            None => (0, v),
        };
        match rest.rsplit_once('-') {
            Some((u, r)) => (epoch, u, r),
            None => (epoch, rest, ""),
        }
    }
    fn order(c: Option<u8>) -> i32 {
        match c {
            Some(b'~') => -1,
            None => 0,
            Some(c) if c.is_ascii_alphabetic() => c as i32,
            Some(c) => c as i32 + 256,
        }
    }
    fn part(mut a: &[u8], mut b: &[u8]) -> Ordering {
        while !a.is_empty() || !b.is_empty() {
            loop {
                let (ca, cb) = (a.first().copied(), b.first().copied());
                let da = ca.is_none_or(|c| c.is_ascii_digit());
                let db = cb.is_none_or(|c| c.is_ascii_digit());
                if da && db {
                    break;
                }
                let (oa, ob) = (
                    if da { 0 } else { order(ca) },
                    if db { 0 } else { order(cb) },
                );
                if oa != ob {
                    return oa.cmp(&ob);
                }
                a = &a[usize::from(!da)..];
                b = &b[usize::from(!db)..];
            }
            let na = a.iter().take_while(|c| c.is_ascii_digit()).count();
            let nb = b.iter().take_while(|c| c.is_ascii_digit()).count();
            let num = |d: &[u8]| {
                let s = std::str::from_utf8(d)
                    .unwrap_or("0")
                    .trim_start_matches('0');
                (s.len(), s.to_owned())
            };
            let o = num(&a[..na]).cmp(&num(&b[..nb]));
            if o != Ordering::Equal {
                return o;
            }
            a = &a[na..];
            b = &b[nb..];
        }
        Ordering::Equal
    }
    let (ea, ua, ra) = split(a);
    let (eb, ub, rb) = split(b);
    ea.cmp(&eb)
        .then_with(|| part(ua.as_bytes(), ub.as_bytes()))
        .then_with(|| part(ra.as_bytes(), rb.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_dpkg_does() {
        let lt = |a: &str, b: &str| assert_eq!(compare_versions(a, b), Ordering::Less, "{a} < {b}");
        lt("5.4.3-3+b1", "7.2.4-1~exp3");
        lt("7.2.4~", "7.2.4-1~exp3");
        lt("7.2.4-1~exp3", "7.2.4-1");
        lt("7.2.4-1~exp3", "7.2.5~");
        lt("1.0~rc1", "1.0");
        lt("9.9", "1:0.1");
        lt("2.13.4", "2.13.10");
        assert_eq!(compare_versions("1.0-1", "1.0-1"), Ordering::Equal);
    }

    #[test]
    fn depends_covers_every_revision_of_the_upstream_release() {
        let p = |v: &str| StockPackage {
            package: "librccl1".into(),
            version: v.into(),
            list: String::new(),
            depends_field: String::new(),
        };
        assert_eq!(
            p("5.4.3-3+b1").depends(),
            "librccl1 (>= 5.4.3~), librccl1 (<< 5.4.4~)"
        );
        assert_eq!(
            p("7.2.4-1~exp3").depends(),
            "librccl1 (>= 7.2.4~), librccl1 (<< 7.2.5~)"
        );
        assert_eq!(p("1:7.2.4-1").upstream(), "7.2.4");
        assert!(toolchain_rootfs("../etc").is_err());
        assert!(toolchain_rootfs("debian-rocm7.2").is_ok());
    }
}
