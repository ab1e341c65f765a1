//! Atomic output: every file rcclfix writes is written to a temporary sibling and renamed into place,
//! and every output folder is assembled in a temporary sibling folder and renamed at the end, so an
//! interrupted or failed run leaves nothing half-written.
//!
//! Interrupts: every temporary file ([`TempFile`]), temporary folder ([`AtomicDir`]) and output
//! folder a run created itself ([`OutDir`]) is entered in one process-wide registry while it is in
//! flight and leaves it on persist, commit or drop. [`install_interrupt_handler`] (called once by
//! `main`) removes every registered path on SIGINT, SIGTERM or SIGHUP and exits with 128 + the
//! signal number, as shells report it (130, 143, 129).
//!
//! SIGKILL cannot be caught, so temporary names carry the writer's process id
//! (`.rcclfix-<pid>-XXXXXX.tmp`, `.rcclfix-partial-<pid>-XXXXXX`): the next run that writes into
//! the same folder removes those whose process is gone ([`remove_stale_in`]).
//!
//! **Invariant:** no code outside this module creates a temporary file or folder in an output
//! location with `tempfile` directly.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::Context;

mod read;
pub use read::{
    file_kind, open_regular, open_regular_nofollow, read_capped, read_state, read_text_capped,
    require_regular,
};

/// Exit status after SIGINT (128 + 2), as shells report it.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit status after SIGTERM (128 + 15).
pub const EXIT_TERMINATED: i32 = 143;
/// Exit status after SIGHUP (128 + 1).
pub const EXIT_HANGUP: i32 = 129;

/// What the interrupt handler does with a registered path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A temporary file: removed.
    File,
    /// A temporary folder: removed with its contents.
    Dir,
    /// An output folder this run created: removed only when empty.
    EmptyDir,
}

static IN_FLIGHT: Mutex<BTreeMap<u64, (Kind, PathBuf)>> = Mutex::new(BTreeMap::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A registry entry; unregisters itself on drop.
#[derive(Debug)]
struct Registration(u64);

impl Registration {
    fn new(kind: Kind, path: &Path) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut m = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(id, (kind, path.to_owned()));
        Registration(id)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut m = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        m.remove(&self.0);
    }
}

/// Remove every in-flight temporary path: files first, then temporary folders, then output folders
/// this run created that are still empty (newest first, so nested ones go before their parents).
/// Returns how many paths were removed. Called by the interrupt handler; safe to call any time.
pub fn remove_in_flight() -> usize {
    let m = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    let mut entries: Vec<(Kind, u64, &PathBuf)> =
        m.iter().map(|(id, (k, p))| (*k, *id, p)).collect();
    // Kind order File < Dir < EmptyDir; within EmptyDir the newest (deepest) first.
    entries.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut n = 0;
    for (kind, _, p) in entries {
        let ok = match kind {
            Kind::File => std::fs::remove_file(p).is_ok(),
            Kind::Dir => std::fs::remove_dir_all(p).is_ok(),
            Kind::EmptyDir => std::fs::remove_dir(p).is_ok(),
        };
        n += ok as usize;
    }
    n
}

/// The write end of the self-pipe the signal handler writes the signal number into.
static SIGNAL_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    let b = sig as u8;
    // SAFETY: write(2) is async-signal-safe; `b` outlives the call.
    unsafe {
        libc::write(fd, (&b as *const u8).cast(), 1);
    }
}

