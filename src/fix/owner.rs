//! Who owns a copy: a dpkg package (asked of dpkg's own database with `dpkg-query -S`, the
//! version with `dpkg-query -W`), a pip distribution (the `*.dist-info/RECORD` of the
//! site-packages folder above the file lists it; name and version from its `METADATA`, PEP 376
//! and the core metadata specification), or nobody.
//!
//! Everything read here comes from the file system of the machine and is bounded: a `RECORD` is
//! read up to [`MAX_RECORD_BYTES`], a `METADATA` up to [`MAX_METADATA_BYTES`], regular files
//! only; at most [`MAX_DIST_INFOS`] `.dist-info` folders are looked at per folder.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// The largest `RECORD` read (torch's lists about 15 000 files in about 2 MB).
pub const MAX_RECORD_BYTES: u64 = 64 << 20;
/// The largest `METADATA` read.
pub const MAX_METADATA_BYTES: u64 = 4 << 20;
/// The most `.dist-info` folders looked at in one folder.
pub const MAX_DIST_INFOS: usize = 20_000;
/// How many folders above the file are searched for a site-packages folder.
const MAX_ANCESTORS: usize = 8;
const DPKG_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// The owner of one copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Owner {
    /// A dpkg package lists the file.
    Dpkg {
        /// `rccl`, `librccl1:amd64`, … as dpkg names it.
        package: String,
        /// The installed version.
        version: String,
    },
    /// A pip distribution's `RECORD` lists the file.
    Pip {
        /// The distribution's `Name:`.
        distribution: String,
        /// Its `Version:`.
        version: String,
        /// The `RECORD` that lists the file.
        record: PathBuf,
        /// Whether the file's sha256 is the one `RECORD` gives (`None`: the line has no hash).
        record_hash_matches: Option<bool>,
    },
    /// Neither dpkg nor a pip `RECORD` lists it.
    None,
    /// It could not be told (dpkg's database exists but `dpkg-query` failed, a `RECORD` could not
    /// be read): never treated as unowned.
    Unknown {
        /// Why.
        reason: String,
    },
}

impl Owner {
    /// One line for the plan: `dpkg rccl 2.27.7.70201-81`, `pip torch 2.9.1+rocm7.2`, `none`.
    pub fn describe(&self) -> String {
        match self {
            Owner::Dpkg { package, version } => format!("dpkg {package} {version}"),
            Owner::Pip {
                distribution,
                version,
                ..
            } => format!("pip {distribution} {version}"),
            Owner::None => "none".into(),
            Owner::Unknown { reason } => format!("unknown ({reason})"),
        }
    }
}

/// The owner of the file found at `seen` (`file`: the same file, canonical). dpkg is asked
/// first, then the `RECORD`s above both paths.
pub fn owner_of(seen: &[PathBuf], file: &Path, sha256: &str) -> Owner {
    let mut paths: Vec<&Path> = seen.iter().map(|p| p.as_path()).collect();
    paths.push(file);
    match dpkg_owner(&paths) {
        Ok(Some(o)) => return o,
        Ok(None) => {}
        Err(reason) => return Owner::Unknown { reason },
    }
    for p in &paths {
        match pip_owner(p, sha256) {
            Ok(Some(o)) => return o,
            Ok(None) => {}
            Err(reason) => return Owner::Unknown { reason },
        }
    }
    Owner::None
}

/// Ask dpkg for the package owning any of `paths`. `Ok(None)`: not owned, or no dpkg on this
/// machine (neither `dpkg-query` nor `/var/lib/dpkg/status`).
fn dpkg_owner(paths: &[&Path]) -> Result<Option<Owner>, String> {
    let Ok(prog) = which::which("dpkg-query") else {
        if Path::new("/var/lib/dpkg/status").exists() {
            return Err("dpkg's database exists but dpkg-query is not on PATH".into());
        }
        return Ok(None);
    };
    for p in paths {
        let out = crate::process::Cmd::new("ask dpkg who owns a librccl", &prog)
            .arg("-S")
            .arg(p)
            .read_with_deadline(DPKG_DEADLINE);
        let text = match out {
            Ok(t) => t,
            Err(e) => match e.downcast_ref::<crate::process::CommandError>() {
                // dpkg-query(1): exit 1 when the path is not found.
                Some(c) if c.status.contains("exit status: 1") => continue,
                _ => return Err(format!("dpkg-query -S {}: {e:#}", p.display())),
            },
        };
        let Some(package) = parse_dpkg_search(&text, p) else {
            continue;
        };
        let version = crate::process::Cmd::new("ask dpkg for a package's version", &prog)
            .args(["-W", "-f=${Version}"])
            .arg(&package)
            .read_with_deadline(DPKG_DEADLINE)
            .map_err(|e| format!("dpkg-query -W {package}: {e:#}"))?;
        return Ok(Some(Owner::Dpkg {
            package,
            version: version.trim().to_string(),
        }));
    }
    Ok(None)
}

/// The package of `dpkg-query -S PATH`'s answer (`pkg[:arch][, pkg2]: PATH` lines; diversion
/// lines left out).
pub fn parse_dpkg_search(text: &str, path: &Path) -> Option<String> {
    let want = path.to_string_lossy();
    text.lines()
        .filter(|l| !l.starts_with("diversion by"))
        .find_map(|l| {
            let (pkgs, p) = l.split_once(": ")?;
            (p.trim() == want).then(|| pkgs.split(", ").next().unwrap_or(pkgs).to_string())
        })
}

