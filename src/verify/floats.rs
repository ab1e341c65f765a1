//! IEEE 754 binary16 (`f16`) and bfloat16 (`bf16`) conversions, written out so the expected values
//! of `verify` do not depend on the GPU runtime or on another crate.
//!
//! Both narrowings round to nearest, ties to even (IEEE 754-2019 §4.3.1), which is what CUDA's
//! `__float2half_rn`/`__float2bfloat16_rn` and HIP's equivalents do. Values are carried as raw bit
//! patterns (`u16`) because the check is bitwise.

/// `f32` → binary16 bits, round to nearest even. Overflow gives ±infinity, values below half the
/// smallest subnormal give ±0, NaN stays a (quiet) NaN with the top payload bits kept.
pub fn f32_to_f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return if man == 0 {
            sign | 0x7c00
        } else {
            sign | 0x7e00 | (man >> 13) as u16
        };
    }
    // Exponent rebiased from 127 to 15.
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Subnormal result (or zero). Values below 2^-25 round to zero.
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let mut r = m >> shift;
        let rem = m & ((1u32 << shift) - 1);
        if rem > half || (rem == half && (r & 1) == 1) {
            r += 1;
        }
        // A carry into bit 10 yields the smallest normal, which is the right encoding.
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && (r & 1) == 1) {
        // A carry out of the mantissa bumps the exponent; from the largest finite it gives infinity.
        r += 1;
    }
    sign | r as u16
}

/// binary16 bits → `f32` (exact: every binary16 value is an `f32`).
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    match exp {
        0 => {
            // Zero or subnormal: man × 2^-24.
            let v = man as f32 * f32::from_bits(0x3380_0000); // 2^-24
            f32::from_bits(v.to_bits() | sign)
        }
        31 => f32::from_bits(sign | 0x7f80_0000 | (man << 13)),
        _ => f32::from_bits(sign | ((exp + 112) << 23) | (man << 13)),
    }
}

/// `f32` → bfloat16 bits, round to nearest even. NaN stays a quiet NaN.
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) as u16) | 0x0040;
    }
    let round = ((b >> 16) & 1) + 0x7fff;
    (b.wrapping_add(round) >> 16) as u16
}

/// bfloat16 bits → `f32` (exact).
pub fn bf16_bits_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}
