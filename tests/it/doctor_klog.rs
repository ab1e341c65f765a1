//! `rcclfix doctor` with a kernel log as evidence in its own right (issue 38, item 1): amdgpu's
//! and the PCI core's lines name each GPU by address; `PCIE atomic ops is not supported` is "no
//! AtomicOps path", page faults, resets and a virtual function's mailbox failing are other
//! problems. Every kernel log here is our own text, shaped like the public reports'
//! (ROCm/ROCm#6520's `amdgpu 0000:07:00.0: PCIE atomic ops is not supported`, KFD's `skipped
//! device … PCI rejects atomics`), in the prefixes users paste: plain `dmesg`, `dmesg -T`,
//! journalctl, with other drivers' lines between.

use super::doctor::*;

/// Run doctor on an empty machine with `dmesg` as the kernel log, plus `extra`.
fn klog_only(dmesg: &str, extra: &[&str]) -> Out {
    let t = Tree::new();
    let d = t.dmesg(dmesg);
    doctor(&t, Some(&d), extra)
}

/// The GPUs the report names without config space, as `(bdf, id)`.
fn seen(o: &Out) -> Vec<(String, String)> {
    o.json["gpus_seen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["bdf"].as_str().unwrap_or("").to_owned(),
                s["id"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// A PCIe 2.0 board: the PCI core enumerates the card, amdgpu says it has no AtomicOps path.
pub(crate) const PCIE2_DMESG: &str = "\
[    0.000000] Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103) #49-Ubuntu SMP
[    0.351200] pci 0000:00:02.0: [8086:3c04] type 01 class 0x060400 PCIe Root Port
[    0.352210] pci 0000:03:00.0: [1002:744c] type 00 class 0x030000 PCIe Legacy Endpoint
[    0.352290] pci 0000:03:00.1: [1002:ab30] type 00 class 0x040300 PCIe Legacy Endpoint
[    1.902113] nvme 0000:01:00.0: platform quirk: setting simple suspend
[    4.101234] [drm] amdgpu kernel modesetting enabled.
[    4.118002] amdgpu 0000:03:00.0: enabling device (0006 -> 0007)
[    4.123456] amdgpu 0000:03:00.0: amdgpu: PCIE atomic ops is not supported
[    4.530000] snd_hda_intel 0000:03:00.1: bound 0000:03:00.0 (ops amdgpu_dm_audio_component_bind_ops [amdgpu])
[    5.001122] kfd kfd: amdgpu: added device 1002:744c
";

/// Issue 38: a kernel log alone that names a GPU without an AtomicOps path is a finding: affected
/// (exit 1), the GPU named by address, ID and target (before: "not affected: no AMD GPU found",
/// exit 0).
#[test]
fn kernel_log_alone_with_no_atomics_is_affected_and_names_the_gpu() {
    let o = klog_only(PCIE2_DMESG, &[]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "rebuild");
    assert_eq!(seen(&o), vec![("0000:03:00.0".into(), "1002:744c".into())]);
    let s = &o.json["gpus_seen"][0];
    assert_eq!(s["gfx"], "gfx1100");
    assert_eq!(s["seen_in"], "kernel log");
    assert!(s["no_atomics"]
        .as_str()
        .unwrap()
        .contains("amdgpu 0000:03:00.0: amdgpu: PCIE atomic ops is not supported"));
    let h = o.json["headline"].as_str().unwrap();
    assert!(h.starts_with("affected — amdgpu reports no PCIe AtomicOps path for the AMD GPU 1002:744c (Navi 31, gfx1100) at 0000:03:00.0 (kernel log)"), "{h}");
    assert!(!h.contains("no AMD GPU found"), "{h}");
    assert!(
        o.text.contains("GPU 0000:03:00.0  1002:744c  gfx1100  (seen in the kernel log; config space not examined)"),
        "{}",
        o.text
    );
    assert_eq!(o.json["rebuild"]["targets"][0], "gfx1100");
    assert!(
        o.actions()
            .contains("the PCIe path of that GPU was not examined"),
        "{}",
        o.actions()
    );
}

/// The same board with `rocminfo` and a release as a `--log` (before: "inconclusive", the GPU and
/// its atomics line never named): affected, the recipe of the log's release.
#[test]
fn kernel_log_with_rocminfo_names_the_gpu_and_its_atomics_line() {
    let t = Tree::new();
    let d = t.dmesg(PCIE2_DMESG);
    let log = t.path().join("rocminfo.txt");
    std::fs::write(
        &log,
        "ROCk module version 6.8.5 is loaded\n*******\nAgent 2\n*******\n  Name:                    gfx1100\n  Marketing Name:          AMD Radeon RX 7900 XTX\n  Compute Unit:            96\n/opt/rocm-7.2.1/bin/rocminfo\n",
    )
    .unwrap();
    let o = doctor(&t, Some(&d), &["--log", log.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "rebuild");
    assert_eq!(seen(&o)[0].0, "0000:03:00.0");
    assert!(
        o.text.contains("PCIE atomic ops is not supported"),
        "{}",
        o.text
    );
    assert_eq!(o.json["rebuild"]["rocm"], "7.2.1");
}

/// `dmesg -T` with two GPUs and other drivers' lines between: the one without a path makes the
/// report affected, and both are named.
#[test]
fn dmesg_t_with_two_gpus_names_both() {
    let o = klog_only(
        "\
[Fri Dec  4 12:00:01 2026] pci 0000:0b:00.0: [1002:744c] type 00 class 0x030000 PCIe Legacy Endpoint
[Fri Dec  4 12:00:01 2026] pci 0000:0e:00.0: [1002:7550] type 00 class 0x030000 PCIe Legacy Endpoint
[Fri Dec  4 12:00:02 2026] r8169 0000:05:00.0 enp5s0: Link is Up - 1Gbps/Full
[Fri Dec  4 12:00:03 2026] amdgpu 0000:0b:00.0: amdgpu: SMU is initialized successfully!
[Fri Dec  4 12:00:03 2026] xhci_hcd 0000:0f:00.3: xHCI Host Controller
[Fri Dec  4 12:00:04 2026] amdgpu 0000:0e:00.0: amdgpu: PCIE atomic ops is not supported
[Fri Dec  4 12:00:04 2026] amdgpu 0000:0e:00.0: amdgpu: SMU is initialized successfully!
",
        &[],
    );
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(
        seen(&o),
        vec![
            ("0000:0b:00.0".into(), "1002:744c".into()),
            ("0000:0e:00.0".into(), "1002:7550".into())
        ]
    );
    let h = o.json["headline"].as_str().unwrap();
    assert!(h.contains("at 0000:0e:00.0"), "{h}");
    assert!(!h.contains("0000:0b:00.0"), "{h}");
    for b in ["GPU 0000:0b:00.0", "GPU 0000:0e:00.0"] {
        assert!(o.text.contains(b), "{b}: {}", o.text);
    }
    assert!(!o.text.contains("0000:05:00.0  "), "{}", o.text);
}

/// journalctl's prefix, with a host named `amdgpu` and the newer wording.
#[test]
fn journalctl_prefix_with_a_host_named_amdgpu() {
    let o = klog_only(
        "\
Dec 04 12:00:00 amdgpu kernel: Linux version 6.11.0-13-generic
Dec 04 12:00:05 amdgpu kernel: amdgpu 0000:07:00.0: amdgpu: PCIe atomic ops are not supported
Dec 04 12:00:05 amdgpu systemd[1]: Started session-1.scope.
",
        &[],
    );
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(seen(&o), vec![("0000:07:00.0".into(), String::new())]);
    assert!(
        o.text.contains("GPU 0000:07:00.0  (ID not shown)"),
        "{}",
        o.text
    );
}

/// A Xen guest's page faults for a named GPU: a different problem, named (exit 0), never "no AMD
/// GPU found".
#[test]
fn xen_guest_page_faults_are_a_different_problem() {
    let o = klog_only(
        "\
[    0.000000] Booting paravirtualized kernel on Xen HVM
[    3.210000] amdgpu 0000:00:05.0: amdgpu: VRAM: 24560M 0x0000008000000000 - 0x00000085FEFFFFFF (24560M used)
[  120.100000] amdgpu 0000:00:05.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)
[  120.100010] amdgpu 0000:00:05.0: amdgpu:  in process python3 pid 4242 thread python3 pid 4242
[  120.100020] amdgpu 0000:00:05.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00800932
",
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.text);
    let h = o.json["headline"].as_str().unwrap();
    assert!(
        h.contains("the kernel log shows a different problem: GPU page fault on the AMD GPU (ID not shown) at 0000:00:05.0"),
        "{h}"
    );
    assert!(!h.contains("no AMD GPU found"), "{h}");
    assert_eq!(o.json["gpus_seen"][0]["problems"][0]["kind"], "page-fault");
    assert!(o.actions().contains("IOMMU"), "{}", o.actions());
}

/// A virtual function's mailbox loop (an MI50 behind a Thunderbolt enclosure in the public report
/// shape): a different problem, named.
#[test]
fn vf_mailbox_loop_is_a_different_problem() {
    let o = klog_only(
        "\
[   12.000001] thunderbolt 0-1: new device found, vendor=0x1 device=0x8006
[   14.500000] pci 0000:3c:00.0: [1002:66a1] type 00 class 0x038000 PCIe Legacy Endpoint
[   15.000000] amdgpu 0000:3c:00.0: amdgpu: trn=2 ACK should not assert! wait again !
[   15.100000] amdgpu 0000:3c:00.0: amdgpu: trn=2 ACK should not assert! wait again !
[   15.200000] amdgpu 0000:3c:00.0: amdgpu: Doesn't get ack from pf, give up
",
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.text);
    assert_eq!(seen(&o), vec![("0000:3c:00.0".into(), "1002:66a1".into())]);
    let h = o.json["headline"].as_str().unwrap();
    assert!(
        h.contains("virtual-function mailbox to the host failing on the AMD GPU 1002:66a1"),
        "{h}"
    );
    assert!(o.actions().contains("host side"), "{}", o.actions());
}

/// A ring timeout with no address (`[drm:amdgpu_job_timedout [amdgpu]]`) goes to the one GPU the
/// log names.
#[test]
fn ring_timeout_without_an_address_goes_to_the_one_gpu() {
    let o = klog_only(
        "\
[    4.0] amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!
[  300.0] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=1234, emitted seq=1236
[  300.1] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!
",
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.text);
    let p = o.json["gpus_seen"][0]["problems"].as_array().unwrap();
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p.iter().all(|x| x["kind"] == "reset"));
}

/// A kernel log that names a GPU and says nothing about AtomicOps or problems: inconclusive
/// (exit 2), the GPU named.
#[test]
fn kernel_log_naming_a_quiet_gpu_is_inconclusive() {
    let o = klog_only(
        "[    4.0] amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!\n",
        &[],
    );
    assert_eq!(o.code, 2, "{}", o.text);
    assert!(
        o.json["headline"]
            .as_str()
            .unwrap()
            .contains("the evidence shows the AMD GPU (ID not shown) at 0000:03:00.0"),
        "{}",
        o.json["headline"]
    );
}

/// Kernel lines pasted into a `--log` (no `--dmesg`) name the GPU too.
#[test]
fn kernel_lines_pasted_into_a_log_name_the_gpu() {
    let t = Tree::new();
    let log = t.path().join("report.txt");
    std::fs::write(
        &log,
        "Steps: ran the script below\n$ sudo dmesg | grep -i amdgpu\n[    5.335110] amdgpu 0000:07:00.0: PCIE atomic ops is not supported\n",
    )
    .unwrap();
    let o = doctor(&t, None, &["--log", log.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    let s = &o.json["gpus_seen"][0];
    assert_eq!(s["bdf"], "0000:07:00.0");
    assert!(s["seen_in"].as_str().unwrap().starts_with("log "), "{s}");
}

/// An examined GPU with a path, and a second GPU the kernel log alone names without one:
/// affected (before: the second GPU made it "inconclusive" at best).
#[test]
fn examined_gpu_and_a_kernel_log_gpu_without_a_path() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let d = t.dmesg(
        "\
[    4.0] amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!
[    4.2] amdgpu 0000:08:00.0: amdgpu: PCIE atomic ops is not supported
",
    );
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.json["gpus"][0]["verdict"], "not-affected");
    assert_eq!(seen(&o), vec![("0000:08:00.0".into(), String::new())]);
}

/// An examined GPU whose kernel log shows page faults: the fault is listed as another problem.
#[test]
fn examined_gpu_with_page_faults_lists_them() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let d = t.dmesg(
        "[    4.0] amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!\n[   99.0] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)\n",
    );
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.code, 0, "{}", o.text);
    assert!(
        o.text
            .contains("other problem (GPU page fault): \"[   99.0] amdgpu 0000:03:00.0"),
        "{}",
        o.text
    );
}

