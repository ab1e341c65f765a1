"""Generate src/scan/callgraph/salu_table.rs: what every SOP1, SOP2, SOPC, SOPK and SOPP opcode
does to the state a register number does not name (SCC, the hardware registers, exec, a branch's
condition), per generation, from the mnemonic llvm-mc 21 disassembles it to.

Run `python3 xtask/salu_table.py src/scan/callgraph/salu_table.rs` on a machine with the
debian-sid toolchain (`rcclfix toolchain build debian-sid`). Which mnemonics read or set SCC
follows llvm's `SOPInstructions.td` (`Uses = [SCC]`, `Defs = [SCC]`); an opcode llvm decodes to a
mnemonic not classified below is taken to do anything (read SCC, maybe set it, maybe write exec,
and have an effect beyond its registers), and one llvm does not decode likewise.
"""
import os
import re
import subprocess
import sys

R = os.path.expanduser('~/.cache/rcclfix/toolchains/debian-sid/rootfs')
GENS = {'G9': ['gfx803', 'gfx900', 'gfx90a', 'gfx942', 'gfx950'], 'G10': ['gfx1010', 'gfx1030'],
        'G11': ['gfx1100', 'gfx1151'], 'G12': ['gfx1200', 'gfx1201']}
NOP7, NOP6 = 0xBF800007, 0xBF800006

KNOWN, READ_SCC, SET_SCC, MAY_SCC, EFFECT, FLOAT, EXEC_W, GETREG = 1, 2, 4, 8, 16, 32, 64, 128
# SOPP: the state a conditional branch reads.
C_SCC, C_VCC, C_EXEC, C_BRANCH = 1, 2, 4, 8

READS_SCC = re.compile(r'^s_(addc|subb|add_co_ci|sub_co_ci|cselect|cmov|cmovk)_')
SETS_SCC = [re.compile(p) for p in [
    r'^s_(cmp|cmpk|bitcmp[01])_',
    r'^s_(add|sub)_(u32|i32|co_u32|co_i32)$', r'^s_(addc|subb)_u32$', r'^s_(add|sub)_co_ci_u32$',
    r'^s_(min|max)_(i32|u32)$',
    r'^s_(and|or|xor|andn2|orn2|nand|nor|xnor|and_not1|or_not1)_b(32|64)$',
    r'^s_(lshl|lshr|ashr)_(b32|b64|i32|i64)$', r'^s_bfe_(u32|i32|u64|i64)$', r'^s_absdiff_i32$',
    r'^s_lshl[1-4]_add_u32$',
    r'^s_(not|wqm)_b(32|64)$', r'^s_bcnt[01]_i32_b(32|64)$', r'^s_quadmask_b(32|64)$',
    r'^s_abs_i32$', r'^s_\w+_(saveexec|wrexec)_b(32|64)$', r'^s_addk_(i32|co_i32)$',
]]
NO_SCC = [re.compile(p) for p in [
    r'^s_(mov|cmov)_b(32|64)$', r'^s_(movk|cmovk|mulk)_i32$', r'^s_brev_b(32|64)$',
    r'^s_(ff0|ff1)_i32_b(32|64)$', r'^s_flbit_i32(_b32|_b64|_i64)?$',
    r'^s_(ctz|clz|cls)_i32(_u32|_i32|_u64|_i64|_b32|_b64)?$', r'^s_sext_i32_i(8|16)$',
    r'^s_bitset[01]_b(32|64)$', r'^s_bitreplicate_b64_b32$', r'^s_mul_(i32|hi_u32|hi_i32|u64)$',
    r'^s_bfm_b(32|64)$', r'^s_pack_(ll|lh|hl|hh)_b32_b16$', r'^s_cselect_b(32|64)$',
    r'^s_getpc_b64$', r'^s_(add|sub)_nc_u64$', r'^s_getreg_b32$',
]]
# Known to act beyond their registers, and to read no SCC (llvm `SOPInstructions.td`); some set
# it (`s_barrier_signal_isfirst`, `s_alloc_vgpr`): they may.
EFFECTS = re.compile(r'^s_(setreg_b32|setreg_imm32_b32|sleep_var|waitcnt_\w+|version|sendmsg_rtn_b(32|64)|'
                     r'get_barrier_state|barrier_signal(_isfirst)?|alloc_vgpr|set_gpr_idx_(on|idx)|'
                     r'movrel\w*|rfe_b64|rfe_restore_b64|setpc_b64|swappc_b64|call_b64|'
                     r'subvector_loop_\w+|cbranch_\w+|setvskip)$')
FLOATS = re.compile(r'_f(16|32)\b|^s_cvt_|_f(16|32)_')


