//! The recipe lint rules (`rcclfix matrix --check`, and the recipe tests): the rules that tie a
//! recipe to the facts it rests on — the tag naming of each source repository, which NDEBUG
//! strategy can work for which RCCL version and device-code pipeline, the toolchain image and its
//! Containerfile, that a `verified` status is earned by a record or a named test, and the lockfile
//! pins. Where a git mirror of the source is at hand (`--git-mirror` / `RCCLFIX_GIT_MIRROR`), the
//! commit pin, the RCCL version in the tag's `makefiles/version.mk` and the tag's CMake options are
//! checked against it ([`check_against_mirror`]).
//!
//! Sources: ROCm/rccl `makefiles/version.mk`, `CMakeLists.txt`, `toolchain-linux.cmake`;
//! ROCm/rocm-systems `projects/rccl`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context};

use super::containerfile::parse_containerfile;
use super::{Lockfile, NdebugStrategy, Pipeline, Recipe, Status};

/// The ROCm/rccl repository (tags `rocm-X.Y.Z`).
pub const ROCM_RCCL_GIT: &str = "https://github.com/ROCm/rccl.git";
/// The ROCm/rocm-systems monorepo (RCCL under `projects/rccl`, release tags `therock-X.Y`).
pub const ROCM_SYSTEMS_GIT: &str = "https://github.com/ROCm/rocm-systems.git";
/// Where RCCL lives inside [`ROCM_SYSTEMS_GIT`].
pub const ROCM_SYSTEMS_SUBDIR: &str = "projects/rccl";

/// The lockfile embedded in the binary (`recipes/rcclfix.lock`), without the user's pins.
pub fn embedded_lockfile() -> anyhow::Result<Lockfile> {
    toml::from_str(crate::recipe::EMBEDDED_LOCK).context("embedded recipes/rcclfix.lock")
}

/// What [`check_recipe`] and [`check_all`] found: `problems` fail the check, `notes` say what could
/// not be checked (e.g. a tag absent from the mirror).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckReport {
    /// One line each, `recipe <id>: <what is wrong>`.
    pub problems: Vec<String>,
    /// One line each, `recipe <id>: <what was not checked and why>`.
    pub notes: Vec<String>,
    /// Recipes whose commit or RCCL version was confirmed in the mirror: (id, commit, version).
    pub mirror_confirmed: Vec<(String, String, String)>,
    /// One line each, `recipe <id>: <how its record no longer describes a file it names>`, with
    /// the command that refreshes the record ([`record_drift`]): the record still shows what was
    /// built, so this is reported, not a problem.
    pub drift: Vec<String>,
}

impl CheckReport {
    fn problem(&mut self, r: &Recipe, msg: impl std::fmt::Display) {
        self.problems.push(format!("recipe {}: {msg}", r.id()));
    }
    fn note(&mut self, r: &Recipe, msg: impl std::fmt::Display) {
        self.notes.push(format!("recipe {}: {msg}", r.id()));
    }
    fn extend(&mut self, o: CheckReport) {
        self.problems.extend(o.problems);
        self.notes.extend(o.notes);
        self.mirror_confirmed.extend(o.mirror_confirmed);
        self.drift.extend(o.drift);
    }
}

/// `MAJOR.MINOR.PATCH` → numbers (missing parts are 0).
pub fn version_tuple(v: &str) -> (u32, u32, u32) {
    let mut it = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

/// First RCCL version whose `toolchain-linux.cmake` sets normal `CMAKE_CXX_FLAGS_RELEASE "-O3"`,
/// shadowing CMake's Release `-DNDEBUG` (seen on ROCm/rccl `develop` at 2.21.5; absent at
/// rocm-6.2.2 = 2.20.5). From here `release-build-type` cannot work (ROCm/rccl#2124).
pub const TOOLCHAIN_FILE_SHADOWS_FROM: (u32, u32, u32) = (2, 21, 0);
/// First RCCL version built with the device linker by default (`ENABLE_DEVICE_LINKER=ON` in RCCL's `CMakeLists.txt`).
pub const DEVICE_LINKER_FROM: (u32, u32, u32) = (2, 28, 0);

/// The recipe's source repository, by URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repo {
    Rccl,
    RocmSystems,
    Other,
}

