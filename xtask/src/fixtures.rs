//! `cargo xtask fixtures`: compile the scanner's test fixtures from our own HIP sources
//! (`tests/fixtures/src/*.hip`) with the Debian toolchains, and write them to
//! `tests/fixtures/<suite>/`.
//!
//! - trixie (hipcc 5.7.1, clang-17): code object v4, plain offload bundles.
//! - sid (hipcc 7.0.2, clang-21): code object v6, plain and `--offload-compress` (CCOB v2; v3 via
//!   `COMPRESSED_BUNDLE_FORMAT_VERSION=3`).
//! - rocm7.2 (the `debian-rocm7.2` toolchain: hipcc 7.2.4, clang-22, HIP 7.2.4 from Debian's
//!   experimental suite): the sid list compiled by the ROCm 7 compiler.
//!
//! The toolchain rootfs is `$RCCLFIX_TOOLCHAIN_ROOT_<SUITE>` (`.` written `_`: `ROCM7_2`) or
//! `$RCCLFIX_TOOLCHAIN_ROOT/<suite>` if set, else `$RCCLFIX_HOME/toolchains/debian-<suite>/rootfs` (`RCCLFIX_HOME` defaults to
//! `$XDG_CACHE_HOME/rcclfix` or `~/.cache/rcclfix`). Commands run read-only inside the rootfs under bubblewrap, with the work
//! folder (`target/fixtures-work/<suite>`) bound at `/mnt`. Host parts are stripped (`llvm-strip --strip-all`), which keeps every
//! section the scanner reads. `tests/fixtures/README.md` lists every command.
//!
//! Usage: `cargo xtask fixtures [trixie|sid|rocm7.2]… [OUTPUT-NAME]…` (default: trixie and sid,
//! every fixture; `rocm7.2` only when named).

use std::path::{Path, PathBuf};

use anyhow::Context;
use xshell::{cmd, Shell};

/// One fixture: output file name, the shell-free argv run in `/mnt` (after `pre`, whose output
/// stays in the work folder), and extra environment.
struct Fixture {
    out: &'static str,
    pre: Vec<String>,
    argv: Vec<String>,
    env: Vec<(&'static str, &'static str)>,
    strip: bool,
}

fn fx(out: &'static str, argv: &str) -> Fixture {
    Fixture {
        out,
        pre: vec![],
        argv: argv.split_whitespace().map(str::to_owned).collect(),
        env: vec![],
        strip: true,
    }
}

/// The LLVM major version of a suite's tools (`llvm-strip-NN`, `llc-NN`).
fn llvm_version(suite: &str) -> &'static str {
    match suite {
        "trixie" => "17",
        "rocm7.2" => "22",
        _ => "21",
    }
}

/// The fixture list per suite; every command is also written to the README by hand.
fn fixtures(suite: &str) -> Vec<Fixture> {
    let base = "hipcc -fPIC -shared --offload-arch=gfx1100";
    let mut list = vec![
        fx("kernels.so", &format!("{base} -O3 kernels.hip -o kernels.so")),
        fx("kernels-ndebug.so", &format!("{base} -O3 -DNDEBUG kernels.hip -o kernels-ndebug.so")),
        fx("kernels-O0.so", &format!("{base} -O0 kernels.hip -o kernels-O0.so")),
        fx("indirect.so", &format!("{base} -O3 indirect.hip -o indirect.so")),
        fx("indirect-ndebug.so", &format!("{base} -O3 -DNDEBUG indirect.hip -o indirect-ndebug.so")),
        // Two translation units without -fgpu-rdc: two bundles back to back in .hip_fatbin.
        // Implicit arguments without hostcall: v4 puts hidden_none in the hostcall slot.
        fx("implicit.so", &format!("{base} -O3 implicit.hip -o implicit.so")),
        fx("two-tu.so", &format!("{base} -O3 -DNDEBUG kernels.hip indirect.hip -o two-tu.so")),
        // -fgpu-rdc: an unlinked object (bitcode sections) and the linked library.
        Fixture { strip: false, ..fx("rdc_b.o", "hipcc -fPIC -fgpu-rdc -c --offload-arch=gfx1100 -O3 rdc_b.hip -o rdc_b.o") },
        Fixture { strip: false, ..fx("rdc_a.o", "hipcc -fPIC -fgpu-rdc -c --offload-arch=gfx1100 -O3 rdc_a.hip -o rdc_a.o") },
        fx("rdc.so", "hipcc -fPIC -fgpu-rdc -shared --offload-arch=gfx1100 rdc_a.o rdc_b.o -o rdc.so"),
        // A bare code object (no bundle around it).
        Fixture {
            strip: false,
            ..fx(
                "kernels.co",
                "hipcc --offload-device-only --no-gpu-bundle-output --offload-arch=gfx1100 -O3 kernels.hip -o kernels.co",
            )
        },
    ];
    if suite == "trixie" {
        list.push(fx("multi.so", "hipcc -fPIC -shared --offload-arch=gfx1100 --offload-arch=gfx1030 --offload-arch=gfx90a:xnack- -O3 kernels.hip -o multi.so"));
    } else {
        let cbase = "hipcc -fPIC -shared --offload-compress --offload-arch=gfx1100 -O3";
        list.push(fx(
            "kernels-ccob.so",
            &format!("{cbase} kernels.hip -o kernels-ccob.so"),
        ));
        list.push(Fixture {
            env: vec![("COMPRESSED_BUNDLE_FORMAT_VERSION", "3")],
            ..fx(
                "kernels-ccob3.so",
                &format!("{cbase} kernels.hip -o kernels-ccob3.so"),
            )
        });
        list.push(fx(
            "indirect-ccob.so",
            &format!("{cbase} indirect.hip -o indirect-ccob.so"),
        ));
        list.push(fx(
            "two-tu-ccob.so",
            &format!("{cbase} kernels.hip indirect.hip -o two-tu-ccob.so"),
        ));
        // A relocatable code object (ET_REL): the -fgpu-rdc device IR compiled by llc on its own,
        // so calls and the function table are relocations.
        list.push(Fixture {
            strip: false,
            pre: "hipcc -fgpu-rdc --offload-device-only --no-gpu-bundle-output --offload-arch=gfx1100 -O3 -S -emit-llvm indirect.hip -o indirect.ll"
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            argv: format!(
                "llc-{} -mtriple=amdgcn-amd-amdhsa -mcpu=gfx1100 -O3 -filetype=obj indirect.ll -o indirect-rel.co",
                llvm_version(suite)
            )
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
            ..fx("indirect-rel.co", "")
        });
        // Device asserts behind a function table for four instruction-set generations (the
        // trap encodings of `patch --asserts`).
        list.push(fx(
            "indirect-multi.so",
            "hipcc -fPIC -shared --offload-arch=gfx1100 --offload-arch=gfx1200 --offload-arch=gfx1030 --offload-arch=gfx90a:xnack- --offload-arch=gfx803 -O3 indirect.hip -o indirect-multi.so",
        ));
        list.push(fx(
            "multi-ccob.so",
            "hipcc -fPIC -shared --offload-compress --offload-arch=gfx1100 --offload-arch=gfx11-generic --offload-arch=gfx1030 --offload-arch=gfx90a:xnack- -O3 kernels.hip -o multi-ccob.so",
        ));
    }
    list
}

