//! `rcclfix matrix`: the recipes per ROCm release as a table, or as a GitHub Actions
//! `strategy.matrix`.
//!
//! The matrix is what `.github/workflows/rcclfix.yml` builds: one job per (recipe, gfx target) by
//! default, each in the recipe's toolchain image. The consistency checks every recipe must pass
//! (`--check`) are [`crate::recipe::check`]; `src/cmd/matrix.rs` renders both.

use std::collections::BTreeMap;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use crate::recipe::{Recipe, Status};

/// Which statuses `matrix` selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusFilter(Vec<Status>);

impl StatusFilter {
    /// Parse `--status` values (`verified`, `expected`, `experimental`, `unfixable-by-rebuild`,
    /// `all`). An empty list means every buildable status (all but `unfixable-by-rebuild`).
    ///
    /// Errors: an unknown name (the message lists the known ones).
    pub fn parse(values: &[String]) -> anyhow::Result<StatusFilter> {
        let all = [
            Status::Verified,
            Status::Expected,
            Status::Experimental,
            Status::UnfixableByRebuild,
        ];
        if values.is_empty() {
            return Ok(StatusFilter(all[..3].to_vec()));
        }
        let mut out = Vec::new();
        for v in values.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
            if v == "all" {
                out.extend(all);
                continue;
            }
            match all.iter().find(|s| s.as_str() == v) {
                Some(s) => out.push(*s),
                None => bail!(
                    "--status: unknown status {v:?}\nhelp: use verified, expected, experimental, unfixable-by-rebuild or all"
                ),
            }
        }
        if out.is_empty() {
            return Ok(StatusFilter(all[..3].to_vec()));
        }
        out.sort();
        out.dedup();
        Ok(StatusFilter(out))
    }

    /// Whether a recipe with status `s` is selected.
    pub fn accepts(&self, s: Status) -> bool {
        self.0.contains(&s)
    }
}

/// One entry of the GitHub Actions matrix (`strategy.matrix.include[i]`). Every entry has every key
/// (empty strings where a value does not apply), so the workflow can read any `matrix.<key>`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MatrixEntry {
    /// Recipe id (what `rcclfix build --tag` takes).
    pub recipe: String,
    /// RCCL version, `MAJOR.MINOR.PATCH`.
    pub rccl: String,
    /// ROCm release, e.g. `7.2.1`.
    pub rocm: String,
    /// Recipe status, kebab-case (`verified`, `expected`, `experimental`, `unfixable-by-rebuild`).
    pub status: String,
    /// `true` when `rcclfix build` needs `--experimental` for this recipe (the workflow also lets
    /// such jobs fail without failing the run).
    pub experimental: bool,
    /// The toolchain: the image reference, or the name of a local (Debian-package) toolchain.
    pub toolchain: String,
    /// OCI image reference without a registry host, or `""` for a local toolchain.
    pub image: String,
    /// Containerfile extending `image`, relative to the repository root, or `""`.
    pub containerfile: String,
    /// gfx targets, comma-separated (exactly one unless `--joined`).
    pub targets: String,
    /// NDEBUG strategy, kebab-case.
    pub ndebug: String,
    /// Device-code pipeline: `rdc` or `device-linker`.
    pub pipeline: String,
    /// Whether the build runs `rcclfix patch` after the link.
    pub post_link_patch: bool,
    /// Peak RAM the device link needs, GiB (the workflow sizes swap from it).
    pub link_ram_gib: f64,
    /// A name for the job's uploaded artifact, unique within the matrix:
    /// `rcclfix-<recipe>-<targets joined by '_'>`.
    pub artifact: String,
}

/// Order recipes by ROCm release (numerically), then by id.
fn release_key(r: &Recipe) -> (Vec<u32>, String) {
    let v = r
        .rocm_release
        .split('.')
        .map(|p| p.parse().unwrap_or(u32::MAX))
        .collect();
    (v, r.id().to_owned())
}

/// The matrix entries for the recipes that `filter` accepts, ordered by ROCm release.
///
/// `targets` overrides every recipe's `build.targets`; with `joined` false each target becomes its
/// own entry (builds run in parallel, each fits a runner's time limit, and each artifact and scan
/// gate is per target), with `joined` true one entry carries them all (one library for all targets).
///
/// Errors: a target that is empty, unknown or generic ([`crate::recipe::check_target`]; generic
/// targets are rejected by RCCL's linker), or no recipe selected (GitHub Actions refuses an empty matrix).
pub fn entries(
    all: &BTreeMap<String, Recipe>,
    filter: &StatusFilter,
    targets: Option<&[String]>,
    joined: bool,
) -> anyhow::Result<Vec<MatrixEntry>> {
    if let Some(ts) = targets {
        for t in ts {
            crate::recipe::check_target("--targets", t)?;
        }
    }
    let mut recipes: Vec<&Recipe> = all.values().filter(|r| filter.accepts(r.status)).collect();
    recipes.sort_by_key(|r| release_key(r));
    let mut out = Vec::new();
    for r in recipes {
        let ts: Vec<String> = match targets {
            Some(ts) => dedup_keep_order(ts),
            None => r.build.targets.clone(),
        };
        let groups: Vec<Vec<String>> = if joined {
            vec![ts]
        } else {
            ts.into_iter().map(|t| vec![t]).collect()
        };
        for g in groups {
            out.push(entry(r, &g));
        }
    }
    if out.is_empty() {
        bail!("no recipe has the selected status(es)\nhelp: `rcclfix matrix --status all` lists every recipe");
    }
    Ok(out)
}

