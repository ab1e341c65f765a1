//! The grammars every recipe value must pass before it reaches a git or cmake command line, a
//! path or a message: ref names, full commit hashes, versions, plain file names, relative paths,
//! git origins, and the gfx target names LLVM knows (with their `:xnack±`/`:sramecc±` features).
//! [`super::Recipe::check`] applies them field by field.

use anyhow::bail;

/// Whether `s` is a ref name git accepts and rcclfix may pass as one argument (`git
/// check-ref-format` rules, restricted further to printable ASCII without spaces, so a recipe can
/// never smuggle an option or a control character into a git command line or a message).
pub fn is_ref_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && !s.starts_with(['-', '/', '.'])
        && !s.ends_with(['/', '.'])
        && !s.ends_with(".lock")
        && !s.contains("..")
        && !s.contains("//")
        && !s.contains("@{")
        && !s
            .split('/')
            .any(|c| c.starts_with('.') || c.ends_with(".lock"))
        && s.bytes().all(|b| {
            b.is_ascii_graphic() && !matches!(b, b'~' | b'^' | b':' | b'?' | b'*' | b'[' | b'\\')
        })
}

/// The explicit gfx processors rcclfix knows: every `EF_AMDGPU_MACH` name of
/// [`crate::scan::codeobj::mach_name`] (llvm `AMDGPUUsage.rst`, "ELF Code Object"), generic targets excluded, in
/// table order.
pub fn known_processors() -> Vec<&'static str> {
    (0..=0xffu32)
        .filter_map(crate::scan::codeobj::mach_name)
        .filter(|n| !n.contains("generic"))
        .collect()
}

/// Check one gfx target ID (`gfx1100`, `gfx90a:xnack-`) for building: the processor is a known
/// explicit one ([`known_processors`]) and each feature is `sramecc±` or `xnack±`, given once,
/// and one the processor has ([`XNACK_PROCESSORS`], [`SRAMECC_PROCESSORS`]). `what` names
/// where the target came from (`--targets`, `build.targets`) and starts the message.
///
/// Errors (one line): the target is empty, generic (RCCL's linker rejects generic targets), an
/// unknown processor (a few valid ones listed), or has an unknown, repeated or unsupported feature.
pub fn check_target(what: &str, t: &str) -> anyhow::Result<()> {
    if t.trim().is_empty() {
        bail!("{what}: empty gfx target (e.g. gfx1100)");
    }
    let mut parts = t.split(':');
    let proc = parts.next().unwrap_or_default();
    if proc.contains("generic") {
        bail!("{what}: {t:?} is not an explicit gfx target: generic targets are rejected by RCCL's linker (give e.g. gfx1100)");
    }
    if !known_processors().contains(&proc) {
        bail!(
            "{what}: {t:?} is not an explicit gfx target rcclfix knows (valid: gfx1100, gfx1101, gfx1102, gfx1030, gfx90a, gfx942, gfx1201, …)"
        );
    }
    let mut seen: Vec<&str> = Vec::new();
    for f in parts {
        if !matches!(f, "sramecc+" | "sramecc-" | "xnack+" | "xnack-") {
            bail!("{what}: {t:?} has an unknown target feature {f:?} (valid: sramecc+, sramecc-, xnack+, xnack-)");
        }
        let name = f.trim_end_matches(['+', '-']);
        if seen.contains(&name) {
            bail!("{what}: {t:?} sets {name} twice");
        }
        seen.push(name);
        let supported = match name {
            "xnack" => XNACK_PROCESSORS.contains(&proc),
            _ => SRAMECC_PROCESSORS.contains(&proc),
        };
        if !supported {
            bail!("{what}: {t:?}: {proc} has no {name} feature (give {proc} alone)");
        }
    }
    Ok(())
}

/// Processors with the `xnack` target feature (LLVM `llvm/lib/TargetParser/TargetParser.cpp`,
/// the `AMDGCNGPUs` table's `FEATURE_XNACK`; AMDGPUUsage "Processors"). Every other processor
/// rcclfix knows has no `xnack` setting, so a target ID naming it is invalid.
pub const XNACK_PROCESSORS: &[&str] = &[
    "gfx801", "gfx810", "gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a",
    "gfx90c", "gfx940", "gfx941", "gfx942", "gfx950", "gfx1010", "gfx1011", "gfx1012", "gfx1013",
];
/// Processors with the `sramecc` target feature (same sources, `FEATURE_SRAMECC`).
pub const SRAMECC_PROCESSORS: &[&str] = &[
    "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950",
];

