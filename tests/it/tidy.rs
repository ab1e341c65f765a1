//! Tidy checks, in the manner of rust-analyzer's `xtask/src/tidy.rs`: the invariants ARCHITECTURE.md
//! states about the source tree itself, each kept by one test here. They read the tracked files of
//! this checkout (`git ls-files`), so they run everywhere the tests run and need nothing installed.
//!
//! Each test names the offending file and line, so a break reads as the rule it broke.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Tracked files (and untracked, not ignored ones, so a new file is checked before its commit),
/// relative to the repository root, with one of `exts`.
fn files(exts: &[&str]) -> Vec<PathBuf> {
    let out = Command::new("git")
        .args([
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "-z",
        ])
        .current_dir(root())
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    let mut v: Vec<PathBuf> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .filter(|p| {
            let name = p.to_string_lossy();
            exts.iter().any(|e| name.ends_with(e))
        })
        .filter(|p| root().join(p).is_file())
        .collect();
    v.sort();
    v
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(root().join(p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The code part of a Rust line: what precedes a `//` that is not inside a string literal
/// (good enough for this tree: no raw strings contain `//` on lines the rules look at).
fn code_part(line: &str) -> &str {
    let mut in_str = false;
    let mut prev = '\0';
    for (i, c) in line.char_indices() {
        match c {
            '"' if prev != '\\' => in_str = !in_str,
            '/' if !in_str && prev == '/' => return &line[..i - 1],
            _ => {}
        }
        prev = if prev == '\\' && c == '\\' { '\0' } else { c };
    }
    line
}

/// Whether a line is in a `#[cfg(test)]` module: everything after the first `#[cfg(test)]` at
/// the start of a line (the house style puts the tests module last), or all of a tests file that
/// says `#![cfg(test)]` under its module doc.
fn test_tail_start(text: &str) -> usize {
    text.lines()
        .position(|l| matches!(l.trim_start(), "#[cfg(test)]" | "#![cfg(test)]"))
        .unwrap_or(usize::MAX)
}

fn report(what: &str, bad: &[String]) {
    assert!(bad.is_empty(), "{what}:\n  {}", bad.join("\n  "));
}

/// Every Rust file opens with a `//!` module doc that says what it is.
#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let mut bad = Vec::new();
    for p in files(&[".rs"]) {
        if !read(&p).starts_with("//!") {
            bad.push(format!(
                "{}: does not open with a `//!` module doc",
                p.display()
            ));
        }
    }
    report("files without a module doc", &bad);
}

/// `unsafe` lives only in the FFI (`src/verify/abi.rs`) and in `src/fsutil.rs` (signal handler,
/// memory map); every `unsafe` block there carries a `SAFETY:` comment within the three lines above.
#[test]
fn unsafe_only_in_the_ffi_and_fsutil() {
    const ALLOWED: &[&str] = &["src/verify/abi.rs", "src/fsutil.rs"];
    let mut bad = Vec::new();
    for p in files(&[".rs"]) {
        let name = p.to_string_lossy().into_owned();
        if !(name.starts_with("src/") || name == "build.rs") {
            continue;
        }
        let text = read(&p);
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = code_part(line);
            let uses = ["unsafe {", "unsafe fn", "unsafe impl", "unsafe extern"]
                .iter()
                .any(|k| code.contains(k));
            if !uses {
                continue;
            }
            if !ALLOWED.contains(&name.as_str()) {
                bad.push(format!("{name}:{}: `unsafe` outside {ALLOWED:?}", i + 1));
            } else if code.contains("unsafe {")
                && !lines[i.saturating_sub(3)..=i]
                    .iter()
                    .any(|l| l.contains("SAFETY:"))
            {
                bad.push(format!(
                    "{name}:{}: `unsafe` block without a SAFETY: note",
                    i + 1
                ));
            }
        }
    }
    report("unsafe outside its rooms", &bad);
}

/// Only `src/container/` spawns a container engine (podman, docker, bubblewrap): everything else
/// describes a run as a `RunSpec` and hands it to an `Engine`.
#[test]
fn only_container_spawns_engines() {
    let mut bad = Vec::new();
    for p in files(&[".rs"]) {
        let name = p.to_string_lossy().into_owned();
        if !name.starts_with("src/") || name.starts_with("src/container/") {
            continue;
        }
        let text = read(&p);
        for (i, line) in text.lines().enumerate() {
            let code = code_part(line);
            for engine in ["\"podman\"", "\"docker\"", "\"bwrap\"", "\"buildah\""] {
                if (code.contains("Command::new(") || code.contains("Cmd::new("))
                    && code.contains(engine)
                {
                    bad.push(format!("{name}:{}: spawns {engine}", i + 1));
                }
            }
        }
    }
    report("engines spawned outside src/container/", &bad);
}

/// No comment or message cites a document that is not in this repository: no path into a
/// `shared/` folder beside the checkout, none of its file names, no case ids; every repository
/// path of our own kinds of file (`.rs`, `.md`, `.toml`, `.patch`, `.hip`, `.json`, `.sh`, `.txt`)
/// that a source or doc names under `src/`, `docs/`, `tests/`, `recipes/`, `patches/`,
/// `containers/` or `xtask/` exists.
#[test]
fn no_citation_outside_the_repository() {
    let foreign = [
        "shared/reference",
        "../shared",
        "reference/formats.md",
        "reference/rccl.md",
        "reference/platform.md",
        "reference/toolchain.md",
        "formats.md §",
        "rccl.md §",
        "platform.md §",
        "toolchain.md §",
    ];
    let mut bad = Vec::new();
    let tree: BTreeSet<String> = files(&[""])
        .into_iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let prefixes = [
        "src/",
        "docs/",
        "tests/",
        "recipes/",
        "patches/",
        "containers/",
        "xtask/",
    ];
    for p in files(&[
        ".rs", ".md", ".toml", ".patch", ".hip", ".cpp", ".c", ".cc", ".sh",
    ]) {
        let name = p.to_string_lossy().into_owned();
        if name == "tests/it/tidy.rs" {
            continue;
        }
        let text = read(&p);
        for (i, line) in text.lines().enumerate() {
            for f in foreign {
                if line.contains(f) {
                    bad.push(format!("{name}:{}: cites `{f}`", i + 1));
                }
            }
            // Case ids of a private collection: "C01" … "C09" as words.
            let b = line.as_bytes();
            for j in 0..b.len().saturating_sub(2) {
                let word_start = j == 0 || !b[j - 1].is_ascii_alphanumeric();
                let word_end = j + 3 >= b.len() || !b[j + 3].is_ascii_alphanumeric();
                if word_start
                    && word_end
                    && b[j] == b'C'
                    && b[j + 1] == b'0'
                    && (b'1'..=b'9').contains(&b[j + 2])
                {
                    bad.push(format!(
                        "{name}:{}: cites case id `{}`",
                        i + 1,
                        &line[j..j + 3]
                    ));
                }
            }
            // Repository paths named in the text must exist.
            for prefix in prefixes {
                let mut rest = line;
                while let Some(k) = rest.find(prefix) {
                    let before = rest[..k].chars().last();
                    let cited: String = rest[k..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
                        .collect();
                    rest = &rest[k + prefix.len()..];
                    // Only paths that stand on their own (`src/x.rs`, not `…/src/x.rs` or a URL),
                    // that name a file with an extension, and that are not placeholders.
                    if matches!(before, Some(c) if c.is_ascii_alphanumeric() || "/._-$".contains(c))
                    {
                        continue;
                    }
                    let cited = cited.trim_end_matches(['.', '/']);
                    // Our own kinds of file only: `src/init.cc` or `src/device/prims_simple.h`
                    // name upstream RCCL files, and `recipes/rcclfix.lock` is optional.
                    let ours = [
                        ".rs", ".md", ".toml", ".patch", ".hip", ".json", ".sh", ".txt",
                    ];
                    if !ours.iter().any(|e| cited.ends_with(e)) || cited.contains("..") {
                        continue;
                    }
                    // A placeholder segment (`containers/NAME/toolchain.toml`) names no file.
                    let placeholder = cited.split('/').any(|seg| {
                        seg.len() > 1 && seg.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    });
                    // Relative to the citing file's folder (a fixtures README naming `src/x.hip`)
                    // counts: some tracked path ends with it.
                    let suffix = format!("/{cited}");
                    if !placeholder
                        && !tree.contains(cited)
                        && !tree.iter().any(|t| t.ends_with(&suffix))
                    {
                        bad.push(format!(
                            "{name}:{}: names `{cited}`, which is not in the repository",
                            i + 1
                        ));
                    }
                }
            }
        }
    }
    report("citations of what is not in the repository", &bad);
}

/// The outputs `tests/fixtures/README.md` lists are exactly the committed fixtures of each suite,
/// and each is an output `xtask/src/fixtures.rs` builds; the same for `tests/fixtures/patch/`.
#[test]
fn the_fixtures_readmes_match_the_xtask() {
    let mut bad = Vec::new();
    let xtask = read(Path::new("xtask/src/fixtures.rs"));
    let readme = read(Path::new("tests/fixtures/README.md"));
    let commands = readme
        .split("## Commands")
        .nth(1)
        .expect("tests/fixtures/README.md has a Commands section");
    for suite in ["trixie", "sid", "rocm7.2"] {
        let mut listed = BTreeSet::new();
        for row in commands.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let suites = cells.get(3).copied().unwrap_or("");
            if suites != "all" && !suites.split(", ").any(|s| s == suite) {
                continue;
            }
            for out in cells[1].split(", ") {
                listed.insert(out.trim_matches('`').to_owned());
            }
        }
        let dir = root().join("tests/fixtures").join(suite);
        let present: BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        for f in listed.difference(&present) {
            bad.push(format!(
                "tests/fixtures/README.md lists {suite}/{f}, which is not committed"
            ));
        }
        for f in present.difference(&listed) {
            bad.push(format!(
                "tests/fixtures/{suite}/{f} is not in tests/fixtures/README.md"
            ));
        }
        for f in &listed {
            if !xtask.contains(&format!("\"{f}\"")) && !xtask.contains(&format!("-o {f}")) {
                bad.push(format!(
                    "{suite}/{f} is listed but xtask/src/fixtures.rs does not build it"
                ));
            }
        }
    }
    let xtask = read(Path::new("xtask/src/fixtures_patch.rs"));
    let readme = read(Path::new("tests/fixtures/patch/README.md"));
    let dir = root().join("tests/fixtures/patch");
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        let f = e.file_name().to_string_lossy().into_owned();
        if f == "README.md" || e.path().is_dir() {
            continue;
        }
        if !readme.contains(&format!("`{f}`")) {
            bad.push(format!(
                "tests/fixtures/patch/{f} is not in tests/fixtures/patch/README.md"
            ));
        }
        if !xtask.contains(&format!("\"{f}\"")) {
            bad.push(format!(
                "tests/fixtures/patch/{f} is not built by xtask/src/fixtures_patch.rs"
            ));
        }
    }
    report("fixtures and their README disagree", &bad);
}

