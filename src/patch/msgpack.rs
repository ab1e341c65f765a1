//! Length-preserving rewrite of an `NT_AMDGPU_METADATA` MessagePack document: replace a few
//! strings and make up the difference in length by re-encoding nearby values with wider
//! MessagePack formats that carry the same value (fixstr → str8/16/32, positive fixint → uint
//! 8/16/32/64, fixmap → map16/32, …).
//!
//! Every byte outside the edited and widened items is copied from the original. Values are read
//! with `rmp`'s public readers, edited items are written with `rmp`'s explicit-width writers
//! (`write_u16`, …) and `Marker`s, and the result is checked by decoding both documents with
//! `rmpv` and comparing them value for value.
//!
//! Source: the MessagePack specification (formats and their widths); llvm `AMDGPUUsage.rst`
//! ("Code Object V3 Metadata" and later: the note descriptor is one MessagePack map).

use std::collections::BTreeMap;

use rmp::encode::RmpWrite;
use rmp::Marker;

/// One parsed MessagePack item with its byte span in the original document.
#[derive(Debug, Clone)]
pub struct Item {
    /// Offset of the first byte (the marker).
    pub start: usize,
    /// Offset just past the header (marker + length or value bytes for scalars without payload).
    pub header_end: usize,
    /// Offset just past the whole item, children included.
    pub end: usize,
    /// The format used in the original.
    pub marker: Marker,
    /// The decoded shape.
    pub kind: Kind,
}

/// The decoded shape of an [`Item`].
#[derive(Debug, Clone)]
pub enum Kind {
    /// Unsigned integer formats (positive fixint, uint 8–64) or a non-negative signed format.
    UInt(u64),
    /// Negative integers (negative fixint, int 8–64).
    Int(i64),
    /// A string (raw bytes; metadata strings are ASCII).
    Str(Vec<u8>),
    /// An array.
    Array(Vec<Item>),
    /// A map, in document order.
    Map(Vec<(Item, Item)>),
    /// Anything else (nil, bool, float, bin, ext): never edited, copied verbatim.
    Other,
}

