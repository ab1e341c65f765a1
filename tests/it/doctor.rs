//! `rcclfix doctor` on sysfs/procfs/kernel-log snapshots that the tests build themselves from the
//! documented register layout (Linux `pci_regs.h`), one per public report (ROCm/ROCm#6074,
//! ROCm/ROCm#6148, ROCm/ROCm#6520, vllm-project/vllm#38587, ROCm/rccl#958, ROCm/rccl#2124, …) plus the platform shapes doctor must tell apart. No root and no GPU needed: the
//! binary runs with `--sysfs/--proc/--dmesg` pointing into a temporary tree.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

// ---- the snapshot builder ------------------------------------------------------------------------

/// Register values written by the builder (pci_regs.h), independent of the crate's own constants.
const ROUTE: u32 = 0x40;
const COMP32: u32 = 0x80;
const COMP64: u32 = 0x100;
const COMP128: u32 = 0x200;
const REQ_EN: u16 = 0x40;
const EGRESS_BLOCK: u16 = 0x80;

#[derive(Clone, Copy)]
enum Kind {
    Endpoint,
    RootPort,
    SwitchUp,
    SwitchDown,
}

#[derive(Clone)]
struct Dev {
    bdf: &'static str,
    vendor: u16,
    device: u16,
    class: u32,
    kind: Kind,
    devcap2: u32,
    devctl2: u16,
    multifunction: bool,
    /// Bridges: the secondary and subordinate bus numbers (set by [`Tree::chain`]).
    buses: Option<(u8, u8)>,
}

fn dev(
    bdf: &'static str,
    vendor: u16,
    device: u16,
    class: u32,
    kind: Kind,
    devcap2: u32,
    devctl2: u16,
) -> Dev {
    Dev {
        bdf,
        vendor,
        device,
        class,
        kind,
        devcap2,
        devctl2,
        multifunction: false,
        buses: None,
    }
}
/// A root port with the given DevCap2 AtomicOp bits.
fn root_port(bdf: &'static str, vendor: u16, device: u16, devcap2: u32) -> Dev {
    dev(bdf, vendor, device, 0x060400, Kind::RootPort, devcap2, 0)
}
fn switch_up(bdf: &'static str, devcap2: u32, devctl2: u16) -> Dev {
    dev(
        bdf,
        0x1002,
        0x1478,
        0x060400,
        Kind::SwitchUp,
        devcap2,
        devctl2,
    )
}
fn switch_down(bdf: &'static str, devcap2: u32) -> Dev {
    dev(bdf, 0x1002, 0x1479, 0x060400, Kind::SwitchDown, devcap2, 0)
}
/// A Navi31 GPU function (AtomicOpsCap 32bit+ 64bit+).
fn gpu(bdf: &'static str, req_en: bool) -> Dev {
    dev(
        bdf,
        0x1002,
        0x744c,
        0x030000,
        Kind::Endpoint,
        COMP32 | COMP64,
        if req_en { REQ_EN } else { 0 },
    )
}
/// The card's HDMI/DP audio function.
fn audio(bdf: &'static str) -> Dev {
    dev(bdf, 0x1002, 0xab30, 0x040300, Kind::Endpoint, 0, 0)
}

/// Config space bytes: type 0/1 header, a capability list PM (0x50) → MSI (0x60) → PCIe v2 (0x70),
/// DevCap2 at 0x70+0x24, DevCtl2 at 0x70+0x28; cut to `len` bytes (64 = an unprivileged read).
fn config_bytes(d: &Dev, len: usize) -> Vec<u8> {
    let mut c = vec![0u8; 256];
    c[0..2].copy_from_slice(&d.vendor.to_le_bytes());
    c[2..4].copy_from_slice(&d.device.to_le_bytes());
    c[6..8].copy_from_slice(&0x0010u16.to_le_bytes()); // Status: capability list
    c[9] = (d.class & 0xff) as u8;
    c[10] = ((d.class >> 8) & 0xff) as u8;
    c[11] = ((d.class >> 16) & 0xff) as u8;
    let bridge = !matches!(d.kind, Kind::Endpoint);
    c[0x0e] = u8::from(bridge) | if d.multifunction { 0x80 } else { 0 };
    if let (true, Some((sec, sub))) = (bridge, d.buses) {
        // Type 1 header: primary, secondary and subordinate bus numbers (what lspci's tree and
        // `Bus:` line come from).
        c[0x18] = u8::from_str_radix(&d.bdf[..2], 16).unwrap();
        c[0x19] = sec;
        c[0x1a] = sub;
    }
    c[0x34] = 0x50;
    c[0x50] = 0x01; // PM
    c[0x51] = 0x60;
    c[0x60] = 0x05; // MSI
    c[0x61] = 0x70;
    c[0x70] = 0x10; // PCI Express
    c[0x71] = 0x00;
    let ty: u16 = match d.kind {
        Kind::Endpoint => 0x0,
        Kind::RootPort => 0x4,
        Kind::SwitchUp => 0x5,
        Kind::SwitchDown => 0x6,
    };
    c[0x72..0x74].copy_from_slice(&(0x2 | (ty << 4)).to_le_bytes());
    c[0x94..0x98].copy_from_slice(&d.devcap2.to_le_bytes());
    c[0x98..0x9a].copy_from_slice(&d.devctl2.to_le_bytes());
    c.truncate(len);
    c
}

struct Tree {
    tmp: tempfile::TempDir,
    config_len: usize,
    /// Every config space written, by address, for `lspci -F` dumps of the same bytes.
    written: std::cell::RefCell<Vec<(String, Vec<u8>)>>,
}

impl Tree {
    fn new() -> Tree {
        let t = Tree {
            tmp: tempfile::tempdir().unwrap(),
            config_len: 256,
            written: Default::default(),
        };
        std::fs::create_dir_all(t.sys().join("bus/pci/devices")).unwrap();
        std::fs::create_dir_all(t.proc()).unwrap();
        std::fs::write(
            t.proc().join("cpuinfo"),
            "processor\t: 0\nmodel name\t: AMD Ryzen 7 7800X3D\nflags\t\t: fpu vme sse2\n",
        )
        .unwrap();
        t
    }
    fn sys(&self) -> PathBuf {
        self.tmp.path().join("sys")
    }
    fn proc(&self) -> PathBuf {
        self.tmp.path().join("proc")
    }
    fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// Add a chain of devices, top (root port, on `pci0000:00`) first; each is the child of the one
    /// before. Devices already present (same BDF) are reused. Returns the GPU's sysfs directory.
    fn chain(&self, devs: &[Dev]) -> PathBuf {
        let mut dir = self.sys().join("devices/pci0000:00");
        let bus = |d: &Dev| u8::from_str_radix(&d.bdf[..2], 16).unwrap();
        let last = devs.last().map(bus).unwrap_or(0);
        for (i, d) in devs.iter().enumerate() {
            let mut d = d.clone();
            if let Some(next) = devs.get(i + 1) {
                d.buses = Some((bus(next), last));
            }
            dir = dir.join(format!("0000:{}", d.bdf));
            self.write_dev(&dir, &d);
        }
        dir
    }
    /// The config spaces written so far as `lspci -x`-style text, which `lspci -F` reads.
    fn hex_dump(&self) -> String {
        let mut out = String::new();
        let mut w = self.written.borrow().clone();
        w.sort();
        w.dedup_by(|a, b| a.0 == b.0);
        for (bdf, bytes) in w {
            out.push_str(&format!("{bdf} dump\n"));
            for (i, row) in bytes.chunks(16).enumerate() {
                let hex: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
                out.push_str(&format!("{:02x}: {}\n", i * 16, hex.join(" ")));
            }
            out.push('\n');
        }
        out
    }
    /// Add a function next to `sibling_of` (same parent directory), e.g. the audio function.
    fn sibling(&self, gpu_dir: &Path, d: &Dev) {
        let dir = gpu_dir.parent().unwrap().join(format!("0000:{}", d.bdf));
        self.write_dev(&dir, d);
    }
    fn write_dev(&self, dir: &Path, d: &Dev) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("vendor"), format!("0x{:04x}\n", d.vendor)).unwrap();
        std::fs::write(dir.join("device"), format!("0x{:04x}\n", d.device)).unwrap();
        std::fs::write(dir.join("class"), format!("0x{:06x}\n", d.class)).unwrap();
        let bytes = config_bytes(d, self.config_len);
        std::fs::write(dir.join("config"), &bytes).unwrap();
        self.written.borrow_mut().push((d.bdf.to_owned(), bytes));
        let rel = dir.strip_prefix(self.sys()).unwrap();
        let link = self
            .sys()
            .join("bus/pci/devices")
            .join(dir.file_name().unwrap());
        if !link.exists() {
            std::os::unix::fs::symlink(Path::new("../../..").join(rel), link).unwrap();
        }
    }
    fn dmi(&self, vendor: &str, product: &str, version: &str) {
        let d = self.sys().join("class/dmi/id");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("sys_vendor"), format!("{vendor}\n")).unwrap();
        std::fs::write(d.join("product_name"), format!("{product}\n")).unwrap();
        std::fs::write(d.join("product_version"), format!("{version}\n")).unwrap();
        // Things a capture must never carry.
        std::fs::write(d.join("product_serial"), "SER-1234-SECRET\n").unwrap();
        std::fs::write(
            d.join("product_uuid"),
            "0badc0de-1111-2222-3333-444455556666\n",
        )
        .unwrap();
        std::fs::write(d.join("board_serial"), "BOARD-SECRET\n").unwrap();
    }
    fn hypervisor_flag(&self) {
        std::fs::write(
            self.proc().join("cpuinfo"),
            "processor\t: 0\nmodel name\t: QEMU Virtual CPU\nflags\t\t: fpu vme sse2 hypervisor\n",
        )
        .unwrap();
    }
    /// KFD: node 0 is the CPU; each GPU is (bdf, gfx_target_version, io_link flags, cpu cores).
    fn kfd(&self, gpus: &[(&str, u32, u32, u32)]) {
        let nodes = self.sys().join("class/kfd/kfd/topology/nodes");
        let n0 = nodes.join("0");
        std::fs::create_dir_all(&n0).unwrap();
        std::fs::write(n0.join("properties"), "cpu_cores_count 16\nsimd_count 0\nmem_banks_count 1\ngfx_target_version 0\nlocation_id 0\ndomain 0\n").unwrap();
        for (i, (bdf, gfx, flags, cores)) in gpus.iter().enumerate() {
            let n = nodes.join((i + 1).to_string());
            std::fs::create_dir_all(n.join("io_links/0")).unwrap();
            let (bus, rest) = bdf.split_once(':').unwrap();
            let (devn, func) = rest.split_once('.').unwrap();
            let loc = (u32::from_str_radix(bus, 16).unwrap() << 8)
                | (u32::from_str_radix(devn, 16).unwrap() << 3)
                | func.parse::<u32>().unwrap();
            std::fs::write(
                n.join("properties"),
                format!("cpu_cores_count {cores}\nsimd_count 192\ngfx_target_version {gfx}\nvendor_id 4098\ndevice_id 29772\nlocation_id {loc}\ndomain 0\nunique_id 1234567890123456789\n"),
            )
            .unwrap();
            std::fs::write(n.join("name"), "ip discovery\n").unwrap();
            std::fs::write(
                n.join("io_links/0/properties"),
                format!("type 2\nversion_major 0\nversion_minor 0\nnode_from {}\nnode_to 0\nweight 20\nflags {flags}\n", i + 1),
            )
            .unwrap();
        }
    }
    fn dmesg(&self, text: &str) -> PathBuf {
        let p = self.path().join("dmesg.txt");
        std::fs::write(&p, text).unwrap();
        p
    }
}