fn repo_of(url: &str) -> Repo {
    let u = url.trim_end_matches('/').trim_end_matches(".git");
    if u.eq_ignore_ascii_case(ROCM_RCCL_GIT.trim_end_matches(".git")) {
        Repo::Rccl
    } else if u.eq_ignore_ascii_case(ROCM_SYSTEMS_GIT.trim_end_matches(".git")) {
        Repo::RocmSystems
    } else {
        Repo::Other
    }
}

fn has_option(r: &Recipe, opt: &str) -> bool {
    r.build.cmake_options.iter().any(|o| o == opt)
}

fn mentions_option(r: &Recipe, name: &str) -> bool {
    r.build
        .cmake_options
        .iter()
        .any(|o| o.starts_with(&format!("-D{name}=")) || o.starts_with(&format!("-D{name}:")))
}

/// Check one recipe against the rules below; `root` is the repository checkout (for
/// `containers/` and `recipes/records/`), `lock` the lockfile, `mirror` an optional bare git mirror.
///
/// Rules:
/// - source: ROCm/rccl recipes use tag `rocm-<rocm_release>` and no subdir; rocm-systems recipes use
///   `therock-<major>.<minor>` (or `therock-<rocm_release>`) and subdir `projects/rccl`; no other
///   repository.
/// - pipeline (RCCL's `CMakeLists.txt`; ROCm/ROCm#6520): below 2.28 only `rdc`; from 2.28 `rdc` needs
///   `-DENABLE_DEVICE_LINKER=OFF`, and `device-linker` needs `compile-definition` and either
///   `post_link_patch` or status `unfixable-by-rebuild` (NDEBUG alone leaves 3 declaring kernels).
/// - NDEBUG (ROCm/rccl#2124; RCCL's `CMakeLists.txt`): `release-build-type` only below 2.21; never `none`.
/// - toolchain: an image has no registry host and a tag naming the release; its Containerfile is
///   `containers/rocm-<rocm_release>/Containerfile`, exists, parses, and starts `FROM <image>`;
///   `rocm_path` is `/opt/rocm` and `cxx` lies under it. A named toolchain has
///   `containers/<name>/toolchain.toml`.
/// - status: `verified` needs `verified_by` = `test:<fn>` (a test in `tests/it/`) or a directory
///   under `recipes/records/` holding `manifest.json` (this recipe, every gate `clean`), `scan.json`
///   and `build.log`.
/// - pins: a recipe commit and a lockfile pin for the same tag agree; with a mirror, the tag (as a
///   tag, not a branch) resolves to the pinned commit, and `makefiles/version.mk` under the subdir
///   states `rccl_version`; the mirror's `CMakeLists.txt` decides whether `ENABLE_IFC` defaults ON
///   (then the recipe must pass `-DENABLE_IFC=OFF`) and its `toolchain-linux.cmake` whether
///   `release-build-type` can work.
pub fn check_recipe(
    r: &Recipe,
    root: &Path,
    lock: &Lockfile,
    mirror: Option<&Path>,
) -> CheckReport {
    let mut rep = CheckReport::default();
    if let Err(e) = r.check() {
        rep.problem(r, format!("{e:#}"));
    }
    let ver = version_tuple(&r.rccl_version);
    if !r.id().starts_with(&r.rccl_version) {
        rep.problem(
            r,
            format!(
                "name {:?} does not start with its rccl_version {}",
                r.id(),
                r.rccl_version
            ),
        );
    }

    // Source.
    let rel = version_tuple(&r.rocm_release);
    match repo_of(&r.source.git) {
        Repo::Rccl => {
            let want = format!("rocm-{}", r.rocm_release);
            if let Some(b) = &r.source.branch {
                let rel2 = format!("rocm-rel-{}.{}", rel.0, rel.1);
                if !b.ends_with(&rel2) && !b.contains(&format!("{rel2}.")) {
                    rep.problem(r, format!("source.branch {b:?} is not a release branch of ROCm {} (ROCm/rccl release branches end in {rel2})", r.rocm_release));
                }
            } else if r.source.tag != want {
                rep.problem(r, format!("source.tag {:?} should be {want:?} (ROCm/rccl release tags are rocm-X.Y.Z)", r.source.tag));
            }
            if !r.source.subdir.is_empty() {
                rep.problem(r, "source.subdir must be empty for ROCm/rccl");
            }
            if ver >= DEVICE_LINKER_FROM {
                rep.problem(
                    r,
                    format!(
                        "RCCL {} exists only in ROCm/rocm-systems (projects/rccl)",
                        r.rccl_version
                    ),
                );
            }
        }
        Repo::RocmSystems => {
            let short = format!("therock-{}.{}", rel.0, rel.1);
            let long = format!("therock-{}", r.rocm_release);
            if r.source.branch.is_none() && r.source.tag != short && r.source.tag != long {
                rep.problem(r, format!("source.tag {:?} should be {short:?} (rocm-systems release tags are therock-X.Y)", r.source.tag));
            }
            if r.source.subdir != ROCM_SYSTEMS_SUBDIR {
                rep.problem(
                    r,
                    format!("source.subdir must be {ROCM_SYSTEMS_SUBDIR:?} for rocm-systems"),
                );
            }
        }
        Repo::Other => rep.problem(
            r,
            format!(
                "source.git {:?} is neither {ROCM_RCCL_GIT} nor {ROCM_SYSTEMS_GIT}",
                r.source.git
            ),
        ),
    }

    // Pipeline and NDEBUG.
    let dl_off = has_option(r, "-DENABLE_DEVICE_LINKER=OFF");
    let b = &r.build;
    if ver < DEVICE_LINKER_FROM {
        if b.pipeline != Pipeline::Rdc {
            rep.problem(
                r,
                format!(
                    "RCCL {} has no device linker (it arrived with 2.28): pipeline must be rdc",
                    r.rccl_version
                ),
            );
        }
        if mentions_option(r, "ENABLE_DEVICE_LINKER") {
            rep.problem(r, "ENABLE_DEVICE_LINKER does not exist before RCCL 2.28");
        }
    } else {
        match b.pipeline {
            Pipeline::Rdc if !dl_off => rep.problem(
                r,
                "pipeline rdc on RCCL 2.28+ needs -DENABLE_DEVICE_LINKER=OFF in cmake_options (the device linker is on by default)",
            ),
            Pipeline::DeviceLinker if mentions_option(r, "ENABLE_DEVICE_LINKER") && !has_option(r, "-DENABLE_DEVICE_LINKER=ON") => {
                rep.problem(r, "pipeline device-linker contradicts the ENABLE_DEVICE_LINKER option in cmake_options")
            }
            Pipeline::DeviceLinker => {
                if b.ndebug != NdebugStrategy::CompileDefinition {
                    rep.problem(r, "the device linker's RCCLDEV steps see only compile definitions: ndebug must be compile-definition (-DCMAKE_CXX_FLAGS misses them)");
                }
                if !b.post_link_patch && r.status != Status::UnfixableByRebuild {
                    rep.problem(r, "with the device linker NDEBUG still leaves 3 declaring Generic kernels (ROCm/ROCm#6520): set post_link_patch or status unfixable-by-rebuild");
                }
            }
            Pipeline::Rdc => {}
        }
    }
    if b.post_link_patch && b.pipeline != Pipeline::DeviceLinker {
        rep.problem(r, "post_link_patch is for the device-linker pipeline; an rdc-pipeline build with NDEBUG needs no patch");
    }
    match b.ndebug {
        NdebugStrategy::None => rep.problem(r, "ndebug none injects nothing (negative controls only, never a shipped recipe)"),
        NdebugStrategy::ReleaseBuildType if ver >= TOOLCHAIN_FILE_SHADOWS_FROM => rep.problem(
            r,
            "release-build-type cannot work from RCCL 2.21: toolchain-linux.cmake shadows CMAKE_CXX_FLAGS_RELEASE with \"-O3\" (use cxx-flags or compile-definition)",
        ),
        _ => {}
    }
    if has_option(r, "-DENABLE_IFC=ON") || has_option(r, "-DBUILD_ADDRESS_SANITIZER=ON") {
        rep.problem(r, "ENABLE_IFC=ON / BUILD_ADDRESS_SANITIZER=ON make kernels declare hidden_hostcall_buffer (ROCm/rocm-systems PR #11277)");
    }

    // Toolchain.
    rep.extend(check_toolchain(r, root));

    // Status.
    if r.status == Status::Verified {
        match r.verified_by.as_deref() {
            Some(v) => match check_verified_by(r, v, root, lock) {
                Err(e) => rep.problem(r, format!("verified_by {v:?}: {e:#}")),
                Ok(()) => rep.drift.extend(
                    record_drift(r, v, root)
                        .into_iter()
                        .map(|d| format!("recipe {}: {d}", r.id())),
                ),
            },
            None => rep.problem(r, "status verified needs verified_by"),
        }
    } else if r.verified_by.is_some() {
        rep.problem(
            r,
            format!("verified_by is set but status is {}", r.status.as_str()),
        );
    }

    // Pins.
    let lock_pin = lock.get(r.id(), &r.source.tag);
    if let (Some(c), Some(l)) = (r.source.commit.as_deref(), lock_pin) {
        if c != l {
            rep.problem(
                r,
                format!(
                    "source.commit {c} disagrees with the lockfile pin {l} for tag {}",
                    r.source.tag
                ),
            );
        }
    }
    if let Some(m) = mirror {
        rep.extend(check_against_mirror(r, m, r.pinned_commit(lock)));
    }
    rep
}

