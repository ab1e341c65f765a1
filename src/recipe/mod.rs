//! Recipes: one TOML file per RCCL version in `recipes/`, embedded into the binary at build time
//! (see `build.rs`), plus any file given with `--recipe FILE`.
//!
//! A recipe pins *what* to build (git URL, tag, commit), *with what* (a toolchain: a Debian-package
//! rootfs built by rcclfix, or an official ROCm dev image), and *how* to make NDEBUG reach the device
//! compile. Unknown fields are rejected so a typo never silently changes a build.
//!
//! Commits are pinned either in the recipe (`source.commit`) or in a lockfile (`rcclfix.lock`, like
//! `Cargo.lock`): the first fetch of an unpinned tag records the commit, every later fetch checks it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::bail;
use serde::{Deserialize, Serialize};

pub mod check;
pub mod containerfile;
mod grammar;
mod lockfile;

use grammar::is_version;
pub use grammar::{
    check_relative_path, check_target, check_target_list, is_full_sha, is_git_origin,
    is_plain_name, is_ref_name, is_relative_path, is_safe_arg, known_processors, GIT_ORIGIN_RULE,
    SRAMECC_PROCESSORS, XNACK_PROCESSORS,
};
pub use lockfile::{ImagePin, Lockfile, Pin};

include!(concat!(env!("OUT_DIR"), "/recipes.rs"));

/// The recipe chosen when `--tag` is not given: the one whose proof is on record (`rcclfix prove`:
/// without NDEBUG its kernels declare `hidden_hostcall_buffer`, with the recipe's strategy none do),
/// built on a Debian 12 host in the debian-sid toolchain.
pub const DEFAULT_RECIPE: &str = "2.21.5-debian-sid";

/// One recipe file, e.g. `recipes/2.27.7.toml`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// The RCCL version this recipe builds, `MAJOR.MINOR.PATCH` (what `--tag` takes), e.g. `2.27.7`.
    /// Several recipes may build one version (e.g. `2.27.7` for ROCm 7.1.1 and 7.2.1): then `name`
    /// tells them apart.
    pub rccl_version: String,
    /// A unique recipe name; defaults to `rccl_version`. `--tag` accepts either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The ROCm release that shipped this RCCL, e.g. `7.2.1` (informational; drives the matrix).
    pub rocm_release: String,
    /// How far this recipe is proven.
    pub status: Status,
    /// Why the status is what it is (required for `unfixable-by-rebuild` and `experimental`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// Where the status `verified` comes from: a CI test name or a recorded build under `recipes/records/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<String>,
    /// Free text: what is known about this version (shown by `build --list` and `matrix`).
    #[serde(default)]
    pub notes: String,
    /// Where the source comes from.
    pub source: Source,
    /// What compiles it.
    pub toolchain: Toolchain,
    /// How it is configured and built.
    pub build: BuildSpec,
}

/// How far a recipe is proven (issue: recipes per ROCm release).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Built and gated by rcclfix, on a developer machine or in CI (`verified_by` says where).
    Verified,
    /// The strategy is known to work elsewhere (community measurements), not yet built by rcclfix.
    Expected,
    /// Unproven; `rcclfix build` asks for `--experimental`. The scan gate stays the judge.
    Experimental,
    /// A rebuild alone cannot remove the declaration (`status_reason` says why).
    UnfixableByRebuild,
}

impl Status {
    /// The kebab-case name used in TOML and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Verified => "verified",
            Status::Expected => "expected",
            Status::Experimental => "experimental",
            Status::UnfixableByRebuild => "unfixable-by-rebuild",
        }
    }
}

/// The pinned source.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// Git URL (`https://github.com/ROCm/rccl.git`, or the rocm-systems monorepo).
    pub git: String,
    /// The tag to check out, e.g. `rocm-5.4.3`. Exactly one of `tag` and `branch` is given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tag: String,
    /// A branch that holds the pinned commit, e.g. `release-staging/rocm-rel-6.3`, for releases the
    /// upstream repository carries as a branch, not a tag. Needs `commit`: the commit itself is
    /// fetched by its id, and the branch is only a hint, checked when the origin still has it (the
    /// commit must be its head or an ancestor of it). Staging branches get deleted; commits stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Full 40-hex commit the tag must resolve to (required with `branch`). When absent the
    /// lockfile pins the tag on first fetch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Subdirectory holding RCCL inside the repository (`projects/rccl` in rocm-systems).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subdir: String,
}

