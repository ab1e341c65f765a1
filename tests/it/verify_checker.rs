//! What `verify` computes and checks, without a GPU or a library: binary16 and bfloat16
//! rounding (every value and every midpoint), the per-rank inputs and the expected results, the
//! checker that names the first wrong index, and the bandwidth arithmetic of nccl-tests. The runs
//! (the stand-in library, the command line, the report) are in `verify.rs`.

use rcclfix::verify::cases::{self, Collective, DType, Placement, SizeClass};
use rcclfix::verify::floats::{
    bf16_bits_to_f32, f16_bits_to_f32, f32_to_bf16_bits, f32_to_f16_bits,
};
use rcclfix::verify::protocol::RankCheck;
use rcclfix::verify::report::{CaseReport, CaseStatus};

// ---------------------------------------------------------------- binary16 / bfloat16

fn check_f16(x: f32, bits: u16) {
    assert_eq!(
        f32_to_f16_bits(x),
        bits,
        "f32 {x:e} ({:#010x}) → f16",
        x.to_bits()
    );
}

fn check_bf16(x: f32, bits: u16) {
    assert_eq!(
        f32_to_bf16_bits(x),
        bits,
        "f32 {x:e} ({:#010x}) → bf16",
        x.to_bits()
    );
}

#[test]
fn f16_exact_values() {
    check_f16(0.0, 0x0000);
    check_f16(-0.0, 0x8000);
    check_f16(1.0, 0x3c00);
    check_f16(-2.0, 0xc000);
    check_f16(0.5, 0x3800);
    check_f16(65504.0, 0x7bff);
    check_f16(2f32.powi(-14), 0x0400);
    check_f16(2f32.powi(-24), 0x0001);
    check_f16(f32::INFINITY, 0x7c00);
    check_f16(f32::NEG_INFINITY, 0xfc00);
}

#[test]
fn f16_rounding_ties_to_even() {
    // 2049 lies halfway between 2048 and 2050: even mantissa (2048) wins.
    check_f16(2049.0, 0x6800);
    // 2051 lies halfway between 2050 and 2052: 2052 has the even mantissa.
    check_f16(2051.0, 0x6802);
    check_f16(1.0 + 2f32.powi(-11), 0x3c00);
    check_f16(1.0 + 3.0 * 2f32.powi(-11), 0x3c02);
    // Just above and below a tie.
    check_f16(
        f32::from_bits((1.0f32 + 2f32.powi(-11)).to_bits() + 1),
        0x3c01,
    );
    check_f16(
        f32::from_bits((1.0f32 + 3.0 * 2f32.powi(-11)).to_bits() - 1),
        0x3c01,
    );
}

#[test]
fn f16_overflow_and_underflow() {
    check_f16(65519.0, 0x7bff);
    // 65520 is halfway to the next binade's first value (65536): ties to even gives infinity.
    check_f16(65520.0, 0x7c00);
    check_f16(1.0e9, 0x7c00);
    check_f16(-1.0e9, 0xfc00);
    // Half the smallest subnormal ties to zero; 1.5× rounds up; 3 × 2^-25 ties to 2 × 2^-24.
    check_f16(2f32.powi(-25), 0x0000);
    check_f16(1.5 * 2f32.powi(-25), 0x0001);
    check_f16(3.0 * 2f32.powi(-25), 0x0002);
    check_f16(2f32.powi(-30), 0x0000);
    check_f16(-2f32.powi(-30), 0x8000);
    // The largest subnormal plus half an ulp ties up into the smallest normal.
    check_f16(2f32.powi(-14) - 2f32.powi(-25), 0x0400);
}

#[test]
fn f16_nan_stays_nan() {
    let h = f32_to_f16_bits(f32::NAN);
    assert_eq!(h & 0x7c00, 0x7c00);
    assert_ne!(h & 0x03ff, 0);
    assert!(f16_bits_to_f32(h).is_nan());
}

#[test]
fn f16_every_value_round_trips() {
    for h in 0..=u16::MAX {
        let x = f16_bits_to_f32(h);
        if x.is_nan() {
            continue;
        }
        assert_eq!(f32_to_f16_bits(x), h, "f16 {h:#06x} = {x:e}");
    }
}

