//! The instruction-set generation of a code object and the interrupt sites in its machine code
//! (`s_sendmsg sendmsg(MSG_INTERRUPT)` outside LLVM's trap sequence), read one 32-bit word at a
//! time. Source: the RDNA and CDNA ISA reference guides (SOPP encoding), llvm `AMDGPUUsage.rst`
//! ("Trap Handler ABI").

use crate::scan::amdgpu::mach_name;

/// The instruction-set generation, for the handful of encodings read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// gfx6, gfx7 (SI/CI opcode numbers, shared with gfx10 for SOP1; SMRD loads are not read).
    Gfx6,
    /// gfx8, gfx9 (incl. gfx90a, gfx94x, gfx950 and the gfx9 generic targets).
    Gfx9,
    /// gfx10.x.
    Gfx10,
    /// gfx11.x and gfx12.x up to gfx1201 (gfx1250 and later are [`Isa::Gfx1250`]).
    Gfx11,
    /// gfx1250 and the gfx125x line: its calls are written `s_get_pc_i64` +
    /// `s_add_nc_u64 s[N:N+1], s[N:N+1], lit64(…)` + `s_swap_pc_i64` (a 64-bit literal, two words),
    /// which this module does not decode, so no call graph is built for it (a proof refuses; `why`
    /// says so) and only [`interrupt_sites`] runs, with the gfx11 encodings (llvm
    /// `SOPInstructions.td`, `SOP2_Real_gfx12` / `S_ADD_U64`; `AMDGPUUsage.rst`, "Processors").
    Gfx1250,
    /// An `EF_AMDGPU_MACH` this module does not know: only [`interrupt_sites`] runs, with every
    /// encoding.
    Unknown,
}

impl Isa {
    /// The generation of a code object from its `e_flags` (`EF_AMDGPU_MACH`, llvm `ELF.h`).
    pub fn from_e_flags(e_flags: u32) -> Isa {
        match mach_name(e_flags & 0xff) {
            Some(name) => Isa::from_processor(name),
            None => Isa::Unknown,
        }
    }

    /// The generation of a processor name (`gfx1100`, `gfx90a`, `gfx11-generic`; a target ID's
    /// `:feature` suffixes are ignored).
    pub fn from_processor(name: &str) -> Isa {
        let digits = name.trim_start_matches("gfx");
        if digits.starts_with("125") {
            Isa::Gfx1250
        } else if digits.starts_with("12") || digits.starts_with("11") {
            Isa::Gfx11
        } else if digits.starts_with("10") {
            Isa::Gfx10
        } else if digits.starts_with('9') || digits.starts_with('8') {
            Isa::Gfx9
        } else if digits.starts_with('6') || digits.starts_with('7') {
            Isa::Gfx6
        } else {
            Isa::Unknown
        }
    }

    /// SOP1 opcodes: (`s_mov_b32`, `s_mov_b64`, `s_getpc_b64`, `s_setpc_b64`, `s_swappc_b64`)
    /// (llvm `SOPInstructions.td`: `SOP1_Real_gfx6_gfx7_gfx10`, `SOP1_Real_vi`, `SOP1_Real_gfx11`).
    pub(super) fn sop1(self) -> Option<[u32; 5]> {
        match self {
            Isa::Gfx6 | Isa::Gfx10 => Some([0x03, 0x04, 0x1f, 0x20, 0x21]),
            Isa::Gfx9 => Some([0x00, 0x01, 0x1c, 0x1d, 0x1e]),
            Isa::Gfx11 => Some([0x00, 0x01, 0x47, 0x48, 0x49]),
            Isa::Gfx1250 | Isa::Unknown => None,
        }
    }

    /// Whether SOP1 opcode `op` jumps to a computed address other than by `s_setpc_b64` /
    /// `s_swappc_b64`: `s_rfe_b64` (0x1f on gfx9, 0x22 on gfx6/gfx10, 0x4a on gfx11/12) and
    /// `s_cbranch_join` (0x2e on gfx8/9; assembled with llvm-mc 21).
    pub(super) fn computed_jump_sop1(self, op: u32) -> bool {
        match self {
            Isa::Gfx9 => matches!(op, 0x1f | 0x2e),
            Isa::Gfx6 => matches!(op, 0x22 | 0x32),
            Isa::Gfx10 => op == 0x22,
            Isa::Gfx11 => op == 0x4a,
            Isa::Gfx1250 | Isa::Unknown => false,
        }
    }

    /// Whether SOP2 opcode `op` is `s_cbranch_g_fork` (0x29 on gfx8/9, 0x2b on gfx6/7), a
    /// branch to a computed address.
    pub(super) fn computed_jump_sop2(self, op: u32) -> bool {
        match self {
            Isa::Gfx9 => op == 0x29,
            Isa::Gfx6 => op == 0x2b,
            _ => false,
        }
    }

