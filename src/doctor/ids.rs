//! PCI device ID → gfx target for the AMD GPUs doctor meets, used when KFD has no node for a GPU
//! (amdgpu not loaded, a snapshot without the topology, or a pasted `lspci`).
//!
//! Sources: Linux `drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c` (`pciidlist`: the explicit IDs of
//! Vega 20, Arcturus, Aldebaran and Navi 1x/2x, by chip), the pci.ids database (pciutils; the
//! Navi 3x/4x and MI300 IDs, which the kernel matches by IP discovery rather than by ID), and LLVM
//! `AMDGPUUsage` (chip → gfx processor). The table is small on purpose: discrete RDNA 2–4 and
//! CDNA 1–3 parts and the integrated GPUs ROCm exposes next to them. A missing ID is "unknown",
//! never a guess.

/// One row: device ID (vendor 0x1002), chip name as pci.ids spells it, gfx processor.
pub const GPU_IDS: &[(u16, &str, &str)] = &[
    // Polaris 10/11/12 (amdgpu_drv.c CHIP_POLARIS10/11/12; AMDGPUUsage: gfx803). KFD needs PCIe
    // atomics for these unless the MEC firmware is new enough (kfd_device.c: "PCI rejects
    // atomics"), so they appear in reports as GPUs KFD skipped (ROCm/legacy-rocm-build#1214).
    (0x67df, "Ellesmere", "gfx803"),
    (0x67ef, "Baffin", "gfx803"),
    (0x699f, "Lexa", "gfx803"),
    // Vega 20 (amdgpu_drv.c CHIP_VEGA20).
    (0x66a0, "Vega 20", "gfx906"),
    (0x66a1, "Vega 20", "gfx906"),
    (0x66a2, "Vega 20", "gfx906"),
    (0x66a3, "Vega 20", "gfx906"),
    (0x66a4, "Vega 20", "gfx906"),
    (0x66a7, "Vega 20", "gfx906"),
    (0x66af, "Vega 20", "gfx906"),
    // Arcturus, Instinct MI100 (CHIP_ARCTURUS).
    (0x7388, "Arcturus", "gfx908"),
    (0x738c, "Arcturus", "gfx908"),
    (0x738e, "Arcturus", "gfx908"),
    (0x7390, "Arcturus", "gfx908"),
    // Aldebaran, Instinct MI200 (CHIP_ALDEBARAN).
    (0x7408, "Aldebaran", "gfx90a"),
    (0x740c, "Aldebaran", "gfx90a"),
    (0x740f, "Aldebaran", "gfx90a"),
    (0x7410, "Aldebaran", "gfx90a"),
    // Aqua Vanjaram, Instinct MI300 (pci.ids).
    (0x74a0, "Aqua Vanjaram", "gfx942"),
    (0x74a1, "Aqua Vanjaram", "gfx942"),
    (0x74a2, "Aqua Vanjaram", "gfx942"),
    (0x74a5, "Aqua Vanjaram", "gfx942"),
    (0x74a9, "Aqua Vanjaram", "gfx942"),
    (0x74b5, "Aqua Vanjaram", "gfx942"),
    (0x74b9, "Aqua Vanjaram", "gfx942"),
    (0x74bd, "Aqua Vanjaram", "gfx942"),
    // Navi 21 (CHIP_SIENNA_CICHLID).
    (0x73a0, "Navi 21", "gfx1030"),
    (0x73a1, "Navi 21", "gfx1030"),
    (0x73a2, "Navi 21", "gfx1030"),
    (0x73a3, "Navi 21", "gfx1030"),
    (0x73a5, "Navi 21", "gfx1030"),
    (0x73a8, "Navi 21", "gfx1030"),
    (0x73a9, "Navi 21", "gfx1030"),
    (0x73ab, "Navi 21", "gfx1030"),
    (0x73ac, "Navi 21", "gfx1030"),
    (0x73ad, "Navi 21", "gfx1030"),
    (0x73ae, "Navi 21", "gfx1030"),
    (0x73af, "Navi 21", "gfx1030"),
    (0x73bf, "Navi 21", "gfx1030"),
    // Navi 22 (CHIP_NAVY_FLOUNDER).
    (0x73c0, "Navi 22", "gfx1031"),
    (0x73c1, "Navi 22", "gfx1031"),
    (0x73c3, "Navi 22", "gfx1031"),
    (0x73da, "Navi 22", "gfx1031"),
    (0x73db, "Navi 22", "gfx1031"),
    (0x73dc, "Navi 22", "gfx1031"),
    (0x73dd, "Navi 22", "gfx1031"),
    (0x73de, "Navi 22", "gfx1031"),
    (0x73df, "Navi 22", "gfx1031"),
    // Navi 23 (CHIP_DIMGREY_CAVEFISH).
    (0x73e0, "Navi 23", "gfx1032"),
    (0x73e1, "Navi 23", "gfx1032"),
    (0x73e2, "Navi 23", "gfx1032"),
    (0x73e3, "Navi 23", "gfx1032"),
    (0x73e8, "Navi 23", "gfx1032"),
    (0x73e9, "Navi 23", "gfx1032"),
    (0x73ea, "Navi 23", "gfx1032"),
    (0x73eb, "Navi 23", "gfx1032"),
    (0x73ec, "Navi 23", "gfx1032"),
    (0x73ed, "Navi 23", "gfx1032"),
    (0x73ef, "Navi 23", "gfx1032"),
    (0x73ff, "Navi 23", "gfx1032"),
    // Navi 24 (CHIP_BEIGE_GOBY).
    (0x7420, "Navi 24", "gfx1034"),
    (0x7421, "Navi 24", "gfx1034"),
    (0x7422, "Navi 24", "gfx1034"),
    (0x7423, "Navi 24", "gfx1034"),
    (0x7424, "Navi 24", "gfx1034"),
    (0x743f, "Navi 24", "gfx1034"),
    // Navi 31 (pci.ids): RX 7900 XT/XTX/GRE, Radeon PRO W7900.
    (0x7448, "Navi 31", "gfx1100"),
    (0x744c, "Navi 31", "gfx1100"),
    // Navi 32: RX 7700 XT/7800 XT.
    (0x747e, "Navi 32", "gfx1101"),
    // Navi 33: RX 7600/7600 XT and the mobile parts.
    (0x7480, "Navi 33", "gfx1102"),
    (0x7483, "Navi 33", "gfx1102"),
    // Navi 44 / Navi 48 (RDNA 4): RX 9060 XT; RX 9070/9070 XT, Radeon AI PRO R9700.
    (0x7590, "Navi 44", "gfx1200"),
    (0x7550, "Navi 48", "gfx1201"),
    (0x7551, "Navi 48", "gfx1201"),
    // Integrated GPUs ROCm exposes next to discrete cards.
    (0x1681, "Rembrandt", "gfx1035"),
    (0x164e, "Raphael", "gfx1036"),
    (0x15bf, "Phoenix1", "gfx1103"),
    (0x15c8, "Phoenix2", "gfx1103"),
    (0x150e, "Strix", "gfx1150"),
    (0x1586, "Strix Halo", "gfx1151"),
    (0x1114, "Krackan", "gfx1152"),
];

