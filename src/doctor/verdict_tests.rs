//! Unit tests of `verdict.rs`.

use super::*;
use crate::doctor::pci::Bdf;

/// A GPU whose facts are only `path_result` (nothing from KFD, the log, HIP or a library).
fn gpu(path_result: PathResult) -> GpuReport {
    GpuReport {
        bdf: Bdf::parse("0000:03:00.0").unwrap(),
        id: "1002:744c".into(),
        gfx: Some("gfx1100".into()),
        gfx_source: Some("KFD topology".into()),
        kfd_node: Some(1),
        integrated: false,
        path: vec![],
        path_result,
        req_en: None,
        kernel_message: None,
        kernel_log_usable: false,
        kfd_atomics: None,
        kfd_link_flags: vec![],
        kfd_rejected: None,
        kernel_problems: vec![],
        hip_host_native_atomic: None,
        hip_ordinal: None,
        guest: None,
        library_states: vec![],
        verdict: VerdictKind::Inconclusive,
        reasons: vec![],
    }
}

#[test]
fn a_path_that_passes_is_not_affected_and_an_unreadable_one_is_inconclusive() {
    let mut g = gpu(PathResult::Passes {
        no_root_port: false,
    });
    decide_gpu(&mut g, &Hypervisor::default());
    assert_eq!(g.verdict, VerdictKind::NotAffected);
    let mut g = gpu(PathResult::Unreadable {
        at: Bdf::parse("0000:00:01.0").unwrap(),
        len: 64,
    });
    decide_gpu(&mut g, &Hypervisor::default());
    assert_eq!(g.verdict, VerdictKind::Inconclusive, "{:?}", g.reasons);
}

#[test]
fn the_runtime_saying_no_atomics_means_rebuild_unless_every_library_is_clean() {
    let mut g = gpu(PathResult::Passes {
        no_root_port: false,
    });
    g.hip_host_native_atomic = Some(0);
    decide_gpu(&mut g, &Hypervisor::default());
    assert_eq!(g.verdict, VerdictKind::Rebuild);
    let mut g = gpu(PathResult::Passes {
        no_root_port: false,
    });
    g.hip_host_native_atomic = Some(0);
    g.library_states = vec![("librccl.so.1".into(), TargetState::Clean { kernels: 3 })];
    decide_gpu(&mut g, &Hypervisor::default());
    assert_eq!(g.verdict, VerdictKind::NotAffected);
}

#[test]
fn aggregate_is_fix_vm_only_when_every_affected_gpu_has_a_vm_blocker() {
    let with = |v| {
        let mut g = gpu(PathResult::Passes {
            no_root_port: false,
        });
        g.verdict = v;
        g
    };
    assert_eq!(aggregate(&[]), None);
    assert_eq!(
        aggregate(&[
            with(VerdictKind::FixVmConfig),
            with(VerdictKind::NotAffected)
        ]),
        Some(VerdictKind::FixVmConfig)
    );
    assert_eq!(
        aggregate(&[with(VerdictKind::FixVmConfig), with(VerdictKind::Rebuild)]),
        Some(VerdictKind::Rebuild)
    );
    assert_eq!(
        aggregate(&[
            with(VerdictKind::NotAffected),
            with(VerdictKind::Inconclusive)
        ]),
        Some(VerdictKind::Inconclusive)
    );
}

#[test]
fn installed_release_reads_the_rocm_version_file() {
    assert_eq!(installed_release("7.2.1-81\n").as_deref(), Some("7.2.1"));
    assert_eq!(installed_release("6.4").as_deref(), Some("6.4"));
    assert_eq!(installed_release("garbage"), None);
}
