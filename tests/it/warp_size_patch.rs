//! `rccl-2.21-warp-size-constexpr.patch`, which lets RCCL 2.21.5 compile against HIP 7's
//! headers: it is byte-identical on HIP 6.4 and gives HIP 6's `warpSize` values in both compilers.
//!
//! Slow tests (`RCCLFIX_SLOW_TESTS=1`) read the real toolchains under `$RCCLFIX_HOME/toolchains`;
//! the identity check also needs a mirror of ROCm/rccl (`RCCLFIX_GIT_MIRROR`) and builds RCCL
//! 2.21.5 in the debian-sid toolchain (15–40 minutes on 2 cores).

use std::path::{Path, PathBuf};

use crate::support::slow_or_note;

/// The record of 2.21.5-debian-sid: the library built without the WARP_SIZE patch.
const RECORD: &str = "recipes/records/2.21.5-debian-sid-gfx1100/manifest.json";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The WARP_SIZE patch changes nothing on HIP 6.4 (its header says so): recipe 2.21.5-debian-sid
/// built in the debian-sid toolchain with `rccl-2.21-warp-size-constexpr.patch` added gives the
/// library recorded without it. When the toolchain's packages have moved since the record (so
/// the recorded sha256 need not hold), the same recipe is also built without the patch and the two
/// libraries must be equal.
#[test]
#[ignore = "needs RCCLFIX_GIT_MIRROR: run with RCCLFIX_GIT_MIRROR=<a git mirror of ROCm/rccl> (cargo xtask test runs ignored tests whose input is there)"]
fn slow_warp_size_patch_is_identity_on_hip6() {
    let mirror = crate::support::required_input("RCCLFIX_GIT_MIRROR");
    let recorded: rcclfix::manifest::Manifest =
        serde_json::from_str(&std::fs::read_to_string(repo().join(RECORD)).unwrap()).unwrap();
    let t = tempfile::tempdir().unwrap();
    let sid = std::fs::read_to_string(repo().join("recipes/2.21.5-debian-sid.toml")).unwrap();
    let with = build_variant(t.path(), &sid, "warp", true, Path::new(&mirror));
    if with == recorded.library.sha256 {
        return;
    }
    let without = build_variant(t.path(), &sid, "plain", false, Path::new(&mirror));
    assert_eq!(
        with, without,
        "the WARP_SIZE patch changed the library on HIP 6.4 (recorded without it: {})",
        recorded.library.sha256
    );
}

/// Build `sid` (the text of recipes/2.21.5-debian-sid.toml) as recipe `2.21.5-debian-sid-<tag>`,
/// with the WARP_SIZE patch appended when `patched`; returns the library's sha256.
fn build_variant(t: &Path, sid: &str, tag: &str, patched: bool, mirror: &Path) -> String {
    let mut text = sid
        .replace(
            "name = \"2.21.5-debian-sid\"",
            &format!("name = \"2.21.5-debian-sid-{tag}\""),
        )
        .replace(
            "status = \"verified\"",
            "status = \"experimental\"\nstatus_reason = \"identity check of the WARP_SIZE patch\"",
        )
        .lines()
        .filter(|l| !l.starts_with("verified_by"))
        .collect::<Vec<_>>()
        .join("\n");
    if patched {
        text = text.replace(
            "    \"rccl-2.21-rocm-core-header-optional.patch\",\n",
            "    \"rccl-2.21-rocm-core-header-optional.patch\",\n    \"rccl-2.21-warp-size-constexpr.patch\",\n",
        );
        assert!(
            text.contains("warp-size-constexpr"),
            "the recipe's patch list changed"
        );
    }
    let f = t.join(format!("{tag}.toml"));
    std::fs::write(&f, text).unwrap();
    let home = crate::build::scratch_home(&t.join(tag));
    let out = t.join(format!("out-{tag}"));
    let o = crate::support::rcclfix()
        .args(["build", "--experimental", "--recipe"])
        .arg(&f)
        .arg("--git-mirror")
        .arg(mirror)
        .arg("--out-dir")
        .arg(&out)
        .env("RCCLFIX_HOME", &home)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "build of {tag}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let m =
        rcclfix::manifest::Manifest::load(&out.join("rccl-2.21.5-gfx1100/manifest.json")).unwrap();
    m.library.sha256
}

/// The `WARP_SIZE` block of `rccl-2.21-warp-size-constexpr.patch` (its added preprocessor lines),
/// read from the patch itself.
fn warp_size_block() -> String {
    let text = std::fs::read_to_string(repo().join("patches/rccl-2.21-warp-size-constexpr.patch"))
        .unwrap();
    let added: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix('+'))
        .filter(|l| l.starts_with('#'))
        .collect();
    assert!(added.len() >= 8, "{added:?}");
    added.join("\n")
}

/// The patch's `WARP_SIZE` is the value HIP 6's `warpSize` had, in both compilers: compiled with
/// static_asserts in debian-sid (clang 21, HIP 6.4: equal to `warpSize` itself in the device
/// pass) and debian-rocm7.2 (clang 22, HIP 7.2.4, which defines no wave-size macro): 32 in the
/// device pass of gfx10/11/12 targets, 64 on gfx9, 64 in the host pass.
#[test]
fn slow_warp_size_patch_gives_hip6_values_in_both_compilers() {
    if !slow_or_note() {
        return;
    }
    crate::support::require_tool("sid", "hipcc");
    crate::support::require_tool("rocm7.2", "hipcc");
    let dir = tempfile::tempdir().unwrap();
    let src = format!(
        "#include <hip/hip_runtime.h>\n{}\n{}",
        warp_size_block(),
        r#"#ifdef __HIP_DEVICE_COMPILE__
#if defined(__GFX9__)
static_assert(WARP_SIZE == 64, "gfx9 device pass");
#else
static_assert(WARP_SIZE == 32, "gfx10-12 device pass");
#endif
#if defined(HIP6)
static_assert(WARP_SIZE == warpSize, "HIP 6's constexpr warpSize");
#endif
#else
static_assert(WARP_SIZE == 64, "host pass");
#endif
__global__ void k(int* p) { p[threadIdx.x] = WARP_SIZE; }
"#
    );
    std::fs::write(dir.path().join("w.hip"), src).unwrap();
    for (suite, extra) in [("sid", "-DHIP6"), ("rocm7.2", "-DHIP7")] {
        for gfx in ["gfx1100", "gfx1030", "gfx1200", "gfx11-generic", "gfx90a"] {
            let arch = format!("--offload-arch={gfx}");
            crate::support::in_toolchain_ok(
                suite,
                dir.path(),
                &["hipcc", "-x", "hip", &arch, extra, "-fsyntax-only", "w.hip"],
            );
        }
    }
}
