//! Recipe consistency: every embedded recipe parses and passes `recipe::check::check_all` against
//! this checkout (Containerfiles, records, tag naming, pipeline/NDEBUG rules), matches the RCCL
//! ROCm release → RCCL version table below, and — where a git mirror of ROCm/rccl is given in
//! `RCCLFIX_GIT_MIRROR` — has the commit pin and `makefiles/version.mk` version the tag really has.
//! Each rule also has a negative test: a recipe broken in exactly one way is reported.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rcclfix::recipe::check::{
    check_against_mirror, check_all, check_recipe, embedded_lockfile, CheckReport,
};
use rcclfix::recipe::containerfile::parse_containerfile;
use rcclfix::recipe::{embedded, Lockfile, Recipe, Status};

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

use crate::support::slow;

/// The ROCm/rccl mirror from `RCCLFIX_GIT_MIRROR`: `None` (with a printed note) when unset; a
/// missing directory is an error, never a silent skip.
fn mirror() -> Option<PathBuf> {
    match std::env::var_os("RCCLFIX_GIT_MIRROR") {
        None => {
            eprintln!("note: RCCLFIX_GIT_MIRROR is not set: commit pins and makefiles/version.mk are not checked against a mirror");
            None
        }
        Some(m) => {
            let m = PathBuf::from(m);
            let git = if m.join(".git").exists() {
                m.join(".git")
            } else {
                m.clone()
            };
            assert!(
                git.join("HEAD").is_file() && git.join("objects").is_dir(),
                "RCCLFIX_GIT_MIRROR={} is not a git repository",
                m.display()
            );
            Some(m)
        }
    }
}

fn recipe(id: &str) -> Recipe {
    embedded()
        .unwrap()
        .remove(id)
        .unwrap_or_else(|| panic!("no embedded recipe {id}"))
}

/// The embedded recipe `id` with its TOML text edited by `edit`, re-parsed.
fn edited(id: &str, edit: impl Fn(&str) -> String) -> Recipe {
    let file = format!("{id}.toml");
    let text = rcclfix::recipe::EMBEDDED_RECIPES
        .iter()
        .find(|(f, _)| *f == file)
        .unwrap()
        .1;
    let new = edit(text);
    assert_ne!(new, text, "the edit changed nothing");
    Recipe::parse(&new, &file).unwrap()
}

fn problems(r: &Recipe) -> Vec<String> {
    check_recipe(r, &root(), &Lockfile::default(), None).problems
}

/// Assert that checking `r` reports exactly one problem (beyond those of the unedited recipe) and
/// that it contains `needle`.
fn check_reports(r: &Recipe, baseline: &str, needle: &str) {
    let base = problems(&recipe(baseline));
    let got: Vec<String> = problems(r)
        .into_iter()
        .filter(|p| !base.contains(p))
        .collect();
    assert!(
        got.len() == 1 && got[0].contains(needle),
        "expected one problem containing {needle:?}, got {got:#?}"
    );
}

#[test]
fn every_recipe_is_consistent() {
    let all = embedded().unwrap();
    let lock = embedded_lockfile().unwrap();
    let m = mirror();
    let rep = check_all(&all, &root(), &lock, m.as_deref());
    for n in &rep.notes {
        eprintln!("note: {n}");
    }
    assert!(
        rep.problems.is_empty(),
        "recipe problems:\n{}",
        rep.problems.join("\n")
    );
    if let Some(m) = m {
        // The mirror must have confirmed something, or the check silently did nothing.
        assert!(
            !rep.mirror_confirmed.is_empty(),
            "no recipe's tag is in the mirror {}",
            m.display()
        );
        for (id, commit, version) in &rep.mirror_confirmed {
            eprintln!("mirror: recipe {id}: tag at {commit}, makefiles/version.mk says {version}");
            assert_eq!(all[id].rccl_version, *version);
        }
    }
}

/// The records that no longer describe a patch they name (recipe, patch file): their manifests
/// show what was built, with the patch bytes of then. The list may only shrink: a refreshed
/// record must leave it, and a new drift fails until its record is refreshed (issue 41).
const KNOWN_RECORD_DRIFT: &[(&str, &str)] = &[];