#[test]
fn f16_every_midpoint_rounds_to_even() {
    for h in 0u16..0x7bff {
        let (lo, hi) = (f16_bits_to_f32(h) as f64, f16_bits_to_f32(h + 1) as f64);
        let mid = ((lo + hi) / 2.0) as f32; // exact: 11-bit values, 24-bit f32
        let even = if h & 1 == 0 { h } else { h + 1 };
        assert_eq!(
            f32_to_f16_bits(mid),
            even,
            "midpoint of {h:#06x} and {:#06x}",
            h + 1
        );
        assert_eq!(f32_to_f16_bits(-mid), even | 0x8000);
        assert_eq!(f32_to_f16_bits(f32::from_bits(mid.to_bits() + 1)), h + 1);
        assert_eq!(f32_to_f16_bits(f32::from_bits(mid.to_bits() - 1)), h);
    }
}

#[test]
fn bf16_values_and_ties() {
    check_bf16(1.0, 0x3f80);
    check_bf16(-1.0, 0xbf80);
    check_bf16(0.0, 0x0000);
    check_bf16(-0.0, 0x8000);
    check_bf16(256.0, 0x4380);
    check_bf16(257.0, 0x4380); // tie between 256 and 258: 256 is even
    check_bf16(259.0, 0x4382); // tie between 258 and 260: 260 is even
    check_bf16(f32::MAX, 0x7f80); // rounds up to infinity
    check_bf16(f32::INFINITY, 0x7f80);
    check_bf16(f32::from_bits(0x0000_8000), 0x0000); // subnormal tie to even (zero)
    check_bf16(f32::from_bits(0x0001_8000), 0x0002);
    assert!(bf16_bits_to_f32(f32_to_bf16_bits(f32::NAN)).is_nan());
}

#[test]
fn bf16_every_value_round_trips_and_midpoints_tie_to_even() {
    for h in 0..=u16::MAX {
        let x = bf16_bits_to_f32(h);
        if x.is_nan() {
            continue;
        }
        assert_eq!(f32_to_bf16_bits(x), h);
        if h & 0x7fff < 0x7f7f {
            let mid = f32::from_bits(((h as u32) << 16) + 0x8000);
            let even = if h & 1 == 0 { h } else { h + 1 };
            assert_eq!(f32_to_bf16_bits(mid), even, "midpoint above {h:#06x}");
        }
    }
}

// ---------------------------------------------------------------- inputs and expected values

#[test]
fn inputs_are_exact_and_differ_between_ranks() {
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        for nranks in 2..=cases::MAX_RANKS {
            let per_rank: Vec<Vec<u8>> = (0..nranks)
                .map(|r| cases::input_bytes(dtype, r, 5000))
                .collect();
            let expected = cases::all_reduce_expected(dtype, nranks, 5000);
            for i in 0..5000 {
                let w = dtype.size();
                let get = |b: &[u8]| {
                    let s = &b[i * w..i * w + w];
                    if w == 4 {
                        u32::from_le_bytes([s[0], s[1], s[2], s[3]])
                    } else {
                        u16::from_le_bytes([s[0], s[1]]) as u32
                    }
                };
                let mut sum = 0.0f64;
                let mut seen = Vec::new();
                for (r, input) in per_rank.iter().enumerate() {
                    let v = cases::input_value(r, i);
                    assert_eq!(
                        dtype.decode(dtype.encode(v)),
                        v,
                        "{dtype:?} input {v} not exact"
                    );
                    assert_eq!(get(input), dtype.encode(v), "{dtype:?} rank {r} index {i}");
                    sum += v as f64;
                    assert!(!seen.contains(&get(input)), "ranks share a value at {i}");
                    seen.push(get(input));
                }
                // The host sum is exactly representable, so the expected value is that sum.
                assert_eq!(
                    dtype.decode(get(&expected)) as f64,
                    sum,
                    "{dtype:?} n={nranks} i={i}"
                );
            }
        }
    }
}

