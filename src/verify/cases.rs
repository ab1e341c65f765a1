//! The verify cases and their ground truth: input construction, expected values, the bitwise checker.
//!
//! Inputs follow the nccl-tests idea of values whose every partial sum is exact: element `i` of rank
//! `r` is `k(r, i) × 2^e(i)` with a small integer `k(r, i) = ((h(i) + 3r) mod 29) − 14` and an
//! exponent `e(i) = ((h(i) >> 8) mod 9) − 4` shared by all ranks, where `h` is a multiplicative hash
//! of the index (so the pattern has no short period and misplaced chunks show up). For up to
//! [`MAX_RANKS`] ranks `|Σ k| ≤ 112` needs 7 significant bits, so every input and every sum is exact
//! in bfloat16 (8 bits), binary16 (11) and binary32 (24), in any summation order. `k(r, i)` differs
//! between ranks at every index, so an all_gather slot that holds another rank's data is wrong at
//! every element.
//!
//! Nothing here touches a GPU; the child process and the CPU tests share these functions.

use serde::{Deserialize, Serialize};

use super::floats::{bf16_bits_to_f32, f16_bits_to_f32, f32_to_bf16_bits, f32_to_f16_bits};

/// Most ranks the input construction keeps exact (`3r mod 29` distinct and `|Σ k| ≤ 8·14`).
pub const MAX_RANKS: usize = 8;

/// Element count of the small size: odd and not a multiple of any vector width, so tail handling runs.
pub const SMALL_COUNT: usize = 3001;

/// Default byte size of the large cases (all_reduce buffer; all_gather receive buffer), 64 MiB.
pub const DEFAULT_LARGE_BYTES: usize = 64 << 20;

/// The collectives verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    /// `ncclAllReduce` with `ncclSum`.
    AllReduce,
    /// `ncclAllGather`.
    AllGather,
}

impl Collective {
    /// `all_reduce` / `all_gather`.
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
        }
    }

    /// The nccl-tests bus-bandwidth factor for `nranks` ranks: AllReduce `2(n−1)/n`, AllGather
    /// `(n−1)/n` (nccl-tests `doc/PERFORMANCE.md`).
    pub fn bus_factor(self, nranks: usize) -> f64 {
        let n = nranks as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather => (n - 1.0) / n,
        }
    }
}

/// Element types verified, with their `ncclDataType_t` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DType {
    /// binary32, `ncclFloat32` = 7.
    F32,
    /// binary16, `ncclFloat16` = 6.
    F16,
    /// bfloat16, `ncclBfloat16` = 9.
    Bf16,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::Bf16 => 2,
        }
    }
    /// The `ncclDataType_t` value (nccl.h / rccl.h enum).
    pub fn nccl(self) -> i32 {
        match self {
            DType::F16 => 6,
            DType::F32 => 7,
            DType::Bf16 => 9,
        }
    }
    /// Short name used in case names (`f32`).
    pub fn short(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
        }
    }
    /// nccl-tests' column name (`float`, `half`, `bfloat16`).
    pub fn table_name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::F16 => "half",
            DType::Bf16 => "bfloat16",
        }
    }
    /// Bit pattern of an `f32` value in this type (round to nearest even).
    pub fn encode(self, v: f32) -> u32 {
        match self {
            DType::F32 => v.to_bits(),
            DType::F16 => f32_to_f16_bits(v) as u32,
            DType::Bf16 => f32_to_bf16_bits(v) as u32,
        }
    }
    /// Value of a bit pattern of this type, as `f32` (exact).
    pub fn decode(self, bits: u32) -> f32 {
        match self {
            DType::F32 => f32::from_bits(bits),
            DType::F16 => f16_bits_to_f32(bits as u16),
            DType::Bf16 => bf16_bits_to_f32(bits as u16),
        }
    }
}

/// Where the result goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Separate send and receive buffers.
    OutOfPlace,
    /// all_reduce: send = receive; all_gather: send = receive + rank × sendcount.
    InPlace,
}

impl Placement {
    /// `out` / `in`.
    pub fn short(self) -> &'static str {
        match self {
            Placement::OutOfPlace => "out",
            Placement::InPlace => "in",
        }
    }
}

/// Size class of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SizeClass {
    /// [`SMALL_COUNT`] elements per rank.
    Small,
    /// The large byte size (default [`DEFAULT_LARGE_BYTES`]).
    Large,
}