/// Check a list of gfx target IDs ([`check_target`] each) and that none is given twice.
///
/// Errors: as [`check_target`]; a target listed twice.
pub fn check_target_list(what: &str, targets: &[String]) -> anyhow::Result<()> {
    for (i, t) in targets.iter().enumerate() {
        check_target(what, t)?;
        if targets[..i].contains(t) {
            bail!("{what}: {t:?} is listed twice");
        }
    }
    Ok(())
}

/// Whether `s` is a full 40-hex git commit id.
pub fn is_full_sha(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

pub(super) fn is_version(s: &str) -> bool {
    let parts: Vec<_> = s.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A name that is safe as one path component and one argv word: 1–100 characters of ASCII
/// letters, digits, `.`, `_`, `+`, `-`, not starting with `.` or `-` (so never `..`, a hidden
/// file, or an option).
pub fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && !s.starts_with(['.', '-'])
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
}

/// Whether `p` is a relative path inside a tree, as [`check_relative_path`] requires.
pub fn is_relative_path(p: &str) -> bool {
    !(p.is_empty()
        || p.len() > 1024
        || p.starts_with('/')
        || p.chars().any(|c| c.is_control() || c == '\\')
        || p.trim_end_matches('/')
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == ".." || c == ".git" || c.starts_with('-')))
}

/// Whether `v` can stand as one argv word without being read as an option or forging a line:
/// not starting with `-`, no control character, at most 4096 bytes. The recipe's `source.git`,
/// image, compiler and build-type fields, and [`crate::source::check_origin`], use it.
pub fn is_safe_arg(v: &str) -> bool {
    !v.starts_with('-') && !v.chars().any(char::is_control) && v.len() <= 4096
}

/// What [`is_git_origin`] accepts, for messages: `"… is not …"` follows the value.
pub const GIT_ORIGIN_RULE: &str = "is not an https://, http://, ssh://, git:// or file:// URL, an scp-like host:path or an absolute path (other transports, such as git's ext::, run commands)";

/// Whether `o` names a git origin by a transport that moves data and runs nothing of the
/// origin's choosing: an `https://`, `http://`, `ssh://`, `git://` or `file://` URL, an scp-like
/// `[user@]host:path`, or an absolute path; and [`is_safe_arg`]. Refused: git's `<helper>::…`
/// remote-helper syntax (`ext::sh -c …` runs a command when `protocol.ext.allow` permits it), any
/// other `<scheme>://` (git runs `git-remote-<scheme>`), relative paths, and a host or user that
/// starts with `-` (ssh would read an option; git's `connect.c` refuses it too).
pub fn is_git_origin(o: &str) -> bool {
    if o.is_empty() || !is_safe_arg(o) {
        return false;
    }
    if o.starts_with('/') {
        return true;
    }
    let authority_ok = |a: &str| {
        // `[user@]host[:port]`; a bracketed IPv6 host keeps its colons.
        let host = a.rsplit_once('@').map_or(a, |(u, h)| {
            if u.is_empty() || u.starts_with('-') {
                "-"
            } else {
                h
            }
        });
        !host.is_empty() && !host.starts_with('-')
    };
    for scheme in ["https://", "http://", "ssh://", "git://"] {
        if let Some(rest) = o.strip_prefix(scheme) {
            let authority = rest.split('/').next().unwrap_or_default();
            return authority_ok(authority) && rest.len() > authority.len();
        }
    }
    if let Some(rest) = o.strip_prefix("file://") {
        return rest.starts_with('/');
    }
    if o.contains("://") {
        return false;
    }
    // scp-like: a ':' before any '/', not git's `<helper>::` form.
    match o.split_once(':') {
        Some((host, path)) => {
            !host.contains('/')
                && !path.is_empty()
                && !path.starts_with(':')
                && authority_ok(host)
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'@'))
        }
        None => false,
    }
}

/// A relative path inside a tree: `/`-separated components that are each non-empty, not `.`,
/// `..` or `.git`, do not start with `-`, and hold no control character or backslash; at most
/// 1024 bytes. `field` names the recipe field in the error.
///
/// Errors: one line naming the field and the value.
pub fn check_relative_path(field: &str, p: &str) -> anyhow::Result<()> {
    if !is_relative_path(p) {
        bail!("{field} {p:?} is not a relative path inside the tree (no '..', '.', '.git', leading '/' or '-')");
    }
    Ok(())
}
