//! The grammars every value that reaches a package file name, a package name, a version or a
//! control/metadata field is checked against before anything is written, whether it comes from
//! `manifest.json` or from the command line.
//!
//! Each check returns `Err(reason)`, a lowercase phrase without the value; callers add the field,
//! the value (`{:?}`, so control characters are escaped) and where it came from, on one line.
//!
//! Sources: Debian Policy §5.1 (control file syntax: one line per simple field), §5.6.1 (package
//! names), §5.6.12 (versions), §7.1 (relationship fields); deb-control(5) (`Maintainer:`);
//! PEP 440 (versions, canonical form), the "Binary distribution format" spec (wheel file names:
//! `{distribution}-{version}-{python tag}-{abi tag}-{platform tag}.whl`, with `-` never inside a
//! component); git-check-ref-format(1) (tags); LLVM `AMDGPUUsage.rst` "Target ID" (gfx targets).

use std::path::Path;

use crate::manifest::Manifest;

/// The longest file name most Linux filesystems accept (`NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// Longest free-text value (recipe id, tag, toolchain) accepted in a manifest.
const MAX_WORD: usize = 200;

/// The value of field `key` in one deb822 paragraph (a `Packages` list stanza, a dpkg `status`
/// entry, a `control` file), trimmed; the first line that starts with `key:` wins (deb822(5)).
/// `None` when the paragraph has no such field.
pub fn deb822_field<'a>(para: &'a str, key: &str) -> Option<&'a str> {
    para.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
        .map(str::trim)
}

/// Debian Policy §5.6.1: at least two characters, lowercase letters, digits, `+`, `-`, `.`,
/// starting with a letter or digit.
pub fn debian_package_name(s: &str) -> Result<(), String> {
    if s.len() < 2 {
        return Err("is shorter than two characters".into());
    }
    if !s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        return Err("must start with a lowercase letter or a digit".into());
    }
    if let Some(c) = s
        .chars()
        .find(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c)))
    {
        return Err(format!("contains {c:?} (allowed: a-z 0-9 + - .)"));
    }
    Ok(())
}

/// Debian Policy §5.6.12: `[epoch:]upstream_version[-debian_revision]`. The epoch is digits; the
/// upstream version starts with a digit and holds letters, digits and `. + ~` (plus `-` only when
/// there is a revision, `:` only with an epoch); the revision holds letters, digits and `. + ~`.
pub fn debian_version(s: &str) -> Result<(), String> {
    let (epoch, rest) = match s.split_once(':') {
        Some((e, r)) => (Some(e), r),
        None => (None, s),
    };
    if let Some(e) = epoch {
        if e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit()) {
            return Err("has an epoch that is not a number".into());
        }
    }
    let (upstream, revision) = match rest.rsplit_once('-') {
        Some((u, r)) => (u, Some(r)),
        None => (rest, None),
    };
    if !upstream.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("must start with a digit".into());
    }
    let up_ok = |c: char| {
        c.is_ascii_alphanumeric()
            || ".+~".contains(c)
            || (c == '-' && revision.is_some())
            || (c == ':' && epoch.is_some())
    };
    if let Some(c) = upstream.chars().find(|&c| !up_ok(c)) {
        return Err(format!("contains {c:?} (allowed: a-z A-Z 0-9 . + ~)"));
    }
    if let Some(r) = revision {
        if r.is_empty() {
            return Err("ends with an empty revision".into());
        }
        if let Some(c) = r
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || ".+~".contains(c)))
        {
            return Err(format!(
                "has {c:?} in its revision (allowed: a-z A-Z 0-9 . + ~)"
            ));
        }
    }
    Ok(())
}

