//! The per-kernel call graph (`scan::callgraph`) and the `why` it writes, on code objects compiled
//! from our own HIP sources (`tests/fixtures/src`, `tests/fixtures/patch/src`); with
//! `RCCLFIX_SLOW_TESTS=1`, its direct-call edges against `llvm-objdump`'s disassembly of the same
//! code objects (extracted by `clang-offload-bundler`), and the Debian librccl1 library.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rcclfix::scan::callgraph::{Graph, Hop, User, Via};
use rcclfix::scan::KernelReport;

use super::{fixture, scan};
use crate::support::{in_toolchain_ok, librccl1_lib, require_tool, slow_or_note};

/// `e_flags` of a code object.
fn e_flags(co: &[u8]) -> u32 {
    u32::from_le_bytes(co[48..52].try_into().unwrap())
}

fn graph(rel: &str) -> Graph {
    let co = std::fs::read(fixture(rel)).unwrap();
    Graph::build(&co, e_flags(&co)).unwrap()
}

fn hop(f: &str, via: Via) -> Hop {
    Hop {
        function: f.into(),
        via,
    }
}

/// Every kernel of every image of `rel`, by name.
fn kernels(rel: &str) -> BTreeMap<String, Vec<KernelReport>> {
    let mut out: BTreeMap<String, Vec<KernelReport>> = BTreeMap::new();
    for f in scan(Path::new(rel)).files {
        for i in f.images {
            for k in i.kernels {
                out.entry(k.name.clone()).or_default().push(k);
            }
        }
    }
    out
}

fn why<'a>(ks: &'a BTreeMap<String, Vec<KernelReport>>, name: &str) -> Vec<&'a str> {
    ks[name]
        .iter()
        .map(|k| k.why.as_deref().expect("declaring kernel has a why"))
        .collect()
}

/// The assert kernel: its own path to `__assert_fail`, in both toolchains and every container.
#[test]
fn assert_kernel_names_its_path() {
    for rel in [
        "sid/kernels.so",
        "sid/kernels.co",
        "sid/kernels-ccob.so",
        "sid/kernels-ccob3.so",
        "sid/multi-ccob.so",
        "trixie/kernels.so",
        "trixie/kernels.co",
        "trixie/multi.so",
        "sid/two-tu-ccob.so",
    ] {
        let ks = kernels(&format!("tests/fixtures/{rel}"));
        for w in why(&ks, "k_assert") {
            assert!(
                w.starts_with("k_assert → __assert_fail (device assert: build with -DNDEBUG)"),
                "{rel}: {w}"
            );
            assert!(!w.contains("image-wide"), "{rel}: {w}");
        }
        // k_printf's printf is inlined: the kernel's own code signals the host.
        for w in why(&ks, "k_printf") {
            assert!(
                w.starts_with("k_printf signals the host itself (s_sendmsg MSG_INTERRUPT at 0x"),
                "{rel}: {w}"
            );
        }
        assert!(ks["k_plain"].iter().all(|k| k.why.is_none()), "{rel}");
    }
    // The -fgpu-rdc link: the assert kernel of the second translation unit.
    for rel in ["sid/rdc.so", "trixie/rdc.so"] {
        let ks = kernels(&format!("tests/fixtures/{rel}"));
        assert_eq!(
            why(&ks, "k_rdc_assert"),
            ["k_rdc_assert → __assert_fail (device assert: build with -DNDEBUG)"],
            "{rel}"
        );
    }
}

/// The same, through the graph API on the bare code objects.
#[test]
fn assert_kernel_trace() {
    for rel in ["sid/kernels.co", "trixie/kernels.co"] {
        let g = graph(rel);
        let t = g.trace("k_assert.kd").unwrap();
        assert_eq!(
            t.path,
            [hop("k_assert", Via::Call), hop("__assert_fail", Via::Call)],
            "{rel}"
        );
        assert_eq!(t.user, Some(User::Named));
        assert_eq!(t.indirect, None);
        assert!(g.calls("k_assert").unwrap().contains(&"__assert_fail"));
        assert_eq!(g.indirect_calls("k_assert").unwrap(), &[] as &[u64]);
        let t = g.trace("k_plain").unwrap();
        assert!(t.path.is_empty() && t.indirect.is_none() && t.describe().is_none());
        assert!(g.trace("no_such_kernel").is_none());
    }
}

