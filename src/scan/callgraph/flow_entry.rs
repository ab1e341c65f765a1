//! The kernel's side of [`super::flow`]: the kernels it starts from ([`FlowRoot`]), their kernel
//! descriptors, and what the registers hold at their first instruction (llvm `AMDGPUUsage.rst`,
//! "Kernel Descriptor", "Initial Kernel Execution State"), and what a load through a followed
//! pointer gives ([`load_value`]); and what the flow refuses with ([`FlowRefusal`]).

use std::collections::HashMap;

use super::flow_state::{Base, Gate, State, Val};
use super::inst::Reg;
use super::Graph;

/// One kernel whose declaration a proof drops: where its code starts and what its kernel
/// descriptor says the registers hold there.
#[derive(Debug, Clone)]
pub struct FlowRoot {
    /// The kernel's name (for messages).
    pub name: String,
    /// Its function node.
    pub node: u32,
    /// Its kernel descriptor (64 bytes, llvm `AMDGPUUsage.rst`, "Kernel Descriptor").
    pub kd: [u8; 64],
    /// The address of its kernel descriptor.
    pub kd_addr: u64,
    /// Its `hidden_hostcall_buffer` `.offset` in the kernarg segment (bytes).
    pub slot: u64,
    /// Its `.kernarg_segment_size` (bytes).
    pub kernarg_size: u64,
}

/// One kernel's kernarg segment, from its metadata (llvm `AMDGPUUsage.rst`, "Code Object V3
/// Metadata" `.kernarg_segment_size` and `.args`), for a kernel whose declaration stays: a load
/// through its segment pointer reads nothing followed inside `[0, size)` and outside every
/// `hazard`, else a followed value.
#[derive(Debug, Clone, Default)]
pub struct ArgSegment {
    /// Its kernel descriptor's symbol (`name.kd`).
    pub kd: String,
    /// `.kernarg_segment_size`, bytes (0 when not known: every load is followed).
    pub size: u64,
    /// Byte ranges `[from, to)` of the arguments that may hold a pointer to a runtime structure
    /// (`hidden_queue_ptr`, `hidden_default_queue`, …; any kind but the explicit arguments other
    /// than `queue` and the scalar hidden arguments), or whose place is not known.
    pub hazards: Vec<(u64, u64)>,
}

/// Why the flow refuses: the function, the instruction's address and a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRefusal {
    pub function: String,
    pub at: u64,
    pub reason: String,
}