/// Snapshot the text report (stored under tests/data/doctor/snapshots/).
fn snapshot(name: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => "../data/doctor/snapshots",
        prepend_module_to_snapshot => false,
        filters => vec![(r"/tmp/\.tmp[A-Za-z0-9]+", "[TMP]")],
    }, {
        insta::assert_snapshot!(name, text);
    });
}

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/doctor")
        .join(rel)
}

struct Out {
    code: i32,
    json: Value,
    text: String,
}

/// Run `rcclfix doctor` on the tree twice (JSON and text) with extra arguments.
fn doctor(t: &Tree, dmesg: Option<&Path>, extra: &[&str]) -> Out {
    let mut base: Vec<String> = vec![
        "doctor".into(),
        "--sysfs".into(),
        t.sys().display().to_string(),
        "--proc".into(),
        t.proc().display().to_string(),
    ];
    if let Some(d) = dmesg {
        base.push("--dmesg".into());
        base.push(d.display().to_string());
    }
    base.extend(extra.iter().map(|s| s.to_string()));
    run_doctor(&base)
}

fn run_doctor(args: &[String]) -> Out {
    let j = crate::support::rcclfix()
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let text = crate::support::rcclfix().args(args).output().unwrap();
    assert_eq!(
        j.status.code(),
        text.status.code(),
        "json and text runs disagree"
    );
    let stdout = String::from_utf8_lossy(&j.stdout);
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&j.stderr)
        )
    });
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    if std::env::var_os("RCCLFIX_TEST_SHOW").is_some() {
        eprintln!("$ rcclfix {}\n{text}", args.join(" "));
    }
    Out {
        code: j.status.code().unwrap(),
        json,
        text,
    }
}

impl Out {
    fn verdict(&self) -> &str {
        self.json["verdict"].as_str().unwrap()
    }
    fn gpu(&self, bdf: &str) -> &Value {
        self.json["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["bdf"] == bdf)
            .unwrap_or_else(|| panic!("no GPU {bdf} in {}", self.json))
    }
    /// The hop where the kernel rule breaks for `bdf`, and why.
    fn breaks(&self, bdf: &str) -> (String, String) {
        let r = &self.gpu(bdf)["path_result"];
        assert_eq!(r["result"], "breaks", "{bdf}: {r}");
        (
            r["hop"].as_str().unwrap().to_owned(),
            r["problem"].as_str().unwrap().to_owned(),
        )
    }
    fn actions(&self) -> String {
        self.json["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    }
    fn notes(&self) -> String {
        self.json["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

const HEALTHY_ROOT: u32 = COMP32 | COMP64; // consumer root port: Routing- 32bit+ 64bit+
const AMDGPU_SILENT: &str =
    "[    4.1] amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!\n";

fn qemu_guest(t: &Tree) {
    t.dmi("QEMU", "Standard PC (Q35 + ICH9, 2009)", "pc-q35-11.0");
    t.hypervisor_flag();
}

// ---- bare metal ----------------------------------------------------------------------------------

#[test]
fn bare_metal_healthy() {
    let t = Tree::new();
    t.dmi("Micro-Star International Co., Ltd.", "MS-7E12", "1.0");
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x14db, HEALTHY_ROOT),
        switch_up("01:00.0", ROUTE, 0),
        switch_down("02:00.0", ROUTE),
        gpu("03:00.0", true),
    ]);
    t.kfd(&[("03:00.0", 110000, 1, 0)]);
    let d = t.dmesg(AMDGPU_SILENT);
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.code, 0, "{}", o.text);
    assert_eq!(o.verdict(), "not-affected");
    let g = o.gpu("0000:03:00.0");
    assert_eq!(g["path_result"]["result"], "passes");
    assert_eq!(g["gfx"], "gfx1100");
    assert_eq!(g["req_en"], true);
    assert_eq!(g["kfd_atomics"], true);
    // lspci-style text per device type; the root port's Routing- does not matter.
    assert!(
        o.text.contains(
            "AtomicOpsCap: Routing- 32bit+ 64bit+ 128bitCAS-, AtomicOpsCtl: ReqEn- EgressBlck-"
        ),
        "{}",
        o.text
    );
    assert!(
        o.text
            .contains("AtomicOpsCap: Routing+, AtomicOpsCtl: EgressBlck-"),
        "{}",
        o.text
    );
    assert!(
        o.text
            .contains("AtomicOpsCap: 32bit+ 64bit+ 128bitCAS-, AtomicOpsCtl: ReqEn+"),
        "{}",
        o.text
    );
    assert!(o.text.contains("Verdict: not affected"), "{}", o.text);
}

#[test]
fn consumer_board_chipset_switch_mixed() {
    // AMD X570-like: one card on a CPU root port, one behind the chipset switch whose downstream
    // port has Routing-. Each GPU gets its own verdict.
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT | COMP128),
        gpu("03:00.0", true),
    ]);
    t.chain(&[
        root_port("00:01.2", 0x1022, 0x1483, HEALTHY_ROOT | COMP128),
        dev(
            "04:00.0",
            0x1022,
            0x57ad,
            0x060400,
            Kind::SwitchUp,
            ROUTE,
            0,
        ),
        dev("05:08.0", 0x1022, 0x57a3, 0x060400, Kind::SwitchDown, 0, 0),
        gpu("07:00.0", false),
    ]);
    t.kfd(&[("03:00.0", 110000, 1, 0), ("07:00.0", 110000, 13, 0)]);
    let d = t.dmesg(&format!(
        "{AMDGPU_SILENT}[    5.2] amdgpu 0000:07:00.0: PCIe atomic ops are not supported\n"
    ));
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "rebuild");
    assert_eq!(o.gpu("0000:03:00.0")["verdict"], "not-affected");
    assert_eq!(o.gpu("0000:03:00.0")["kernel_log_usable"], true);
    assert_eq!(o.gpu("0000:07:00.0")["verdict"], "rebuild");
    assert_eq!(
        o.breaks("0000:07:00.0"),
        ("0000:05:08.0".into(), "switch-no-routing".into())
    );
    // The newer dmesg wording is mapped to the right GPU by address.
    assert!(o.gpu("0000:07:00.0")["kernel_message"]
        .as_str()
        .unwrap()
        .contains("are not supported"));
    assert!(o.gpu("0000:03:00.0")["kernel_message"].is_null());
    assert!(o.actions().contains("CPU-attached slot"), "{}", o.actions());
    snapshot("consumer_board_chipset_switch_mixed", &o.text);
    assert!(
        o.text
            .contains("BREAKS: switch port does not route AtomicOps (Routing-)"),
        "{}",
        o.text
    );
}

#[test]
fn switch_upstream_without_routing() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        dev("01:00.0", 0x10b5, 0x8747, 0x060400, Kind::SwitchUp, 0, 0),
        dev(
            "02:08.0",
            0x10b5,
            0x8747,
            0x060400,
            Kind::SwitchDown,
            ROUTE,
            0,
        ),
        gpu("03:00.0", false),
    ]);
    let o = doctor(&t, None, &[]);
    assert_eq!(o.verdict(), "rebuild", "{}", o.text);
    assert_eq!(
        o.breaks("0000:03:00.0"),
        ("0000:01:00.0".into(), "switch-no-routing".into())
    );
}