/// A kernel that reaches the live assert only through the device function table names the table,
/// its entries, and the entry that asserts; without the assert (NDEBUG) the table is still named.
#[test]
fn table_kernel_names_the_table() {
    for rel in [
        "sid/indirect.so",
        "sid/indirect-ccob.so",
        "sid/indirect-rel.co",
        "trixie/indirect.so",
    ] {
        let ks = kernels(&format!("tests/fixtures/{rel}"));
        let [w] = why(&ks, "k_table")[..] else {
            panic!("{rel}: one k_table")
        };
        assert!(
            w.starts_with("reaches an indirect call in k_table whose table op_table includes _Z6op_addii, _Z10op_checkedii; through it: k_table → [op_table] _Z10op_checkedii → __assert_fail (device assert: build with -DNDEBUG)"),
            "{rel}: {w}"
        );
        assert!(
            w.ends_with("the attributor gave up: the kernel declares every optional hidden argument (an indirect or external call, or -O0)"),
            "{rel}: {w}"
        );
        assert!(ks["k_direct"][0].why.is_none());
    }
    for rel in ["sid/indirect-ndebug.so", "trixie/indirect-ndebug.so"] {
        let ks = kernels(&format!("tests/fixtures/{rel}"));
        let [w] = why(&ks, "k_table")[..] else {
            panic!("{rel}: one k_table")
        };
        assert!(
            w.starts_with("reaches an indirect call in k_table whose table op_table includes _Z6op_addii, _Z10op_checkedii; none of its possible targets in this image reaches a hostcall user; the attributor gave up"),
            "{rel}: {w}"
        );
    }
}

/// A relocatable code object: calls and the table's entries are relocations (the literals of
/// the `s_getpc_b64` sequences are still zero), and the graph reads them.
#[test]
fn relocatable_code_object() {
    let co = std::fs::read(fixture("sid/indirect-rel.co")).unwrap();
    assert_eq!(u16::from_le_bytes([co[16], co[17]]), 1, "ET_REL");
    let g = graph("sid/indirect-rel.co");
    assert_eq!(
        g.tables(),
        [("op_table", vec!["_Z6op_addii", "_Z10op_checkedii"])]
    );
    assert!(g
        .calls("_Z10op_checkedii")
        .unwrap()
        .contains(&"__assert_fail"));
    assert_eq!(g.indirect_calls("k_table").unwrap().len(), 1);
    let t = g.trace("k_table").unwrap();
    assert_eq!(
        t.path,
        [
            hop("k_table", Via::Call),
            hop("_Z10op_checkedii", Via::Table("op_table".into())),
            hop("__assert_fail", Via::Call)
        ]
    );
}

/// The -O0 fixture: the attributor did not run, so even `k_plain` declares; every kernel says so.
#[test]
fn o0_is_attributor_gave_up() {
    for rel in ["sid/kernels-O0.so", "trixie/kernels-O0.so"] {
        let ks = kernels(&format!("tests/fixtures/{rel}"));
        let gave_up = "the attributor gave up: the kernel declares every optional hidden argument, and so does every kernel of the image, even trivial ones (an -O0 build: the AMDGPU attributor did not run)";
        assert_eq!(why(&ks, "k_plain"), [gave_up], "{rel}");
        for k in ["k_assert", "k_printf"] {
            assert!(why(&ks, k)[0].ends_with(gave_up), "{rel}: {k}");
        }
        assert!(why(&ks, "k_assert")[0].starts_with("k_assert → __assert_fail"));
    }
}