/// The registers at a kernel's first instruction, from its kernel descriptor: the user SGPRs in
/// their fixed order (private segment buffer 4, dispatch pointer 2, queue pointer 2, kernarg
/// segment pointer 2, dispatch ID 2, flat scratch init 2, private segment size 1; then the
/// preloaded kernarg dwords), and the trap temporaries and runtime state as anything followed
/// (but ttmp7–ttmp9, the workgroup IDs, on a processor with `architected` SGPRs).
///
/// With `other` (a kernel whose declaration stays, followed because a table call is taken: it
/// has no slot to follow), its kernarg segment pointer is [`Gate::Args`] of that index and no
/// kernarg dword may be preloaded; the dispatch packet and queue pointers are followed still
/// (the packet's `kernel_object` is a code address).
pub(super) fn kernel_entry(
    r: &FlowRoot,
    g: &Graph,
    architected: bool,
    other: Option<u16>,
) -> Result<State, FlowRefusal> {
    let refuse = |reason: String| FlowRefusal {
        function: r.name.clone(),
        at: r.kd_addr,
        reason,
    };
    let kd = &r.kd;
    let entry_off = i64::from_le_bytes(kd[16..24].try_into().unwrap());
    let entry = r.kd_addr.wrapping_add_signed(entry_off);
    if g.nodes[r.node as usize].addr != Some(entry) {
        return Err(refuse(format!(
            "its kernel descriptor starts the kernel at 0x{entry:x}, not at its symbol"
        )));
    }
    let props = u16::from_le_bytes([kd[56], kd[57]]);
    let preload = u16::from_le_bytes([kd[58], kd[59]]);
    // A kernel is reached: no register holds a code address yet.
    let mut st = State::reached();
    let mut at: Reg = 0;
    let bit = |b: u16| props & (1 << b) != 0;
    if bit(0) {
        at += 4;
    }
    // The trap temporaries (ttmp0–15, gfx8's tba/tma) and what the runtime answers may hold the
    // dispatch packet pointer or lead to the queue (ROCdbgapi: "The dispatch_ptr is preserved in
    // registers ttmp[6:7]" when the runtime enables the trap handler's debug mode). With
    // architected SGPRs, ttmp7–ttmp9 are the workgroup IDs the hardware writes instead.
    for t in 108..=123 {
        if !(architected && (115..=117).contains(&t)) {
            st.set(t, Val::Any);
        }
    }
    st.set(super::inst::RUNTIME, Val::Any);
    // Each pointer is a pair: its low half, then its high half.
    if bit(1) {
        st.set(at, Val::Gate(Gate::Dispatch, 0));
        st.set(at + 1, Val::Hi(Base::Gate(Gate::Dispatch), 0));
        at += 2;
    }
    if bit(2) {
        st.set(at, Val::Gate(Gate::Queue, 0));
        st.set(at + 1, Val::Hi(Base::Gate(Gate::Queue), 0));
        at += 2;
    }
    match other {
        _ if !bit(3) => {}
        None => {
            let d = -(r.slot as i64);
            st.set(at, Val::Kernarg(d));
            st.set(at + 1, Val::Hi(Base::Kernarg, d));
        }
        Some(k) => {
            st.set(at, Val::Gate(Gate::Args(k), 0));
            st.set(at + 1, Val::Hi(Base::Gate(Gate::Args(k)), 0));
        }
    }
    let (len, off) = (u64::from(preload & 0x7f), u64::from(preload >> 7));
    if len > 0 && other.is_some() {
        return Err(refuse(
            "its kernel descriptor preloads kernarg dwords into SGPRs, which this rcclfix does not follow for a kernel whose declaration stays".into(),
        ));
    }
    if len > 0 {
        let (from, to) = (off * 4, (off + len) * 4);
        if to > r.slot {
            return Err(refuse(format!(
                "its kernel descriptor preloads kernarg bytes {from}..{to} into SGPRs, which reach its hidden arguments"
            )));
        }
    }
    Ok(st)
}

/// The kernel descriptors (symbols named `*.kd`) of a linked code object, read once: name →
/// its address and its 64 bytes (llvm `AMDGPUUsage.rst`, "Kernel Descriptor"), read through the
/// section that holds it. `.symtab` is searched before `.dynsym` and a name's first symbol
/// decides: `None` when its bytes lie outside its section or the file. A symbol name that cannot
/// be read ends the search (names after it are absent, as unnamed). Empty when the file is no
/// ELF64 object.
pub fn kernel_descriptors(data: &[u8]) -> HashMap<String, Option<(u64, [u8; 64])>> {
    use object::read::elf::{FileHeader, SectionHeader, Sym};
    let e = object::LittleEndian;
    let mut out = HashMap::new();
    let Ok(hdr) = object::elf::FileHeader64::<object::LittleEndian>::parse(data) else {
        return out;
    };
    let Ok(sections) = hdr.sections(e, data) else {
        return out;
    };
    let bytes_of = |sym: &object::elf::Sym64<object::LittleEndian>| {
        let addr = sym.st_value(e);
        let s = sections
            .section(object::SectionIndex(sym.st_shndx(e) as usize))
            .ok()?;
        let off = addr.checked_sub(s.sh_addr(e))?;
        if s.sh_type(e) == object::elf::SHT_NOBITS || off.checked_add(64)? > s.sh_size(e) {
            return None;
        }
        let at = usize::try_from(s.sh_offset(e).checked_add(off)?).ok()?;
        let bytes: [u8; 64] = data.get(at..at.checked_add(64)?)?.try_into().ok()?;
        Some((addr, bytes))
    };
    for kind in [object::elf::SHT_SYMTAB, object::elf::SHT_DYNSYM] {
        let Ok(syms) = sections.symbols(e, data, kind) else {
            continue;
        };
        for sym in syms.iter() {
            let Ok(name) = syms.symbol_name(e, sym) else {
                return out;
            };
            if name.ends_with(b".kd") {
                let name = String::from_utf8_lossy(name).into_owned();
                out.entry(name).or_insert_with(|| bytes_of(sym));
            }
        }
    }
    out
}

