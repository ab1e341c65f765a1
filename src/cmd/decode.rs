//! `rcclfix decode CODEOBJ` (hidden): every instruction of a code object's executable sections,
//! read in address order as the decoder that `patch`'s kernarg-pointer flow uses reads it
//! ([`crate::scan::callgraph::decode`]), one line each:
//! `ADDRESS WORDS OP REGISTER…` (the registers it may read or write, in llvm's names). The
//! patch sweep (`cargo xtask patch-sweep`, `tests/it/patch_sweep.rs`) compares it with
//! `llvm-objdump -d` of the same file.

use std::path::PathBuf;
use std::process::ExitCode;

use object::read::elf::{FileHeader, SectionHeader};

use crate::scan::callgraph::{decode, Gen, Isa};
use crate::ui::Ui;

/// The subcommand's arguments: one raw code object (an AMDGPU ELF).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The code object to read.
    pub code_object: PathBuf,
}

/// Print the listing.
///
/// Errors: the file cannot be read, or is no code object of a generation the decoder reads
/// (`main` prints it and exits 2).
pub fn run(a: Args, _ui: &Ui) -> anyhow::Result<ExitCode> {
    let text = listing(&a)
        .map_err(|e| anyhow::anyhow!("{}: {e}", crate::ui::escape_path(&a.code_object)))?;
    crate::ui::write_stdout(format_args!("{text}"))?;
    Ok(ExitCode::SUCCESS)
}

/// The scalar-operand-space name of register `r` (llvm `SIRegisterInfo.td`), for generation `g`.
fn name(g: Gen, r: u16) -> String {
    match r {
        0..=105 => format!("s{r}"),
        106 => "vcc_lo".into(),
        107 => "vcc_hi".into(),
        108..=123 => format!("ttmp{}", r - 108),
        124 if g.m0() == 124 => "m0".into(),
        124 => "null".into(),
        125 if g.m0() == 125 => "m0".into(),
        126 => "exec_lo".into(),
        127 => "exec_hi".into(),
        250 => "runtime".into(),
        253 => "scc".into(),
        254 => "hwreg".into(),
        r if r >= 256 => format!("v{}", r - 256),
        r => format!("r{r}"),
    }
}

fn listing(a: &Args) -> Result<String, String> {
    let data = crate::fsutil::read_capped(&a.code_object, 1 << 30, "code object")
        .map_err(|e| format!("{e:#}"))?;
    let e = object::LittleEndian;
    let hdr = object::elf::FileHeader64::<object::LittleEndian>::parse(&*data)
        .map_err(|err| format!("not a 64-bit ELF: {err}"))?;
    let mach = hdr.e_flags(e) & 0xff;
    let gfx12 = crate::scan::amdgpu::mach_name(mach).is_some_and(|n| n.starts_with("gfx12"));
    let g = Gen::of(Isa::from_e_flags(hdr.e_flags(e)), gfx12)
        .ok_or_else(|| format!("EF_AMDGPU_MACH 0x{mach:x} is not decoded whole by this rcclfix"))?;
    let sections = hdr.sections(e, &*data).map_err(|err| err.to_string())?;
    let mut out = String::new();
    for s in sections.iter() {
        if s.sh_flags(e) & u64::from(object::elf::SHF_EXECINSTR) == 0
            || s.sh_type(e) == object::elf::SHT_NOBITS
        {
            continue;
        }
        let bytes = s.data(e, &*data).map_err(|err| err.to_string())?;
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
            .collect();
        let mut i = 0;
        while i < words.len() {
            let inst = decode(g, &words, i);
            let mut regs: Vec<u16> = inst
                .reads
                .iter()
                .chain(&inst.writes)
                .flat_map(|&(r, n)| r..r.saturating_add(n))
                .collect();
            regs.sort_unstable();
            regs.dedup();
            let op = format!("{:?}", inst.op);
            let op = op
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or("");
            out.push_str(&format!(
                "{:x} {} {op} {}\n",
                s.sh_addr(e) + 4 * i as u64,
                inst.words,
                regs.iter()
                    .map(|&r| name(g, r))
                    .collect::<Vec<_>>()
                    .join(",")
            ));
            i += inst.words.max(1);
        }
    }
    Ok(out)
}
