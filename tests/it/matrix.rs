//! `rcclfix matrix`: the table and the GitHub Actions JSON from the real binary, the status and
//! target options, `--check`, the experimental guard for `build`, and the round trip into
//! `.github/workflows/rcclfix.yml`: every `matrix.<key>` the workflow reads exists in every entry,
//! and actionlint validates the workflow both as committed and with the matrix the binary computes
//! substituted for `fromJSON(needs.plan.outputs.matrix)` (so actionlint type-checks each key).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use rcclfix::matrix::{require_experimental_ok, MatrixEntry};
use rcclfix::recipe::{embedded, Status};
use serde_json::Value;

use super::recipes::{ci_tool, root};

const WORKFLOW: &str = ".github/workflows/rcclfix.yml";
const FROM_JSON: &str = "${{ fromJSON(needs.plan.outputs.matrix) }}";

fn rcclfix(args: &[&str]) -> Output {
    crate::support::rcclfix()
        .args(args)
        .current_dir(root())
        .env_remove("RCCLFIX_GIT_MIRROR")
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// `rcclfix matrix --json ARGS`, parsed; asserts exit 0, one line, and the `{"include":[…]}` shape.
fn matrix_json(args: &[&str]) -> Vec<MatrixEntry> {
    let mut a = vec!["matrix", "--json"];
    a.extend_from_slice(args);
    let o = rcclfix(&a);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert_eq!(
        text.lines().count(),
        1,
        "the JSON must be one line for $GITHUB_OUTPUT"
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    let obj = v.as_object().unwrap();
    assert_eq!(obj.keys().collect::<Vec<_>>(), ["include"]);
    serde_json::from_value(v["include"].clone()).unwrap()
}

/// The keys every entry carries, read from the JSON itself (not from the struct).
fn entry_keys(args: &[&str]) -> Vec<BTreeSet<String>> {
    let mut a = vec!["matrix", "--json"];
    a.extend_from_slice(args);
    let v: Value = serde_json::from_str(&stdout(&rcclfix(&a))).unwrap();
    v["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_object().unwrap().keys().cloned().collect())
        .collect()
}

#[test]
fn default_matrix_has_one_entry_per_buildable_recipe_and_target() {
    let all = embedded().unwrap();
    let entries = matrix_json(&[]);
    let want: usize = all
        .values()
        .filter(|r| r.status != Status::UnfixableByRebuild)
        .map(|r| r.build.targets.len())
        .sum();
    assert_eq!(entries.len(), want);
    for e in &entries {
        let r = &all[&e.recipe];
        assert_eq!(e.rccl, r.rccl_version);
        assert_eq!(e.rocm, r.rocm_release);
        assert_eq!(e.status, r.status.as_str());
        assert_eq!(e.experimental, r.status == Status::Experimental);
        assert_eq!(e.image, r.toolchain.image.clone().unwrap_or_default());
        assert_eq!(
            e.containerfile,
            r.toolchain.containerfile.clone().unwrap_or_default()
        );
        assert!(
            !e.targets.contains(','),
            "one target per entry by default: {}",
            e.targets
        );
        assert!(r.build.targets.contains(&e.targets));
    }
    let artifacts: BTreeSet<&str> = entries.iter().map(|e| e.artifact.as_str()).collect();
    assert_eq!(
        artifacts.len(),
        entries.len(),
        "artifact names must be unique"
    );
    // Every entry has every key, so any matrix.<key> the workflow reads is defined for every job.
    let keys = entry_keys(&[]);
    assert!(keys.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn targets_split_into_entries_or_join() {
    let split = matrix_json(&["--status", "expected", "--targets", "gfx1100,gfx1201"]);
    let joined = matrix_json(&[
        "--status",
        "expected",
        "--targets",
        "gfx1100,gfx1201",
        "--joined",
    ]);
    assert_eq!(split.len(), 2 * joined.len());
    assert!(joined
        .iter()
        .all(|e| e.targets == "gfx1100,gfx1201" && e.artifact.ends_with("-gfx1100_gfx1201")));
    assert!(split.iter().filter(|e| e.targets == "gfx1201").count() == joined.len());
    // Repeated targets are built once.
    assert_eq!(
        matrix_json(&["--status", "expected", "--targets", "gfx1100,gfx1100"]).len(),
        joined.len()
    );
}

#[test]
fn status_filter_selects() {
    let exp = matrix_json(&["--status", "experimental"]);
    assert!(
        !exp.is_empty()
            && exp
                .iter()
                .all(|e| e.status == "experimental" && e.experimental)
    );
    let all = matrix_json(&["--status", "all"]);
    assert!(all.iter().any(|e| e.status == "unfixable-by-rebuild"));
    assert!(!matrix_json(&[])
        .iter()
        .any(|e| e.status == "unfixable-by-rebuild"));
    let two = matrix_json(&["--status", "expected,experimental"]);
    assert_eq!(
        two.len(),
        all.iter()
            .filter(|e| e.status == "expected" || e.status == "experimental")
            .count()
    );
}

/// A status no embedded recipe has (`--status` with it must fail), if any is left.
fn empty_status() -> Option<&'static str> {
    let all = embedded().unwrap();
    [
        Status::Verified,
        Status::Expected,
        Status::Experimental,
        Status::UnfixableByRebuild,
    ]
    .into_iter()
    .find(|s| !all.values().any(|r| r.status == *s))
    .map(Status::as_str)
}

#[test]
fn bad_options_fail_with_one_clear_line() {
    for (args, want) in [
        (
            vec!["matrix", "--status", "proven"],
            "unknown status \"proven\"",
        ),
        (
            vec!["matrix", "--json", "--targets", "gfx11-generic"],
            "not an explicit gfx target",
        ),
        (
            vec!["matrix", "--json", "--targets", "sm_90"],
            "not an explicit gfx target",
        ),
    ]
    .into_iter()
    .chain(empty_status().map(|st| {
        (
            vec!["matrix", "--json", "--status", st],
            "no recipe has the selected status",
        )
    })) {
        let o = rcclfix(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        assert!(
            stdout(&o).is_empty(),
            "{args:?}: nothing on stdout on error"
        );
    }
}

#[test]
fn table_lists_recipes_and_reasons() {
    let o = rcclfix(&["matrix", "--status", "all"]);
    assert!(o.status.success());
    let t = stdout(&o);
    let header = t.lines().next().unwrap();
    for col in [
        "RECIPE",
        "ROCM",
        "RCCL",
        "STATUS",
        "NDEBUG",
        "PIPELINE",
        "TARGETS",
        "TOOLCHAIN",
    ] {
        assert!(header.contains(col), "{header}");
    }
    for r in embedded().unwrap().values() {
        assert!(
            t.lines()
                .any(|l| l.split_whitespace().next() == Some(r.id())),
            "{} missing:\n{t}",
            r.id()
        );
        if let Some(reason) = &r.status_reason {
            assert!(t.contains(reason.as_str()), "reason of {} missing", r.id());
        }
    }
    // The default table hides unfixable recipes and says so on stderr.
    let o = rcclfix(&["matrix"]);
    assert!(!stdout(&o).contains("unfixable-by-rebuild"));
    assert!(stderr(&o).contains("--status all"));
}

#[test]
fn check_cli_reports_problems_with_exit_1() {
    let o = rcclfix(&["matrix", "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    // A checkout without containers/: every image recipe is reported, one line each, exit 1.
    let dir = tempfile::tempdir().unwrap();
    let o = rcclfix(&["matrix", "--check", "--root", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let images = embedded()
        .unwrap()
        .values()
        .filter(|r| r.toolchain.image.is_some())
        .count();
    assert!(
        stdout(&o)
            .lines()
            .filter(|l| l.contains("toolchain.containerfile"))
            .count()
            == images,
        "{}",
        stdout(&o)
    );
}

#[test]
fn experimental_recipes_need_the_flag() {
    let all = embedded().unwrap();
    for r in all.values() {
        match r.status {
            Status::Verified | Status::Expected => {
                require_experimental_ok(r, false).unwrap();
            }
            Status::Experimental | Status::UnfixableByRebuild => {
                let e = format!("{:#}", require_experimental_ok(r, false).unwrap_err());
                assert!(
                    e.contains(r.id()) && e.contains(r.status_reason.as_deref().unwrap()),
                    "{e}"
                );
                assert!(e.contains("help: "), "{e}");
                require_experimental_ok(r, true).unwrap();
            }
        }
    }
}

/// Every `matrix.<key>` expression in `text`.
fn matrix_keys_read(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(pos) = text[i..].find("matrix.") {
        let start = i + pos;
        let before_ok = start == 0
            || !(b[start - 1].is_ascii_alphanumeric()
                || b[start - 1] == b'_'
                || b[start - 1] == b'.');
        let key: String = text[start + 7..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        if before_ok && !key.is_empty() {
            out.insert(key);
        }
        i = start + 7;
    }
    out
}

#[test]
fn workflow_reads_only_keys_the_matrix_has() {
    let text = std::fs::read_to_string(root().join(WORKFLOW)).unwrap();
    // The workflow computes the matrix with rcclfix and feeds it to both matrix jobs.
    assert!(
        text.contains("rcclfix matrix --json"),
        "the plan job must run `rcclfix matrix --json`"
    );
    assert_eq!(
        text.matches(FROM_JSON).count(),
        2,
        "build and verify take the matrix from the plan job"
    );
    let read = matrix_keys_read(&text);
    for key in ["recipe", "targets", "image", "experimental", "artifact"] {
        assert!(
            read.contains(key),
            "the workflow no longer reads matrix.{key}: {read:?}"
        );
    }
    for keys in entry_keys(&["--status", "all"]) {
        let missing: Vec<&String> = read.difference(&keys).collect();
        assert!(
            missing.is_empty(),
            "the workflow reads matrix keys no entry has: {missing:?}"
        );
    }
    // The scanner for keys does find a key that does not exist (a negative control of the check).
    let bad = matrix_keys_read("x: ${{ matrix.no_such_key }} ${{ notmatrix.x }}");
    assert_eq!(bad.into_iter().collect::<Vec<_>>(), ["no_such_key"]);
}

fn actionlint(bin: &Path, repo: &Path, file: &str) -> (bool, String) {
    let o = Command::new(bin)
        .args(["-no-color", "-config-file", ".github/actionlint.yaml", file])
        .current_dir(repo)
        .output()
        .unwrap();
    (o.status.success(), format!("{}{}", stdout(&o), stderr(&o)))
}

#[test]
fn workflow_passes_actionlint_with_the_computed_matrix() {
    let Some(bin) = ci_tool("actionlint") else {
        return;
    };
    // As committed (actionlint also runs shellcheck on the run: scripts when it is on PATH).
    let (ok, out) = actionlint(&bin, &root(), WORKFLOW);
    assert!(ok, "actionlint {WORKFLOW}:\n{out}");

    // With the computed matrix in place of fromJSON(...): actionlint then checks every matrix.<key>
    // expression against the entries' real keys and value types.
    let text = std::fs::read_to_string(root().join(WORKFLOW)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".github/workflows")).unwrap();
    std::fs::copy(
        root().join(".github/actionlint.yaml"),
        dir.path().join(".github/actionlint.yaml"),
    )
    .unwrap();
    for args in [
        vec!["--status", "all"],
        vec!["--targets", "gfx1100,gfx1201", "--joined"],
    ] {
        let mut a = vec!["matrix", "--json"];
        a.extend_from_slice(&args);
        let json = stdout(&rcclfix(&a));
        let sub = text.replace(FROM_JSON, json.trim());
        std::fs::write(dir.path().join(".github/workflows/sub.yml"), &sub).unwrap();
        let (ok, out) = actionlint(&bin, dir.path(), ".github/workflows/sub.yml");
        assert!(ok, "actionlint with the matrix of {args:?}:\n{out}");

        // Negative control: a key the matrix lacks is caught by the same run.
        let neg = sub.replacen("${{ matrix.recipe }}", "${{ matrix.no_such_key }}", 1);
        std::fs::write(dir.path().join(".github/workflows/neg.yml"), &neg).unwrap();
        let (ok, out) = actionlint(&bin, dir.path(), ".github/workflows/neg.yml");
        assert!(
            !ok && out.contains("no_such_key"),
            "actionlint missed an undefined matrix key:\n{out}"
        );
        std::fs::remove_file(dir.path().join(".github/workflows/neg.yml")).unwrap();
    }
}

/// The rcclfix flags the workflow passes, per subcommand: each must appear in the workflow and in
/// that subcommand's `--help`, so a renamed flag breaks this test rather than the CI run.
const WORKFLOW_FLAGS: &[(&str, &[&str])] = &[
    ("matrix", &["--json", "--status", "--targets", "--check"]),
    ("toolchain build", &[]),
    (
        "build",
        &[
            "--tag",
            "--targets",
            "--out-dir",
            "--experimental",
            "--engine",
        ],
    ),
    ("scan", &["--target"]),
    ("package", &["--from", "--format", "--out-dir"]),
    (
        "verify",
        &["--lib", "--runtime", "--gpus", "--mode", "--json"],
    ),
];

#[test]
fn workflow_uses_only_flags_rcclfix_has() {
    let text = std::fs::read_to_string(root().join(WORKFLOW)).unwrap();
    for (sub, flags) in WORKFLOW_FLAGS {
        let mut args: Vec<&str> = sub.split(' ').collect();
        args.push("--help");
        let o = rcclfix(&args);
        assert!(o.status.success(), "rcclfix {sub} --help: {}", stderr(&o));
        let help = stdout(&o);
        for f in *flags {
            assert!(
                text.contains(f),
                "the workflow no longer passes {f} to rcclfix {sub}: update WORKFLOW_FLAGS"
            );
            let listed = help.lines().any(|l| {
                l.split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[' || c == '<')
                    .any(|w| w == *f)
            });
            assert!(
                listed,
                "the workflow passes {f} to rcclfix {sub}, which has no such flag:\n{help}"
            );
        }
    }
}