fn check_toolchain(r: &Recipe, root: &Path) -> CheckReport {
    let mut rep = CheckReport::default();
    let tc = &r.toolchain;
    if let Some(name) = &tc.name {
        if !root
            .join("containers")
            .join(name)
            .join("toolchain.toml")
            .is_file()
        {
            rep.problem(
                r,
                format!("toolchain.name {name:?}: containers/{name}/toolchain.toml does not exist"),
            );
        }
        return rep;
    }
    let Some(image) = &tc.image else { return rep };
    if let Err(e) = check_image_ref(image, &r.rocm_release) {
        rep.problem(r, format!("toolchain.image {image:?}: {e}"));
    }
    let want_cf = format!("containers/rocm-{}/Containerfile", r.rocm_release);
    match &tc.containerfile {
        Some(cf) if *cf != want_cf => rep.problem(
            r,
            format!("toolchain.containerfile {cf:?} should be {want_cf:?}"),
        ),
        Some(cf) => {
            let path = root.join(cf);
            match crate::fsutil::read_text_capped(&path, 1 << 20, "a Containerfile") {
                Err(e) => rep.problem(r, format!("toolchain.containerfile: {e:#}")),
                Ok(text) => match parse_containerfile(&text, cf) {
                    Err(e) => rep.problem(r, format!("{e:#}")),
                    Ok(c) if c.from != *image => rep.problem(
                        r,
                        format!(
                            "{cf} starts FROM {:?}, but toolchain.image is {image:?}",
                            c.from
                        ),
                    ),
                    Ok(_) => {}
                },
            }
        }
        None => rep.problem(r, "toolchain.image needs toolchain.containerfile"),
    }
    if tc.rocm_path != "/opt/rocm" {
        rep.problem(
            r,
            format!(
                "toolchain.rocm_path {:?}: ROCm dev images install into /opt/rocm",
                tc.rocm_path
            ),
        );
    }
    if !tc.cxx.starts_with(&format!("{}/", tc.rocm_path)) {
        rep.problem(
            r,
            format!(
                "toolchain.cxx {:?} is not under rocm_path {:?}",
                tc.cxx, tc.rocm_path
            ),
        );
    }
    rep
}

