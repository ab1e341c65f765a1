//! The independent reachability of `patch-sweep`: from the text LLVM's own tools print for a
//! code object (`llvm-objdump -d`, `llvm-readelf -r -s --notes`), which kernels may reach a
//! hostcall user. It shares no code with rcclfix's `src/scan/callgraph/`.
//!
//! Functions are the `FUNC` symbols (`.symtab`, with their sizes). Inside each, a linear scan
//! tracks the SGPR pairs that hold an address built from the program counter (`s_getpc_b64` /
//! gfx1250's `s_get_pc_i64`, then `s_add_u32` + `s_addc_u32`, gfx12's `s_add_co_u32` +
//! `s_add_co_ci_u32` after `s_sext_i32_i16`, or `s_add_nc_u64 … lit64(…)`); tracking is dropped at
//! every branch target, after every call and when either register is written. Then:
//! - `s_swappc_b64` / `s_swap_pc_i64` / `s_setpc_b64` / `s_set_pc_i64` on a tracked pair is a
//!   direct call (or tail call) to the function at that address; an address that is not a
//!   function's entry is unknown;
//! - the same on an untracked pair is an indirect call (except `s_setpc_b64 s[30:31]`, the
//!   return), which may reach every address-taken function: a target of a data relocation
//!   (`R_AMDGPU_RELATIVE64`, `R_AMDGPU_ABS64`), or a code address built by the scan and used
//!   other than by a call (moved, stored, selected);
//! - arithmetic on a tracked code address (an add of a register, a shift, …) is a computed address:
//!   the function is unknown and every indirect call of the image may reach anything;
//! - a branch whose target lies in another function is an edge; `s_call_b64` is a call;
//! - any other instruction that moves control (`pc` in its name, `s_cbranch_g_fork`, …) is
//!   unknown.
//!
//! Hostcall users: functions named `__ockl_hostcall*`, `__ockl_fprintf*`, `__ockl_printf*`,
//! `printf`, `__ockl_dm_*`, `malloc`/`free` and HIP's `__hip_malloc`/`__hip_free`,
//! `__ockl_sanitizer*`, `__asan_*`, or containing `s_sendmsg sendmsg(MSG_INTERRUPT)` outside
//! LLVM's trap lowering (which saves `m0` in `ttmp2` around it, `SITargetLowering::lowerTrapHsa`).
//! A load whose offset is the hostcall slot is a use: offset 80 (code object v5/v6) or 24 (v4)
//! from the implicit-argument pointer, or the kernel's own `hidden_hostcall_buffer` offset of its
//! kernarg segment (llvm `AMDGPUUsage.rst`, "Code Object V5 Metadata"). A function whose entry is
//! `s_trap` followed by `s_endpgm` (the entry `patch --asserts` writes) calls nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// One kernel of the metadata note: its name and the kernarg offset of its
/// `hidden_hostcall_buffer` argument, when it declares one.
#[derive(Debug, Clone)]
pub struct MetaKernel {
    pub name: String,
    pub hostcall_offset: Option<u64>,
    /// The kernarg offset of the first hidden argument: where the implicit arguments start.
    pub implicit_base: Option<u64>,
}

/// Read the kernels from `llvm-readelf --notes` output (the YAML form of the MessagePack note:
/// kernel keys at indentation 4, argument keys at 8, under `amdhsa.kernels:`).
pub fn meta_kernels(notes: &str) -> Vec<MetaKernel> {
    let mut out = Vec::new();
    let mut cur: Option<MetaKernel> = None;
    let mut last_offset: Option<u64> = None;
    for line in notes.lines() {
        if line.starts_with("  - ") {
            if let Some(k) = cur.take() {
                out.push(k);
            }
            cur = Some(MetaKernel {
                name: String::new(),
                hostcall_offset: None,
                implicit_base: None,
            });
        }
        let t = line.trim_start();
        let t = t.strip_prefix("- ").unwrap_or(t);
        let Some(k) = cur.as_mut() else { continue };
        if let Some(v) = t.strip_prefix(".offset:") {
            last_offset = v.trim().parse().ok();
        } else if t.starts_with(".value_kind:") && t.ends_with("hidden_hostcall_buffer") {
            k.hostcall_offset = last_offset;
        } else if t.starts_with(".value_kind:") && t.contains(" hidden_") {
            k.implicit_base = k.implicit_base.or(last_offset);
        } else if line.starts_with("    .name:") {
            k.name = t[".name:".len()..].trim().to_string();
        }
    }
    out.extend(cur);
    out.retain(|k| !k.name.is_empty());
    out
}

