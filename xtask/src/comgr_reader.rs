//! `cargo xtask comgr-reader`: build the scanner tests' independent metadata reader,
//! `tests/fixtures/comgr/comgr_kernels.cpp`, against the `libamd_comgr` of the debian-sid
//! toolchain (`g++ -O1 comgr_kernels.cpp -lamd_comgr`, run read-only in its rootfs under
//! bubblewrap; see `fixtures.rs` for where the rootfs comes from), into
//! `target/comgr-reader/comgr-kernels` (never committed). `tests/it/scan_comgr.rs` runs it in
//! the same rootfs.

use anyhow::Context;
use xshell::{cmd, Shell};

pub fn run(sh: &Shell, _rest: &[String]) -> anyhow::Result<()> {
    let root = crate::fixtures::toolchain_root("sid")?;
    if !root.join("usr/include/amd_comgr/amd_comgr.h").exists() {
        anyhow::bail!(
            "no amd_comgr.h in the sid toolchain rootfs {}\nhelp: build it with `rcclfix toolchain build debian-sid` or set RCCLFIX_TOOLCHAIN_ROOT_SID",
            root.display()
        );
    }
    let work = crate::project_root().join("target/comgr-reader");
    std::fs::create_dir_all(&work)?;
    std::fs::copy(
        crate::project_root().join("tests/fixtures/comgr/comgr_kernels.cpp"),
        work.join("comgr_kernels.cpp"),
    )?;
    let prefix = crate::fixtures::in_rootfs(&root, &work);
    eprintln!("   Compiling target/comgr-reader/comgr-kernels");
    cmd!(
        sh,
        "bwrap {prefix...} g++ -O1 -o comgr-kernels comgr_kernels.cpp -lamd_comgr"
    )
    .run()
    .context("compile comgr_kernels.cpp")?;
    Ok(())
}
