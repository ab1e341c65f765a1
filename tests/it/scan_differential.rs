//! Differential test (`RCCLFIX_SLOW_TESTS=1`): rcclfix's per-kernel verdicts and kernel-to-argument
//! attribution must equal what the toolchain's own LLVM tools report — `llvm-objcopy
//! --dump-section .hip_fatbin` → `clang-offload-bundler --list/--unbundle` → `llvm-readelf --notes`
//! — run inside the Debian toolchains (`rcclfix toolchain run --engine bubblewrap debian-<suite>`),
//! on every fixture and on the real Debian librccl1 5.4.3 library.
//!
//! The oracle splits a `.hip_fatbin` into bundles itself (4096-aligned magics), because
//! clang-offload-bundler reads one bundle per input.

use std::collections::BTreeMap;
use std::path::Path;

use super::{fixture, root, scan};
use crate::support::{in_toolchain, librccl1_deb, librccl1_lib, require_tool, slow_or_note};

/// kernel name → hidden args `(value_kind, offset)` in metadata order; per target processor.
type Truth = BTreeMap<String, BTreeMap<String, Vec<(String, u64)>>>;

/// The LLVM tools of toolchain `debian-<suite>` (their version suffix), run through
/// `rcclfix toolchain run`.
struct Tools {
    suite: &'static str,
    v: &'static str,
}

impl Tools {
    fn new(suite: &'static str) -> Tools {
        let v = match suite {
            "trixie" => "17",
            "rocm7.2" => "22",
            _ => "21",
        };
        require_tool(suite, &format!("llvm-readelf-{v}"));
        Tools { suite, v }
    }

    /// Run `tool-NN args…` in the toolchain with `work` as the working directory; returns (ok,
    /// stdout+stderr).
    fn run(&self, work: &Path, tool: &str, args: &[&str]) -> (bool, String) {
        let tool = format!("{tool}-{}", self.v);
        let argv: Vec<&str> = std::iter::once(tool.as_str())
            .chain(args.iter().copied())
            .collect();
        let out = in_toolchain(self.suite, work, &argv);
        let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
        s.push_str(&String::from_utf8_lossy(&out.stderr));
        (out.status.success(), s)
    }
}

/// A kernel being parsed: its `.name` (once seen) and its args `(value_kind, offset)`.
type Parsed = (Option<String>, Vec<(String, Option<u64>)>);