/// The toolchain: exactly one of `name` (a Debian-package rootfs described in
/// `containers/<name>/toolchain.toml`) or `image` (an OCI image, described by `containerfile`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Toolchain {
    /// A local toolchain built by `rcclfix toolchain build <name>`, e.g. `debian-trixie`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An OCI image reference without a registry host, e.g. `rocm/dev-ubuntu-24.04:7.2.1-complete`;
    /// the engine's own configuration decides the registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The Containerfile that extends `image` with what the build needs, relative to the repo root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containerfile: Option<String>,
    /// The compiler driver inside the toolchain (`/usr/bin/hipcc`, `/opt/rocm/bin/hipcc`).
    pub cxx: String,
    /// `ROCM_PATH` inside the toolchain (`/usr` for Debian, `/opt/rocm` for ROCm images).
    pub rocm_path: String,
}

/// How NDEBUG is made to reach the device compile (RCCL's `CMakeLists.txt`: how CMAKE_BUILD_TYPE and the flags reach hipcc).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum NdebugStrategy {
    /// `-DCMAKE_BUILD_TYPE=Release` adds CMake's default `-DNDEBUG` (RCCL ≤ 5.x: no toolchain file
    /// shadows it).
    ReleaseBuildType,
    /// `-DCMAKE_CXX_FLAGS=-DNDEBUG` (rdc pipeline, ≤ 2.27.x).
    CxxFlags,
    /// Insert `add_compile_definitions(NDEBUG)` right after `project(...)` in the top-level
    /// CMakeLists.txt (reaches the device-linker pipeline's device steps too).
    CompileDefinition,
    /// Inject nothing (for negative controls and tests: the gate must then fail on asserts).
    None,
}

/// Configure and build settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BuildSpec {
    /// Default gfx targets (explicit names, never generic ones), e.g. `["gfx1100"]`.
    pub targets: Vec<String>,
    /// How NDEBUG reaches the device compile.
    pub ndebug: NdebugStrategy,
    /// `rdc` (rdc pipeline, `-fgpu-rdc` LTO link) or `device-linker` (device-linker pipeline, 2.28+).
    #[serde(default = "default_pipeline")]
    pub pipeline: Pipeline,
    /// CMake build type passed as `-DCMAKE_BUILD_TYPE`.
    #[serde(default = "default_build_type")]
    pub build_type: String,
    /// Extra `-D…` options for CMake, verbatim.
    #[serde(default)]
    pub cmake_options: Vec<String>,
    /// Patches (unified diffs) under `patches/`, applied with `git apply` in order.
    #[serde(default)]
    pub patches: Vec<String>,
    /// Files to create in the source tree before configuring (path → contents), e.g. the ROCm
    /// version file Debian does not ship.
    #[serde(default)]
    pub extra_files: BTreeMap<String, String>,
    /// Peak RAM the single-threaded device link needs, in GiB (warned about up front).
    #[serde(default = "default_link_ram")]
    pub link_ram_gib: f64,
    /// Wall time a 2-core machine needs, in minutes (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_minutes: Option<f64>,
    /// Run `rcclfix patch` on the built library before the gate (2.30.x device-linker pattern).
    #[serde(default)]
    pub post_link_patch: bool,
}

/// Device-code pipeline (RCCL's `CMakeLists.txt`: `-fgpu-rdc` or the 2.28+ device linker).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Pipeline {
    /// `-fgpu-rdc` single-source compile, LTO device link in the `librccl.so` link step.
    Rdc,
    /// The RCCL device linker (`ENABLE_DEVICE_LINKER=ON`, default from 2.28).
    DeviceLinker,
}

fn default_pipeline() -> Pipeline {
    Pipeline::Rdc
}
fn default_build_type() -> String {
    "Release".into()
}
fn default_link_ram() -> f64 {
    4.0
}

