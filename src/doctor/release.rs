//! What a log says about the release: the hints a pasted report carries about the ROCm release
//! and the RCCL version ([`ReleaseHint`], resolved by [`resolve`]), what AMD's packages of a
//! release are known to do ([`rccl_for_rocm`], [`Packager`]), and the recipe of the user's release
//! line ([`rebuild_advice`]).
//!
//! Sources: RCCL `init.cc` (banner), `nccl.h` (`NCCL_VERSION_CODE`), rccl-tests (`rccl-library=`),
//! torch `collect_env.py`, ROCm package naming (`rccl_2.27.7.70201-81~24.04`: the fourth component
//! is the ROCm release as `MAJOR*10000 + MINOR*100 + PATCH`), ROCm/ROCm#6074, ROCm/ROCm#6520.

use serde::Serialize;

/// What a [`ReleaseHint`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HintKind {
    /// A ROCm release (`7.2.1`) or family (`7.2`).
    Rocm,
    /// An RCCL version (`2.27.7`).
    Rccl,
}

/// One piece of text in a log that names a ROCm release or an RCCL version.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReleaseHint {
    /// 1-based line number.
    pub line_no: usize,
    /// Release or RCCL version.
    pub kind: HintKind,
    /// `7.2.1`, `7.2` or `2.27.7`.
    pub value: String,
    /// Whether `value` names a point release (three components).
    pub exact: bool,
    /// What the text was, e.g. `torch +rocm6.4 version suffix`, `rccl-library=22707 (rccl-tests)`.
    pub source: String,
    /// Strength: lower wins ([`resolve`] picks the lowest, then the earliest line).
    pub rank: u8,
}

/// The ROCm release the log points at, and how sure that is.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RocmRelease {
    /// `7.2.1`, or a family `7.2` when the point release is unknown.
    pub release: String,
    /// Where it came from (`clang roc-7.2.1`, `ROCm version banner`, …).
    pub source: String,
    /// Whether it names a point release.
    pub exact: bool,
}

/// The value after `key` and optional spaces/colon, up to the next whitespace.
pub(super) fn value_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let i = line.find(key)?;
    let rest = line[i + key.len()..].trim_start_matches([' ', ':', '\t']);
    rest.split_whitespace().next().filter(|s| !s.is_empty())
}

pub(super) fn leading_version(s: &str) -> Option<String> {
    let v: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let v = v.trim_end_matches('.');
    (v.split('.').count() >= 2 && v.split('.').all(|p| !p.is_empty())).then(|| v.to_owned())
}

pub(super) fn first_n_components(v: &str, n: usize) -> String {
    v.split('.').take(n).collect::<Vec<_>>().join(".")
}

/// `NCCL_VERSION_CODE` → version: `MAJOR*10000 + MINOR*100 + PATCH` from NCCL 2.9 on (23004 →
/// 2.30.4), `MAJOR*1000 + MINOR*100 + PATCH` before (2708 → 2.7.8). RCCL `nccl.h`.
pub fn version_from_code(code: u32) -> Option<String> {
    if code >= 20900 {
        Some(format!(
            "{}.{}.{}",
            code / 10000,
            (code % 10000) / 100,
            code % 100
        ))
    } else if (2000..2900).contains(&code) {
        Some(format!(
            "{}.{}.{}",
            code / 1000,
            (code % 1000) / 100,
            code % 100
        ))
    } else {
        None
    }
}

/// A ROCm package's release integer (`70201` in `rccl_2.27.7.70201-81~24.04`) → `7.2.1`.
pub fn release_from_int(n: u32) -> Option<String> {
    let (major, minor, patch) = (n / 10000, (n / 100) % 100, n % 100);
    (5..=20)
        .contains(&major)
        .then(|| format!("{major}.{minor}.{patch}"))
}

/// Every position where `needle` occurs in `hay` (ASCII case-insensitive when `fold`).
pub(super) fn find_all(hay: &str, needle: &str, fold: bool) -> Vec<usize> {
    let (h, n) = if fold {
        (hay.to_ascii_lowercase(), needle.to_ascii_lowercase())
    } else {
        (hay.to_owned(), needle.to_owned())
    };
    h.match_indices(&n).map(|(i, _)| i).collect()
}