def words(ws):
    return ','.join('0x%02x' % b for w in ws for b in w.to_bytes(4, 'little'))


def mnemonics(mcpu, insts):
    """The text of each one-word instruction (None where llvm-mc decodes none)."""
    lines = []
    for w in insts:
        lines.append(words([w, NOP7, NOP6]))
    p = subprocess.run(['bwrap', '--ro-bind', R, '/', '--dev', '/dev', '--proc', '/proc',
                        '--tmpfs', '/tmp', 'llvm-mc-21', '-arch=amdgcn', '-mcpu=' + mcpu,
                        '--disassemble'], input='\n'.join(lines) + '\n', capture_output=True,
                       text=True)
    out = [l.strip() for l in p.stdout.splitlines()
           if l.strip() and not l.strip().startswith('.')]
    res, cur = [], []
    for l in out:
        if l == 's_nop 6':
            first = cur[0] if cur else 's_nop 7'
            res.append(None if first == 's_nop 7' else first)
            cur = []
        else:
            cur.append(l)
    if len(res) != len(insts):
        raise SystemExit('%s: %d results for %d probes' % (mcpu, len(res), len(insts)))
    return res


def salu_flags(mn, fmt):
    if mn is None:
        return READ_SCC | MAY_SCC | EFFECT | EXEC_W
    f = KNOWN
    if READS_SCC.match(mn):
        f |= READ_SCC
    if FLOATS.search(mn):
        f |= FLOAT
    if any(p.match(mn) for p in SETS_SCC):
        f |= SET_SCC
    elif any(p.match(mn) for p in NO_SCC) or (f & FLOAT):
        pass
    elif EFFECTS.match(mn):
        return f | MAY_SCC | EFFECT
    else:
        return f | READ_SCC | MAY_SCC | EFFECT | EXEC_W
    if re.search(r'(saveexec|wrexec)', mn):
        f |= EXEC_W
    if mn == 's_getreg_b32':
        f |= GETREG
    return f


W_S0, W_S1, W_D, NO_S0, NO_S1, NO_D, RD_D = 1, 2, 4, 8, 16, 32, 64


def reads_dst(mn, fmt):
    """Whether a SOP1 or SOPK opcode reads its destination field as well (`s_bitset*`, `s_cmov*`
    keep bits of it; SOPK compares and adds read it): all but the known pure writers."""
    if fmt == 'SOP1':
        return not any(p.match(mn) for p in SETS_SCC + NO_SCC) or bool(
            re.match(r'^s_(bitset[01]|cmov)_', mn))
    if fmt == 'SOPK':
        return not re.match(r'^s_(movk_i32|getreg_b32|call_b64|version)$', mn)
    return False


def width(text, base):
    if re.search(r'(?<![\w:])s\[%d:(\d+)\]' % base, text):
        return 2
    if re.search(r'(?<![\w:])s%d(?![\d\w])' % base, text):
        return 1
    return 0


def widths(line, fmt):
    """Which operands are 64-bit (register pairs) in the disassembly of a probe whose dst is
    s10, src0 s20 and src1 s30 (all of them where llvm decodes none)."""
    if line is None:
        return W_S0 | W_S1 | W_D
    ops = line.partition(' ')[2]
    w = 0
    for base, wide, none in [(20, W_S0, NO_S0), (30, W_S1, NO_S1), (10, W_D, NO_D)]:
        n = width(ops, base)
        w |= wide if n == 2 else none if n == 0 else 0
    return w


def sopp_flags(mn):
    if mn is None or not mn.startswith('s_cbranch'):
        return 0
    if mn.startswith('s_cbranch_scc'):
        return C_BRANCH | C_SCC
    if mn.startswith('s_cbranch_vcc'):
        return C_BRANCH | C_VCC
    if mn.startswith('s_cbranch_exec'):
        return C_BRANCH | C_EXEC
    if mn.startswith('s_cbranch_cdbg'):
        return C_BRANCH
    return C_BRANCH | C_SCC | C_VCC | C_EXEC


def probes(fmt):
    d, a, b = 10, 20, 30
    if fmt == 'SOP1':
        return [0xBE800000 | (d << 16) | (op << 8) | a for op in range(256)]
    if fmt == 'SOP2':
        return [(2 << 30) | (op << 23) | (d << 16) | (b << 8) | a for op in range(128)]
    if fmt == 'SOPC':
        return [0xBF000000 | (op << 16) | (b << 8) | a for op in range(128)]
    if fmt == 'SOPK':
        return [0xB0000000 | (op << 23) | (d << 16) | 4 for op in range(32)]
    return [0xBF800000 | (op << 16) | 4 for op in range(128)]


