//! The false proofs of `patch` and `patch --asserts` found by a hostile review, one row each,
//! compiled at test time by the real HIP toolchain from our own sources in
//! `tests/fixtures/patch/findings/` (`debian-sid`'s hipcc for gfx1100, `debian-rocm7.2`'s for
//! gfx1250), into raw code objects. Each row failed on the analysis before it (a written patch)
//! and says here what the sound one does: refuse, or patch with every byte it writes accounted
//! for. `llvm-objdump` from the same toolchain is the independent reader of what was written.
//!
//! Slow: needs `RCCLFIX_SLOW_TESTS=1` and the toolchains (`cargo xtask test` builds them).

use std::path::Path;

use rcclfix::patch::{patch_bytes, PatchOptions, PatchRecord, PatchRefused, RefusalKind};

use crate::patch_soundness_build::{
    compile, Sources, F14, F14_ASSERTS, F16, F17, F17_ASSERTS, F18, F19, F19_CONTROLS, F20,
    F20_CONTROLS, F21, F23, F24, F25,
};

fn opts(asserts: bool) -> PatchOptions {
    PatchOptions {
        targets: vec![],
        asserts,
    }
}

/// As [`refused_saying_one_of`], on the targets `archs`.
fn refused_on(dir: &Path, prefix: &str, name: &str, archs: &[&str], says: &[&str]) {
    for a in archs {
        for (co, asserts) in [
            (format!("{prefix}_{name}-{a}.co"), true),
            (format!("{prefix}p_{name}-{a}.co"), false),
            (format!("{prefix}p_{name}-{a}.co"), true),
        ] {
            let r = refused(dir, &co, asserts);
            assert!(
                says.iter().any(|s| r.to_string().contains(s)),
                "{co} (asserts: {asserts}): {r}"
            );
        }
    }
}

/// [`refused_on`] for each source of `sources` on its targets.
fn all_refused_on(dir: &Path, prefix: &str, sources: Sources, says: &[&str]) {
    for &(n, archs) in sources {
        refused_on(dir, prefix, n, archs, says);
    }
}

/// The assert variants `<prefix>_<name>-<arch>.co` of `sources` under `patch --asserts`, each
/// refused where the flow loses the value or the call target: a read of a kernarg-derived
/// address (`execret`, `exechi`) or a call through `s[40:41]` (`tailid`, `tailmv`).
fn refused_asserts_on(dir: &Path, prefix: &str, sources: Sources) {
    for &(n, archs) in sources {
        let says = match n {
            "execret" | "exechi" => {
                "a value derived from the kernarg segment pointer addresses memory"
            }
            "tailid" | "tailmv" => "control goes to s[40:41]",
            other => panic!("{other}: no refusal message listed"),
        };
        for a in archs {
            let r = refused(dir, &format!("{prefix}_{n}-{a}.co"), true);
            assert!(r.to_string().contains(says), "{n} {a}: {r}");
        }
    }
}

/// The controls `<prefix>_<name>-<arch>.co` and `<prefix>p_…` of `sources` (a review's source
/// with the wait its channel needs): patched in both modes, but plain `patch` of the assert
/// variant, which `__assert_fail`'s printf refuses.
fn controls_patch(dir: &Path, prefix: &str, sources: Sources) {
    for &(n, archs) in sources {
        for a in archs {
            for (co, plain_too) in [
                (format!("{prefix}_{n}-{a}.co"), false),
                (format!("{prefix}p_{n}-{a}.co"), true),
            ] {
                let data = std::fs::read(dir.join(&co)).unwrap();
                patch_bytes(&co, &data, &opts(true)).unwrap_or_else(|e| panic!("{co}: {e}"));
                if plain_too {
                    patch_bytes(&co, &data, &opts(false))
                        .unwrap_or_else(|e| panic!("{co} (plain): {e}"));
                }
            }
        }
    }
}

fn refused(dir: &Path, co: &str, asserts: bool) -> PatchRefused {
    let data = std::fs::read(dir.join(co)).unwrap();
    match patch_bytes(co, &data, &opts(asserts)) {
        Ok((_, rec)) => panic!(
            "{co} (asserts: {asserts}): patched {} kernel(s), a false proof",
            rec.images.iter().map(|i| i.kernels.len()).sum::<usize>()
        ),
        Err(r) => r,
    }
}