/// Check an image reference: `name:tag` with no registry host (the engine's configuration picks the
/// registry) and a tag that starts with the ROCm release (`6.2.2-complete` for `6.2.2`).
pub fn check_image_ref(image: &str, rocm_release: &str) -> anyhow::Result<()> {
    let (name, tag) = image
        .rsplit_once(':')
        .filter(|(n, _)| !n.contains('@'))
        .context("no tag (name:tag)")?;
    let first = name.split('/').next().unwrap_or_default();
    if name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost") {
        bail!("names a registry host {first:?}; write the reference without it");
    }
    if tag.contains('/') {
        bail!("malformed tag {tag:?}");
    }
    let rest = tag
        .strip_prefix(rocm_release)
        .context(format!("tag {tag:?} is not for ROCm {rocm_release}"))?;
    if !(rest.is_empty() || rest.starts_with('-')) {
        bail!("tag {tag:?} is not for ROCm {rocm_release}");
    }
    Ok(())
}

fn check_verified_by(r: &Recipe, v: &str, root: &Path, lock: &Lockfile) -> anyhow::Result<()> {
    if let Some(test) = v.strip_prefix("test:") {
        let needle = format!("fn {test}(");
        let dir = root.join("tests/it");
        for e in fs_err::read_dir(&dir)? {
            let p = e?.path();
            if p.extension().is_some_and(|x| x == "rs")
                && crate::fsutil::read_text_capped(&p, 16 << 20, "a test source")?.contains(&needle)
            {
                return Ok(());
            }
        }
        bail!("no test `{test}` in tests/it/");
    }
    if !v.starts_with("recipes/records/") {
        bail!("must be `test:<name>` or a folder under recipes/records/");
    }
    let dir = root.join(v);
    for f in ["manifest.json", "scan.json", "build.log"] {
        if !dir.join(f).is_file() {
            bail!("{v}/{f} is missing (a record holds manifest.json, scan.json and build.log)");
        }
    }
    let m = crate::manifest::Manifest::load(&dir.join("manifest.json"))?;
    if m.recipe != r.id() || m.rccl_version != r.rccl_version {
        bail!(
            "{v}/manifest.json is for recipe {} ({}), not {}",
            m.recipe,
            m.rccl_version,
            r.id()
        );
    }
    if m.tag != r.source.tag || m.branch != r.source.branch {
        bail!(
            "{v}/manifest.json built {}, the recipe names {}",
            m.rev_label(),
            r.source.rev_label()
        );
    }
    if let Some(pin) = r.pinned_commit(lock) {
        if m.commit != pin {
            bail!(
                "{v}/manifest.json built commit {}, the recipe pins {pin}",
                m.commit
            );
        }
    }
    if m.gate.is_empty() || m.gate.values().any(|g| g != "clean") {
        bail!(
            "{v}/manifest.json: the scan gate was not clean for every target ({:?})",
            m.gate
        );
    }
    for t in &m.targets {
        if m.gate.get(t).map(String::as_str) != Some("clean") {
            bail!("{v}/manifest.json: target {t} has no clean gate verdict");
        }
    }
    Ok(())
}