/// A record's patch hashes are compared with the current `patches/` files, and every mismatch is
/// reported with both hashes and the command that refreshes the record, never accepted in
/// silence; `matrix --check` prints each as a warning.
#[test]
fn record_drift_is_reported_with_the_refresh_command() {
    let all = embedded().unwrap();
    let lock = embedded_lockfile().unwrap();
    let rep = check_all(&all, &root(), &lock, None);
    let mut found = vec![];
    for d in &rep.drift {
        let (recipe, patch) = KNOWN_RECORD_DRIFT
            .iter()
            .find(|(r, p)| {
                d.starts_with(&format!("recipe {r}: "))
                    && d.contains(&format!("patches/{p} sha256 "))
            })
            .unwrap_or_else(|| panic!("a record drifts from its patch and is not known: {d}"));
        let dir = root().join(format!("recipes/records/{recipe}-gfx1100"));
        let m = rcclfix::manifest::Manifest::load(&dir.join("manifest.json")).unwrap();
        let recorded = &m.patches.iter().find(|f| f.path == *patch).unwrap().sha256;
        let now = rcclfix::fsutil::sha256_file(&root().join("patches").join(patch)).unwrap();
        assert_ne!(recorded, &now);
        assert!(
            d.contains(recorded.as_str()) && d.contains(&format!("the file now has {now}")),
            "{d}"
        );
        assert!(
            d.contains(&format!("`rcclfix build --tag {recipe} --targets gfx1100`")),
            "{d}"
        );
        found.push((*recipe, *patch));
    }
    found.sort();
    let mut known = KNOWN_RECORD_DRIFT.to_vec();
    known.sort();
    assert_eq!(
        found, known,
        "KNOWN_RECORD_DRIFT lists a record that no longer drifts: remove it"
    );
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rcclfix"))
        .args(["matrix", "--check", "--root"])
        .arg(root())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    for (recipe, patch) in KNOWN_RECORD_DRIFT {
        assert!(
            err.lines().any(|l| l.starts_with("warning: recipe ")
                && l.contains(recipe)
                && l.contains(patch)),
            "matrix --check does not warn about {recipe} / {patch}:\n{err}"
        );
    }
}

/// Every recorded build names the toolchain's packages (`name=version`, as `dpkg-query` lists
/// them), the compiler among them, so that a record says which hipcc and clang made the library,
/// not only the image's digest (issue 41).
#[test]
fn every_record_names_its_toolchain_packages() {
    let dir = root().join("recipes/records");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if !p.is_dir() {
            continue;
        }
        let m = rcclfix::manifest::Manifest::load(&p.join("manifest.json")).unwrap();
        let pkgs = &m.toolchain_packages;
        assert!(
            pkgs.len() > 50,
            "{}: {} toolchain packages",
            p.display(),
            pkgs.len()
        );
        assert!(
            pkgs.iter().all(|x| x
                .split_once('=')
                .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())),
            "{}: an entry is not name=version",
            p.display()
        );
        assert!(
            pkgs.iter().any(|x| x.starts_with("hipcc=")),
            "{}: no hipcc among {pkgs:?}",
            p.display()
        );
        n += 1;
    }
    assert_eq!(n, 3, "records in {}", dir.display());
}

/// ROCm release → RCCL version, (sources: `makefiles/version.mk`
/// at the ROCm/rccl tags, the releases page, rocm-systems `projects/rccl/CHANGELOG.md`).
const REFERENCE: &[(&str, &str)] = &[
    ("5.4", "2.13.4"),
    ("6.0", "2.18.3"),
    ("6.1", "2.18.6"),
    ("6.2", "2.20.5"),
    ("6.3", "2.21.5"),
    ("6.4", "2.22.3"),
    ("7.0", "2.26.6"),
    ("7.1", "2.27.7"),
    ("7.2", "2.27.7"),
    ("7.11", "2.28.3"),
    ("7.12", "2.28.3"),
    ("7.13", "2.28.3"),
    ("7.14", "2.30.4"),
    ("10.0", "2.30.4"),
];

fn minor_line(release: &str) -> String {
    release.splitn(3, '.').take(2).collect::<Vec<_>>().join(".")
}