/// Parse `llvm-readelf --notes` YAML: every `amdhsa.kernels` list of every AMDGPU metadata note,
/// decoded per kernel map (its `.args` come before its `.name`, so no line grep).
fn parse_readelf_notes(text: &str) -> BTreeMap<String, Vec<(String, u64)>> {
    let mut out = BTreeMap::new();
    let mut in_kernels = false;
    let mut cur: Option<Parsed> = None;
    let mut flush = |cur: &mut Option<Parsed>| {
        if let Some((Some(name), args)) = cur.take() {
            let hidden: Vec<(String, u64)> = args
                .into_iter()
                .filter(|(k, _)| k.starts_with("hidden_"))
                .map(|(k, o)| (k, o.unwrap_or(u64::MAX)))
                .collect();
            out.insert(name, hidden);
        }
    };
    // Args: a `- ` item at indent 6 starts an arg map, whose keys sit at indent 8.
    let mut arg: Option<(Option<String>, Option<u64>)> = None;
    for line in text.lines() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        if indent == 0 && !t.is_empty() {
            if let Some(a) = arg.take() {
                if let (Some(c), Some(k)) = (cur.as_mut(), a.0) {
                    c.1.push((k, a.1));
                }
            }
            flush(&mut cur);
            in_kernels = t.starts_with("amdhsa.kernels:");
            continue;
        }
        if !in_kernels {
            continue;
        }
        if indent == 2 && t.starts_with("- ") {
            if let Some(a) = arg.take() {
                if let (Some(c), Some(k)) = (cur.as_mut(), a.0) {
                    c.1.push((k, a.1));
                }
            }
            flush(&mut cur);
            cur = Some((None, Vec::new()));
        }
        let body = t.trim_start_matches("- ");
        let body_indent = if t.starts_with("- ") {
            indent + 2
        } else {
            indent
        };
        if body_indent == 4 && body.starts_with(".name:") {
            if let Some(a) = arg.take() {
                if let (Some(c), Some(k)) = (cur.as_mut(), a.0) {
                    c.1.push((k, a.1));
                }
            }
            if let Some(c) = cur.as_mut() {
                c.0 = Some(body[".name:".len()..].trim().trim_matches('\'').to_owned());
            }
        } else if body_indent == 4 {
            if let Some(a) = arg.take() {
                if let (Some(c), Some(k)) = (cur.as_mut(), a.0) {
                    c.1.push((k, a.1));
                }
            }
        } else if body_indent == 8 {
            if t.starts_with("- ") && indent == 6 {
                if let Some(a) = arg.take() {
                    if let (Some(c), Some(k)) = (cur.as_mut(), a.0) {
                        c.1.push((k, a.1));
                    }
                }
                arg = Some((None, None));
            }
            if let Some(a) = arg.as_mut() {
                if let Some(v) = body.strip_prefix(".value_kind:") {
                    a.0 = Some(v.trim().to_owned());
                } else if let Some(v) = body.strip_prefix(".offset:") {
                    a.1 = v.trim().parse().ok();
                }
            }
        }
    }
    if let Some(a) = arg.take() {
        if let (Some(c), Some(k)) = (cur.as_mut(), a.0) {
            c.1.push((k, a.1));
        }
    }
    flush(&mut cur);
    out
}