/// Every release/RCCL hint on one line (`line_no` is 1-based).
pub(super) fn hints_on_line(line: &str, line_no: usize) -> Vec<ReleaseHint> {
    let mut out = vec![];
    let mut push = |kind, value: String, source: String, rank| {
        let exact = value.split('.').count() >= 3;
        let value = first_n_components(&value, 3);
        if !out
            .iter()
            .any(|h: &ReleaseHint| h.kind == kind && h.value == value)
        {
            out.push(ReleaseHint {
                line_no,
                kind,
                value,
                exact,
                source,
                rank,
            });
        }
    };
    let lower = line.to_ascii_lowercase();
    // The library that actually ran, when it sits in a versioned ROCm tree.
    let librccl = line.contains("Librccl path");
    for i in find_all(line, "/opt/rocm-", false) {
        if let Some(r) = leading_version(&line[i + "/opt/rocm-".len()..]) {
            let (src, rank) = if librccl {
                (format!("Librccl path /opt/rocm-{r}"), 0)
            } else {
                (format!("path /opt/rocm-{r}"), 3)
            };
            push(HintKind::Rocm, r, src, rank);
        }
    }
    if let Some(t) = value_after(line, "RCCL version") {
        if let Some(ver) = leading_version(t) {
            push(HintKind::Rccl, ver, "RCCL version banner".into(), 1);
        }
        // `RCCL version 2.18.3+hip6.0`: the HIP (= ROCm) family it was built for.
        if let Some((_, hip)) = t.split_once("+hip") {
            if let Some(f) = leading_version(hip) {
                push(
                    HintKind::Rocm,
                    first_n_components(&f, 2),
                    format!("RCCL banner +hip{f}"),
                    9,
                );
            }
        }
    }
    if let Some(r) = value_after(line, "ROCm version").and_then(leading_version) {
        push(
            HintKind::Rocm,
            first_n_components(&r, 3),
            "ROCm version banner".into(),
            1,
        );
    }
    if lower.contains("clang") {
        if let Some(t) = line
            .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
            .find(|t| t.starts_with("roc-"))
        {
            if let Some(ver) = leading_version(&t[4..]) {
                push(HintKind::Rocm, ver.clone(), format!("clang roc-{ver}"), 2);
            }
        }
    }
    // Package versions: `rccl_2.27.7.70201-81~24.04_amd64.deb`, `ii  rccl  2.27.7.70201-81~24.04`,
    // `rocm-core-7.2.1.70201-81.el9`.
    let tokens: Vec<&str> = line.split_whitespace().collect();
    for (ti, tok) in tokens.iter().enumerate() {
        let bytes = tok.as_bytes();
        for p in 0..bytes.len() {
            if !bytes[p].is_ascii_digit() || (p > 0 && !matches!(bytes[p - 1], b'_' | b'-' | b'='))
            {
                continue;
            }
            let ver: String = tok[p..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let parts: Vec<&str> = ver.trim_end_matches('.').split('.').collect();
            if parts.len() != 4 || parts[3].len() != 5 {
                continue;
            }
            let rocmish = |n: &str| {
                let n = n.rsplit('/').next().unwrap_or(n).to_ascii_lowercase();
                (n.starts_with("rccl") || n.starts_with("rocm") || n.starts_with("hip"))
                    .then_some(n)
            };
            // `dpkg -l`: the name is the token before; apt's `Get:` lines put the architecture
            // between them.
            let name = if p == 0 {
                (1..=2)
                    .filter_map(|k| ti.checked_sub(k).map(|j| tokens[j]))
                    .find_map(rocmish)
            } else {
                rocmish(&tok[..p - 1])
            };
            let Some(name) = name else {
                continue;
            };
            let Some(rel) = parts[3].parse().ok().and_then(release_from_int) else {
                continue;
            };
            push(
                HintKind::Rocm,
                rel.clone(),
                format!("package {name} {ver}"),
                3,
            );
            if name == "rccl" || name == "librccl" || name == "rccl-dev" {
                push(
                    HintKind::Rccl,
                    parts[..3].join("."),
                    format!("package {name} {ver}"),
                    3,
                );
            }
            break;
        }
    }
    // torch's `DistBackendError: NCCL error in: …, NCCL version 2.27.7`: the RCCL torch runs.
    if let Some(r) = value_after(line, "NCCL version").and_then(leading_version) {
        if first_n_components(&r, 3).split('.').count() == 3 {
            push(HintKind::Rccl, r, "torch's \"NCCL version\"".into(), 4);
        }
    }
    for key in ["rccl-library=", "nccl-library="] {
        if let Some(t) = value_after(line, key) {
            let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
            if let Some(ver) = digits.parse().ok().and_then(version_from_code) {
                push(
                    HintKind::Rccl,
                    ver,
                    format!("{key}{digits} (rccl-tests)"),
                    4,
                );
            }
        }
    }
    for i in find_all(line, "+rocm", false) {
        if let Some(r) = leading_version(&line[i + 5..]) {
            let what = if lower.contains("torch") {
                "torch"
            } else {
                "a package"
            };
            push(
                HintKind::Rocm,
                r.clone(),
                format!("{what} +rocm{r} version suffix"),
                5,
            );
        }
    }
    for phrase in [
        "compiled with rocm",
        "built with rocm",
        "compiled against rocm",
    ] {
        for i in find_all(line, phrase, true) {
            let rest = line[i + phrase.len()..].trim_start_matches([' ', ':', 'v', 'V', '\t']);
            if let Some(r) = leading_version(rest) {
                push(
                    HintKind::Rocm,
                    r.clone(),
                    format!("\"{phrase} {r}\"").replace("rocm", "ROCm"),
                    6,
                );
            }
        }
    }
    // Prose: `ROCm 6.4.4`, `ROCm v7.2.1`, a title's `ROCm 10.0` (not `+rocm6.4`, `/opt/rocm-…`,
    // `rocm/…:…` or `ROCm version :`, which the rules above and below read).
    for i in find_all(line, "rocm", true) {
        let before = line[..i].chars().next_back();
        if before
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '+' | '-' | '_' | '.'))
        {
            continue;
        }
        let rest = &line[i + 4..];
        let Some(rest) = rest
            .strip_prefix(' ')
            .map(|r| r.strip_prefix('v').unwrap_or(r))
        else {
            continue;
        };
        if let Some(r) = leading_version(rest) {
            let r = first_n_components(&r, 3);
            // The weakest reading: what ran (a tag, a banner, a path) outranks what is said.
            push(
                HintKind::Rocm,
                r.clone(),
                format!("\"ROCm {r}\" in the text"),
                9,
            );
        }
    }
    for (key, src) in [
        ("HIP version", "HIP version"),
        ("HIP runtime version", "collect_env HIP runtime version"),
        ("ROCM used to build PyTorch", "ROCM used to build PyTorch"),
    ] {
        if let Some(r) = value_after(line, key).and_then(leading_version) {
            push(HintKind::Rocm, first_n_components(&r, 2), src.into(), 7);
        }
    }
    // Container images: `rocm/pytorch:rocm7.2_…`, `rocm/dev-ubuntu-24.04:7.2.1-complete`.
    for i in find_all(line, "rocm/", false) {
        let tok = line[i..].split_whitespace().next().unwrap_or("");
        if let Some((_, tag)) = tok.split_once(':') {
            let tag = tag.strip_prefix("rocm").unwrap_or(tag);
            if let Some(r) = leading_version(tag) {
                push(HintKind::Rocm, r, "container image tag".into(), 8);
            }
        }
    }
    out
}