    /// What SOPK opcode `op` does to control: `s_call_b64` (0x15 on gfx9, 0x16 on gfx10, 0x14 on
    /// gfx11/12), `s_cbranch_i_fork` (0x10 on gfx8/9, 0x11 on gfx6/7) and
    /// `s_subvector_loop_begin`/`_end` (0x1b/0x1c on gfx10, 0x16/0x17 on gfx11), each with a
    /// signed word offset in `simm16` like a SOPP branch (assembled with llvm-mc 21).
    pub(super) fn sopk_control(self, op: u32) -> Option<SopkControl> {
        match (self, op) {
            (Isa::Gfx9, 0x15) | (Isa::Gfx10, 0x16) | (Isa::Gfx11, 0x14) => Some(SopkControl::Call),
            (Isa::Gfx9, 0x10)
            | (Isa::Gfx6, 0x11)
            | (Isa::Gfx10, 0x1b | 0x1c)
            | (Isa::Gfx11, 0x16 | 0x17) => Some(SopkControl::Branch),
            _ => None,
        }
    }

    /// VOP3 `v_readlane_b32` / `v_writelane_b32`: (top six bits, readlane, writelane opcodes)
    /// (llvm `VOP3Instructions.td`; `110100` with 0x289/0x28a on gfx8/9, `110101` with 0x360/0x361
    /// on gfx10+). The compiler spills a callee's address held in SGPRs to VGPR lanes and reads it
    /// back before the call.
    pub(super) fn lanes(self) -> Option<(u32, u32, u32)> {
        match self {
            Isa::Gfx9 => Some((0x34, 0x289, 0x28a)),
            Isa::Gfx10 | Isa::Gfx11 => Some((0x35, 0x360, 0x361)),
            Isa::Gfx6 | Isa::Gfx1250 | Isa::Unknown => None,
        }
    }

    /// The top six bits of an SMEM instruction (`110000` on gfx8/9, `111101` on gfx10+).
    pub(super) fn smem(self) -> Option<u32> {
        match self {
            Isa::Gfx9 => Some(0x30),
            Isa::Gfx10 | Isa::Gfx11 => Some(0x3D),
            Isa::Gfx6 | Isa::Gfx1250 | Isa::Unknown => None,
        }
    }
}

/// A SOPK instruction that moves control ([`Isa::sopk_control`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SopkControl {
    /// `s_call_b64 sdst, label`: a call to a constant address.
    Call,
    /// A branch to a constant address.
    Branch,
}

/// `s_trap 2` (what `llvm.trap` lowers to on HSA: llvm `SIISelLowering.cpp`, `lowerTrapHsa`;
/// trap ID 2 is "llvm.trap" in llvm `AMDGPUUsage.rst`, "Trap Handler ABI") followed by
/// `s_endpgm`, as two little-endian words: SOPP opcodes 18 and 1 on gfx6–gfx10, 16 and 48 on
/// gfx11–gfx12 (assembled with llvm-mc 22 for gfx700, gfx803, gfx90a, gfx942, gfx950, gfx1030,
/// gfx1100, gfx1151, gfx1200, gfx1250). `None` for [`Isa::Unknown`].
pub fn trap_entry(isa: Isa) -> Option<[u32; 2]> {
    match isa {
        Isa::Gfx6 | Isa::Gfx9 | Isa::Gfx10 => Some([0xBF92_0002, 0xBF81_0000]),
        Isa::Gfx11 | Isa::Gfx1250 => Some([0xBF90_0002, 0xBFB0_0000]),
        Isa::Unknown => None,
    }
}

/// The signed word offset of a SOPP branch (`s_branch`, `s_cbranch_*`; the target is the next
/// instruction plus 4 × the offset), or `None` when `w` is not one: opcodes 2, 4–9 and 23–26 on
/// gfx6–gfx10 (`0xBF82`, `0xBF84`–`0xBF89`, `0xBF97`–`0xBF9A`), 32–42 on gfx11–gfx12
/// (`0xBFA0`–`0xBFAA`) (llvm `SOPInstructions.td`; checked with llvm-mc 22).
pub fn branch_offset(w: u32, isa: Isa) -> Option<i16> {
    let op = w >> 16;
    let ours = match isa {
        Isa::Gfx6 | Isa::Gfx9 | Isa::Gfx10 => {
            matches!(op, 0xBF82 | 0xBF84..=0xBF89 | 0xBF97..=0xBF9A)
        }
        Isa::Gfx11 | Isa::Gfx1250 => matches!(op, 0xBFA0..=0xBFAA),
        Isa::Unknown => false,
    };
    ours.then_some((w & 0xffff) as u16 as i16)
}