/// Only the command layer (`src/cmd/`), `src/ui.rs` and `src/main.rs` print: domain modules return
/// values and reach the terminal through `ui` (print macros, `dbg!`, or writing to the process's
/// stdout/stderr elsewhere is a break). Test code (`#[cfg(test)]` tails) is exempt.
#[test]
fn only_the_command_layer_and_ui_print() {
    let allowed = |n: &str| n.starts_with("src/cmd/") || n == "src/ui.rs" || n == "src/main.rs";
    let needles = [
        "println!(",
        "eprintln!(",
        "print!(",
        "eprint!(",
        "dbg!(",
        "std::io::stdout()",
        "std::io::stderr()",
        "io::stdout()",
        "io::stderr()",
    ];
    let mut bad = Vec::new();
    for p in files(&[".rs"]) {
        let name = p.to_string_lossy().into_owned();
        if !name.starts_with("src/") || allowed(&name) {
            continue;
        }
        let text = read(&p);
        let tail = test_tail_start(&text);
        for (i, line) in text.lines().enumerate() {
            if i >= tail {
                break;
            }
            let code = code_part(line);
            if let Some(n) = needles.iter().find(|n| code.contains(**n)) {
                bad.push(format!(
                    "{name}:{}: `{n}` outside src/cmd/ and src/ui.rs",
                    i + 1
                ));
            }
        }
    }
    report("printing outside the command layer", &bad);
}

