//! `rcclfix doctor --log`: evidence, not the release; the release and RCCL version from pasted
//! text; `--targets` for every affected GPU; VM guests where the VM is the cause; no vacuous
//! all-clear.

#![allow(unused_imports)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::doctor::*;
use super::doctor_cases::*;
use super::doctor_inputs::*;
use super::doctor_lspci::*;

// ---- log triage: evidence, not the release --------------------------------------------------------

/// Run doctor on `--log FILE` with an empty machine (no GPU): what a maintainer sees for a pasted
/// log.
pub(crate) fn log_only(file: &str) -> Out {
    let t = Tree::new();
    let p = data(file);
    doctor(&t, None, &["--log", p.to_str().unwrap()])
}

/// A user's own `-O0` HIP program refused at dispatch: the kernel is named, it is not RCCL's, and
/// rebuilding RCCL is not the fix (before: "rebuild --tag 2.27.7").
#[test]
fn own_o0_program_refusal_is_not_an_rccl_rebuild() {
    let o = log_only("logs/own_program_o0.log");
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "hostcall-outside-rccl");
    assert_eq!(o.json["logs"][0]["class"], "refusal-outside-rccl");
    let r = &o.json["logs"][0]["refusals"][0];
    assert_eq!(
        r["kernel"],
        "vectorAdd(float const*, float const*, float*, int)"
    );
    assert_eq!(r["owner"]["owner"], "other");
    assert_eq!(r["confirmed"], true);
    let h = o.json["headline"].as_str().unwrap();
    assert!(
        h.contains("vectorAdd(float const*, float const*, float*, int) (not an RCCL kernel) needs hostcall: rebuilding RCCL will not help"),
        "{h}"
    );
    assert!(!o.actions().contains("rcclfix build"), "{}", o.actions());
    assert!(
        o.actions().contains("`rcclfix scan` that file"),
        "{}",
        o.actions()
    );
    assert!(
        o.notes().contains("at -O0 every kernel declares"),
        "{}",
        o.notes()
    );
}

/// A device-printf unit test in a runtime CI log: refused, not RCCL's (before: rebuild).
#[test]
fn printf_test_in_ci_log_is_not_an_rccl_rebuild() {
    let o = log_only("logs/printf_test_ci.log");
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "hostcall-outside-rccl");
    assert_eq!(
        o.json["logs"][0]["refused_kernels"][0],
        "test_kernel_printf_flags(unsigned int*)"
    );
    assert!(
        o.json["headline"].as_str().unwrap().contains(
            "test_kernel_printf_flags(unsigned int*) (not an RCCL kernel) needs hostcall"
        ),
        "{}",
        o.json["headline"]
    );
}

/// A single-GPU PyTorch kernel refused at launch: the library is named from the kernel's namespace
/// (before: rebuild).
#[test]
fn torch_kernel_refusal_names_pytorch() {
    let o = log_only("logs/torch_single_gpu_refused.log");
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "hostcall-outside-rccl");
    let r = &o.json["logs"][0]["refusals"][0];
    assert_eq!(r["owner"]["library"], "PyTorch (libtorch_hip.so)");
    assert!(
        o.json["headline"]
            .as_str()
            .unwrap()
            .contains("(PyTorch (libtorch_hip.so)) needs hostcall: rebuilding RCCL will not help; a PCIe AtomicOps path for the GPU will"),
        "{}",
        o.json["headline"]
    );
    // The +rocm6.4 suffix is read, though the verdict is not a rebuild.
    assert_eq!(o.json["logs"][0]["rocm"]["release"], "6.4");
}