/// One verify case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Case {
    /// Position in the run (0-based); collectives are issued in this order on every rank.
    pub id: usize,
    /// The collective.
    pub coll: Collective,
    /// Element type.
    pub dtype: DType,
    /// Size class.
    pub size: SizeClass,
    /// In- or out-of-place.
    pub placement: Placement,
    /// Elements each rank sends (`count` of `ncclAllReduce`, `sendcount` of `ncclAllGather`).
    pub send_count: usize,
}

impl Case {
    /// Stable name, e.g. `all_reduce-f32-large-out`.
    pub fn name(&self) -> String {
        let size = match self.size {
            SizeClass::Small => "small",
            SizeClass::Large => "large",
        };
        format!(
            "{}-{}-{}-{}",
            self.coll.name(),
            self.dtype.short(),
            size,
            self.placement.short()
        )
    }
    /// Elements in each rank's receive buffer.
    pub fn recv_count(&self, nranks: usize) -> usize {
        match self.coll {
            Collective::AllReduce => self.send_count,
            Collective::AllGather => self.send_count * nranks,
        }
    }
    /// Bytes each rank sends.
    pub fn send_bytes(&self) -> usize {
        self.send_count * self.dtype.size()
    }
    /// Bytes of each rank's receive buffer.
    pub fn recv_bytes(&self, nranks: usize) -> usize {
        self.recv_count(nranks) * self.dtype.size()
    }
    /// The nccl-tests "size" S in bytes: all_reduce `count × typesize`, all_gather
    /// `sendcount × typesize × nranks`. algbw = S / time.
    pub fn table_bytes(&self, nranks: usize) -> usize {
        self.recv_bytes(nranks)
    }
    /// The nccl-tests "count" column (elements of S).
    pub fn table_count(&self, nranks: usize) -> usize {
        self.recv_count(nranks)
    }
}