/// One function of the image.
#[derive(Debug, Default, Clone)]
struct Func {
    name: String,
    start: u64,
    end: u64,
    calls: BTreeSet<usize>,
    indirect: bool,
    /// Why the function is a hostcall user or unknown, if it is.
    stop: Option<String>,
    /// Arithmetic on a code address in this function, if any.
    computes: Option<String>,
    trapped_entry: bool,
}

/// The whole image's reachability facts.
#[derive(Debug, Default)]
pub struct Image {
    funcs: Vec<Func>,
    taken: BTreeSet<usize>,
    computed: Option<String>,
}

/// Whether `name` is a hostcall user by name (see the module doc).
pub fn is_hostcall_name(name: &str) -> bool {
    [
        "__ockl_hostcall",
        "__ockl_fprintf",
        "__ockl_printf",
        "__ockl_dm_",
        "__ockl_sanitizer",
        "__asan_",
    ]
    .iter()
    .any(|p| name.starts_with(p))
        || ["printf", "malloc", "free", "__hip_malloc", "__hip_free"].contains(&name)
}

fn parse_num(s: &str) -> Option<i64> {
    let s = s.trim();
    let s = s
        .strip_prefix("lit64(")
        .or_else(|| s.strip_prefix("lit("))
        .map(|x| x.trim_end_matches(')'))
        .unwrap_or(s);
    if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok().map(|v| v as i64)
    } else if let Some(h) = s.strip_prefix("-0x") {
        i64::from_str_radix(h, 16).ok().map(|v| -v)
    } else {
        s.parse().ok()
    }
}

/// The SGPRs an operand names: `s7` → [7], `s[4:5]` → [4, 5].
fn sregs(op: &str) -> Vec<u32> {
    let op = op.trim();
    if let Some(r) = op.strip_prefix("s[") {
        let r = r.trim_end_matches(']');
        if let Some((a, b)) = r.split_once(':') {
            if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                return (a..=b).collect();
            }
        }
    } else if let Some(r) = op.strip_prefix('s') {
        if let Ok(a) = r.parse::<u32>() {
            return vec![a];
        }
    }
    Vec::new()
}

/// Split operands at top-level commas (not inside parentheses).
fn operands(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0);
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// One decoded line: address, mnemonic, operands, and the `<sym+off>` objdump names, if any.
struct Line {
    addr: u64,
    mnem: String,
    ops: Vec<String>,
    target: Option<(String, u64)>,
}

fn parse_line(l: &str) -> Option<Line> {
    let (text, comment) = l.split_once("//")?;
    let comment = comment.trim();
    let (addr, rest) = comment.split_once(':')?;
    let addr = u64::from_str_radix(addr.trim(), 16).ok()?;
    let target = rest.split_once('<').and_then(|(_, t)| {
        let t = t.trim_end_matches('>');
        match t.rsplit_once("+0x") {
            Some((n, o)) => Some((n.to_string(), u64::from_str_radix(o, 16).ok()?)),
            None => Some((t.to_string(), 0)),
        }
    });
    let text = text.trim();
    let (mnem, ops) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    Some(Line {
        addr,
        mnem: mnem.to_string(),
        ops: operands(ops),
        target,
    })
}

/// Mnemonics that only read their operands (no SGPR destination in the first position).
fn no_dest(m: &str) -> bool {
    m.contains("store")
        || m.starts_with("s_cmp")
        || m.starts_with("s_bitcmp")
        || m.starts_with("s_cbranch")
        || m.starts_with("s_branch")
        || m.starts_with("s_wait")
        || m == "s_nop"
        || m == "s_sendmsg"
        || m == "s_trap"
        || m == "s_endpgm"
}