/// The rootfs of a Debian toolchain suite (see the module docs).
pub fn toolchain_root(suite: &str) -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var(format!(
        "RCCLFIX_TOOLCHAIN_ROOT_{}",
        suite.to_uppercase().replace('.', "_")
    )) {
        return Ok(PathBuf::from(p));
    }
    if let Ok(p) = std::env::var("RCCLFIX_TOOLCHAIN_ROOT") {
        return Ok(PathBuf::from(p).join(suite));
    }
    Ok(crate::paths::toolchain_rootfs(&format!("debian-{suite}")))
}

/// The bubblewrap arguments that run a command read-only inside `root` with `work` bound at `/mnt`.
pub fn in_rootfs(root: &Path, work: &Path) -> Vec<String> {
    let r = root.display().to_string();
    let w = work.display().to_string();
    [
        "--ro-bind",
        &r,
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--bind",
        &w,
        "/mnt",
        "--chdir",
        "/mnt",
        "--tmpfs",
        "/tmp",
        "--setenv",
        "HOME",
        "/tmp",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    let (mut suites, only): (Vec<String>, Vec<String>) = rest
        .iter()
        .cloned()
        .partition(|a| a == "trixie" || a == "sid" || a == "rocm7.2");
    if suites.is_empty() {
        suites = vec!["trixie".into(), "sid".into()];
    }
    let src = crate::project_root().join("tests/fixtures/src");
    for suite in &suites {
        let root = toolchain_root(suite)?;
        if !root.join("usr/bin/hipcc").exists() {
            anyhow::bail!(
                "no hipcc in the {suite} toolchain rootfs {}\nhelp: build it with `rcclfix toolchain build debian-{suite}` or set RCCLFIX_TOOLCHAIN_ROOT_{}",
                root.display(),
                suite.to_uppercase().replace('.', "_")
            );
        }
        let work = crate::project_root()
            .join("target/fixtures-work")
            .join(suite);
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work)?;
        for f in std::fs::read_dir(&src)? {
            let f = f?.path();
            std::fs::copy(&f, work.join(f.file_name().unwrap()))?;
        }
        let out_dir = crate::project_root().join("tests/fixtures").join(suite);
        std::fs::create_dir_all(&out_dir)?;
        let prefix = in_rootfs(&root, &work);
        let strip = format!("llvm-strip-{}", llvm_version(suite));
        for f in fixtures(suite)
            .into_iter()
            .filter(|f| only.is_empty() || only.iter().any(|o| o == f.out))
        {
            let mut argv = prefix.clone();
            for (k, v) in &f.env {
                argv.extend(["--setenv".to_string(), k.to_string(), v.to_string()]);
            }
            eprintln!("   Compiling {suite}/{}", f.out);
            if !f.pre.is_empty() {
                let mut pre = argv.clone();
                pre.extend(f.pre.iter().cloned());
                cmd!(sh, "bwrap {pre...}")
                    .run()
                    .with_context(|| format!("{suite}/{} (first step)", f.out))?;
            }
            argv.extend(f.argv.iter().cloned());
            cmd!(sh, "bwrap {argv...}")
                .run()
                .with_context(|| format!("{suite}/{}", f.out))?;
            let mut tmp = f.out.to_string();
            if f.strip {
                tmp = format!("{}.stripped", f.out);
                let mut s = prefix.clone();
                s.extend([
                    strip.clone(),
                    "--strip-all".into(),
                    f.out.into(),
                    "-o".into(),
                    tmp.clone(),
                ]);
                cmd!(sh, "bwrap {s...}").run()?;
            }
            std::fs::copy(work.join(&tmp), out_dir.join(f.out))?;
        }
        cmd!(sh, "ls -l {out_dir}").run()?;
    }
    Ok(())
}