/// A bare `unhandled cuda error` from rccl-tests wraps many causes: inconclusive, exit 2 (before:
/// rebuild).
#[test]
fn bare_unhandled_cuda_error_is_inconclusive() {
    let o = log_only("logs/rccl_tests_unhandled.log");
    assert_eq!(o.code, 2, "{}", o.text);
    assert_eq!(o.verdict(), "inconclusive");
    assert_eq!(o.json["logs"][0]["class"], "inconclusive");
    assert_eq!(
        o.json["headline"],
        "inconclusive — the log has an error many causes produce (such as `unhandled cuda error`) but not the refusal signature, and no GPU was examined"
    );
    assert!(o.actions().contains("AMD_LOG_LEVEL=3"), "{}", o.actions());
}

/// A hang with no error at all, judged on a ROCm 7.2.1 banner alone: inconclusive, exit 2, and the
/// report says the release proves nothing (before: rebuild --tag 2.27.7).
#[test]
fn hang_with_release_banner_only_is_inconclusive() {
    let o = log_only("logs/hang_banner_only.log");
    assert_eq!(o.code, 2, "{}", o.text);
    assert_eq!(o.verdict(), "inconclusive");
    assert_eq!(o.json["logs"][0]["class"], "no-signature");
    assert_eq!(o.json["logs"][0]["rocm"]["release"], "7.2.1");
    assert_eq!(o.json["logs"][0]["rccl"], "2.27.7");
    assert_eq!(
        o.json["headline"],
        "inconclusive — the log shows no hostcall refusal, and no GPU was examined"
    );
    assert!(
        o.notes().contains("the release alone proves nothing"),
        "{}",
        o.notes()
    );
    assert!(
        !o.actions().contains("rcclfix build --tag"),
        "{}",
        o.actions()
    );
}

