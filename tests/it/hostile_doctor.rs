//! Hostile inputs to `rcclfix doctor`, one table row per class of issue 20 that doctor owns:
//! unread evidence that must not read as "not affected" (a snapshot with no `sys/`, duplicate
//! members, a binary `--log`), memory that follows a claim (a sparse 1 GiB `config` in a snapshot
//! folder, a PAX `size` record larger than the ustar one), a panic on non-ASCII `lspci` text, a FIFO
//! `--snapshot`, terminal injection from a snapshot's KFD `name`, and a snapshot's temporary
//! extraction path in the report.
//!
//! Each row builds its input in a fresh folder, runs the real binary there (with `HOME` and
//! `TMPDIR` inside that folder and a deadline), and checks the exit code, a message fragment, that
//! nothing was written in the folder (the temporary extraction folder included: it must be gone),
//! and that no control character reached the terminal (stdout or stderr).
//!
//! Memory budget: the rows marked so run under `ulimit -v` of [`BUDGET_KIB`] (256 MiB of address
//! space), which holds a doctor run over a snapshot at its 64 MiB input limit; before the fix,
//! the sparse `config` reached 1,055 MB RSS and the PAX member 212 MB.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::doctor::{data, gpu, root_port, Tree, HEALTHY_ROOT};
use super::doctor_lspci::{write_tar, Member};
use crate::support::control_chars;

/// The address-space budget of the memory rows: 256 MiB.
pub(crate) const BUDGET_KIB: u64 = 256 << 10;

/// One hostile input: what to run (relative to the row's folder) and what must come out.
struct Row {
    /// `issue 20: what`, for failure messages.
    name: &'static str,
    args: Vec<OsString>,
    ulimit_kib: Option<u64>,
    code: i32,
    /// Found in stdout or stderr.
    fragment: String,
    /// Must appear in neither stdout nor stderr.
    absent: Vec<String>,
    /// The most bytes stdout may hold (issue 40: a report that grows with an attacker's input).
    max_out: Option<usize>,
    /// The deadline (60 s unless a row is about time).
    deadline: Duration,
}

fn row(name: &'static str, args: &[&dyn AsRef<std::ffi::OsStr>], code: i32, fragment: &str) -> Row {
    Row {
        name,
        args: args.iter().map(|a| a.as_ref().to_owned()).collect(),
        ulimit_kib: None,
        code,
        fragment: fragment.to_owned(),
        absent: vec![],
        max_out: None,
        deadline: Duration::from_secs(60),
    }
}

/// [`crate::support::run_row`] with no extra environment.
fn run_in(
    dir: &Path,
    args: &[OsString],
    ulimit_kib: Option<u64>,
    deadline: Duration,
) -> (i32, String, String) {
    crate::support::run_row(dir, args, &[], ulimit_kib, deadline)
}

/// Itanium-mangled name whose every parameter is a template of the one before, twice
/// (`y<T, T>` by back-reference): `levels` parameters demangle to about 2^levels characters.
fn nested_mangled_name(levels: usize) -> String {
    let b36 = |mut n: usize| {
        let digits = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let mut out = vec![];
        loop {
            out.push(digits[n % 36]);
            n /= 36;
            if n == 0 {
                break;
            }
        }
        out.reverse();
        String::from_utf8(out).unwrap()
    };
    let mut s = "_Z1f1x1yIS_S_E".to_owned();
    for k in 1..levels {
        s.push_str(&format!("S0_IS{0}_S{0}_E", b36(k)));
    }
    s
}

/// A healthy machine (a Navi 31 behind a root port that completes 32/64-bit AtomicOps) as a
/// snapshot folder `in/<name>`: `sys/`, `proc/`, `dmesg.txt`, as `--capture` would extract.
fn machine(d: &Path, name: &str) -> PathBuf {
    let t = Tree::new_in(&d.join("in"));
    t.chain(&[
        root_port("00:01.1", 0x1022, 0x1483, HEALTHY_ROOT),
        gpu("03:00.0", true),
    ]);
    t.dmesg("[    4.1] amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!\n");
    let dir = d.join("in").join(name);
    std::fs::rename(t.path(), &dir).unwrap();
    std::mem::forget(t); // its folder was moved; the row's folder is removed with the test
    dir
}