impl Recipe {
    /// The recipe's unique name (`name`, else `rccl_version`).
    pub fn id(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.rccl_version)
    }

    /// Parse and check one recipe. `origin` names the file in errors.
    ///
    /// Errors (one line each, naming `origin`): TOML syntax, unknown field, missing field, a
    /// malformed commit, an inconsistent toolchain, an empty or generic target list.
    pub fn parse(text: &str, origin: &str) -> anyhow::Result<Recipe> {
        let r: Recipe = toml::from_str(text).map_err(|e| toml_error(origin, text, &e))?;
        // One line: the file, then the field and its value.
        r.check()
            .map_err(|e| anyhow::anyhow!("{origin}: invalid recipe: {e:#}"))?;
        Ok(r)
    }

    /// Internal consistency checks (also run by the recipe tests).
    ///
    /// Every field that becomes a path, a git or engine argument, or a terminal line is checked
    /// here, when the recipe is parsed, so nothing downstream (the plan, the fetch, the work
    /// folder) meets a hostile value: see [`check_fields`].
    pub fn check(&self) -> anyhow::Result<()> {
        self.check_fields()?;
        if !is_version(&self.rccl_version) {
            bail!(
                "rccl_version {:?} is not MAJOR.MINOR.PATCH",
                self.rccl_version
            );
        }
        if let Some(c) = &self.source.commit {
            if !is_full_sha(c) {
                bail!("source.commit {c:?} is not a full 40-hex commit");
            }
        }
        match (&self.source.branch, self.source.tag.trim().is_empty()) {
            (Some(_), false) => bail!("source: give either `tag` or `branch`, not both"),
            (None, true) => bail!("source.tag is empty (give `tag`, or `branch` with `commit`)"),
            (Some(b), true) => {
                if !is_ref_name(b) {
                    bail!("source.branch {b:?} is not a valid git branch name");
                }
                if self.source.commit.is_none() {
                    bail!("source.branch {b:?} needs source.commit: a branch moves, so the recipe pins the commit");
                }
            }
            (None, false) => {
                if !is_ref_name(&self.source.tag) {
                    bail!(
                        "source.tag {:?} is not a valid git tag name",
                        self.source.tag
                    );
                }
            }
        }
        match (&self.toolchain.name, &self.toolchain.image) {
            (Some(_), Some(_)) => bail!("toolchain: give either `name` or `image`, not both"),
            (None, None) => bail!("toolchain: give `name` (a local toolchain) or `image`"),
            (None, Some(_)) if self.toolchain.containerfile.is_none() => {
                bail!("toolchain: `image` needs `containerfile`")
            }
            _ => {}
        }
        if self.build.targets.is_empty() {
            bail!("build.targets is empty");
        }
        check_target_list("build.targets", &self.build.targets)?;
        if !(self.build.link_ram_gib.is_finite() && self.build.link_ram_gib > 0.0) {
            bail!(
                "build.link_ram_gib = {}: must be a positive number of GiB",
                self.build.link_ram_gib
            );
        }
        if let Some(m) = self.build.expected_minutes {
            if !(m.is_finite() && m >= 0.0) {
                bail!("build.expected_minutes = {m}: must be zero or a positive number of minutes");
            }
        }
        if matches!(
            self.status,
            Status::UnfixableByRebuild | Status::Experimental
        ) && self.status_reason.is_none()
        {
            bail!("status {} needs status_reason", self.status.as_str());
        }
        if self.status == Status::Verified && self.verified_by.is_none() {
            bail!("status verified needs verified_by (a CI test or a recorded build)");
        }
        Ok(())
    }

    /// The fields that reach the file system, a command line or the terminal, each against its
    /// grammar:
    /// - `name` (the work folder, record and output names) and `rocm_release`: [`is_plain_name`];
    /// - `source.git`: no control character, not starting with `-` (git would read an option, e.g.
    ///   `--upload-pack=…`), at most 4096 bytes;
    /// - `source.subdir`, `toolchain.containerfile`, every `build.extra_files` key: [`check_relative_path`];
    /// - `toolchain.name` and every `build.patches` entry: [`is_plain_name`];
    /// - `toolchain.image`, `toolchain.cxx`, `toolchain.rocm_path`, `build.build_type`, every
    ///   `build.cmake_options` entry: no control character, not starting with `-` (the image, a
    ///   path, a CMake value; `cmake_options` entries are `-D…` options and must start with `-D`).
    ///
    /// Errors: one line naming the field and the value (escaped when printed).
    fn check_fields(&self) -> anyhow::Result<()> {
        if let Some(n) = &self.name {
            if !is_plain_name(n) {
                bail!("name {n:?} is not a plain name (letters, digits, '.', '_', '+', '-'; at most 100; no leading '.' or '-')");
            }
        }
        if !is_plain_name(&self.rocm_release) {
            bail!(
                "rocm_release {:?} is not a plain release name like \"7.2.1\"",
                self.rocm_release
            );
        }
        let arg = |field: &str, v: &str| -> anyhow::Result<()> {
            if !is_safe_arg(v) {
                bail!("{field} {v:?} must not start with '-' or hold a control character (at most 4096 bytes)");
            }
            Ok(())
        };
        arg("source.git", &self.source.git)?;
        if self.source.git.trim().is_empty() {
            bail!("source.git is empty");
        }
        if !is_git_origin(&self.source.git) {
            bail!("source.git {:?} {GIT_ORIGIN_RULE}", self.source.git);
        }
        if !self.source.subdir.is_empty() {
            check_relative_path("source.subdir", &self.source.subdir)?;
        }
        if let Some(n) = &self.toolchain.name {
            if !is_plain_name(n) {
                bail!("toolchain.name {n:?} is not a plain toolchain name like \"debian-sid\"");
            }
        }
        if let Some(i) = &self.toolchain.image {
            arg("toolchain.image", i)?;
            if i.chars().any(char::is_whitespace) {
                bail!("toolchain.image {i:?} holds whitespace");
            }
        }
        if let Some(c) = &self.toolchain.containerfile {
            check_relative_path("toolchain.containerfile", c)?;
        }
        arg("toolchain.cxx", &self.toolchain.cxx)?;
        arg("toolchain.rocm_path", &self.toolchain.rocm_path)?;
        arg("build.build_type", &self.build.build_type)?;
        for o in &self.build.cmake_options {
            if !o.starts_with("-D") || o.chars().any(char::is_control) || o.len() > 4096 {
                bail!("build.cmake_options entry {o:?} is not a -D<var>=<value> option without control characters");
            }
            let var = cmake_option_var(o);
            if let Some(why) = controlled_cmake_var(&var) {
                bail!("build.cmake_options entry {o:?} sets {var}: {why}; it would override rcclfix's own setting while the plan describes another build");
            }
        }
        for p in &self.build.patches {
            if !is_plain_name(p) {
                bail!("build.patches entry {p:?} is not a file name in patches/");
            }
        }
        for k in self.build.extra_files.keys() {
            check_relative_path("build.extra_files", k)?;
        }
        Ok(())
    }

    /// The commit this recipe is pinned to: `source.commit`, else the lockfile entry, else `None`.
    pub fn pinned_commit<'a>(&'a self, lock: &'a Lockfile) -> Option<&'a str> {
        self.source
            .commit
            .as_deref()
            .or_else(|| lock.get(self.id(), &self.source.tag))
    }
}