/// Pick the strongest hint of `kind` (lowest rank, then earliest line).
fn best(hints: &[ReleaseHint], kind: HintKind) -> Option<&ReleaseHint> {
    hints
        .iter()
        .filter(|h| h.kind == kind)
        .min_by_key(|h| (h.rank, h.line_no))
}

/// Decide the ROCm release and the RCCL version from the hints; note when the log names
/// releases that disagree (a torch wheel carries its own RCCL next to the system's).
///
/// Returns (release, RCCL version, notes).
pub fn resolve(hints: &[ReleaseHint]) -> (Option<RocmRelease>, Option<String>, Vec<String>) {
    let mut notes = vec![];
    // A family (`+rocm6.4`) that a point release in the same text extends (`ROCm 6.4.4`): the
    // point release, the strongest of those.
    let best_rocm = best(hints, HintKind::Rocm).map(|b| {
        if b.exact {
            return b;
        }
        hints
            .iter()
            .filter(|h| {
                h.kind == HintKind::Rocm && h.exact && h.value.starts_with(&format!("{}.", b.value))
            })
            .min_by_key(|h| (h.rank, h.line_no))
            .unwrap_or(b)
    });
    let rocm = best_rocm.map(|h| RocmRelease {
        release: h.value.clone(),
        source: h.source.clone(),
        exact: h.exact,
    });
    let compatible = |a: &str, b: &str| a.starts_with(b) || b.starts_with(a);
    if let Some(r) = &rocm {
        let others: Vec<String> = hints
            .iter()
            .filter(|h| h.kind == HintKind::Rocm && !compatible(&h.value, &r.release))
            .map(|h| format!("{} (line {}: {})", h.value, h.line_no, h.source))
            .collect();
        if !others.is_empty() {
            notes.push(format!(
                "the log names other ROCm releases too: {}; this report uses {} ({}). The RCCL that runs decides: a torch wheel loads its own torch/lib/librccl.so; NCCL_DEBUG=INFO prints its `Librccl path` and version",
                others.join(", "),
                r.release,
                r.source
            ));
        }
    }
    let rccl = best(hints, HintKind::Rccl).map(|h| h.value.clone());
    if let (Some(ran), Some(r)) = (&rccl, &rocm) {
        if let Some((shipped, _)) = rccl_for_rocm(&r.release) {
            if shipped != ran {
                notes.push(format!(
                    "RCCL {ran} ran, but ROCm {} ships RCCL {shipped}: the RCCL version decides the recipe",
                    r.release
                ));
            }
        }
    }
    (rocm, rccl, notes)
}

