//! The stock library itself, for the export gate: the toolchain distribution's `librccl1` `.deb`
//! (the version [`super::stock::read`] found in the toolchain's apt lists), downloaded once by
//! `apt-get download` inside the toolchain (its own sources, keyring and lists, so apt checks the
//! file against the suite's signed index) into `$RCCLFIX_HOME/stock/<toolchain>/`, and its
//! library extracted from `data.tar.*` into a private temporary file for each run.
//!
//! The cached `.deb` is checked again on every use: its `control.tar` must name the package and
//! version the apt lists name, or it is refused (a cache entry is never taken on its word).

use std::io::Read;
use std::path::{Path, PathBuf};

use super::stock::StockPackage;

/// The `.deb` file name apt gives a package (`librccl1_5.4.3-3+b1_amd64.deb`, an epoch's `:`
/// written as `%3a`).
pub fn deb_file_name(p: &StockPackage, arch: &str) -> String {
    format!("{}_{}_{arch}.deb", p.package, p.version.replace(':', "%3a"))
}

/// The cached `.deb` of `p` for toolchain `toolchain`, downloaded first when absent.
///
/// Errors (one line, with a `help:` naming `--stock` and `--no-stock`): the toolchain cannot be
/// opened or `apt-get download` fails (offline, the suite moved on and no longer has that
/// version); the download wrote no file of the expected name. Without one: something that is not
/// a regular file (a FIFO, a link to `/dev/zero`, a folder, a dangling link) is at the cached
/// path (naming it).
pub fn fetch(toolchain: &str, p: &StockPackage, arch: &str) -> anyhow::Result<PathBuf> {
    let dir = crate::paths::home().join("stock").join(toolchain);
    let name = deb_file_name(p, arch);
    let dest = dir.join(&name);
    // Something is there: it is used only if it is a regular file (a FIFO would hang the read, a
    // link to `/dev/zero` never end it), else refused naming it (downloading again would rename
    // the package over that node).
    match std::fs::symlink_metadata(&dest) {
        Ok(_) => {
            crate::fsutil::require_regular(&dest).map_err(|e| {
                anyhow::anyhow!("{e:#}: not a cached package (remove it to download it again)")
            })?;
            return Ok(dest);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => anyhow::bail!("cannot read {}: {e}", dest.display()),
    }
    let help = "help: give --stock FILE (the stock librccl.so.1 the overlay replaces), or --no-stock to package without comparing exports";
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("{}: cannot create: {e}", dir.display()))?;
    // Named after this process, registered for interrupt cleanup, and removed by the next
    // download when a killed run left it (fsutil's module docs).
    let tmp = crate::fsutil::TempDir::partial_in(&dir)?;
    crate::ui::status(
        "Downloading",
        format!(
            "{} {} in toolchain {toolchain} (the stock library for the export gate)",
            p.package, p.version
        ),
    );
    let (engine, tc) =
        crate::container::open(toolchain, None).map_err(|e| anyhow::anyhow!("{e:#}\n{help}"))?;
    let mut spec = crate::container::RunSpec::new(
        format!("apt-get download {}", p.package),
        vec![
            "apt-get".into(),
            "download".into(),
            "-q".into(),
            "-o".into(),
            "Debug::NoLocking=1".into(),
            "-o".into(),
            "APT::Sandbox::User=root".into(),
            "-o".into(),
            "Dir::Cache=/tmp/apt-cache".into(),
            format!("{}:{arch}={}", p.package, p.version),
        ],
    );
    spec.network = true;
    spec.workdir = "/stock".into();
    spec.mounts.push(crate::container::Mount {
        host: tmp.path().to_path_buf(),
        guest: "/stock".into(),
        writable: true,
    });
    engine.read(&tc.root(), &spec).map_err(|e| {
        anyhow::anyhow!(
            "cannot download {} {} in toolchain {toolchain}: {e:#}\n{help}",
            p.package,
            p.version
        )
    })?;
    let got = tmp.path().join(&name);
    if !got.is_file() {
        anyhow::bail!(
            "apt-get download {} {} in toolchain {toolchain} wrote no {name}\n{help}",
            p.package,
            p.version
        );
    }
    crate::fsutil::check_output_file(&dest)?;
    std::fs::rename(&got, &dest)
        .map_err(|e| anyhow::anyhow!("{}: cannot store: {e}", dest.display()))?;
    Ok(dest)
}