impl Item {
    /// The string value, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Str(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The integer value, if this is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self.kind {
            Kind::UInt(v) => Some(v),
            Kind::Int(v) if v >= 0 => Some(v as u64),
            _ => None,
        }
    }

    /// Look up `key` in a map with string keys.
    pub fn get(&self, key: &str) -> Option<&Item> {
        match &self.kind {
            Kind::Map(kv) => kv
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Item]> {
        match &self.kind {
            Kind::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Parse a whole document. Errors: malformed or truncated MessagePack, trailing bytes after the
/// root item, nesting deeper than 64.
pub fn parse(buf: &[u8]) -> Result<Item, String> {
    let item = parse_at(buf, 0, 0)?;
    if item.end != buf.len() {
        return Err(format!(
            "{} trailing bytes after the MessagePack document",
            buf.len() - item.end
        ));
    }
    Ok(item)
}

/// Most elements reserved up front for one array or map, whatever its header claims.
const RESERVE_ITEMS: usize = 1024;

fn parse_at(buf: &[u8], pos: usize, depth: usize) -> Result<Item, String> {
    if depth > 64 {
        return Err("MessagePack nesting deeper than 64".into());
    }
    let first = *buf
        .get(pos)
        .ok_or_else(|| format!("truncated MessagePack at byte {pos}"))?;
    let marker = Marker::from_u8(first);
    let mut rd = &buf[pos..];
    let total = rd.len();
    let bad = |e: &dyn std::fmt::Display| format!("bad MessagePack at byte {pos}: {e}");
    let consumed = |rd: &[u8]| total - rd.len();
    let item = |header_end: usize, end: usize, kind: Kind| Item {
        start: pos,
        header_end,
        end,
        marker,
        kind,
    };
    match marker {
        Marker::FixPos(_) | Marker::U8 | Marker::U16 | Marker::U32 | Marker::U64 => {
            let v: u64 = rmp::decode::read_int(&mut rd).map_err(|e| bad(&e))?;
            let end = pos + consumed(rd);
            Ok(item(end, end, Kind::UInt(v)))
        }
        Marker::FixNeg(_) | Marker::I8 | Marker::I16 | Marker::I32 | Marker::I64 => {
            let v: i64 = rmp::decode::read_int(&mut rd).map_err(|e| bad(&e))?;
            let end = pos + consumed(rd);
            Ok(item(
                end,
                end,
                if v >= 0 {
                    Kind::UInt(v as u64)
                } else {
                    Kind::Int(v)
                },
            ))
        }
        Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
            let n = rmp::decode::read_str_len(&mut rd).map_err(|e| bad(&e))? as usize;
            let header_end = pos + consumed(rd);
            let end = header_end
                .checked_add(n)
                .filter(|&e| e <= buf.len())
                .ok_or_else(|| format!("string at byte {pos} runs past the end"))?;
            Ok(item(
                header_end,
                end,
                Kind::Str(buf[header_end..end].to_vec()),
            ))
        }
        Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
            let n = rmp::decode::read_array_len(&mut rd).map_err(|e| bad(&e))? as usize;
            let header_end = pos + consumed(rd);
            if n > buf.len() - header_end {
                return Err(format!(
                    "array at byte {pos} claims {n} elements, more than the bytes left"
                ));
            }
            let mut at = header_end;
            // Bounded by the bytes left, and reserved only up to a small start: the vector grows
            // with the elements actually parsed.
            let mut v = Vec::with_capacity(n.min(RESERVE_ITEMS));
            for _ in 0..n {
                let c = parse_at(buf, at, depth + 1)?;
                at = c.end;
                v.push(c);
            }
            Ok(item(header_end, at, Kind::Array(v)))
        }
        Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
            let n = rmp::decode::read_map_len(&mut rd).map_err(|e| bad(&e))? as usize;
            let header_end = pos + consumed(rd);
            if n > (buf.len() - header_end) / 2 {
                return Err(format!(
                    "map at byte {pos} claims {n} entries, more than the bytes left"
                ));
            }
            let mut at = header_end;
            let mut v = Vec::with_capacity(n.min(RESERVE_ITEMS));
            for _ in 0..n {
                let k = parse_at(buf, at, depth + 1)?;
                let val = parse_at(buf, k.end, depth + 1)?;
                at = val.end;
                v.push((k, val));
            }
            Ok(item(header_end, at, Kind::Map(v)))
        }
        Marker::Reserved => Err(format!("reserved MessagePack marker 0xc1 at byte {pos}")),
        _ => {
            // nil, bool, float, bin, ext: let rmpv measure the item; it is copied verbatim.
            rmpv::decode::read_value(&mut rd).map_err(|e| bad(&e))?;
            let end = pos + consumed(rd);
            Ok(item(end, end, Kind::Other))
        }
    }
}

/// Planned change of one item: a new format (wider, or narrower for a replaced string) and,
/// for strings, new contents.
#[derive(Debug, Clone)]
struct Edit {
    marker: Marker,
    new_str: Option<Vec<u8>>,
}

/// A set of string replacements to apply to one document, keeping its byte length.
#[derive(Debug, Default)]
pub struct Rewrite {
    edits: BTreeMap<usize, Edit>,
    /// Per replacement: the replaced item and the items (by start offset) that may be widened to
    /// make up its length, best first. Each replacement is balanced by its own neighbours so the
    /// bytes between two replacements keep their offsets.
    groups: Vec<(usize, Vec<usize>)>,
}