/// How the record `v` (`recipes/records/<folder>`, already checked by [`check_verified_by`]) no
/// longer describes the files its `manifest.json` names: each patch whose recorded sha256 is not
/// the current `patches/<file>`'s (or that is gone), one line naming both hashes and the command
/// that refreshes the record. Empty when the record reads as the files are now.
pub fn record_drift(r: &Recipe, v: &str, root: &Path) -> Vec<String> {
    let Ok(m) = crate::manifest::Manifest::load(&root.join(v).join("manifest.json")) else {
        return vec![];
    };
    let refresh = format!(
        "refresh it: `rcclfix build --tag {} --targets {}`, then copy the output folder's manifest.json, scan.json and build.log into {v}/",
        r.id(),
        m.targets.join(",")
    );
    let mut out = vec![];
    for p in &m.patches {
        let file = root.join("patches").join(&p.path);
        match crate::fsutil::sha256_file(&file) {
            Ok(now) if now == p.sha256 => {}
            Ok(now) => out.push(format!(
                "{v}/manifest.json was built with patches/{} sha256 {}, the file now has {now}; {refresh}",
                p.path, p.sha256
            )),
            Err(_) => out.push(format!(
                "{v}/manifest.json was built with patches/{}, which is no longer in patches/; {refresh}",
                p.path
            )),
        }
    }
    out
}