/// The device-linker pattern `patch` fixes: the table's entries, none of which uses hostcall;
/// one that does (printf inlined into a table function) is named with the site; one the image
/// does not define is named as such; a stripped image names the code by address.
#[test]
fn dispatcher_tables() {
    for rel in [
        "patch/dispatch-v4-gfx1100.co",
        "patch/dispatch-v5-gfx1100.co",
        "patch/dispatch-v6-gfx1100.co",
    ] {
        let g = graph(rel);
        assert_eq!(
            g.tables(),
            [(
                "devFuncTable",
                vec!["_Z11devFunc_AddPfi", "_Z13devFunc_ScalePfi"]
            )],
            "{rel}"
        );
        for k in ["devKernel_Generic_1", "devKernel_Generic_2"] {
            let t = g.trace(k).unwrap();
            assert!(t.path.is_empty(), "{rel}: {k}: {t:?}");
            let ind = t.indirect.as_ref().unwrap();
            assert_eq!(ind.caller, k);
            assert_eq!(ind.tables[0].0, "devFuncTable");
            assert_eq!(g.indirect_calls(k).unwrap()[0], ind.at);
        }
        let t = g.trace("devKernel_Plain").unwrap();
        assert_eq!(t.indirect, None, "{rel}");
    }
    let g = graph("patch/table-printf-v6.co");
    let t = g.trace("devKernel_Generic_1").unwrap();
    assert_eq!(
        t.path,
        [
            hop("devKernel_Generic_1", Via::Call),
            hop("_Z11devFunc_AddPfi", Via::Table("devFuncTable".into()))
        ]
    );
    assert!(matches!(t.user, Some(User::Interrupt(_))));
    let g = graph("patch/undef-target-v6.co");
    let t = g.trace("devKernel_Generic_1").unwrap();
    assert_eq!(t.external, ["_Z14devFunc_RemotePfi"]);
    assert!(t
        .describe()
        .unwrap()
        .contains("reaches _Z14devFunc_RemotePfi, which this image does not define"));
    let g = graph("patch/stripped-v6.co");
    let t = g.trace("devKernel_Generic_1").unwrap();
    let (name, entries) = &t.indirect.as_ref().unwrap().tables[0];
    assert_eq!(name, "devFuncTable");
    assert!(
        entries.iter().all(|e| e.starts_with("code at 0x")),
        "{entries:?}"
    );
}

/// Run an LLVM tool of the sid toolchain in `work` (relative paths name files there).
fn tool(work: &Path, argv: &[&str]) -> String {
    require_tool("sid", "llvm-objdump-21");
    in_toolchain_ok("sid", work, argv)
}