/// The wider formats an item can take, with the number of bytes each adds over `current`.
fn widenings(item: &Item, current: Marker) -> Vec<(Marker, usize)> {
    let width = |m: Marker| -> Option<usize> {
        Some(match m {
            Marker::FixPos(_)
            | Marker::FixNeg(_)
            | Marker::FixStr(_)
            | Marker::FixArray(_)
            | Marker::FixMap(_) => 0,
            Marker::U8 | Marker::I8 | Marker::Str8 => 1,
            Marker::U16 | Marker::I16 | Marker::Str16 | Marker::Array16 | Marker::Map16 => 2,
            Marker::U32 | Marker::I32 | Marker::Str32 | Marker::Array32 | Marker::Map32 => 4,
            Marker::U64 | Marker::I64 => 8,
            _ => return None,
        })
    };
    let Some(w0) = width(current) else {
        return Vec::new();
    };
    let options: &[Marker] = match (&item.kind, current) {
        (
            Kind::UInt(v),
            Marker::FixPos(_) | Marker::U8 | Marker::U16 | Marker::U32 | Marker::U64,
        ) => {
            let v = *v;
            &[Marker::U8, Marker::U16, Marker::U32, Marker::U64][(if v <= 0xff {
                0
            } else if v <= 0xffff {
                1
            } else if v <= 0xffff_ffff {
                2
            } else {
                3
            })..]
        }
        (Kind::Int(_) | Kind::UInt(_), _) => &[Marker::I8, Marker::I16, Marker::I32, Marker::I64],
        (Kind::Str(_), _) => &[Marker::Str8, Marker::Str16, Marker::Str32],
        (Kind::Array(_), _) => &[Marker::Array16, Marker::Array32],
        (Kind::Map(_), _) => &[Marker::Map16, Marker::Map32],
        (Kind::Other, _) => &[],
    };
    options
        .iter()
        .filter_map(|&m| {
            let w = width(m)?;
            (w > w0 && fits(item, m)).then(|| (m, w - w0))
        })
        .collect()
}

/// Whether `item`'s value (or length) can be written in format `m`.
fn fits(item: &Item, m: Marker) -> bool {
    let len = |n: usize| match m {
        Marker::Str8 => n <= 0xff,
        Marker::Str16 | Marker::Array16 | Marker::Map16 => n <= 0xffff,
        Marker::Str32 | Marker::Array32 | Marker::Map32 => n <= 0xffff_ffff,
        _ => false,
    };
    match (&item.kind, m) {
        (Kind::UInt(v), Marker::U8) => *v <= 0xff,
        (Kind::UInt(v), Marker::U16) => *v <= 0xffff,
        (Kind::UInt(v), Marker::U32) => *v <= 0xffff_ffff,
        (Kind::UInt(_), Marker::U64) => true,
        (Kind::UInt(v), Marker::I8) => *v <= i8::MAX as u64,
        (Kind::UInt(v), Marker::I16) => *v <= i16::MAX as u64,
        (Kind::UInt(v), Marker::I32) => *v <= i32::MAX as u64,
        (Kind::UInt(v), Marker::I64) => *v <= i64::MAX as u64,
        (Kind::Int(v), Marker::I8) => *v >= i8::MIN as i64,
        (Kind::Int(v), Marker::I16) => *v >= i16::MIN as i64,
        (Kind::Int(v), Marker::I32) => *v >= i32::MIN as i64,
        (Kind::Int(_), Marker::I64) => true,
        (Kind::Str(s), _) => len(s.len()),
        (Kind::Array(a), _) => len(a.len()),
        (Kind::Map(kv), _) => len(kv.len()),
        _ => false,
    }
}

/// The encoded length of a string of `n` bytes in the smallest format.
fn min_str_marker(n: usize) -> Marker {
    if n < 32 {
        Marker::FixStr(n as u8)
    } else if n <= 0xff {
        Marker::Str8
    } else if n <= 0xffff {
        Marker::Str16
    } else {
        Marker::Str32
    }
}

fn header_len(m: Marker) -> usize {
    match m {
        Marker::FixStr(_)
        | Marker::FixArray(_)
        | Marker::FixMap(_)
        | Marker::FixPos(_)
        | Marker::FixNeg(_) => 1,
        Marker::U8 | Marker::I8 | Marker::Str8 => 2,
        Marker::U16 | Marker::I16 | Marker::Str16 | Marker::Array16 | Marker::Map16 => 3,
        Marker::U32 | Marker::I32 | Marker::Str32 | Marker::Array32 | Marker::Map32 => 5,
        Marker::U64 | Marker::I64 => 9,
        _ => 0,
    }
}