#[test]
fn recipe_versions_follow_the_reference_table() {
    for r in embedded().unwrap().values() {
        let line = minor_line(&r.rocm_release);
        let want = REFERENCE.iter().find(|(l, _)| *l == line).map(|(_, v)| *v);
        assert_eq!(
            want,
            Some(r.rccl_version.as_str()),
            "recipe {}: ROCm {} ships RCCL {:?}",
            r.id(),
            r.rocm_release,
            want
        );
    }
}

#[test]
fn every_rocm_release_line_from_6_0_has_a_buildable_recipe() {
    let all = embedded().unwrap();
    for (line, _) in REFERENCE.iter().filter(|(l, _)| *l != "5.4") {
        let n = all
            .values()
            .filter(|r| {
                minor_line(&r.rocm_release) == *line && r.status != Status::UnfixableByRebuild
            })
            .count();
        assert!(n >= 1, "no buildable recipe for ROCm {line}");
    }
    // 7.2.0 and 7.2.1 differ in exactly the line that lost NDEBUG (ROCm/rccl#2124): both must exist.
    let rels: Vec<&str> = all.values().map(|r| r.rocm_release.as_str()).collect();
    for rel in ["7.1.1", "7.2.0", "7.2.1", "7.14.0", "10.0.0"] {
        assert!(rels.contains(&rel), "no recipe for ROCm {rel}");
    }
}

#[test]
fn recipe_names_are_unique_and_the_bare_version_is_the_default() {
    let all = embedded().unwrap();
    let mut by_version: BTreeMap<&str, usize> = BTreeMap::new();
    for r in all.values() {
        *by_version.entry(&r.rccl_version).or_default() += 1;
    }
    for (v, n) in by_version {
        let r = rcclfix::recipe::find(&all, v).unwrap();
        assert_eq!(
            r.id(),
            v,
            "--tag {v} ({n} recipes) must pick the recipe named {v}"
        );
    }
    assert_eq!(
        rcclfix::recipe::find(&all, "2.27.7").unwrap().rocm_release,
        "7.2.1"
    );
    assert_eq!(
        rcclfix::recipe::find(&all, "2.27.7-rocm7.2.0")
            .unwrap()
            .rocm_release,
        "7.2.0"
    );
}

#[test]
fn statuses_match_what_is_known() {
    for r in embedded().unwrap().values() {
        let v = rcclfix::recipe::check::version_tuple(&r.rccl_version);
        if v >= rcclfix::recipe::check::DEVICE_LINKER_FROM {
            // Nothing from 2.28 on is proven on hardware yet (ROCm/ROCm#6520).
            assert!(
                matches!(r.status, Status::Experimental | Status::UnfixableByRebuild),
                "recipe {}: RCCL {} cannot be more than experimental yet",
                r.id(),
                r.rccl_version
            );
        }
        if r.status == Status::Verified {
            assert!(r.verified_by.is_some(), "recipe {}", r.id());
        }
    }
}

#[test]
fn every_containerfile_parses_and_starts_from_an_image() {
    let mut n = 0;
    for e in std::fs::read_dir(root().join("containers")).unwrap() {
        let p = e.unwrap().path().join("Containerfile");
        if !p.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let cf = parse_containerfile(&text, &p.display().to_string()).unwrap();
        assert_eq!(cf.instructions[0].0, "FROM", "{}", p.display());
        // What an RCCL build and the workflow's ccache caching need on top of the ROCm dev image.
        for pkg in ["cmake", "ninja-build", "git", "python3", "ccache"] {
            let installs = cf.instructions.iter().any(|(w, a, _)| {
                w == "RUN"
                    && a.contains("apt-get install")
                    && a.split_whitespace().any(|x| x == pkg)
            });
            assert!(installs, "{} does not install {pkg}", p.display());
        }
        n += 1;
    }
    assert!(n >= 12, "only {n} Containerfiles");
}

pub(crate) fn ci_tool(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("RCCLFIX_CI_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/ci-tools/venv/bin"));
    let p = dir.join(name);
    if p.is_file() {
        return Some(p);
    }
    assert!(
        !slow(),
        "{} is missing (RCCLFIX_SLOW_TESTS=1)\nhelp: run `cargo xtask ci-tools` (pip-installs the pinned linters from .ci/ci-tools.txt)",
        p.display()
    );
    eprintln!("note: {} not found: skipped (set RCCLFIX_SLOW_TESTS=1 after `cargo xtask ci-tools` to run it)", p.display());
    None
}