#[test]
fn switch_upstream_egress_blocking() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        switch_up("01:00.0", ROUTE, EGRESS_BLOCK),
        switch_down("02:00.0", ROUTE),
        gpu("03:00.0", false),
    ]);
    let o = doctor(&t, None, &[]);
    assert_eq!(o.verdict(), "rebuild", "{}", o.text);
    assert_eq!(
        o.breaks("0000:03:00.0"),
        ("0000:01:00.0".into(), "upstream-egress-blocked".into())
    );
    assert!(o.text.contains("EgressBlck+"), "{}", o.text);
}

#[test]
fn root_port_with_only_32bit_completer_breaks() {
    // amdgpu asks for COMP32|COMP64: one of them is not enough.
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, ROUTE | COMP32),
        gpu("03:00.0", false),
    ]);
    let o = doctor(&t, None, &[]);
    assert_eq!(
        o.breaks("0000:03:00.0"),
        ("0000:00:01.1".into(), "root-port-no-completer".into())
    );
}

#[test]
fn unprivileged_read_is_inconclusive() {
    let mut t = Tree::new();
    t.config_len = 64;
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let d = t.dmesg(""); // kernel.dmesg_restrict=1: empty
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.code, 2, "{}", o.text);
    assert_eq!(o.verdict(), "inconclusive");
    assert_eq!(o.gpu("0000:03:00.0")["path_result"]["result"], "unreadable");
    assert!(o.json["headline"]
        .as_str()
        .unwrap()
        .contains("run this as root: sudo rcclfix doctor"));
    assert!(
        o.text.contains("only 64 bytes of config space"),
        "{}",
        o.text
    );
}

#[test]
fn unprivileged_read_with_kfd_saying_no_atomics() {
    // The chain cannot be read, but KFD's own result is readable without root: affected, and the
    // report still asks for root to name the breaking hop.
    let mut t = Tree::new();
    t.config_len = 64;
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, 0),
        gpu("03:00.0", false),
    ]);
    t.kfd(&[("03:00.0", 110000, 13, 0)]);
    let o = doctor(&t, None, &[]);
    assert_eq!(o.verdict(), "rebuild", "{}", o.text);
    assert_eq!(o.gpu("0000:03:00.0")["kfd_atomics"], false);
    assert!(
        o.text.contains("run as root: sudo rcclfix doctor"),
        "{}",
        o.text
    );
}

#[test]
fn no_amd_gpu_at_all() {
    let t = Tree::new();
    t.chain(&[dev(
        "02:00.0",
        0x8086,
        0x56a0,
        0x030000,
        Kind::Endpoint,
        0,
        0,
    )]);
    let o = doctor(&t, None, &[]);
    assert_eq!(o.code, 0);
    assert_eq!(o.verdict(), "not-affected");
    assert_eq!(
        o.json["headline"],
        format!(
            "not affected: no AMD GPU found (1 PCI function in {})",
            t.sys().display()
        )
    );
    assert!(o.text.contains("No AMD GPU"), "{}", o.text);
}

#[test]
fn empty_kernel_log_with_readable_path() {
    // An empty kernel log is never read as "silent": the readable path decides, and the report says
    // the log held nothing.
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let d = t.dmesg("");
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.verdict(), "not-affected", "{}", o.text);
    assert!(
        o.notes().contains("kernel log has no amdgpu lines"),
        "{}",
        o.notes()
    );
}

#[test]
fn igpu_is_pointed_out() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x14db, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    t.chain(&[
        root_port("00:08.1", 0x1022, 0x14dd, HEALTHY_ROOT),
        dev(
            "0c:00.0",
            0x1002,
            0x164e,
            0x030000,
            Kind::Endpoint,
            0,
            REQ_EN,
        ),
    ]);
    t.kfd(&[("03:00.0", 110000, 1, 0), ("0c:00.0", 100306, 1, 16)]);
    let o = doctor(&t, None, &[]);
    assert_eq!(o.verdict(), "not-affected", "{}", o.text);
    assert_eq!(o.gpu("0000:0c:00.0")["gfx"], "gfx1036");
    assert_eq!(o.gpu("0000:0c:00.0")["integrated"], true);
    assert!(o.notes().contains("HIP_VISIBLE_DEVICES"), "{}", o.notes());
    assert!(o.notes().contains("0000:0c:00.0 gfx1036"), "{}", o.notes());
}

#[test]
fn kfd_rejecting_the_gpu_is_not_this_bug() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x8086, 0x0c01, 0),
        dev("01:00.0", 0x1002, 0x6939, 0x030000, Kind::Endpoint, 0, 0),
    ]);
    let d =
        t.dmesg("[    3.0] kfd kfd: amdgpu: skipped device 1002:6939, PCI rejects atomics 730<0\n");
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.verdict(), "not-affected", "{}", o.text);
    let reasons = o.gpu("0000:01:00.0")["reasons"].to_string();
    assert!(reasons.contains("KFD rejected this GPU"), "{reasons}");
}

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
    assert!(
        o.actions().contains("3 declaring kernels"),
        "{}",
        o.actions()
    );
    assert!(o.actions().contains("CPU-attached slot"), "{}", o.actions());
}

/// ROCm/ROCm#6074: only a log, no platform data: RCCL's launch returned hipErrorIllegalState
/// (consistent with the refusal) → rebuild, platform not checked until lspci/dmesg are supplied.
/// The excerpt names no release, so none is defaulted; rocminfo's gfx1100 becomes `--targets`.
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
    assert!(o.json["rebuild"]["tag"].is_null(), "{}", o.json["rebuild"]);
    assert_eq!(o.json["rebuild"]["targets"], serde_json::json!(["gfx1100"]));
    assert_eq!(
        o.json["headline"],
        "affected — rebuild RCCL; ROCm release unknown: run `rcclfix build --list` and pick the recipe for your release"
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
    // The release is known, so the rebuild object says which recipe, for gfx1201.
    assert_eq!(o.json["rebuild"]["tag"], "2.27.7");
    assert_eq!(o.json["rebuild"]["targets"], serde_json::json!(["gfx1201"]));
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
    assert_eq!(
        o.json["rebuild"]["command"],
        "rcclfix build --tag 2.27.7 --targets gfx1100"
    );
    let l = &o.json["logs"][0];
    assert_eq!(l["versions"]["torch_rocm"], "7.2.53211-…");
    assert_eq!(l["versions"]["clang_roc"], "7.2.1");
    assert_eq!(l["rocm"]["release"], "7.2.1");
    assert_eq!(l["rocm"]["exact"], true);
    assert_eq!(l["rccl"], "2.27.7");
    assert_eq!(o.json["rebuild"]["tag"], "2.27.7");
}