/// Reads of a code address that only copy it somewhere (the address is taken, not changed).
fn copies(m: &str) -> bool {
    m.starts_with("s_mov")
        || m.starts_with("v_mov")
        || m.starts_with("v_dual_mov")
        || m.starts_with("v_pk_mov")
        || m.starts_with("v_writelane")
        || m.starts_with("s_cselect")
        || m.starts_with("v_cndmask")
        || m.contains("store")
        || m.starts_with("s_cmp")
        || m.starts_with("v_cmp")
}

/// The bytes a load moves, from its mnemonic (`_b64`, `dwordx4`, …); 8 when it does not say.
fn load_bytes(m: &str) -> u64 {
    let digits = |s: &str| {
        s.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
    };
    if let Some((_, b)) = m.rsplit_once("_b") {
        if let Ok(bits) = digits(b).parse::<u64>() {
            return (bits / 8).max(1);
        }
    }
    if let Some((_, n)) = m.rsplit_once("dwordx") {
        if let Ok(n) = digits(n).parse::<u64>() {
            return 4 * n;
        }
    }
    if m.ends_with("dword") {
        return 4;
    }
    8
}

/// Build the image from `llvm-readelf -s -r` and `llvm-objdump -d` output; `meta` gives the
/// kernels' hostcall offsets, `slot` the implicit-argument slot offset (80 or 24).
pub fn build(symbols_relocs: &str, disasm: &str, meta: &[MetaKernel], slot: u64) -> Image {
    let mut img = Image::default();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    // FUNC symbols of .symtab (the dynamic table repeats the global ones).
    let mut seen = BTreeSet::new();
    for l in symbols_relocs.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 8 && f[3] == "FUNC" {
            let (Ok(v), Ok(sz)) = (u64::from_str_radix(f[1], 16), f[2].parse::<u64>()) else {
                continue;
            };
            if seen.insert((v, f[7].to_string())) && !by_name.contains_key(f[7]) {
                by_name.insert(f[7].to_string(), img.funcs.len());
                img.funcs.push(Func {
                    name: f[7].to_string(),
                    start: v,
                    end: v + sz.max(4),
                    ..Func::default()
                });
            }
        }
    }
    let at = |funcs: &[Func], a: u64| funcs.iter().position(|f| f.start <= a && a < f.end);
    let entry = |funcs: &[Func], a: u64| funcs.iter().position(|f| f.start == a);
    // Data relocations: their targets are address-taken.
    for l in symbols_relocs.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 3 && f[2].starts_with("R_AMDGPU_") {
            let v = if f[2] == "R_AMDGPU_RELATIVE64" {
                f.last().and_then(|x| u64::from_str_radix(x, 16).ok())
            } else {
                f.get(3).and_then(|x| u64::from_str_radix(x, 16).ok())
            };
            match v.and_then(|v| at(&img.funcs, v)) {
                Some(i) => {
                    img.taken.insert(i);
                }
                None if v.is_none() => {
                    img.computed = Some(format!("unread relocation: {}", l.trim()));
                }
                None => {}
            }
        }
    }
    // The kernarg offset of each kernel's slot: its declared one, or where it would be.
    let kernel_off: HashMap<&str, u64> = meta
        .iter()
        .filter_map(|k| {
            let off = k.hostcall_offset.or(k.implicit_base.map(|b| b + slot))?;
            Some((k.name.as_str(), off))
        })
        .collect();

    // Group the disassembly by the function each instruction lies in.
    let mut per_func: BTreeMap<usize, Vec<Line>> = BTreeMap::new();
    for l in disasm.lines() {
        if let Some(line) = parse_line(l) {
            if let Some(i) = at(&img.funcs, line.addr) {
                per_func.entry(i).or_default().push(line);
            }
        }
    }
    for (fi, lines) in per_func {
        let name = img.funcs[fi].name.clone();
        let own_off = kernel_off.get(name.as_str()).copied();
        let targets: BTreeSet<u64> = lines
            .iter()
            .filter(|l| l.mnem.starts_with("s_cbranch") || l.mnem == "s_branch")
            .filter_map(|l| l.target.as_ref())
            .filter(|(n, _)| *n == name)
            .map(|(_, o)| img.funcs[fi].start + o)
            .collect();
        // Its body is still read: a computed address may land past the entry.
        img.funcs[fi].trapped_entry =
            lines.len() >= 2 && lines[0].mnem == "s_trap" && lines[1].mnem == "s_endpgm";
        // Every word traps or ends the wave: entered anywhere, it uses nothing, whatever its name.
        let all_trap = !lines.is_empty()
            && lines
                .iter()
                .all(|l| l.mnem == "s_trap" || l.mnem == "s_endpgm");
        // Tracked pairs: low register → 64-bit value.
        let mut pairs: HashMap<u32, u64> = HashMap::new();
        let mut stop: Option<String> = None;
        let mut calls = BTreeSet::new();
        let mut indirect = false;
        let (mut after_trap, mut in_trap) = (false, false);
        let mut computes: Option<String> = None;
        for l in &lines {
            if targets.contains(&l.addr) {
                pairs.clear();
            }
            let m = l.mnem.as_str();
            let mut regs: Vec<Vec<u32>> = l.ops.iter().map(|o| sregs(o)).collect();
            // Every instruction is read as having at least two operand slots.
            regs.resize(regs.len().max(2), Vec::new());
            let tracked = |r: &[u32], pairs: &HashMap<u32, u64>| {
                r.first().and_then(|a| pairs.get(a).copied())
            };
            let is_code = |v: u64| at(&img.funcs, v).is_some();
            let mut handled = false;
            if m == "s_getpc_b64" || m == "s_get_pc_i64" {
                if let Some(&a) = regs[0].first() {
                    pairs.remove(&a.wrapping_sub(1));
                    pairs.insert(a, l.addr + 4);
                }
                handled = true;
            } else if (m == "s_add_u32" || m == "s_add_co_u32") && l.ops.len() == 3 {
                let (d, s0) = (regs[0].first(), regs[1].first());
                if let (Some(&d), Some(&s0), Some(v)) =
                    (d, s0, d.and_then(|d| pairs.get(d)).copied())
                {
                    if d == s0 {
                        if let Some(imm) = parse_num(&l.ops[2]) {
                            let lo = (v & 0xffff_ffff) + (imm as u64 & 0xffff_ffff);
                            pairs.insert(d, (v & !0xffff_ffff) | (lo & 0xffff_ffff));
                            // The carry goes to the high half with the following addc.
                            pairs.insert(d | 0x8000_0000, lo >> 32);
                            handled = true;
                        }
                    }
                }
            } else if (m == "s_addc_u32" || m == "s_add_co_ci_u32") && l.ops.len() == 3 {
                if let (Some(&d), Some(imm)) = (regs[0].first(), parse_num(&l.ops[2])) {
                    let lo = d.wrapping_sub(1);
                    if let (Some(v), Some(c)) = (
                        pairs.get(&lo).copied(),
                        pairs.get(&(lo | 0x8000_0000)).copied(),
                    ) {
                        let hi = ((v >> 32) + (imm as u64 & 0xffff_ffff) + c) & 0xffff_ffff;
                        pairs.insert(lo, (v & 0xffff_ffff) | (hi << 32));
                        handled = true;
                    }
                }
            } else if m == "s_sext_i32_i16" && !regs[0].is_empty() && regs[0] == regs[1] {
                if let Some(&d) = regs[0].first() {
                    let lo = d.wrapping_sub(1);
                    if let Some(v) = pairs.get(&lo).copied() {
                        let hi = ((v >> 32) as u16 as i16 as i32) as u32 as u64;
                        pairs.insert(lo, (v & 0xffff_ffff) | (hi << 32));
                        handled = true;
                    }
                }
            } else if m == "s_add_nc_u64"
                && l.ops.len() == 3
                && !regs[0].is_empty()
                && regs[0] == regs[1]
            {
                if let (Some(v), Some(imm)) = (tracked(&regs[0], &pairs), parse_num(&l.ops[2])) {
                    pairs.insert(regs[0][0], v.wrapping_add(imm as u64));
                    handled = true;
                }
            } else if matches!(
                m,
                "s_swappc_b64" | "s_swap_pc_i64" | "s_setpc_b64" | "s_set_pc_i64"
            ) {
                let src = if m.contains("swap") { 1 } else { 0 };
                match tracked(&regs[src], &pairs) {
                    Some(v) => match entry(&img.funcs, v) {
                        Some(t) => {
                            calls.insert(t);
                        }
                        None => {
                            stop.get_or_insert(format!("call to 0x{v:x}, not a function entry"));
                        }
                    },
                    None if src == 0 && regs[0] == [30, 31] => {}
                    None => indirect = true,
                }
                if src == 1 {
                    pairs.clear();
                }
                handled = true;
            } else if m == "s_call_b64" {
                match l
                    .target
                    .as_ref()
                    .and_then(|(n, o)| Some((*by_name.get(n)?, *o)))
                {
                    Some((t, 0)) => {
                        calls.insert(t);
                    }
                    _ => {
                        stop.get_or_insert(format!("s_call_b64 to {:?}", l.target));
                    }
                }
                pairs.clear();
                handled = true;
            } else if m.starts_with("s_cbranch") || m == "s_branch" {
                match &l.target {
                    Some((n, _)) if *n == name => {}
                    Some((n, o)) => match by_name.get(n) {
                        Some(&t) if *o == 0 || !img.funcs[t].trapped_entry => {
                            calls.insert(t);
                        }
                        _ => {
                            stop.get_or_insert(format!("branch to {n}+0x{o:x}"));
                        }
                    },
                    None => {
                        stop.get_or_insert(format!("{m} without a target"));
                    }
                }
                if m == "s_branch" {
                    pairs.clear();
                }
                handled = true;
            } else if m.contains("pc_b64")
                || m.contains("_pc_")
                || m.contains("fork")
                || m.contains("join")
                || m.starts_with("s_rfe")
            {
                stop.get_or_insert(format!("undecoded control flow: {m}"));
            } else if m == "s_sendmsg"
                && l.ops.iter().any(|o| o.contains("MSG_INTERRUPT"))
                && !in_trap
            {
                stop.get_or_insert("s_sendmsg sendmsg(MSG_INTERRUPT) (hostcall doorbell)".into());
            }
            if m.contains("load") {
                for o in l.ops.iter().flat_map(|o| o.split_whitespace()) {
                    let off = o.strip_prefix("offset:").and_then(parse_num).or_else(|| {
                        if m.starts_with("s_") {
                            parse_num(o)
                        } else {
                            None
                        }
                    });
                    if let Some(off) = off {
                        let (lo, hi) = (off as u64, off as u64 + load_bytes(m));
                        let hit = |s: u64| lo <= s && s < hi;
                        if hit(slot) || own_off.is_some_and(hit) {
                            stop.get_or_insert(format!("load at offset {off} (the hostcall slot)"));
                        }
                    }
                }
            }
            if !handled {
                // Any other read of a tracked code address: taken, or changed.
                for (i, r) in regs.iter().enumerate() {
                    let first_is_dest = i == 0 && !no_dest(m);
                    if first_is_dest {
                        continue;
                    }
                    for &reg in r {
                        let base = if pairs.contains_key(&reg) {
                            reg
                        } else {
                            reg.wrapping_sub(1)
                        };
                        if let Some(v) = pairs.get(&base).copied() {
                            if let Some(t) = at(&img.funcs, v) {
                                if m.starts_with("s_cmp") || m.starts_with("v_cmp") {
                                    // A null check: neither taken nor changed.
                                } else if is_code(v) && copies(m) {
                                    img.taken.insert(t);
                                } else {
                                    img.taken.insert(t);
                                    let why = format!(
                                        "{m} on the code address of {} in {name}",
                                        img.funcs[t].name
                                    );
                                    computes.get_or_insert(why.clone());
                                    img.computed.get_or_insert(why);
                                }
                            }
                        }
                    }
                }
                // Writes: the first operand of most instructions, the second of VOP3b carries.
                let mut written: Vec<u32> = Vec::new();
                if !no_dest(m) {
                    written.extend(regs.first().into_iter().flatten());
                }
                if m.starts_with("v_")
                    && (m.contains("_co_") || m.contains("mad_") || m.contains("div_scale"))
                    && regs.len() > 1
                {
                    written.extend(&regs[1]);
                }
                for w in written {
                    pairs.remove(&w);
                    pairs.remove(&w.wrapping_sub(1));
                }
            }
            // LLVM's gfx11 trap lowering: s_trap 2, then m0 saved in ttmp2 around the doorbell.
            if m == "s_trap" {
                after_trap = true;
            } else if m == "s_mov_b32" && l.ops == ["ttmp2", "m0"] && after_trap {
                in_trap = true;
            } else if m == "s_mov_b32" && l.ops == ["m0", "ttmp2"] {
                in_trap = false;
                after_trap = false;
            }
        }
        let f = &mut img.funcs[fi];
        f.calls = calls;
        f.indirect = indirect;
        f.computes = computes;
        if all_trap {
            f.stop = None;
        } else if is_hostcall_name(&f.name) {
            f.stop = Some(format!("{} (hostcall user by name)", f.name));
        } else {
            f.stop = stop;
        }
    }
    img
}