/// The modules a Rust file names as `crate::<module>` in code (comments, doc comments and the
/// tests tail excluded; items of the crate root are not modules).
fn crate_deps(text: &str) -> BTreeSet<String> {
    let tail = test_tail_start(text);
    let mut deps = BTreeSet::new();
    for line in text.lines().take(tail) {
        let code = code_part(line);
        let mut rest = code;
        while let Some(k) = rest.find("crate::") {
            let seg: String = rest[k + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // Items of the crate root (`crate::EXIT_OK`, `crate::CheckFailed`) are no module.
            if seg.starts_with(|c: char| c.is_ascii_lowercase()) {
                deps.insert(seg);
            }
            rest = &rest[k + 7..];
        }
    }
    deps
}

/// Data flows cli → cmd → domain, never back up: no domain module names `crate::cmd` or
/// `crate::cli`; only `cmd/` names `crate::build`; `package/` reads a build folder and never
/// imports `build`; `scan/` uses nothing in the crate but `fsutil` and `ui` (so the scanner can
/// be lifted out whole); `verify/` only `process`, `fsutil`, `paths` and `ui` (its FFI is loaded
/// in a child); `ui` and `process` import no domain module, and `process` not `ui` (it escapes
/// through `escape`, which imports nothing).
#[test]
fn dependencies_point_down_only() {
    let mut bad = Vec::new();
    for p in files(&[".rs"]) {
        let name = p.to_string_lossy().into_owned();
        let Some(rel) = name.strip_prefix("src/") else {
            continue;
        };
        let module = rel.split(['/', '.']).next().unwrap_or("");
        let deps = crate_deps(&read(&p));
        let allowed: Option<&[&str]> = match module {
            "scan" => Some(&["scan", "fsutil", "ui"]),
            "verify" => Some(&["verify", "process", "fsutil", "paths", "ui"]),
            "ui" => Some(&["ui", "escape", "process", "fsutil"]),
            "process" => Some(&["process", "escape", "fsutil"]),
            "escape" => Some(&["escape"]),
            "paths" => Some(&["paths"]),
            _ => None,
        };
        for d in &deps {
            let up = matches!(d.as_str(), "cmd" | "cli")
                && !matches!(module, "cmd" | "cli" | "main" | "lib");
            let build_outside_cmd =
                d == "build" && !matches!(module, "cmd" | "build" | "main" | "lib");
            let outside_allowed = allowed.is_some_and(|a| !a.contains(&d.as_str()));
            if up || build_outside_cmd || outside_allowed {
                bad.push(format!("{name}: uses crate::{d}"));
            }
        }
    }
    report("dependencies pointing the wrong way", &bad);
}

/// The scanner's own modules (`src/scan/<m>.rs` with its folder) that a file of module `m`
/// names in code: `super::<x>` and `use super::{<x>, …}` in `src/scan/<m>.rs`, and
/// `crate::scan::<x>` anywhere (comments and the tests tail excluded).
fn scan_deps(text: &str, top_level: bool) -> BTreeSet<String> {
    let tail = test_tail_start(text);
    let code: String = text
        .lines()
        .take(tail)
        .map(code_part)
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut deps = BTreeSet::new();
    let mut prefixes = vec!["crate::scan::"];
    if top_level {
        prefixes.push("super::");
    }
    for pre in prefixes {
        let mut rest = code.as_str();
        while let Some(k) = rest.find(pre) {
            rest = &rest[k + pre.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use super::{a, b::{c, d}, E}`: the first segment of each top-level item.
                let (mut depth, mut item_start, mut end) = (0, 0, group.len());
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            end = i;
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            deps.insert(ident(&group[item_start..i]));
                            item_start = i + 1;
                        }
                        _ => {}
                    }
                }
                deps.insert(ident(&group[item_start..end]));
            } else {
                deps.insert(ident(rest));
            }
        }
    }
    deps.retain(|d| d.starts_with(|c: char| c.is_ascii_lowercase()) && d != "self");
    deps
}

/// The scanner's modules import one another without a circle (issue 23): each reads the stages
/// below it (bundle, ccob, stream → walk → input), never one that reads it.
#[test]
fn scan_modules_import_one_another_without_a_circle() {
    let mut graph: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for p in files(&[".rs"]) {
        let name = p.to_string_lossy().into_owned();
        let Some(rel) = name.strip_prefix("src/scan/") else {
            continue;
        };
        let module = rel.split(['/', '.']).next().unwrap_or("").to_owned();
        if module == "mod" {
            continue;
        }
        let deps = scan_deps(&read(&p), !rel.contains('/'));
        graph.entry(module).or_default().extend(deps);
    }
    let names: BTreeSet<String> = graph.keys().cloned().collect();
    for (m, d) in graph.iter_mut() {
        d.retain(|x| names.contains(x) && x != m);
    }
    assert!(
        graph["walk"].contains("ccob"),
        "the dependency reader is blind: {graph:?}"
    );
    // Depth-first search for a cycle; report the first one found as a path.
    fn visit(
        m: &str,
        graph: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c = path[i..].to_vec();
            c.push(m.to_owned());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_owned());
        for d in &graph[m] {
            if let Some(c) = visit(d, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        if let Some(c) = visit(m, &graph, &mut Vec::new(), &mut done) {
            panic!("scan modules import in a circle: {}", c.join(" → "));
        }
    }
}

/// A test whose input is missing never passes silently: outside `support.rs`'s slow gate, no
/// `tests/it` file returns (or skips a case) right after printing "skipped", or right after
/// finding an environment variable unset; such a test is `#[ignore = "needs VAR: …"]` instead, and
/// every one of those is listed in `xtask/src/test.rs`'s `IGNORED_TESTS`, which runs it when
/// `VAR` is set.
#[test]
fn no_test_passes_without_its_input() {
    let xtask = read(Path::new("xtask/src/test.rs"));
    let mut bad = Vec::new();
    for p in files(&[".rs"]) {
        let Ok(rest) = p.strip_prefix("tests/it") else {
            continue;
        };
        if rest == Path::new("support.rs") || rest == Path::new("tidy.rs") {
            continue;
        }
        let module = rest.with_extension("").to_string_lossy().replace('/', "::");
        let text = read(&p);
        let raw: Vec<&str> = text.lines().collect();
        let lines: Vec<&str> = raw.iter().map(|l| code_part(l)).collect();
        for (i, l) in lines.iter().enumerate() {
            // Allowed: the slow gate's own form, which asserts `!slow` just before the skip
            // (under RCCLFIX_SLOW_TESTS=1 the missing prerequisite fails), or a skip that says
            // why in a `tidy: skip allowed` comment.
            let before = &raw[i.saturating_sub(8)..i];
            if before.iter().any(|b| {
                b.trim_start().starts_with("!slow")
                    || b.contains("assert!(!slow")
                    || b.contains("tidy: skip allowed")
            }) {
                continue;
            }
            let skip_note = l.contains("eprintln!(")
                && lines[i..lines.len().min(i + 3)]
                    .iter()
                    .any(|n| n.contains("skipped"));
            let unset_var = l.contains("var_os(") && l.contains("else");
            if !(skip_note || unset_var) {
                continue;
            }
            let early = lines[i + 1..lines.len().min(i + 5)].iter().any(|n| {
                let t = n.trim();
                t.starts_with("return") || t.starts_with("continue")
            });
            if early {
                bad.push(format!(
                    "{}:{}: returns early when its input is missing",
                    p.display(),
                    i + 1
                ));
            }
        }
        let mut pending_ignore = false;
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim();
            if t.starts_with("#[ignore") {
                pending_ignore = true;
                if !t.contains("needs ") {
                    bad.push(format!(
                        "{}:{}: an #[ignore] that names no input (`needs VAR: …`)",
                        p.display(),
                        i + 1
                    ));
                }
            } else if pending_ignore && t.starts_with("fn ") {
                let name = t["fn ".len()..].split('(').next().unwrap_or("");
                let full = format!("\"{module}::{name}\"");
                if !xtask.contains(&full) {
                    bad.push(format!("{}:{}: ignored test {module}::{name} is not in xtask/src/test.rs's IGNORED_TESTS", p.display(), i + 1));
                }
                pending_ignore = false;
            }
        }
    }
    report("tests that pass without their input", &bad);
}

/// README is for a newcomer: no line over 300 characters (depth goes to `docs/`), the Rust
/// version it asks for is `Cargo.toml`'s `rust-version`, and every `docs/` page it links exists.
#[test]
fn the_readme_fits_a_newcomer() {
    let readme = read(Path::new("README.md"));
    let mut bad = vec![];
    for (i, l) in readme.lines().enumerate() {
        if l.chars().count() > 300 {
            bad.push(format!(
                "README.md:{}: {} characters (move the depth to docs/)",
                i + 1,
                l.chars().count()
            ));
        }
    }
    let cargo = read(Path::new("Cargo.toml"));
    let rust = cargo
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("Cargo.toml has a rust-version")
        .trim_matches('"');
    if !readme.contains(&format!("Rust {rust} or newer")) {
        bad.push(format!(
            "README.md does not say \"Rust {rust} or newer\" (Cargo.toml's rust-version)"
        ));
    }
    for link in readme.split("](docs/").skip(1) {
        let page = link.split([')', '#']).next().unwrap_or("");
        if !root().join("docs").join(page).is_file() {
            bad.push(format!("README.md links docs/{page}, which does not exist"));
        }
    }
    report("README", &bad);
}

/// The sentences of one line of prose: each ends at `. `, `? `, `! ` or the end of the line,
/// outside backticks (a `.` inside `` `a. b` `` ends nothing).
fn sentences(line: &str) -> Vec<&str> {
    let mut out = vec![];
    let mut start = 0;
    let mut code = false;
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '`' => code = !code,
            '.' | '?' | '!' if !code && matches!(chars.peek(), Some((_, ' '))) => {
                out.push(line[start..=i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(line[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

/// ARCHITECTURE.md is a map a reader holds in mind, so its prose says one fact a sentence: no
/// sentence is over 450 characters. A sentence ends at `. `, `? `, `! ` or the end of a line,
/// outside backticks; code blocks and table rows are not prose. A break names each line and the
/// length of each sentence over the limit.
#[test]
fn architecture_sentences_a_reader_can_hold() {
    const LIMIT: usize = 450;
    let text = read(Path::new("ARCHITECTURE.md"));
    let mut bad = vec![];
    let mut fence = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence || t.starts_with('|') {
            continue;
        }
        for s in sentences(line) {
            let n = s.chars().count();
            if n > LIMIT {
                let head: String = s.chars().take(60).collect();
                bad.push(format!(
                    "ARCHITECTURE.md:{}: a sentence of {n} characters (limit {LIMIT}), \
                     split it along its facts: {head}…",
                    i + 1
                ));
            }
        }
    }
    report("ARCHITECTURE.md sentences too long to hold", &bad);
}

/// The files still over their limit, each with its length when this check came (issue 41): it
/// may shrink, never grow, and leaves this list once split.
const OVER_THE_LIMIT: &[(&str, usize)] = &[];

/// No source file over 800 lines (`src/`, `xtask/`) and no test file over 1,000 (`tests/`):
/// a longer file is split along the data's stages. [`OVER_THE_LIMIT`] lists the ones not split
/// yet, each held to its length.
#[test]
fn no_rust_file_over_its_line_limit() {
    let mut bad = vec![];
    for p in files(&[".rs"]) {
        let name = p.to_string_lossy().into_owned();
        let limit = if name.starts_with("src/") || name.starts_with("xtask/") {
            800
        } else if name.starts_with("tests/") {
            1000
        } else {
            continue;
        };
        let n = read(&p).lines().count();
        let allowed = OVER_THE_LIMIT
            .iter()
            .find(|(f, _)| *f == name)
            .map_or(limit, |&(_, n)| n.max(limit));
        if n > allowed {
            bad.push(format!(
                "{name}: {n} lines (limit {allowed}): split it along the data's stages"
            ));
        }
    }
    for (f, _) in OVER_THE_LIMIT {
        if !root().join(f).is_file() {
            bad.push(format!(
                "{f} is listed in OVER_THE_LIMIT but does not exist"
            ));
        }
    }
    report("files over their line limit", &bad);
}

/// The module path of a file under `base` (`src/doctor/vm.rs` → `["doctor", "vm"]`; `mod.rs`,
/// `lib.rs` and `main.rs` name their folder).
fn module_path(rel: &str) -> Vec<String> {
    let mut segs: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(
        segs.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segs.pop();
    }
    segs
}

/// The paths a file names in code as `crate::…` or `super::…` (chains of `super` resolved,
/// `use …::{a, b::c}` groups expanded), relative to the crate root; comments and the tests tail
/// excluded.
fn named_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let tail = test_tail_start(text);
    let code: String = text
        .lines()
        .take(tail)
        .map(code_part)
        .collect::<Vec<_>>()
        .join("\n");
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let path_at = |s: &str| -> Vec<String> {
        let mut out = vec![];
        let mut rest = s.trim_start();
        loop {
            let id: String = rest.chars().take_while(|c| is_ident(*c)).collect();
            if id.is_empty() {
                break;
            }
            rest = &rest[id.len()..];
            out.push(id);
            match rest.strip_prefix("::") {
                Some(r) if r.starts_with(is_ident) => rest = r,
                _ => break,
            }
        }
        out
    };
    let mut found = vec![];
    let b = code.as_bytes();
    for (k, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        if k > 0 && (is_ident(b[k - 1] as char) || b[k - 1] == b':') {
            continue;
        }
        let mut base: Vec<String> = if code[k..].starts_with("crate::") {
            vec![]
        } else {
            module[..module.len().saturating_sub(1)].to_vec()
        };
        let mut rest = &code[k + code[k..].find("::").unwrap() + 2..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut start) = (0, 0);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.push([base.clone(), path_at(&group[start..i])].concat());
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push([base.clone(), path_at(&group[start..i])].concat());
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            found.push([base, path_at(rest)].concat());
        }
    }
    found
}

/// Sibling modules import one another without a circle, in the whole crate and in the xtask
/// (issue 41): an edge `a → b` between two files becomes one between the children of their
/// common ancestor, and every strongly connected set of those is a circle, reported as its
/// modules sorted and joined with ` ↔ `.
#[test]
fn no_module_imports_in_a_circle() {
    use std::collections::BTreeMap;
    let mut circles = BTreeSet::new();
    for base in ["src/", "xtask/src/"] {
        let mods: BTreeMap<Vec<String>, String> = files(&[".rs"])
            .into_iter()
            .filter_map(|p| {
                let name = p.to_string_lossy().into_owned();
                let rel = name.strip_prefix(base)?.to_owned();
                Some((module_path(&rel), name))
            })
            .collect();
        let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (m, file) in &mods {
            for path in named_paths(&read(Path::new(file)), m) {
                // The longest prefix that is a module of its own file.
                let Some(target) = (1..=path.len())
                    .rev()
                    .map(|n| path[..n].to_vec())
                    .find(|t| mods.contains_key(t))
                else {
                    continue;
                };
                let common = m.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if common < m.len() && common < target.len() {
                    graph
                        .entry(m[..=common].to_vec())
                        .or_default()
                        .insert(target[..=common].to_vec());
                }
            }
        }
        // Tarjan's strongly connected components.
        #[derive(Default)]
        struct Scc {
            index: BTreeMap<Vec<String>, usize>,
            low: BTreeMap<Vec<String>, usize>,
            stack: Vec<Vec<String>>,
            found: Vec<Vec<Vec<String>>>,
        }
        fn strong(v: &Vec<String>, g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>, s: &mut Scc) {
            let i = s.index.len();
            s.index.insert(v.clone(), i);
            s.low.insert(v.clone(), i);
            s.stack.push(v.clone());
            for w in g.get(v).into_iter().flatten() {
                if !s.index.contains_key(w) {
                    strong(w, g, s);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if s.stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if s.low[v] == s.index[v] {
                let at = s.stack.iter().position(|x| x == v).unwrap();
                let comp = s.stack.split_off(at);
                if comp.len() > 1 {
                    s.found.push(comp);
                }
            }
        }
        let mut s = Scc::default();
        for v in graph.keys() {
            if !s.index.contains_key(v) {
                strong(v, &graph, &mut s);
            }
        }
        assert!(
            graph
                .get(&vec!["scan".to_owned()])
                .is_some_and(|d| d.contains(&vec!["fsutil".to_owned()]))
                || base == "xtask/src/",
            "the import reader is blind: {graph:?}"
        );
        for comp in s.found {
            let mut names: Vec<String> = comp.iter().map(|m| m.join("::")).collect();
            names.sort();
            let prefix = if base == "src/" { "" } else { "xtask: " };
            circles.insert(format!("{prefix}{}", names.join(" ↔ ")));
        }
    }
    let bad: Vec<String> = circles
        .iter()
        .map(|c| format!("modules import in a circle: {c}"))
        .collect();
    report("import circles", &bad);
}