/// A canonical PEP 440 version: `N(.N)*[{a|b|rc}N][.postN][.devN][+local]`, numbers without
/// leading zeros, the local label lowercase letters and digits separated by `.` (the form a wheel
/// file name carries, so pip's normalisation does not change it).
pub fn pep440_version(s: &str) -> Result<(), String> {
    let (public, local) = match s.split_once('+') {
        Some((p, l)) => (p, Some(l)),
        None => (s, None),
    };
    let num = |t: &str| -> bool {
        !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && (t == "0" || !t.starts_with('0'))
    };
    let mut rest = public;
    // The release segment: N(.N)*, stopping before a "." that does not start another number.
    let b = rest.as_bytes();
    let mut release_end = 0;
    while release_end < b.len() && b[release_end].is_ascii_digit() {
        release_end += 1;
    }
    while release_end + 1 < b.len() && b[release_end] == b'.' && b[release_end + 1].is_ascii_digit()
    {
        release_end += 1;
        while release_end < b.len() && b[release_end].is_ascii_digit() {
            release_end += 1;
        }
    }
    let release = &rest[..release_end];
    if release.split('.').any(|p| !num(p)) {
        return Err("does not start with a release number N[.N…] (PEP 440)".into());
    }
    rest = &rest[release_end..];
    for pre in ["rc", "a", "b"] {
        if let Some(r) = rest.strip_prefix(pre) {
            let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            if !num(&r[..end]) {
                return Err("has a pre-release without a number (PEP 440)".into());
            }
            rest = &r[end..];
            break;
        }
    }
    for tag in [".post", ".dev"] {
        if let Some(r) = rest.strip_prefix(tag) {
            let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            if !num(&r[..end]) {
                return Err(format!("has {tag} without a number (PEP 440)"));
            }
            rest = &r[end..];
        }
    }
    if !rest.is_empty() {
        return Err(format!(
            "has {rest:?} after the version number (not a canonical PEP 440 version)"
        ));
    }
    if let Some(l) = local {
        let ok = !l.is_empty()
            && l.split('.').all(|p| {
                !p.is_empty()
                    && p.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            });
        if !ok {
            return Err(
                "has a local label that is not lowercase letters and digits separated by '.' (PEP 440)"
                    .into(),
            );
        }
    }
    Ok(())
}

/// A release number `N(.N)*` (1–4 parts, no leading zeros, each below 100 000), which is both
/// a Debian upstream version and a PEP 440 release segment, so `<it>+rcclfix<N>` is a valid
/// version in both worlds.
pub fn release_number(s: &str) -> Result<(), String> {
    let parts: Vec<&str> = s.split('.').collect();
    let ok = (1..=4).contains(&parts.len())
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 5
                && p.bytes().all(|b| b.is_ascii_digit())
                && (*p == "0" || !p.starts_with('0'))
        });
    if ok {
        Ok(())
    } else {
        Err("is not a release number (digits and dots, e.g. 2.13.4)".into())
    }
}

/// One relationship field of a binary package (Policy §7.1): comma-separated entries, each a
/// `|`-separated list of alternatives `package[:arch] [(op version)]` with `op` one of
/// `<< <= = >= >>`. Architecture restrictions and build profiles belong to source packages only.
pub fn depends(s: &str) -> Result<(), String> {
    single_line(s)?;
    if s.trim().is_empty() {
        return Err("is empty".into());
    }
    for entry in s.split(',') {
        for alt in entry.split('|') {
            let alt = alt.trim();
            if alt.is_empty() {
                return Err("has an empty entry (two separators in a row)".into());
            }
            let (name, rel) = match alt.find('(') {
                Some(i) => (alt[..i].trim(), Some(alt[i..].trim())),
                None => (alt, None),
            };
            let (pkg, arch) = match name.split_once(':') {
                Some((p, a)) => (p, Some(a)),
                None => (name, None),
            };
            debian_package_name(pkg).map_err(|e| format!("names package {pkg:?}, which {e}"))?;
            if let Some(a) = arch {
                if a.is_empty()
                    || !a
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                {
                    return Err(format!("has an invalid architecture qualifier {a:?}"));
                }
            }
            if let Some(rel) = rel {
                let inner = rel
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| format!("has {rel:?}, which is not \"(op version)\""))?
                    .trim();
                let op_len = ["<<", "<=", ">=", ">>", "="]
                    .iter()
                    .find(|op| inner.starts_with(**op))
                    .map(|op| op.len())
                    .ok_or_else(|| {
                        format!("has {rel:?}: the relation must be one of << <= = >= >>")
                    })?;
                let ver = inner[op_len..].trim();
                debian_version(ver).map_err(|e| format!("has version {ver:?}, which {e}"))?;
            }
        }
    }
    Ok(())
}