fn proxmox_guest(t: &Tree, fixed: bool) {
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

// ---- parsers and bad input -----------------------------------------------------------------------

#[test]
fn config_space_decoding() {
    use rcclfix::doctor::pci::{decode_config, ConfigView, PortType};
    let d = root_port("00:01.1", 0x1022, 0x1483, ROUTE | COMP32 | COMP64 | COMP128);
    match decode_config(&config_bytes(&d, 256)) {
        ConfigView::Express { cap } => {
            assert_eq!(cap.offset, 0x70);
            assert_eq!(cap.port_type, PortType::RootPort);
            assert_eq!(
                cap.lspci_text(),
                "AtomicOpsCap: Routing+ 32bit+ 64bit+ 128bitCAS+, AtomicOpsCtl: ReqEn- EgressBlck-"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        decode_config(&config_bytes(&d, 64)),
        ConfigView::Truncated { len: 64 }
    );
    // A capability list that loops is malformed, not "no PCIe capability".
    let mut c = config_bytes(&d, 256);
    c[0x61] = 0x50;
    assert!(matches!(decode_config(&c), ConfigView::Malformed { .. }));
}

#[test]
fn pci_addresses() {
    use rcclfix::doctor::pci::Bdf;
    assert_eq!(
        Bdf::parse("0000:03:00.0").unwrap().to_string(),
        "0000:03:00.0"
    );
    assert_eq!(Bdf::parse("0b:00.1").unwrap().to_string(), "0000:0b:00.1");
    // Intel VMD puts NVMe/PCIe ports in domains 10000 and up.
    assert_eq!(Bdf::parse("10000:e0:1d.0").unwrap().domain, 0x10000);
    for bad in [
        "0000:03:00",
        "0000:03:20.0",
        "0000:03:00.8",
        "pci0000:00",
        "03:00.0.1",
    ] {
        assert!(Bdf::parse(bad).is_none(), "{bad}");
    }
    assert_eq!(Bdf::from_location(0, 0x0300).to_string(), "0000:03:00.0");
    assert_eq!(
        Bdf::from_location(1, (0x0b << 8) | 1).to_string(),
        "0001:0b:00.1"
    );
}

#[test]
fn both_dmesg_wordings_map_by_address() {
    use rcclfix::doctor::kmsg::{parse, LogOrigin};
    let log = parse(
        "[1.0] amdgpu 0000:01:00.0: PCIE atomic ops is not supported\n\
         [1.1] amdgpu 0000:02:00.0: PCIe atomic ops are not supported\n\
         [1.2] some other driver: atomic ops is not something we support\n",
        LogOrigin::File { path: "x".into() },
    );
    let keys: Vec<String> = log
        .atomics_not_supported
        .keys()
        .map(|b| b.to_string())
        .collect();
    assert_eq!(keys, ["0000:01:00.0", "0000:02:00.0"]);
}

#[test]
fn proxmox_hostpci_forms() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("101.conf");
    std::fs::write(
        &p,
        "machine: pc-q35-8.1\nhostpci0: 0b:00.0;0b:00.1,pcie=1\nhostpci1: 0000:0c:00.0,pcie=1,x-vga=1\nhostpci2: 0000:0d:00.0\nhostpci3: mapping=gpu3,pcie=1\n[snap1]\nhostpci0: 0000:0b:00\n",
    )
    .unwrap();
    let c = rcclfix::doctor::vm::parse_proxmox(&p).unwrap();
    assert!(c.q35);
    assert_eq!(
        c.hostpci.len(),
        4,
        "the [snapshot] section is not the current config"
    );
    assert!(c.hostpci[0]
        .problems
        .iter()
        .any(|x| x.contains("several functions")));
    assert_eq!(
        c.hostpci[0].fixed.as_deref(),
        Some("hostpci0: 0b:00.0,pcie=1")
    );
    assert!(
        c.hostpci[1].problems.is_empty(),
        "{:?}",
        c.hostpci[1].problems
    );
    assert!(c.hostpci[2]
        .problems
        .iter()
        .any(|x| x.contains("pcie=1 missing")));
    assert!(c.hostpci[3]
        .problems
        .iter()
        .any(|x| x.contains("resource mapping")));
}

#[test]
fn bad_input_is_one_clear_line() {
    let t = Tree::new();
    let o = crate::support::rcclfix()
        .args(["doctor", "--log", "/nonexistent/run.log", "--sysfs"])
        .arg(t.sys())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent/run.log"), "{err}");
    assert!(o.stdout.is_empty());
    let bad = t.path().join("empty.conf");
    std::fs::write(&bad, "memory: 4096\n").unwrap();
    let o = crate::support::rcclfix()
        .args(["doctor", "--vm-config"])
        .arg(&bad)
        .arg("--sysfs")
        .arg(t.sys())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no hostpciN line"));
    let snap = t.path().join("not-a-snapshot");
    std::fs::create_dir_all(&snap).unwrap();
    let o = crate::support::rcclfix()
        .args(["doctor", "--snapshot"])
        .arg(&snap)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an rcclfix doctor snapshot"));
}

// ---- oracle: lspci on the real /sys --------------------------------------------------------------

/// `Name±` flags from the text after `key` on an lspci line, e.g. `AtomicOpsCap: Routing- 32bit+`.
fn lspci_flags(line: &str, key: &str) -> Vec<(String, bool)> {
    let Some((_, rest)) = line.split_once(key) else {
        return vec![];
    };
    rest.split([' ', ','])
        .filter_map(|t| {
            let t = t.trim();
            let (name, sign) = t.split_at(t.len().checked_sub(1)?);
            match sign {
                "+" => Some((name.to_owned(), true)),
                "-" => Some((name.to_owned(), false)),
                _ => None,
            }
        })
        .collect()
}

/// Every PCIe function of this machine, decoded by doctor, against `lspci -vvv` (pciutils) as an
/// outside oracle: device/port type and each AtomicOps flag. Needs root for more than 64 bytes of
/// config space; unprivileged runs compare "unreadable" with lspci's `<access denied>`.
#[test]
fn decoder_agrees_with_lspci_on_this_machine() {
    use rcclfix::doctor::pci::{list_devices, ConfigView, PortType};
    let slow = std::env::var_os("RCCLFIX_SLOW_TESTS").is_some_and(|v| v == "1");
    let Ok(lspci) = which::which("lspci") else {
        assert!(
            !slow,
            "RCCLFIX_SLOW_TESTS=1 but lspci is missing: install pciutils (.ci/apt.d/doctor.txt)"
        );
        eprintln!("skipped: no lspci (set RCCLFIX_SLOW_TESTS=1 to require it)");
        return;
    };
    let devs = list_devices(Path::new("/sys"));
    let mut compared = 0;
    for d in &devs {
        let out = Command::new(&lspci)
            .args(["-vvv", "-s"])
            .arg(d.bdf.to_string())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        match &d.config {
            ConfigView::Truncated { .. } => {
                assert!(
                    text.contains("access denied") || !text.contains("Capabilities:"),
                    "{}: doctor read a truncated config but lspci saw capabilities:\n{text}",
                    d.bdf
                );
            }
            ConfigView::NotExpress => {
                assert!(
                    !text.contains("Capabilities: [") || !text.contains("] Express ("),
                    "{}: lspci sees a PCIe capability:\n{text}",
                    d.bdf
                );
            }
            ConfigView::Malformed { reason } => panic!(
                "{}: malformed config space on a real device: {reason}",
                d.bdf
            ),
            ConfigView::Incomplete { reason } => {
                panic!("{}: sysfs never reads as incomplete text: {reason}", d.bdf)
            }
            ConfigView::Express { cap } => {
                let exp_line = text
                    .lines()
                    .find(|l| l.contains("] Express ("))
                    .unwrap_or_else(|| {
                        panic!("{}: lspci shows no Express capability:\n{text}", d.bdf)
                    });
                let want = match cap.port_type {
                    PortType::Endpoint => "Endpoint",
                    PortType::LegacyEndpoint => "Legacy Endpoint",
                    PortType::RootPort => "Root Port",
                    PortType::SwitchUpstream => "Upstream Port",
                    PortType::SwitchDownstream => "Downstream Port",
                    PortType::PcieToPciBridge => "PCI-Express to PCI/PCI-X Bridge",
                    PortType::PciToPcieBridge => "PCI/PCI-X to PCI-Express Bridge",
                    PortType::RcEndpoint => "Root Complex Integrated Endpoint",
                    PortType::RcEventCollector => "Root Complex Event Collector",
                    PortType::Other(_) => "",
                };
                assert!(
                    exp_line.contains(want),
                    "{}: doctor says {want:?}, lspci: {exp_line}",
                    d.bdf
                );
                let ours = cap.lspci_text();
                let (our_cap, our_ctl) = ours.split_once(", AtomicOpsCtl:").unwrap();
                let our_cap = lspci_flags(our_cap, "AtomicOpsCap:");
                let our_ctl = lspci_flags(&format!("AtomicOpsCtl:{our_ctl}"), "AtomicOpsCtl:");
                for (key, ours) in [("AtomicOpsCap:", our_cap), ("AtomicOpsCtl:", our_ctl)] {
                    let Some(line) = text.lines().find(|l| l.contains(key)) else {
                        // lspci prints these only for capability version 2.
                        assert!(
                            cap.version < 2,
                            "{}: lspci has no {key} line for a v2 capability:\n{text}",
                            d.bdf
                        );
                        continue;
                    };
                    for (name, val) in lspci_flags(line, key) {
                        if let Some((_, v)) = ours.iter().find(|(n, _)| *n == name) {
                            assert_eq!(
                                *v, val,
                                "{}: {key} {name}: doctor {v}, lspci {val} ({line})",
                                d.bdf
                            );
                            compared += 1;
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "compared {compared} AtomicOps flags on {} PCI functions against lspci",
        devs.len()
    );
}

// ---- library view (the real scanner on the scan fixtures) ----------------------------------------

/// An affected GPU plus the library that would load: the scanner's per-target gate names the
/// declaring kernels for this GPU's gfx; a library without code for the gfx stays unknown, never clean.
#[test]
fn library_view_names_declaring_kernels_for_this_gpu() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, 0),
        gpu("03:00.0", false),
    ]);
    t.chain(&[
        root_port("00:01.2", 0x1022, 0x1483, 0),
        gpu("07:00.0", false),
    ]);
    t.kfd(&[("03:00.0", 110000, 13, 0), ("07:00.0", 120001, 13, 0)]);
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trixie/kernels.so");
    assert!(
        lib.exists(),
        "missing scanner fixture {}; run `cargo xtask fixtures`",
        lib.display()
    );
    let o = doctor(&t, None, &["--library", lib.to_str().unwrap()]);
    assert_eq!(o.verdict(), "rebuild", "{}", o.text);
    let states = &o.gpu("0000:03:00.0")["library_states"][0][1];
    assert_eq!(states["state"], "declares", "{states}");
    assert_eq!(states["kernels"].as_array().unwrap().len(), 2, "{states}");
    assert!(o.gpu("0000:03:00.0")["reasons"]
        .to_string()
        .contains("2 kernels declare hidden_hostcall_buffer for gfx1100"));
    let other = &o.gpu("0000:07:00.0")["library_states"][0][1];
    assert_eq!(
        other["state"], "no-code",
        "gfx1201 has no image in this library: {other}"
    );
    assert!(
        o.text
            .contains("declares hidden_hostcall_buffer (2 kernels)"),
        "{}",
        o.text
    );
}

/// `--internal-hip-probe` loads libamdhip64 at run time; on a machine without a HIP runtime it says
/// so cleanly instead of failing.
#[test]
fn hip_probe_without_runtime_is_absent() {
    if [
        "/opt/rocm/lib/libamdhip64.so",
        "/usr/lib/x86_64-linux-gnu/libamdhip64.so",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
    {
        eprintln!("skipped: a HIP runtime is installed here");
        return;
    }
    let o = crate::support::rcclfix()
        .args(["doctor", "--internal-hip-probe"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["state"], "absent", "{v}");
    assert!(
        v["reason"].as_str().unwrap().contains("libamdhip64.so"),
        "{v}"
    );
}

/// A GPU on a VM's root bus (QEMU `pcie.0`, no root port): the kernel's walk finds no bridge and
/// enables ReqEn without checking anything (seen on a real cloud VM: H200s at 00:06.0 show ReqEn+).
#[test]
fn gpu_on_vm_root_bus_passes_without_root_port() {
    let t = Tree::new();
    qemu_guest(&t);
    t.chain(&[gpu("00:06.0", true)]);
    let o = doctor(&t, None, &[]);
    assert_eq!(o.verdict(), "not-affected", "{}", o.text);
    let g = o.gpu("0000:00:06.0");
    assert_eq!(g["path_result"]["result"], "passes");
    assert_eq!(g["path_result"]["no_root_port"], true);
    assert_eq!(g["guest"]["behind_root_port"], false);
    assert!(
        g["reasons"]
            .to_string()
            .contains("without checking anything"),
        "{g}"
    );
}

/// An SR-IOV virtual function: the kernel refuses before walking (`is_virtfn`); the PF decides.
#[test]
fn sriov_virtual_function_is_refused() {
    let t = Tree::new();
    let pf = t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let vf = pf.parent().unwrap().join("0000:03:02.0");
    t.sibling(
        &pf,
        &dev("03:02.0", 0x1002, 0x73ae, 0x038000, Kind::Endpoint, 0, 0),
    );
    std::os::unix::fs::symlink("../0000:03:00.0", vf.join("physfn")).unwrap();
    let o = doctor(&t, None, &[]);
    assert_eq!(
        o.gpu("0000:03:00.0")["verdict"],
        "not-affected",
        "{}",
        o.text
    );
    let v = o.gpu("0000:03:02.0");
    assert_eq!(v["path_result"]["result"], "device-refused", "{v}");
    assert!(v["path_result"]["reason"]
        .as_str()
        .unwrap()
        .contains("virtual function"));
}

/// Decision table: no AtomicOps, but the library that loads scans clean for this GPU's gfx →
/// not this bug. With a second, declaring library also in play, the GPU stays affected.
#[test]
fn no_atomics_but_clean_library_is_not_this_bug() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, 0),
        gpu("03:00.0", false),
    ]);
    t.kfd(&[("03:00.0", 110000, 13, 0)]);
    let clean = data("plain-gfx1100.so");
    assert!(
        clean.exists(),
        "missing {}; run `cargo xtask doctor-fixtures`",
        clean.display()
    );
    let o = doctor(&t, None, &["--library", clean.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.text);
    assert_eq!(o.verdict(), "not-affected");
    let g = o.gpu("0000:03:00.0");
    assert_eq!(g["library_states"][0][1]["state"], "clean", "{g}");
    assert!(
        g["reasons"]
            .to_string()
            .contains("every librccl found scans clean for gfx1100"),
        "{g}"
    );
    assert!(o.json["headline"]
        .as_str()
        .unwrap()
        .contains("not this bug"));

    let declaring = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trixie/kernels.so");
    let o = doctor(
        &t,
        None,
        &[
            "--library",
            clean.to_str().unwrap(),
            "--library",
            declaring.to_str().unwrap(),
        ],
    );
    assert_eq!(o.verdict(), "rebuild", "{}", o.text);
}

// ---- input limits (adversarial inputs) ------------------------------------------------------------

/// Run `rcclfix doctor` with `args`, killing it after 30 s (a hang is the defect under test).
fn run_bounded(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    use std::io::Read;
    let mut child = crate::support::rcclfix()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("rcclfix {args:?} still running after 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code(), out, err)
}

#[test]
fn dmesg_and_log_refuse_fifos_and_devices() {
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let fifo = t.path().join("klog.fifo");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success(), "mkfifo failed");
    let (sys, proc) = (t.sys(), t.proc());
    for (flag, file) in [
        ("--dmesg", fifo.as_path()),
        ("--log", fifo.as_path()),
        ("--dmesg", Path::new("/dev/zero")),
        ("--log", Path::new("/dev/zero")),
        ("--dmesg", t.path()),
    ] {
        let (code, out, err) = run_bounded(&[
            "doctor".as_ref(),
            "--sysfs".as_ref(),
            sys.as_os_str(),
            "--proc".as_ref(),
            proc.as_os_str(),
            flag.as_ref(),
            file.as_os_str(),
        ]);
        assert_eq!(code, Some(2), "{flag} {}: {err}", file.display());
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(&file.display().to_string()), "{err}");
        assert!(err.contains("not a regular file"), "{err}");
    }
}

#[test]
fn huge_logs_are_read_from_the_end_only() {
    // A sparse 200 MiB kernel log: an atomics message in the first line (beyond the 64 MiB window,
    // so it must be ignored), zeros, then amdgpu's normal lines at the end.
    let t = Tree::new();
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    let big = t.path().join("big-dmesg.txt");
    {
        use std::io::{Seek, Write};
        let mut f = std::fs::File::create(&big).unwrap();
        f.write_all(b"[    1.0] amdgpu 0000:03:00.0: amdgpu: PCIE atomic ops is not supported\n")
            .unwrap();
        f.seek(std::io::SeekFrom::Start(200 << 20)).unwrap();
        f.write_all(b"\n").unwrap();
        f.write_all(AMDGPU_SILENT.as_bytes()).unwrap();
    }
    let o = doctor(&t, Some(&big), &["--log", big.to_str().unwrap()]);
    assert_eq!(o.verdict(), "not-affected", "{}", o.text);
    let g = o.gpu("0000:03:00.0");
    assert!(g["kernel_message"].is_null(), "{g}");
    assert_eq!(g["kernel_log_usable"], true, "{g}");
    let notes = o.notes();
    let cut = format!(
        "{}: read only the last 64.0 MiB of 200.0 MiB",
        big.display()
    );
    assert_eq!(notes.matches(&cut).count(), 2, "{notes}");
    assert!(o.text.contains(&cut), "{}", o.text);
    assert!(o.json["kernel_log"]["cut"]
        .as_str()
        .unwrap()
        .contains("64.0 MiB"));
}

/// Deterministic pseudo-random bytes (xorshift64*), for garbage config spaces.
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

#[test]
fn garbage_config_space_is_inconclusive_not_rebuild() {
    // One AMD GPU on the root bus whose 4 KiB `config` is random bytes, and an empty kernel log:
    // nothing here supports a verdict.
    for seed in [1u64, 2, 3, 42, 1234] {
        let t = Tree::new();
        let dir = t.chain(&[gpu("03:00.0", false)]);
        std::fs::write(dir.join("config"), garbage(seed, 4096)).unwrap();
        let d = t.dmesg("");
        let o = doctor(&t, Some(&d), &[]);
        assert_eq!(o.code, 2, "seed {seed}: {}", o.text);
        assert_eq!(o.verdict(), "inconclusive", "seed {seed}: {}", o.text);
        let g = o.gpu("0000:03:00.0");
        assert_eq!(g["path_result"]["result"], "malformed", "seed {seed}: {g}");
        let hop = g["path"].as_array().unwrap().last().unwrap();
        assert!(
            hop["status"].as_str().unwrap().starts_with("unreadable"),
            "seed {seed}: {hop}"
        );
    }
}

#[test]
fn gpu_without_pcie_capability_below_a_root_port_is_unreadable() {
    // The capability list bit cleared on a GPU below a PCIe root port: impossible for a real AMD
    // GPU, so the hop is unreadable and the verdict inconclusive (not "the kernel refuses it").
    let t = Tree::new();
    let dir = t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", false),
    ]);
    let mut cfg = std::fs::read(dir.join("config")).unwrap();
    cfg[6] = 0; // Status: no capability list
    std::fs::write(dir.join("config"), &cfg).unwrap();
    let d = t.dmesg("");
    let o = doctor(&t, Some(&d), &[]);
    assert_eq!(o.code, 2, "{}", o.text);
    assert_eq!(o.verdict(), "inconclusive", "{}", o.text);
    let g = o.gpu("0000:03:00.0");
    assert_eq!(g["path_result"]["result"], "malformed", "{g}");
    assert_eq!(g["path_result"]["at"], "0000:03:00.0", "{g}");
    assert!(
        o.text.contains("unreadable: malformed config space"),
        "{}",
        o.text
    );
}