/// The RCCL version a ROCm release ships, and whether its shipped library declares hostcall
/// (community measurements: ROCm/ROCm#6074, ROCm/ROCm#6520). `release` is `X.Y.Z` or a family
/// `X.Y`.
pub fn rccl_for_rocm(release: &str) -> Option<(&'static str, &'static str)> {
    let fam = first_n_components(release, 2);
    Some(match (fam.as_str(), release) {
        ("5.4", _) => ("2.13.4", "not measured"),
        ("6.0", _) => ("2.18.3", "not measured"),
        ("6.1", _) => ("2.18.6", "not measured"),
        ("6.2", _) => ("2.20.5", "not measured"),
        ("6.3", _) => ("2.21.5", "not measured"),
        ("6.4", _) => ("2.22.3", "not measured"),
        ("7.0", _) => ("2.26.6", "no (0 kernels)"),
        ("7.1", _) => ("2.27.7", "no (0 kernels for 7.1.1)"),
        ("7.2", "7.2.0") => ("2.27.7", "disputed for 7.2.0: scan it"),
        ("7.2", "7.2") => ("2.27.7", "yes from 7.2.1 (7.2.0 disputed)"),
        ("7.2", _) => ("2.27.7", "yes (NDEBUG lost in packaging, ROCm/rccl#2124)"),
        ("7.11" | "7.12" | "7.13", _) => ("2.28.3", "not measured"),
        ("7.14", _) => ("2.30.4", "yes (13 kernels)"),
        ("10.0", _) => ("2.30.4", "yes"),
        ("10.1", _) => ("2.30.7", "not measured"),
        _ => return None,
    })
}

/// Who built a librccl, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Packager {
    /// AMD's ROCm packages: under `/opt/rocm` or `/opt/rocm-<release>`.
    Amd,
    /// The distribution's package (Debian/Ubuntu `librccl1`: `/usr/lib/<triplet>/librccl.so.1`,
    /// or another path under `/usr`).
    Distribution,
    /// The copy a PyTorch wheel bundles (`…/torch/lib/librccl.so`, TheRock `_rocm_sdk_*`).
    TorchWheel,
    /// Anywhere else (an own build).
    Other,
}

impl Packager {
    /// Words for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Packager::Amd => "AMD's ROCm package (/opt/rocm)",
            Packager::Distribution => {
                "the distribution's package (e.g. Debian's librccl1, built from RCCL's source with its own flags), not AMD's"
            }
            Packager::TorchWheel => "the copy the PyTorch wheel bundles, not the system's",
            Packager::Other => "not AMD's /opt/rocm package (an own or third-party build)",
        }
    }
}

/// Who built the librccl at `path` (by its path: `/opt/rocm*` is AMD's, `/usr/…` the
/// distribution's, `…/torch/lib/` or `_rocm_sdk_` a wheel's).
pub fn packager_of(path: &str) -> Packager {
    if path.starts_with("/opt/rocm") {
        Packager::Amd
    } else if path.contains("/torch/lib/") || path.contains("_rocm_sdk_") {
        Packager::TorchWheel
    } else if path.starts_with("/usr/") || path.starts_with("/lib/") {
        Packager::Distribution
    } else {
        Packager::Other
    }
}

/// The sentence doctor prints when no log or machine names the ROCm release.
pub const RELEASE_UNKNOWN: &str =
    "ROCm release unknown: run `rcclfix build --list` and pick the recipe for your release";