/// The pip distribution whose `RECORD` lists `path`: the first folder above it that holds
/// `.dist-info` folders is its site-packages folder. `Ok(None)` when there is none, or none
/// lists it.
fn pip_owner(path: &Path, sha256: &str) -> Result<Option<Owner>, String> {
    for site in path.ancestors().skip(1).take(MAX_ANCESTORS) {
        let infos = dist_infos(site);
        if infos.is_empty() {
            continue;
        }
        let Ok(rel) = path.strip_prefix(site) else {
            continue;
        };
        for info in infos {
            let record = info.join("RECORD");
            if !record.exists() {
                continue;
            }
            let text = crate::fsutil::read_text_capped(&record, MAX_RECORD_BYTES, "a RECORD")
                .map_err(|e| format!("{e:#}"))?;
            let Some(hash) = record_lists(&text, rel) else {
                continue;
            };
            let (distribution, version) = metadata_name_version(&info)?;
            let record_hash_matches = hash.map(|h| h == record_hash(sha256));
            return Ok(Some(Owner::Pip {
                distribution,
                version,
                record,
                record_hash_matches,
            }));
        }
        // The site-packages folder was found and no RECORD lists the file.
        return Ok(None);
    }
    Ok(None)
}

/// The `*.dist-info` folders directly in `dir` (not links), sorted, at most [`MAX_DIST_INFOS`].
fn dist_infos(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "dist-info"))
        .take(MAX_DIST_INFOS)
        .collect();
    v.sort();
    v
}

/// Whether a `RECORD` (CSV: path, `sha256=<urlsafe base64, no padding>`, size) lists `rel`;
/// `Some(Some(hash))` with the line's hash field, `Some(None)` when it has none.
pub fn record_lists(text: &str, rel: &Path) -> Option<Option<String>> {
    for line in text.lines() {
        let (p, rest) = split_csv_field(line);
        if Path::new(&p) == rel {
            let (hash, _) = split_csv_field(rest);
            return Some((!hash.is_empty()).then_some(hash));
        }
    }
    None
}

/// The first CSV field of `line` (quoted or not) and the rest after its comma.
fn split_csv_field(line: &str) -> (String, &str) {
    if let Some(q) = line.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = q.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '"' {
                if chars.peek().map(|x| x.1) == Some('"') {
                    out.push('"');
                    chars.next();
                    continue;
                }
                let rest = &q[i + 1..];
                return (out, rest.strip_prefix(',').unwrap_or(rest));
            }
            out.push(c);
        }
        return (out, "");
    }
    match line.split_once(',') {
        Some((a, b)) => (a.to_string(), b),
        None => (line.to_string(), ""),
    }
}

/// A `RECORD` hash field for a file whose sha256 is `hex`: `sha256=<urlsafe base64, no padding>`.
pub fn record_hash(hex_digest: &str) -> String {
    use base64::Engine;
    let bytes = hex::decode(hex_digest).unwrap_or_default();
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// `Name:` and `Version:` of a `.dist-info` folder's `METADATA` (its header lines, up to the
/// first blank line).
fn metadata_name_version(info: &Path) -> Result<(String, String), String> {
    let path = info.join("METADATA");
    let text = crate::fsutil::read_text_capped(&path, MAX_METADATA_BYTES, "a METADATA file")
        .map_err(|e| format!("{e:#}"))?;
    let field = |k: &str| {
        text.lines()
            .take_while(|l| !l.is_empty())
            .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
    };
    match (field("Name:"), field("Version:")) {
        (Some(n), Some(v)) => Ok((n, v)),
        _ => Err(format!("{}: no Name: or Version: field", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpkg_search_lines() {
        let p = Path::new("/opt/rocm-7.2.0/lib/librccl.so.1.0");
        assert_eq!(
            parse_dpkg_search("rccl: /opt/rocm-7.2.0/lib/librccl.so.1.0\n", p).as_deref(),
            Some("rccl")
        );
        assert_eq!(
            parse_dpkg_search(
                "diversion by x from: /opt/rocm-7.2.0/lib/librccl.so.1.0\nlibrccl1:amd64, other: /opt/rocm-7.2.0/lib/librccl.so.1.0\n",
                p
            )
            .as_deref(),
            Some("librccl1:amd64")
        );
        assert_eq!(parse_dpkg_search("rccl: /opt/rocm-7.2.0/lib\n", p), None);
    }

    #[test]
    fn record_lines_quoted_and_plain() {
        let text =
            "torch/lib/librccl.so,sha256=abc,12\n\"torch/lib/a,b.so\",sha256=def,3\nx/RECORD,,\n";
        assert_eq!(
            record_lists(text, Path::new("torch/lib/librccl.so")),
            Some(Some("sha256=abc".into()))
        );
        assert_eq!(
            record_lists(text, Path::new("torch/lib/a,b.so")),
            Some(Some("sha256=def".into()))
        );
        assert_eq!(record_lists(text, Path::new("x/RECORD")), Some(None));
        assert_eq!(record_lists(text, Path::new("torch/lib/other.so")), None);
    }

    #[test]
    fn record_hash_is_urlsafe_without_padding() {
        // sha256 of the empty string.
        assert_eq!(
            record_hash("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
        );
    }
}
