//! `rcclfix doctor` on sysfs/procfs/kernel-log snapshots that the tests build themselves from the
//! documented register layout (Linux `pci_regs.h`), one per public report (ROCm/ROCm#6074,
//! ROCm/ROCm#6148, ROCm/ROCm#6520, vllm-project/vllm#38587, ROCm/rccl#958, ROCm/rccl#2124, …) plus the platform shapes doctor must tell apart. No root and no GPU needed: the
//! binary runs with `--sysfs/--proc/--dmesg` pointing into a temporary tree.

use std::path::{Path, PathBuf};

use serde_json::Value;

#[allow(unused_imports)]
use super::doctor_cases::*;
#[allow(unused_imports)]
use super::doctor_inputs::*;
#[allow(unused_imports)]
use super::doctor_logs::*;
#[allow(unused_imports)]
use super::doctor_lspci::*;

// ---- the snapshot builder ------------------------------------------------------------------------

/// Register values written by the builder (pci_regs.h), independent of the crate's own constants.
pub(crate) const ROUTE: u32 = 0x40;
pub(crate) const COMP32: u32 = 0x80;
pub(crate) const COMP64: u32 = 0x100;
pub(crate) const COMP128: u32 = 0x200;
pub(crate) const REQ_EN: u16 = 0x40;
pub(crate) const EGRESS_BLOCK: u16 = 0x80;

#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Endpoint,
    RootPort,
    SwitchUp,
    SwitchDown,
}

#[derive(Clone)]
pub(crate) struct Dev {
    pub(crate) bdf: &'static str,
    pub(crate) vendor: u16,
    pub(crate) device: u16,
    pub(crate) class: u32,
    pub(crate) kind: Kind,
    pub(crate) devcap2: u32,
    pub(crate) devctl2: u16,
    pub(crate) multifunction: bool,
    /// Bridges: the secondary and subordinate bus numbers (set by [`Tree::chain`]).
    pub(crate) buses: Option<(u8, u8)>,
}