/// ARCHITECTURE.md: a GPU named in any evidence is named in the report, whatever the source: a
/// kernel log in each prefix (plain, `dmesg -T`, journalctl, `dmesg -x`), KFD's line by ID, a
/// `--log` with kernel lines, an `lspci -tv` tree.
#[test]
fn every_gpu_named_in_any_evidence_is_named_in_the_report() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("dmesg", PCIE2_DMESG, &["0000:03:00.0"]),
        (
            "dmesg",
            "[Fri Dec  4 12:00:03 2026] amdgpu 0000:0b:00.0: amdgpu: SMU is initialized successfully!\n[Fri Dec  4 12:00:03 2026] amdgpu 0000:0c:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)\n",
            &["0000:0b:00.0", "0000:0c:00.0"],
        ),
        (
            "dmesg",
            "Dec 04 12:00:05 host kernel: amdgpu 0000:07:00.0: amdgpu: PCIe atomic ops are not supported\n",
            &["0000:07:00.0"],
        ),
        (
            "dmesg",
            "kern  :warn  : [    4.1] amdgpu 0000:2f:00.0: amdgpu: PCIE atomic ops is not supported\n",
            &["0000:2f:00.0"],
        ),
        (
            "dmesg",
            "[    5.0] kfd kfd: amdgpu: skipped device 1002:67df, PCI rejects atomics 730<0\n",
            &["1002:67df"],
        ),
        (
            "log",
            "[    5.3] amdgpu 0000:07:00.0: PCIE atomic ops is not supported\n",
            &["0000:07:00.0"],
        ),
    ];
    for (flag, text, names) in cases {
        let t = Tree::new();
        let f = t.path().join("evidence.txt");
        std::fs::write(&f, text).unwrap();
        let o = doctor(&t, None, &[&format!("--{flag}"), f.to_str().unwrap()]);
        for n in *names {
            assert!(
                o.text.contains(&format!("GPU {n}")) || o.text.contains(&format!("  {n}  ")),
                "{n} not named (--{flag} {text:?}):\n{}",
                o.text
            );
        }
        assert!(!o.text.contains("no AMD GPU found"), "{}", o.text);
    }
}

