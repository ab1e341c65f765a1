//! The toolchain a proof ran in, as `prove.json` records it ([`ToolchainRecord`]): its name, its
//! content id, the engine, and the compiler and HIP package versions, so the record names what
//! compiled both libraries without its sibling `manifest.json`.

use serde::{Deserialize, Serialize};

/// The toolchain of a proof, so `prove.json` says what compiled both libraries without its
/// sibling `manifest.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolchainRecord {
    /// The toolchain's name: `debian-sid`, or an image reference.
    pub name: String,
    /// Its content id ([`crate::container::Toolchain::id`]): `sha256:` of a rootfs toolchain's
    /// stamp, the same under every engine and across re-imports; an image toolchain's image id.
    pub id: String,
    /// The engine the builds ran under (`podman`, `docker`, `bubblewrap`, `host`).
    pub engine: String,
    /// A rootfs toolchain's compiler and HIP packages as `name=version` (clang, lld, llvm,
    /// hipcc, libamdhip64, comgr, the device libraries; [`COMPILER_PACKAGES`]), sorted; empty for
    /// image and host toolchains, whose packages rcclfix does not read.
    pub compiler: Vec<String>,
}

/// Name prefixes of the Debian packages [`ToolchainRecord::compiler`] keeps.
pub const COMPILER_PACKAGES: &[&str] = &[
    "clang-",
    "lld-",
    "llvm-",
    "hipcc",
    "libamdhip64-",
    "libamd-comgr",
    "rocm-device-libs",
];

impl ToolchainRecord {
    /// The record of toolchain `name` (content id `id`) under `engine`, keeping the compiler and
    /// HIP packages of `packages` (`name=version`, a manifest's `toolchain_packages`).
    pub fn new(name: &str, id: &str, engine: &str, packages: &[String]) -> ToolchainRecord {
        let mut compiler: Vec<String> = packages
            .iter()
            .filter(|p| {
                let n = p.split('=').next().unwrap_or("");
                COMPILER_PACKAGES.iter().any(|k| n.starts_with(k))
            })
            .cloned()
            .collect();
        compiler.sort();
        ToolchainRecord {
            name: name.into(),
            id: id.into(),
            engine: engine.into(),
            compiler,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_compiler_and_hip_packages_sorted() {
        let packages: Vec<String> = [
            "bash=5.3-4",
            "libamdhip64-7=7.2.4-1~exp2",
            "clang-22=1:22.1.8-3",
            "hipcc=7.2.4+dfsg-1~exp1",
            "libclang-cpp22=1:22.1.8-3",
            "lld-22=1:22.1.8-3",
            "rocm-device-libs-22=7.2.4+dfsg-1~exp1",
            "libamd-comgr3=7.2.4+dfsg-1~exp1",
            "llvm-22=1:22.1.8-3",
            "gcc-16=16.2.0-4",
        ]
        .map(String::from)
        .to_vec();
        let r = ToolchainRecord::new("debian-rocm7.2", "sha256:ab", "podman", &packages);
        assert_eq!(
            r.compiler,
            [
                "clang-22=1:22.1.8-3",
                "hipcc=7.2.4+dfsg-1~exp1",
                "libamd-comgr3=7.2.4+dfsg-1~exp1",
                "libamdhip64-7=7.2.4-1~exp2",
                "lld-22=1:22.1.8-3",
                "llvm-22=1:22.1.8-3",
                "rocm-device-libs-22=7.2.4+dfsg-1~exp1",
            ]
        );
        assert_eq!(
            (r.name.as_str(), r.id.as_str()),
            ("debian-rocm7.2", "sha256:ab")
        );
    }

    #[test]
    fn a_record_from_before_the_field_still_reads() {
        let text =
            include_str!("../../../recipes/records/2.21.5-debian-rocm7.2-gfx1100/prove.json");
        let r: super::super::ProveRecord = serde_json::from_str(text).unwrap();
        assert_eq!(r.toolchain, None);
        let mut with = r.clone();
        with.toolchain = Some(ToolchainRecord::new(
            "debian-rocm7.2",
            "sha256:ab",
            "podman",
            &[],
        ));
        let back: super::super::ProveRecord =
            serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
        assert_eq!(back, with);
        assert!(super::super::render(&with)
            .lines()
            .nth(1)
            .is_some_and(|l| l == "toolchain debian-rocm7.2 (sha256:ab) via podman"));
    }
}