/// Run git against a mirror (bare, or a checkout's `.git`); `Ok(None)` when git fails (the object
/// does not exist).
fn git_mirror(mirror: &Path, args: &[&str]) -> anyhow::Result<Option<String>> {
    // A checkout with a work tree keeps its repository in `.git`.
    let dot_git = mirror.join(".git");
    let mirror = if dot_git.exists() {
        dot_git.as_path()
    } else {
        mirror
    };
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(mirror)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .context("cannot run git (needed to read the mirror)")?;
    if out.status.success() {
        Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()))
    } else {
        Ok(None)
    }
}

/// Check that `mirror` is a git repository `--check` can read (bare, or a checkout's `.git`).
///
/// Errors: it is not a folder, git cannot run, or git does not see a repository there (the
/// message names the path and git's own reason).
pub fn require_git_mirror(mirror: &Path) -> anyhow::Result<()> {
    if !mirror.is_dir() {
        anyhow::bail!("--git-mirror {}: not a folder", mirror.display());
    }
    let dot_git = mirror.join(".git");
    let dir = if dot_git.exists() {
        dot_git.as_path()
    } else {
        mirror
    };
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(["rev-parse", "--git-dir"])
        .stdin(std::process::Stdio::null())
        .output()
        .context("cannot run git (needed to read the mirror)")?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(
            "--git-mirror {}: not a git repository ({})",
            mirror.display(),
            why.lines().next().unwrap_or("git rev-parse failed").trim()
        );
    }
    Ok(())
}

/// The `NCCL_MAJOR.NCCL_MINOR.NCCL_PATCH` stated by a `makefiles/version.mk` text.
///
/// Errors: a missing field.
pub fn version_from_version_mk(text: &str) -> anyhow::Result<String> {
    let field = |name: &str| -> anyhow::Result<String> {
        text.lines()
            .filter_map(|l| l.split_once(":="))
            .find(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.trim().to_owned())
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .with_context(|| format!("makefiles/version.mk has no numeric {name}"))
    };
    Ok(format!(
        "{}.{}.{}",
        field("NCCL_MAJOR")?,
        field("NCCL_MINOR")?,
        field("NCCL_PATCH")?
    ))
}

