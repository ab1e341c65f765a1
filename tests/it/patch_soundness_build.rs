//! How `patch_soundness.rs` builds its rows: every hostile review's sources compiled by the
//! real HIP toolchain (`debian-sid`'s hipcc, `debian-rocm7.2`'s for gfx1250) into raw code
//! objects, one toolchain call per folder.

use std::path::Path;

/// Compile every finding once (one toolchain call per suite and folder) into `dir`:
/// `<name>-O3.co` and `<name>-O0.co` for gfx1100 from `findings/`, `r2_<name>.co` (-O3) from
/// `findings2/`, `direct_gfx1250-O3.co` for gfx1250.
/// The device-only hipcc command every review source is compiled with.
/// A review's sources by name, each with the targets it is built for.
pub(crate) type Sources = &'static [(&'static str, &'static [&'static str])];

/// The fourteenth and fifteenth reviews' sources (`findings14/`) refused in both modes.
pub(crate) const F14: Sources = &[
    ("stlate", &["gfx1100", "gfx90a", "gfx1201"]),
    ("sgprhaz", &["gfx90a"]),
    ("mfmawar", &["gfx90a"]),
    ("xnack", &["gfx90a"]),
    ("lddma", &["gfx90a"]),
    ("transuse", &["gfx1100", "gfx1201"]),
    ("exec0", &["gfx1100"]),
    ("pendjmp", &["gfx1100"]),
    ("vccz", &["gfx90a"]),
    ("mfma32", &["gfx90a"]),
    ("cssave", &["gfx1100"]),
];

/// `findings14/` sources whose `-DPLAIN` build declares nothing: checked under `--asserts`.
pub(crate) const F14_ASSERTS: Sources = &[("execret", &["gfx1100"]), ("tailid", &["gfx1100"])];

/// The sixteenth review's sources (`findings16/`).
pub(crate) const F16: Sources = &[
    ("joinall", &["gfx1100", "gfx1030", "gfx1201"]),
    ("joinall_tab", &["gfx1100", "gfx1030"]),
];

/// The seventeenth review's source (`findings17/`) refused in both modes.
pub(crate) const F17: Sources = &[("exechi_tab", &["gfx1100", "gfx1030"])];

/// `findings17/` sources checked under `--asserts` (`exechi`'s plain build is refused for
/// another reason; `tailmv`'s declares nothing).
pub(crate) const F17_ASSERTS: Sources = &[
    ("exechi", &["gfx1100", "gfx1201"]),
    ("tailmv", &["gfx1100", "gfx90a"]),
];

/// The eighteenth review's sources (`findings18/`).
pub(crate) const F18: Sources = &[
    ("wlsrc", &["gfx1100", "gfx1030"]),
    ("wlcaller", &["gfx1100", "gfx1030"]),
    ("wlvcc", &["gfx1100"]),
];

/// gfx12's SGPR read hazard (`findings19/`, ours): refused in both modes.
pub(crate) const F19: Sources = &[("sgprfwd", &["gfx1201"]), ("sgprfwd_s", &["gfx1201"])];

/// Their controls, with the `s_wait_alu` the hazard needs: patched in both modes.
pub(crate) const F19_CONTROLS: Sources = &[
    ("sgprfwd_ctl", &["gfx1201"]),
    ("sgprfwd_s_ctl", &["gfx1201"]),
];

/// The twentieth review's source (`findings20/`): refused in both modes; its control patched.
pub(crate) const F20: Sources = &[("setpcstale", &["gfx1201", "gfx1200"])];

/// `setpcstale` with the wait its hazard needs.
pub(crate) const F20_CONTROLS: Sources = &[("setpcstale_ctl", &["gfx1201"])];

/// The twenty-first review's sources (`findings21/`), each refused in both modes; a target
/// `gfx1100w64` is gfx1100 built wave64 ([`review_on`]).
pub(crate) const F21: Sources = &[
    ("vdecsgpr", &["gfx942"]),
    ("vmask", &["gfx1100w64"]),
    ("vmemwar", &["gfx1010"]),
    ("smemwar", &["gfx1010"]),
];

/// The twenty-third review's sources (`findings23/`), refused in both modes.
pub(crate) const F23: Sources = &[
    ("inscall", &["gfx1100", "gfx1030"]),
    ("inscall2", &["gfx1100"]),
];