/// Direct calls per function from `llvm-objdump -d` text: `s_getpc_b64 s[a:b]` then
/// `s_add_u32`/`s_addc_u32` constants on the pair give an address; copies (`s_mov_b32`,
/// `s_mov_b64`, spills to VGPR lanes and back) carry it; a `s_swappc_b64`/`s_setpc_b64` (not
/// `s[30:31]`) on a pair that holds a function's start is a direct call, any other one indirect.
/// Returns (function → callees, function → number of indirect calls).
type Edges = BTreeMap<String, Vec<String>>;
fn objdump_calls(text: &str) -> (Edges, BTreeMap<String, usize>) {
    let mut starts: BTreeMap<u64, String> = BTreeMap::new();
    for l in text.lines() {
        if let Some((a, rest)) = l.split_once(" <") {
            if let (Ok(a), Some(name)) = (u64::from_str_radix(a, 16), rest.strip_suffix(">:")) {
                starts.insert(a, name.to_owned());
            }
        }
    }
    let mut calls: Edges = BTreeMap::new();
    let mut indirect: BTreeMap<String, usize> = BTreeMap::new();
    let mut cur = String::new();
    // SGPR → (address, high half); pair low index → (getpc result, lo); (vgpr, lane) → value.
    let mut regs: BTreeMap<u32, (u64, bool)> = BTreeMap::new();
    let mut pcs: BTreeMap<u32, (u64, Option<u64>)> = BTreeMap::new();
    let mut lanes: BTreeMap<(String, u64), (u64, bool)> = BTreeMap::new();
    let num = |s: &str| -> Option<u64> {
        let s = s.trim();
        if let Some(h) = s.strip_prefix("0x") {
            u64::from_str_radix(h, 16).ok()
        } else {
            s.parse::<i64>().ok().map(|v| v as u32 as u64)
        }
    };
    let sreg = |r: &str| r.strip_prefix('s').and_then(|n| n.parse::<u32>().ok());
    let spair = |r: &str| {
        r.strip_prefix("s[")
            .and_then(|r| r.split(':').next())
            .and_then(|n| n.parse::<u32>().ok())
    };
    for l in text.lines() {
        if let Some((_, rest)) = l.split_once(" <") {
            if let Some(name) = rest.strip_suffix(">:") {
                cur = name.to_owned();
                regs.clear();
                pcs.clear();
                lanes.clear();
                continue;
            }
        }
        let Some((ins, addr)) = l.split_once("// ") else {
            continue;
        };
        let Some(addr) = addr
            .split(':')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok())
        else {
            continue;
        };
        let ins = ins.trim();
        let (op, args) = ins.split_once(' ').unwrap_or((ins, ""));
        let a: Vec<&str> = args.split(',').map(str::trim).collect();
        match op {
            "s_getpc_b64" => {
                if let Some(p) = spair(a[0]) {
                    regs.remove(&p);
                    regs.remove(&(p + 1));
                    pcs.insert(p, (addr + 4, None));
                }
            }
            "s_add_u32" | "s_addc_u32" if a.len() == 3 && sreg(a[0]).is_some() => {
                let d = sreg(a[0]).unwrap();
                regs.remove(&d);
                if sreg(a[1]) != Some(d) {
                    pcs.remove(&(d & !1));
                    continue;
                }
                let Some(v) = num(a[2]) else {
                    pcs.remove(&(d & !1));
                    continue;
                };
                if op == "s_add_u32" {
                    if let Some(e) = pcs.get_mut(&d) {
                        e.1 = Some(v);
                    }
                } else if let Some((pc, Some(lo))) = pcs.remove(&(d - 1)) {
                    let t = pc.wrapping_add((v << 32) | lo);
                    regs.insert(d - 1, (t, false));
                    regs.insert(d, (t, true));
                }
            }
            "s_swappc_b64" | "s_setpc_b64" => {
                let src = if op == "s_swappc_b64" { a[1] } else { a[0] };
                let Some(p) = spair(src) else { continue };
                if op == "s_setpc_b64" && p == 30 {
                    continue;
                }
                let callee = match (regs.get(&p), regs.get(&(p + 1))) {
                    (Some(&(t, false)), Some(&(u, true))) if t == u => starts.get(&t),
                    _ => None,
                };
                match callee {
                    Some(name) => calls.entry(cur.clone()).or_default().push(name.clone()),
                    None => *indirect.entry(cur.clone()).or_default() += 1,
                }
                if op == "s_swappc_b64" {
                    // The callee may clobber s0–s29 (and s[30:31] holds the return address).
                    regs.retain(|&r, _| r >= 32);
                    pcs.retain(|&r, _| r >= 32);
                }
            }
            "s_mov_b64" if a.len() == 2 => {
                if let Some(d) = spair(a[0]) {
                    for h in 0..2 {
                        match spair(a[1]).and_then(|s| regs.get(&(s + h)).copied()) {
                            Some(v) => regs.insert(d + h, v),
                            None => regs.remove(&(d + h)),
                        };
                    }
                }
            }
            "s_mov_b32" if a.len() == 2 => {
                if let Some(d) = sreg(a[0]) {
                    match sreg(a[1]).and_then(|s| regs.get(&s).copied()) {
                        Some(v) => regs.insert(d, v),
                        None => regs.remove(&d),
                    };
                }
            }
            "v_writelane_b32" if a.len() == 3 => {
                let key = (a[0].to_owned(), num(a[2]).unwrap_or(u64::MAX));
                match sreg(a[1]).and_then(|s| regs.get(&s).copied()) {
                    Some(v) => lanes.insert(key, v),
                    None => lanes.remove(&key),
                };
            }
            "v_readlane_b32" if a.len() == 3 => {
                if let Some(d) = sreg(a[0]) {
                    match lanes.get(&(a[1].to_owned(), num(a[2]).unwrap_or(u64::MAX))) {
                        Some(&v) => regs.insert(d, v),
                        None => regs.remove(&d),
                    };
                }
            }
            o if o.starts_with("s_cmp")
                || o.starts_with("s_bitcmp")
                || o.starts_with("s_cbranch")
                || o.starts_with("s_waitcnt")
                || o.starts_with("s_delay_alu")
                || o.starts_with("s_clause")
                || o.starts_with("s_nop") => {}
            _ => {
                // Any other write to a register forgets what it held.
                if let Some(d) = a.first() {
                    if let Some(r) = sreg(d) {
                        regs.remove(&r);
                        pcs.remove(&(r & !1));
                    } else if let Some(r) = spair(d) {
                        regs.remove(&r);
                        regs.remove(&(r + 1));
                        pcs.remove(&r);
                    }
                }
            }
        }
    }
    (calls, indirect)
}

