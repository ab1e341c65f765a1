//! The kernel's side of [`super::flow`]: its kernel descriptor, and what the registers hold at
//! its first instruction (llvm `AMDGPUUsage.rst`, "Kernel Descriptor", "Initial Kernel
//! Execution State").

use super::decode::{Gen, Reg};
use super::flow::{FlowRefusal, FlowRoot, Gate, State, Val};
use super::Graph;

/// The registers at a kernel's first instruction, from its kernel descriptor: the user SGPRs in
/// their fixed order (private segment buffer 4, dispatch pointer 2, queue pointer 2, kernarg
/// segment pointer 2, dispatch ID 2, flat scratch init 2, private segment size 1; then the
/// preloaded kernarg dwords).
pub(super) fn kernel_entry(r: &FlowRoot, g: &Graph, _gen: Gen) -> Result<State, FlowRefusal> {
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
    let mut st = State::default();
    let mut at: Reg = 0;
    let bit = |b: u16| props & (1 << b) != 0;
    if bit(0) {
        at += 4;
    }
    if bit(1) {
        st.set(at, Val::Gate(Gate::Dispatch, 0));
        at += 2;
    }
    if bit(2) {
        st.set(at, Val::Gate(Gate::Queue, 0));
        at += 2;
    }
    if bit(3) {
        st.set(at, Val::Kernarg(-(r.slot as i64)));
        at += 2;
    }
    for (b, n) in [(4, 2), (5, 2), (6, 1)] {
        if bit(b) {
            at += n;
        }
    }
    let (len, off) = (u64::from(preload & 0x7f), u64::from(preload >> 7));
    if len > 0 {
        let (from, to) = (off * 4, (off + len) * 4);
        if to > r.slot {
            return Err(refuse(format!(
                "its kernel descriptor preloads kernarg bytes {from}..{to} into SGPRs, which reach its hidden arguments"
            )));
        }
    }
    let _ = at;
    Ok(st)
}

/// The kernel descriptor `name` (e.g. `k.kd`) of a linked code object: its address and its 64
/// bytes, read through the section that holds it (`.symtab`, else `.dynsym`). `None` when there
/// is no such symbol or its bytes lie outside the file.
pub fn kernel_descriptor(data: &[u8], name: &str) -> Option<(u64, [u8; 64])> {
    use object::read::elf::{FileHeader, SectionHeader, Sym};
    let e = object::LittleEndian;
    let hdr = object::elf::FileHeader64::<object::LittleEndian>::parse(data).ok()?;
    let sections = hdr.sections(e, data).ok()?;
    for kind in [object::elf::SHT_SYMTAB, object::elf::SHT_DYNSYM] {
        let Ok(syms) = sections.symbols(e, data, kind) else {
            continue;
        };
        for sym in syms.iter() {
            if syms.symbol_name(e, sym).ok()? != name.as_bytes() {
                continue;
            }
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
            return Some((addr, bytes));
        }
    }
    None
}