/// Kernel logs as a hostile user pastes them (issue 38's acceptance): colours, older amdgpu's
/// line without a device, a line wrapped inside the message, syslog priorities, journalctl's ISO
/// prefix, Windows line ends, another vendor's GPU, two cards KFD skips, a Polaris card KFD skips
/// next to a Navi 31 without a path, and a timeout naming no GPU in a log that names two. Each row:
/// (what, log, exit code, GPUs named as `bdf id`, a fragment of the report).
#[test]
fn hostile_kernel_logs() {
    let rows: &[(&str, &str, i32, &[&str], &str)] = &[
        (
            "dmesg --color=always",
            "\x1b[32m[    4.123456] \x1b[0m\x1b[33mamdgpu 0000:03:00.0\x1b[0m: amdgpu: PCIE atomic ops is not supported\n",
            1,
            &["0000:03:00.0"],
            "no PCIe AtomicOps path for the AMD GPU (ID not shown) at 0000:03:00.0",
        ),
        (
            "older amdgpu: `[drm] PCIE atomic ops is not supported` and one GPU named",
            "[   11.089805] [drm] register mmio base: 0xFBE00000\n[   11.172374] [drm] PCIE atomic ops is not supported\n[   12.0] amdgpu 0000:01:00.0: amdgpu: Trusted Memory Zone (TMZ) feature not supported\n",
            1,
            &["0000:01:00.0"],
            "at 0000:01:00.0 (kernel log)",
        ),
        (
            "older amdgpu: `[drm] PCIE atomic ops is not supported` and no GPU named",
            "[   11.172374] [drm] PCIE atomic ops is not supported\n[   11.212719] [drm] add ip block number 0 <vi_common>\n",
            1,
            &["(no address)"],
            "no PCIe AtomicOps path for the AMD GPU (ID not shown) (kernel log)",
        ),
        (
            "a paste wrapped inside the message",
            "[   15.781194] amdgpu 0000:04:00.0: amdgpu: PCIE atomic ops is not\nsupported\n",
            1,
            &["0000:04:00.0"],
            "at 0000:04:00.0",
        ),
        (
            "syslog priorities",
            "<6>[    4.1] amdgpu 0000:0a:00.0: amdgpu: PCIE atomic ops is not supported\n",
            1,
            &["0000:0a:00.0"],
            "at 0000:0a:00.0",
        ),
        (
            "journalctl -o short-iso with another driver's AtomicOps words",
            "2026-12-04T12:00:05+0000 myhost kernel: amdgpu 0000:07:00.0: amdgpu: PCIE atomic ops is not supported\r\n2026-12-04T12:00:05+0000 myhost kernel: nvme 0000:01:00.0: PCIe atomic op completer 64\r\n",
            1,
            &["0000:07:00.0"],
            "at 0000:07:00.0",
        ),
        (
            "an NVIDIA GPU next to a quiet Navi 31",
            "[ 1.0] pci 0000:01:00.0: [10de:2684] type 00 class 0x030000 PCIe Legacy Endpoint\n[ 1.1] pci 0000:0b:00.0: [1002:744c] type 00 class 0x030000 PCIe Legacy Endpoint\n[ 4.0] nvidia 0000:01:00.0: enabling device (0000 -> 0003)\n",
            2,
            &["0000:0b:00.0  1002:744c"],
            "inconclusive — the evidence shows the AMD GPU 1002:744c",
        ),
        (
            "two Polaris cards KFD skips (both KFD lines after the second card's)",
            "[ 4.0] amdgpu 0000:01:00.0: amdgpu: PCIE atomic ops is not supported\n[ 4.1] amdgpu 0000:02:00.0: amdgpu: PCIE atomic ops is not supported\n[ 5.0] kfd kfd: amdgpu: skipped device 1002:67df, PCI rejects atomics 730<0\n[ 5.1] kfd kfd: amdgpu: skipped device 1002:67df, PCI rejects atomics 730<0\n",
            0,
            &["0000:01:00.0  1002:67df", "0000:02:00.0  1002:67df"],
            "KFD rejected the AMD GPU",
        ),
        (
            "a Polaris card KFD skips next to a Navi 31 without a path",
            "[ 1.0] pci 0000:01:00.0: [1002:67df] type 00 class 0x030000 PCIe Legacy Endpoint\n[ 1.1] pci 0000:0b:00.0: [1002:744c] type 00 class 0x030000 PCIe Legacy Endpoint\n[ 4.0] amdgpu 0000:01:00.0: amdgpu: PCIE atomic ops is not supported\n[ 5.0] kfd kfd: amdgpu: skipped device 1002:67df, PCI rejects atomics 730<0\n[ 6.0] amdgpu 0000:0b:00.0: amdgpu: PCIE atomic ops is not supported\n",
            1,
            &["0000:01:00.0  1002:67df", "0000:0b:00.0  1002:744c"],
            "no PCIe AtomicOps path for the AMD GPU 1002:744c (Navi 31, gfx1100) at 0000:0b:00.0 (kernel log)",
        ),
        (
            "a KVM guest's kernel log",
            "[    0.000000] Hypervisor detected: KVM\n[    4.1] amdgpu 0000:01:00.0: amdgpu: PCIE atomic ops is not supported\n",
            1,
            &["0000:01:00.0"],
            "in a VM: check the VM configuration first",
        ),
        (
            "a ring timeout naming no GPU in a log that names two",
            "[ 4.0] amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!\n[ 4.1] amdgpu 0000:0c:00.0: amdgpu: SMU is initialized successfully!\n[ 300.0] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=1234, emitted seq=1236\n",
            2,
            &["0000:03:00.0", "0000:0c:00.0"],
            "ring timeout or GPU reset for a GPU the line does not name",
        ),
    ];
    for (what, log, code, named, fragment) in rows {
        let o = klog_only(log, &[]);
        let ctx = format!("{what}:\n{}", o.text);
        assert_eq!(o.code, *code, "{ctx}");
        for n in *named {
            assert!(o.text.contains(&format!("GPU {n}")), "{n}: {ctx}");
        }
        assert!(o.text.contains(fragment), "{fragment}: {ctx}");
        assert!(!o.text.contains("no AMD GPU found"), "{ctx}");
    }
}