/// One line of text: no control character (C0, DEL, C1) at all.
pub fn single_line(s: &str) -> Result<(), String> {
    match s.chars().find(|c| c.is_control()) {
        Some('\n') | Some('\r') => Err("spans more than one line".into()),
        Some(c) => Err(format!("contains the control character {c:?}")),
        None => Ok(()),
    }
}

/// `Maintainer:` (deb-control(5)): `Full Name <local@domain>` on one line. The name has no
/// `< > , "` (which would make it two addresses or a quoted phrase); the domain has at least two
/// labels of letters, digits and `-` (what lintian's `bogus-mail-host` check accepts).
pub fn maintainer(s: &str) -> Result<(), String> {
    single_line(s)?;
    let (name, rest) = s.split_once('<').ok_or("is not \"Full Name <address>\"")?;
    let addr = rest
        .strip_suffix('>')
        .ok_or("does not end with the address in <>")?;
    let name = name.trim();
    if name.is_empty() {
        return Err("has no name before the address".into());
    }
    if let Some(c) = name.chars().find(|c| "<>,\"".contains(*c)) {
        return Err(format!("has {c:?} in the name"));
    }
    mail_address(addr)
}

/// `local@domain`: the local part from RFC 5322's `atext` and dots, the domain two or more
/// labels of letters, digits and `-`.
pub fn mail_address(a: &str) -> Result<(), String> {
    let (local, domain) = a.rsplit_once('@').ok_or("has an address without '@'")?;
    let atext = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+/=?^_`{|}~-.".contains(c);
    if local.is_empty() || !local.chars().all(atext) {
        return Err(format!("has an invalid address {a:?}"));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if labels.len() < 2 || !labels.iter().all(label_ok) {
        return Err(format!(
            "has the mail host {domain:?}, which is not a domain name (e.g. example.org)"
        ));
    }
    Ok(())
}

/// A word of `[A-Za-z0-9]` and the given punctuation, starting with a letter or digit, at most
/// `max` bytes long.
fn word(s: &str, punct: &str, max: usize) -> Result<(), String> {
    if s.is_empty() {
        return Err("is empty".into());
    }
    if s.len() > max {
        return Err(format!("is longer than {max} bytes"));
    }
    if !s.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err("must start with a letter or a digit".into());
    }
    if let Some(c) = s
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || punct.contains(c)))
    {
        return Err(format!("contains {c:?} (allowed: A-Z a-z 0-9 {punct})"));
    }
    Ok(())
}

/// A git tag name as rcclfix recipes use them: the git-check-ref-format(1) rules restricted to
/// letters, digits and `. _ + - /`, no `..`, `//`, leading `/` or trailing `/` or `.lock`.
pub fn tag(s: &str) -> Result<(), String> {
    word(s, "._+-/", MAX_WORD)?;
    if s.contains("..") || s.contains("//") || s.ends_with('/') || s.ends_with(".lock") {
        return Err("is not a valid git tag name".into());
    }
    Ok(())
}

/// A full commit id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
pub fn commit(s: &str) -> Result<(), String> {
    if (s.len() == 40 || s.len() == 64)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err("is not a full commit id (40 or 64 lowercase hex digits)".into())
    }
}

