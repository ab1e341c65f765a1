//! `cargo xtask bench-build [--bin PATH] [--engine E] [--runs N]`: `rcclfix build`'s overhead
//! against bare `cmake` + `ninja` in the same toolchain (issue 15's target: within 3 %), on our
//! miniature HIP project `tests/data/minihip`.
//!
//! Needs the debian-trixie toolchain (`cargo xtask toolchain`). In a scratch `RCCLFIX_HOME` (its
//! `toolchains` linked to the real one) it makes minihip a git repository with tag `v0.1.0` and a
//! recipe for it, then, `--runs` times (default 3) side by side:
//! 1. `rcclfix build --rebuild` (the whole command: fetch, fresh checkout, patches, configure,
//!    checks, ninja, scan gate, output folder);
//! 2. bare: the same patched checkout `rcclfix` prepared, copied once, configured with the same
//!    CMake arguments and built by ninja with its default `-j`, through
//!    `rcclfix toolchain run --volume` (the same engine invocation `build` uses), fresh build folder
//!    each run;
//! 3. a no-op `rcclfix build` (the artifact cache answers).
//!
//! Prints each run and the medians; fails when the median overhead is 3 % or more or the no-op
//! build takes 2 s or more.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use xshell::{cmd, Shell};

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    let mut bin: Option<PathBuf> = None;
    let mut engine = "bubblewrap".to_owned();
    let mut runs = 3usize;
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .with_context(|| format!("{a} needs a value"))
        };
        match a.as_str() {
            "--bin" => bin = Some(val()?.into()),
            "--engine" => engine = val()?,
            "--runs" => runs = val()?.parse().context("--runs")?,
            _ => bail!(
                "unknown argument {a:?}; usage: bench-build [--bin PATH] [--engine E] [--runs N]"
            ),
        }
    }
    let root = crate::project_root();
    let bin = match bin {
        Some(b) => b,
        None => {
            cmd!(sh, "cargo build --release --quiet --bin rcclfix").run()?;
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"));
            target.join("release/rcclfix")
        }
    };
    let toolchains = std::env::var_os("RCCLFIX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/rcclfix")
        })
        .join("toolchains");
    if !toolchains.join("debian-trixie/stamp.json").exists() {
        bail!(
            "the debian-trixie toolchain is not built in {}\nhelp: cargo xtask toolchain",
            toolchains.display()
        );
    }
    let tmp = sh.create_temp_dir()?;
    let t = tmp.path();
    let home = t.join("home");
    sh.create_dir(&home)?;
    std::os::unix::fs::symlink(&toolchains, home.join("toolchains"))?;
    let repo = t.join("minihip");
    copy_tree(&root.join("tests/data/minihip"), &repo)?;
    {
        let _d = sh.push_dir(&repo);
        let g = [
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@rcclfix.invalid",
        ];
        cmd!(sh, "git init -q").run()?;
        cmd!(sh, "git add -A").run()?;
        cmd!(sh, "git {g...} commit -q -m minihip").run()?;
        cmd!(sh, "git {g...} tag -a v0.1.0 -m v0.1.0").run()?;
    }
    let commit = {
        let _d = sh.push_dir(&repo);
        cmd!(sh, "git rev-parse HEAD").read()?
    };
    let recipe = t.join("minihip.toml");
    std::fs::write(
        &recipe,
        format!(
            r#"rccl_version = "0.1.0"
name = "minihip"
rocm_release = "0.0.0"
status = "expected"

[source]
git = "{}"
tag = "v0.1.0"
commit = "{commit}"

[toolchain]
name = "debian-trixie"
cxx = "/usr/bin/hipcc"
rocm_path = "/usr"

[build]
targets = ["gfx1100"]
ndebug = "compile-definition"
link_ram_gib = 0.5
"#,
            repo.display()
        ),
    )?;
    let out = t.join("out");
    let _env = sh.push_env("RCCLFIX_HOME", &home);
    let rcclfix_build = |extra: &[&str]| -> anyhow::Result<f64> {
        let t0 = Instant::now();
        cmd!(
            sh,
            "{bin} build --recipe {recipe} --out-dir {out} --engine {engine} {extra...}"
        )
        .quiet()
        .ignore_stderr()
        .read()?;
        Ok(t0.elapsed().as_secs_f64())
    };
    // Warm-up: the source cache, the engine's page cache, and the checkout the bare runs copy.
    rcclfix_build(&["--rebuild"])?;
    let manifest = std::fs::read_to_string(out.join("rccl-0.1.0-gfx1100/manifest.json"))?;
    let cmake_args = json_string_array(&manifest, "cmake_args")?;
    let cmake_args = &cmake_args;
    let bare = t.join("bare");
    std::fs::create_dir_all(&bare)?;
    copy_tree(&home.join("work/minihip-gfx1100/src"), &bare.join("src"))?;
    let mut ours = vec![];
    let mut theirs = vec![];
    let mut noop = vec![];
    for i in 0..runs {
        let a = rcclfix_build(&["--rebuild"])?;
        let build = bare.join("build");
        if build.exists() {
            std::fs::remove_dir_all(&build)?;
        }
        std::fs::create_dir_all(&build)?;
        let src_v = format!("{}:/src", bare.join("src").display());
        let build_v = format!("{}:/build", build.display());
        let t0 = Instant::now();
        {
            let _d = sh.push_dir(&bare);
            cmd!(sh, "{bin} toolchain run debian-trixie --engine {engine} --volume {src_v} --volume {build_v} -- cmake {cmake_args...}").quiet().ignore_stdout().ignore_stderr().run()?;
            cmd!(sh, "{bin} toolchain run debian-trixie --engine {engine} --volume {src_v} --volume {build_v} -- ninja -C /build").quiet().ignore_stdout().ignore_stderr().run()?;
        }
        let b = t0.elapsed().as_secs_f64();
        let n = rcclfix_build(&[])?;
        println!(
            "run {}: rcclfix build {a:.2} s, bare cmake+ninja {b:.2} s ({:+.1} %), no-op rcclfix build {n:.3} s",
            i + 1,
            (a / b - 1.0) * 100.0
        );
        ours.push(a);
        theirs.push(b);
        noop.push(n);
    }
    let (a, b, n) = (median(&mut ours), median(&mut theirs), median(&mut noop));
    let over = (a / b - 1.0) * 100.0;
    println!("median of {runs}: rcclfix build {a:.2} s, bare {b:.2} s, overhead {over:+.1} % (target < 3 %); no-op rebuild {n:.3} s (target < 2 s); engine {engine}");
    let mut failed = vec![];
    if over >= 3.0 {
        failed.push(format!("overhead {over:.1} %"));
    }
    if n >= 2.0 {
        failed.push(format!("no-op rebuild {n:.2} s"));
    }
    if !failed.is_empty() {
        bail!("bench-build targets missed: {}", failed.join(", "));
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The string array `"key": [ ... ]` of a pretty-printed JSON object (manifest.json), without a
/// JSON crate in xtask: one string per line, as `serde_json::to_string_pretty` writes it.
fn json_string_array(text: &str, key: &str) -> anyhow::Result<Vec<String>> {
    let start = text
        .find(&format!("\"{key}\": ["))
        .with_context(|| format!("manifest.json has no {key}"))?;
    let body = &text[start..];
    let end = body.find(']').context("unterminated array")?;
    let mut out = vec![];
    for l in body[..end].lines().skip(1) {
        let l = l.trim().trim_end_matches(',');
        if let Some(s) = l.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
            out.push(s.replace("\\\"", "\"").replace("\\\\", "\\"));
        }
    }
    Ok(out)
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()?;
    if !status.success() {
        bail!("cp -a {} {} failed", from.display(), to.display());
    }
    Ok(())
}