#[test]
fn malformed_capability_lists_are_never_decoded() {
    use rcclfix::doctor::pci::{decode_config, ConfigView};
    let good = config_bytes(&gpu("03:00.0", true), 256);
    let bad = |what: &str, edit: &dyn Fn(&mut Vec<u8>)| {
        let mut c = good.clone();
        edit(&mut c);
        match decode_config(&c) {
            ConfigView::Malformed { reason } => reason,
            other => panic!("{what}: decoded as {other:?}"),
        }
    };
    assert!(bad("pointer into header", &|c| c[0x34] = 0x20).contains("into the header"));
    assert!(bad("loop", &|c| c[0x61] = 0x50).contains("loops"));
    assert!(bad("reserved ID", &|c| c[0x60] = 0x7e).contains("reserved capability ID"));
    assert!(bad("version 0", &|c| c[0x72] &= 0xf0).contains("version 0"));
    assert!(bad("version 7", &|c| c[0x72] = (c[0x72] & 0xf0) | 7).contains("version 7"));
    assert!(bad("reserved type", &|c| c[0x72] = (c[0x72] & 0x0f) | 0xb0).contains("reserved"));
    assert!(bad("header type", &|c| c[0x0e] = 0x7f).contains("header type"));
    let past = bad("past 256", &|c| {
        c[0x61] = 0xf0;
        c[0xf0] = 0x10;
        c[0xf2] = 0x02;
    });
    assert!(past.contains("past the 256-byte"), "{past}");
    // The unchanged bytes still decode.
    assert!(matches!(decode_config(&good), ConfigView::Express { .. }));
}