/// Install the SIGINT/SIGTERM/SIGHUP handler (and ignore SIGXFSZ, see below): remove every in-flight path
/// ([`remove_in_flight`]) and exit with 128 + the signal number ([`EXIT_INTERRUPTED`],
/// [`EXIT_TERMINATED`], [`EXIT_HANGUP`]). Call once, from `main`.
///
/// The handler itself only writes the signal number into a pipe; a thread reads it and cleans up
/// (nothing else is async-signal-safe).
///
/// Errors: a handler is already installed; the pipe or a handler cannot be set up.
pub fn install_interrupt_handler() -> anyhow::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error())
            .context("cannot install the interrupt handler");
    }
    if SIGNAL_PIPE
        .compare_exchange(-1, fds[1], Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        // SAFETY: both descriptors were just created and are not used elsewhere.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        anyhow::bail!("cannot install the interrupt handler: already installed");
    }
    let read_fd = fds[0];
    std::thread::Builder::new()
        .name("rcclfix-signals".into())
        .spawn(move || loop {
            let mut b = 0u8;
            // SAFETY: reads one byte into `b` from the pipe this thread owns.
            let n = unsafe { libc::read(read_fd, (&mut b as *mut u8).cast(), 1) };
            if n == 1 {
                remove_in_flight();
                crate::ui::interrupted();
                std::process::exit(128 + i32::from(b));
            }
            if n == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return;
            }
        })
        .context("cannot install the interrupt handler")?;
    // A write past `ulimit -f` (RLIMIT_FSIZE) returns EFBIG with SIGXFSZ ignored, instead of
    // killing the process: a scan's spill to a temporary file falls back to streaming, and an
    // output write is an error naming its file. (Ignored signals stay ignored in the children.)
    // SAFETY: setting a signal's disposition to SIG_IGN has no handler to be unsafe in.
    if unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(std::io::Error::last_os_error()).context("cannot ignore SIGXFSZ");
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a plain handler, an empty mask and SA_RESTART is valid;
        // the handler only calls write(2).
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot install the handler for signal {sig}"));
        }
    }
    Ok(())
}

/// The name prefix of temporary files and folders this process creates in output folders:
/// `.rcclfix-<pid>-` (files, suffix `.tmp`) and `.rcclfix-partial-<pid>-` (folders).
fn temp_prefix(kind: &str) -> String {
    format!(".rcclfix-{kind}{}-", std::process::id())
}

/// Whether process `pid` no longer exists (kill(pid, 0) says ESRCH). A process that exists but
/// belongs to someone else (EPERM) counts as alive.
fn process_is_gone(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// The pid in one of our temporary names, with whether it names a folder:
/// `.rcclfix-<pid>-XXXXXX.tmp` → `(pid, false)`, `.rcclfix-partial-<pid>-XXXXXX` → `(pid, true)`.
/// Names without a pid (older versions, other tools) are not ours to remove.
pub fn stale_temp_pid(name: &str) -> Option<(u32, bool)> {
    let (rest, dir) = match name.strip_prefix(".rcclfix-partial-") {
        Some(r) => (r, true),
        None => (name.strip_prefix(".rcclfix-")?.strip_suffix(".tmp")?, false),
    };
    let (pid, random) = rest.split_once('-')?;
    if random.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((pid.parse().ok()?, dir))
}

static CLEANED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Remove the temporary files and folders a killed rcclfix left in `dir`: entries named
/// `.rcclfix-<pid>-*.tmp` (regular files) or `.rcclfix-partial-<pid>-*` (folders), owned by this
/// user, whose process `<pid>` no longer exists. Symbolic links are never followed or removed.
/// Each folder is looked at once per run; called before every temporary file or folder is created.
/// Returns the paths removed; a failure to read or remove is ignored (it is only housekeeping).
pub fn remove_stale_in(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    {
        let mut seen = CLEANED.lock().unwrap_or_else(|e| e.into_inner());
        if seen.iter().any(|d| d == dir) {
            return vec![];
        }
        seen.push(dir.to_owned());
    }
    let mut removed = vec![];
    let Ok(rd) = std::fs::read_dir(dir) else {
        return removed;
    };
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some((pid, is_dir)) = name.to_str().and_then(stale_temp_pid) else {
            continue;
        };
        let Ok(md) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if md.uid() != uid || (is_dir && !md.is_dir()) || (!is_dir && !md.is_file()) {
            continue;
        }
        if pid == std::process::id() || !process_is_gone(pid) {
            continue;
        }
        let p = e.path();
        let ok = if is_dir {
            std::fs::remove_dir_all(&p).is_ok()
        } else {
            std::fs::remove_file(&p).is_ok()
        };
        if ok {
            tracing::info!(
                "removed {} left by a killed rcclfix (pid {pid})",
                crate::ui::Esc(p.display())
            );
            removed.push(p);
        }
    }
    removed
}