/// Whether `w` is `s_sendmsg` / `s_sendmsghalt` with message ID 1 (`MSG_INTERRUPT`): SOPP opcodes
/// 16/17 on gfx6–gfx10 (`0xBF90xxxx`/`0xBF91xxxx`), 54/55 on gfx11–gfx12 (`0xBFB6xxxx`/
/// `0xBFB7xxxx`); [`Isa::Unknown`] accepts both (on gfx11+ `0xBF90` is `s_trap`).
pub fn is_interrupt_msg(w: u32, isa: Isa) -> bool {
    let op = w >> 16;
    let ours = match isa {
        Isa::Gfx6 | Isa::Gfx9 | Isa::Gfx10 => matches!(op, 0xBF90 | 0xBF91),
        Isa::Gfx11 | Isa::Gfx1250 => matches!(op, 0xBFB6 | 0xBFB7),
        Isa::Unknown => matches!(op, 0xBF90 | 0xBF91 | 0xBFB6 | 0xBFB7),
    };
    ours && (w & 0xF) == 1
}

/// `s_mov_b32 m0, ttmp2` (gfx9, gfx10, gfx11/12 encodings).
const M0_FROM_TTMP2: [u32; 3] = [0xBEFC_006E, 0xBEFC_036E, 0xBEFD_006E];
/// `s_mov_b32 ttmp2, m0` (gfx9, gfx10, gfx11/12 encodings).
const TTMP2_FROM_M0: [u32; 3] = [0xBEEE_007C, 0xBEEE_037C, 0xBEEE_007D];

/// The `s_sendmsg sendmsg(MSG_INTERRUPT)` sites of one executable section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterruptSites {
    /// Addresses (section address + byte offset) of sites outside the trap sequence: hostcall
    /// wakes the host's listener this way (ROCm-Device-Libs `ockl`: `hostcall_impl.cl` signals
    /// the doorbell through `__ockl_hsa_signal_add`).
    pub host: Vec<u64>,
    /// Sites inside LLVM's gfx11 trap sequence (`SITargetLowering::lowerTrapHsa` saves `m0` in
    /// `ttmp2` before and restores it right after): not hostcall.
    pub trap: usize,
}

/// Every `s_sendmsg sendmsg(MSG_INTERRUPT)` word of `code` (an executable section loaded at
/// `addr`), at every 4-byte boundary: conservative, since no instruction lengths are decoded, so
/// a literal holding such a word counts too. A site counts as LLVM's trap sequence only when an
/// `s_trap 2` comes before the `m0` save within 16 words, the restore follows at once, and no
/// branch lands between the trap and the site (a hand-written hostcall client can save and
/// restore `m0` through `ttmp2` as well); and only when the word before that `s_trap 2` has no
/// source field of 255, so that the trap is no literal of the instruction before it (a false
/// refusal at worst: an `s_trap 2` after such an instruction loses the exemption).
pub fn interrupt_sites(code: &[u8], addr: u64, isa: Isa) -> InterruptSites {
    let n = code.len() / 4;
    let mut out = InterruptSites::default();
    let traps: &[u32] = match trap_entry(isa) {
        Some(t) => &[t[0]][..],
        None => &[0xBF90_0002, 0xBF92_0002][..],
    };
    // Word indices SOPP branches land on (word by word: a literal may count too, which only
    // takes a sequence's exemption away).
    let mut landings: Vec<usize> = (0..n)
        .filter_map(|k| {
            let off = branch_offset(word(code, k), isa)?;
            usize::try_from(k as i64 + 1 + i64::from(off)).ok()
        })
        .collect();
    landings.sort_unstable();
    for i in 0..n {
        if !is_interrupt_msg(word(code, i), isa) {
            continue;
        }
        // LLVM's sequence: `s_trap 2`, then m0 saved in ttmp2, the doorbell, m0 restored right
        // after; nothing branches into it past the trap (else code could skip the trap).
        let next_restores = i + 1 < n && M0_FROM_TTMP2.contains(&word(code, i + 1));
        let from = i.saturating_sub(16);
        let save = (from..i)
            .rev()
            .find(|&j| TTMP2_FROM_M0.contains(&word(code, j)));
        // The trap word must be an instruction, not the literal that ends the one before it:
        // a word before it with a source field of 255 (a literal follows: SOP1, SOP2, SOPC, VOP1,
        // VOP2, VOPC, or the second word of VOP3 or VOPD) takes the exemption away.
        let literal_before = |t: usize| {
            t > 0 && {
                let w = word(code, t - 1);
                [
                    w & 0xff,
                    (w >> 8) & 0xff,
                    w & 0x1ff,
                    (w >> 9) & 0x1ff,
                    (w >> 18) & 0x1ff,
                ]
                .contains(&255)
            }
        };
        let trap = save.and_then(|j| {
            (from..j)
                .rev()
                .find(|&t| traps.contains(&word(code, t)) && !literal_before(t))
        });
        let entered = trap.is_some_and(|t| {
            let k = landings.partition_point(|&l| l <= t);
            landings.get(k).is_some_and(|&l| l <= i)
        });
        if next_restores && trap.is_some() && !entered {
            out.trap += 1;
        } else {
            out.host.push(addr + (i * 4) as u64);
        }
    }
    out
}

pub(super) fn word(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap())
}