#[test]
fn random_gpu_config_never_yields_a_refusal() {
    // Thousands of random config spaces on an AMD GPU: the kernel rule may say "malformed",
    // "unreadable" or (for a well-formed endpoint by chance) "passes", never a refusal or a break
    // that a verdict could rest on; and decoding never panics.
    use rcclfix::doctor::pci::{atomic_ops_to_root, decode_config, Bdf, PathResult, PciDevice};
    for seed in 0..5000u64 {
        let bytes = garbage(seed, if seed % 2 == 0 { 4096 } else { 256 });
        let d = PciDevice {
            bdf: Bdf::parse("0000:03:00.0").unwrap(),
            vendor: 0x1002,
            device: 0x744c,
            class: 0x030000,
            multifunction_header: false,
            is_virtfn: false,
            config_len: bytes.len(),
            config: decode_config(&bytes),
            dir: PathBuf::new(),
        };
        let r = atomic_ops_to_root(&d, &[]);
        assert!(
            !matches!(
                r,
                PathResult::DeviceRefused { .. } | PathResult::Breaks { .. }
            ),
            "seed {seed}: {r:?}"
        );
    }
}

#[test]
fn missing_sysfs_or_proc_is_an_error_not_no_gpu() {
    let t = Tree::new();
    let missing = t.path().join("no-such-sys");
    let file = t.dmesg("");
    for (sys, proc, flag, p) in [
        (missing.clone(), t.proc(), "--sysfs", missing.as_path()),
        (t.sys(), missing.clone(), "--proc", missing.as_path()),
        (file.clone(), t.proc(), "--sysfs", file.as_path()),
    ] {
        let mut c = crate::support::rcclfix();
        c.args(["doctor", "--no-hip", "--no-library", "--dmesg"])
            .arg(&file)
            .arg("--sysfs")
            .arg(&sys)
            .arg("--proc")
            .arg(&proc);
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag} {}: {err}", p.display());
        assert!(
            o.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(&format!("{flag} {}", p.display())), "{err}");
    }
    // An existing root without AMD GPUs still says so cleanly.
    let o = doctor(&t, Some(&file), &[]);
    assert_eq!(o.code, 0, "{}", o.text);
    assert!(o.json["headline"]
        .as_str()
        .unwrap()
        .starts_with("not affected: no AMD GPU found (0 PCI functions in"));
}

#[test]
fn capture_without_amd_gpu_reads_back() {
    // A machine with only an Intel GPU: the capture holds no PCI device, yet reads back.
    let t = Tree::new();
    t.chain(&[dev(
        "02:00.0",
        0x8086,
        0x56a0,
        0x030000,
        Kind::Endpoint,
        0,
        0,
    )]);
    let d = t.dmesg("[    1.0] i915 0000:02:00.0: [drm] GuC firmware loaded\n");
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
    let mut ar = tar::Archive::new(std::fs::File::open(&tar_path).unwrap());
    let names: Vec<String> = ar
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n.trim_end_matches('/') == "sys"),
        "{names:?}"
    );
    let o = run_doctor(&[
        "doctor".into(),
        "--snapshot".into(),
        tar_path.display().to_string(),
    ]);
    assert_eq!(o.code, 0, "{}", o.text);
    assert!(
        o.json["headline"]
            .as_str()
            .unwrap()
            .starts_with("not affected: no AMD GPU found (0 PCI functions in"),
        "{}",
        o.json["headline"]
    );
    // An older capture without the sys/ entry (only the manifest) is accepted too.
    let old = t.path().join("old-snap");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(
        old.join("rcclfix-snapshot.json"),
        r#"{"kind":"rcclfix-doctor-snapshot"}"#,
    )
    .unwrap();
    let o = run_doctor(&[
        "doctor".into(),
        "--snapshot".into(),
        old.display().to_string(),
    ]);
    assert_eq!(o.code, 0, "{}", o.text);
    assert!(
        o.json["headline"]
            .as_str()
            .unwrap()
            .starts_with("not affected: no AMD GPU found (0 PCI functions in"),
        "{}",
        o.json["headline"]
    );
}

#[test]
fn garbage_snapshot_error_is_short_and_printable() {
    let t = Tree::new();
    let random = t.path().join("random.bin");
    std::fs::write(&random, garbage(7, 3000)).unwrap();
    // A tar-looking header (ustar magic) over random bytes: the archive reader's own error quotes
    // raw header bytes.
    let fake = t.path().join("fake.tar");
    let mut b = garbage(8, 2048);
    b[257..263].copy_from_slice(b"ustar\0");
    std::fs::write(&fake, &b).unwrap();
    for f in [&random, &fake] {
        let o = crate::support::rcclfix()
            .args(["doctor", "--snapshot"])
            .arg(f)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", f.display());
        assert!(o.stdout.is_empty());
        let err = &o.stderr;
        assert!(
            err.iter().all(|&c| c == b'\n' || (0x20..0x7f).contains(&c)),
            "{}: non-printable bytes in the error: {:?}",
            f.display(),
            String::from_utf8_lossy(err)
        );
        let err = String::from_utf8_lossy(err);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.len() < 400, "{err}");
        assert!(err.contains(&f.display().to_string()), "{err}");
    }
}

// ---- log triage: evidence, not the release --------------------------------------------------------

/// Run doctor on `--log FILE` with an empty machine (no GPU): what a maintainer sees for a pasted
/// log.
fn log_only(file: &str) -> Out {
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

// ---- --lspci: pasted lspci text, cross-checked against sysfs --------------------------------------

/// The machines of the `--lspci` golden files: a consumer board (one GPU on a CPU root port with its
/// audio function, one behind a chipset switch whose downstream port has Routing-) and a QEMU
/// guest with a GPU passed as a multifunction device.
fn lspci_machine(name: &str) -> Tree {
    let t = Tree::new();
    match name {
        "board" => {
            let dir = t.chain(&[
                root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT | COMP128),
                gpu("03:00.0", true),
            ]);
            t.sibling(&dir, &audio("03:00.1"));
            t.chain(&[
                root_port("00:01.2", 0x1022, 0x1483, HEALTHY_ROOT | COMP128),
                dev(
                    "04:00.0",
                    0x1022,
                    0x57ad,
                    0x060400,
                    Kind::SwitchUp,
                    ROUTE,
                    0,
                ),
                dev("05:08.0", 0x1022, 0x57a3, 0x060400, Kind::SwitchDown, 0, 0),
                gpu("07:00.0", false),
            ]);
        }
        "guest" => {
            t.dmi("QEMU", "Standard PC (Q35 + ICH9, 2009)", "pc-q35-9.0+pve0");
            t.hypervisor_flag();
            let mut g = gpu("01:00.0", false);
            g.multifunction = true;
            let dir = t.chain(&[root_port("00:1c.0", 0x1b36, 0x000c, 0), g]);
            let mut a = audio("01:00.1");
            a.multifunction = true;
            t.sibling(&dir, &a);
        }
        _ => unreachable!(),
    }
    t
}

/// The lines of lspci output that carry what doctor reads (device headers, bus numbers, the
/// Express capability and the AtomicOps bits): names from pci.ids may differ between versions.
fn lspci_key_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| {
            l.contains("Bus: ")
                || l.contains("] Express (")
                || l.contains("AtomicOps")
                || l.split_whitespace()
                    .next()
                    .is_some_and(|t| rcclfix::doctor::pci::Bdf::parse(t).is_some())
        })
        .map(|l| {
            // Keep the address, the class code and the IDs of a header, not the names.
            let l = l.trim();
            match rcclfix::doctor::pci::Bdf::parse(l.split_whitespace().next().unwrap()) {
                Some(b) => {
                    let ids: Vec<&str> = l
                        .split('[')
                        .filter_map(|x| x.split(']').next())
                        .filter(|x| x.len() == 4 || (x.len() == 9 && x.as_bytes()[4] == b':'))
                        .collect();
                    format!("{b} {}", ids.join(" "))
                }
                None => l.to_owned(),
            }
        })
        .collect()
}

