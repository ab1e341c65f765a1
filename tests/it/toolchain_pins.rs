//! A rootfs toolchain's pinned packages come from the pinned suite and nothing else does: the
//! `debian-rocm7.2` toolchain takes its ROCm packages from Debian experimental and its compilers
//! from sid (slow: `RCCLFIX_SLOW_TESTS=1`, the real toolchain under `$RCCLFIX_HOME/toolchains`).

use crate::support::slow_or_note;

/// The built debian-rocm7.2 toolchain took its ROCm packages from experimental and nothing else
/// it was not told to: every pinned package that is installed is in the stamp's `from_suites`,
/// hipcc is 7.2.x, and the compilers come from sid.
#[test]
fn slow_rocm72_toolchain_takes_only_the_pinned_packages_from_experimental() {
    if !slow_or_note() {
        return;
    }
    let stamp_path = rcclfix::paths::toolchains_dir().join("debian-rocm7.2/stamp.json");
    let text = std::fs::read_to_string(&stamp_path).unwrap_or_else(|e| {
        panic!(
            "RCCLFIX_SLOW_TESTS=1 but {}: {e}\nhelp: rcclfix toolchain build debian-rocm7.2",
            stamp_path.display()
        )
    });
    let stamp: rcclfix::container::toolchain::Stamp = serde_json::from_str(&text).unwrap();
    let desc = rcclfix::container::ToolchainDesc::embedded("debian-rocm7.2").unwrap();
    let exp = &stamp.from_suites["experimental"];
    let installed = |name: &str| {
        stamp
            .packages
            .iter()
            .find(|nv| nv.starts_with(&format!("{name}=")))
            .cloned()
    };
    for p in &desc.pin[0].packages {
        if let Some(nv) = installed(p) {
            assert!(exp.contains(&nv), "{nv} did not come from experimental");
        }
    }
    assert!(installed("hipcc").unwrap().starts_with("hipcc=7.2."));
    for p in ["clang-22", "cmake", "libc6", "rocm-cmake"] {
        let nv = installed(p).unwrap_or_else(|| panic!("{p} is not installed"));
        assert!(!exp.contains(&nv), "{nv} came from experimental");
    }
    // What came from experimental is ROCm: every such package is built from a ROCm source.
    for nv in exp {
        let name = nv.split('=').next().unwrap();
        assert!(
            name.contains("amd")
                || name.contains("hip")
                || name.contains("hsa")
                || name.contains("rocm")
                || name.contains("oam"),
            "{nv} came from experimental"
        );
    }
}
