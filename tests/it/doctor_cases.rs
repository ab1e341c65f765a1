//! `rcclfix doctor` on the public reports it was first built on (ROCm/ROCm#6074, #6148, #6520,
//! vllm-project/vllm#38587, Proxmox guests) and the capture round trip; the trees come from
//! `doctor.rs`'s builder.

#![allow(unused_imports)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::doctor::*;
use super::doctor_inputs::*;
use super::doctor_logs::*;
use super::doctor_lspci::*;

// ---- cases ---------------------------------------------------------------------------------------

/// ROCm/ROCm#6520 machine 1: QEMU 11 guest, GPUs passed as single functions, emulated root ports
/// without the completer (so the host path or vfio is the problem, not the multifunction rule):
/// rebuild, with the VM configuration hint. The rank log carries no version banner, so the release
/// is unknown and no recipe is defaulted; the command still builds the affected GPUs' gfx1100.
#[test]
fn rocm6520_machine1_guest_root_port_without_completer() {
    let t = Tree::new();
    qemu_guest(&t);
    t.chain(&[
        root_port("00:1c.0", 0x1b36, 0x000c, 0),
        gpu("01:00.0", false),
    ]);
    t.chain(&[
        root_port("00:1c.1", 0x1b36, 0x000c, 0),
        gpu("02:00.0", false),
    ]);
    t.kfd(&[("01:00.0", 110000, 13, 0), ("02:00.0", 110000, 13, 0)]);
    let dmesg = data("rocm6520/dmesg-guest.txt");
    let log = data("logs/rocm6520_machine1_rank0.log");
    let o = doctor(&t, Some(&dmesg), &["--log", log.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "rebuild");
    assert_eq!(
        o.breaks("0000:01:00.0"),
        ("0000:00:1c.0".into(), "root-port-no-completer".into())
    );
    assert_eq!(
        o.breaks("0000:02:00.0"),
        ("0000:00:1c.1".into(), "root-port-no-completer".into())
    );
    assert!(
        o.text
            .contains("AtomicOpsCap: Routing- 32bit- 64bit- 128bitCAS-"),
        "{}",
        o.text
    );
    assert!(o.text.contains("[QEMU pcie-root-port]"), "{}", o.text);
    assert_eq!(o.json["logs"][0]["class"], "confirmed-refusal");
    assert_eq!(
        o.json["logs"][0]["refused_kernels"][0],
        "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"
    );
    assert_eq!(
        o.json["logs"][0]["rccl_enqueue_lines"][0],
        "enqueue.cc:2118"
    );
    assert!(
        o.json["headline"].as_str().unwrap().contains(
            "ROCm release unknown: run `rcclfix build --list` and pick the recipe for your release"
        ),
        "{}",
        o.json["headline"]
    );
    assert!(o.json["rebuild"]["tag"].is_null(), "{}", o.json["rebuild"]);
    assert_eq!(o.json["rebuild"]["targets"], serde_json::json!(["gfx1100"]));
    assert!(o.actions().contains("--targets gfx1100"), "{}", o.actions());
    assert!(!o.actions().contains("--tag 2.27.7"), "{}", o.actions());
    assert!(
        o.actions().contains("check the VM configuration first"),
        "{}",
        o.actions()
    );
    assert!(o.notes().contains("QEMU >= 11.0"), "{}", o.notes());
}

/// ROCm/ROCm#6520 machine 2: bare-metal Z390 seen from an LXC container; the chipset (PCH) root port lacks the
/// completer, the CPU root port has it: only the chipset-attached GPU is affected.
#[test]
fn rocm6520_machine2_chipset_slot_mixed() {
    let t = Tree::new();
    t.dmi(
        "Gigabyte Technology Co., Ltd.",
        "Z390 AORUS PRO",
        "Default string",
    );
    t.chain(&[
        root_port("00:01.0", 0x8086, 0x1901, HEALTHY_ROOT | COMP128),
        switch_up("01:00.0", ROUTE, 0),
        switch_down("02:00.0", ROUTE),
        gpu("03:00.0", true),
    ]);
    t.chain(&[
        root_port("00:1b.4", 0x8086, 0xa32c, 0),
        switch_up("05:00.0", ROUTE, 0),
        switch_down("06:00.0", ROUTE),
        gpu("07:00.0", false),
    ]);
    t.kfd(&[("03:00.0", 120001, 1, 0), ("07:00.0", 120001, 13, 0)]);
    let dmesg = data("rocm6520/dmesg-machine2.txt");
    let log = data("logs/rocm6520_machine2.log");
    let o = doctor(&t, Some(&dmesg), &["--log", log.to_str().unwrap()]);
    assert_eq!(o.verdict(), "rebuild", "{}", o.text);
    assert_eq!(o.gpu("0000:03:00.0")["verdict"], "not-affected");
    assert_eq!(o.gpu("0000:07:00.0")["verdict"], "rebuild");
    assert_eq!(o.gpu("0000:07:00.0")["gfx"], "gfx1201");
    // The excerpt has no amdgpu line for 03:00.0: silence there is unknown, not "no message".
    assert_eq!(o.gpu("0000:03:00.0")["kernel_log_usable"], false);
    assert_eq!(o.gpu("0000:07:00.0")["kernel_log_usable"], true);
    assert_eq!(
        o.breaks("0000:07:00.0"),
        ("0000:00:1b.4".into(), "root-port-no-completer".into())
    );
    // RCCL 2.30.4: NDEBUG alone is not enough on the device-linker pipeline.
    assert!(
        o.actions().contains("rcclfix build --tag 2.27.7"),
        "{}",
        o.actions()
    );
    // The report's "ROCm 10.0" is read (issue 38): that line's recipe, experimental, with the
    // device-linker caveat.
    assert_eq!(o.json["release"]["rocm"], "10.0", "{}", o.json["release"]);
    assert!(
        o.actions()
            .contains("NDEBUG still leaves declaring Generic kernels"),
        "{}",
        o.actions()
    );
    assert!(o.actions().contains("CPU-attached slot"), "{}", o.actions());
}

/// ROCm/ROCm#6074: only a log, no platform data: RCCL's launch returned hipErrorIllegalState
/// (consistent with the refusal) → rebuild, platform not checked until lspci/dmesg are supplied.
/// The release is only in the report's title line (`ROCm 7.2.1 / RCCL 2.27.7`), read since issue
/// 38 (before, none); rocminfo's gfx1100 becomes `--targets`.
#[test]
fn rocm6074_bare_metal_log_only() {
    let t = Tree::new();
    let log = data("logs/rocm6074_bare_metal.log");
    let o = doctor(&t, None, &["--log", log.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "rebuild");
    assert_eq!(o.json["logs"][0]["class"], "consistent-with-refusal");
    assert_eq!(
        o.json["logs"][0]["rccl_enqueue_lines"][0],
        "enqueue.cc:2061"
    );
    assert_eq!(o.json["rebuild"]["tag"], "2.27.7", "{}", o.json["rebuild"]);
    assert_eq!(o.json["rebuild"]["rocm"], "7.2.1", "{}", o.json["rebuild"]);
    assert_eq!(o.json["rebuild"]["targets"], serde_json::json!(["gfx1100"]));
    assert_eq!(
        o.json["headline"],
        "affected — rebuild RCCL: rcclfix build --tag 2.27.7 --targets gfx1100"
    );
    assert!(o.notes().contains("platform not checked"), "{}", o.notes());
    // The cuMem warning is recognised as noise, not evidence.
    let noise = o.json["logs"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["signature"] == "rccl-cumem-warning" && f["meaning"] == "noise");
    assert!(noise);
    assert_eq!(o.json["logs"][0]["versions"]["gfx"][0], "gfx1100");
}

/// ROCm/ROCm#6074, later comment: the RCCL banner names 2.30.4 / ROCm 7.14 and a Proxmox host kernel.
#[test]
fn rocm6074_pve_container_banner() {
    let t = Tree::new();
    let log = data("logs/rocm6074_pve_container.log");
    let o = doctor(&t, None, &["--log", log.to_str().unwrap()]);
    assert_eq!(o.verdict(), "rebuild", "{}", o.text);
    let v = &o.json["logs"][0]["versions"];
    assert_eq!(v["rccl"], "2.30.4");
    assert_eq!(v["rccl_commit"], "2b22ab0");
    assert_eq!(v["rocm"], "7.14.0.0-9999-2b22ab01");
    assert_eq!(v["librccl_path"], "/opt/rocm-therock/lib/librccl.so.1.0");
    assert_eq!(o.json["logs"][0]["rocm"]["release"], "7.14.0");
    assert!(o.notes().contains("Proxmox host kernel"), "{}", o.notes());
    assert!(o.actions().contains("device linker"), "{}", o.actions());
}

/// ROCm/ROCm#6148: gfx1201, ROCm 7.2 image, but no error text in the report body (it is in an
/// attachment): the release alone proves nothing → inconclusive, with the recipe it would be and
/// the next command. (Before: "rebuild 2.27.7" on the image tag alone.)
#[test]
fn rocm6148_vllm_gfx1201() {
    let t = Tree::new();
    let log = data("logs/rocm6148_vllm_gfx1201.log");
    let o = doctor(&t, None, &["--log", log.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}", o.text);
    assert_eq!(o.verdict(), "inconclusive", "{}", o.text);
    assert_eq!(
        o.json["headline"],
        "inconclusive — the log shows no hostcall refusal, and no GPU was examined"
    );
    assert_eq!(o.json["logs"][0]["class"], "no-signature");
    assert_eq!(o.json["logs"][0]["rocm"]["release"], "7.2");
    assert_eq!(o.json["logs"][0]["rocm"]["source"], "container image tag");
    assert!(
        o.notes()
            .contains("ROCm 7.2's shipped RCCL declares hidden_hostcall_buffer"),
        "{}",
        o.notes()
    );
    assert!(o.actions().contains("AMD_LOG_LEVEL=3"), "{}", o.actions());
    // The release is known: `release` names its recipe, with no command; no `rebuild` object on
    // an inconclusive verdict (issue 22: before, `rebuild.command` was runnable here).
    assert!(o.json["rebuild"].is_null(), "{}", o.json["rebuild"]);
    assert_eq!(o.json["release"]["recipe"], "2.27.7");
    assert_eq!(o.json["release"]["rocm"], "7.2");
}

/// vllm-project/vllm#38587: collect_env only; `roc-7.2.1` in the clang string pins the point
/// release, collect_env's GPU line the target. No error line: inconclusive, never a rebuild on the
/// release alone.
#[test]
fn vllm38587_collect_env() {
    let t = Tree::new();
    let log = data("logs/vllm38587_collect_env.txt");
    let o = doctor(&t, None, &["--log", log.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}", o.text);
    assert_eq!(o.verdict(), "inconclusive", "{}", o.text);
    assert!(o.json["rebuild"].is_null(), "{}", o.json["rebuild"]);
    assert_eq!(o.json["release"]["recipe"], "2.27.7");
    assert_eq!(o.json["release"]["recipe_status"], "expected");
    let l = &o.json["logs"][0];
    assert_eq!(l["versions"]["torch_rocm"], "7.2.53211-…");
    assert_eq!(l["versions"]["clang_roc"], "7.2.1");
    assert_eq!(l["rocm"]["release"], "7.2.1");
    assert_eq!(l["rocm"]["exact"], true);
    assert_eq!(l["rccl"], "2.27.7");
}

pub(crate) fn proxmox_guest(t: &Tree, fixed: bool) {
    t.dmi("QEMU", "Standard PC (Q35 + ICH9, 2009)", "pc-q35-9.0+pve0");
    t.hypervisor_flag();
    let rp_bits = if fixed { COMP32 | COMP64 } else { 0 };
    for (rp, g, a) in [
        ("00:1c.0", "01:00.0", "01:00.1"),
        ("00:1c.1", "02:00.0", "02:00.1"),
    ] {
        let mut gd = gpu(g, fixed);
        gd.multifunction = !fixed;
        let dir = t.chain(&[root_port(rp, 0x1b36, 0x000c, rp_bits), gd]);
        if !fixed {
            let mut ad = audio(a);
            ad.multifunction = true;
            t.sibling(&dir, &ad);
        }
    }
    let flags = if fixed { 1 } else { 13 };
    t.kfd(&[("01:00.0", 110000, flags, 0), ("02:00.0", 110000, flags, 0)]);
}

/// ROCm/ROCm#6520 (Proxmox) before: Proxmox passed each card with all functions → multifunction → fix the VM config.
#[test]
fn proxmox_multifunction() {
    let t = Tree::new();
    proxmox_guest(&t, false);
    let d = t.dmesg(
        "[    4.9] amdgpu 0000:01:00.0: PCIE atomic ops is not supported\n[    5.1] amdgpu 0000:02:00.0: PCIE atomic ops is not supported\n",
    );
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "fix-vm-config");
    for (g, rp) in [
        ("0000:01:00.0", "0000:00:1c.0"),
        ("0000:02:00.0", "0000:00:1c.1"),
    ] {
        assert_eq!(o.breaks(g), (rp.into(), "root-port-no-completer".into()));
        assert_eq!(o.gpu(g)["guest"]["multifunction"], true);
        assert_eq!(
            o.gpu(g)["guest"]["emulated_root_port"],
            "QEMU pcie-root-port"
        );
    }
    let a = o.actions();
    assert!(a.contains("hostpciN: <host-bus>:<dev>.0,pcie=1"), "{a}");
    assert!(a.contains("without `multifunction=on`"), "{a}");
    assert!(a.contains("audio"), "{a}");
    assert!(!a.contains("rcclfix build"), "no rebuild for a VM fix: {a}");
    snapshot("proxmox_multifunction", &o.text);
}

/// ROCm/ROCm#6520 (Proxmox) after: function .0 only → completer bits on the guest root port, ReqEn+, silent amdgpu.
#[test]
fn proxmox_proxmox_single_function_after_fix() {
    let t = Tree::new();
    proxmox_guest(&t, true);
    let d = t.dmesg("[    4.9] amdgpu 0000:01:00.0: amdgpu: SMU is initialized successfully!\n[    5.1] amdgpu 0000:02:00.0: amdgpu: SMU is initialized successfully!\n");
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.code, 0, "{}", o.text);
    assert_eq!(o.verdict(), "not-affected");
    assert_eq!(o.gpu("0000:01:00.0")["guest"]["multifunction"], false);
    assert_eq!(o.gpu("0000:01:00.0")["req_en"], true);
}

/// ROCm/ROCm#6520 on the Proxmox host: the host path passes (root port Routing- is not checked) and the VM
/// config names the whole slot → the exact replacement line.
#[test]
fn proxmox_proxmox_host_vm_config() {
    let t = Tree::new();
    t.dmi(
        "ASUSTeK COMPUTER INC.",
        "Pro WS WRX80E-SAGE SE WIFI",
        "Rev 1.xx",
    );
    let dir = t.chain(&[
        root_port("00:03.1", 0x1022, 0x1483, HEALTHY_ROOT),
        switch_up("09:00.0", ROUTE, 0),
        switch_down("0a:00.0", ROUTE),
        gpu("0b:00.0", true),
    ]);
    t.sibling(&dir, &audio("0b:00.1"));
    let cfg = data("proxmox/vm-multifunction.conf");
    let o = doctor(&t, None, &["--vm-config", cfg.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "fix-vm-config");
    assert_eq!(o.gpu("0000:0b:00.0")["path_result"]["result"], "passes");
    assert!(
        o.actions()
            .contains("replace `hostpci0: 0000:0b:00,pcie=1` with `hostpci0: 0000:0b:00.0,pcie=1`"),
        "{}",
        o.actions()
    );

    let good = data("proxmox/vm-single-function.conf");
    let o = doctor(&t, None, &["--vm-config", good.to_str().unwrap()]);
    assert_eq!(o.verdict(), "not-affected", "{}", o.text);
}

/// ROCm/rccl#958, ROCm/rccl#2124, kyuz0/amd-strix-halo-vllm-toolboxes#60, pytorch/pytorch#191366: look-alikes doctor must not call the hostcall refusal.
#[test]
fn configure_hang_symbol_and_smi_logs_are_not_this_bug() {
    let t = Tree::new();
    for (file, sig) in [
        ("logs/rccl958_configure.log", "rccl-target-list-ignored"),
        ("logs/rccl2124_ndebug_hang.log", "rccl-waitpeer-hang"),
        (
            "logs/toolboxes60_undefined_symbol.log",
            "abi-undefined-nccl-symbol",
        ),
        ("logs/pytorch191366_rocm_smi.log", "wheel-missing-rocm-smi"),
        (
            "logs/hostcall_buffer_missing.log",
            "clr-hostcall-buffer-missing",
        ),
        ("logs/torch_watchdog_hang.log", "torch-collective-timeout"),
    ] {
        let p = data(file);
        let o = doctor(&t, None, &["--log", p.to_str().unwrap()]);
        assert_eq!(o.code, 0, "{file}: {}", o.text);
        assert_eq!(o.verdict(), "not-affected", "{file}");
        assert_eq!(o.json["logs"][0]["class"], "different-problem", "{file}");
        assert!(
            o.json["headline"].as_str().unwrap().contains(sig),
            "{file}: {}",
            o.json["headline"]
        );
    }
}

/// A log confirming the refusal on a machine whose platform has atomics: not silently "OK".
#[test]
fn refusal_log_on_healthy_platform_is_inconclusive() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let log = data("logs/rocm6520_machine1_rank0.log");
    let o = doctor(&t, None, &["--log", log.to_str().unwrap()]);
    assert_eq!(o.verdict(), "inconclusive", "{}", o.text);
    assert!(o.notes().contains("another machine"), "{}", o.notes());
}

// ---- capture -------------------------------------------------------------------------------------

#[test]
fn capture_round_trip_without_serials_or_host_names() {
    let t = Tree::new();
    t.dmi(
        "Gigabyte Technology Co., Ltd.",
        "Z390 AORUS PRO",
        "Default string",
    );
    std::fs::create_dir_all(t.proc().join("sys/kernel")).unwrap();
    std::fs::write(t.proc().join("sys/kernel/hostname"), "gpubox-lab7\n").unwrap();
    t.chain(&[
        root_port("00:01.0", 0x8086, 0x1901, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let dir = t.chain(&[
        root_port("00:1b.4", 0x8086, 0xa32c, 0),
        gpu("07:00.0", false),
    ]);
    t.sibling(&dir, &audio("07:00.1"));
    // A 4 KiB config space with a serial-number-like tail that must not travel.
    let mut cfg = std::fs::read(dir.join("config")).unwrap();
    cfg.resize(4096, 0xab);
    std::fs::write(dir.join("config"), &cfg).unwrap();
    t.kfd(&[("03:00.0", 120001, 1, 0), ("07:00.0", 120001, 13, 0)]);
    let d = t.dmesg(
        "Nov 30 10:00:01 gpubox-lab7 kernel: amdgpu 0000:07:00.0: PCIE atomic ops is not supported\n\
         Nov 30 10:00:01 gpubox-lab7 kernel: amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!\n\
         Nov 30 10:00:02 gpubox-lab7 kernel: usb 1-1: SerialNumber: 123456\n",
    );
    let before = doctor(&t, Some(&d), &[]);
    assert_eq!(before.verdict(), "rebuild", "{}", before.text);

    let tar_path = t.path().join("snap.tar");
    let st = crate::support::rcclfix()
        .args(["doctor", "--sysfs"])
        .arg(t.sys())
        .arg("--proc")
        .arg(t.proc())
        .arg("--dmesg")
        .arg(&d)
        .arg("--capture")
        .arg(&tar_path)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );

    let mut names = vec![];
    let mut all_text = Vec::new();
    let mut ar = tar::Archive::new(std::fs::File::open(&tar_path).unwrap());
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let p = e.path().unwrap().display().to_string();
        if p.ends_with("/config") {
            assert!(
                e.header().size().unwrap() <= 256,
                "{p} keeps extended config space"
            );
        }
        std::io::Read::read_to_end(&mut e, &mut all_text).unwrap();
        names.push(p);
    }
    let text = String::from_utf8_lossy(&all_text);
    for secret in [
        "SER-1234-SECRET",
        "0badc0de",
        "BOARD-SECRET",
        "gpubox-lab7",
        "1234567890123456789",
        "SerialNumber",
    ] {
        assert!(!text.contains(secret), "capture leaks {secret}");
    }
    assert!(
        !names
            .iter()
            .any(|n| n.contains("serial") || n.contains("uuid")),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n == "sys/bus/pci/devices/0000:07:00.1"),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "dmesg.txt"));

    let after = run_doctor(&[
        "doctor".into(),
        "--snapshot".into(),
        tar_path.display().to_string(),
    ]);
    assert_eq!(after.verdict(), "rebuild", "{}", after.text);
    assert_eq!(after.breaks("0000:07:00.0"), before.breaks("0000:07:00.0"));
    assert_eq!(after.gpu("0000:03:00.0")["verdict"], "not-affected");
    assert_eq!(
        after.gpu("0000:07:00.0")["kernel_message"],
        "kernel: amdgpu 0000:07:00.0: PCIE atomic ops is not supported"
    );
}