/// The gfx processor of AMD device `device` (vendor 0x1002), from [`GPU_IDS`].
pub fn gfx_for_device(device: u16) -> Option<&'static str> {
    GPU_IDS
        .iter()
        .find(|(d, _, _)| *d == device)
        .map(|(_, _, g)| *g)
}

/// Chip names (as pci.ids spells them in `lspci` output, e.g. `Navi 31 [Radeon RX 7900 XT/7900
/// XTX]`) → gfx processor, for a pasted `lspci` without `-nn` device IDs. Longer names first, so
/// `Navi 31` never matches a `Navi 3` prefix of something else.
pub const CHIP_NAMES: &[(&str, &str)] = &[
    ("Ellesmere", "gfx803"),
    ("Baffin", "gfx803"),
    ("Lexa", "gfx803"),
    ("Aqua Vanjaram", "gfx942"),
    ("Strix Halo", "gfx1151"),
    ("Aldebaran", "gfx90a"),
    ("Arcturus", "gfx908"),
    ("Rembrandt", "gfx1035"),
    ("Raphael", "gfx1036"),
    ("Krackan", "gfx1152"),
    ("Vega 20", "gfx906"),
    ("Navi 21", "gfx1030"),
    ("Navi 22", "gfx1031"),
    ("Navi 23", "gfx1032"),
    ("Navi 24", "gfx1034"),
    ("Navi 31", "gfx1100"),
    ("Navi 32", "gfx1101"),
    ("Navi 33", "gfx1102"),
    ("Navi 44", "gfx1200"),
    ("Navi 48", "gfx1201"),
    ("Phoenix1", "gfx1103"),
    ("Phoenix2", "gfx1103"),
    ("Strix", "gfx1150"),
];

/// The gfx processor named by a chip name inside an `lspci` device description. The name must
/// stand as a word (`Navi 31 [...]`, not `Navi 310`).
pub fn gfx_for_chip_name(description: &str) -> Option<&'static str> {
    CHIP_NAMES.iter().find_map(|(name, gfx)| {
        let i = description.find(name)?;
        let after = description[i + name.len()..].chars().next();
        (!after.is_some_and(|c| c.is_ascii_alphanumeric())).then_some(*gfx)
    })
}