/// A PAX extended header (`path`-less, one `size` record) followed by a ustar header for `name`
/// whose own size field is 0, then `claim` bytes of (sparse) member data: the archive reader
/// takes the PAX size (POSIX.1-2001).
fn pax_size_tar(path: &Path, name: &str, claim: u64) {
    let mut b = tar::Builder::new(Vec::new());
    b.append_pax_extensions([("size", claim.to_string().as_bytes())])
        .unwrap();
    let mut h = tar::Header::new_ustar();
    h.set_path(name).unwrap();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o644);
    h.set_size(0);
    h.set_cksum();
    b.append(&h, std::io::empty()).unwrap();
    let mut bytes = b.into_inner().unwrap();
    // `into_inner` wrote the end-of-archive blocks after the empty member; drop them, the member
    // data follows as zeros (sparse), then the end blocks.
    bytes.truncate(bytes.len() - 1024);
    std::fs::write(path, &bytes).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(bytes.len() as u64 + claim.div_ceil(512) * 512 + 1024)
        .unwrap();
}

/// The rows; each gets its folder `d` with `in/`, `home/` and `tmp/` created.
fn rows(d: &Path) -> Vec<Row> {
    let i = d.join("in");
    let mut rows = vec![];
    let manifest = br#"{"kind":"rcclfix-doctor-snapshot"}"#;

    // Unread evidence is never "not affected".
    write_tar(
        &i.join("two-dmesg.tar"),
        &[
            ("rcclfix-snapshot.json", Member::File(manifest)),
            (
                "dmesg.txt",
                Member::File(b"[ 1.0] amdgpu 0000:03:00.0: ok\n"),
            ),
            ("dmesg.txt", Member::File(b"[ 1.0] nothing\n")),
        ],
    );
    rows.push(row(
        "issue 20: a snapshot tar with two dmesg.txt members",
        &[&"doctor", &"--snapshot", &"in/two-dmesg.tar"],
        2,
        "error: in/two-dmesg.tar: refused snapshot member dmesg.txt: it appears twice",
    ));
    write_tar(
        &i.join("no-sys.tar"),
        &[
            ("rcclfix-snapshot.json", Member::File(manifest)),
            (
                "dmesg.txt",
                Member::File(b"[ 1.0] amdgpu 0000:03:00.0: ok\n"),
            ),
        ],
    );
    rows.push(row(
        "issue 20: a snapshot tar with a manifest and dmesg.txt but no sys/",
        &[&"doctor", &"--snapshot", &"in/no-sys.tar"],
        2,
        "error: in/no-sys.tar: not an rcclfix doctor snapshot (no sys/ folder",
    ));
    // An ELF that contains the refusal strings (rcclfix's own binary does; a small library with
    // them appended is the same case at a fraction of the size).
    let mut elf = std::fs::read(data("plain-gfx1100.so")).unwrap();
    elf.extend_from_slice(
        b"\n:1:rocvirtual.cpp :4208: 1 us: Pcie atomics not enabled, hostcall not supported\nShaderName : ncclDevKernel_Generic_4\n",
    );
    std::fs::write(i.join("rcclfix-binary"), &elf).unwrap();
    rows.push(row(
        "issue 20: doctor --log on an ELF file that contains the refusal strings",
        &[&"doctor", &"--no-hip", &"--log", &"in/rcclfix-binary"],
        2,
        "error: --log in/rcclfix-binary: cannot read the log: not a text file (an ELF file",
    ));
    let mut nul = b"header\0\0\0\n".to_vec();
    nul.extend_from_slice(
        b":1:rocvirtual.cpp :4208: 1 us: Pcie atomics not enabled, hostcall not supported\n",
    );
    std::fs::write(i.join("nul.log"), &nul).unwrap();
    rows.push(row(
        "issue 20: doctor --log on a file with NUL bytes and the refusal line",
        &[&"doctor", &"--no-hip", &"--log", &"in/nul.log"],
        2,
        "not a text file (a NUL byte at offset 6",
    ));
    std::fs::write(i.join("dmesg.bin"), b"\x7fELF\x02\x01\x01\0\0\0").unwrap();
    let m = machine(d, "m0");
    rows.push(row(
        "issue 20: --dmesg on a binary file",
        &[
            &"doctor",
            &"--sysfs",
            &m.join("sys"),
            &"--proc",
            &m.join("proc"),
            &"--dmesg",
            &"in/dmesg.bin",
        ],
        2,
        "error: --dmesg in/dmesg.bin: cannot read the kernel log: not a text file",
    ));

    // Memory that follows a claim: bounded by the 64 MiB snapshot limit, under the budget.
    let m = machine(d, "sparse-config");
    let cfg = std::fs::read_dir(m.join("sys/bus/pci/devices"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.ends_with("0000:03:00.0"))
        .unwrap()
        .join("config");
    let f = std::fs::OpenOptions::new().write(true).open(&cfg).unwrap();
    f.set_len(1 << 30).unwrap(); // sparse: 1 GiB that costs no disk
    let mut r = row(
        "issue 20: a snapshot folder whose GPU config is a sparse 1 GiB file",
        &[&"doctor", &"--snapshot", &"in/sparse-config"],
        2,
        "the files add up to more than 64 MiB",
    );
    r.ulimit_kib = Some(BUDGET_KIB);
    rows.push(r);
    let mut r = row(
        "issue 20: --sysfs on a folder whose GPU config is a sparse 1 GiB file (read: 4 KiB)",
        &[
            &"doctor",
            &"--no-hip",
            &"--sysfs",
            &m.join("sys"),
            &"--proc",
            &m.join("proc"),
            &"--dmesg",
            &m.join("dmesg.txt"),
        ],
        0,
        "not affected: the one AMD GPU examined has a PCIe AtomicOps path",
    );
    r.ulimit_kib = Some(BUDGET_KIB);
    rows.push(r);
    pax_size_tar(&i.join("pax.tar"), "dmesg.txt", 200 << 20);
    let mut r = row(
        "issue 20: a tar member whose ustar size is 0 and whose PAX size is 200 MiB",
        &[&"doctor", &"--snapshot", &"in/pax.tar"],
        2,
        "refused snapshot member dmesg.txt: the members add up to more than 64 MiB",
    );
    r.ulimit_kib = Some(BUDGET_KIB);
    rows.push(r);

    // A panic on non-ASCII text after an lspci flag.
    std::fs::write(
        i.join("lspci.txt"),
        "03:00.0 VGA compatible controller [0300]: Advanced Micro Devices, Inc. [AMD/ATI] Navi 31 [Radeon RX 7900 XTX] [1002:744c]\n\
         \tCapabilities: [64] Express (v2) Legacy Endpoint, IntMsgNum 0\n\
         \t\tDevCap2: Completion Timeout: Range ABCD, TimeoutDis+\n\
         \t\t\t AtomicOpsCap: 32bit± 64bit± 128bitCAS-\n\
         \t\tDevCtl2: Completion Timeout: 50us to 50ms, TimeoutDis-\n\
         \t\t\t AtomicOpsCtl: ReqEn±\n",
    )
    .unwrap();
    rows.push(row(
        "issue 20: lspci text with `32bit±` (a non-ASCII character after a flag)",
        &[&"doctor", &"--no-hip", &"--lspci", &"in/lspci.txt"],
        2,
        "inconclusive",
    ));

    // A cut or malformed lspci paste, or a device entry that cannot be read, is never "not
    // affected": the device missing may be the GPU (the board's full paste is, exit 0).
    // The board's root port, first GPU and its audio function: a healthy path (exit 0).
    let board = std::fs::read_to_string(data("lspci/board-vvvnn.txt")).unwrap();
    let board = board[..board.find("\n04:00.0 ").unwrap() + 1].to_owned();
    let gpu_at = board.find("\n03:00.0 ").unwrap() + 1;
    let root_end = board.find("\n\n").unwrap() + 2;
    let line_in_root = board[..root_end - 2].rfind("\tCapabilities: [50]").unwrap();
    for (file, text, code, fragment) in [
        ("full.txt", board.clone(), 0, "not affected"),
        (
            "mid-line.txt",
            board[..line_in_root + 10].to_owned(),
            2,
            "ends in the middle of line 11 (no newline after it): the paste looks cut",
        ),
        (
            "line-boundary.txt",
            board[..line_in_root].to_owned(),
            2,
            "the last device block (0000:00:01.1, line 1) ends without the blank line lspci prints after every device",
        ),
        (
            "gpu-vendor-cut.txt",
            format!("{}\n", &board[..gpu_at + "03:00.0 VGA compatible controller [0300]: Advanced Mic".len()]),
            2,
            "the header of the display device 0000:03:00.0 is cut before its vendor's name (`Advanced Mic`)",
        ),
        (
            "gpu-class-cut.txt",
            format!("{}\n\n", &board[..gpu_at + "03:00.0 VGA compat".len()]),
            2,
            "the header of 0000:03:00.0 names no device class",
        ),
        (
            "gpu-address-cut.txt",
            format!("{}\n\n", &board[..gpu_at + "03:0".len()]),
            2,
            "`03:0` starts like a device header but is not one",
        ),
        (
            "escape-cut.txt",
            format!("{}03:0 \x1b]0;pwned\x07\n\n", &board[..gpu_at]),
            2,
            "`03:0 \\e]0;pwned\\x07` starts like a device header",
        ),
        (
            "tree-after-blocks.txt",
            format!(
                "{}\n{}",
                board.trim_end(),
                std::fs::read_to_string(data("lspci/board-tv.txt")).unwrap()
            ),
            2,
            "the AMD GPU 0000:07:00.0 is in the lspci -tv tree but its config space is not in the evidence",
        ),
        (
            "kernel-lines.txt",
            format!("{}\n\tKernel driver in use: snd_hda_intel\n", board.trim_end()),
            0,
            "not affected",
        ),
    ] {
        std::fs::write(i.join(file), text).unwrap();
        let arg: &'static str = Box::leak(format!("in/{file}").into_boxed_str());
        let name: &'static str = Box::leak(
            format!("issue 20: doctor --lspci on a paste {file} (a board's root port and GPU)").into_boxed_str(),
        );
        let mut r = row(name, &[&"doctor", &"--no-hip", &"--lspci", &arg], code, fragment);
        if code != 0 {
            r.absent = vec!["Verdict: not affected".into()];
        }
        rows.push(r);
    }
    for (what, tar) in [("folder", false), ("tar", true)] {
        let m = machine(d, &format!("dangling-{what}"));
        let link = m.join("sys/bus/pci/devices/0000:03:00.0");
        let target = std::fs::canonicalize(&link).unwrap();
        std::fs::remove_dir_all(&target).unwrap();
        let arg = if tar {
            let out = i.join("dangling.tar");
            let st = std::process::Command::new("tar")
                .arg("-cf")
                .arg(&out)
                .arg("-C")
                .arg(&m)
                .args(
                    std::fs::read_dir(&m)
                        .unwrap()
                        .map(|e| e.unwrap().file_name()),
                )
                .status()
                .unwrap();
            assert!(st.success());
            std::fs::remove_dir_all(&m).unwrap();
            "in/dangling.tar".to_owned()
        } else {
            format!("in/dangling-{what}")
        };
        let arg: &'static str = Box::leak(arg.into_boxed_str());
        let name: &'static str = Box::leak(
            format!("issue 20: a snapshot {what} whose GPU's device link is dangling")
                .into_boxed_str(),
        );
        let mut r = row(
            name,
            &[&"doctor", &"--snapshot", &arg],
            2,
            "0000:03:00.0 (a link to ../../../devices/",
        );
        r.absent = vec!["not affected".into()];
        rows.push(r);
    }

    // A FIFO snapshot is refused before it is opened.
    let st = std::process::Command::new("mkfifo")
        .arg(i.join("fifo.tar"))
        .status()
        .unwrap();
    assert!(st.success());
    rows.push(row(
        "issue 20: doctor --snapshot FIFO",
        &[&"doctor", &"--snapshot", &"in/fifo.tar"],
        2,
        "error: --snapshot in/fifo.tar: not a regular file (a FIFO)",
    ));

    // Terminal injection: a KFD node `name` with OSC and CSI (and no gfx_target_version, so the
    // name is what names the target), and a DMI product name with a newline that forges a line.
    let m = machine(d, "evil-kfd");
    let t = m.join("sys/class/kfd/kfd/topology/nodes");
    std::fs::create_dir_all(t.join("0")).unwrap();
    std::fs::write(
        t.join("0/properties"),
        "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\nlocation_id 0\ndomain 0\n",
    )
    .unwrap();
    std::fs::create_dir_all(t.join("1/io_links/0")).unwrap();
    std::fs::write(
        t.join("1/properties"),
        "cpu_cores_count 0\nsimd_count 192\ngfx_target_version 0\nlocation_id 768\ndomain 0\n",
    )
    .unwrap();
    std::fs::write(t.join("1/name"), "gfx1100 \x1b]0;pwned\x07 \x1b[2J\n").unwrap();
    std::fs::write(
        t.join("1/io_links/0/properties"),
        "type 2\nnode_from 1\nnode_to 0\nflags 1\n",
    )
    .unwrap();
    let dmi = m.join("sys/class/dmi/id");
    std::fs::create_dir_all(&dmi).unwrap();
    std::fs::write(dmi.join("sys_vendor"), "QEMU\x1b[31m\n").unwrap();
    std::fs::write(
        dmi.join("product_name"),
        "Standard PC\nnot affected: forged\n",
    )
    .unwrap();
    let mut r = row(
        "issue 20: a snapshot's KFD name and DMI strings with ESC sequences",
        &[&"doctor", &"--snapshot", &"in/evil-kfd"],
        0,
        "GPU 0000:03:00.0  1002:744c  gfx1100 (from the PCI ID 1002:744c)",
    );
    r.absent = vec!["pwned\x07".into(), "\nnot affected: forged".into()];
    rows.push(r);

    // A snapshot tar's member is named `snap.tar!dmesg.txt`, never its temporary path.
    let m = machine(d, "to-tar");
    let st = crate::support::rcclfix()
        .args(["doctor", "--no-hip", "--sysfs"])
        .arg(m.join("sys"))
        .arg("--proc")
        .arg(m.join("proc"))
        .arg("--dmesg")
        .arg(m.join("dmesg.txt"))
        .arg("--capture")
        .arg(i.join("snap.tar"))
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let mut r = row(
        "issue 20: the report names a snapshot tar's member, not its extraction folder",
        &[&"doctor", &"--snapshot", &"in/snap.tar"],
        0,
        "kernel log (in/snap.tar!dmesg.txt, 1 line)",
    );
    r.absent = vec!["rcclfix-snapshot-".into()];
    rows.push(r);

    // Issue 40 item 8: a 3.5 KB log of nested mangled names (before: 1.3 GB, a 327 MB report).
    let mut log = String::new();
    while log.len() < 3400 {
        log.push_str(&format!(
            ":3:rocvirtual.cpp :4151: 1 us: ShaderName : {}\n:1:rocvirtual.cpp :4208: 2 us: Pcie atomics not enabled, hostcall not supported\n",
            nested_mangled_name(60)
        ));
    }
    std::fs::write(i.join("nested.log"), &log).unwrap();
    for json in [false, true] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"doctor", &"--no-hip", &"--log", &"in/nested.log"];
        if json {
            args.push(&"--json");
        }
        let mut r = row(
            if json {
                "issue 40: doctor --log --json of nested mangled names"
            } else {
                "issue 40: doctor --log of nested mangled names"
            },
            &args,
            1,
            "needs hostcall",
        );
        if json {
            r.fragment = "\"hostcall-outside-rccl\"".into();
        }
        r.ulimit_kib = Some(BUDGET_KIB);
        r.max_out = Some(1 << 20);
        r.deadline = Duration::from_secs(20);
        rows.push(r);
    }

    // Issue 40 item 12: `--library` on what is not a library file says what it is.
    let st = std::process::Command::new("mkfifo")
        .arg(i.join("fifo.so"))
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::create_dir_all(i.join("libdir")).unwrap();
    for (arg, fragment) in [
        (
            "in/fifo.so",
            "error: --library in/fifo.so: not a regular file (a FIFO)",
        ),
        (
            "in/libdir",
            "error: --library in/libdir: a folder, not a library file",
        ),
        (
            "/dev/null",
            "error: --library /dev/null: not a regular file (a character device)",
        ),
        (
            "in/absent.so",
            "error: --library in/absent.so: cannot open: No such file",
        ),
    ] {
        let name: &'static str =
            Box::leak(format!("issue 40: doctor --library {arg}").into_boxed_str());
        let arg: &'static str = Box::leak(arg.to_owned().into_boxed_str());
        let mut r = row(
            name,
            &[&"doctor", &"--no-hip", &"--library", &arg],
            2,
            fragment,
        );
        r.deadline = Duration::from_secs(20);
        if !arg.contains("absent") {
            r.absent = vec!["no such file".into()];
        }
        rows.push(r);
    }

    // `--library` with no KFD topology: judged for the target the PCI ID names.
    machine(d, "no-kfd");
    let mut r = row(
        "issue 20: --library with no KFD topology is scanned for the PCI ID's target",
        &[
            &"doctor",
            &"--json",
            &"--snapshot",
            &"in/no-kfd",
            &"--library",
            &data("plain-gfx1100.so"),
        ],
        0,
        "\"state\": \"clean\"",
    );
    r.absent = vec!["none scanned".into()];
    rows.push(r);
    rows
}