/// The twenty-fourth review's sources (`findings24/`), refused in both modes.
pub(crate) const F24: Sources = &[
    ("splitcall", &["gfx1100", "gfx1030", "gfx1201"]),
    ("splitcall_or", &["gfx1100"]),
];

/// The twenty-fifth review's sources (`findings25/`), refused in both modes.
pub(crate) const F25: Sources = &[
    ("widetail", &["gfx1100", "gfx1030"]),
    ("widetail_g12", &["gfx1201"]),
];

pub(crate) const HIP: &str = "hipcc -x hip --offload-device-only --no-gpu-bundle-output";

pub(crate) fn compile(dir: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/patch/findings");
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    crate::support::require_tool("sid", "hipcc");
    let hip = HIP;
    crate::support::in_toolchain_ok(
        "sid",
        dir,
        &[
            "sh",
            "-c",
            &format!(
                "set -e; for f in *.hip; do b=${{f%.hip}}; [ $b = direct_gfx1250 ] && continue; \
                 for o in O3 O0; do {hip} --offload-arch=gfx1100 -$o -o $b-$o.co $f 2>/dev/null; done; done"
            ),
        ],
    );
    // The second review's sources (`findings2/`), -O3 only; the v4 one as code object v4.
    let src2 = src.parent().unwrap().join("findings2");
    for e in std::fs::read_dir(&src2).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "hip") {
            std::fs::copy(
                &p,
                dir.join(format!("r2_{}", p.file_name().unwrap().to_string_lossy())),
            )
            .unwrap();
        }
    }
    // The third review's sources (`findings3/`; `trap_literal` is the host doorbell behind a
    // literal trap word), and the single-kernel -O0 slot reader at -O0 (`r0_`).
    for e in std::fs::read_dir(src.parent().unwrap().join("findings3")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "hip") {
            std::fs::copy(
                &p,
                dir.join(format!("r2_{}", p.file_name().unwrap().to_string_lossy())),
            )
            .unwrap();
        }
    }
    std::fs::copy(
        src2.join("fnptr_slot_o0.hip"),
        dir.join("r0_fnptr_slot_o0.hip"),
    )
    .unwrap();
    // The fourth review's sources (`findings4/`, inline asm, `common.h`): `r4_<name>.co` with a
    // device assert, `r4p_<name>.co` with a table call (`-DPLAIN`).
    for e in std::fs::read_dir(src.parent().unwrap().join("findings4")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name == "common.h" {
            std::fs::copy(&p, dir.join(&name)).unwrap();
        } else if name.ends_with(".hip") {
            std::fs::copy(&p, dir.join(format!("r4_{name}"))).unwrap();
        }
    }
    crate::support::in_toolchain_ok(
        "sid",
        dir,
        &[
            "sh",
            "-c",
            &format!(
                "set -e; for f in r2_*.hip; do b=${{f%.hip}}; v=; case $b in *_v4) v=-mcode-object-version=4;; esac; \
                 {hip} --offload-arch=gfx1100 -O3 $v -o $b.co $f 2>/dev/null; done; \
                 {hip} --offload-arch=gfx1100 -O0 -o r0_fnptr_slot_o0.co r0_fnptr_slot_o0.hip 2>/dev/null; \
                 for f in r4_*.hip; do b=${{f%.hip}}; n=${{b#r4_}}; a=gfx1100; [ $n = agpr ] && a=gfx90a; \
                 {hip} --offload-arch=$a -O3 -o $b.co $f 2>/dev/null; \
                 {hip} --offload-arch=$a -O3 -DPLAIN -o r4p_$n.co $f 2>/dev/null; done"
            ),
        ],
    );
    // The fifth review's sources and ours beside them (`findings5/`: implicit flows through SCC,
    // vcc, exec, a lane selector, the carry, a hardware register): `r5_<name>-<arch>.co` with
    // a device assert, `r5p_<name>-<arch>.co` with a table call, for gfx1100 and gfx90a.
    let d5 = dir.join("f5");
    std::fs::create_dir_all(&d5).unwrap();
    for e in std::fs::read_dir(src.parent().unwrap().join("findings5")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name == "common.h" || name.ends_with(".hip") {
            std::fs::copy(&p, d5.join(&name)).unwrap();
        }
    }
    crate::support::in_toolchain_ok(
        "sid",
        &d5,
        &[
            "sh",
            "-c",
            &format!(
                "set -e; for f in *.hip; do n=${{f%.hip}}; for a in gfx1100 gfx90a; do \
                 {hip} --offload-arch=$a -O3 -o r5_$n-$a.co $f 2>/dev/null; \
                 {hip} --offload-arch=$a -O3 -DPLAIN -o r5p_$n-$a.co $f 2>/dev/null; done; done"
            ),
        ],
    );
    // The sixth review's sources (`findings6/`, their own `common.h`): `r6_<name>-<arch>.co` with
    // a device assert, `r6p_…` with a table call; a source that one architecture cannot
    // assemble (`swap16` on gfx90a, `gpr_idx_mode` on gfx1100) is skipped there and listed below.
    let d6 = dir.join("f6");
    std::fs::create_dir_all(&d6).unwrap();
    for e in std::fs::read_dir(src.parent().unwrap().join("findings6")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name == "common.h" || name.ends_with(".hip") {
            std::fs::copy(&p, d6.join(&name)).unwrap();
        }
    }
    crate::support::in_toolchain_ok(
        "sid",
        &d6,
        &[
            "sh",
            "-c",
            &format!(
                "for f in *.hip; do n=${{f%.hip}}; for a in gfx1100 gfx90a; do \
                 {hip} --offload-arch=$a -O3 -o r6_$n-$a.co $f 2>/dev/null; \
                 {hip} --offload-arch=$a -O3 -DPLAIN -o r6p_$n-$a.co $f 2>/dev/null; done; done; true"
            ),
        ],
    );
    // The seventh review's `ttmp_dispatch`, `midjump2`, `midjump3` (`findings7/`, with its
    // `common.h`): the trap temporaries' dispatch pointer and two mid-function calls.
    let fixtures = src.parent().unwrap();
    review(
        dir,
        fixtures,
        7,
        &["ttmp_dispatch", "midjump2", "midjump3"],
        &["common.h"],
    );
    // The eighth review's `tabwrite` and `fakeret` (`findings8/`).
    review(dir, fixtures, 8, &["tabwrite", "fakeret"], &[]);
    // The ninth review's `tabhide`, `tabhide2`, `tabcall`, `tabret` (`findings9/`).
    review(
        dir,
        fixtures,
        9,
        &["tabhide", "tabhide2", "tabcall", "tabret"],
        &[],
    );
    // The tenth review's `lutret6`, `lutko6` and our `tabshift` (`findings10/`).
    review(dir, fixtures, 10, &["lutret6", "lutko6", "tabshift"], &[]);
    // The eleventh review's `retspill` and `fnspill` (`findings11/`).
    review(dir, fixtures, 11, &["retspill", "fnspill"], &[]);
    // The twelfth review's `queuekd` and `entbase` (`findings12/`).
    review(dir, fixtures, 12, &["queuekd", "entbase"], &[]);
    // The thirteenth review's `ldrace` and ours beside it (`findings13/`, with `ldcommon.h`).
    review(
        dir,
        fixtures,
        13,
        &[
            "ldrace",
            "ldsmem",
            "ldyoung",
            "ldflat",
            "ldwaw",
            "passwrite",
        ],
        &["ldcommon.h"],
    );
    // The fourteenth review's sources (`findings14/`), each on the targets it assembles for.
    review_on(
        dir,
        fixtures,
        14,
        &[F14, F14_ASSERTS].concat(),
        &["../findings13/ldcommon.h", "arch.h"],
    );
    // The sixteenth review's (`findings16/`): a join that kept "every lane on" from one path.
    review_on(dir, fixtures, 16, F16, &["../findings13/ldcommon.h"]);
    // The seventeenth review's (`findings17/`): a name for exec from a copy into exec_hi, and a
    // tail call's Ident of another register.
    review_on(
        dir,
        fixtures,
        17,
        &[F17, F17_ASSERTS].concat(),
        &["../findings13/ldcommon.h"],
    );
    // The eighteenth review's (`findings18/`): v_writelane_b32 from m0 or vcc_lo.
    review_on(
        dir,
        fixtures,
        18,
        F18,
        &[
            "../findings13/ldcommon.h",
            "../findings14/arch.h",
            "arch2.h",
        ],
    );
    // gfx12's SGPR read hazard (`findings19/`, ours) and its controls (which include the
    // sources F19 lists).
    review_on(
        dir,
        fixtures,
        19,
        &[F19, F19_CONTROLS].concat(),
        &["../findings13/ldcommon.h", "../findings14/arch.h"],
    );
    // The twentieth review's (`findings20/`): an `s_setpc_b64` through a pair a scalar write
    // has not landed in.
    review_on(dir, fixtures, 20, &[F20, F20_CONTROLS].concat(), &[]);
    // The twenty-first review's (`findings21/`): hazards of gfx942, gfx11 wave64 and gfx10.1.
    review_on(
        dir,
        fixtures,
        21,
        F21,
        &["../findings13/ldcommon.h", "../findings14/arch.h"],
    );
    // The twenty-third review's (`findings23/`): a lane's Inside mark across a call.
    review_on(
        dir,
        fixtures,
        23,
        F23,
        &["../findings13/ldcommon.h", "../findings18/arch2.h"],
    );
    // The twenty-fourth review's (`findings24/`): a saved exec's mask across a call.
    review_on(
        dir,
        fixtures,
        24,
        F24,
        &["../findings13/ldcommon.h", "../findings18/arch2.h"],
    );
    // The twenty-fifth review's (`findings25/`): exec's name kept through a widening.
    review_on(
        dir,
        fixtures,
        25,
        F25,
        &["../findings13/ldcommon.h", "../findings18/arch2.h"],
    );
    crate::support::require_tool("rocm7.2", "hipcc");
    crate::support::in_toolchain_ok(
        "rocm7.2",
        dir,
        &[
            "sh",
            "-c",
            &format!("{hip} --offload-arch=gfx1250 -O3 -o direct_gfx1250-O3.co direct_gfx1250.hip 2>/dev/null"),
        ],
    );
}