/// Test hook: `RCCLFIX_TEST_PAUSE_MS=<n>` sleeps n ms after a temporary file has been written,
/// before it is renamed into place, so tests can interrupt a run at that point.
fn test_pause() {
    if let Some(ms) = std::env::var("RCCLFIX_TEST_PAUSE_MS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// A temporary file next to its destination (hidden name `.rcclfix-<pid>-*.tmp`, registered for
/// interrupt cleanup; one left by a killed run is removed by the next, [`remove_stale_in`]). [`TempFile::persist`] renames it into place; dropping it deletes it.
#[derive(Debug)]
pub struct TempFile {
    inner: tempfile::NamedTempFile,
    _reg: Registration,
}

impl TempFile {
    /// Create a temporary file in `dir`. Errors: `dir` does not exist or is not writable.
    pub fn new_in(dir: &Path) -> anyhow::Result<Self> {
        remove_stale_in(dir);
        let inner = tempfile::Builder::new()
            .prefix(&temp_prefix(""))
            .suffix(".tmp")
            .tempfile_in(dir)
            .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
        let reg = Registration::new(Kind::File, inner.path());
        Ok(TempFile { inner, _reg: reg })
    }

    /// The temporary path.
    pub fn path(&self) -> &Path {
        self.inner.path()
    }

    /// The open file.
    pub fn as_file(&self) -> &std::fs::File {
        self.inner.as_file()
    }

    /// The open file, writable.
    pub fn as_file_mut(&mut self) -> &mut std::fs::File {
        self.inner.as_file_mut()
    }

    /// fsync, set `mode`, and rename into `dest` (same filesystem). Errors: `dest` exists and is
    /// not a regular file ([`check_output_file`]); the rename fails.
    pub fn persist(self, dest: &Path, mode: u32) -> anyhow::Result<()> {
        test_pause();
        check_output_file(dest)?;
        fs_err::set_permissions(self.inner.path(), std::fs::Permissions::from_mode(mode))?;
        self.inner.as_file().sync_all().ok();
        let TempFile { inner, _reg } = self;
        inner
            .persist(dest)
            .map_err(|e| e.error)
            .with_context(|| format!("cannot rename into {}", dest.display()))?;
        drop(_reg);
        Ok(())
    }
}

/// A scratch folder (not an output), registered for interrupt cleanup and deleted with its
/// contents on drop. For clone caches, image-import tarballs and extracted snapshots.
#[derive(Debug)]
pub struct TempDir {
    inner: tempfile::TempDir,
    _reg: Registration,
}

impl TempDir {
    /// Create `<dir>/<prefix>XXXXXX`. Errors: `dir` does not exist or is not writable.
    pub fn new_in(dir: &Path, prefix: &str) -> anyhow::Result<Self> {
        let inner = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(dir)
            .with_context(|| format!("cannot create a temporary folder in {}", dir.display()))?;
        let reg = Registration::new(Kind::Dir, inner.path());
        Ok(TempDir { inner, _reg: reg })
    }

    /// Create a scratch folder inside a lasting location `dir` (a cache folder):
    /// `.rcclfix-partial-<pid>-XXXXXX`, so that one a killed run left is removed by the next run
    /// ([`remove_stale_in`], called first). Errors: as [`TempDir::new_in`].
    pub fn partial_in(dir: &Path) -> anyhow::Result<Self> {
        remove_stale_in(dir);
        Self::new_in(dir, &temp_prefix("partial-"))
    }

    /// Create `<system temp dir>/<prefix>XXXXXX` (`$TMPDIR`, else `/tmp`).
    pub fn new(prefix: &str) -> anyhow::Result<Self> {
        Self::new_in(&std::env::temp_dir(), prefix)
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.inner.path()
    }
}

/// An output folder, created with its missing parents; the folders this created are registered
/// for interrupt cleanup and removed on drop when they are still empty (a failed run that wrote
/// nothing leaves no new empty folder). Folders that already existed are never touched.
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
    created: Vec<(PathBuf, Registration)>,
}

impl OutDir {
    /// Create `dir` and its missing parents. Errors: a component cannot be created.
    pub fn create(dir: &Path) -> anyhow::Result<Self> {
        let mut missing = Vec::new();
        let mut cur = Some(dir);
        while let Some(d) = cur {
            if d.as_os_str().is_empty() || d.exists() {
                break;
            }
            missing.push(d.to_owned());
            cur = d.parent();
        }
        let mut created = Vec::new();
        for d in missing.into_iter().rev() {
            match std::fs::create_dir(&d) {
                Ok(()) => {
                    let reg = Registration::new(Kind::EmptyDir, &d);
                    created.push((d, reg));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot create {}", d.display()));
                }
            }
        }
        Ok(OutDir {
            path: dir.to_owned(),
            created,
        })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        for (d, _) in self.created.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Write `bytes` to `path` atomically (temp file in the same directory, fsync, rename).
///
/// Errors: the directory does not exist or is not writable; the rename fails.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    check_output_file(path)?;
    let dir = parent_dir(path);
    let mut tmp = TempFile::new_in(dir)?;
    tmp.as_file_mut()
        .write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    // tempfile creates 0600; outputs are ordinary files (0644), unless the file already exists,
    // whose mode is kept.
    let mode = fs_err::metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    tmp.persist(path, mode)
}

/// Refuse an output file path that exists and is not a regular file or a link to one: renaming
/// an output over `/dev/null`, a FIFO, a socket or a device (as root, the machine's own) would
/// replace the node. A path that does not exist, or a dangling link, is fine (the rename
/// replaces the link, as it replaces a link to a regular file).
///
/// Errors (one line naming the path): `PATH: exists and is a FIFO, not a regular file; refusing to
/// replace it`, or the `stat` error.
pub fn check_output_file(path: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) => anyhow::bail!(
            "{}: exists and is {}, not a regular file; refusing to replace it",
            path.display(),
            file_kind(&m)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => anyhow::bail!("cannot check the output {}: {e}", path.display()),
    }
}

/// Create (or empty) a log file rcclfix appends to while a step runs and that is read during the
/// run, so it is not written to a temporary sibling (`toolchains/<name>.log`, a work folder's
/// `build.log`). What is there must be a regular file or a link ([`check_output_file`]: never a
/// FIFO, which would block the open, nor a device); a link is replaced, never written through
/// (as a rename replaces it), and the file is opened with `O_NOFOLLOW | O_NONBLOCK` and checked
/// again on its descriptor, so a node swapped in meanwhile is refused too.
///
/// Errors (one line naming the path): as [`check_output_file`]; the link cannot be removed; the
/// open fails or finds no regular file.
pub fn create_log(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    check_output_file(path)?;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(path)
            .map_err(|e| anyhow::anyhow!("{}: cannot replace the link: {e}", path.display()))?;
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    let m = f
        .metadata()
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    if !m.is_file() {
        anyhow::bail!(
            "{}: exists and is {}, not a regular file; refusing to write it",
            path.display(),
            file_kind(&m)
        );
    }
    Ok(f)
}

/// [`check_output_file`] for an output folder: `path` may be missing or a folder (or a link to
/// one), nothing else.
///
/// Errors (one line naming the path): `PATH: exists and is a regular file, not a folder; refusing
/// to replace it`, or the `stat` error.
pub fn check_output_dir(path: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(m) => anyhow::bail!(
            "{}: exists and is {}, not a folder; refusing to replace it",
            path.display(),
            file_kind(&m)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => anyhow::bail!("cannot check the output {}: {e}", path.display()),
    }
}

/// A folder being assembled next to its final path; [`AtomicDir::commit`] renames it into place,
/// and dropping it uncommitted deletes it.
#[derive(Debug)]
pub struct AtomicDir {
    tmp: Option<tempfile::TempDir>,
    dest: PathBuf,
    reg: Option<Registration>,
    _parent: OutDir,
}

impl AtomicDir {
    /// Start assembling `dest`. The parent folder is created if needed; `dest` itself must not be
    /// written to until commit. Errors: `dest` exists and is not a folder.
    pub fn new(dest: &Path) -> anyhow::Result<Self> {
        check_output_dir(dest)?;
        let parent = OutDir::create(parent_dir(dest))?;
        remove_stale_in(parent.path());
        let tmp = tempfile::Builder::new()
            .prefix(&temp_prefix("partial-"))
            .tempdir_in(parent.path())
            .with_context(|| {
                format!(
                    "cannot create a temporary folder in {}",
                    parent.path().display()
                )
            })?;
        let reg = Registration::new(Kind::Dir, tmp.path());
        Ok(AtomicDir {
            tmp: Some(tmp),
            dest: dest.to_owned(),
            reg: Some(reg),
            _parent: parent,
        })
    }

    /// The temporary folder to write into.
    pub fn path(&self) -> &Path {
        self.tmp.as_ref().expect("not committed").path()
    }

    /// The final destination.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Rename the folder into place, replacing an older folder at `dest` (moved aside first, then
    /// deleted). Returns the final path. Errors: `dest` became something other than a folder.
    pub fn commit(mut self) -> anyhow::Result<PathBuf> {
        test_pause();
        let tmp = self.tmp.take().expect("not committed").keep();
        // tempfile creates 0700; an output folder is an ordinary folder (0755).
        fs_err::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        if let Err(e) = check_output_dir(&self.dest) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        if self.dest.exists() {
            let old = self
                .dest
                .with_extension(format!("old-{}", std::process::id()));
            fs_err::rename(&self.dest, &old)?;
            fs_err::rename(&tmp, &self.dest)?;
            fs_err::remove_dir_all(&old)?;
        } else {
            fs_err::rename(&tmp, &self.dest)?;
        }
        self.reg.take();
        Ok(self.dest.clone())
    }
}

fn parent_dir(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// sha256 of a file as lowercase hex, streamed.
pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    use sha2::Digest;
    let mut f = fs_err::File::open(path)?;
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut f, &mut h).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(hex::encode(h.finalize()))
}