/// Extract the regular file at `path` (absolute, e.g. `/usr/lib/x86_64-linux-gnu/librccl.so.1.0`)
/// from the `.deb` `deb` into `into`, after checking that its control file names `p`.
///
/// Errors (one line naming the `.deb`): not an ar archive, no `control.tar.*`/`data.tar.*` of a
/// known compression (xz, zstd, gzip, none), a control file of another package or version, no
/// regular file at `path`, a member that decompresses to more than 100 times the
/// package's size (64 MiB to 4 GiB).
pub fn extract(
    deb: &Path,
    p: &StockPackage,
    path: &str,
    into: &mut std::fs::File,
) -> anyhow::Result<()> {
    let name = deb.display();
    let (f, meta) = crate::fsutil::open_regular(deb)?;
    let limit = extract_limit(meta.len());
    let mut ar = ar::Archive::new(std::io::BufReader::new(f));
    let want = format!(".{path}");
    let mut control_ok = false;
    while let Some(entry) = ar.next_entry() {
        let entry = entry.map_err(|e| anyhow::anyhow!("{name}: not a readable .deb: {e}"))?;
        let member = String::from_utf8_lossy(entry.header().identifier()).into_owned();
        let member = member.trim_end_matches('/').to_owned();
        let is_control = member.starts_with("control.tar");
        let is_data = member.starts_with("data.tar");
        if !is_control && !is_data {
            continue;
        }
        let reader =
            decompress(&member, entry).map_err(|e| anyhow::anyhow!("{name}: {member}: {e}"))?;
        // Every byte the tar reader goes through counts, skipped members too: a small package
        // whose data.tar inflates without end is refused after a bounded read.
        let reader = Inflated {
            inner: reader,
            left: limit,
            limit,
            deb_len: meta.len(),
        };
        let mut tar = tar::Archive::new(reader);
        let entries = tar
            .entries()
            .map_err(|e| anyhow::anyhow!("{name}: {member}: {e}"))?;
        for e in entries {
            let mut e = e.map_err(|e| anyhow::anyhow!("{name}: {member}: {e}"))?;
            let epath = e
                .path()
                .map_err(|e| anyhow::anyhow!("{name}: {member}: {e}"))?
                .to_string_lossy()
                .into_owned();
            if is_control && (epath == "./control" || epath == "control") {
                let mut text = String::new();
                e.take(1 << 20)
                    .read_to_string(&mut text)
                    .map_err(|e| anyhow::anyhow!("{name}: control: {e}"))?;
                let field = |k: &str| super::fields::deb822_field(&text, k);
                if field("Package") != Some(&p.package) || field("Version") != Some(&p.version) {
                    anyhow::bail!(
                        "{name}: is {} {}, not {} {} (remove the file to download it again)",
                        field("Package").unwrap_or("?"),
                        field("Version").unwrap_or("?"),
                        p.package,
                        p.version
                    );
                }
                control_ok = true;
            } else if is_data && epath == want {
                if !control_ok {
                    anyhow::bail!("{name}: data.tar comes before control.tar");
                }
                if e.header().entry_type() != tar::EntryType::Regular {
                    anyhow::bail!("{name}: {path} is not a regular file in the package");
                }
                let too_big = |n: u64| {
                    anyhow::anyhow!(
                        "{name}: {path} is {n} bytes, more than the {limit}-byte limit for a library extracted from a {}-byte package (remove the file to download it again)",
                        meta.len()
                    )
                };
                let claimed = e.size();
                if claimed > limit {
                    return Err(too_big(claimed));
                }
                let n = std::io::copy(&mut (&mut e).take(limit + 1), into)
                    .map_err(|e| anyhow::anyhow!("{name}: extracting {path}: {e}"))?;
                if n > limit {
                    return Err(too_big(n));
                }
                return Ok(());
            }
        }
    }
    anyhow::bail!(
        "{name}: {} has no regular file {path}",
        if control_ok {
            "data.tar"
        } else {
            "the package"
        }
    )
}

/// The most bytes decompressed from each of a cached `.deb`'s `control.tar` and `data.tar` (and
/// so the most extracted) for a package of `deb_len` bytes: 100 times its size (xz packs a
/// library about 5 to 10 times), at least 64 MiB and at most 4 GiB, so a small package that
/// inflates without end is refused after a bounded read and a bounded write.
fn extract_limit(deb_len: u64) -> u64 {
    deb_len.saturating_mul(100).clamp(64 << 20, 4 << 30)
}

/// A decompressed member of a cached `.deb` that fails with an error (`more than LIMIT bytes when
/// decompressed, …`) once more than `limit` bytes have been read from it.
struct Inflated<R> {
    inner: R,
    left: u64,
    limit: u64,
    deb_len: u64,
}

impl<R: Read> Read for Inflated<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            // One byte more tells a member that ends exactly at the limit from one that goes on.
            let mut probe = [0u8; 1];
            if self.inner.read(&mut probe)? == 0 {
                return Ok(0);
            }
            return Err(std::io::Error::other(format!(
                "more than {} bytes when decompressed, the limit for a {}-byte package (remove the file to download it again)",
                self.limit, self.deb_len
            )));
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

fn decompress<'a>(member: &str, r: impl Read + 'a) -> anyhow::Result<Box<dyn Read + 'a>> {
    Ok(match member.rsplit_once('.').map(|x| x.1) {
        Some("xz") => Box::new(xz2::read::XzDecoder::new_multi_decoder(r)),
        Some("zst") => Box::new(zstd::stream::read::Decoder::new(r)?),
        Some("gz") => Box::new(flate2::read::MultiGzDecoder::new(r)),
        Some("tar") => Box::new(r),
        _ => anyhow::bail!("unknown compression"),
    })
}