#[test]
fn containerfiles_pass_hadolint() {
    let Some(hadolint) = ci_tool("hadolint") else {
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("containers"))
        .unwrap()
        .map(|e| e.unwrap().path().join("Containerfile"))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let config = root().join(".hadolint.yaml");
    let out = std::process::Command::new(&hadolint)
        .arg("--config")
        .arg(&config)
        .args(&files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hadolint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Negative control: hadolint does flag a Containerfile with a real mistake.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("Containerfile");
    std::fs::write(
        &bad,
        "FROM rocm/dev-ubuntu-24.04:7.2.1-complete\nRUN apt-get install -y cmake\n",
    )
    .unwrap();
    let out = std::process::Command::new(&hadolint)
        .arg("--config")
        .arg(&config)
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "hadolint accepted an apt-get install without update/cleanup"
    );
}

#[test]
fn containerfile_parser_rejects_bad_files() {
    let bad = [
        ("", "no FROM"),
        ("# only a comment\n", "no FROM"),
        ("RUN true\nFROM x:1\n", "RUN before the first FROM"),
        ("FROM x:1\nFETCH y\n", "unknown instruction \"FETCH\""),
        (
            "FROM x:1\nRUN a \\\n",
            "ends inside a continued instruction",
        ),
        ("FROM\n", "FROM has no arguments"),
        (
            "FROM x:1\nMAINTAINER me\n",
            "unknown instruction \"MAINTAINER\"",
        ),
    ];
    for (text, want) in bad {
        let e = parse_containerfile(text, "containers/t/Containerfile")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("containers/t/Containerfile") && e.contains(want),
            "{text:?}: {e}"
        );
    }
    let ok = parse_containerfile("# syntax=docker/dockerfile:1\nARG V=1\nFROM --platform=linux/amd64 a/b:${V} AS base\nRUN x \\\n  # comment\n  && y\n", "t").unwrap();
    assert_eq!(ok.from, "a/b:1");
    assert_eq!(
        ok.instructions[2],
        ("RUN".to_owned(), "x && y".to_owned(), 4)
    );
    let ok = parse_containerfile(
        "ARG BASE=rocm/dev-ubuntu-24.04:7.2.1-complete\nFROM $BASE\n",
        "t",
    )
    .unwrap();
    assert_eq!(ok.from, "rocm/dev-ubuntu-24.04:7.2.1-complete");
    let e = parse_containerfile("ARG BASE\nFROM ${BASE}\n", "t").unwrap_err();
    assert!(
        format!("{e:#}").contains("$BASE has no default ARG before FROM"),
        "{e:#}"
    );
}

// Negative tests: each rule fires on a recipe broken in one way.

#[test]
fn wrong_tag_name_is_reported() {
    let r = edited("2.22.3", |t| {
        t.replace("tag = \"rocm-6.4.3\"", "tag = \"rocm-6.4.2\"")
    });
    check_reports(&r, "2.22.3", "should be \"rocm-6.4.3\"");
    let r = edited("2.30.4", |t| {
        t.replace("tag = \"therock-7.14\"", "tag = \"rocm-7.14.0\"")
    });
    check_reports(&r, "2.30.4", "should be \"therock-7.14\"");
    let r = edited("2.30.4", |t| t.replace("subdir = \"projects/rccl\"\n", ""));
    check_reports(&r, "2.30.4", "source.subdir must be \"projects/rccl\"");
}

#[test]
fn monorepo_only_version_from_rocm_rccl_is_reported() {
    let r = edited("2.30.4", |t| {
        t.replace(
            "https://github.com/ROCm/rocm-systems.git",
            "https://github.com/ROCm/rccl.git",
        )
        .replace("tag = \"therock-7.14\"", "tag = \"rocm-7.14.0\"")
        .replace("subdir = \"projects/rccl\"\n", "")
    });
    check_reports(&r, "2.30.4", "exists only in ROCm/rocm-systems");
}

#[test]
fn release_build_type_from_2_21_is_reported() {
    let r = edited("2.21.5", |t| {
        t.replace("ndebug = \"cxx-flags\"", "ndebug = \"release-build-type\"")
    });
    check_reports(
        &r,
        "2.21.5",
        "toolchain-linux.cmake shadows CMAKE_CXX_FLAGS_RELEASE",
    );
}

