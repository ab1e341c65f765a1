//! The rebuild a refused copy needs: its ROCm release and RCCL version, read from what owns it
//! and from its file name, then [`crate::doctor::release::rebuild_advice`] (the same rule doctor
//! uses: only the user's release line, never a default).
//!
//! Where the release comes from:
//! - AMD's `rccl` package: version `2.27.7.70201-81~24.04`, the RCCL version then the ROCm
//!   release as an integer (`70201` → 7.2.1; [`crate::doctor::release::release_from_int`]);
//! - Debian's `librccl1`: version `7.2.4-1~exp3`, the ROCm release (Debian packages RCCL under
//!   ROCm's version);
//! - a pip distribution: `torch 2.9.1+rocm7.2` (the local version names the ROCm family), or a
//!   `rocm*` distribution (TheRock's `rocm-sdk-libraries-*`) whose version is the release;
//! - the file name AMD installs, `librccl.so.1.0.70201`.

use std::path::Path;

use crate::doctor::release::{rebuild_advice, release_from_int, RebuildAdvice};

use super::owner::Owner;

/// The leading dotted number of `s` (`7.2.4` of `7.2.4-1~exp3`), at least two components.
fn leading(s: &str) -> Option<&str> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let v = s[..end].trim_end_matches('.');
    (v.split('.').count() >= 2 && v.split('.').all(|p| !p.is_empty())).then_some(v)
}

/// (ROCm release, RCCL version) as far as `owner` and the file name of `path` tell.
pub fn release_of(owner: &Owner, path: &Path) -> (Option<String>, Option<String>) {
    let mut rocm = None;
    let mut rccl = None;
    match owner {
        Owner::Dpkg { version, .. } => {
            if let Some(v) = leading(version) {
                let parts: Vec<&str> = v.split('.').collect();
                match parts.as_slice() {
                    [a, b, c, n] if n.len() >= 5 => {
                        rccl = Some(format!("{a}.{b}.{c}"));
                        rocm = n.parse().ok().and_then(release_from_int);
                    }
                    [a, ..] if a.parse::<u32>().is_ok_and(|m| m >= 5) => {
                        rocm = Some(v.to_owned());
                    }
                    _ => {}
                }
            }
        }
        Owner::Pip {
            distribution,
            version,
            ..
        } => {
            if let Some((_, local)) = version.split_once("+rocm") {
                rocm = leading(local).map(str::to_owned);
            } else if distribution.to_ascii_lowercase().starts_with("rocm") {
                rocm = leading(version).map(str::to_owned);
            }
        }
        Owner::None | Owner::Unknown { .. } => {}
    }
    if rocm.is_none() {
        let name = path.file_name().map(|n| n.to_string_lossy().to_string());
        if let Some(n) = name.as_deref().and_then(|n| n.rsplit('.').next()) {
            if n.len() == 5 {
                rocm = n.parse().ok().and_then(release_from_int);
            }
        }
    }
    (rocm, rccl)
}

/// The rebuild for a refused copy owned by `owner` at `path`, for `targets`.
pub fn rebuild_for(owner: &Owner, path: &Path, targets: &[String]) -> RebuildAdvice {
    let (rocm, rccl) = release_of(owner, path);
    rebuild_advice(rocm.as_deref(), rccl.as_deref(), targets)
}

/// One line for the plan: the command, or why there is none.
pub fn describe(a: &RebuildAdvice) -> String {
    match (&a.command, &a.rocm, &a.rccl) {
        (Some(c), _, _) => c.clone(),
        (None, None, None) => crate::doctor::release::RELEASE_UNKNOWN.to_string(),
        (None, rocm, rccl) => {
            let what = [
                rocm.as_ref().map(|r| format!("ROCm {r}")),
                rccl.as_ref().map(|r| format!("RCCL {r}")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ");
            match a.notes.first() {
                Some(n) => format!("none in this rcclfix for {what}: {n}"),
                None => format!("none in this rcclfix for {what}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dpkg(v: &str) -> Owner {
        Owner::Dpkg {
            package: "rccl".into(),
            version: v.into(),
        }
    }

    #[test]
    fn releases_from_owners_and_file_names() {
        let p = Path::new("/x/librccl.so.1");
        assert_eq!(
            release_of(&dpkg("2.27.7.70201-81~24.04"), p),
            (Some("7.2.1".into()), Some("2.27.7".into()))
        );
        assert_eq!(
            release_of(&dpkg("7.2.4-1~exp3"), p),
            (Some("7.2.4".into()), None)
        );
        let torch = Owner::Pip {
            distribution: "torch".into(),
            version: "2.9.1+rocm7.2".into(),
            record: "/x/RECORD".into(),
            record_hash_matches: None,
        };
        assert_eq!(release_of(&torch, p), (Some("7.2".into()), None));
        assert_eq!(
            release_of(
                &Owner::None,
                Path::new("/opt/rocm/lib/librccl.so.1.0.70204")
            ),
            (Some("7.2.4".into()), None)
        );
        assert_eq!(release_of(&Owner::None, p), (None, None));
    }

    #[test]
    fn unknown_release_names_no_recipe() {
        let a = rebuild_for(&Owner::None, Path::new("/x/librccl.so.1"), &[]);
        assert_eq!(a.tag, None);
        assert_eq!(describe(&a), crate::doctor::release::RELEASE_UNKNOWN);
    }
}