impl Source {
    /// What the recipe names upstream, for messages and tables: `tag rocm-5.4.3` or
    /// `branch release-staging/rocm-rel-6.3`.
    pub fn rev_label(&self) -> String {
        match &self.branch {
            Some(b) => format!("branch {b}"),
            None => format!("tag {}", self.tag),
        }
    }

    /// The upstream name alone (the tag, else the branch), for table columns.
    pub fn rev_name(&self) -> &str {
        self.branch.as_deref().unwrap_or(&self.tag)
    }
}

/// A TOML error of the file `origin` (text `text`) as one line: `FILE (line L, column C):
/// what` (toml's own message has one reason per line; they are joined with `; `), or `FILE: not
/// valid TOML` when toml gives no reason.
pub fn toml_error(origin: &str, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let msg: Vec<&str> = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let msg = if msg.is_empty() {
        "not valid TOML".to_owned()
    } else {
        msg.join("; ")
    };
    let at = e
        .span()
        .map(|s| {
            let before = &text[..s.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!(" (line {line}, column {col})")
        })
        .unwrap_or_default();
    anyhow::anyhow!("{origin}{at}: {msg}")
}

/// All recipes: the embedded ones, keyed by [`Recipe::id`].
///
/// Errors: an embedded recipe does not parse (caught by the tests before release), or two recipes
/// share an id.
pub fn embedded() -> anyhow::Result<BTreeMap<String, Recipe>> {
    let mut out = BTreeMap::new();
    for (file, text) in EMBEDDED_RECIPES {
        let r = Recipe::parse(text, &format!("recipes/{file}"))?;
        if let Some(prev) = out.insert(r.id().to_owned(), r) {
            bail!("recipes/{file}: recipe name {:?} is used twice", prev.id());
        }
    }
    Ok(out)
}

/// The variable a `-D…` option sets, as CMake reads it: the text before the first `=` or `:`,
/// whitespace trimmed and every `"` taken out (CMake's `cmake::SetCacheArgs` hands the entry to
/// `cmState::ParseCacheEntry`, which accepts a quoted name, so `-D"CMAKE_CXX_FLAGS"=…` sets
/// `CMAKE_CXX_FLAGS`; a quote left inside would only make the name differ from the one refused).
pub fn cmake_option_var(option: &str) -> String {
    let entry = option.strip_prefix("-D").unwrap_or(option).replace('"', "");
    entry
        .split(['=', ':'])
        .next()
        .unwrap_or("")
        .trim()
        .to_owned()
}

/// Why a recipe's `cmake_options` may not set the CMake variable `var`, or `None` when it may:
/// the variables `build::configure_args` passes itself (`CMAKE_BUILD_TYPE` from
/// `build.build_type`, `GPU_TARGETS`/`AMDGPU_TARGETS` from the targets, the toolchain's
/// compiler and `ROCM_PATH`), compile flags (`CMAKE_<LANG>_FLAGS`, its per-configuration
/// `CMAKE_<LANG>_FLAGS_<CONFIG>` and `_INIT` forms: the NDEBUG strategy owns them, and a
/// `CMAKE_CXX_FLAGS_RELEASE` or `-UNDEBUG` undoes NDEBUG), compilers and their launchers
/// (`CMAKE_<LANG>_COMPILER*`: the toolchain and the cache own them), and files that run CMake
/// code around the project (`CMAKE_TOOLCHAIN_FILE`, `CMAKE_PROJECT_INCLUDE*`,
/// `CMAKE_PROJECT_<NAME>_INCLUDE*`, `CMAKE_USER_MAKE_RULES_OVERRIDE*`), and the rule variables
/// that are the compile and link command lines themselves (`CMAKE_<LANG>_COMPILE_OBJECT`,
/// `CMAKE_<LANG>_CREATE_*`, `CMAKE_<LANG>_LINK_EXECUTABLE`, `CMAKE_<LANG>_ARCHIVE_*`: a rule
/// can add or drop any flag, NDEBUG's included). Linker flags
/// (`CMAKE_{EXE,SHARED,MODULE,STATIC}_LINKER_FLAGS*`) are the recipe's own (the debian-sid
/// recipes pass `-amdgpu-s-branch-bits=12` there). Also refused: where HIP and CMake packages
/// are looked for (`HIP_CLANG_PATH`, `HIP_PATH`, `hip_DIR`, `CMAKE_PREFIX_PATH`,
/// `CMAKE_MODULE_PATH`, `CMAKE_FIND_ROOT_PATH`): the toolchain's HIP under `ROCM_PATH` is the one
/// its stamp records. Sources: CMake's `cmake-variables(7)`; HIP's `hip-config.cmake` and
/// `hipcc` read `HIP_CLANG_PATH` and `HIP_PATH`.
pub fn controlled_cmake_var(var: &str) -> Option<&'static str> {
    const OWN: &[&str] = &[
        "CMAKE_BUILD_TYPE",
        "GPU_TARGETS",
        "AMDGPU_TARGETS",
        "ROCM_PATH",
        "CMAKE_TOOLCHAIN_FILE",
        "CMAKE_GENERATOR",
        "CMAKE_HIP_ARCHITECTURES",
    ];
    if OWN.contains(&var) {
        return Some("rcclfix passes it itself (from the recipe's fields and the targets)");
    }
    const WHERE: &[&str] = &[
        "HIP_CLANG_PATH",
        "HIP_PATH",
        "hip_DIR",
        "CMAKE_PREFIX_PATH",
        "CMAKE_MODULE_PATH",
        "CMAKE_FIND_ROOT_PATH",
    ];
    if WHERE.contains(&var) {
        return Some(
            "it selects where HIP or CMake packages come from, which the toolchain (ROCM_PATH) controls",
        );
    }
    let rest = var.strip_prefix("CMAKE_")?;
    if (rest.starts_with("PROJECT_") && rest.contains("INCLUDE"))
        || rest.starts_with("USER_MAKE_RULES_OVERRIDE")
    {
        return Some("it runs CMake code around the project");
    }
    // CMAKE_<LANG>_FLAGS[_<CONFIG>|_INIT] and CMAKE_<LANG>_COMPILER[_LAUNCHER|…].
    let lang_then = |word: &str| {
        rest.find(word)
            .filter(|&i| i > 0 && !rest[..i].ends_with("LINKER") && !rest[..i].contains("LINKER_"))
    };
    if [
        "_COMPILE_OBJECT",
        "_CREATE_",
        "_LINK_EXECUTABLE",
        "_ARCHIVE_",
    ]
    .iter()
    .any(|w| lang_then(w).is_some())
    {
        return Some(
            "it is a rule variable, the compile or link command line itself, which the toolchain and the NDEBUG strategy control",
        );
    }
    if lang_then("_FLAGS").is_some() {
        return Some("it holds compile flags, which the NDEBUG strategy controls");
    }
    if lang_then("_COMPILER").is_some() {
        return Some(
            "it selects a compiler or launcher, which the toolchain and the build cache control",
        );
    }
    None
}