/// The lspci golden files: `lspci -F DUMP -vvvnn` / `-vvv` / `-tv` (pciutils) on the config bytes
/// the sysfs tree holds. With lspci installed the files are regenerated and compared on the lines
/// doctor reads (`RCCLFIX_UPDATE=1` rewrites them); without it the committed files are used.
fn lspci_golden(name: &str, t: &Tree) -> [PathBuf; 3] {
    let dir = data("lspci");
    let files = [
        dir.join(format!("{name}-vvvnn.txt")),
        dir.join(format!("{name}-vvv.txt")),
        dir.join(format!("{name}-tv.txt")),
    ];
    let slow = std::env::var_os("RCCLFIX_SLOW_TESTS").is_some_and(|v| v == "1");
    let Ok(lspci) = which::which("lspci") else {
        assert!(
            !slow,
            "RCCLFIX_SLOW_TESTS=1 but lspci is missing: install pciutils (.ci/apt.d/doctor.txt)"
        );
        eprintln!("lspci not installed: using the committed golden files");
        return files;
    };
    let dump = t.path().join("config.dump");
    std::fs::write(&dump, t.hex_dump()).unwrap();
    for (file, args) in files
        .iter()
        .zip([&["-vvvnn"][..], &["-vvv"][..], &["-tv"][..]])
    {
        let out = Command::new(&lspci)
            .arg("-F")
            .arg(&dump)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "lspci {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let fresh = String::from_utf8(out.stdout).unwrap();
        if std::env::var_os("RCCLFIX_UPDATE").is_some() || !file.exists() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(file, &fresh).unwrap();
        }
        let golden = std::fs::read_to_string(file).unwrap();
        if args == &["-tv"][..] {
            assert_eq!(
                golden
                    .lines()
                    .map(|l| l.split("  ").next().unwrap_or(l))
                    .collect::<Vec<_>>(),
                fresh
                    .lines()
                    .map(|l| l.split("  ").next().unwrap_or(l))
                    .collect::<Vec<_>>(),
                "{}: the tree differs from lspci's (RCCLFIX_UPDATE=1 rewrites it)",
                file.display()
            );
        } else {
            assert_eq!(
                lspci_key_lines(&golden),
                lspci_key_lines(&fresh),
                "{}: differs from lspci's output on the same bytes (RCCLFIX_UPDATE=1 rewrites it)",
                file.display()
            );
        }
    }
    files
}