/// Check a recipe against a bare git mirror: the tag exists as a tag, resolves to the pin, and ships
/// the recipe's RCCL version; the tag's build files agree with the recipe's options.
pub fn check_against_mirror(r: &Recipe, mirror: &Path, pin: Option<&str>) -> CheckReport {
    let mut rep = CheckReport::default();
    let tag_ref = match (&r.source.branch, pin) {
        // A branch recipe: the pinned commit must exist in the mirror, and the branch (when the
        // mirror still has it) must contain it.
        (Some(b), Some(p)) => {
            let head = git_mirror(
                mirror,
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("refs/heads/{b}^{{commit}}"),
                ],
            );
            if let Ok(Some(h)) = &head {
                let h = h.trim();
                if h != p
                    && !matches!(
                        git_mirror(mirror, &["merge-base", "--is-ancestor", p, h]),
                        Ok(Some(_))
                    )
                {
                    rep.problem(r, format!("branch {b} is at {h} in the mirror, which does not contain the pinned commit {p}"));
                }
            } else {
                rep.note(
                    r,
                    format!(
                        "branch {b} is not in the mirror {}: only the pinned commit is checked",
                        mirror.display()
                    ),
                );
            }
            format!("{p}^{{commit}}")
        }
        _ => format!("refs/tags/{}^{{commit}}", r.source.tag),
    };
    let commit = match git_mirror(mirror, &["rev-parse", "--verify", "--quiet", &tag_ref]) {
        Err(e) => {
            rep.problem(r, format!("{e:#}"));
            return rep;
        }
        Ok(None) => {
            rep.note(
                r,
                format!(
                    "{} is not in the mirror {}: commit and version not checked",
                    r.source.rev_label(),
                    mirror.display()
                ),
            );
            return rep;
        }
        Ok(Some(c)) => c.trim().to_owned(),
    };
    if let Some(p) = pin {
        if p != commit {
            rep.problem(
                r,
                format!(
                    "tag {} is {commit} in the mirror, but the recipe pins {p}",
                    r.source.tag
                ),
            );
        }
    }
    let prefix = if r.source.subdir.is_empty() {
        String::new()
    } else {
        format!("{}/", r.source.subdir.trim_end_matches('/'))
    };
    let show = |file: &str| {
        git_mirror(mirror, &["show", &format!("{commit}:{prefix}{file}")])
            .ok()
            .flatten()
    };
    match show("makefiles/version.mk") {
        None => rep.problem(
            r,
            format!(
                "{prefix}makefiles/version.mk does not exist at tag {} in the mirror",
                r.source.tag
            ),
        ),
        Some(text) => match version_from_version_mk(&text) {
            Err(e) => rep.problem(r, format!("tag {}: {e:#}", r.source.tag)),
            Ok(v) if v != r.rccl_version => rep.problem(
                r,
                format!(
                    "tag {} ships RCCL {v} (makefiles/version.mk), the recipe says {}",
                    r.source.tag, r.rccl_version
                ),
            ),
            Ok(v) => rep
                .mirror_confirmed
                .push((r.id().to_owned(), commit.clone(), v)),
        },
    }
    if let Some(cm) = show("CMakeLists.txt") {
        let ifc_on = cm.lines().any(|l| {
            let l = l.trim();
            l.starts_with("option(ENABLE_IFC") && l.trim_end_matches(')').trim_end().ends_with("ON")
        });
        if ifc_on && !has_option(r, "-DENABLE_IFC=OFF") {
            rep.problem(r, format!("ENABLE_IFC defaults to ON at tag {}: pass -DENABLE_IFC=OFF (indirect calls declare hostcall)", r.source.tag));
        }
    }
    if r.build.ndebug == NdebugStrategy::ReleaseBuildType {
        if let Some(tc) = show("toolchain-linux.cmake") {
            if tc.contains("CMAKE_CXX_FLAGS_RELEASE") {
                rep.problem(r, format!("toolchain-linux.cmake at tag {} sets CMAKE_CXX_FLAGS_RELEASE: release-build-type loses NDEBUG", r.source.tag));
            }
        }
    }
    rep
}

/// Check every recipe, plus the rules across recipes: file name = `<id>.toml`; every RCCL version
/// with several recipes has one named exactly the version (so `--tag <version>` has a default); no
/// `containers/rocm-*/` folder is left without a recipe.
pub fn check_all(
    all: &BTreeMap<String, Recipe>,
    root: &Path,
    lock: &Lockfile,
    mirror: Option<&Path>,
) -> CheckReport {
    let mut rep = CheckReport::default();
    if mirror.is_none() {
        rep.notes.push("no git mirror given (RCCLFIX_GIT_MIRROR): commits and makefiles/version.mk not checked".into());
    }
    for r in all.values() {
        rep.extend(check_recipe(r, root, lock, mirror));
    }
    for (file, text) in crate::recipe::EMBEDDED_RECIPES {
        if let Ok(r) = Recipe::parse(text, file) {
            if *file != format!("{}.toml", r.id()) {
                rep.problems.push(format!(
                    "recipes/{file}: file name should be {}.toml",
                    r.id()
                ));
            }
        }
    }
    let mut by_version: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in all.values() {
        by_version.entry(&r.rccl_version).or_default().push(r.id());
    }
    for (v, ids) in &by_version {
        if !ids.contains(v) {
            rep.problems.push(format!(
                "RCCL {v}: no recipe is named {v:?} (recipes: {}), so --tag {v} has no default",
                ids.join(", ")
            ));
        }
    }
    if let Ok(rd) = fs_err::read_dir(root.join("containers")) {
        let used: Vec<&str> = all
            .values()
            .filter_map(|r| r.toolchain.containerfile.as_deref())
            .collect();
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("rocm-") {
                let cf = format!("containers/{name}/Containerfile");
                if !used.contains(&cf.as_str()) {
                    rep.problems.push(format!("{cf}: no recipe uses it"));
                }
            }
        }
    }
    rep
}

// ---------------------------------------------------------------------------------------------