/// An examined GPU whose path passes, and a `--log` that pastes amdgpu's AtomicOps line for its
/// address: the pasted line counts (before: only `--dmesg` did, and the report said "not
/// affected").
#[test]
fn kernel_line_pasted_into_a_log_counts_for_an_examined_gpu() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let log = t.path().join("report.txt");
    std::fs::write(
        &log,
        "[    4.1] amdgpu 0000:03:00.0: amdgpu: PCIE atomic ops is not supported\n[   99.0] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)\n",
    )
    .unwrap();
    let o = doctor(&t, None, &["--log", log.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    let g = o.gpu("0000:03:00.0");
    assert!(
        g["kernel_message"].as_str().unwrap().contains("(in --log "),
        "{g}"
    );
    assert_eq!(g["kernel_problems"][0]["kind"], "page-fault", "{g}");
}

/// A kernel log that names 70 GPUs without a path (a forged one): 64 are kept and named, the
/// headline names four and counts the rest, and a note says the list is cut.
#[test]
fn a_log_naming_seventy_gpus_is_bounded_and_says_so() {
    let log: String = (0..70)
        .map(|i| {
            format!(
                "[ 4.{i}] amdgpu 0000:{:02x}:00.0: amdgpu: PCIE atomic ops is not supported\n",
                i + 1
            )
        })
        .collect();
    let o = klog_only(&log, &[]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.json["gpus_seen"].as_array().unwrap().len(), 64);
    let h = o.json["headline"].as_str().unwrap();
    assert!(h.contains(", and 60 more (kernel log)"), "{h}");
    assert!(o.notes().contains("names 64 GPUs or more"), "{}", o.notes());
}