/// A read-only, private memory map of an open input file (`memmap2::Mmap::map`), the one place
/// rcclfix maps files (scan, package's strip and ELF checks, patch, build's SONAME read).
///
/// Errors: the `mmap(2)` error (e.g. `ENODEV` for a file system that cannot map, `EINVAL` for an
/// empty file: callers that accept empty inputs check the length first).
///
/// Caveat: a file truncated by another process while it is mapped makes the next read of a page
/// past the new end fault (`SIGBUS`), the usual limit of mmap-based readers (ripgrep, the `object`
/// crate's examples); inputs are opened with [`open_regular`], so devices and FIFOs never get here.
pub fn map_readonly(file: &impl std::os::fd::AsRawFd) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: the map is read-only and private; nothing in this process writes the file while it
    // is mapped. Another process truncating it is the SIGBUS caveat above: a crash, never a wrong
    // value read.
    unsafe { memmap2::Mmap::map(file.as_raw_fd()) }
}

/// Ask the kernel to map the pages under `bytes` now, ahead of a read of all of them from start
/// to end: `madvise(2)` `MADV_WILLNEED` (start reading uncached pages) then `MADV_POPULATE_READ`
/// (Linux 5.14: map them all in one call). Advice only: where the kernel refuses (an older
/// kernel's `EINVAL`, a range not mapped), nothing changes and the reads fault the pages in as
/// before.
///
/// Why: the scanner maps its inputs with `MADV_RANDOM` (it reads headers and notes scattered over
/// a file), which also turns off the kernel's fault-around, so a compressed payload decoded from
/// end to end took one page fault per 4 KiB page (measured on a 341 MiB CCOB file: 60,000 faults,
/// a sixth of the scan's CPU time).
pub fn populate_read(bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096);
    let start = bytes.as_ptr() as usize & !(page - 1);
    let len = bytes.as_ptr() as usize + bytes.len() - start;
    for advice in [libc::MADV_WILLNEED, libc::MADV_POPULATE_READ] {
        // SAFETY: both pieces of advice only read pages in (they never change a page's contents,
        // protection or mapping); the range starts at the page holding `bytes[0]` and ends with
        // `bytes`, all of it memory this process may read. An error is only a refusal.
        unsafe {
            libc::madvise(start as *mut libc::c_void, len, advice);
        }
    }
}