impl Rewrite {
    /// Replace the string `item` with `new` (written in its smallest format first). The bytes
    /// saved are made up by widening `neighbours` (best first; the replaced item itself may be
    /// among them), then, if those cannot absorb it all, any item of the document in order.
    pub fn replace_str(&mut self, item: &Item, new: &str, neighbours: &[&Item]) {
        self.edits.insert(
            item.start,
            Edit {
                marker: min_str_marker(new.len()),
                new_str: Some(new.as_bytes().to_vec()),
            },
        );
        self.groups
            .push((item.start, neighbours.iter().map(|n| n.start).collect()));
    }

    /// Widen items from `order` (each at most once more) until `need` bytes are absorbed; return
    /// what is left. Each step takes the widest format that does not overshoot.
    fn widen(&mut self, index: &BTreeMap<usize, &Item>, order: &[usize], mut need: usize) -> usize {
        for start in order {
            if need == 0 {
                break;
            }
            let it = index[start];
            let current = self.edits.get(start).map_or(it.marker, |e| e.marker);
            if let Some((m, add)) = widenings(it, current)
                .into_iter()
                .filter(|(_, add)| *add <= need)
                .max_by_key(|(_, add)| *add)
            {
                let e = self.edits.entry(*start).or_insert(Edit {
                    marker: it.marker,
                    new_str: None,
                });
                e.marker = m;
                need -= add;
            }
        }
        need
    }

    /// Apply the edits to `buf` (whose parse is `root`) and return a document of exactly
    /// `buf.len()` bytes.
    ///
    /// Errors: the replacements make the document longer, or not enough widenable items exist to
    /// make up the difference; the re-encoded document does not decode to the expected values.
    pub fn apply(mut self, buf: &[u8], root: &Item) -> Result<Vec<u8>, String> {
        let mut index: BTreeMap<usize, &Item> = BTreeMap::new();
        collect(root, &mut index);
        let mut leftover = 0usize;
        let groups = std::mem::take(&mut self.groups);
        for (start, neighbours) in &groups {
            let it = index[start];
            let e = &self.edits[start];
            let new_len = header_len(e.marker) + e.new_str.as_ref().map_or(0, |s| s.len());
            let saved = (it.end - it.start) as i64 - new_len as i64;
            if saved < 0 {
                return Err(format!(
                    "the replacement for the string at byte {start} is {} bytes longer",
                    -saved
                ));
            }
            leftover += self.widen(&index, neighbours, saved as usize);
        }
        let all: Vec<usize> = index.keys().copied().collect();
        let remaining = self.widen(&index, &all, leftover);
        if remaining != 0 {
            return Err(format!(
                "cannot re-encode the metadata to its original length ({remaining} bytes short)"
            ));
        }
        let mut out = Vec::with_capacity(buf.len());
        emit(buf, root, &self.edits, &mut out)
            .map_err(|e| format!("re-encoding the metadata: {e}"))?;
        if out.len() != buf.len() {
            return Err(format!(
                "internal: re-encoded metadata is {} bytes, expected {}",
                out.len(),
                buf.len()
            ));
        }
        // Check: the new document decodes to the old one with only the replaced strings changed.
        let mut expected = rmpv::decode::read_value(&mut &buf[..]).map_err(|e| e.to_string())?;
        let replaced: BTreeMap<usize, &[u8]> = self
            .edits
            .iter()
            .filter_map(|(s, e)| e.new_str.as_deref().map(|n| (*s, n)))
            .collect();
        replace_in_value(&mut expected, root, &replaced);
        let got = rmpv::decode::read_value(&mut &out[..])
            .map_err(|e| format!("re-encoded metadata does not decode: {e}"))?;
        if got != expected {
            return Err("internal: re-encoded metadata differs from the intended values".into());
        }
        Ok(out)
    }
}

fn collect<'a>(it: &'a Item, index: &mut BTreeMap<usize, &'a Item>) {
    index.insert(it.start, it);
    match &it.kind {
        Kind::Array(a) => a.iter().for_each(|c| collect(c, index)),
        Kind::Map(kv) => kv.iter().for_each(|(k, v)| {
            collect(k, index);
            collect(v, index)
        }),
        _ => {}
    }
}

