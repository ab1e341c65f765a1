//! `cargo xtask fixtures-patch [--sid ROOTFS] [--trixie ROOTFS] [--out DIR]`: regenerate the
//! `rcclfix patch` test fixtures in `tests/fixtures/patch/` (or `DIR`, which the freshness test
//! uses) from our own sources in `tests/fixtures/patch/src/`.
//!
//! `cargo xtask fixtures-patch rocm7.2 [--rootfs ROOTFS] [--out DIR]`: the device-linker pattern
//! compiled by the ROCm 7.2 compiler (the `debian-rocm7.2` toolchain: clang 22, code object v6,
//! CCOB v3 from `clang-offload-bundler -compress`) into `tests/fixtures/patch/rocm7.2/`.
//!
//! Every compiler, linker and bundler runs inside a Debian toolchain rootfs, read-only, through
//! bubblewrap: `debian-sid` (clang 21, code object v6 by default and v5 on request, CCOB v2) and `debian-trixie` (clang 17, code
//! object v4). The rootfs defaults are `$RCCLFIX_HOME/toolchains/debian-{sid,trixie}/rootfs`
//! (`RCCLFIX_HOME` defaults to `$XDG_CACHE_HOME/rcclfix` or `~/.cache/rcclfix`). `tests/fixtures/patch/README.md` lists what each
//! output is and how it was made; keep the two in step.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use xshell::{cmd, Shell};

/// Device compile flags shared by every translation unit of the device-linker pattern.
const RDC_FLAGS: &[&str] = &[
    "-x",
    "hip",
    "--offload-device-only",
    "-O3",
    "-fgpu-rdc",
    "--no-gpu-bundle-output",
];

