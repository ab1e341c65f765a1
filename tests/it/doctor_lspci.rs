//! `rcclfix doctor --lspci`: pasted lspci text cross-checked against sysfs, and the hostile inputs
//! of issue 12 (unread input, unbounded text, untrusted snapshots, terminals).

#![allow(unused_imports)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::doctor::*;
use super::doctor_cases::*;
use super::doctor_inputs::*;
use super::doctor_logs::*;

// ---- --lspci: pasted lspci text, cross-checked against sysfs --------------------------------------

/// The machines of the `--lspci` golden files: a consumer board (one GPU on a CPU root port with its
/// audio function, one behind a chipset switch whose downstream port has Routing-) and a QEMU
/// guest with a GPU passed as a multifunction device.
pub(crate) fn lspci_machine(name: &str) -> Tree {
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
pub(crate) fn lspci_key_lines(text: &str) -> Vec<String> {
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
pub(crate) fn lspci_golden(name: &str, t: &Tree) -> [PathBuf; 3] {
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
pub(crate) fn regex_lite_ids(l: &str) -> String {
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
pub(crate) fn path_view(o: &Out) -> Vec<String> {
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
pub(crate) enum Member<'a> {
    File(&'a [u8]),
    Dir,
    Symlink(&'a str),
    Hardlink(&'a str),
    Fifo,
}

pub(crate) fn write_tar(path: &Path, members: &[(&str, Member)]) {
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