/// A review row on gfx1100 and gfx90a: `<prefix>_<name>-<arch>.co` (the assert variant) under
/// `patch --asserts`, `<prefix>p_<name>-<arch>.co` (the table-call variant) under plain `patch`
/// and `patch --asserts`, each refused with a message that contains `says`.
fn refused_saying(dir: &Path, prefix: &str, name: &str, says: &str) {
    refused_saying_one_of(dir, prefix, name, &[says]);
}

/// As [`refused_saying`], the refusal naming any one of `says`.
fn refused_saying_one_of(dir: &Path, prefix: &str, name: &str, says: &[&str]) {
    refused_on(dir, prefix, name, &["gfx1100", "gfx90a"], says);
}

fn patched(dir: &Path, co: &str) -> (Vec<u8>, PatchRecord) {
    let data = std::fs::read(dir.join(co)).unwrap();
    patch_bytes(co, &data, &opts(true)).unwrap_or_else(|e| panic!("{co}: {e}"))
}

/// Every row, on one compile of the sources (the toolchain calls dominate the time).
#[test]
fn slow_findings_of_the_hostile_review() {
    if !crate::support::slow_or_note() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    compile(d);

    // 1. An indirect call reaches every address-taken function, not only the kernel's own table:
    // a virtual call through an object another kernel built, and a function pointer the host
    // read from a `__device__` variable.
    for (co, printer) in [
        ("virtual_other_kernel-O3.co", "_ZN4Loud1fEi"),
        ("fnptr_from_host-O3.co", "_Z4loudi"),
    ] {
        let r = refused(d, co, true);
        assert_eq!(r.refusal.kind, RefusalKind::UsesHostcall, "{co}: {r}");
        let msg = r.to_string();
        assert!(
            msg.contains(&format!("[address-taken] {printer}")),
            "{co}: {msg}"
        );
    }

    // 2. A handler is chosen by its code, not its name: the program's own `_wassert`, which
    // stores and returns, keeps its bytes; only `__assert_fail` and the printf code no kernel
    // reaches are rewritten.
    let (out, rec) = patched(d, "wassert_user-O3.co");
    let img = &rec.images[0];
    assert!(
        img.instructions
            .iter()
            .all(|i| i.symbol == "__assert_fail" || i.symbol.starts_with("__ockl_")),
        "{:?}",
        img.instructions
    );
    let dis = objdump(d, &out, "sid", "_wassert");
    assert!(
        dis.contains("s_setpc_b64 s[30:31]") && !dis.contains("s_trap"),
        "{dis}"
    );

    // 3. An address computed past the handler's entry: where control goes must be a function's
    // start on every path (`flow_marks.rs`; before the flow, the fill of the handler's whole
    // extent made it trap; both hold now, the refusal comes first).
    let r = refused(d, "computed_handler-O3.co", true);
    assert!(r.to_string().contains("control goes to s["), "{r}");

    // 4. A kernel that reads its hostcall slot and calls nothing: the declaration is explained
    // by nothing in the call graph, so neither patch proves it (before: both did).
    for (co, asserts) in [
        ("slot_reader-O3.co", false),
        ("slot_reader-O3.co", true),
        ("slot_reader-O0.co", true),
    ] {
        let r = refused(d, co, asserts);
        assert_eq!(r.refusal.kind, RefusalKind::Unproven, "{co}: {r}");
        assert!(r.to_string().contains("hostcall slot"), "{co}: {r}");
    }

    // 4b. The same read in a function a table reaches, from a kernel whose attributor gave up:
    // the indirect call explains the declaration, and the load at the implicit-argument slot
    // is what refuses (before: patched).
    for asserts in [false, true] {
        let r = refused(d, "slot_behind_table-O3.co", asserts);
        assert_eq!(r.refusal.kind, RefusalKind::Unproven, "{r}");
        assert!(
            r.to_string()
                .contains("may read its hostcall slot: _Z4peeki loads"),
            "{r}"
        );
    }

    // 4c. The second review: a slot read beside an assert path (the path explained the
    // declaration; before: `--asserts` patched), in the kernel, in a callee, as code object v4,
    // next to an interrupt dressed as LLVM's trap sequence; and behind a function pointer.
    for co in [
        "r2_assert_slot.co",
        "r2_assert_callee_slot.co",
        "r2_assert_slot_v4.co",
        "r2_assert_slot_signal.co",
        "r2_fnptr_slot.co",
        "r2_fnptr_target_slot.co",
        "assert_volatile_slot-O3.co",
    ] {
        let r = refused(d, co, true);
        assert!(
            r.to_string().contains("may read its hostcall slot"),
            "{co}: {r}"
        );
    }

    // 4d. The third review: a hand-written doorbell (`s_sendmsg MSG_INTERRUPT` between a
    // ttmp2 save and restore) after an `s_trap 2` word that is only a literal: it signals the
    // host (before: exempt as LLVM's trap sequence, and patched).
    let r = refused(d, "r2_trap_literal.co", true);
    assert_eq!(r.refusal.kind, RefusalKind::UsesHostcall, "{r}");
    assert!(r.to_string().contains("MSG_INTERRUPT"), "{r}");

    // 4e. The third review's slot reads (before: proven) and the second's that needed a
    // decoder: the kernarg segment pointer copied to other SGPRs across a call, selected,
    // folded into the base, sent through LDS, into a buffer resource, found again through the
    // dispatch packet, read by a volatile FLAT load in a callee or a table target; a loop over
    // the implicit arguments; a single-kernel -O0 image. Refused in both modes, by the flow.
    for co in [
        "r2_callee_after_call.co",
        "r2_select_ptr.co",
        "r2_lds_trip.co",
        "r2_fnptr_lds.co",
        "r2_buffer_slot.co",
        "r2_dispatch_ptr.co",
        "r2_callee_volatile.co",
        "r2_fnptr_volatile.co",
        "r2_assert_dump_implicit.co",
        "r0_fnptr_slot_o0.co",
    ] {
        for asserts in [false, true] {
            let r = refused(d, co, asserts);
            assert!(
                r.to_string().contains("hostcall")
                    || r.to_string().contains("kernarg segment pointer"),
                "{co} (asserts: {asserts}): {r}"
            );
        }
    }
    // 4f. The fourth review (inline asm against the flow): a no-op or conditional SALU write
    // (`s_bitset0`, `s_cmov`, `s_or_saveexec`), a VALU write with no lane enabled (exec off,
    // DPP masks), `v_swap`'s second write, AGPRs aliasing VGPRs, and a call the call graph did
    // not see; each with an assert (`r4_`) and with a table call for plain `patch` (`r4p_`);
    // gfx1100 -O3, `agpr` gfx90a -O3.
    for n in [
        "agpr",
        "bitset",
        "bitset2",
        "dpp",
        "execmask",
        "hidden_plain",
        "saveexec",
        "scmov",
        "vswap",
        "kernel_object",
        "ret_offset",
    ] {
        for (co, asserts) in [
            (format!("r4_{n}.co"), true),
            (format!("r4p_{n}.co"), false),
            (format!("r4p_{n}.co"), true),
        ] {
            let r = refused(d, &co, asserts);
            assert!(
                r.to_string().contains("kernarg segment pointer"),
                "{co} (asserts: {asserts}): {r}"
            );
        }
    }
    // 4g. The fifth review and what it expected untried: the implicit-argument pointer rebuilt
    // from constants, steered by the pointer itself, through what it decides (SCC read by
    // `s_cselect`, `s_cmov`, `s_addc` or as the `src_scc` operand; a branch on SCC or vcc; exec
    // from `v_cmpx`; a lane number `v_readlane` chooses; MODE through `s_setreg`; a float
    // exception flag read back with `s_getreg`). Each was patched before (a false proof).
    let d5 = d.join("f5");
    let mut rows = 0;
    for n in [
        "scc_bits",
        "scc_bits2",
        "scc_branch",
        "hwreg",
        "vccz_branch",
        "execz_mask",
        "readlane_sel",
        "carry_bits",
        "scc_operand",
        "scc_cmov",
        "excp_bits",
    ] {
        for a in ["gfx1100", "gfx90a"] {
            for (co, asserts) in [
                (format!("r5_{n}-{a}.co"), true),
                (format!("r5p_{n}-{a}.co"), false),
                (format!("r5p_{n}-{a}.co"), true),
            ] {
                let r = refused(&d5, &co, asserts);
                assert!(
                    r.to_string()
                        .contains("kernarg segment pointer cannot be followed"),
                    "{co} (asserts: {asserts}): {r}"
                );
                rows += 1;
            }
        }
    }
    assert_eq!(rows, 66);
    // 4h. The sixth review: an implicit vcc read (`v_div_fmas`), STATUS mirroring SCC, VCCZ and
    // EXECZ (`s_getreg_b32`), `s_cselect` of vcc, `src_scc` as a lane number, a wave32 lane
    // above 31, `v_swap_b16`'s source write, gfx9's index mode entered through MODE. Each was
    // patched at da02229 (a false proof).
    let d6 = d.join("f6");
    let mut rows = 0;
    for (n, archs) in [
        ("dfmas", &["gfx1100", "gfx90a"][..]),
        ("status_scc", &["gfx1100", "gfx90a"]),
        ("cselect_vcc", &["gfx1100", "gfx90a"]),
        ("readlane_scc", &["gfx1100", "gfx90a"]),
        ("lane_alias", &["gfx1100"]),
        ("swap16", &["gfx1100"]),
        ("gpr_idx_mode", &["gfx90a"]),
    ] {
        for a in archs {
            for (co, asserts) in [
                (format!("r6_{n}-{a}.co"), true),
                (format!("r6p_{n}-{a}.co"), false),
                (format!("r6p_{n}-{a}.co"), true),
            ] {
                assert!(d6.join(&co).is_file(), "{co} did not compile");
                let r = refused(&d6, &co, asserts);
                assert!(
                    r.to_string()
                        .contains("kernarg segment pointer cannot be followed"),
                    "{co} (asserts: {asserts}): {r}"
                );
                rows += 1;
            }
        }
    }
    assert_eq!(rows, 33);
    // 4i. The seventh review's trap temporaries: ttmp6/ttmp7 may hold the dispatch packet
    // pointer (the runtime's debug mode); patched at 1dc96aa, refused now.
    // 4j. Its `midjump2` and `midjump3`: a call through a code address read from memory that
    // lands inside a function (a loaded function pointer plus a constant; a pc-relative label
    // another kernel stores); patched at 1dc96aa, refused now that where control goes is a
    // must-analysis (`flow_marks.rs`): the first is no function's start on every path, the
    // second's image makes a mid-function address a table entry may hold.
    for n in ["ttmp_dispatch", "midjump2", "midjump3"] {
        for a in ["gfx1100", "gfx90a"] {
            for (co, asserts) in [
                (format!("r7_{n}-{a}.co"), true),
                (format!("r7p_{n}-{a}.co"), false),
                (format!("r7p_{n}-{a}.co"), true),
            ] {
                let r = refused(&d.join("f7"), &co, asserts);
                let text = r.to_string();
                assert!(
                    text.contains("kernarg segment pointer cannot be followed"),
                    "{co} (asserts: {asserts}): {r}"
                );
                if n != "ttmp_dispatch" {
                    assert!(
                        text.contains("control goes to"),
                        "{co} (asserts: {asserts}): {r}"
                    );
                }
            }
        }
    }
    // 4k. The eighth review's: a table another kernel writes with the start of a function no
    // path the proof follows reaches (`tabwrite`, plain C++), and a jump through the return
    // address of the function's own call taken for a return (`fakeret`); patched by the first
    // version of `flow_marks.rs`, refused now. Since a table call makes the flow follow every
    // kernel, `tabwrite`'s writer is followed and refused where the address leaves the
    // registers, or its start is one no path reaches: either names the table.
    for (n, says) in [
        ("tabwrite", "function table"),
        ("fakeret", "control goes to s[30:31]"),
    ] {
        refused_saying(&d.join("f8"), "r8", n, says);
    }
    // 4l. The ninth review's: the `s_getpc_b64` that makes the stored address hidden in a
    // literal a branch lands in, so the stepping readers never saw it: a start no path the proof
    // follows reaches (`tabhide`), an address inside a function (`tabhide2`).
    for (n, says) in [
        (
            "tabhide",
            "the image computes the start of evil, which no path",
        ),
        ("tabhide2", "inside evil other than at its start"),
        // A code address made without `s_getpc_b64`: the return address of an `s_call_b64` to
        // the next instruction plus `evil@rel32` (`tabcall`), a callee's own return address
        // plus an offset the host passes (`tabret`, plain C++). Both stored into the table by a
        // kernel that declares nothing: `tabcall` was patched at e0f27eb (a false proof);
        // refused now that a table call makes every kernel followed.
        ("tabcall", "which is no function's start the call graph reached (a function table's entry is called"),
        ("tabret", "leaves the registers (a store, an atomic, LDS, an export or a message) (a function table's entry is called"),
    ] {
        refused_saying(&d.join("f9"), "r9", n, says);
    }
    // 4m. The tenth review's: a code address laundered through the address of a load (each
    // byte of a return address plus a host constant, `lutret6`, or of the dispatch packet's
    // `kernel_object`, `lutko6`, used as the offset into an identity table) and a table entry
    // plus a host constant stored over another (`tabshift`, plain C++). All twelve images were
    // patched at 423fe06 (false proofs); refused now that a load through an address a code
    // address's bits chose is code-derived and no followed code may store into the image once
    // a table call is taken. Since the twelfth review's `entbase` (row 4p) a table's entry loads
    // as a code address, so `tabshift`'s entry plus a constant is refused before its store.
    for (n, says) in [
        (
            "lutret6",
            "an address computed from a code address leaves the registers",
        ),
        (
            "lutko6",
            "an address computed from a code address leaves the registers",
        ),
        (
            "tabshift",
            "an address computed from a code address leaves the registers",
        ),
    ] {
        refused_saying(&d.join("f10"), "r10", n, says);
    }
    // 4n. The eleventh review's: a return address (`retspill`, inline asm) or a function's
    // start (`fnspill`, plain C++) stored to host memory and read back as nothing followed, from
    // which a table's address and an address inside a function are computed; all eight images
    // were patched at 9336ba1. Refused now: once a table call is taken, no code or data address
    // may leave the registers. Since row 4p a value loaded back from the image where a
    // relocation lies is a code address too, so some are refused at the arithmetic before the
    // store.
    for n in ["retspill", "fnspill"] {
        refused_saying_one_of(
            &d.join("f11"),
            "r11",
            n,
            &[
                "a code or data address leaves the registers at",
                "an address computed from a code address leaves the registers",
            ],
        );
    }
    // 4o. The twelfth review's `queuekd`: a kernel descriptor's address read through the queue
    // a non-declaring kernel finds in its implicit arguments (`hidden_queue_ptr`), plus host
    // constants: the table's address and `evil`'s start. All four images were patched at
    // def205c. Refused now: a non-declaring kernel's runtime pointers are followed.
    refused_saying(
        &d.join("f12"),
        "r12",
        "queuekd",
        "a load through a pointer derived from the kernarg segment pointer",
    );
    // 4p. The twelfth review's `entbase`: a function table's entry loaded by a kernel declaring
    // nothing, plus host constants: the table's address and `evil`'s start. All four images were
    // patched at def205c (and still at d7c0996). Refused now: a table's entry loads as a code
    // address, and the waterfall loops that load one into VGPRs still prove, since a VGPR write
    // replaces the lanes exec enables (`flow_exec`).
    refused_saying(
        &d.join("f12"),
        "r12",
        "entbase",
        "an address computed from a code address leaves the registers",
    );
    // 4q. The thirteenth review's `ldrace` and four of ours: a load's destination read before the
    // wait that says it returned (VGPRs, `ldrace`; SGPRs, `ldsmem`), after a wait that leaves a
    // younger load of the same queue out (`ldyoung`) or a FLAT load, which may return out of
    // order (`ldflat`), and a write to a load's destination before its wait, which the load
    // overwrites when it lands (`ldwaw`). At 6ac99bd `ldrace` was patched on gfx1100 and
    // `ldsmem` on both targets, `ldyoung`, `ldflat` and `ldwaw` on gfx1100, each in both modes
    // (12 false proofs, as `findings7/build.sh` runs them). Refused now: a load's registers are
    // pending until a wait settles it (`flow_wait.rs`).
    for n in ["ldrace", "ldsmem", "ldyoung", "ldflat", "ldwaw"] {
        refused_saying_one_of(
            &d.join("f13"),
            "r13",
            n,
            &[
                "an address computed from a code address leaves the registers",
                "addresses memory this rcclfix does not follow",
            ],
        );
    }
    // 4r. Ours: a register a callee's callee writes (`passwrite`): `a2` reads what `g`, called
    // through `f`, left in v[4:5]. After a call the flow keeps what a register held only where
    // no function the call may reach writes it (`flow/pass.rs`, `Writes`); without the callee's
    // callees in that set all four images are patched (a mutant, checked once by hand).
    refused_saying(
        &d.join("f13"),
        "r13",
        "passwrite",
        "an address computed from a code address leaves the registers",
    );
    // 4s. The fourteenth review's: hazards (a store of more than 64 bits that reads its data
    // after the next instruction wrote a table's entry there, `stlate`; a VALU-written SGPR a
    // VMEM instruction reads stale, `sgprhaz`; an MFMA's source written after it, `mfmawar`; a
    // clause replayed under XNACK through an address a later load overwrote, `xnack`; a
    // transcendental's result read stale on gfx11, `transuse`) and an LDS DMA load of a table's
    // entry (`lddma`). All patched at 4f36bbc (and at 6ac99bd), both modes. `exec0` and
    // `pendjmp` were refused already. The fifteenth review's `vccz` (gfx9's vccz after a half
    // write of vcc) and `mfma32` (a 32-register MFMA result), patched at efe00d4.
    let f14 = d.join("f14");
    all_refused_on(
        &f14,
        "r14",
        F14,
        &[
            "may still read its data",
            "may still read its sources",
            "a code or data address leaves the registers",
            "an address computed from a code address leaves the registers",
            "control goes to s[20:21]",
            "may be copied into LDS",
            "a branch decided by",
            "a store, an atomic or LDS access at an address computed from a code address",
        ],
    );
    // 4t. A callee's own code shows what it keeps for its caller (`flow_call.rs`), the calling
    // convention is not assumed: the fifteenth review's `cssave` (above: a callee writes the
    // callee-saved `v[40:41]` and never restores them) and ours found closing it, both patched
    // at 5b9666b under `--asserts` (their `-DPLAIN` builds declare nothing): `execret` (a callee
    // turns every lane on and returns; the caller's lane split then hides the hostcall slot's
    // address in lanes it thinks are off) and `tailid` (a callee writes the callee-saved
    // `s[40:41]` and tail-calls a function that keeps them: that one's returns showed them as
    // entered, so the caller called `evil` through a pair it thought held `f1`).
    refused_asserts_on(&f14, "r14", F14_ASSERTS);
    // 4u. The sixteenth review's (`findings16/README.md`, on the flow of 4t): "every lane on"
    // (`s_or_saveexec` of -1) on one path only, kept by the join as if on both, so a `v_mov`
    // after the merge was taken as replacing every lane, though lane 20 kept the hostcall
    // slot's address (`joinall`) or `tab[1]` (`joinall_tab`, which stores evil's start into
    // the table). Patched by 4t's flow before it was committed (main at 5b9666b refuses both).
    let f16 = d.join("f16");
    all_refused_on(
        &f16,
        "r16",
        F16,
        &[
            "addresses memory this rcclfix does not follow",
            "nothing in its call graph explains it",
            "an address computed from a code address leaves the registers",
        ],
    );
    // 4v. The seventeenth review's (`findings17/README.md`, on 38270f0): `exechi` (on wave32 a
    // callee turns every lane on and copies its saved `exec_lo` into `exec_hi`, which named exec
    // as entered: the caller kept its lane split; `exechi_tab` the same with `tab[1]`) and
    // `tailmv` (a callee copies `s[42:43]` into `s[40:41]` and tail-calls a function that keeps
    // them: `Ident(42)` at the jump counted for s40). Patched at 38270f0.
    let f17 = d.join("f17");
    all_refused_on(
        &f17,
        "r17",
        F17,
        &["an address computed from a code address leaves the registers"],
    );
    refused_asserts_on(&f17, "r17", F17_ASSERTS);
    // 4w. The eighteenth review's (`findings18/README.md`, on 4451847's flow): a
    // `v_writelane_b32` from m0 or vcc_lo, which the decoder took for a write under exec, puts
    // a host value in a disabled lane of a waterfall loop's table entry, in a table callee
    // (`wlsrc`: `Writes::wide` missed it) or in the loop itself (`wlcaller`, `wlvcc`: the marks
    // of the entry were kept); the loop then calls it. Patched, both modes.
    let f18 = d.join("f18");
    all_refused_on(
        &f18,
        "r18",
        F18,
        &[
            "a vector instruction runs under an exec mask that is an address computed",
            "a store, an atomic or LDS access at an address computed from a code address",
        ],
    );
    // 4x. gfx12's SGPR read hazard (`findings19/README.md`, ours): `s[20:21]` held `&tab` and
    // a VALU read it; a `v_readfirstlane_b32` (`sgprfwd`) or an `s_mov_b64` (`sgprfwd_s`) then
    // writes a host buffer's address there, and the next ALU read, with no `s_wait_alu`
    // between, may still see `&tab` (llvm `AMDGPUWaitSGPRHazards.cpp`): the load at +8 reads
    // `tab[1]`, stored back into the table. Patched on main before, both modes; the controls,
    // with the wait, patch.
    let f19 = d.join("f19");
    all_refused_on(
        &f19,
        "r19",
        F19,
        &["an address computed from a code address leaves the registers"],
    );
    controls_patch(&f19, "r19", F19_CONTROLS);
    // The twentieth review's `setpcstale` (`findings20/README.md`, on 4x's flow before its
    // commit): the same hazard read by `s_setpc_b64`, which the flow took for no ALU
    // instruction, and whose target it chose before the stale read. Patched, both modes.
    let f20 = d.join("f20");
    all_refused_on(&f20, "r20", F20, &["control goes to s[20:21]"]);
    controls_patch(&f20, "r20", F20_CONTROLS);
    // 4y. The twenty-first review's (`findings21/README.md`, on 4x's flow): hazards of other
    // generations hide `tab[1]` the same way: gfx942's VALU-written SGPR read by a VALU
    // (`vdecsgpr`), gfx11 wave64's SGPR read as a lane mask (`vmask`), gfx10.1's memory
    // instructions reading their SGPRs late (`vmemwar`, `smemwar`). Patched, both modes.
    let f21 = d.join("f21");
    all_refused_on(
        &f21,
        "r21",
        F21,
        &[
            "an address computed from a code address leaves the registers",
            "gfx11 wave64's hazards",
            "gfx1010's hardware hazards",
        ],
    );
    // 4z. The twenty-third review's (`findings23/README.md`, on the Inside marks before their
    // commit): a lane `v_writelane_b32` set, covered by a filling write under a narrow `exec`,
    // kept its mark across a call that came back with every lane on. Patched, both modes.
    let f23 = d.join("f23");
    all_refused_on(&f23, "r23", F23, &["reads the slot"]);
    // The twenty-fourth review's (`findings24/README.md`, on 451e582): a copy of exec in a
    // callee-saved SGPR kept its mask mark across a call that narrowed exec, so restoring it
    // turned lanes back on unseen. Patched, both modes.
    let f24 = d.join("f24");
    all_refused_on(&f24, "r24", F24, &["reads the slot"]);
    // The twenty-fifth review's (`findings25/README.md`, on 90c55fc): exec's name kept through
    // an `s_or_saveexec` of -1 while Wide, and a tail call that counted it as entered without
    // the Wide check. Patched, both modes.
    let f25 = d.join("f25");
    all_refused_on(&f25, "r25", F25, &["reads the slot"]);
    let r = refused(d, "r2_callee_after_call.co", true);
    assert!(
        r.to_string()
            .contains("at the hostcall slot +0 reads the slot"),
        "{r}"
    );

    // 5. gfx1250's call form is not decoded: no proof on it (before: `--asserts` patched; plain
    // `patch` refuses the image's printf code before any call graph is needed).
    let r = refused(d, "direct_gfx1250-O3.co", true);
    assert_eq!(r.refusal.kind, RefusalKind::Unproven, "{r}");
    assert!(r.to_string().contains("not decoded"), "{r}");
    let r = refused(d, "direct_gfx1250-O3.co", false);
    assert_eq!(r.refusal.kind, RefusalKind::UsesHostcall, "{r}");
}

/// `llvm-objdump -d` of function `symbol` in code object `bytes` (written to `dir`), run in
/// toolchain `debian-<suite>`.
fn objdump(dir: &Path, bytes: &[u8], suite: &str, symbol: &str) -> String {
    std::fs::write(dir.join("patched.co"), bytes).unwrap();
    let v = if suite == "sid" { "21" } else { "22" };
    crate::support::in_toolchain_ok(
        suite,
        dir,
        &[
            &format!("llvm-objdump-{v}"),
            "-d",
            &format!("--disassemble-symbols={symbol}"),
            "patched.co",
        ],
    )
}