struct Toolchain {
    rootfs: PathBuf,
    /// LLVM major version suffix of the tool names, e.g. `21`.
    v: &'static str,
}

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    if rest.first().map(String::as_str) == Some("rocm7.2") {
        return run_rocm72(sh, &rest[1..]);
    }
    let mut sid = crate::paths::toolchain_rootfs("debian-sid");
    let mut trixie = crate::paths::toolchain_rootfs("debian-trixie");
    let root = crate::project_root();
    let mut dest = root.join("tests/fixtures/patch");
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--sid" => sid = it.next().context("--sid needs a rootfs path")?.into(),
            "--trixie" => trixie = it.next().context("--trixie needs a rootfs path")?.into(),
            "--out" => dest = it.next().context("--out needs a folder")?.into(),
            _ => bail!("unknown argument {a:?}; usage: cargo xtask fixtures-patch [--sid ROOTFS] [--trixie ROOTFS] [--out DIR]"),
        }
    }
    for r in [&sid, &trixie] {
        if !r.join("usr/bin").is_dir() {
            bail!("toolchain rootfs {} not found\nhelp: rcclfix toolchain build debian-sid / debian-trixie, or pass --sid/--trixie", r.display());
        }
    }
    let sid = Toolchain {
        rootfs: sid,
        v: "21",
    };
    let trixie = Toolchain {
        rootfs: trixie,
        v: "17",
    };

    let fixtures = root.join("tests/fixtures/patch");
    let work = root.join("target/fixtures-patch-work");
    std::fs::create_dir_all(&dest)?;
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    std::fs::create_dir_all(&work)?;
    for e in std::fs::read_dir(fixtures.join("src"))? {
        let e = e?;
        std::fs::copy(e.path(), work.join(e.file_name()))?;
    }

    // Code object v6 (sid: clang 21 writes v6 by default): the device-linker pattern for two targets, and the refusal variants.
    for gfx in ["gfx1100", "gfx1030"] {
        for tu in ["dispatch", "funcs"] {
            device_object(sh, &sid, &work, tu, gfx, &format!("{tu}-{gfx}.o"))?;
        }
        link(
            sh,
            &sid,
            &work,
            &[&format!("dispatch-{gfx}.o"), &format!("funcs-{gfx}.o")],
            &format!("dispatch-v6-{gfx}.co"),
        )?;
    }
    for tu in ["funcs_printf", "funcs_remote"] {
        device_object(sh, &sid, &work, tu, "gfx1100", &format!("{tu}-gfx1100.o"))?;
    }
    link(
        sh,
        &sid,
        &work,
        &["dispatch-gfx1100.o", "funcs_printf-gfx1100.o"],
        "table-printf-v6.co",
    )?;
    link(
        sh,
        &sid,
        &work,
        &["dispatch-gfx1100.o", "funcs_remote-gfx1100.o"],
        "undef-target-v6.co",
    )?;
    tc(
        sh,
        &sid,
        &work,
        &[
            &format!("llvm-strip-{}", sid.v),
            "--strip-all",
            "dispatch-v6-gfx1100.co",
            "-o",
            "stripped-v6.co",
        ],
    )?;
    // The same pattern as code object v5 (`-mcode-object-version=5`, what ROCm 6/7 clang writes).
    for tu in ["dispatch", "funcs"] {
        device_object_flags(
            sh,
            &sid,
            &work,
            tu,
            "gfx1100",
            &format!("{tu}-cov5.o"),
            &["-mcode-object-version=5"],
        )?;
    }
    link(
        sh,
        &sid,
        &work,
        &["dispatch-cov5.o", "funcs-cov5.o"],
        "dispatch-v5-gfx1100.co",
    )?;
    // Kernels that really use hostcall, compiled the ordinary way (one TU, -O3, no NDEBUG).
    for (src, out) in [
        ("printf.hip", "printf-v6.co"),
        ("assert.hip", "assert-v6.co"),
    ] {
        let clangxx = format!("clang++-{}", sid.v);
        tc(
            sh,
            &sid,
            &work,
            &[
                &clangxx,
                "-x",
                "hip",
                "--offload-device-only",
                "--offload-arch=gfx1100",
                "-O3",
                "--no-gpu-bundle-output",
                src,
                "-o",
                out,
            ],
        )?;
    }

    // Offload bundles the way the RCCL device linker writes them (`hip-` entry IDs, empty host
    // entry), plain and compressed (CCOB v2, zstd), each embedded in a small host library.
    let targets = "-targets=host-x86_64-unknown-linux-gnu-,hip-amdgcn-amd-amdhsa--gfx1030,hip-amdgcn-amd-amdhsa--gfx1100";
    let bundler = format!("clang-offload-bundler-{}", sid.v);
    let inputs = [
        "-input=/dev/null",
        "-input=dispatch-v6-gfx1030.co",
        "-input=dispatch-v6-gfx1100.co",
    ];
    let mut plain = vec![bundler.as_str(), "-type=o", targets];
    plain.extend(inputs);
    plain.push("-output=dispatch-v6.bundle");
    tc(sh, &sid, &work, &plain)?;
    let mut ccob = vec![bundler.as_str(), "-type=o", targets, "-compress"];
    ccob.extend(inputs);
    ccob.push("-output=dispatch-v6.ccob");
    tc(sh, &sid, &work, &ccob)?;
    // The "cannot fit" case: the same bundle compressed at zstd's highest level, so no
    // recompression of the patched bundle is smaller than the space the original occupies.
    let mut tight = vec![
        bundler.as_str(),
        "-type=o",
        targets,
        "-compress",
        "-compression-level=22",
    ];
    tight.extend(inputs);
    tight.push("-output=dispatch-v6-tight.ccob");
    tc(sh, &sid, &work, &tight)?;
    for (bundle, lib) in [
        ("dispatch-v6.bundle", "libdispatch-plain.so"),
        ("dispatch-v6.ccob", "libdispatch-ccob.so"),
        ("dispatch-v6-tight.ccob", "libdispatch-tight.so"),
    ] {
        host_library(sh, &sid, &work, bundle, lib)?;
    }

    // Code object v4 (trixie): the same pattern, kept as a raw plain bundle (`hipv4-` ID).
    device_object(sh, &trixie, &work, "dispatch", "gfx1100", "dispatch-v4.o")?;
    device_object(sh, &trixie, &work, "funcs", "gfx1100", "funcs-v4.o")?;
    link(
        sh,
        &trixie,
        &work,
        &["dispatch-v4.o", "funcs-v4.o"],
        "dispatch-v4-gfx1100.co",
    )?;
    let bundler4 = format!("clang-offload-bundler-{}", trixie.v);
    tc(
        sh,
        &trixie,
        &work,
        &[
            &bundler4,
            "-type=o",
            "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx1100",
            "-input=/dev/null",
            "-input=dispatch-v4-gfx1100.co",
            "-output=dispatch-v4.bundle",
        ],
    )?;

    let outputs = [
        "dispatch-v6-gfx1100.co",
        "dispatch-v5-gfx1100.co",
        "dispatch-v4-gfx1100.co",
        "dispatch-v4.bundle",
        "table-printf-v6.co",
        "undef-target-v6.co",
        "stripped-v6.co",
        "printf-v6.co",
        "assert-v6.co",
        "libdispatch-plain.so",
        "libdispatch-ccob.so",
        "libdispatch-tight.so",
    ];
    for o in outputs {
        std::fs::copy(work.join(o), dest.join(o)).with_context(|| format!("copy {o}"))?;
        let n = std::fs::metadata(dest.join(o))?.len();
        eprintln!("{:>12} {} ({n} bytes)", "Wrote", dest.join(o).display());
    }
    Ok(())
}

