//! Measuring a build, for `bench-build` and its `--slow` RCCL variant: an `rcclfix build` run
//! with its phases timed from the status lines, a bare cmake + ninja run, and the small helpers
//! both benches share (median, load average, copying the miniature project, a JSON string list).

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context};
use xshell::{cmd, Shell};

/// One `rcclfix -v build`, cut into phases by when its stderr lines arrived (seconds):
/// - `fetch`: from the start to the first command of the checkout (`git clone`/`git init` into
///   the work folder): process start, recipe, `git ls-remote`, the cache lookup;
/// - `checkout`: to the first line after the checkout's `git status` (the clean-tree check);
/// - `engine`: to `Configuring`: patches, toolchain, engine selection and preparation;
/// - `configure`: to `Compiling` (cmake in the engine, then the build.ninja checks);
/// - `ninja`: to `Built`;
/// - `gate_output`: to `Finished` (finding the library, the scan gate, the output folder, the
///   manifest);
/// - `exit`: to the process's exit.
#[derive(Debug, Clone, Default)]
pub(crate) struct Phases {
    pub(crate) fetch: f64,
    pub(crate) checkout: f64,
    pub(crate) engine: f64,
    pub(crate) configure: f64,
    pub(crate) ninja: f64,
    pub(crate) gate_output: f64,
    pub(crate) exit: f64,
    pub(crate) total: f64,
}

/// Run `bin args` with `RCCLFIX_HOME=home`, timestamp each stderr line as it arrives, and cut the
/// run into [`Phases`]. A no-op (reused) build has only `total` (and `fetch`).
pub(crate) fn timed_lines(bin: &Path, args: &[&str], home: &Path) -> anyhow::Result<Phases> {
    let (lines, total) = run_timed(bin, args, home)?;
    phases(&lines, total)
}

/// Run `bin args` with `RCCLFIX_HOME=home`; returns each stderr line with the second it arrived,
/// and the total wall time. Errors: it cannot start or exits non-zero (with its last lines).
pub(crate) fn run_timed(
    bin: &Path,
    args: &[&str],
    home: &Path,
) -> anyhow::Result<(Vec<(f64, String)>, f64)> {
    use std::io::BufRead;
    let t0 = Instant::now();
    let mut child = std::process::Command::new(bin)
        .args(args)
        .env("RCCLFIX_HOME", home)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", bin.display()))?;
    let mut lines: Vec<(f64, String)> = vec![];
    for l in std::io::BufReader::new(child.stderr.take().expect("piped")).lines() {
        lines.push((t0.elapsed().as_secs_f64(), l?));
    }
    let status = child.wait()?;
    let total = t0.elapsed().as_secs_f64();
    if !status.success() {
        let tail: Vec<&str> = lines.iter().rev().take(15).map(|l| l.1.as_str()).collect();
        bail!(
            "{} {} failed ({status}):\n{}",
            bin.display(),
            args.join(" "),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok((lines, total))
}

/// Cut a timed `rcclfix -v build` run ([`run_timed`]) into [`Phases`].
pub(crate) fn phases(lines: &[(f64, String)], total: f64) -> anyhow::Result<Phases> {
    let at = |pred: &dyn Fn(&str) -> bool, from: usize| -> Option<(usize, f64)> {
        lines
            .iter()
            .enumerate()
            .skip(from)
            .find(|(_, (_, l))| pred(l))
            .map(|(i, (t, _))| (i, *t))
    };
    let verb = |v: &'static str| move |l: &str| l.trim_start().starts_with(&format!("{v} "));
    let Some((ic, t_clone)) = at(
        &|l: &str| l.contains("+ git clone") || l.contains("+ git init"),
        0,
    ) else {
        return Ok(Phases {
            fetch: total,
            total,
            ..Phases::default()
        });
    };
    let (is, _) = at(&|l: &str| l.contains("status --porcelain"), ic)
        .context("no clean-tree check in the -v output")?;
    let t_checked = lines.get(is + 1).map_or(total, |l| l.0);
    let (_, t_conf) = at(&verb("Configuring"), is).context("no Configuring line")?;
    let (_, t_comp) = at(&verb("Compiling"), is).context("no Compiling line")?;
    let (_, t_built) = at(&verb("Built"), is).context("no Built line")?;
    let (_, t_fin) = at(&verb("Finished"), is).context("no Finished line")?;
    Ok(Phases {
        fetch: t_clone,
        checkout: t_checked - t_clone,
        engine: t_conf - t_checked,
        configure: t_comp - t_conf,
        ninja: t_built - t_comp,
        gate_output: t_fin - t_built,
        exit: total - t_fin,
        total,
    })
}

/// One bare run in `bare` (its `src`, a fresh `build` and `tmp`): `cmake cmake_args` then
/// `ninja -C /build jobs` in `toolchain`, each through `rcclfix toolchain run --volume` with the
/// mounts `build` uses (`/src`, `/build`, and a folder on disk as `/tmp`). `prepare` runs after
/// the previous tree is deleted, just before the clock starts. Returns (configure, ninja) seconds
/// and what `prepare` returned. Errors: a command fails.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bare_run<T>(
    sh: &Shell,
    root: &Path,
    bin: &Path,
    toolchain: &str,
    engine: &str,
    bare: &Path,
    cmake_args: &[String],
    jobs: &str,
    prepare: impl FnOnce() -> T,
) -> anyhow::Result<(f64, f64, T)> {
    let build = bare.join("build");
    let tmp = bare.join("tmp");
    for d in [&build, &tmp] {
        if d.exists() {
            std::fs::remove_dir_all(d)?;
        }
        std::fs::create_dir_all(d)?;
    }
    let src_v = format!("{}:/src", bare.join("src").display());
    let build_v = format!("{}:/build", build.display());
    let tmp_v = format!("{}:/tmp", tmp.display());
    // Not from `bare`: it may be under the host's /tmp, which the /tmp volume would cover.
    let _d = sh.push_dir(root);
    let prepared = prepare();
    let t0 = Instant::now();
    cmd!(sh, "{bin} toolchain run {toolchain} --engine {engine} --volume {src_v} --volume {build_v} --volume {tmp_v} -- cmake {cmake_args...}").quiet().ignore_stdout().ignore_stderr().run()?;
    let c = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    cmd!(sh, "{bin} toolchain run {toolchain} --engine {engine} --volume {src_v} --volume {build_v} --volume {tmp_v} -- ninja -C /build {jobs}").quiet().ignore_stdout().ignore_stderr().run()?;
    Ok((c, t1.elapsed().as_secs_f64(), prepared))
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`), for the record.
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The string array `"key": [ ... ]` of a pretty-printed JSON object (manifest.json), without a
/// JSON crate in xtask: one string per line, as `serde_json::to_string_pretty` writes it.
pub(crate) fn json_string_array(text: &str, key: &str) -> anyhow::Result<Vec<String>> {
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

pub(crate) fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
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