/// The rebuild advice for a ROCm release / RCCL version: the recipe to pass to `rcclfix build --tag`,
/// and the GPU targets to build.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RebuildAdvice {
    /// The `--tag` value (a recipe id); `None` when the release is unknown or has no recipe.
    pub tag: Option<String>,
    /// Whether `tag` names a recipe embedded in this rcclfix.
    pub recipe_exists: bool,
    /// The ROCm release the advice is for, when known.
    pub rocm: Option<String>,
    /// The RCCL version the advice is for, when known.
    pub rccl: Option<String>,
    /// The gfx targets of every affected GPU found (`--targets`); empty when none was found.
    pub targets: Vec<String>,
    /// Whether the recipe needs `--experimental`.
    pub experimental: bool,
    /// The recipe's status (`verified`, `expected`, `experimental`), when a recipe was chosen.
    pub status: Option<String>,
    /// The whole command (`rcclfix build --tag 2.27.7 --targets gfx1100,gfx1201`), when a recipe
    /// was chosen.
    pub command: Option<String>,
    /// Caveats, one sentence each.
    pub notes: Vec<String>,
}

/// Pick the recipe that rebuilds the RCCL of `rocm`/`rccl` (either may be unknown), from
/// [`crate::recipe::embedded`], for `targets` (the affected GPUs' gfx processors).
///
/// Rule: only the user's release line. The recipes for this RCCL version built for this ROCm
/// family (when both are known; else for whichever is known), best status first (`verified`,
/// `expected`, `experimental`; `unfixable-by-rebuild` never). The other recipes of that RCCL
/// version are named with their status; a different release line (2.27.7 with NDEBUG, the
/// community-verified remedy of ROCm/ROCm#6520 and ROCm/ROCm#6074) is only ever named as an
/// explicit alternative, never chosen. When the line has no recipe, the advice says so (no tag),
/// naming the nearest recipe and why it is not the user's. Nothing is defaulted: an unknown
/// release gives no tag and [`RELEASE_UNKNOWN`].
pub fn rebuild_advice(rocm: Option<&str>, rccl: Option<&str>, targets: &[String]) -> RebuildAdvice {
    use crate::recipe::{Recipe, Status};
    let all = crate::recipe::embedded().unwrap_or_default();
    let rccl = rccl
        .map(str::to_owned)
        .or_else(|| rocm.and_then(rccl_for_rocm).map(|(r, _)| r.to_owned()));
    let usable = |r: &&Recipe| r.status != Status::UnfixableByRebuild;
    fn best(mut v: Vec<&Recipe>) -> Option<&Recipe> {
        v.sort_by_key(|r| (r.status, r.id().len(), r.id().to_owned()));
        v.first().copied()
    }
    // A recipe is of the user's ROCm line when its release is that release, or in that family.
    let fam = |v: &str| first_n_components(v, 2);
    let rocm_ok = |r: &Recipe| {
        rocm.is_none_or(|rel| {
            r.rocm_release == rel
                || (rel.split('.').count() < 3 && fam(&r.rocm_release) == fam(rel))
        })
    };
    let line: Vec<&Recipe> = all
        .values()
        .filter(|r| rccl.as_deref().is_none_or(|v| r.rccl_version == v))
        .filter(|_| rccl.is_some() || rocm.is_some())
        .collect();
    let mut in_line: Vec<&Recipe> = line.iter().copied().filter(|r| rocm_ok(r)).collect();
    if in_line.is_empty() && rocm.is_some_and(|rel| rel.split('.').count() >= 3) {
        // A point release without its own recipe: the family's recipes of that RCCL version.
        in_line = line
            .iter()
            .copied()
            .filter(|r| rocm.is_some_and(|rel| fam(&r.rocm_release) == fam(rel)))
            .collect();
    }
    let matching = best(in_line.iter().copied().filter(usable).collect());
    let mut notes = vec![];
    let unfixable: Vec<&str> = all
        .values()
        .filter(|r| {
            rccl.as_deref() == Some(r.rccl_version.as_str())
                && r.status == Status::UnfixableByRebuild
        })
        .map(|r| r.id())
        .collect();
    let chosen = match matching {
        Some(m) => {
            if m.status == Status::Experimental {
                notes.push(format!(
                    "recipe {} is experimental: {}",
                    m.id(),
                    m.status_reason.as_deref().unwrap_or("not verified")
                ));
            }
            let others: Vec<String> = in_line
                .iter()
                .filter(|r| r.id() != m.id() && r.status != Status::UnfixableByRebuild)
                .map(|r| {
                    format!(
                        "{} (ROCm {}, {})",
                        r.id(),
                        r.rocm_release,
                        r.status.as_str()
                    )
                })
                .collect();
            if !others.is_empty() {
                notes.push(format!(
                    "other recipes of RCCL {}: {}{}",
                    m.rccl_version,
                    others.join(", "),
                    if rocm.is_none() {
                        "; the ROCm release is not in the evidence: pick the recipe built for yours"
                    } else {
                        ""
                    }
                ));
            }
            if m.status == Status::Experimental && m.rccl_version != "2.27.7" {
                if let Some(p) = best(
                    all.values()
                        .filter(|r| r.rccl_version == "2.27.7" && r.rocm_release.starts_with("7.2"))
                        .filter(|r| matches!(r.status, Status::Verified | Status::Expected))
                        .collect(),
                ) {
                    notes.push(format!(
                        "a different release line, only if you choose it: RCCL 2.27.7 with NDEBUG is the community-verified remedy (ROCm/ROCm#6520): rcclfix build --tag {}{}; check first that your torch's nccl* imports exist in 2.27.7 (`rcclfix package` audits this; kyuz0/amd-strix-halo-vllm-toolboxes#60)",
                        p.id(),
                        targets_flag(targets)
                    ));
                }
            }
            Some(m)
        }
        None => {
            match (&rccl, rocm) {
                (None, None) => notes.push(RELEASE_UNKNOWN.into()),
                (Some(v), Some(r)) if !line.is_empty() => {
                    let near: Vec<String> = line
                        .iter()
                        .filter(|x| x.status != Status::UnfixableByRebuild)
                        .map(|x| format!("{} (ROCm {}, {})", x.id(), x.rocm_release, x.status.as_str()))
                        .collect();
                    notes.push(format!(
                        "no recipe for RCCL {v} on ROCm {r} in this rcclfix: {} build{} against another ROCm, whose runtime your machine does not have; rebuild RCCL {v} with NDEBUG against your ROCm {r} yourself, or move to that ROCm release and use its recipe",
                        near.join(", "),
                        if near.len() == 1 { "s" } else { "" }
                    ));
                }
                (Some(v), _) => notes.push(format!(
                    "no usable recipe for RCCL {v} in this rcclfix: run `rcclfix build --list` and pick the recipe for your release"
                )),
                (None, Some(r)) => notes.push(format!(
                    "no recipe for ROCm {r} in this rcclfix: run `rcclfix build --list` and pick the recipe for your release"
                )),
            }
            None
        }
    };
    if !unfixable.is_empty() {
        notes.push(format!(
            "not: {} (a rebuild with the device linker keeps the declaration)",
            unfixable.join(", ")
        ));
    }
    let Some(r) = chosen else {
        return RebuildAdvice {
            tag: None,
            recipe_exists: false,
            rocm: rocm.map(str::to_owned),
            rccl,
            targets: targets.to_vec(),
            experimental: false,
            status: None,
            command: None,
            notes,
        };
    };
    if rccl.as_deref().is_some_and(|v| v != r.rccl_version) && notes.is_empty() {
        notes.push(format!(
            "this recipe builds RCCL {} (ROCm {})",
            r.rccl_version, r.rocm_release
        ));
    }
    if r.rccl_version.starts_with("2.27.") {
        notes.push(
            "NDEBUG carries the AllReduce hang risk of ROCm/rccl#2124: `rcclfix verify` checks for it".into(),
        );
    }
    if targets.is_empty() {
        notes.push(format!(
            "no GPU target found: the recipe builds {}; add --targets for your GPU (`rocminfo | grep -m1 gfx`)",
            r.build.targets.join(",")
        ));
    }
    let experimental = r.status == Status::Experimental;
    RebuildAdvice {
        tag: Some(r.id().to_owned()),
        recipe_exists: true,
        rocm: rocm.map(str::to_owned),
        rccl,
        targets: targets.to_vec(),
        experimental,
        status: Some(r.status.as_str().to_owned()),
        command: Some(format!(
            "rcclfix build --tag {}{}{}",
            r.id(),
            targets_flag(targets),
            if experimental { " --experimental" } else { "" }
        )),
        notes,
    }
}

fn targets_flag(targets: &[String]) -> String {
    if targets.is_empty() {
        String::new()
    } else {
        format!(" --targets {}", targets.join(","))
    }
}
