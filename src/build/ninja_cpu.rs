//! The CPU time of a ninja run's finished steps, read from the kernel while the build runs.
//!
//! ninja runs each step as `/bin/sh -c <command>` and waits for it (ninja's
//! `src/subprocess-posix.cc`), so the `cutime` and `cstime` fields of its `/proc/<pid>/stat`
//! (proc(5), fields 16 and 17, in clock ticks) sum the user and system time of every step it has
//! reaped, with their waited-for descendants (the compiler driver waits for its `cc1`, `lld` and
//! offload tools). A step's time arrives when it ends; the steps still running are not in it.
//!
//! The ninja is found whichever engine runs it (a podman or docker container is not rcclfix's
//! descendant): it is the process whose `comm` is `ninja` and whose working directory
//! (`/proc/<pid>/cwd`, followed into the process's own mount namespace) is the build folder,
//! compared by device and inode (ninja `-C` changes into it). Where that link cannot be followed
//! (another user's process: docker run by a user who is not root) there is no reading, and the
//! estimate does without it ([`super::eta`]).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Reads the finished steps' CPU time of the ninja running in one build folder.
#[derive(Debug)]
pub struct NinjaCpu {
    /// (device, inode) of the build folder.
    build: (u64, u64),
    /// ninja's pid once found.
    pid: Option<u32>,
    /// Clock ticks per second ([`clock_ticks`]).
    tick: f64,
    /// When `/proc` was last searched in vain: the next search waits [`RESCAN`].
    missed: Option<std::time::Instant>,
}

/// How long after a search of `/proc` that found no such ninja the next one waits (a reader that
/// can never find it, docker's root processes read by another user, costs one search per this).
pub const RESCAN: std::time::Duration = std::time::Duration::from_secs(5);

/// `(comm, cutime + cstime in ticks)` from the text of a `/proc/<pid>/stat`; `None` when it is
/// not that format (or the sum does not fit). `comm` is between the first `(` and the last `)` (it may hold either).
pub fn parse_stat(text: &str) -> Option<(&str, u64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?;
    // After the comm: state (field 3) at index 0, so field n is at index n - 3.
    let f: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let tick = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some((comm, tick(16)?.checked_add(tick(17)?)?))
}

/// The clock ticks per second of `/proc`'s times (`USER_HZ`, what `sysconf(_SC_CLK_TCK)` returns):
/// the `AT_CLKTCK` entry (17) of this process's auxiliary vector, `/proc/self/auxv` (pairs of
/// native-endian machine words, getauxval(3)). `None` where it cannot be read.
pub fn clock_ticks() -> Option<u64> {
    const AT_CLKTCK: u64 = 17;
    let auxv = std::fs::read("/proc/self/auxv").ok()?;
    let word = std::mem::size_of::<usize>();
    let at = |c: &[u8]| -> u64 {
        let mut b = [0u8; 8];
        b[..word].copy_from_slice(c);
        if cfg!(target_endian = "big") {
            u64::from_be_bytes(b) >> (8 * (8 - word))
        } else {
            u64::from_le_bytes(b)
        }
    };
    auxv.chunks_exact(2 * word)
        .map(|p| (at(&p[..word]), at(&p[word..])))
        .take_while(|&(k, _)| k != 0)
        .find(|&(k, _)| k == AT_CLKTCK)
        .map(|(_, v)| v)
        .filter(|&v| v > 0)
}

impl NinjaCpu {
    /// A reader for the ninja that will run in `build_dir` (the host path); `None` when the
    /// folder cannot be read or the clock tick is unknown.
    pub fn new(build_dir: &Path) -> Option<NinjaCpu> {
        let m = std::fs::metadata(build_dir).ok()?;
        let tick = clock_ticks()?;
        (tick > 0).then(|| NinjaCpu {
            build: (m.dev(), m.ino()),
            pid: None,
            tick: tick as f64,
            missed: None,
        })
    }