/// Mirror the string replacements into an `rmpv` value tree that has the same shape as `it`.
fn replace_in_value(v: &mut rmpv::Value, it: &Item, replaced: &BTreeMap<usize, &[u8]>) {
    if let Some(new) = replaced.get(&it.start) {
        *v = rmpv::Value::String(String::from_utf8_lossy(new).into_owned().into());
        return;
    }
    match (v, &it.kind) {
        (rmpv::Value::Array(vs), Kind::Array(items)) => {
            for (v, i) in vs.iter_mut().zip(items) {
                replace_in_value(v, i, replaced);
            }
        }
        (rmpv::Value::Map(vs), Kind::Map(items)) => {
            for ((vk, vv), (ik, iv)) in vs.iter_mut().zip(items) {
                replace_in_value(vk, ik, replaced);
                replace_in_value(vv, iv, replaced);
            }
        }
        _ => {}
    }
}

fn dirty(it: &Item, edits: &BTreeMap<usize, Edit>) -> bool {
    edits.range(it.start..it.end).next().is_some()
}

fn emit(
    buf: &[u8],
    it: &Item,
    edits: &BTreeMap<usize, Edit>,
    out: &mut Vec<u8>,
) -> Result<(), std::io::Error> {
    if !dirty(it, edits) {
        out.extend_from_slice(&buf[it.start..it.end]);
        return Ok(());
    }
    let edit = edits.get(&it.start);
    match &it.kind {
        Kind::UInt(v) => match edit.map_or(it.marker, |e| e.marker) {
            Marker::U8 => rmp::encode::write_u8(out, *v as u8).map_err(io)?,
            Marker::U16 => rmp::encode::write_u16(out, *v as u16).map_err(io)?,
            Marker::U32 => rmp::encode::write_u32(out, *v as u32).map_err(io)?,
            Marker::U64 => rmp::encode::write_u64(out, *v).map_err(io)?,
            Marker::I8 => rmp::encode::write_i8(out, *v as i8).map_err(io)?,
            Marker::I16 => rmp::encode::write_i16(out, *v as i16).map_err(io)?,
            Marker::I32 => rmp::encode::write_i32(out, *v as i32).map_err(io)?,
            Marker::I64 => rmp::encode::write_i64(out, *v as i64).map_err(io)?,
            _ => out.extend_from_slice(&buf[it.start..it.end]),
        },
        Kind::Int(v) => match edit.map_or(it.marker, |e| e.marker) {
            Marker::I8 => rmp::encode::write_i8(out, *v as i8).map_err(io)?,
            Marker::I16 => rmp::encode::write_i16(out, *v as i16).map_err(io)?,
            Marker::I32 => rmp::encode::write_i32(out, *v as i32).map_err(io)?,
            Marker::I64 => rmp::encode::write_i64(out, *v).map_err(io)?,
            _ => out.extend_from_slice(&buf[it.start..it.end]),
        },
        Kind::Str(s) => {
            let e = edit.expect("a dirty string is edited");
            let data = e.new_str.as_deref().unwrap_or(s);
            write_len_header(out, e.marker, data.len())?;
            out.write_bytes(data)?;
        }
        Kind::Array(a) => {
            match edit {
                Some(e) => write_len_header(out, e.marker, a.len())?,
                None => out.extend_from_slice(&buf[it.start..it.header_end]),
            }
            for c in a {
                emit(buf, c, edits, out)?;
            }
        }
        Kind::Map(kv) => {
            match edit {
                Some(e) => write_len_header(out, e.marker, kv.len())?,
                None => out.extend_from_slice(&buf[it.start..it.header_end]),
            }
            for (k, v) in kv {
                emit(buf, k, edits, out)?;
                emit(buf, v, edits, out)?;
            }
        }
        Kind::Other => out.extend_from_slice(&buf[it.start..it.end]),
    }
    Ok(())
}