/// Bytes after the slot that hold pointers to runtime structures, code object v5/v6
/// (`hidden_multigrid_sync_arg` +8, `hidden_default_queue` +24, `hidden_completion_action` +32,
/// `hidden_queue_ptr` +120; the slot is at implicit-argument byte 80) and v4 (+8 to +32).
fn hazards(cov: u32) -> &'static [(i64, i64)] {
    if cov >= 5 {
        &[(8, 16), (24, 40), (120, 128)]
    } else {
        &[(8, 32)]
    }
}

/// The value a load through `base` at `offset` (plus a register offset when `soffset`) of
/// `bytes` gives; `args` are the segments of the [`Gate::Args`] kernels. Errors: the load may
/// read the slot or something this rcclfix cannot bound.
pub(super) fn load_value(
    base: Val,
    offset: i64,
    soffset: bool,
    bytes: u32,
    bounds: (i64, i64),
    cov: u32,
    args: &[ArgSegment],
) -> Result<Val, String> {
    let b = i64::from(bytes);
    match base {
        Val::Clean => Ok(Val::Clean),
        Val::Kernarg(d) => {
            if soffset {
                return Err("a load through the kernarg segment pointer with a register offset".into());
            }
            let a = d + offset;
            if a < 8 && a + b > 0 {
                return Err(format!(
                    "a load of {bytes} bytes at the hostcall slot {a:+} reads the slot"
                ));
            }
            if a < bounds.0 || a + b > bounds.1 {
                return Err(format!(
                    "a load of {bytes} bytes at slot {a:+} lies outside the kernarg segment"
                ));
            }
            if hazards(cov)
                .iter()
                .any(|&(lo, hi)| a < hi && a + b > lo)
            {
                return Ok(Val::Any);
            }
            Ok(Val::Clean)
        }
        Val::Gate(Gate::Dispatch, d) => {
            let a = d + offset;
            if soffset || a < 0 || (a < 48 && a + b > 40) || a + b > 56 {
                Ok(Val::Any)
            } else if a < 40 && a + b > 32 {
                // `kernel_object`: the kernel descriptor's address, a code address.
                Ok(Val::PcAny)
            } else {
                Ok(Val::Clean)
            }
        }
        Val::Gate(Gate::Queue, _) => Ok(Val::Any),
        Val::Gate(Gate::Args(k), d) => {
            let a = d + offset;
            let clean = args.get(usize::from(k)).is_some_and(|s| {
                let end = i64::try_from(s.size).unwrap_or(0);
                // Both ends are non-negative once inside the segment.
                a >= 0
                    && a + b <= end
                    && !s
                        .hazards
                        .iter()
                        .any(|&(lo, hi)| (a as u64) < hi && ((a + b) as u64) > lo)
            });
            Ok(if !soffset && clean {
                Val::Clean
            } else {
                Val::Any
            })
        }
        // Through a code-derived address: [`super::flow`] reads those (`flow/place.rs`); a
        // caller that comes here anyway gets a code-derived value.
        Val::Pc(_)
        | Val::PcAny
        | Val::Ret
        | Val::Idx
        | Val::ImgCarry(_)
        | Val::ImgHi
        | Val::Entry => Ok(Val::PcAny),
        Val::Any | Val::Hi(..) | Val::Carry(..) => Err("a load through a pointer derived from the kernarg segment pointer, at an offset not known".into()),
    }
}