/// `"1022:1483"` and `"1022:????"` → `ID` (device IDs are not in `lspci -vvv` without `-n`).
fn regex_lite_ids(l: &str) -> String {
    let mut out = String::new();
    let mut rest = l;
    while let Some(i) = rest.find('"') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        match tail.find('"') {
            Some(j) if j == 9 && tail.as_bytes()[4] == b':' => {
                out.push_str("ID");
                rest = &tail[j + 1..];
            }
            _ => {
                out.push('"');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What a report says about each GPU's path: result and every hop, for comparing two readings.
fn path_view(o: &Out) -> Vec<String> {
    let mut v = vec![format!("verdict {}", o.verdict())];
    for g in o.json["gpus"].as_array().unwrap() {
        v.push(format!(
            "{} {} {} {}",
            g["bdf"], g["id"], g["gfx"], g["path_result"]
        ));
        for h in g["path"].as_array().unwrap() {
            v.push(format!(
                "  {} {} {} {} {}",
                h["bdf"], h["id"], h["role"], h["atomics"], h["status"]
            ));
        }
        v.push(format!("  verdict {}", g["verdict"]));
        v.push(format!("  multifunction {}", g["guest"]["multifunction"]));
    }
    v
}

/// Golden test: real `lspci -vvvnn` / `-vvv` / `-tv` output of the config bytes that the sysfs tree
/// holds gives the same paths, hops, bits and verdicts through `--lspci` as through `--sysfs`.
#[test]
fn lspci_text_reads_like_sysfs() {
    for name in ["board", "guest"] {
        let t = lspci_machine(name);
        let [nn, plain, tree] = lspci_golden(name, &t);
        let sysfs = doctor(&t, None, &[]);
        let want = path_view(&sysfs);
        // The tree alone gives the topology: the same text without the bridges' `Bus:` lines.
        let no_bus = t.path().join(format!("{name}-no-bus.txt"));
        let text = std::fs::read_to_string(&nn).unwrap();
        let stripped: Vec<&str> = text
            .lines()
            .filter(|l| !l.contains("Bus: primary="))
            .collect();
        std::fs::write(&no_bus, stripped.join("\n")).unwrap();
        for (what, files) in [
            ("-vvvnn", vec![&nn]),
            ("-vvv", vec![&plain]),
            ("-vvvnn + -tv", vec![&nn, &tree]),
            ("-vvvnn without Bus: lines + -tv", vec![&no_bus, &tree]),
        ] {
            let mut args: Vec<String> = vec!["doctor".into(), "--no-hip".into()];
            for f in files {
                args.push("--lspci".into());
                args.push(f.display().to_string());
            }
            let o = run_doctor(&args);
            assert_eq!(o.code, sysfs.code, "{name} {what}: {}", o.text);
            let mut got = path_view(&o);
            let mut want = want.clone();
            if what == "-vvv" {
                // Without -nn the device IDs are not in the text: the GPU reads `1002:????` and its
                // gfx comes from the chip name; the rest must agree.
                let ids = regex_lite_ids;
                for l in got.iter_mut().chain(want.iter_mut()) {
                    *l = ids(l);
                }
                for g in o.json["gpus"].as_array().unwrap() {
                    assert_eq!(g["gfx"], "gfx1100", "{name} {what}: {g}");
                    assert_eq!(g["gfx_source"], "chip name in the lspci text");
                }
            }
            // pciutils prints an endpoint's completer bits only when it has a memory BAR, which a
            // config dump does not size (`ls-caps.c`): the text says "not shown", never "32bit-".
            for l in want.iter_mut() {
                if l.contains("\"GPU (endpoint)\"") {
                    *l = l.replace(
                        "AtomicOpsCap: 32bit+ 64bit+ 128bitCAS-",
                        "AtomicOpsCap: not shown",
                    );
                }
            }
            assert_eq!(got, want, "{name} {what}:\n{}", o.text);
            assert!(o.text.contains("Examined: "), "{}", o.text);
        }
    }
    // The board: the chipset GPU breaks at the downstream port, the CPU-slot one passes.
    let t = lspci_machine("board");
    let [nn, _, _] = lspci_golden("board", &t);
    let o = run_doctor(&["doctor".into(), "--lspci".into(), nn.display().to_string()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "rebuild");
    assert_eq!(
        o.breaks("0000:07:00.0"),
        ("0000:05:08.0".into(), "switch-no-routing".into())
    );
    assert_eq!(o.gpu("0000:03:00.0")["verdict"], "not-affected");
    assert!(o.actions().contains("--targets gfx1100"), "{}", o.actions());
    // The guest: multifunction under a QEMU root port → fix the VM, read from the text alone.
    let t = lspci_machine("guest");
    let [nn, _, _] = lspci_golden("guest", &t);
    let o = run_doctor(&["doctor".into(), "--lspci".into(), nn.display().to_string()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "fix-vm-config");
    assert_eq!(o.json["hypervisor"]["name"], "QEMU/KVM");
}

/// Partial or unknown lspci text is inconclusive, never "not affected": the GPU block alone (no
/// bridge above it), `<access denied>`, a root port without its AtomicOps lines, and text that is
/// not lspci output at all (an error).
#[test]
fn partial_lspci_text_is_inconclusive() {
    let t = lspci_machine("board");
    let [nn, _, _] = lspci_golden("board", &t);
    let full = std::fs::read_to_string(&nn).unwrap();
    let block = |bdf: &str| -> String {
        full.split("\n\n")
            .find(|b| b.starts_with(bdf))
            .unwrap()
            .to_owned()
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "GPU block only",
            block("07:00.0"),
            "the bridge above 0000:07:00.0 (bus 07) is not in the pasted text",
        ),
        (
            "access denied",
            format!(
                "{}\n{}\n",
                block("00:01.1")
                    .split("\tCapabilities:")
                    .next()
                    .unwrap()
                    .to_owned()
                    + "\tCapabilities: <access denied>",
                block("03:00.0")
            ),
            "run it as root (sudo lspci -vvv)",
        ),
        (
            "root port without AtomicOps lines",
            format!(
                "{}\n\n{}\n",
                block("00:01.1")
                    .lines()
                    .filter(|l| !l.contains("AtomicOps"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                block("03:00.0")
            ),
            "has no `AtomicOpsCap: … 32bit±` line",
        ),
    ];
    for (what, text, key) in cases {
        let f = t.path().join("partial.txt");
        std::fs::write(&f, text).unwrap();
        let o = run_doctor(&["doctor".into(), "--lspci".into(), f.display().to_string()]);
        assert_eq!(o.code, 2, "{what}: {}", o.text);
        assert_eq!(o.verdict(), "inconclusive", "{what}");
        assert!(o.text.contains(key), "{what}: {}", o.text);
        assert!(
            o.actions().contains("sudo lspci -vvv"),
            "{what}: {}",
            o.actions()
        );
    }
    // Not lspci output: one line naming the file.
    let f = t.path().join("notes.txt");
    std::fs::write(&f, "my GPUs do not work, please help\n").unwrap();
    let (code, out, err) = run_bounded(&["doctor".as_ref(), "--lspci".as_ref(), f.as_os_str()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(out.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&f.display().to_string()) && err.contains("no lspci device block"),
        "{err}"
    );
}

// ---- hostile inputs (issue 12: unread input, unbounded text, untrusted snapshots, terminals) ------

/// Write a tar whose members are `(path, kind)`; `kind` is a file body, a symlink target, a hard
/// link target, or a FIFO.
enum Member<'a> {
    File(&'a [u8]),
    Dir,
    Symlink(&'a str),
    Hardlink(&'a str),
    Fifo,
}

fn write_tar(path: &Path, members: &[(&str, Member)]) {
    let mut b = tar::Builder::new(Vec::new());
    for (name, m) in members {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_mtime(0);
        match m {
            Member::File(body) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(body.len() as u64);
                b.append_data(&mut h, name, *body).unwrap();
            }
            Member::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, name, std::io::empty()).unwrap();
            }
            Member::Symlink(t) | Member::Hardlink(t) => {
                h.set_entry_type(if matches!(m, Member::Symlink(_)) {
                    tar::EntryType::Symlink
                } else {
                    tar::EntryType::Link
                });
                h.set_size(0);
                b.append_link(&mut h, name, t).unwrap();
            }
            Member::Fifo => {
                h.set_entry_type(tar::EntryType::Fifo);
                h.set_size(0);
                b.append_data(&mut h, name, std::io::empty()).unwrap();
            }
        }
    }
    std::fs::write(path, b.into_inner().unwrap()).unwrap();
}

/// Issue 12 class 4: a snapshot with no sys/ and an invalid rcclfix-snapshot.json is an error (2),
/// never "not affected" (before: exit 0, "no AMD GPU found"); as a tar and as a folder.
#[test]
fn snapshot_with_invalid_manifest_is_an_error() {
    let t = Tree::new();
    for (what, body) in [
        ("not JSON", &b"{ this is not json"[..]),
        ("another kind", &br#"{"kind":"something-else"}"#[..]),
    ] {
        let tar_path = t.path().join("bad.tar");
        write_tar(
            &tar_path,
            &[
                ("proc", Member::Dir),
                ("rcclfix-snapshot.json", Member::File(body)),
            ],
        );
        let dir = t.path().join("bad-dir");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("rcclfix-snapshot.json"), body).unwrap();
        for p in [&tar_path, &dir] {
            let (code, out, err) =
                run_bounded(&["doctor".as_ref(), "--snapshot".as_ref(), p.as_os_str()]);
            assert_eq!(code, Some(2), "{what} {}: {err}", p.display());
            assert!(out.is_empty(), "{out}");
            assert_eq!(err.trim().lines().count(), 1, "{err}");
            assert!(err.contains("rcclfix-snapshot.json"), "{err}");
            assert!(err.contains(&p.display().to_string()), "{err}");
        }
    }
}

/// Issue 12 class 7: members that are links or special files are refused, naming the member
/// (dmesg.txt → a host file, sys → /sys, a hard link, a FIFO), and nothing is read through them;
/// the capture's own sys/bus/pci/devices links still read back (capture round trip above).
#[test]
fn snapshot_links_and_special_files_are_refused() {
    let t = Tree::new();
    let secret = t.path().join("host-secret.txt");
    std::fs::write(
        &secret,
        "amdgpu 0000:03:00.0: PCIE atomic ops is not supported\n",
    )
    .unwrap();
    let secret_s = secret.display().to_string();
    let manifest = br#"{"kind":"rcclfix-doctor-snapshot"}"#;
    type Case<'a> = (&'a str, Vec<(&'a str, Member<'a>)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "dmesg.txt symlink",
            vec![
                ("sys", Member::Dir),
                ("rcclfix-snapshot.json", Member::File(manifest)),
                ("dmesg.txt", Member::Symlink(&secret_s)),
            ],
            "refused snapshot member dmesg.txt: a symbolic link to",
        ),
        (
            "sys symlink",
            vec![
                ("rcclfix-snapshot.json", Member::File(manifest)),
                ("sys", Member::Symlink("/sys")),
            ],
            "refused snapshot member sys: a symbolic link to /sys",
        ),
        (
            "bus link out of the snapshot",
            vec![
                ("sys", Member::Dir),
                (
                    "sys/bus/pci/devices/0000:03:00.0",
                    Member::Symlink("../../../../../../sys/devices/pci0000:00/0000:03:00.0"),
                ),
            ],
            "refused snapshot member sys/bus/pci/devices/0000:03:00.0: a symbolic link",
        ),
        (
            "hard link",
            vec![
                ("sys", Member::Dir),
                ("dmesg.txt", Member::Hardlink(&secret_s)),
            ],
            "refused snapshot member dmesg.txt: a hard link",
        ),
        (
            "FIFO",
            vec![("sys", Member::Dir), ("dmesg.txt", Member::Fifo)],
            "refused snapshot member dmesg.txt: a FIFO",
        ),
    ];
    for (what, members, key) in cases {
        let p = t.path().join("hostile.tar");
        write_tar(&p, &members);
        let (code, out, err) =
            run_bounded(&["doctor".as_ref(), "--snapshot".as_ref(), p.as_os_str()]);
        assert_eq!(code, Some(2), "{what}: {err}");
        assert!(out.is_empty(), "{what}: {out}");
        assert_eq!(err.trim().lines().count(), 1, "{what}: {err}");
        assert!(err.contains(key), "{what}: {err}");
    }
    // The same in an extracted folder.
    let dir = t.path().join("snapdir");
    std::fs::create_dir_all(dir.join("sys")).unwrap();
    std::fs::write(dir.join("rcclfix-snapshot.json"), manifest).unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("dmesg.txt")).unwrap();
    let (code, _, err) = run_bounded(&["doctor".as_ref(), "--snapshot".as_ref(), dir.as_os_str()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("refused snapshot entry dmesg.txt: a symbolic link to"),
        "{err}"
    );
}

/// Issue 12 class 6: `--vm-config` is bounded like `--log`: a 2 GiB sparse file is refused at
/// once (size and limit named), a FIFO is refused without blocking; `--lspci` alike.
#[test]
fn vm_config_and_lspci_are_bounded_and_regular_files_only() {
    let t = Tree::new();
    let big = t.path().join("huge.conf");
    {
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(2 << 30).unwrap();
    }
    let fifo = t.path().join("cfg.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let (sys, proc) = (t.sys(), t.proc());
    for flag in ["--vm-config", "--lspci"] {
        for (file, key) in [
            (&big, "2.0 GiB is larger than the 64.0 MiB limit"),
            (&fifo, "not a regular file (a FIFO)"),
        ] {
            let mut args: Vec<&std::ffi::OsStr> = vec!["doctor".as_ref()];
            if flag == "--vm-config" {
                args.extend([
                    "--sysfs".as_ref(),
                    sys.as_os_str(),
                    "--proc".as_ref(),
                    proc.as_os_str(),
                ]);
            }
            args.extend([flag.as_ref(), file.as_os_str()]);
            let started = std::time::Instant::now();
            let (code, out, err) = run_bounded(&args);
            assert_eq!(code, Some(2), "{flag} {}: {err}", file.display());
            assert!(out.is_empty());
            assert_eq!(err.trim().lines().count(), 1, "{err}");
            assert!(err.contains(&file.display().to_string()), "{err}");
            assert!(err.contains(key), "{flag}: {err}");
            assert!(started.elapsed() < std::time::Duration::from_secs(20));
        }
    }
}

/// Issue 12 class 3 (doctor's part): log lines with terminal control sequences are escaped in the
/// text report; JSON keeps the exact line.
#[test]
fn log_lines_are_escaped_for_the_terminal() {
    let t = Tree::new();
    let log = t.path().join("evil.log");
    std::fs::write(
        &log,
        "\x1b]0;pwned\x07\x1b[2J:1:rocvirtual.cpp :4208: … Pcie atomics not enabled, hostcall not supported\nRuntimeError: NCCL error: unhandled cuda error\n",
    )
    .unwrap();
    let o = doctor(&t, None, &["--log", log.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.text);
    assert!(
        !o.text.contains('\x1b') && !o.text.contains('\x07'),
        "{:?}",
        o.text
    );
    assert!(o.text.contains("\\e]0;pwned\\x07\\e[2J"), "{}", o.text);
    let raw = o.json["logs"][0]["findings"][0]["line"].as_str().unwrap();
    assert!(raw.starts_with("\x1b]0;pwned\x07"), "{raw:?}");
}

/// A new user with only a pasted forum log: the report names what the log proves (RCCL's HIP call
/// returned hipErrorIllegalState; ROCm 7.2.1 from torch's version; gfx1100 from rocminfo), what it
/// does not (no GPU examined, the refusal line itself is missing), and the next command.
#[test]
fn new_user_with_a_pasted_forum_log() {
    let o = log_only("logs/forum_torch_tp2.log");
    assert_eq!(o.code, 1, "{}", o.text);
    assert_eq!(o.verdict(), "rebuild");
    assert_eq!(o.json["logs"][0]["class"], "consistent-with-refusal");
    assert_eq!(
        o.json["headline"],
        "affected — rebuild RCCL: rcclfix build --tag 2.27.7 --targets gfx1100"
    );
    assert_eq!(o.json["logs"][0]["rocm"]["release"], "7.2.1");
    assert_eq!(o.json["logs"][0]["rccl"], "2.27.7");
    for key in [
        "Examined: log ",
        "Not examined: GPUs: no AMD GPU in",
        "torch +rocm7.2.1 version suffix",
        "a HIP call inside RCCL returned hipErrorIllegalState",
        "What to do:\n  - rcclfix build --tag 2.27.7 --targets gfx1100",
        "platform not checked (no AMD GPU examined)",
    ] {
        assert!(o.text.contains(key), "{key}:\n{}", o.text);
    }
}