/// The oracle: what the LLVM tools say about one file. Returns per-processor kernel truth and the
/// processors whose entries are bitcode.
fn oracle(tools: &Tools, file: &Path) -> (Truth, Vec<String>) {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    std::fs::copy(file, w.join("in")).unwrap();
    let mut truth: Truth = BTreeMap::new();
    let mut bitcode = Vec::new();
    let head = std::fs::read(w.join("in")).unwrap();
    let is_code_object = head.get(18..20) == Some(&[0xe0, 0x00]);
    let mut bundles: Vec<(String, &str)> = Vec::new();
    if is_code_object {
        let (ok, notes) = tools.run(w, "llvm-readelf", &["--notes", "in"]);
        assert!(ok, "llvm-readelf --notes {}: {notes}", file.display());
        // `llvm-readobj -h` names the machine: `EF_AMDGPU_MACH_AMDGCN_GFX1100 (0x41)`.
        let (_, hdr) = tools.run(w, "llvm-readobj", &["-h", "in"]);
        let proc_ = hdr
            .split_whitespace()
            .find_map(|w| w.strip_prefix("EF_AMDGPU_MACH_AMDGCN_"))
            .map(|m| m.to_lowercase().replace('_', "-"))
            .unwrap_or_else(|| panic!("no EF_AMDGPU_MACH in llvm-readobj -h: {hdr}"));
        truth
            .entry(proc_)
            .or_default()
            .extend(parse_readelf_notes(&notes));
        return (truth, bitcode);
    }
    let (has_fatbin, _) = tools.run(
        w,
        "llvm-objcopy",
        &["--dump-section", ".hip_fatbin=fatbin", "in", "/tmp/copy"],
    );
    if has_fatbin {
        // Split at 4096-aligned bundle magics (the oracle's own walk).
        let fb = std::fs::read(w.join("fatbin")).unwrap();
        let starts: Vec<usize> = (0..fb.len())
            .step_by(4096)
            .filter(|&o| {
                fb[o..].starts_with(b"__CLANG_OFFLOAD_BUNDLE__") || fb[o..].starts_with(b"CCOB")
            })
            .collect();
        for (i, &s) in starts.iter().enumerate() {
            let mut e = starts.get(i + 1).copied().unwrap_or(fb.len());
            // clang-offload-bundler decompresses everything after a CCOB header ("Src size is
            // incorrect" on the padding), so cut a v2/v3 CCOB at its stored total size.
            if fb[s..].starts_with(b"CCOB") {
                let ver = u16::from_le_bytes([fb[s + 4], fb[s + 5]]);
                let total = match ver {
                    2 => u32::from_le_bytes(fb[s + 8..s + 12].try_into().unwrap()) as usize,
                    3 => u64::from_le_bytes(fb[s + 8..s + 16].try_into().unwrap()) as usize,
                    _ => e - s,
                };
                e = e.min(s + total);
            }
            let name = format!("b{i}");
            std::fs::write(w.join(&name), &fb[s..e]).unwrap();
            bundles.push((name, "o"));
        }
    } else {
        // An -fgpu-rdc object: the bundler reads the __CLANG_OFFLOAD_BUNDLE__ sections itself.
        bundles.push(("in".into(), "o"));
    }
    for (b, ty) in bundles {
        let (ok, list) = tools.run(
            w,
            "clang-offload-bundler",
            &["--list", &format!("--type={ty}"), &format!("--input={b}")],
        );
        assert!(
            ok,
            "clang-offload-bundler --list {}: {list}",
            file.display()
        );
        for id in list
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("host-"))
        {
            let out = format!("{b}.{}.co", id.replace(':', "_"));
            let (ok, msg) = tools.run(
                w,
                "clang-offload-bundler",
                &[
                    "--unbundle",
                    &format!("--type={ty}"),
                    &format!("--input={b}"),
                    &format!("--targets={id}"),
                    &format!("--output={out}"),
                ],
            );
            assert!(ok, "unbundle {id} from {}: {msg}", file.display());
            let processor = id
                .split_once('-')
                .unwrap()
                .1
                .splitn(5, '-')
                .nth(4)
                .unwrap()
                .split(':')
                .next()
                .unwrap()
                .to_owned();
            let bytes = std::fs::read(w.join(&out)).unwrap();
            if bytes.starts_with(b"BC\xC0\xDE") {
                bitcode.push(processor);
                continue;
            }
            let (ok, notes) = tools.run(w, "llvm-readelf", &["--notes", &out]);
            assert!(
                ok,
                "llvm-readelf --notes {id} of {}: {notes}",
                file.display()
            );
            let kernels = parse_readelf_notes(&notes);
            let t = truth.entry(processor).or_default();
            for (k, v) in kernels {
                t.insert(k, v);
            }
        }
    }
    (truth, bitcode)
}

/// rcclfix's view in the same shape as [`oracle`].
fn ours(file: &Path) -> (Truth, Vec<String>) {
    let r = scan(file);
    let mut truth: Truth = BTreeMap::new();
    let mut bitcode = Vec::new();
    for f in &r.files {
        for i in &f.images {
            let t = truth.entry(i.processor.clone()).or_default();
            for k in &i.kernels {
                t.insert(
                    k.name.clone(),
                    k.hidden_args
                        .iter()
                        .map(|a| (a.value_kind.to_string(), a.offset))
                        .collect(),
                );
            }
        }
        for u in &f.unreadable {
            assert_eq!(
                u.class,
                "bitcode",
                "{}: unexpected unreadable record {u:?}",
                file.display()
            );
            bitcode.push(u.processor.clone().unwrap());
        }
    }
    (truth, bitcode)
}