#[test]
fn ndebug_none_is_reported() {
    let r = edited("2.26.6", |t| {
        t.replace("ndebug = \"cxx-flags\"", "ndebug = \"none\"")
    });
    check_reports(&r, "2.26.6", "ndebug none injects nothing");
}

#[test]
fn pipeline_rules_are_enforced() {
    // 2.30 in Pipeline A without turning the device linker off.
    let r = edited("2.30.4", |t| {
        t.replace(", \"-DENABLE_DEVICE_LINKER=OFF\"", "")
    });
    check_reports(&r, "2.30.4", "needs -DENABLE_DEVICE_LINKER=OFF");
    // The device linker with NDEBUG alone, claimed fixable.
    let r = edited("2.30.4-rocm7.14.0-device-linker", |t| {
        t.replace(
            "status = \"unfixable-by-rebuild\"",
            "status = \"experimental\"",
        )
    });
    check_reports(
        &r,
        "2.30.4-rocm7.14.0-device-linker",
        "set post_link_patch or status unfixable-by-rebuild",
    );
    // The device linker with -DCMAKE_CXX_FLAGS.
    let r = edited("2.30.4-rocm7.14.0-patch", |t| {
        t.replace("ndebug = \"compile-definition\"", "ndebug = \"cxx-flags\"")
    });
    check_reports(
        &r,
        "2.30.4-rocm7.14.0-patch",
        "ndebug must be compile-definition",
    );
    // A device linker before 2.28.
    let r = edited("2.26.6", |t| {
        t.replace("pipeline = \"rdc\"", "pipeline = \"device-linker\"")
            .replace("ndebug = \"cxx-flags\"", "ndebug = \"compile-definition\"")
            .replace(
                "link_ram_gib = 18.5",
                "link_ram_gib = 18.5\npost_link_patch = true",
            )
    });
    let p = problems(&r);
    assert!(
        p.iter().any(|p| p.contains("has no device linker")),
        "{p:#?}"
    );
    // A post-link patch on Pipeline A.
    let r = edited("2.30.4", |t| {
        t.replace(
            "link_ram_gib = 18.5",
            "link_ram_gib = 18.5\npost_link_patch = true",
        )
    });
    check_reports(
        &r,
        "2.30.4",
        "post_link_patch is for the device-linker pipeline",
    );
}

#[test]
fn image_and_containerfile_rules_are_enforced() {
    let r = edited("2.22.3", |t| {
        t.replace(
            "image = \"rocm/dev-ubuntu-24.04:6.4.3-complete\"",
            "image = \"registry.example.com/rocm/dev-ubuntu-24.04:6.4.3-complete\"",
        )
    });
    let p = problems(&r);
    assert!(
        p.iter().any(|p| p.contains("names a registry host")),
        "{p:#?}"
    );
    assert!(p.iter().any(|p| p.contains("starts FROM")), "{p:#?}");
    let r = edited("2.22.3", |t| t.replace("6.4.3-complete", "6.4.2-complete"));
    let p = problems(&r);
    assert!(
        p.iter().any(|p| p.contains("is not for ROCm 6.4.3")),
        "{p:#?}"
    );
    let r = edited("2.22.3", |t| {
        t.replace(
            "containers/rocm-6.4.3/Containerfile",
            "containers/rocm-6.4/Containerfile",
        )
    });
    check_reports(
        &r,
        "2.22.3",
        "should be \"containers/rocm-6.4.3/Containerfile\"",
    );
    // A Containerfile that exists but is broken, in a scratch checkout.
    let dir = tempfile::tempdir().unwrap();
    let cf = dir.path().join("containers/rocm-6.4.3");
    std::fs::create_dir_all(&cf).unwrap();
    std::fs::write(cf.join("Containerfile"), "RUN true\n").unwrap();
    let p = check_recipe(&recipe("2.22.3"), dir.path(), &Lockfile::default(), None).problems;
    assert!(
        p.iter().any(|p| p.contains("RUN before the first FROM")),
        "{p:#?}"
    );
    std::fs::remove_file(cf.join("Containerfile")).unwrap();
    let p = check_recipe(&recipe("2.22.3"), dir.path(), &Lockfile::default(), None).problems;
    assert!(
        p.iter()
            .any(|p| p.contains("toolchain.containerfile") && p.contains("No such file")),
        "{p:#?}"
    );
}