pub(crate) fn dev(
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
pub(crate) fn root_port(bdf: &'static str, vendor: u16, device: u16, devcap2: u32) -> Dev {
    dev(bdf, vendor, device, 0x060400, Kind::RootPort, devcap2, 0)
}
pub(crate) fn switch_up(bdf: &'static str, devcap2: u32, devctl2: u16) -> Dev {
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
pub(crate) fn switch_down(bdf: &'static str, devcap2: u32) -> Dev {
    dev(bdf, 0x1002, 0x1479, 0x060400, Kind::SwitchDown, devcap2, 0)
}
/// A Navi31 GPU function (AtomicOpsCap 32bit+ 64bit+).
pub(crate) fn gpu(bdf: &'static str, req_en: bool) -> Dev {
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
pub(crate) fn audio(bdf: &'static str) -> Dev {
    dev(bdf, 0x1002, 0xab30, 0x040300, Kind::Endpoint, 0, 0)
}

/// Config space bytes: type 0/1 header, a capability list PM (0x50) → MSI (0x60) → PCIe v2 (0x70),
/// DevCap2 at 0x70+0x24, DevCtl2 at 0x70+0x28; cut to `len` bytes (64 = an unprivileged read).
pub(crate) fn config_bytes(d: &Dev, len: usize) -> Vec<u8> {
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

pub(crate) struct Tree {
    tmp: tempfile::TempDir,
    config_len: usize,
    /// Every config space written, by address, for `lspci -F` dumps of the same bytes.
    written: std::cell::RefCell<Vec<(String, Vec<u8>)>>,
}

impl Tree {
    pub(crate) fn new() -> Tree {
        Tree::new_in(&std::env::temp_dir())
    }
    /// A tree in a new folder under `parent`.
    pub(crate) fn new_in(parent: &Path) -> Tree {
        let t = Tree {
            tmp: tempfile::tempdir_in(parent).unwrap(),
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
    pub(crate) fn sys(&self) -> PathBuf {
        self.tmp.path().join("sys")
    }
    pub(crate) fn proc(&self) -> PathBuf {
        self.tmp.path().join("proc")
    }
    pub(crate) fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// Add a chain of devices, top (root port, on `pci0000:00`) first; each is the child of the one
    /// before. Devices already present (same BDF) are reused. Returns the GPU's sysfs directory.
    pub(crate) fn chain(&self, devs: &[Dev]) -> PathBuf {
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
    pub(crate) fn hex_dump(&self) -> String {
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
    pub(crate) fn sibling(&self, gpu_dir: &Path, d: &Dev) {
        let dir = gpu_dir.parent().unwrap().join(format!("0000:{}", d.bdf));
        self.write_dev(&dir, d);
    }
    pub(crate) fn write_dev(&self, dir: &Path, d: &Dev) {
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
    pub(crate) fn dmi(&self, vendor: &str, product: &str, version: &str) {
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
    pub(crate) fn hypervisor_flag(&self) {
        std::fs::write(
            self.proc().join("cpuinfo"),
            "processor\t: 0\nmodel name\t: QEMU Virtual CPU\nflags\t\t: fpu vme sse2 hypervisor\n",
        )
        .unwrap();
    }
    /// KFD: node 0 is the CPU; each GPU is (bdf, gfx_target_version, io_link flags, cpu cores).
    pub(crate) fn kfd(&self, gpus: &[(&str, u32, u32, u32)]) {
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
    pub(crate) fn dmesg(&self, text: &str) -> PathBuf {
        let p = self.path().join("dmesg.txt");
        std::fs::write(&p, text).unwrap();
        p
    }
}

/// Snapshot the text report (stored under tests/data/doctor/snapshots/).
pub(crate) fn snapshot(name: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => "../data/doctor/snapshots",
        prepend_module_to_snapshot => false,
        filters => vec![(r"/tmp/\.tmp[A-Za-z0-9]+", "[TMP]")],
    }, {
        insta::assert_snapshot!(name, text);
    });
}

pub(crate) fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/doctor")
        .join(rel)
}

pub(crate) struct Out {
    pub(crate) code: i32,
    pub(crate) json: Value,
    pub(crate) text: String,
}

/// Run `rcclfix doctor` on the tree twice (JSON and text) with extra arguments.
pub(crate) fn doctor(t: &Tree, dmesg: Option<&Path>, extra: &[&str]) -> Out {
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

pub(crate) fn run_doctor(args: &[String]) -> Out {
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
    let o = Out {
        code: j.status.code().unwrap(),
        json,
        text,
    };
    json_contract(args, &o);
    o
}

/// The JSON contract of docs/doctor-json.md, checked on every report any doctor test produces:
/// `rebuild` is present ⇔ the actions hold an `rcclfix build` command ⇔ the verdict is `rebuild`;
/// `exit_code` is the documented one for the verdict and the process's own; the schema version is
/// the documented one. With `RCCLFIX_CONTRACT_LOG=FILE` each case checked appends one line there
/// (to count them).
pub(crate) fn json_contract(args: &[String], o: &Out) {
    let v = o.json["verdict"]
        .as_str()
        .unwrap_or_else(|| panic!("no verdict: {}", o.json));
    let expected_exit = match v {
        "not-affected" => 0,
        "fix-vm-config" | "rebuild" | "hostcall-outside-rccl" => 1,
        "inconclusive" => 2,
        other => panic!("undocumented verdict {other}"),
    };
    let ctx = || format!("rcclfix {}\n{}", args.join(" "), o.text);
    assert_eq!(o.json["schema_version"], 3, "{}", ctx());
    assert_eq!(o.json["exit_code"], expected_exit, "{}", ctx());
    assert_eq!(o.code, expected_exit, "{}", ctx());
    let rebuild = v == "rebuild";
    assert_eq!(
        !o.json["rebuild"].is_null(),
        rebuild,
        "rebuild object vs verdict {v}: {}",
        ctx()
    );
    let actions: Vec<&str> = o.json["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        actions.iter().any(|a| a.contains("rcclfix build")),
        rebuild,
        "`rcclfix build` in the actions vs verdict {v}: {}",
        ctx()
    );
    if !o.json["release"].is_null() {
        assert!(o.json["release"].get("command").is_none(), "{}", ctx());
    }
    if let Some(f) = std::env::var_os("RCCLFIX_CONTRACT_LOG") {
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(f)
            .unwrap();
        writeln!(w, "{v}\t{}", args.join(" ")).unwrap();
    }
}

impl Out {
    pub(crate) fn verdict(&self) -> &str {
        self.json["verdict"].as_str().unwrap()
    }
    pub(crate) fn gpu(&self, bdf: &str) -> &Value {
        self.json["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["bdf"] == bdf)
            .unwrap_or_else(|| panic!("no GPU {bdf} in {}", self.json))
    }
    /// The hop where the kernel rule breaks for `bdf`, and why.
    pub(crate) fn breaks(&self, bdf: &str) -> (String, String) {
        let r = &self.gpu(bdf)["path_result"];
        assert_eq!(r["result"], "breaks", "{bdf}: {r}");
        (
            r["hop"].as_str().unwrap().to_owned(),
            r["problem"].as_str().unwrap().to_owned(),
        )
    }
    pub(crate) fn actions(&self) -> String {
        self.json["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    }
    pub(crate) fn notes(&self) -> String {
        self.json["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

pub(crate) const HEALTHY_ROOT: u32 = COMP32 | COMP64; // consumer root port: Routing- 32bit+ 64bit+
pub(crate) const AMDGPU_SILENT: &str =
    "[    4.1] amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!\n";

pub(crate) fn qemu_guest(t: &Tree) {
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