#[test]
fn large_inputs_filled_in_parallel_match_the_formula() {
    let n = (3 << 20) + 7;
    let v = cases::input_bytes(DType::F16, 1, n);
    assert_eq!(v.len(), 2 * n);
    for i in (0..n).step_by(997).chain([n - 1]) {
        assert_eq!(
            u16::from_le_bytes([v[2 * i], v[2 * i + 1]]) as u32,
            DType::F16.encode(cases::input_value(1, i))
        );
    }
    let e = cases::all_reduce_expected(DType::F32, 2, n);
    for i in (0..n).step_by(1009).chain([n - 1]) {
        let got = f32::from_le_bytes([e[4 * i], e[4 * i + 1], e[4 * i + 2], e[4 * i + 3]]);
        assert_eq!(got, cases::input_value(0, i) + cases::input_value(1, i));
    }
}

#[test]
fn inputs_have_no_short_period() {
    // A chunk misplaced by a power-of-two offset must change the data.
    let v = cases::input_bytes(DType::F32, 0, 1 << 16);
    for shift in [256usize, 512, 1024, 4096, 16384] {
        assert_ne!(
            v[..4 * 1024],
            v[4 * shift..4 * (shift + 1024)],
            "period {shift}"
        );
    }
}

#[test]
fn all_gather_expected_is_each_ranks_input_in_its_slot() {
    let e = cases::all_gather_expected(DType::Bf16, 3, 100);
    for s in 0..3 {
        assert_eq!(
            e[s * 200..(s + 1) * 200],
            cases::input_bytes(DType::Bf16, s, 100)[..]
        );
    }
}

#[test]
fn case_list_covers_every_combination() {
    let list = cases::case_list(2, cases::DEFAULT_LARGE_BYTES).unwrap();
    assert_eq!(list.len(), 24);
    let mut names: Vec<String> = list.iter().map(|c| c.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 24);
    assert!(list.iter().enumerate().all(|(i, c)| c.id == i));
    let big = cases::find_case(&list, "all_gather-f16-large-in").unwrap();
    assert_eq!(
        (big.coll, big.dtype, big.size, big.placement),
        (
            Collective::AllGather,
            DType::F16,
            SizeClass::Large,
            Placement::InPlace
        )
    );
    assert_eq!(big.send_count, (64 << 20) / 2 / 2);
    assert_eq!(big.table_bytes(2), 64 << 20);
    assert_eq!(
        cases::find_case(&list, "2").unwrap().name(),
        "all_reduce-f32-large-out"
    );
    assert!(cases::find_case(&list, "all_reduce-f64-small-out").is_none());
    assert!(
        cases::case_list(2, 6).is_err(),
        "6 bytes do not split into f32 elements"
    );
}

// ---------------------------------------------------------------- the checker

#[test]
fn check_passes_identical_buffers() {
    let e = cases::all_reduce_expected(DType::F32, 2, 1000);
    assert_eq!(cases::check(DType::F32, &e, &e), None);
}

#[test]
fn check_finds_the_first_wrong_index_and_counts() {
    let e = cases::all_reduce_expected(DType::F16, 2, 10_000);
    let mut got = e.clone();
    for i in [7777usize, 9001, 5000] {
        got[2 * i + 1] ^= 0x40;
    }
    let m = cases::check(DType::F16, &e, &got).unwrap();
    assert_eq!(m.index, 5000);
    assert_eq!(m.wrong, 3);
    assert_eq!(m.count, 10_000);
    assert_eq!(
        m.expected.bits,
        u16::from_le_bytes([e[10_000], e[10_001]]) as u32
    );
    assert_eq!(m.got.bits, m.expected.bits ^ 0x4000);
    assert!(m
        .expected
        .display(DType::F16)
        .ends_with(&format!("(0x{:04x})", m.expected.bits)));
}

#[test]
fn check_counts_a_short_buffer() {
    let e = cases::input_bytes(DType::F32, 0, 100);
    let m = cases::check(DType::F32, &e, &e[..4 * 90]).unwrap();
    assert_eq!((m.index, m.wrong), (90, 10));
}