fn manifest_for(r: &Recipe, gate: &str) -> rcclfix::manifest::Manifest {
    rcclfix::manifest::Manifest {
        schema_version: rcclfix::manifest::MANIFEST_SCHEMA_VERSION,
        rcclfix_version: "0.1.0".into(),
        recipe: r.id().into(),
        rccl_version: r.rccl_version.clone(),
        rocm_release: r.rocm_release.clone(),
        git: r.source.git.clone(),
        tag: r.source.tag.clone(),
        branch: None,
        commit: r.source.commit.clone().unwrap_or_else(|| "0".repeat(40)),
        patches: vec![],
        toolchain: r.toolchain.image.clone().unwrap_or_default(),
        toolchain_id: "sha256:00".into(),
        toolchain_digest: None,
        toolchain_packages: vec![],
        engine: "host".into(),
        targets: vec!["gfx1100".into()],
        ndebug_strategy: "cxx-flags".into(),
        ndebug_on_device_compile: true,
        cmake_args: vec![],
        library: rcclfix::manifest::LibraryRecord {
            file: "librccl.so.1.0".into(),
            soname: "librccl.so.1".into(),
            sha256: "00".into(),
            size: 1,
        },
        build_seconds: 1.0,
        gate: [("gfx1100".to_owned(), gate.to_owned())].into(),
        verify: None,
        patched: None,
        cache: None,
    }
}