/// A file name: letters, digits and `. _ + -`, not `.`/`..`, at most [`NAME_MAX`] bytes.
pub fn file_name(s: &str) -> Result<(), String> {
    word(s, "._+-", NAME_MAX)?;
    Ok(())
}

/// The installed path of the stock library (`--stock-path`): absolute, at least two components,
/// each letters, digits and `. _ + -` (so the maintainer scripts can single-quote it and it is
/// one tar member name), none of them `.` or `..`.
pub fn stock_path(s: &str) -> Result<(), String> {
    single_line(s)?;
    let Some(rest) = s.strip_prefix('/') else {
        return Err("is not an absolute path".into());
    };
    if s.len() > 1024 {
        return Err("is longer than 1024 bytes".into());
    }
    let parts: Vec<&str> = rest.split('/').collect();
    if parts.len() < 2 {
        return Err(
            "must name a file inside a folder (e.g. /usr/lib/x86_64-linux-gnu/librccl.so.1.0)"
                .into(),
        );
    }
    for p in parts {
        if p.is_empty() || p == "." || p == ".." {
            return Err("has an empty, `.` or `..` component".into());
        }
        if let Some(c) = p
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || "._+-".contains(c)))
        {
            return Err(format!("contains {c:?} (allowed: A-Z a-z 0-9 . _ + - /)"));
        }
    }
    Ok(())
}