fn compare(tools: &Tools, file: &Path) -> usize {
    let (want, want_bc) = oracle(tools, file);
    let (got, got_bc) = ours(file);
    assert_eq!(got_bc, want_bc, "{}: bitcode entries", file.display());
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{}: targets (rcclfix vs llvm-readelf)",
        file.display()
    );
    let mut n = 0;
    for (p, kernels) in &want {
        assert_eq!(
            got[p].keys().collect::<Vec<_>>(),
            kernels.keys().collect::<Vec<_>>(),
            "{}: {p}: kernel names",
            file.display()
        );
        for (k, args) in kernels {
            let g = &got[p][k];
            assert_eq!(
                g,
                args,
                "{}: {p}: {k}: hidden arguments (value kind, offset)",
                file.display()
            );
            let dw = args.iter().any(|(v, _)| v == "hidden_hostcall_buffer");
            let dg = got[p][k].iter().any(|(v, _)| v == "hidden_hostcall_buffer");
            assert_eq!(dg, dw, "{}: {p}: {k}: declares hostcall", file.display());
            n += 1;
        }
    }
    n
}

#[test]
fn differential_fixtures() {
    if !slow_or_note() {
        return;
    }
    let mut total = 0;
    for suite in ["trixie", "sid"] {
        let tools = Tools::new(suite);
        let dir = root().join("tests/fixtures").join(suite);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            let rel = fixture(&format!(
                "{suite}/{}",
                f.file_name().unwrap().to_string_lossy()
            ));
            total += compare(&tools, &rel);
        }
    }
    assert!(total >= 60, "compared only {total} kernels");
}

/// The fixtures compiled by the ROCm 7.2 compiler (`tests/fixtures/rocm7.2/`), against clang 22's
/// own tools in the debian-rocm7.2 toolchain.
#[test]
fn differential_fixtures_rocm72() {
    if !slow_or_note() {
        return;
    }
    let tools = Tools::new("rocm7.2");
    let dir = root().join("tests/fixtures/rocm7.2");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut total = 0;
    for f in files {
        let rel = fixture(&format!(
            "rocm7.2/{}",
            f.file_name().unwrap().to_string_lossy()
        ));
        total += compare(&tools, &rel);
    }
    assert!(total >= 30, "compared only {total} kernels");
}

/// The Debian librccl1 5.4.3 library: the `.deb` from `$RCCLFIX_TEST_INPUTS`, extracted with
/// dpkg-deb (an outside oracle), compared kernel by kernel with the trixie LLVM tools; and the
/// `.deb` scanned directly must find the same library inside.
#[test]
fn differential_librccl1() {
    if !slow_or_note() {
        return;
    }
    let deb = librccl1_deb();
    let lib = librccl1_lib();
    let tools = Tools::new("trixie");
    let (want, _) = oracle(&tools, &lib);
    let n = compare(&tools, &lib);
    assert!(n > 0);
    // What the issue states about this library, derived here from the oracle, not typed in.
    eprintln!(
        "librccl1: {} targets; gfx1100: {} kernels, {} declare hostcall",
        want.len(),
        want.get("gfx1100").map_or(0, |k| k.len()),
        want.get("gfx1100").map_or(0, |k| k
            .values()
            .filter(|a| a.iter().any(|(v, _)| v == "hidden_hostcall_buffer"))
            .count())
    );
    let r = scan(&lib);
    let state = &r.target_states(&["gfx1100".into()])["gfx1100"];
    let want_declares = want["gfx1100"]
        .values()
        .any(|a| a.iter().any(|(v, _)| v == "hidden_hostcall_buffer"));
    assert_eq!(
        matches!(state, rcclfix::scan::TargetState::Declares { .. }),
        want_declares
    );
    // Scanning the .deb itself finds the library inside, with the same images.
    let rd = scan(&deb);
    let inner: Vec<_> = rd
        .files
        .iter()
        .filter(|f| f.path.ends_with("!usr/lib/x86_64-linux-gnu/librccl.so.1.0"))
        .collect();
    assert_eq!(
        inner.len(),
        1,
        "{:?}",
        rd.files.iter().map(|f| &f.path).collect::<Vec<_>>()
    );
    assert_eq!(inner[0].images, r.files[0].images);
    assert!(
        rd.files.iter().all(|f| f.unreadable.is_empty()),
        "{:?}",
        rd.files
    );
}