/// The ROCm 7.2 set: the dispatcher pattern for gfx1100 and gfx1030 with clang 22 (code object v6
/// by default), and its CCOB library (clang-offload-bundler-22 `-compress`, whose default format
/// is CCOB v3).
fn run_rocm72(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    let root = crate::project_root();
    let mut rootfs = crate::paths::toolchain_rootfs("debian-rocm7.2");
    let mut dest = root.join("tests/fixtures/patch/rocm7.2");
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rootfs" => rootfs = it.next().context("--rootfs needs a rootfs path")?.into(),
            "--out" => dest = it.next().context("--out needs a folder")?.into(),
            _ => bail!("unknown argument {a:?}; usage: cargo xtask fixtures-patch rocm7.2 [--rootfs ROOTFS] [--out DIR]"),
        }
    }
    if !rootfs.join("usr/bin").is_dir() {
        bail!("toolchain rootfs {} not found\nhelp: rcclfix toolchain build debian-rocm7.2, or pass --rootfs", rootfs.display());
    }
    let t = Toolchain { rootfs, v: "22" };
    let work = root.join("target/fixtures-patch-work-rocm7.2");
    std::fs::create_dir_all(&dest)?;
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    std::fs::create_dir_all(&work)?;
    for e in std::fs::read_dir(root.join("tests/fixtures/patch/src"))? {
        let e = e?;
        std::fs::copy(e.path(), work.join(e.file_name()))?;
    }
    for gfx in ["gfx1100", "gfx1030"] {
        for tu in ["dispatch", "funcs"] {
            device_object(sh, &t, &work, tu, gfx, &format!("{tu}-{gfx}.o"))?;
        }
        link(
            sh,
            &t,
            &work,
            &[&format!("dispatch-{gfx}.o"), &format!("funcs-{gfx}.o")],
            &format!("dispatch-v6-{gfx}.co"),
        )?;
    }
    let bundler = format!("clang-offload-bundler-{}", t.v);
    tc(
        sh,
        &t,
        &work,
        &[
            &bundler,
            "-type=o",
            "-targets=host-x86_64-unknown-linux-gnu-,hip-amdgcn-amd-amdhsa--gfx1030,hip-amdgcn-amd-amdhsa--gfx1100",
            "-compress",
            "-input=/dev/null",
            "-input=dispatch-v6-gfx1030.co",
            "-input=dispatch-v6-gfx1100.co",
            "-output=dispatch-v6.ccob",
        ],
    )?;
    host_library(sh, &t, &work, "dispatch-v6.ccob", "libdispatch-ccob.so")?;
    for o in ["dispatch-v6-gfx1100.co", "libdispatch-ccob.so"] {
        std::fs::copy(work.join(o), dest.join(o)).with_context(|| format!("copy {o}"))?;
        let n = std::fs::metadata(dest.join(o))?.len();
        eprintln!("{:>12} {} ({n} bytes)", "Wrote", dest.join(o).display());
    }
    Ok(())
}

/// One translation unit → bitcode (`-fgpu-rdc`, NDEBUG unless it is a refusal source that wants a
/// live assert) → assembly on its own (as RCCL's `rccl-device-compile` does) → relocatable object.
fn device_object(
    sh: &Shell,
    t: &Toolchain,
    work: &Path,
    tu: &str,
    gfx: &str,
    out: &str,
) -> anyhow::Result<()> {
    device_object_flags(sh, t, work, tu, gfx, out, &[])
}

