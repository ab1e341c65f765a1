//! `cargo xtask doctor-fixtures`: compile the doctor tests' library fixture from our own HIP source
//! (`tests/data/doctor/src/plain.hip`) with the Debian trixie toolchain (hipcc 5.7.1, clang-17) and
//! write `tests/data/doctor/plain-gfx1100.so` (host part stripped; `.hip_fatbin` untouched).
//!
//! Command, run read-only in the toolchain rootfs under bubblewrap (see `fixtures.rs` for where the
//! rootfs comes from): `hipcc -fPIC -shared --offload-arch=gfx1100 -O3 plain.hip -o plain.so`, then
//! `llvm-strip-17 --strip-all`.

use anyhow::Context;
use xshell::{cmd, Shell};

pub fn run(sh: &Shell, _rest: &[String]) -> anyhow::Result<()> {
    let root = crate::fixtures::toolchain_root("trixie")?;
    if !root.join("usr/bin/hipcc").exists() {
        anyhow::bail!(
            "no hipcc in the trixie toolchain rootfs {}\nhelp: build it with `rcclfix toolchain build debian-trixie` or set RCCLFIX_TOOLCHAIN_ROOT_TRIXIE",
            root.display()
        );
    }
    let data = crate::project_root().join("tests/data/doctor");
    let work = crate::project_root().join("target/fixtures-work/doctor");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    std::fs::copy(data.join("src/plain.hip"), work.join("plain.hip"))?;
    let prefix = crate::fixtures::in_rootfs(&root, &work);
    eprintln!("   Compiling doctor/plain-gfx1100.so");
    let compile = prefix.clone();
    cmd!(
        sh,
        "bwrap {compile...} hipcc -fPIC -shared --offload-arch=gfx1100 -O3 plain.hip -o plain.so"
    )
    .run()
    .context("compile plain.hip")?;
    cmd!(
        sh,
        "bwrap {prefix...} llvm-strip-17 --strip-all plain.so -o plain-gfx1100.so"
    )
    .run()?;
    std::fs::copy(work.join("plain-gfx1100.so"), data.join("plain-gfx1100.so"))?;
    cmd!(sh, "ls -l {data}/plain-gfx1100.so").run()?;
    Ok(())
}