fn dedup_keep_order(ts: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in ts {
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    out
}

fn kebab<T: Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn entry(r: &Recipe, targets: &[String]) -> MatrixEntry {
    let image = r.toolchain.image.clone().unwrap_or_default();
    MatrixEntry {
        recipe: r.id().to_owned(),
        rccl: r.rccl_version.clone(),
        rocm: r.rocm_release.clone(),
        status: r.status.as_str().to_owned(),
        experimental: r.status == Status::Experimental,
        toolchain: r.toolchain.name.clone().unwrap_or_else(|| image.clone()),
        image,
        containerfile: r.toolchain.containerfile.clone().unwrap_or_default(),
        targets: targets.join(","),
        ndebug: kebab(r.build.ndebug),
        pipeline: kebab(r.build.pipeline),
        post_link_patch: r.build.post_link_patch,
        link_ram_gib: r.build.link_ram_gib,
        artifact: format!("rcclfix-{}-{}", r.id(), targets.join("_")),
    }
}

/// The entries as a GitHub Actions matrix, `{"include":[…]}`, on one line (for `$GITHUB_OUTPUT`).
pub fn github_matrix_json(entries: &[MatrixEntry]) -> anyhow::Result<String> {
    #[derive(Serialize)]
    struct M<'a> {
        include: &'a [MatrixEntry],
    }
    Ok(serde_json::to_string(&M { include: entries })?)
}

/// The entries as a text table, followed by the reason of every experimental or unfixable recipe.
pub fn table(entries: &[MatrixEntry], all: &BTreeMap<String, Recipe>) -> String {
    let rows: Vec<[String; 8]> = entries
        .iter()
        .map(|e| {
            let patch = if e.post_link_patch { "+patch" } else { "" };
            [
                e.recipe.clone(),
                e.rocm.clone(),
                e.rccl.clone(),
                e.status.clone(),
                e.ndebug.clone(),
                format!("{}{patch}", e.pipeline),
                e.targets.clone(),
                e.toolchain.clone(),
            ]
        })
        .collect();
    let head = [
        "RECIPE",
        "ROCM",
        "RCCL",
        "STATUS",
        "NDEBUG",
        "PIPELINE",
        "TARGETS",
        "TOOLCHAIN",
    ];
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |cells: &[&str]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<width$}  ", width = w[i]));
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(&head);
    for row in &rows {
        out.push_str(&line(&row.iter().map(String::as_str).collect::<Vec<_>>()));
    }
    let mut seen = Vec::new();
    for e in entries {
        if seen.contains(&e.recipe) {
            continue;
        }
        seen.push(e.recipe.clone());
        if let Some(reason) = all.get(&e.recipe).and_then(|r| r.status_reason.as_deref()) {
            out.push_str(&format!("\n{} ({}): {reason}", e.recipe, e.status));
        }
    }
    if seen
        .iter()
        .any(|id| all.get(id).is_some_and(|r| r.status_reason.is_some()))
    {
        out.push('\n');
    }
    out
}

/// Refuse to build an experimental recipe unless `--experimental` was given, and an
/// unfixable-by-rebuild recipe unless it was given (then the build only reproduces the failure).
/// `rcclfix build --tag` calls this before fetching anything.
///
/// Errors: one line naming the recipe and its `status_reason`, with a `help:` line.
pub fn require_experimental_ok(recipe: &Recipe, experimental: bool) -> anyhow::Result<()> {
    let reason = recipe
        .status_reason
        .as_deref()
        .unwrap_or("no reason recorded");
    match recipe.status {
        Status::Verified | Status::Expected => Ok(()),
        Status::Experimental if experimental => {
            tracing::warn!("recipe {} is experimental: {reason}; the scan gate decides", recipe.id());
            Ok(())
        }
        Status::Experimental => bail!(
            "recipe {} is experimental: {reason}\nhelp: pass --experimental to build it anyway; the scan gate still decides whether it ships",
            recipe.id()
        ),
        Status::UnfixableByRebuild if experimental => {
            tracing::warn!("recipe {} cannot be fixed by a rebuild ({reason}); the scan gate is expected to fail", recipe.id());
            Ok(())
        }
        Status::UnfixableByRebuild => bail!(
            "recipe {} cannot be fixed by a rebuild: {reason}\nhelp: `rcclfix matrix --status all` lists the recipes for this RCCL version; pass --experimental to reproduce the failure",
            recipe.id()
        ),
    }
}