fn io<E: std::fmt::Display>(e: E) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Write a string, array or map header in exactly the format `m`.
fn write_len_header(out: &mut Vec<u8>, m: Marker, n: usize) -> Result<(), std::io::Error> {
    match m {
        Marker::FixStr(_) => out.write_u8(Marker::FixStr(n as u8).to_u8()),
        Marker::FixArray(_) => out.write_u8(Marker::FixArray(n as u8).to_u8()),
        Marker::FixMap(_) => out.write_u8(Marker::FixMap(n as u8).to_u8()),
        Marker::Str8 => {
            out.write_u8(m.to_u8())?;
            out.write_u8(n as u8)
        }
        Marker::Str16 | Marker::Array16 | Marker::Map16 => {
            out.write_u8(m.to_u8())?;
            out.write_bytes(&(n as u16).to_be_bytes())
        }
        Marker::Str32 | Marker::Array32 | Marker::Map32 => {
            out.write_u8(m.to_u8())?;
            out.write_bytes(&(n as u32).to_be_bytes())
        }
        _ => Err(io(format!("{m:?} is not a length header"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Vec<u8> {
        let v = rmpv::Value::Map(vec![(
            "amdhsa.kernels".into(),
            rmpv::Value::Array(vec![rmpv::Value::Map(vec![
                (".name".into(), "k".into()),
                (
                    ".args".into(),
                    rmpv::Value::Array(vec![rmpv::Value::Map(vec![
                        (".offset".into(), 80.into()),
                        (".size".into(), 8.into()),
                        (".value_kind".into(), "hidden_hostcall_buffer".into()),
                    ])]),
                ),
            ])]),
        )]);
        let mut b = Vec::new();
        rmpv::encode::write_value(&mut b, &v).unwrap();
        b
    }

    #[test]
    fn same_length_same_values() {
        let b = doc();
        let root = parse(&b).unwrap();
        let arg = &root.get("amdhsa.kernels").unwrap().as_array().unwrap()[0]
            .get(".args")
            .unwrap()
            .as_array()
            .unwrap()[0];
        let mut rw = Rewrite::default();
        let vk = arg.get(".value_kind").unwrap();
        let mut near = vec![
            vk,
            arg.get(".offset").unwrap(),
            arg.get(".size").unwrap(),
            arg,
        ];
        if let Kind::Map(kv) = &arg.kind {
            near.extend(kv.iter().map(|(k, _)| k));
        }
        rw.replace_str(vk, "hidden_none", &near);
        let out = rw.apply(&b, &root).unwrap();
        assert_eq!(out.len(), b.len());
        let re = parse(&out).unwrap();
        let arg2 = &re.get("amdhsa.kernels").unwrap().as_array().unwrap()[0]
            .get(".args")
            .unwrap()
            .as_array()
            .unwrap()[0];
        assert_eq!(
            arg2.get(".value_kind").unwrap().as_str(),
            Some("hidden_none")
        );
        assert_eq!(arg2.get(".offset").unwrap().as_u64(), Some(80));
        assert_eq!(arg2.get(".size").unwrap().as_u64(), Some(8));
        // Bytes outside the edited arg map are untouched.
        assert_eq!(out[..arg.start], b[..arg.start]);
        assert_eq!(out[arg.end..], b[arg.end..]);
    }

    #[test]
    fn refuses_when_nothing_can_widen() {
        // A lone string: replacing it leaves 11 bytes that nothing else can absorb beyond str32.
        let mut b = Vec::new();
        rmpv::encode::write_value(&mut b, &rmpv::Value::from("hidden_hostcall_buffer")).unwrap();
        let root = parse(&b).unwrap();
        let mut rw = Rewrite::default();
        rw.replace_str(&root, "hidden_none", &[&root]);
        assert!(rw.apply(&b, &root).unwrap_err().contains("short"));
    }

    #[test]
    fn rejects_trailing_bytes_and_truncation() {
        let mut b = doc();
        b.push(0xc0);
        assert!(parse(&b).is_err());
        let b = doc();
        assert!(parse(&b[..b.len() - 3]).is_err());
    }
}
