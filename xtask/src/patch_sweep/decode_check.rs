//! The decoder check of `patch-sweep`: `rcclfix decode` (the instruction decoder that `patch`'s
//! kernarg-pointer flow rests on) against `llvm-objdump -d` of the same code object, instruction
//! by instruction: the same start addresses and lengths, a control-flow class that matches the
//! mnemonic, and every register llvm names among those rcclfix says the instruction may read or
//! write (rcclfix may name more: it over-approximates). Shared by the xtask and
//! `tests/it/patch_sweep.rs` (compiled by path); `std` only.

use std::collections::{BTreeMap, BTreeSet};

/// What the comparison found.
#[derive(Debug, Default)]
pub struct DecodeCheck {
    /// Instructions llvm decoded and rcclfix compared.
    pub compared: usize,
    /// Words llvm did not decode (`<unknown>`, `.long`), not compared.
    pub skipped: usize,
    /// One line per disagreement.
    pub disagreements: Vec<String>,
}

/// One line of `rcclfix decode`: (words, op, register names).
type Ours = (usize, String, BTreeSet<String>);

fn ours(listing: &str) -> BTreeMap<u64, Ours> {
    let mut m = BTreeMap::new();
    for l in listing.lines() {
        let mut it = l.split(' ');
        let (Some(a), Some(w), Some(op)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let (Ok(a), Ok(w)) = (u64::from_str_radix(a, 16), w.parse()) else {
            continue;
        };
        let regs = it
            .next()
            .unwrap_or("")
            .split(',')
            .filter(|r| !r.is_empty())
            .map(String::from)
            .collect();
        m.insert(a, (w, op.to_string(), regs));
    }
    m
}

/// The registers an llvm operand list names, in `rcclfix decode`'s names (`vcc` as `vcc_lo` and
/// `vcc_hi`, `a5` as `v5`, `s[4:5]` as `s4` and `s5`, `flat_scratch` as `s102`, `s103`, the
/// `src_scc` operand as `scc`, `src_vccz`/`src_execz` as the register they test).
pub fn llvm_registers(operands: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = operands.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if !word(b[i]) || (i > 0 && (word(b[i - 1]) || b[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && word(b[i]) {
            i += 1;
        }
        let tok = &operands[start..i];
        let named: &[&str] = match tok {
            "vcc" => &["vcc_lo", "vcc_hi"],
            "exec" => &["exec_lo", "exec_hi"],
            "vcc_lo" | "vcc_hi" | "exec_lo" | "exec_hi" | "m0" => {
                out.insert(tok.to_string());
                continue;
            }
            "src_scc" => &["scc"],
            "src_vccz" => &["vcc_lo", "vcc_hi"],
            "src_execz" => &["exec_lo", "exec_hi"],
            "src_lds_direct" | "lds_direct" => &["m0"],
            "flat_scratch" => &["s102", "s103"],
            "flat_scratch_lo" => &["s102"],
            "flat_scratch_hi" => &["s103"],
            "xnack_mask" => &["s104", "s105"],
            _ => &[],
        };
        if !named.is_empty() {
            out.extend(named.iter().map(|s| s.to_string()));
            continue;
        }
        let (prefix, rest) = if let Some(r) = tok.strip_prefix("ttmp") {
            ("ttmp", r)
        } else if let Some(r) = tok.strip_prefix(['s', 'v', 'a']) {
            (&tok[..1], r)
        } else {
            continue;
        };
        let prefix = if prefix == "a" { "v" } else { prefix };
        if !rest.is_empty() && rest.bytes().all(|c| c.is_ascii_digit()) {
            out.insert(format!("{prefix}{rest}"));
        } else if rest.is_empty() && i < b.len() && b[i] == b'[' {
            let close = operands[i..].find(']').map(|k| i + k);
            if let Some(close) = close {
                if let Some((lo, hi)) = operands[i + 1..close].split_once(':') {
                    if let (Ok(lo), Ok(hi)) = (lo.parse::<u32>(), hi.parse::<u32>()) {
                        for r in lo..=hi.min(lo + 32) {
                            out.insert(format!("{prefix}{r}"));
                        }
                    }
                }
                i = close + 1;
            }
        }
    }
    out
}

/// The control class a mnemonic implies (`None`: no claim).
fn expected_class(m: &str) -> Option<&'static [&'static str]> {
    Some(match m {
        "s_branch" => &["Branch"],
        "s_endpgm" => &["End"],
        "s_setpc_b64" => &["Return", "Jump"],
        "s_swappc_b64" | "s_call_b64" => &["Call"],
        "s_rfe_b64" | "s_cbranch_join" | "s_cbranch_g_fork" | "s_cbranch_i_fork" => &["Fork"],
        _ if m.starts_with("s_cbranch_") => &["CBranch"],
        _ if m.starts_with("s_load_") || m.starts_with("s_buffer_load_") => &["SLoad"],
        _ => return None,
    })
}

/// Compare `objdump` (`llvm-objdump -d` of one code object) with `listing` (`rcclfix decode` of
/// the same file); `what` names the file in the disagreements.
pub fn compare(objdump: &str, listing: &str, what: &str) -> DecodeCheck {
    let ours = ours(listing);
    let mut c = DecodeCheck::default();
    for l in objdump.lines() {
        let Some((text, comment)) = l.split_once("// ") else {
            continue;
        };
        let Some((addr, hex)) = comment.split_once(": ") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else {
            continue;
        };
        let words = hex
            .split_whitespace()
            .take_while(|w| w.len() == 8 && w.bytes().all(|c| c.is_ascii_hexdigit()))
            .count();
        let text = text.trim();
        let (mnemonic, operands) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        if mnemonic.is_empty() || mnemonic.starts_with('.') || text.contains("<unknown>") {
            c.skipped += words.max(1);
            continue;
        }
        c.compared += 1;
        let Some((w, op, regs)) = ours.get(&addr) else {
            c.disagreements.push(format!(
                "{what} 0x{addr:x} `{text}`: rcclfix has no instruction starting here"
            ));
            continue;
        };
        if *w != words {
            c.disagreements.push(format!(
                "{what} 0x{addr:x} `{text}`: {words} word(s), rcclfix says {w}"
            ));
            continue;
        }
        if op == "Unknown" {
            c.disagreements.push(format!(
                "{what} 0x{addr:x} `{text}`: rcclfix does not decode it"
            ));
            continue;
        }
        if let Some(ok) = expected_class(mnemonic) {
            if !ok.contains(&op.as_str()) {
                c.disagreements.push(format!(
                    "{what} 0x{addr:x} `{text}`: rcclfix classes it {op}, not {}",
                    ok.join("/")
                ));
            }
        }
        if op == "Opaque" {
            continue;
        }
        let missing: Vec<String> = llvm_registers(operands).difference(regs).cloned().collect();
        if !missing.is_empty() {
            c.disagreements.push(format!(
                "{what} 0x{addr:x} `{text}`: rcclfix omits {}",
                missing.join(", ")
            ));
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_in_llvm_operands() {
        let r = llvm_registers(
            "s[4:5], v[0:1], vcc, a3, v2.l, ttmp[2:3], hwreg(HW_REG_MODE) offset:16 s_nop",
        );
        let want = [
            "s4", "s5", "v0", "v1", "vcc_lo", "vcc_hi", "v3", "v2", "ttmp2", "ttmp3",
        ];
        assert_eq!(r, want.iter().map(|s| s.to_string()).collect());
    }

    #[test]
    fn state_read_as_an_operand() {
        let r = llvm_registers("v1, src_scc, src_execz");
        let want = ["v1", "scc", "exec_lo", "exec_hi"];
        assert_eq!(r, want.iter().map(|s| s.to_string()).collect());
    }
}