/// The largest recipe file `--recipe` reads (1 MiB; the embedded ones are a few KiB).
pub const MAX_RECIPE_BYTES: u64 = 1 << 20;

/// Load a recipe file from disk (`--recipe FILE`).
///
/// Errors: not a regular file (a FIFO is refused before it is opened), larger than
/// [`MAX_RECIPE_BYTES`], not UTF-8, not a valid recipe ([`Recipe::parse`]).
pub fn load_file(path: &Path) -> anyhow::Result<Recipe> {
    let text = crate::fsutil::read_text_capped(path, MAX_RECIPE_BYTES, "a recipe")?;
    Recipe::parse(&text, &path.display().to_string())
}

/// Find the recipe for `--tag`: an exact recipe name, else the single recipe of that RCCL version,
/// else the recommended one (`status` best first) among several of that version.
///
/// Errors: no recipe has that name or version (the message lists the known ones).
pub fn find<'a>(all: &'a BTreeMap<String, Recipe>, tag: &str) -> anyhow::Result<&'a Recipe> {
    if let Some(r) = all.get(tag) {
        return Ok(r);
    }
    let mut same: Vec<&Recipe> = all.values().filter(|r| r.rccl_version == tag).collect();
    same.sort_by_key(|r| r.status);
    if let Some(r) = same.first() {
        return Ok(r);
    }
    let known: Vec<&str> = all.keys().map(|s| s.as_str()).collect();
    bail!(
        "unknown tag {tag:?}: no recipe for that RCCL version (known: {})",
        known.join(", ")
    )
}

/// The per-user data folder ([`crate::paths::home`], kept here for the callers that name it so).
pub use crate::paths::home;

/// The recipe list as a text table (`build --list`, `recipe list`).
pub fn list_table(all: &BTreeMap<String, Recipe>) -> String {
    let rows: Vec<Vec<String>> = all
        .values()
        .map(|r| {
            let tc = r
                .toolchain
                .name
                .clone()
                .or_else(|| r.toolchain.image.clone())
                .unwrap_or_default();
            vec![
                r.id().to_owned(),
                r.rocm_release.clone(),
                r.source.rev_name().to_owned(),
                tc,
                r.status.as_str().to_owned(),
                serde_json::to_value(r.build.ndebug)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    crate::ui::columns(
        &["RECIPE", "ROCM", "TAG", "TOOLCHAIN", "STATUS", "NDEBUG"],
        &rows,
    )
}