/// A scratch checkout holding this repo's containers/ and tests/, plus a record for `r`.
fn scratch_with_record(r: &Recipe, gate: &str, files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root().join("containers"), &dir.path().join("containers"));
    copy_dir(&root().join("tests/it"), &dir.path().join("tests/it"));
    let rec = dir.path().join("recipes/records/t");
    std::fs::create_dir_all(&rec).unwrap();
    for f in files {
        if *f == "manifest.json" {
            manifest_for(r, gate).save(&rec.join(f)).unwrap();
        } else {
            std::fs::write(rec.join(f), "{}").unwrap();
        }
    }
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let dest = to.join(e.path().strip_prefix(from).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

#[test]
fn verified_status_must_be_earned() {
    let verified = |by: &str| {
        edited("2.20.5", |t| {
            t.replace(
                "status = \"expected\"",
                &format!("status = \"verified\"\nverified_by = \"{by}\""),
            )
        })
    };
    let all_files = ["manifest.json", "scan.json", "build.log"];
    let check = |r: &Recipe, dir: &Path| -> CheckReport {
        check_recipe(r, dir, &Lockfile::default(), None)
    };

    // A complete record with a clean gate for this recipe and commit: earned.
    let r = verified("recipes/records/t");
    let dir = scratch_with_record(&r, "clean", &all_files);
    assert_eq!(check(&r, dir.path()).problems, Vec::<String>::new());
    // The gate declared: not earned.
    let dir = scratch_with_record(&r, "declares", &all_files);
    assert!(check(&r, dir.path())
        .problems
        .iter()
        .any(|p| p.contains("not clean")));
    // No build log: not a record.
    let dir = scratch_with_record(&r, "clean", &["manifest.json", "scan.json"]);
    assert!(check(&r, dir.path())
        .problems
        .iter()
        .any(|p| p.contains("build.log is missing")));
    // A record of another recipe.
    let other = recipe("2.18.6");
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("recipes/records/t");
    std::fs::create_dir_all(&rec).unwrap();
    manifest_for(&other, "clean")
        .save(&rec.join("manifest.json"))
        .unwrap();
    std::fs::write(rec.join("scan.json"), "{}").unwrap();
    std::fs::write(rec.join("build.log"), "").unwrap();
    assert!(check(&r, dir.path())
        .problems
        .iter()
        .any(|p| p.contains("is for recipe 2.18.6")));
    // A record of another commit than the pin.
    let mut m = manifest_for(&r, "clean");
    m.commit = "1".repeat(40);
    m.save(&rec.join("manifest.json")).unwrap();
    assert!(check(&r, dir.path())
        .problems
        .iter()
        .any(|p| p.contains("built commit 1111")));
    // A CI test by name: this test exists, a made-up one does not.
    let r = verified("test:verified_status_must_be_earned");
    assert_eq!(
        check(&r, &root())
            .problems
            .iter()
            .filter(|p| p.contains("verified_by"))
            .count(),
        0
    );
    let r = verified("test:no_such_test_anywhere");
    assert!(check(&r, &root())
        .problems
        .iter()
        .any(|p| p.contains("no test `no_such_test_anywhere`")));
    // Elsewhere than records/.
    let r = verified("somewhere/else");
    assert!(check(&r, &root())
        .problems
        .iter()
        .any(|p| p.contains("must be `test:<name>`")));
}

// Mirror-backed checks: real tags of ROCm/rccl, read with git.

#[test]
#[ignore = "needs RCCLFIX_GIT_MIRROR: run with RCCLFIX_GIT_MIRROR=<a git mirror of ROCm/rccl> (cargo xtask test runs ignored tests whose input is there)"]
fn mirror_confirms_pins_versions_and_build_options() {
    let m = crate::support::required_input("RCCLFIX_GIT_MIRROR");
    // The pinned 6.x recipes: the tag resolves to the pin and version.mk states the version.
    for id in ["2.18.3", "2.18.6", "2.20.5"] {
        let r = recipe(id);
        let rep = check_against_mirror(&r, &m, r.source.commit.as_deref());
        assert!(rep.problems.is_empty(), "{id}: {:#?}", rep.problems);
        assert_eq!(rep.mirror_confirmed.len(), 1, "{id}: {rep:#?}");
    }
    // A pin copied from another tag is caught.
    let r = edited("2.18.6", |t| {
        t.replace(
            "2fbe387c0ba012f5734d0df0bb03f36cf3b10eee",
            "2f6d59e2e651914d9d6e51b2b702b9a9ac0ea99d",
        )
    });
    let rep = check_against_mirror(&r, &m, r.source.commit.as_deref());
    assert!(
        rep.problems
            .iter()
            .any(|p| p.contains("is 2fbe387c0ba012f5734d0df0bb03f36cf3b10eee in the mirror")),
        "{rep:#?}"
    );
    // A wrong version is caught by version.mk.
    let r = edited("2.18.6", |t| {
        t.replace("rccl_version = \"2.18.6\"", "rccl_version = \"2.18.5\"")
    });
    let rep = check_against_mirror(&r, &m, r.source.commit.as_deref());
    assert!(
        rep.problems.iter().any(|p| p.contains("ships RCCL 2.18.6")),
        "{rep:#?}"
    );
    // rocm-6.0.x defaults ENABLE_IFC to ON: dropping -DENABLE_IFC=OFF is caught.
    let r = edited("2.18.3", |t| t.replace(", \"-DENABLE_IFC=OFF\"", ""));
    let rep = check_against_mirror(&r, &m, r.source.commit.as_deref());
    assert!(
        rep.problems
            .iter()
            .any(|p| p.contains("ENABLE_IFC defaults to ON")),
        "{rep:#?}"
    );
    // A tag the mirror lacks is a note, not a pass.
    let rep = check_against_mirror(&recipe("2.30.4"), &m, None);
    assert!(
        rep.problems.is_empty() && rep.mirror_confirmed.is_empty() && rep.notes.len() == 1,
        "{rep:#?}"
    );
    // A branch of the same name does not count as the tag.
    let r = edited("2.21.5", |t| {
        t.replace("tag = \"rocm-6.3.4\"", "tag = \"develop\"")
    });
    let rep = check_against_mirror(&r, &m, None);
    assert!(rep.mirror_confirmed.is_empty(), "{rep:#?}");
}

#[test]
fn lockfile_pin_disagreeing_with_recipe_commit_is_reported() {
    let r = recipe("2.20.5");
    let mut lock = Lockfile::default();
    lock.set("2.20.5", "rocm-6.2.2", &"a".repeat(40));
    let p = check_recipe(&r, &root(), &lock, None).problems;
    assert!(
        p.iter()
            .any(|p| p.contains("disagrees with the lockfile pin")),
        "{p:#?}"
    );
}
