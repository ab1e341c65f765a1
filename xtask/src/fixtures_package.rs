//! `cargo xtask fixtures-package`: compile the stripper's committed fixture,
//! `tests/fixtures/package/librccl-unstripped.so`, from our own sources with the Debian trixie
//! toolchain (gcc 14, hipcc 5.7.1), read-only in its rootfs under bubblewrap (see `fixtures.rs`
//! for where the rootfs comes from), in a work folder bound at `/mnt`, so no path of this machine
//! reaches the debug information.
//!
//! It is a library as a real build leaves it: the package tests' stand-in NCCL API
//! (`tests/data/package/rccl.c`, `dump.cc`) compiled with `-g`, the device code of
//! `tests/fixtures/src/implicit.hip` (one clean gfx1100 kernel in `.hip_fatbin`), DWARF,
//! `.symtab`, relocation-free, a GNU build ID, not stripped. Commands:
//!
//! ```text
//! gcc -c -fPIC -O2 -g rccl.c -o rccl.o
//! g++ -c -fPIC -O2 -g dump.cc -o dump.o
//! hipcc -c -fPIC --offload-arch=gfx1100 -O3 implicit.hip -o implicit.o
//! g++ -shared -Wl,-z,relro,-z,now -Wl,--build-id -Wl,-soname,librccl.so.1 rccl.o dump.o implicit.o -o librccl-unstripped.so
//! ```

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
    let repo = crate::project_root();
    let work = repo.join("target/fixtures-work/package");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    for (from, to) in [
        ("tests/data/package/rccl.c", "rccl.c"),
        ("tests/data/package/dump.cc", "dump.cc"),
        ("tests/fixtures/src/implicit.hip", "implicit.hip"),
    ] {
        std::fs::copy(repo.join(from), work.join(to)).with_context(|| from.to_owned())?;
    }
    let p = crate::fixtures::in_rootfs(&root, &work);
    eprintln!("   Compiling package/librccl-unstripped.so");
    for step in [
        "gcc -c -fPIC -O2 -g rccl.c -o rccl.o",
        "g++ -c -fPIC -O2 -g dump.cc -o dump.o",
        "hipcc -c -fPIC --offload-arch=gfx1100 -O3 implicit.hip -o implicit.o",
        "g++ -shared -Wl,-z,relro,-z,now -Wl,--build-id -Wl,-soname,librccl.so.1 rccl.o dump.o implicit.o -o librccl-unstripped.so",
    ] {
        let mut argv = p.clone();
        argv.extend(step.split_whitespace().map(str::to_owned));
        cmd!(sh, "bwrap {argv...}")
            .run()
            .with_context(|| step.to_owned())?;
    }
    let out = repo.join("tests/fixtures/package");
    std::fs::create_dir_all(&out)?;
    std::fs::copy(
        work.join("librccl-unstripped.so"),
        out.join("librccl-unstripped.so"),
    )?;
    cmd!(sh, "ls -l {out}").run()?;
    Ok(())
}