/// Review `k`'s sources (`findings<k>/<name>.hip`, and the headers `extra`) compiled in
/// `dir/f<k>` for gfx1100 and gfx90a at -O3 in the debian-sid toolchain: `r<k>_<name>-<arch>.co`
/// (the assert variant) and `r<k>p_<name>-<arch>.co` (`-DPLAIN`, the table-call variant), as
/// `refused_saying` (`patch_soundness.rs`) reads them. Panics when a source does not compile.
pub(crate) fn review(dir: &Path, fixtures: &Path, k: u32, names: &[&str], extra: &[&str]) {
    let both: Vec<(&str, &[&str])> = names
        .iter()
        .map(|&n| (n, &["gfx1100", "gfx90a"][..]))
        .collect();
    review_on(dir, fixtures, k, &both, extra);
}

/// As [`review`], each source on its own targets (`names`: name and targets); a header of
/// `extra` may lie in another review's folder (`../findings13/ldcommon.h`), and is copied
/// beside the sources under its own name.
pub(crate) fn review_on(
    dir: &Path,
    fixtures: &Path,
    k: u32,
    names: &[(&str, &[&str])],
    extra: &[&str],
) {
    let d = dir.join(format!("f{k}"));
    std::fs::create_dir_all(&d).unwrap();
    let from = fixtures.join(format!("findings{k}"));
    for name in names
        .iter()
        .map(|(n, _)| format!("{n}.hip"))
        .chain(extra.iter().map(|e| e.to_string()))
    {
        let to = d.join(Path::new(&name).file_name().unwrap());
        std::fs::copy(from.join(&name), to).unwrap();
    }
    let hip = HIP;
    // A target ending in `w64` is built wave64 (HIP's headers refuse wave64 on gfx11 unless
    // told the wave size the code assumes; the hardware runs it).
    let script: Vec<String> = names
        .iter()
        .flat_map(|(n, archs)| {
            archs.iter().map(move |a| {
                let (arch, flags) = match a.strip_suffix("w64") {
                    Some(arch) => (
                        arch,
                        " -mwavefrontsize64 -U__AMDGCN_WAVEFRONT_SIZE -D__AMDGCN_WAVEFRONT_SIZE=32",
                    ),
                    None => (*a, ""),
                };
                format!(
                    "{hip} --offload-arch={arch}{flags} -O3 -o r{k}_{n}-{a}.co {n}.hip 2>/dev/null; \
                     {hip} --offload-arch={arch}{flags} -O3 -DPLAIN -o r{k}p_{n}-{a}.co {n}.hip 2>/dev/null"
                )
            })
        })
        .collect();
    crate::support::in_toolchain_ok(
        "sid",
        &d,
        &["sh", "-c", &format!("set -e; {}", script.join("; "))],
    );
}