/// The same hang with the torch watchdog line: a different problem (a hang is not the refusal).
#[test]
fn hang_with_watchdog_is_a_different_problem() {
    let t = Tree::new();
    let p = t.path().join("hang.log");
    let mut text = std::fs::read_to_string(data("logs/hang_banner_only.log")).unwrap();
    text.push_str(&std::fs::read_to_string(data("logs/torch_watchdog_hang.log")).unwrap());
    std::fs::write(&p, text).unwrap();
    let o = doctor(&t, None, &["--log", p.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.text);
    assert_eq!(
        o.json["headline"],
        "not affected by the hostcall refusal — a different problem: torch-collective-timeout (from the log only; no GPU examined)"
    );
}

/// A refusal with no kernel name in a log that goes through RCCL (torch's `NCCL error: unhandled
/// cuda error` next to it) is RCCL's; the same refusal with nothing around it is unattributed.
#[test]
fn refusal_attribution_needs_a_kernel_name_or_rccl_context() {
    let t = Tree::new();
    let rccl = t.path().join("rccl.log");
    std::fs::write(&rccl, ":1:rocvirtual.cpp           :4208: … Pcie atomics not enabled, hostcall not supported\nRuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n").unwrap();
    let o = doctor(&t, None, &["--log", rccl.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "rebuild");
    assert_eq!(o.json["logs"][0]["class"], "confirmed-refusal");
    let bare = t.path().join("bare.log");
    std::fs::write(
        &bare,
        ":1:rocvirtual.cpp           :4208: … Pcie atomics not enabled, hostcall not supported\n",
    )
    .unwrap();
    let o = doctor(&t, None, &["--log", bare.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}", o.text);
    assert_eq!(o.json["logs"][0]["class"], "refusal-unattributed");
    assert_eq!(
        o.json["headline"],
        "inconclusive — the runtime refused a hostcall kernel, but the log does not say whose (rerun with AMD_LOG_LEVEL=3)"
    );
}

// ---- the ROCm release and RCCL version from pasted text -------------------------------------------

/// Every hint a pasted report carries, one row each: (text, ROCm release, exact, RCCL version).
#[test]
fn release_hints_in_pasted_text() {
    use rcclfix::doctor::triage::triage;
    let rows: &[(&str, Option<&str>, bool, Option<&str>)] = &[
        ("PyTorch version: 2.8.0+rocm6.4", Some("6.4"), false, Some("2.22.3")),
        ("[pip3] torch==2.5.1+rocm6.2.4", Some("6.2.4"), true, Some("2.20.5")),
        ("# rccl-tests: rccl-headers=23004 rccl-library=23004", None, false, Some("2.30.4")),
        ("# nccl-tests version 2.13.8 nccl-headers=22707 nccl-library=22707", None, false, Some("2.27.7")),
        ("INFO: vLLM 0.9.2 compiled with ROCm 6.3.4", Some("6.3.4"), true, Some("2.21.5")),
        ("OSError: /opt/rocm-6.4.1/lib/librccl.so.1: cannot open shared object file", Some("6.4.1"), true, Some("2.22.3")),
        ("ii  rccl  2.27.7.70101-38~24.04  amd64  ROCm Communication Collectives Library", Some("7.1.1"), true, Some("2.27.7")),
        ("Get:3 …/apt/7.2.1 noble/main amd64 rocm-core amd64 7.2.1.70201-81~24.04 [2,1 kB]", Some("7.2.1"), true, Some("2.27.7")),
        ("rccl_2.27.7.70200-43~24.04_amd64.deb", Some("7.2.0"), true, Some("2.27.7")),
        ("ROCM used to build PyTorch: 6.2.41133-dd7f95766", Some("6.2"), false, Some("2.20.5")),
        ("NCCL INFO RCCL version 2.18.3+hip6.0 HEAD:ffd8b1b", Some("6.0"), false, Some("2.18.3")),
        ("NCCL INFO RCCL version : 2.30.4-HEAD:2b22ab0", None, false, Some("2.30.4")),
        ("Clang version: 19.0.0git (https://github.com/RadeonOpenCompute/llvm-project roc-6.4.1 25133 …)", Some("6.4.1"), true, Some("2.22.3")),
        ("image: rocm/dev-ubuntu-24.04:7.0.2-complete", Some("7.0.2"), true, Some("2.26.6")),
        ("RuntimeError: NCCL error: unhandled cuda error", None, false, None),
    ];
    for (text, rocm, exact, rccl) in rows {
        let t = triage(text, "pasted");
        assert_eq!(
            t.rocm.as_ref().map(|r| r.release.as_str()),
            *rocm,
            "{text}: {:?}",
            t.hints
        );
        if rocm.is_some() {
            assert_eq!(t.rocm.as_ref().unwrap().exact, *exact, "{text}");
        }
        assert_eq!(t.rccl.as_deref(), *rccl, "{text}: {:?}", t.hints);
    }
    // GPU targets: collect_env's GPU line, a package name ending in the target, the override
    // variable; never build-configuration lines or kernel-database packages for every target.
    for (text, gfx) in [
        (
            "GPU models and configuration: AMD Radeon Pro VII (gfx906:sramecc+:xnack-)",
            vec!["gfx906"],
        ),
        (
            "Successfully installed rocblas-gfx906-6.4.1",
            vec!["gfx906"],
        ),
        ("export HSA_OVERRIDE_GFX_VERSION=10.3.0", vec!["gfx1030"]),
        ("-- Compiling for gfx803;gfx900;gfx1100", vec![]),
        ("ii  miopen-hip-gfx1030kdb  3.4.0.60401-83~24.04", vec![]),
        (
            "      Name:                    amdgcn-amd-amdhsa--gfx11-generic",
            vec![],
        ),
    ] {
        assert_eq!(triage(text, "pasted").versions.gfx, gfx, "{text}");
    }
    // Two releases that disagree are both named.
    let t = triage(
        "[pip3] torch==2.7.1+rocm6.3\nOSError: /opt/rocm-7.0.2/lib/libamdhip64.so: …\n",
        "pasted",
    );
    assert_eq!(t.rocm.as_ref().unwrap().release, "7.0.2");
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("other ROCm releases too: 6.3")),
        "{:?}",
        t.notes
    );
}

/// A refusal log naming its release only through torch's `+rocm6.4` suffix: the rebuild is the
/// 6.4 recipe for the log's gfx, not the 2.27.7 default. The same log without any hint says
/// "ROCm release unknown" and prints no tag.
#[test]
fn rebuild_recipe_follows_the_release_in_the_log() {
    let t = Tree::new();
    let refusal = ":3:rocvirtual.cpp           :3151: … ShaderName : ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)\n:1:rocvirtual.cpp           :3208: … Pcie atomics not enabled, hostcall not supported\n";
    let with = t.path().join("with.log");
    std::fs::write(
        &with,
        format!("[pip3] torch==2.8.0+rocm6.4\nGPU models and configuration: AMD Radeon RX 6800 XT (gfx1030)\n{refusal}"),
    )
    .unwrap();
    let o = doctor(&t, None, &["--log", with.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "rebuild");
    assert_eq!(
        o.json["headline"],
        "affected — rebuild RCCL: rcclfix build --tag 2.22.3 --targets gfx1030"
    );
    assert_eq!(o.json["rebuild"]["rocm"], "6.4");
    assert_eq!(o.json["rebuild"]["rccl"], "2.22.3");
    let without = t.path().join("without.log");
    std::fs::write(&without, refusal).unwrap();
    let o = doctor(&t, None, &["--log", without.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert!(o.json["rebuild"]["tag"].is_null(), "{}", o.json["rebuild"]);
    assert!(o.json["rebuild"]["command"].is_null());
    assert!(
        o.actions().contains(
            "ROCm release unknown: run `rcclfix build --list` and pick the recipe for your release"
        ),
        "{}",
        o.actions()
    );
    assert!(!o.actions().contains("--tag 2.27.7"), "{}", o.actions());
}

// ---- --targets for every affected GPU ------------------------------------------------------------

/// Two affected GPUs, gfx1030 from KFD and gfx1100 from its PCI ID alone (no KFD node): both are in
/// the printed command and in the JSON `rebuild` object (before: `--tag 2.27.7   (for gfx1030)`,
/// which builds the recipe's gfx1100 only).
#[test]
fn rebuild_command_carries_targets_for_every_affected_gpu() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, 0),
        dev(
            "03:00.0",
            0x1002,
            0x73bf,
            0x030000,
            Kind::Endpoint,
            COMP32 | COMP64,
            0,
        ),
    ]);
    t.chain(&[
        root_port("00:01.2", 0x1022, 0x1483, 0),
        gpu("07:00.0", false),
    ]);
    t.kfd(&[("03:00.0", 100300, 13, 0)]);
    let log = t.path().join("banner.log");
    std::fs::write(&log, "NCCL INFO RCCL version : 2.27.7-HEAD:96a25b5\n").unwrap();
    let o = doctor(&t, None, &["--log", log.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "rebuild");
    assert_eq!(o.gpu("0000:03:00.0")["gfx"], "gfx1030");
    assert_eq!(o.gpu("0000:03:00.0")["gfx_source"], "KFD topology");
    // Class 7: no KFD node, the PCI device ID says gfx1100.
    assert_eq!(o.gpu("0000:07:00.0")["gfx"], "gfx1100");
    assert_eq!(o.gpu("0000:07:00.0")["gfx_source"], "PCI ID 1002:744c");
    assert!(
        o.text.contains("gfx1100 (from the PCI ID 1002:744c)"),
        "{}",
        o.text
    );
    assert_eq!(
        o.json["rebuild"]["targets"],
        serde_json::json!(["gfx1030", "gfx1100"])
    );
    assert_eq!(
        o.json["rebuild"]["command"],
        "rcclfix build --tag 2.27.7 --targets gfx1030,gfx1100"
    );
    assert!(
        o.actions()
            .contains("rcclfix build --tag 2.27.7 --targets gfx1030,gfx1100"),
        "{}",
        o.actions()
    );
}

/// The PCI ID table against pciutils' own database where it has the ID: each row's chip name
/// appears in pci.ids' name for that device (pci.ids from 2023 lacks the newest IDs; those are
/// skipped, not assumed).
#[test]
fn pci_id_table_agrees_with_pci_ids() {
    let ids = ["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok());
    let slow = std::env::var_os("RCCLFIX_SLOW_TESTS").is_some_and(|v| v == "1");
    let Some(ids) = ids else {
        assert!(
            !slow,
            "RCCLFIX_SLOW_TESTS=1 but pci.ids is missing: install pciutils"
        );
        eprintln!("skipped: no pci.ids");
        return;
    };
    let amd: String = ids
        .split("\n1002  ")
        .nth(1)
        .unwrap()
        .split("\n1003  ")
        .next()
        .unwrap()
        .to_owned();
    let mut checked = 0;
    for (id, chip, gfx) in rcclfix::doctor::ids::GPU_IDS {
        let Some(line) = amd
            .lines()
            .find(|l| l.starts_with(&format!("\t{id:04x}  ")))
        else {
            continue;
        };
        assert!(
            line.contains(chip),
            "{id:04x} {chip} {gfx}: pci.ids says {line:?}"
        );
        assert_eq!(
            rcclfix::doctor::ids::gfx_for_chip_name(line),
            Some(*gfx),
            "{line}"
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} IDs found in pci.ids");
}

// ---- VM guests where the VM is the cause -----------------------------------------------------------

/// A QEMU guest with machine type pc-q35-5.1, single-function GPU at devfn 0: QEMU before 8.1
/// never sets the completer bits, so the fix is the QEMU version — not "hardware/firmware", not a
/// rebuild first (before: rebuild).
#[test]
fn pre_8_1_qemu_machine_type_is_a_vm_fix() {
    let t = Tree::new();
    t.dmi("QEMU", "Standard PC (Q35 + ICH9, 2009)", "pc-q35-5.1");
    t.hypervisor_flag();
    t.chain(&[
        root_port("00:1c.0", 0x1b36, 0x000c, 0),
        gpu("01:00.0", false),
    ]);
    let d = t.dmesg("[    4.9] amdgpu 0000:01:00.0: PCIE atomic ops is not supported\n");
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "fix-vm-config");
    assert_eq!(
        o.gpu("0000:01:00.0")["guest"]["blockers"][0],
        serde_json::json!({"kind": "qemu-before81", "machine": "pc-q35-5.1"})
    );
    assert_eq!(
        o.json["headline"],
        "affected — fix the VM: its QEMU machine type predates 8.1, which never advertises AtomicOp completion (no rebuild needed)"
    );
    let a = o.actions();
    assert!(a.contains("Run the VM on a QEMU >= 8.1 host"), "{a}");
    assert!(
        a.contains("single function at devfn 0 on a PCIe root port"),
        "{a}"
    );
    assert!(!a.contains("rcclfix build"), "{a}");
    assert!(!o.text.to_lowercase().contains("firmware"), "{}", o.text);
}

/// A guest GPU without a PCI Express capability on the root bus of an i440fx VM: normal for that
/// layout, so `pcie=1` on q35 is the fix, never "malformed" or "rebuild first" (before:
/// inconclusive, malformed config space).
#[test]
fn guest_gpu_without_pcie_capability_is_a_vm_fix() {
    let t = Tree::new();
    t.dmi("QEMU", "Standard PC (i440FX + PIIX, 1996)", "pc-i440fx-9.0");
    t.hypervisor_flag();
    let dir = t.chain(&[gpu("00:10.0", false)]);
    let mut cfg = std::fs::read(dir.join("config")).unwrap();
    cfg[0x61] = 0; // the list ends after MSI: no PCI Express capability
    std::fs::write(dir.join("config"), &cfg).unwrap();
    let d = t.dmesg("[    4.9] amdgpu 0000:00:10.0: PCIE atomic ops is not supported\n");
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "fix-vm-config");
    let g = o.gpu("0000:00:10.0");
    assert_eq!(g["path_result"]["result"], "device-refused", "{g}");
    assert_eq!(g["guest"]["blockers"][0]["kind"], "no-pcie-capability");
    assert!(
        g["reasons"]
            .to_string()
            .contains("so the fix is `pcie=1` on a q35 machine"),
        "{g}"
    );
    assert!(!o.text.contains("unreadable"), "{}", o.text);
    assert!(!o.actions().contains("rcclfix build"), "{}", o.actions());
    assert!(
        o.actions().contains("`machine: q35` and `pcie=1`"),
        "{}",
        o.actions()
    );
}

/// On the host, `--vm-config` judges a whole-slot `hostpciN` by the functions the slot really has:
/// a slot with one function is a single-function device (before: "GPU + HDMI audio" assumed, fix
/// the VM); with an audio function, that function is named from sysfs.
#[test]
fn host_vm_config_reads_the_slot_functions_from_sysfs() {
    let cfg = data("proxmox/vm-multifunction.conf");
    let t = Tree::new();
    t.chain(&[
        root_port("00:03.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("0b:00.0", true),
    ]);
    let o = doctor(&t, None, &["--vm-config", cfg.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.text);
    assert_eq!(o.verdict(), "not-affected");
    assert!(o.json["vm_configs"][0]["hostpci"][0]["problems"]
        .as_array()
        .unwrap()
        .is_empty());

    let t = Tree::new();
    let dir = t.chain(&[
        root_port("00:03.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("0b:00.0", true),
    ]);
    t.sibling(&dir, &audio("0b:00.1"));
    let o = doctor(&t, None, &["--vm-config", cfg.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "fix-vm-config");
    let p = o.json["vm_configs"][0]["hostpci"][0]["problems"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        p.contains("this host's slot has 2: 0000:0b:00.0 (1002:744c, GPU), 0000:0b:00.1 (1002:ab30, audio)"),
        "{p}"
    );
    assert!(
        o.actions()
            .contains("the slot's other functions (0000:0b:00.1 (1002:ab30, audio))"),
        "{}",
        o.actions()
    );
    // The slot is not in this sysfs: said so, not assumed.
    let t = Tree::new();
    let o = doctor(&t, None, &["--vm-config", cfg.to_str().unwrap()]);
    assert!(
        o.json["vm_configs"][0]["hostpci"][0]["problems"][0]
            .as_str()
            .unwrap()
            .contains("could not check which functions it has"),
        "{}",
        o.json["vm_configs"]
    );
}

// ---- no vacuous all-clear ------------------------------------------------------------------------

/// With no GPU examined, the headline never claims every GPU has a path, and the report lists what
/// was and was not examined (before: "every GPU has a PCIe AtomicOps path").
#[test]
fn no_gpu_examined_is_never_an_all_clear() {
    let t = Tree::new();
    let good = data("proxmox/vm-single-function.conf");
    let o = doctor(&t, None, &["--vm-config", good.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.text);
    assert_eq!(
        o.json["headline"],
        "no AtomicOps problem in the VM configuration (no GPU examined here: run `rcclfix doctor` in the guest too)"
    );
    assert!(!o.text.contains("every GPU"), "{}", o.text);
    let ne = o.json["not_examined"].to_string();
    assert!(ne.contains("GPUs: no AMD GPU in"), "{ne}");
    assert!(ne.contains("kernel log"), "{ne}");
    assert!(o.text.contains("Examined: VM config"), "{}", o.text);
    assert!(
        o.text.contains("Not examined: GPUs: no AMD GPU"),
        "{}",
        o.text
    );
    // A GPU that passes: "the one AMD GPU examined".
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let o = doctor(&t, None, &[]);
    assert_eq!(
        o.json["headline"],
        "not affected: the one AMD GPU examined has a PCIe AtomicOps path (hostcall kernels run)"
    );
}

// ---- issue 38: the release in prose, and the owner a source file names ---------------------------

/// Run doctor on `--log` holding `text` with an empty machine.
fn log_text(text: &str) -> Out {
    let t = Tree::new();
    let p = t.path().join("report.txt");
    std::fs::write(&p, text).unwrap();
    doctor(&t, None, &["--log", p.to_str().unwrap()])
}

/// "ROCm 6.4.4" in prose is the point release (before: only `6.4`, from the `+rocm6.4` tag).
#[test]
fn rocm_point_release_in_prose_refines_the_family_tag() {
    let o = log_text(
        "Environment: Ubuntu 24.04, ROCm 6.4.4, two RX 7900 XTX\ntorch 2.7.1+rocm6.4\n:1:rocvirtual.cpp :4208: 2 us: Pcie atomics not enabled, hostcall not supported\nenqueue.cc:2061 NCCL WARN HIP failure 'the operation cannot be performed in the present state'\n",
    );
    assert_eq!(o.code, 1, "{}", o.text);
    let r = &o.json["logs"][0]["rocm"];
    assert_eq!(r["release"], "6.4.4", "{r}");
    assert_eq!(r["exact"], true, "{r}");
    assert_eq!(r["source"], "\"ROCm 6.4.4\" in the text", "{r}");
}

/// "ROCm 10.0" in a report's title line is read (before: not at all).
#[test]
fn rocm_release_in_a_title_line_is_read() {
    let o = log_text(
        "[Issue]: RCCL all_reduce fails on ROCm 10.0 with two gfx1201\nenqueue.cc:2119 NCCL WARN HIP failure 'the operation cannot be performed in the present state'\n",
    );
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.json["logs"][0]["rocm"]["release"], "10.0");
    assert_eq!(o.json["release"]["rocm"], "10.0");
    // Not prose: a path, a tag, a container image.
    for (line, none) in [
        ("/opt/rocm-7.2.1/lib/librccl.so", "7.2.1"),
        ("see ROCm/ROCm#6074 for details", ""),
        ("rocm/pytorch:rocm7.2_ubuntu24.04", "7.2"),
    ] {
        let o = log_text(&format!("{line}\n"));
        let src = o.json["logs"][0]["rocm"]["source"].as_str().unwrap_or("");
        assert!(!src.contains("in the text"), "{line}: {src}");
        assert_eq!(
            o.json["logs"][0]["rocm"]["release"].as_str().unwrap_or(""),
            none,
            "{line}"
        );
    }
}

/// A refused kernel in a log that names `ggml-cuda.cu` is ggml's (before: "a library the log does
/// not name").
#[test]
fn refusal_in_a_log_naming_ggml_cuda_is_ggmls() {
    let o = log_text(
        "ggml_cuda_init: found 2 ROCm devices:\n  Device 0: AMD Radeon RX 7900 XTX, gfx1100 (0x1100), VMM: no, Wave Size: 32\n:3:rocvirtual.cpp :4151: 1 us: ShaderName : void mul_mat_q<(ggml_type)12, 64, false>(char const*, int const*, float*, int, int, int, int, int)\n:1:rocvirtual.cpp :4208: 2 us: Pcie atomics not enabled, hostcall not supported\nCUDA error: the operation cannot be performed in the present state\n  current device: 0, in function ggml_cuda_op_mul_mat_q at /app/ggml/src/ggml-cuda/ggml-cuda.cu:1234\n/app/ggml/src/ggml-cuda/ggml-cuda.cu:75: CUDA error\n",
    );
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "hostcall-outside-rccl");
    let lib = o.json["logs"][0]["refusals"][0]["owner"]["library"]
        .as_str()
        .unwrap();
    assert!(lib.starts_with("ggml"), "{lib}");
    assert!(
        !o.text.contains("a library the log does not name"),
        "{}",
        o.text
    );
    assert!(
        o.json["headline"].as_str().unwrap().contains("(ggml"),
        "{}",
        o.json["headline"]
    );
}