#[test]
fn hostile_doctor_inputs_table() {
    let probe = tempfile::tempdir().unwrap();
    let n = {
        for sub in ["in", "home", "tmp"] {
            std::fs::create_dir_all(probe.path().join(sub)).unwrap();
        }
        rows(probe.path()).len()
    };
    let mut failures = vec![];
    for k in 0..n {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        for sub in ["in", "home", "tmp"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let r = rows(d).swap_remove(k);
        let before = crate::support::listing(d, &[]);
        let started = std::time::Instant::now();
        let (code, out, err) = run_in(d, &r.args, r.ulimit_kib, r.deadline);
        let took = started.elapsed();
        let after = crate::support::listing(d, &[]);
        let mut why = vec![];
        if code != r.code {
            why.push(format!("exit {code}, expected {}", r.code));
        }
        if let Some(m) = r.max_out {
            if out.len() > m {
                why.push(format!(
                    "stdout is {} bytes (at most {m}), in {took:?}",
                    out.len()
                ));
            }
        }
        if !out.contains(&r.fragment) && !err.contains(&r.fragment) {
            why.push(format!("neither stdout nor stderr has {:?}", r.fragment));
        }
        for a in &r.absent {
            if out.contains(a) || err.contains(a) {
                why.push(format!("the output has {a:?}"));
            }
        }
        if before != after {
            let new: Vec<_> = after.iter().filter(|e| !before.contains(e)).collect();
            let gone: Vec<_> = before.iter().filter(|e| !after.contains(e)).collect();
            why.push(format!("written: new or changed {new:?}, removed {gone:?}"));
        }
        for (what, s) in [("stdout", &out), ("stderr", &err)] {
            let cc = control_chars(s);
            if !cc.is_empty() {
                why.push(format!("control characters on {what}: {cc:?}"));
            }
        }
        if r.code == 2 && !err.is_empty() && !err.starts_with("error: ") {
            why.push("stderr does not start with `error: `".into());
        }
        if code == 101 || err.contains("panicked") {
            why.push("it panicked".into());
        }
        if !why.is_empty() {
            failures.push(format!(
                "{}: {}\n  stdout: {}\n  stderr: {}",
                r.name,
                why.join("; "),
                out.lines().take(6).collect::<Vec<_>>().join(" | "),
                err.trim()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