/// The case list: {all_reduce, all_gather} × {f32, f16, bf16} × {small, large} × {out, in}, 24 cases.
///
/// `large_bytes` is the all_reduce buffer size and the all_gather receive size (nccl-tests' S), so
/// the large rows line up with an `all_reduce_perf`/`all_gather_perf` row of the same size.
/// Errors when `large_bytes` does not split into whole elements per rank.
pub fn case_list(nranks: usize, large_bytes: usize) -> anyhow::Result<Vec<Case>> {
    let mut out = Vec::new();
    for coll in [Collective::AllReduce, Collective::AllGather] {
        for dtype in [DType::F32, DType::F16, DType::Bf16] {
            for size in [SizeClass::Small, SizeClass::Large] {
                let send_count = match (size, coll) {
                    (SizeClass::Small, _) => SMALL_COUNT,
                    (SizeClass::Large, Collective::AllReduce) => large_bytes / dtype.size(),
                    (SizeClass::Large, Collective::AllGather) => {
                        large_bytes / dtype.size() / nranks
                    }
                };
                let per = match coll {
                    Collective::AllReduce => 1,
                    Collective::AllGather => nranks,
                };
                if send_count == 0
                    || send_count * per * dtype.size() != large_bytes && size == SizeClass::Large
                {
                    anyhow::bail!(
                        "large size {large_bytes} bytes does not split into whole {} elements over {nranks} ranks",
                        dtype.short()
                    );
                }
                for placement in [Placement::OutOfPlace, Placement::InPlace] {
                    out.push(Case {
                        id: out.len(),
                        coll,
                        dtype,
                        size,
                        placement,
                        send_count,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Find a case by name (`all_reduce-f32-large-out`) or by number.
pub fn find_case<'a>(cases: &'a [Case], key: &str) -> Option<&'a Case> {
    if let Ok(n) = key.parse::<usize>() {
        return cases.get(n);
    }
    cases.iter().find(|c| c.name() == key)
}

/// The index hash `h(i)`: the high half of `i × 2^64/φ` (Fibonacci hashing).
pub fn index_hash(index: usize) -> u32 {
    ((index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
}

/// The integer mantissa `k(r, i)` of element `i` on rank `r`, in `-14..=14`.
pub fn input_k(rank: usize, index: usize) -> i32 {
    ((index_hash(index) as usize + 3 * rank) % 29) as i32 - 14
}

/// The shared exponent `e(i)`, in `-4..=4`.
pub fn input_e(index: usize) -> i32 {
    ((index_hash(index) >> 8) % 9) as i32 - 4
}

/// Element `i` of rank `r`'s input, as an exact `f32`.
pub fn input_value(rank: usize, index: usize) -> f32 {
    input_k(rank, index) as f32 * (input_e(index) as f32).exp2()
}

/// Encoded bits of `k × 2^e` for `k` in `-kmax..=kmax`, `e` in `-4..=4`: row `e + 4`, column `k + kmax`.
fn encode_table(dtype: DType, kmax: i32) -> Vec<u32> {
    let mut t = Vec::with_capacity(9 * (2 * kmax as usize + 1));
    for e in -4..=4 {
        for k in -kmax..=kmax {
            t.push(dtype.encode(k as f32 * (e as f32).exp2()));
        }
    }
    t
}

/// `count` elements, element `i` taken from `table[f(i)]`, as little-endian `dtype` bytes. Large
/// buffers are filled by several threads (the large cases are 16–64 Mi elements).
fn fill(dtype: DType, count: usize, table: &[u32], f: impl Fn(usize) -> usize + Sync) -> Vec<u8> {
    let w = dtype.size();
    let mut out = vec![0u8; count * w];
    let fill_part = |first: usize, part: &mut [u8]| {
        for (j, c) in part.chunks_exact_mut(w).enumerate() {
            let bits = table[f(first + j)];
            if w == 4 {
                c.copy_from_slice(&bits.to_le_bytes());
            } else {
                c.copy_from_slice(&(bits as u16).to_le_bytes());
            }
        }
    };
    const PART: usize = 1 << 20;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(16);
    if count <= PART || threads == 1 {
        fill_part(0, &mut out);
        return out;
    }
    let per = count.div_ceil(threads).max(PART);
    std::thread::scope(|sc| {
        for (t, part) in out.chunks_mut(per * w).enumerate() {
            let fill_part = &fill_part;
            sc.spawn(move || fill_part(t * per, part));
        }
    });
    out
}

/// Rank `rank`'s input: `count` elements of `dtype`, little-endian bytes as uploaded to the GPU.
/// Element `i` is [`input_value`]`(rank, i)` rounded to `dtype` (exact by construction).
pub fn input_bytes(dtype: DType, rank: usize, count: usize) -> Vec<u8> {
    let table = encode_table(dtype, 14);
    fill(dtype, count, &table, |i| {
        ((input_e(i) + 4) * 29 + input_k(rank, i) + 14) as usize
    })
}

/// Expected all_reduce(sum) result over `nranks` ranks: `(Σ_r k(r, i)) × 2^e(i)`, summed in integers
/// and scaled once, so it shares no arithmetic or rounding with any device path.
pub fn all_reduce_expected(dtype: DType, nranks: usize, count: usize) -> Vec<u8> {
    let kmax = 14 * nranks as i32;
    let table = encode_table(dtype, kmax);
    let width = (2 * kmax + 1) as usize;
    fill(dtype, count, &table, |i| {
        let k: i32 = (0..nranks).map(|r| input_k(r, i)).sum();
        (input_e(i) + 4) as usize * width + (k + kmax) as usize
    })
}

/// Expected all_gather receive buffer: rank `s`'s input in slot `s`, for every slot.
pub fn all_gather_expected(dtype: DType, nranks: usize, send_count: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(send_count * nranks * dtype.size());
    for s in 0..nranks {
        out.extend_from_slice(&input_bytes(dtype, s, send_count));
    }
    out
}

/// The sentinel the receive buffer is filled with before a collective (all bytes `0xA5`), so an
/// element the library never wrote is caught.
pub const SENTINEL_BYTE: u8 = 0xA5;

/// One element value in a report: its bits and what they mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Element {
    /// Raw bit pattern (zero-extended).
    pub bits: u32,
    /// Its value, printed (`3.5`, `NaN`).
    pub value: String,
}

impl Element {
    fn new(dtype: DType, bits: u32) -> Self {
        Element {
            bits,
            value: format!("{}", dtype.decode(bits)),
        }
    }
    /// `3.5 (0x4060)`, hex width from the type.
    pub fn display(&self, dtype: DType) -> String {
        format!(
            "{} (0x{:0w$x})",
            self.value,
            self.bits,
            w = dtype.size() * 2
        )
    }
}

/// A failed bitwise check: the first wrong element and how many were wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    /// Index of the first wrong element in the receive buffer.
    pub index: usize,
    /// all_gather: the slot (source rank) that index falls in.
    pub slot: Option<usize>,
    /// Expected element.
    pub expected: Element,
    /// Element found.
    pub got: Element,
    /// Number of wrong elements.
    pub wrong: usize,
    /// Elements compared.
    pub count: usize,
    /// What the wrong data looks like, when recognisable (e.g. "slot 1 holds rank 0's data").
    pub note: Option<String>,
}

fn element(dtype: DType, bytes: &[u8], i: usize) -> u32 {
    let w = dtype.size();
    let b = &bytes[i * w..i * w + w];
    match w {
        4 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        _ => u16::from_le_bytes([b[0], b[1]]) as u32,
    }
}

/// Bitwise, element-by-element comparison of `got` against `expected` (both little-endian `dtype`
/// elements). Returns `None` when every element matches, else the first wrong index, both values and
/// the number of wrong elements. A length difference counts the missing elements as wrong.
pub fn check(dtype: DType, expected: &[u8], got: &[u8]) -> Option<Mismatch> {
    if expected == got {
        return None;
    }
    let w = dtype.size();
    let n = expected.len() / w;
    let m = got.len() / w;
    let mut first = None;
    let mut wrong = n.abs_diff(m);
    // Compare in blocks first: the common case is a few wrong elements in a large buffer.
    const BLOCK: usize = 4096;
    let common = n.min(m);
    let mut start = 0;
    while start < common {
        let end = (start + BLOCK).min(common);
        if expected[start * w..end * w] != got[start * w..end * w] {
            for i in start..end {
                if element(dtype, expected, i) != element(dtype, got, i) {
                    wrong += 1;
                    if first.is_none() {
                        first = Some(i);
                    }
                }
            }
        }
        start = end;
    }
    let index = first.unwrap_or(common);
    let e = if index < n {
        element(dtype, expected, index)
    } else {
        0
    };
    let g = if index < m {
        element(dtype, got, index)
    } else {
        0
    };
    Some(Mismatch {
        index,
        slot: None,
        expected: Element::new(dtype, e),
        got: Element::new(dtype, g),
        wrong,
        count: n,
        note: None,
    })
}

/// all_gather check: the whole receive buffer bitwise against `expected` (rank `s`'s input in slot
/// `s`), then, for a wrong slot, which rank's data it holds instead (catches "rank 0's data in every
/// slot") or whether it was left unwritten.
pub fn check_all_gather(
    dtype: DType,
    nranks: usize,
    send_count: usize,
    expected: &[u8],
    got: &[u8],
) -> Option<Mismatch> {
    let mut mm = check(dtype, expected, got)?;
    if send_count == 0 {
        return Some(mm);
    }
    let slot = mm.index / send_count;
    mm.slot = Some(slot);
    let slot_bytes = send_count * dtype.size();
    let lo = slot * slot_bytes;
    let hi = (lo + slot_bytes).min(got.len());
    if lo < hi {
        let got_slot = &got[lo..hi];
        let mut notes = Vec::new();
        if got_slot.iter().all(|&b| b == SENTINEL_BYTE) {
            notes.push(format!("slot {slot} was never written"));
        } else {
            for r in (0..nranks).filter(|&r| r != slot) {
                if got_slot == &expected[r * slot_bytes..(r + 1) * slot_bytes] {
                    notes.push(format!("slot {slot} holds rank {r}'s data"));
                }
            }
        }
        // Name every slot that holds another rank's data, not only the first wrong one.
        for s in (0..nranks).filter(|&s| s != slot) {
            let (a, b) = (s * slot_bytes, (s + 1) * slot_bytes);
            if b > got.len() || got[a..b] == expected[a..b] {
                continue;
            }
            for r in (0..nranks).filter(|&r| r != s) {
                if got[a..b] == expected[r * slot_bytes..(r + 1) * slot_bytes] {
                    notes.push(format!("slot {s} holds rank {r}'s data"));
                }
            }
        }
        if !notes.is_empty() {
            mm.note = Some(notes.join("; "));
        }
    }
    Some(mm)
}

/// Corrupt the expected element at `index` (flip its lowest bit), for `--inject-wrong-expectation`:
/// the run must then report exactly that index. Errors when `index` is out of range.
pub fn corrupt_expected(dtype: DType, expected: &mut [u8], index: usize) -> anyhow::Result<()> {
    let w = dtype.size();
    let n = expected.len() / w;
    if index >= n {
        anyhow::bail!("injected index {index} is outside the case's {n} elements");
    }
    expected[index * w] ^= 1;
    Ok(())
}

/// nccl-tests' algorithm bandwidth in GB/s (10^9 bytes per second): `bytes / time`.
pub fn algbw_gbs(bytes: usize, time_us: f64) -> f64 {
    if time_us <= 0.0 {
        return 0.0;
    }
    bytes as f64 / 1.0e3 / time_us
}

/// nccl-tests' bus bandwidth in GB/s: algbw × the collective's factor ([`Collective::bus_factor`]).
pub fn busbw_gbs(coll: Collective, nranks: usize, bytes: usize, time_us: f64) -> f64 {
    algbw_gbs(bytes, time_us) * coll.bus_factor(nranks)
}
