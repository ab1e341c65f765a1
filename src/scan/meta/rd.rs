//! The MessagePack token reader of [`super::merge_msgpack`]: borrows strings from the note
//! descriptor, validates what it skips, and never sizes anything by a count the note's bytes
//! cannot hold. Source: the MessagePack specification.

/// A MessagePack reader over a note descriptor that borrows strings and skips what it does not
/// need without building a value tree (the metadata of a large library holds millions of
/// values). Source: the MessagePack specification (formats: fixmap/fixarray/fixstr, nil, bool,
/// bin/ext/str 8–32, float, uint/int 8–64, map/array 16/32).
pub(super) struct Rd<'a> {
    pub(super) b: &'a [u8],
    pub(super) p: usize,
}

/// One MessagePack item as [`Rd::next`] reads it (containers: only their length).
pub(super) enum Tok<'a> {
    Str(&'a [u8]),
    Uint(u64),
    Int(i64),
    Array(u32),
    Map(u32),
    Other,
}

/// Nested containers accepted (as `rmpv`'s depth limit used before).
pub(super) const MAX_DEPTH: u32 = 32;

/// Most items reserved up front for a kernel or argument list, whatever its header claims; the
/// list grows as items are read.
pub(super) const RESERVE_ITEMS: usize = 1024;

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let e = self
            .p
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| format!("truncated at byte {}", self.p))?;
        let r = &self.b[self.p..e];
        self.p = e;
        Ok(r)
    }

    fn be(&mut self, n: usize) -> Result<u64, String> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    pub(super) fn next(&mut self) -> Result<Tok<'a>, String> {
        let m = self.take(1)?[0];
        Ok(match m {
            0x00..=0x7f => Tok::Uint(m as u64),
            0x80..=0x8f => Tok::Map((m & 0x0f) as u32),
            0x90..=0x9f => Tok::Array((m & 0x0f) as u32),
            0xa0..=0xbf => Tok::Str(self.take((m & 0x1f) as usize)?),
            0xc0 | 0xc2 | 0xc3 => Tok::Other,
            0xc1 => return Err(format!("reserved marker 0xc1 at byte {}", self.p - 1)),
            0xc4..=0xc6 => {
                let n = self.be(1 << (m - 0xc4))? as usize;
                self.take(n)?;
                Tok::Other
            }
            0xc7..=0xc9 => {
                let n = self.be(1 << (m - 0xc7))? as usize;
                self.take(n.checked_add(1).ok_or("ext length overflow")?)?;
                Tok::Other
            }
            0xca => {
                self.take(4)?;
                Tok::Other
            }
            0xcb => {
                self.take(8)?;
                Tok::Other
            }
            0xcc..=0xcf => Tok::Uint(self.be(1 << (m - 0xcc))?),
            0xd0..=0xd3 => {
                let n = 1usize << (m - 0xd0);
                let v = self.be(n)?;
                let shift = 64 - 8 * n as u32;
                Tok::Int(((v << shift) as i64) >> shift)
            }
            0xd4..=0xd8 => {
                self.take(1 + (1usize << (m - 0xd4)))?;
                Tok::Other
            }
            0xd9..=0xdb => {
                let n = self.be(1 << (m - 0xd9))? as usize;
                Tok::Str(self.take(n)?)
            }
            0xdc | 0xdd => Tok::Array(self.be(2 << (m - 0xdc))? as u32),
            0xde | 0xdf => Tok::Map(self.be(2 << (m - 0xde))? as u32),
            0xe0..=0xff => Tok::Int(m as i8 as i64),
        })
        .and_then(|t| self.check_count(t))
    }

    /// Refuse a container whose count claims more items than the bytes that remain (every item
    /// takes at least one byte, a map entry two), so no caller ever sizes anything by a count the
    /// note cannot hold (an `amdhsa.kernels` array header of `0xdd ff ff ff ff` claims
    /// 4,294,967,295 kernels).
    fn check_count(&self, t: Tok<'a>) -> Result<Tok<'a>, String> {
        let items = match t {
            Tok::Array(n) => n as u64,
            Tok::Map(n) => 2 * n as u64,
            _ => return Ok(t),
        };
        let left = (self.b.len() - self.p) as u64;
        if items > left {
            return Err(format!(
                "container at byte {} claims {items} items, more than the {left} bytes left",
                self.p
            ));
        }
        Ok(t)
    }

    /// A fixstr at the read position, taken whole when its bytes are there (the common case of
    /// keys and string values, read without going through [`Rd::next`]); `None` otherwise, with
    /// nothing consumed.
    #[inline]
    fn fixstr(&mut self) -> Option<&'a [u8]> {
        let m = *self.b.get(self.p)?;
        if !(0xa0..=0xbf).contains(&m) {
            return None;
        }
        let (from, to) = (self.p + 1, self.p + 1 + (m & 0x1f) as usize);
        let s = self.b.get(from..to)?;
        self.p = to;
        Some(s)
    }

    /// Skip one whole value (validating it), `depth` containers deep.
    pub(super) fn skip(&mut self, depth: u32) -> Result<(), String> {
        // Scalars in one byte (fixint, nil, booleans) and fixstrs whose bytes are there: the bulk
        // of what a metadata walk skips, with nothing to validate beyond their length.
        if let Some(&m) = self.b.get(self.p) {
            if matches!(m, 0x00..=0x7f | 0xc0 | 0xc2 | 0xc3 | 0xe0..=0xff) {
                self.p += 1;
                return Ok(());
            }
            if self.fixstr().is_some() {
                return Ok(());
            }
        }
        let items = match self.next()? {
            Tok::Array(n) => n as u64,
            Tok::Map(n) => 2 * n as u64,
            _ => return Ok(()),
        };
        if depth >= MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} containers"));
        }
        for _ in 0..items {
            self.skip(depth + 1)?;
        }
        Ok(())
    }

    /// The next map key: its bytes when it is a string; any other key is skipped.
    pub(super) fn key(&mut self, depth: u32) -> Result<Option<&'a [u8]>, String> {
        if let Some(k) = self.fixstr() {
            return Ok(Some(k));
        }
        let at = self.p;
        match self.next()? {
            Tok::Str(k) => Ok(Some(k)),
            Tok::Array(_) | Tok::Map(_) => {
                self.p = at;
                self.skip(depth)?;
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// The next value if it is a string (else `None`, value skipped).
    pub(super) fn str_value(&mut self, depth: u32) -> Result<Option<&'a [u8]>, String> {
        if let Some(v) = self.fixstr() {
            return Ok(Some(v));
        }
        let at = self.p;
        match self.next()? {
            Tok::Str(s) => Ok(Some(s)),
            _ => {
                self.p = at;
                self.skip(depth)?;
                Ok(None)
            }
        }
    }

    /// The next value as an unsigned integer (negative, non-integer: `None`, value skipped).
    pub(super) fn u64_value(&mut self, depth: u32) -> Result<Option<u64>, String> {
        let at = self.p;
        match self.next()? {
            Tok::Uint(v) => Ok(Some(v)),
            Tok::Int(v) => Ok(u64::try_from(v).ok()),
            _ => {
                self.p = at;
                self.skip(depth)?;
                Ok(None)
            }
        }
    }
}

#[inline]
pub(super) fn utf8(b: &[u8]) -> Option<&str> {
    std::str::from_utf8(b).ok()
}