#[test]
fn injected_wrong_expectation_is_found_at_its_index() {
    let mut e = cases::all_reduce_expected(DType::Bf16, 2, 4096);
    let got = e.clone();
    cases::corrupt_expected(DType::Bf16, &mut e, 1234).unwrap();
    let m = cases::check(DType::Bf16, &e, &got).unwrap();
    assert_eq!((m.index, m.wrong), (1234, 1));
    assert!(cases::corrupt_expected(DType::Bf16, &mut e, 4096).is_err());
}

#[test]
fn all_gather_rank0_data_in_every_slot_is_caught() {
    let n = 1001;
    let e = cases::all_gather_expected(DType::F32, 2, n);
    let r0 = cases::input_bytes(DType::F32, 0, n);
    let got = [r0.clone(), r0].concat();
    let m = cases::check_all_gather(DType::F32, 2, n, &e, &got).unwrap();
    assert_eq!(m.index, n, "first element of slot 1");
    assert_eq!(m.slot, Some(1));
    assert_eq!(m.wrong, n, "every element of slot 1 differs");
    assert_eq!(m.note.as_deref(), Some("slot 1 holds rank 0's data"));
}

#[test]
fn all_gather_unwritten_and_swapped_slots_are_named() {
    let n = 64;
    let e = cases::all_gather_expected(DType::F16, 2, n);
    let mut unwritten = e.clone();
    unwritten[2 * n..].fill(cases::SENTINEL_BYTE);
    let m = cases::check_all_gather(DType::F16, 2, n, &e, &unwritten).unwrap();
    assert_eq!(m.note.as_deref(), Some("slot 1 was never written"));
    let swapped = [e[2 * n..].to_vec(), e[..2 * n].to_vec()].concat();
    let m = cases::check_all_gather(DType::F16, 2, n, &e, &swapped).unwrap();
    assert_eq!((m.index, m.slot), (0, Some(0)));
    assert_eq!(
        m.note.as_deref(),
        Some("slot 0 holds rank 1's data; slot 1 holds rank 0's data")
    );
}

// ---------------------------------------------------------------- bandwidth arithmetic

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-9 * b.abs().max(1.0), "{a} != {b}");
}

#[test]
fn algbw_and_busbw_follow_nccl_tests() {
    // 64 MiB all_reduce in 248.17 µs on 2 ranks: algbw = S/t, busbw = algbw × 2(n−1)/n.
    close(
        cases::algbw_gbs(67_108_864, 248.17),
        67_108_864.0 / 248.17e-6 / 1e9,
    );
    close(
        cases::busbw_gbs(Collective::AllReduce, 2, 67_108_864, 248.17),
        67_108_864.0 / 248.17e-6 / 1e9,
    );
    close(
        cases::busbw_gbs(Collective::AllReduce, 8, 1_000, 1.0),
        1.0 * 1.75,
    );
    // all_gather: S counts every rank's slot, busbw = algbw × (n−1)/n.
    close(cases::busbw_gbs(Collective::AllGather, 2, 1_000, 1.0), 0.5);
    close(
        cases::busbw_gbs(Collective::AllGather, 8, 1_000, 1.0),
        0.875,
    );
    assert_eq!(cases::algbw_gbs(100, 0.0), 0.0);
}

#[test]
fn report_row_bandwidth_uses_the_table_size() {
    let list = cases::case_list(2, 1 << 20).unwrap();
    let ag = cases::find_case(&list, "all_gather-f32-large-out").unwrap();
    let mut row = CaseReport::new(ag, 2);
    assert_eq!((row.bytes, row.count), (1 << 20, 1 << 18));
    row.finish(
        2,
        10.0,
        vec![RankCheck {
            rank: 0,
            mismatch: None,
        }],
    );
    close(row.algbw_gbs.unwrap(), (1u64 << 20) as f64 / 10e-6 / 1e9);
    close(row.busbw_gbs.unwrap(), row.algbw_gbs.unwrap() / 2.0);
    // The slower rank's time counts.
    row.finish(
        2,
        20.0,
        vec![RankCheck {
            rank: 1,
            mismatch: None,
        }],
    );
    assert_eq!(row.time_us, Some(20.0));
    assert_eq!(row.status, CaseStatus::Ok);
}