def combine(fs):
    """One opcode's flags over the processors of a generation that decode it: any reading or
    effect counts, SCC certainly set only where every one of them sets it."""
    known = [f for f in fs if f & KNOWN]
    if not known:
        return fs[0]
    out = 0
    for f in known:
        out |= f & ~SET_SCC
    if all(f & SET_SCC for f in known):
        out |= SET_SCC
    elif any(f & SET_SCC for f in known):
        out |= MAY_SCC
    # Decoded on some processors only: on the others it is no instruction (llvm's decoder follows
    # the processor's features), so what the ones that decode it say holds where it runs.
    return out


def main():
    out = ['//! What each SALU opcode does to state no register number names, per generation, as llvm-mc 21',
           '//! disassembles it (`python3 xtask/salu_table.py src/scan/callgraph/salu_table.rs` with the',
           '//! debian-sid toolchain; do not edit). SOP1/SOP2/SOPC/SOPK: bit 0 llvm decodes it, [`READ_SCC`],',
           '//! [`SET_SCC`] (always sets it), [`MAY_SCC`], [`EFFECT`] (does more than write its registers),',
           '//! [`FLOAT`] (may set exception bits), [`EXEC_W`] (may write exec), [`GETREG`]. SOPP: [`C_BRANCH`]',
           '//! and the condition it reads ([`C_SCC`], [`C_VCC`], [`C_EXEC`]). `WIDTH_*`: which operands are',
           '//! register pairs ([`W_S0`], [`W_S1`], [`W_D`]; all of them where llvm decodes none) or not',
           '//! registers at all ([`NO_S0`], [`NO_S1`], [`NO_D`]: a constant, or a field the opcode ignores);',
           '//! [`RD_D`]: a SOP1 or SOPK opcode reads its destination too.',
           '']
    for name, val in [('READ_SCC', READ_SCC), ('SET_SCC', SET_SCC),
                      ('MAY_SCC', MAY_SCC), ('EFFECT', EFFECT), ('FLOAT', FLOAT),
                      ('EXEC_W', EXEC_W), ('GETREG', GETREG), ('C_SCC', C_SCC),
                      ('C_VCC', C_VCC), ('C_EXEC', C_EXEC), ('C_BRANCH', C_BRANCH),
                      ('W_S0', W_S0), ('W_S1', W_S1), ('W_D', W_D),
                      ('NO_S0', NO_S0), ('NO_S1', NO_S1), ('NO_D', NO_D), ('RD_D', RD_D)]:
        out.append('pub(super) const %s: u8 = %d;' % (name, val))
    for gen, cpus in GENS.items():
        for fmt in ['SOP1', 'SOP2', 'SOPC', 'SOPK', 'SOPP']:
            ps = probes(fmt)
            per = [mnemonics(c, ps) for c in cpus]
            table, wtable = [], []
            for op in range(len(ps)):
                mns = [m[op] and m[op].split()[0] for m in per]
                if fmt == 'SOPP':
                    fs = [sopp_flags(mn) for mn in mns]
                    table.append(max(fs))
                else:
                    table.append(combine([salu_flags(mn, fmt) for mn in mns]))
                    known = [m[op] for m in per if m[op]]
                    # Wider or present anywhere wins; absent only where absent everywhere.
                    ws = [widths(line, fmt) for line in known or [None]]
                    w = 0
                    for x in ws:
                        w |= x & (W_S0 | W_S1 | W_D)
                    for bit in (NO_S0, NO_S1, NO_D):
                        if all(x & bit for x in ws):
                            w |= bit
                    if not known or any(reads_dst(mn, fmt) for mn in mns if mn):
                        w |= RD_D
                    wtable.append(w)
                names = sorted({mn for mn in mns if mn})
                if names and fmt != 'SOPP':
                    print(gen, fmt, hex(op), ','.join(names), hex(table[-1]), file=sys.stderr)
                elif fmt == 'SOPP' and table[-1]:
                    print(gen, fmt, hex(op), ','.join(names), hex(table[-1]), file=sys.stderr)
            out.append('pub(super) static %s_%s: [u8; %d] = [' % (fmt, gen, len(table)))
            for i in range(0, len(table), 16):
                out.append('    ' + ', '.join('0x%02x' % x for x in table[i:i + 16]) + ',')
            out.append('];')
            if fmt != 'SOPP':
                out.append('pub(super) static WIDTH_%s_%s: [u8; %d] = [' % (fmt, gen, len(wtable)))
                for i in range(0, len(wtable), 16):
                    out.append('    ' + ', '.join('%d' % x for x in wtable[i:i + 16]) + ',')
                out.append('];')
    open(sys.argv[1], 'w').write('\n'.join(out) + '\n')


main()
