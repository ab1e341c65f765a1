//! The one writer of a wheel's zip and its `RECORD`, shared by the overlay wheel
//! ([`super::wheel::write_wheel`]) and the wheel that carries rcclfix itself
//! ([`super::tool_wheel::write`]). The caller adds the entries in the order they should appear;
//! [`WheelWriter::finish`] appends `RECORD` as the last entry (PEP 427 recommends it), listing
//! every entry before it with its hash and size and itself with neither.
//!
//! Every entry is deflated, with one fixed timestamp and the mode the caller gives, so the same
//! inputs give the same bytes (`tests/it/package_wheel_bytes.rs` pins both wheels).
//!
//! Sources: PEP 427 (wheel format, RECORD last), PEP 376 / the "Recording installed projects"
//! spec (RECORD rows `path,sha256=<urlsafe base64 without padding>,size`), maturin
//! `src/module_writer/{wheel_writer,util}.rs` (the same shape: hash while writing, RECORD at
//! finish).

use std::io::{Read, Seek, Write};

use anyhow::Context;
use base64::Engine as _;
use sha2::Digest as _;

/// A wheel being written to `W`: the zip and the `RECORD` rows so far.
pub struct WheelWriter<W: Write + Seek> {
    // zip's `Drop` finishes the archive and prints a failure with `{:?}` to stderr; after a
    // failed write (a full disk) there is nothing to finish, so only `finish` may end it.
    zip: std::mem::ManuallyDrop<zip::ZipWriter<W>>,
    options: zip::write::SimpleFileOptions,
    record: String,
}

impl<W: Write + Seek> WheelWriter<W> {
    /// Start a wheel in `out`. `mtime`: every entry's modification time, seconds since the
    /// epoch ([`zip_time`]); `level`: the deflate level (`None`: the zip crate's default).
    ///
    /// Errors: `mtime` after 2107 (zip's date range).
    pub fn new(out: W, mtime: u64, level: Option<i64>) -> anyhow::Result<Self> {
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(level)
            .last_modified_time(zip_time(mtime)?);
        Ok(WheelWriter {
            zip: std::mem::ManuallyDrop::new(zip::ZipWriter::new(out)),
            options,
            record: String::new(),
        })
    }

    /// Add entry `path` (a `/`-separated path inside the wheel) with Unix `mode` (e.g. `0o644`),
    /// streaming `data` through sha256 into the zip, and its RECORD row.
    ///
    /// Errors (naming `path`): reading `data` or writing the zip fails.
    pub fn add(&mut self, path: &str, mode: u32, data: &mut dyn Read) -> anyhow::Result<()> {
        self.zip
            .start_file(path, self.options.unix_permissions(mode))
            .with_context(|| format!("cannot add {path} to the wheel"))?;
        let mut hr = HashingReader {
            inner: data,
            hash: sha2::Sha256::new(),
            len: 0,
        };
        std::io::copy(&mut hr, &mut *self.zip)
            .with_context(|| format!("cannot write {path} into the wheel"))?;
        self.record
            .push_str(&format!("{path},{},{}\n", record_hash(hr.hash), hr.len));
        Ok(())
    }

    /// [`WheelWriter::add`] from bytes in memory.
    ///
    /// Errors: as [`WheelWriter::add`].
    pub fn add_bytes(&mut self, path: &str, mode: u32, bytes: &[u8]) -> anyhow::Result<()> {
        self.add(path, mode, &mut &bytes[..])
    }

    /// Append `<dist_info>/RECORD` (mode 0644) as the last entry and finish the zip; returns the
    /// writer. `dist_info`: the `<name>-<version>.dist-info` folder.
    ///
    /// Errors: a write fails.
    pub fn finish(mut self, dist_info: &str) -> anyhow::Result<W> {
        self.record.push_str(&format!("{dist_info}/RECORD,,\n"));
        self.zip
            .start_file(
                format!("{dist_info}/RECORD"),
                self.options.unix_permissions(0o644),
            )
            .with_context(|| format!("cannot add {dist_info}/RECORD to the wheel"))?;
        self.zip.write_all(self.record.as_bytes())?;
        Ok(std::mem::ManuallyDrop::into_inner(self.zip).finish()?)
    }
}

/// A reader that hashes (sha256) and counts what passes through it.
struct HashingReader<R> {
    inner: R,
    hash: sha2::Sha256,
    len: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

/// A RECORD hash field: `sha256=` and the digest in urlsafe base64 without padding (PEP 376).
pub fn record_hash(h: sha2::Sha256) -> String {
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.finalize())
    )
}

/// `secs` since the epoch as a zip (DOS) time, clamped to 1980 (zip's floor, e.g. for
/// `SOURCE_DATE_EPOCH=0`). Errors: after 2107.
pub fn zip_time(secs: u64) -> anyhow::Result<zip::DateTime> {
    let secs = secs.max(315_532_800);
    let (y, m, d) = super::deb::civil_from_days((secs / 86400) as i64);
    let r = secs % 86400;
    zip::DateTime::from_date_and_time(
        y as u16,
        m as u8,
        d as u8,
        (r / 3600) as u8,
        (r % 3600 / 60) as u8,
        (r % 60) as u8,
    )
    .map_err(|_| {
        anyhow::anyhow!("SOURCE_DATE_EPOCH {secs} is outside the zip date range (1980-2107)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_hash_is_urlsafe_nopad() {
        let mut h = sha2::Sha256::new();
        h.update(b"");
        assert_eq!(
            record_hash(h),
            "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
        );
    }

    #[test]
    fn record_lists_every_entry_and_itself_last() {
        let mut w = WheelWriter::new(std::io::Cursor::new(Vec::new()), 0, None).unwrap();
        w.add_bytes("a/x", 0o755, b"").unwrap();
        w.add_bytes("a.dist-info/WHEEL", 0o644, b"abc").unwrap();
        let bytes = w.finish("a.dist-info").unwrap().into_inner();
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
        let names: Vec<String> = (0..z.len())
            .map(|i| z.by_index(i).unwrap().name().to_owned())
            .collect();
        assert_eq!(names, ["a/x", "a.dist-info/WHEEL", "a.dist-info/RECORD"]);
        assert_eq!(z.by_name("a/x").unwrap().unix_mode(), Some(0o100755));
        let mut record = String::new();
        z.by_name("a.dist-info/RECORD")
            .unwrap()
            .read_to_string(&mut record)
            .unwrap();
        assert_eq!(
            record,
            "a/x,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n\
             a.dist-info/WHEEL,sha256=ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0,3\n\
             a.dist-info/RECORD,,\n"
        );
    }

    #[test]
    fn times_before_1980_are_clamped_and_after_2107_refused() {
        let t = zip_time(0).unwrap();
        assert_eq!((t.year(), t.month(), t.day()), (1980, 1, 1));
        assert!(zip_time(5_000_000_000).is_err());
    }
}