/// Check every manifest value that reaches a package (file names, package names, versions,
/// control and metadata fields, the wheel's Python hook) against its grammar. `path` is the
/// manifest file, named in the error.
///
/// Errors (one line): `<path>: <field> <value> <what is wrong>`.
pub fn check_manifest(path: &Path, m: &Manifest) -> anyhow::Result<()> {
    let fail = |field: &str, value: &str, why: String| -> anyhow::Error {
        anyhow::anyhow!("{}: {field} {value:?} {why}", path.display())
    };
    let check = |field: &str, value: &str, r: Result<(), String>| -> anyhow::Result<()> {
        r.map_err(|why| fail(field, value, why))
    };
    check(
        "rccl_version",
        &m.rccl_version,
        release_number(&m.rccl_version),
    )?;
    check(
        "rocm_release",
        &m.rocm_release,
        release_number(&m.rocm_release),
    )?;
    let parts: Vec<u32> = m
        .rocm_release
        .split('.')
        .map(|p| p.parse().unwrap_or(u32::MAX))
        .collect();
    if !(2..=3).contains(&parts.len()) || parts[1..].iter().any(|&p| p > 99) || parts[0] > 999 {
        return Err(fail(
            "rocm_release",
            &m.rocm_release,
            "is not a ROCm release X.Y[.Z] (X below 1000, Y and Z below 100)".into(),
        ));
    }
    check("recipe", &m.recipe, word(&m.recipe, "._+-", MAX_WORD))?;
    match &m.branch {
        // A branch-pinned build (recipe `source.branch`) has no tag; the branch obeys the same
        // ref-name grammar.
        Some(b) if m.tag.is_empty() => check("branch", b, tag(b))?,
        _ => check("tag", &m.tag, tag(&m.tag))?,
    }
    check("commit", &m.commit, commit(&m.commit))?;
    check(
        "toolchain",
        &m.toolchain,
        word(&m.toolchain, "._+-/:@", MAX_WORD),
    )?;
    check(
        "rcclfix_version",
        &m.rcclfix_version,
        word(&m.rcclfix_version, ".+-", 64),
    )?;
    check("library.file", &m.library.file, file_name(&m.library.file))?;
    check(
        "library.soname",
        &m.library.soname,
        file_name(&m.library.soname),
    )?;
    if m.library.sha256.len() != 64
        || !m
            .library
            .sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(fail(
            "library.sha256",
            &m.library.sha256,
            "is not 64 lowercase hex digits".into(),
        ));
    }
    if m.targets.is_empty() {
        anyhow::bail!("{}: targets is empty", path.display());
    }
    let mut seen = std::collections::BTreeSet::new();
    for t in &m.targets {
        crate::recipe::check_target(&format!("{}: targets", path.display()), t)?;
        if !seen.insert(t.as_str()) {
            return Err(fail("targets", t, "is listed twice".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names() {
        for ok in ["rcclfix-rccl-gfx1100", "libc6", "g++", "a.b"] {
            assert_eq!(debian_package_name(ok), Ok(()), "{ok}");
        }
        for bad in ["a", "-x", "Abc", "a_b", "a/b", "a b", "a\nb"] {
            assert!(debian_package_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn debian_versions() {
        for ok in [
            "2.13.4+rcclfix1",
            "1:2.0-3",
            "5.4.3~",
            "2.13.4.50403",
            "1.0-1+b1",
        ] {
            assert_eq!(debian_version(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "x1",
            "1.0/..",
            "1 0",
            "1:",
            ":1",
            "1.0-",
            "1.0_1",
            "1:2:3-a:b",
        ] {
            assert!(debian_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pep440() {
        for ok in [
            "2.13.4",
            "2.13.4+rcclfix1",
            "1.0rc1",
            "1.0.post2.dev3+a.b1",
            "0.1",
        ] {
            assert_eq!(pep440_version(ok), Ok(()), "{ok}");
        }
        for bad in [
            "", "v1", "1.0+", "1.0+A", "01.2", "1.0-1", "1..2", "1.0+a/b", "1.0+a_b",
        ] {
            assert!(pep440_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn releases() {
        assert!(release_number("2.13.4").is_ok());
        for bad in [
            "",
            "2.13.4+x",
            "x/../../y",
            "2..3",
            "02.1",
            "1.2.3.4.5",
            "123456",
        ] {
            assert!(release_number(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn relationship_fields() {
        for ok in [
            "librccl1 (>= 5.4.3~), librccl1 (<< 5.4.4~)",
            "libc6 (>= 2.14), rccl (>= 2.13.4.50403) | rccl-dev",
            "ab:any",
            "foo (=1.0)",
        ] {
            assert_eq!(depends(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "a\nPre-Depends: evil",
            "librccl1 (>= 5.4.3~),",
            "a (~ 1.0)",
            "a (>= )",
            "a [amd64]",
            "A",
            "a (>= 1.0",
            "a | | b",
        ] {
            assert!(depends(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn maintainers() {
        assert_eq!(maintainer("Jane Doe <jane@example.org>"), Ok(()));
        for bad in [
            "A <a@b>\nPre-Depends: evil",
            "jane@example.org",
            "<jane@example.org>",
            "Jane <jane@localhost>",
            "Jane, Joe <j@example.org>",
            "Jane <j@example.org> x",
            "Jane <j k@example.org>",
            "Jane \x1b[2J <j@example.org>",
        ] {
            assert!(maintainer(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn words() {
        assert!(tag("rocm-5.4.3").is_ok());
        assert!(tag("therock-7.14/x").is_ok());
        for bad in ["../x", "a..b", "a b", "a\"b", "a//b", "x.lock", "a\\b"] {
            assert!(tag(bad).is_err(), "{bad}");
        }
        assert!(file_name("librccl.so.1.0").is_ok());
        for bad in ["..", ".", "a/b", "", "a\0b"] {
            assert!(file_name(bad).is_err(), "{bad:?}");
        }
        assert!(stock_path("/usr/lib/x86_64-linux-gnu/librccl.so.1.0").is_ok());
        for bad in [
            "usr/lib/x",
            "/x",
            "/usr/../etc/x",
            "/usr//x",
            "/usr/lib/",
            "/a b/c",
            "/a/'c",
            "/a/\nb",
        ] {
            assert!(stock_path(bad).is_err(), "{bad:?}");
        }
        assert!(commit(&"a".repeat(40)).is_ok());
        assert!(commit(&"A".repeat(40)).is_err());
    }
}