/// Our direct calls and indirect-call counts for every function of `co`, in the same shape.
fn our_calls(co: &[u8]) -> (Edges, BTreeMap<String, usize>) {
    let g = Graph::build(co, e_flags(co)).unwrap();
    let names: Vec<String> = g.functions().map(str::to_owned).collect();
    let mut calls = Edges::new();
    let mut indirect = BTreeMap::new();
    for f in &names {
        let Some(c) = g.calls(f) else { continue };
        if !c.is_empty() {
            calls.insert(f.clone(), c.iter().map(|s| s.to_string()).collect());
        }
        let n = g.indirect_calls(f).unwrap().len();
        if n > 0 {
            indirect.insert(f.clone(), n);
        }
    }
    (calls, indirect)
}

/// Every code object of a host library or bundle file, extracted by clang-offload-bundler.
fn extract(work: &Path, file: &Path) -> Vec<(String, PathBuf)> {
    std::fs::copy(file, work.join("in")).unwrap();
    tool(
        work,
        &[
            "llvm-objcopy-21",
            "--dump-section",
            ".hip_fatbin=fatbin",
            "in",
            "/tmp/x",
        ],
    );
    let fb = std::fs::read(work.join("fatbin")).unwrap();
    let mut out = Vec::new();
    let starts: Vec<usize> = (0..fb.len())
        .step_by(4096)
        .filter(|&o| fb[o..].starts_with(b"__CLANG_OFFLOAD_BUNDLE__"))
        .collect();
    for (bi, &s) in starts.iter().enumerate() {
        let e = starts.get(bi + 1).copied().unwrap_or(fb.len());
        let name = format!("b{bi}");
        std::fs::write(work.join(&name), &fb[s..e]).unwrap();
        let list = tool(
            work,
            &[
                "clang-offload-bundler-21",
                "--list",
                "--type=o",
                &format!("--input={name}"),
            ],
        );
        for id in list.lines().map(str::trim).filter(|l| l.contains("amdgcn")) {
            let out_name = format!("{name}.{}.co", id.replace(':', "_"));
            tool(
                work,
                &[
                    "clang-offload-bundler-21",
                    "--unbundle",
                    "--type=o",
                    &format!("--input={name}"),
                    &format!("--targets={id}"),
                    &format!("--output={out_name}"),
                ],
            );
            out.push((id.to_owned(), work.join(out_name)));
        }
    }
    out
}

fn objdump(work: &Path, co: &Path, id: &str) -> String {
    let mcpu = id.rsplit("--").next().unwrap().split(':').next().unwrap();
    tool(
        work,
        &[
            "llvm-objdump-21",
            "-d",
            &format!("--mcpu={mcpu}"),
            co.file_name().unwrap().to_str().unwrap(),
        ],
    )
}