    /// CPU seconds (user + system) of the steps ninja has reaped so far; `None` while no such
    /// ninja is found (not started yet, ended, or not ours to read).
    pub fn seconds(&mut self) -> Option<f64> {
        if let Some(pid) = self.pid {
            if let Some(t) = self.read(pid) {
                return Some(t);
            }
            self.pid = None;
        }
        if self.missed.is_some_and(|t| t.elapsed() < RESCAN) {
            return None;
        }
        let found = std::fs::read_dir("/proc")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|&pid| self.read(pid).is_some());
        self.missed = found.is_none().then(std::time::Instant::now);
        self.pid = found;
        self.read(found?)
    }

    /// The reading of `pid` when it is a ninja in the build folder.
    fn read(&self, pid: u32) -> Option<f64> {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        if comm.trim_end() != "ninja" {
            return None;
        }
        let cwd = std::fs::metadata(format!("/proc/{pid}/cwd")).ok()?;
        if (cwd.dev(), cwd.ino()) != self.build {
            return None;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (comm, ticks) = parse_stat(&stat)?;
        (comm == "ninja").then(|| ticks as f64 / self.tick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_tick_is_what_the_c_library_says() {
        // getconf(1) asks sysconf(_SC_CLK_TCK).
        let out = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .expect("getconf (libc-bin)");
        let libc_says: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert_eq!(clock_ticks(), Some(libc_says));
    }

    #[test]
    fn stat_fields_after_a_comm_with_spaces_and_parens() {
        // proc(5): pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
        // cmajflt utime stime cutime cstime …
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 10 20 0 0 7 3 1200 34 20 0 1 0 5 0 0";
        assert_eq!(parse_stat(line), Some(("a (b) c", 1234)));
        assert_eq!(parse_stat("42 (ninja) S 1 2"), None);
        assert_eq!(parse_stat("no parens"), None);
        let max = u64::MAX;
        let f = "S 1 42 42 0 -1 4194560 10 20 0 0 7 3";
        assert_eq!(parse_stat(&format!("1 (x) {f} {max} {max} 20 0")), None);
    }

    #[test]
    fn a_real_ninja_is_found_by_its_build_folder_and_counts_its_reaped_steps() {
        let Ok(ninja) = which::which("ninja") else {
            panic!("ninja is needed (it is in .ci/apt.d)");
        };
        let dir = tempfile::tempdir().unwrap();
        // One step that burns about 0.3 s of CPU, then one that waits long enough to be read.
        std::fs::write(
            dir.path().join("build.ninja"),
            "rule burn\n  command = sh -c 'i=0; while [ $$i -lt 300000 ]; do i=$$((i+1)); done; touch $out'\n\
             rule wait\n  command = sleep 8 && touch $out\n\
             build a: burn\nbuild b: wait | a\ndefault b\n",
        )
        .unwrap();
        let mut cpu = NinjaCpu::new(dir.path()).unwrap();
        assert_eq!(cpu.seconds(), None, "no ninja runs there yet");
        // The next search would wait RESCAN: a fresh reader searches at once.
        let mut cpu = NinjaCpu::new(dir.path()).unwrap();
        let mut child = std::process::Command::new(ninja)
            .args(["-C", dir.path().to_str().unwrap(), "-j1"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut seen = vec![];
        while seen.len() < 120 && !dir.path().join("b").exists() {
            std::thread::sleep(std::time::Duration::from_millis(100));
            seen.extend(cpu.seconds());
        }
        child.wait().unwrap();
        let last = seen.last().copied().expect("the ninja was read");
        assert!(
            last > 0.05,
            "the burn step's CPU time was counted: {seen:?}"
        );
        assert!(seen.windows(2).all(|w| w[1] >= w[0]), "{seen:?}");
        // Another folder's reader does not take this ninja for its own.
        let other = tempfile::tempdir().unwrap();
        assert_eq!(NinjaCpu::new(other.path()).unwrap().seconds(), None);
    }
}