/// [`device_object`] with extra flags for both compile steps.
fn device_object_flags(
    sh: &Shell,
    t: &Toolchain,
    work: &Path,
    tu: &str,
    gfx: &str,
    out: &str,
    extra: &[&str],
) -> anyhow::Result<()> {
    let clangxx = format!("clang++-{}", t.v);
    let clang = format!("clang-{}", t.v);
    let arch = format!("--offload-arch={gfx}");
    let mcpu = format!("-mcpu={gfx}");
    let (bc, s) = (format!("{out}.bc"), format!("{out}.s"));
    let src = format!("{tu}.hip");
    let mut argv: Vec<&str> = vec![&clangxx];
    argv.extend(RDC_FLAGS);
    argv.extend(extra);
    argv.extend([arch.as_str(), "-DNDEBUG", "-c", &src, "-o", &bc]);
    tc(sh, t, work, &argv)?;
    let mut argv: Vec<&str> = vec![
        &clang,
        "--target=amdgcn-amd-amdhsa",
        &mcpu,
        "-O3",
        "-ffunction-sections",
    ];
    argv.extend(extra);
    argv.extend(["-S", &bc, "-o", &s]);
    tc(sh, t, work, &argv)?;
    tc(
        sh,
        t,
        work,
        &[
            &clang,
            "--target=amdgcn-amd-amdhsa",
            &mcpu,
            "-c",
            &s,
            "-o",
            out,
        ],
    )?;
    Ok(())
}

/// `ld.lld -shared` the objects into one code object, as the RCCL device linker builds
/// `device_build/<gfx>/device.elf`; `--gc-sections` drops unreferenced functions (such as the
/// NDEBUG-dead `__assert_fail` from the HIP headers).
fn link(sh: &Shell, t: &Toolchain, work: &Path, objs: &[&str], out: &str) -> anyhow::Result<()> {
    let lld = format!("ld.lld-{}", t.v);
    let mut argv: Vec<&str> = vec![&lld, "-shared", "--gc-sections"];
    argv.extend(objs);
    argv.extend(["-o", out]);
    tc(sh, t, work, &argv)
}

/// Embed `bundle` into a host shared library (`embed.S`) for x86_64.
fn host_library(
    sh: &Shell,
    t: &Toolchain,
    work: &Path,
    bundle: &str,
    lib: &str,
) -> anyhow::Result<()> {
    std::fs::copy(work.join(bundle), work.join("fatbin.bin"))?;
    let clang = format!("clang-{}", t.v);
    let lld = format!("ld.lld-{}", t.v);
    tc(
        sh,
        t,
        work,
        &[
            &clang,
            "--target=x86_64-linux-gnu",
            "-c",
            "embed.S",
            "-o",
            "embed.o",
        ],
    )?;
    tc(
        sh,
        t,
        work,
        &[&lld, "-shared", "--build-id=none", "embed.o", "-o", lib],
    )
}

/// Run `argv` inside the toolchain rootfs (read-only), with `work` mounted at `/tmp/w`.
fn tc(sh: &Shell, t: &Toolchain, work: &Path, argv: &[&str]) -> anyhow::Result<()> {
    let rootfs = &t.rootfs;
    in_rootfs(sh, rootfs, work, argv)
        .run()
        .with_context(|| format!("in {}: {}", rootfs.display(), argv.join(" ")))?;
    Ok(())
}

/// The command that runs `argv` inside `rootfs` (read-only, network off, its own pid namespace)
/// through bubblewrap, with `work` mounted read-write at `/tmp/w` as the working folder. The one
/// toolchain runner of the xtask: `fixtures-patch` runs it, `patch-sweep` also reads its output.
pub(crate) fn in_rootfs<'a>(
    sh: &'a Shell,
    rootfs: &Path,
    work: &Path,
    argv: &[&str],
) -> xshell::Cmd<'a> {
    cmd!(
        sh,
        "bwrap --ro-bind {rootfs} / --proc /proc --dev /dev --tmpfs /tmp --bind {work} /tmp/w --chdir /tmp/w --unshare-pid --unshare-net --die-with-parent {argv...}"
    )
}