/// Our direct-call edges and indirect-call counts match what LLVM's own disassembler shows, on
/// every fixture code object (gfx1100, gfx1030, gfx90a; code object v4 to v6).
#[test]
fn edges_match_llvm_objdump() {
    if !slow_or_note() {
        return;
    }
    let (mut checked, mut edges, mut indirect) = (0, 0, 0);
    for rel in [
        "sid/kernels.so",
        "sid/kernels-O0.so",
        "sid/indirect.so",
        "sid/rdc.so",
        "trixie/multi.so",
        "trixie/kernels-O0.so",
        "trixie/indirect.so",
    ] {
        let work = tempfile::tempdir().unwrap();
        for (id, co) in extract(work.path(), &fixture(rel)) {
            let text = objdump(work.path(), &co, &id);
            let want = objdump_calls(&text);
            let got = our_calls(&std::fs::read(&co).unwrap());
            // Ours also counts address references that are not called; keep the called ones.
            let mut got_called = Edges::new();
            for (f, cs) in &got.0 {
                let w = want.0.get(f).cloned().unwrap_or_default();
                let kept: Vec<String> = cs.iter().filter(|c| w.contains(c)).cloned().collect();
                if !kept.is_empty() {
                    got_called.insert(f.clone(), kept);
                }
            }
            let mut want_set = want.0.clone();
            for v in want_set.values_mut() {
                v.sort();
                v.dedup();
            }
            for v in got_called.values_mut() {
                v.sort();
                v.dedup();
            }
            assert_eq!(got_called, want_set, "{rel} {id}: direct calls");
            assert_eq!(got.1, want.1, "{rel} {id}: indirect calls");
            edges += want_set.values().map(Vec::len).sum::<usize>();
            indirect += want.1.values().sum::<usize>();
            checked += 1;
        }
    }
    eprintln!("{checked} code objects, {edges} direct call edges, {indirect} indirect calls");
    assert!(
        checked >= 9 && edges >= 40 && indirect >= 2,
        "{checked} {edges} {indirect}"
    );
}

/// The Debian librccl1 5.4.3 library (`$RCCLFIX_TEST_INPUTS`): the graph of every image builds
/// and traces every kernel (none declares, so `scan` itself never builds it there), and on the
/// gfx1100 image the edges match llvm-objdump's.
#[test]
fn librccl1_graphs() {
    if !slow_or_note() {
        return;
    }
    let lib = librccl1_lib();
    let r = scan(&lib);
    let declaring: usize = r
        .files
        .iter()
        .flat_map(|f| &f.images)
        .flat_map(|i| &i.kernels)
        .filter(|k| k.declares_hostcall)
        .count();
    let work = tempfile::tempdir().unwrap();
    let images = extract(work.path(), &lib);
    assert_eq!(images.len(), r.files[0].images.len());
    for (id, co) in &images {
        let bytes = std::fs::read(co).unwrap();
        let t0 = std::time::Instant::now();
        let g = Graph::build(&bytes, e_flags(&bytes)).unwrap();
        let built = t0.elapsed();
        let img = r.files[0]
            .images
            .iter()
            .find(|i| i.entry_id == *id)
            .unwrap();
        for k in &img.kernels {
            let t = g
                .trace(&k.symbol)
                .unwrap_or_else(|| panic!("{id}: {}", k.name));
            assert!(t.path.is_empty() || !k.declares_hostcall || k.why.is_some());
        }
        eprintln!(
            "{id}: {} bytes, {} functions, {} tables, graph in {:?}, {} kernels traced in {:?}",
            bytes.len(),
            g.len(),
            g.tables().len(),
            built,
            img.kernels.len(),
            t0.elapsed() - built
        );
        if id.ends_with("gfx1100") {
            let text = objdump(work.path(), co, id);
            let want = objdump_calls(&text);
            let got = our_calls(&bytes);
            for (f, cs) in &want.0 {
                let ours = got.0.get(f).cloned().unwrap_or_default();
                for c in cs {
                    assert!(ours.contains(c), "{id}: {f} → {c} missing");
                }
            }
            assert_eq!(got.1, want.1, "{id}: indirect calls");
        }
    }
    eprintln!("librccl1: {declaring} declaring kernels");
}