impl Image {
    /// Whether anything in the image is a hostcall user, a slot read or unknown: what a computed
    /// address could reach.
    pub fn holds_anything(&self) -> bool {
        self.anything().is_some()
    }

    /// What a computed address could reach: the first function of the image (a trapped entry's
    /// body included) that is a hostcall user or unknown, if there is one.
    fn anything(&self) -> Option<String> {
        let f = self.funcs.iter().find(|f| f.stop.is_some())?;
        Some(format!("{}: {}", f.name, f.stop.as_deref().unwrap_or("")))
    }

    /// The path from kernel `k` to a hostcall user or an unknown, as `k -> f -> …: why`, or
    /// `None` when the oracle finds none. A kernel the image has no function for is a path
    /// (`"kernel code not found"`).
    pub fn path(&self, k: &str) -> Option<String> {
        let Some(start) = self.funcs.iter().position(|f| f.name == k) else {
            return Some(format!("{k}: kernel code not found"));
        };
        let mut parent: Vec<Option<usize>> = vec![None; self.funcs.len()];
        let mut seen = vec![false; self.funcs.len()];
        seen[start] = true;
        let mut q = VecDeque::from([start]);
        let line = |parent: &[Option<usize>], mut n: usize, why: &str| {
            let mut names = vec![self.funcs[n].name.clone()];
            while let Some(p) = parent[n] {
                names.push(self.funcs[p].name.clone());
                n = p;
            }
            names.reverse();
            format!("{}: {why}", names.join(" -> "))
        };
        while let Some(n) = q.pop_front() {
            let f = &self.funcs[n];
            if f.trapped_entry {
                continue;
            }
            if let Some(why) = &f.stop {
                return Some(line(&parent, n, why));
            }
            if let (Some(c), Some(any)) = (&f.computes, self.anything()) {
                return Some(line(&parent, n, &format!("{c}; anything includes {any}")));
            }
            let mut next: Vec<usize> = f.calls.iter().copied().collect();
            if f.indirect {
                if let (Some(c), Some(any)) = (&self.computed, self.anything()) {
                    return Some(line(
                        &parent,
                        n,
                        &format!("indirect call, and {c}; anything includes {any}"),
                    ));
                }
                next.extend(&self.taken);
            }
            for m in next {
                if !seen[m] {
                    seen[m] = true;
                    parent[m] = Some(n);
                    q.push_back(m);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_keep_parentheses() {
        assert_eq!(
            operands("s[0:1], s[0:1], lit64(0xe8c4)"),
            ["s[0:1]", "s[0:1]", "lit64(0xe8c4)"]
        );
        assert_eq!(sregs("s[30:31]"), [30, 31]);
        assert_eq!(parse_num("0xffffffffffffece7"), Some(-4889));
    }
}