/// An unnamed temporary file in `dir` for scratch data that must never become an output
/// (`O_TMPFILE` where the file system has it, else created and unlinked at once: `tempfile`'s
/// `tempfile_in`). It has no name, so an interrupted or killed run leaves nothing behind and the
/// interrupt registry need not know it; its blocks are freed when it is dropped.
///
/// Errors: `dir` is missing, not writable, or its file system refuses the file.
pub fn unnamed_temp_in(dir: &Path) -> std::io::Result<std::fs::File> {
    tempfile::tempfile_in(dir)
}

/// Bytes an unprivileged writer may still allocate on the file system holding `dir`
/// (`statvfs(3)`: `f_bavail × f_frsize`).
///
/// Errors: `dir` cannot be examined (missing, not a path the kernel accepts).
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "path holds a NUL"))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path that outlives the call, and `st` points to writable
    // memory of the size statvfs(3) fills; it is read only after the call reported success.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialised the whole struct.
    let st = unsafe { st.assume_init() };
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Whether `dir` lies on one of the kernel's pseudo file systems (proc, sysfs, devtmpfs/devpts,
/// debugfs, tracefs, securityfs, cgroup, bpf, pstore, configfs, efivarfs, fusectl), by
/// `statfs(2)`'s `f_type` (the magic numbers of linux `include/uapi/linux/magic.h`).
pub fn on_pseudo_fs(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    const MAGIC: &[i64] = &[
        0x9fa0,      // PROC_SUPER_MAGIC
        0x6265_6572, // SYSFS_MAGIC
        0x1cd1,      // DEVPTS_SUPER_MAGIC
        0x6462_6720, // DEBUGFS_MAGIC
        0x7472_6163, // TRACEFS_MAGIC
        0x7363_6673, // SECURITYFS_MAGIC
        0x2762_9180, // CGROUP_SUPER_MAGIC
        0x6367_7270, // CGROUP2_SUPER_MAGIC
        0xcafe_4a11, // BPF_FS_MAGIC
        0x6165_676c, // PSTOREFS_MAGIC
        0x6265_6570, // CONFIGFS_MAGIC
        0xde5e_81e4, // EFIVARFS_MAGIC
        0x6573_5543, // FUSE_CTL_SUPER_MAGIC
    ];
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path that outlives the call, and `st` points to writable
    // memory of the size statfs(2) fills; it is read only after the call reported success.
    if unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: statfs returned 0, so it initialised the whole struct.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::unnecessary_cast)]
    let t = st.f_type as i64;
    // devtmpfs reports TMPFS_MAGIC; /dev is told apart by its path.
    MAGIC.contains(&t) || std::fs::canonicalize(dir).is_ok_and(|p| p == Path::new("/dev"))
}
