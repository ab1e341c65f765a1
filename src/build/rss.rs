//! Peak resident memory of a build: this process, everything it started, and the processes of
//! the containers it started, sampled from `/proc` once a second.
//!
//! Under bubblewrap the compilers are descendants of rcclfix. Under podman they are not: `podman
//! run` asks a `conmon` process (a child of the engine's service side, not of the client) to run
//! the container, so the client's subtree holds only the client. The containers rcclfix starts
//! are named `rcclfix-<pid>-<n>` (`src/container/engine.rs`), and conmon carries that name in
//! its argument list (`-n NAME`), so a `conmon` whose name's `<pid>` is in the sampled tree is
//! one more root, and its whole subtree (the container's init and everything under it) counts.
//! Docker's shim carries no name: under docker only the client side is measured.
//!
//! The figure is the peak of the sum of `statm` resident pages over the tree (proc(5)), the same
//! under every engine, so records made under podman and bubblewrap compare.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Samples the resident memory of this process tree ([`tree_rss`]) once a second on a thread of
/// its own, keeping the peak; stopped and joined when dropped.
pub struct RssSampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    /// Start sampling `tree_rss(std::process::id())`.
    pub fn start() -> RssSampler {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, st) = (peak.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                p.fetch_max(tree_rss(std::process::id()), Ordering::Relaxed);
                // Sleep in short steps so that a drop does not wait a whole second.
                for _ in 0..10 {
                    if st.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
        });
        RssSampler {
            peak,
            stop,
            handle: Some(handle),
        }
    }

    /// The peak in bytes since the last call (or the start), and reset it.
    pub fn take_peak(&self) -> u64 {
        self.peak.swap(0, Ordering::Relaxed)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// One process as `/proc` shows it: its parent (`stat` field 4) and, for a `conmon`, the pid in
/// the `rcclfix-<pid>-<n>` container name it runs.
struct Proc {
    ppid: u32,
    conmon_for: Option<u32>,
}

/// Resident bytes of `root`, every descendant, and every container a process of that tree
/// started (see the module docs): the sum of `statm` resident pages × 4 KiB. Processes that
/// vanish while being read are skipped; 0 when `/proc` cannot be read.
pub fn tree_rss(root: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut procs: BTreeMap<u32, Proc> = BTreeMap::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name may hold spaces and parentheses: fields start after the last ')'.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let Some(ppid) = rest.split_whitespace().nth(1).and_then(|x| x.parse().ok()) else {
            continue;
        };
        let conmon_for = if head.ends_with("(conmon") {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .ok()
                .and_then(|c| conmon_container_pid(&c))
        } else {
            None
        };
        procs.insert(pid, Proc { ppid, conmon_for });
    }
    let descends = |pid: u32, roots: &BTreeSet<u32>| {
        let mut p = pid;
        for _ in 0..64 {
            if roots.contains(&p) {
                return true;
            }
            match procs.get(&p) {
                Some(x) if x.ppid != 0 => p = x.ppid,
                _ => return false,
            }
        }
        false
    };
    let mut roots = BTreeSet::from([root]);
    let tree: BTreeSet<u32> = procs
        .keys()
        .copied()
        .filter(|&p| descends(p, &roots))
        .collect();
    roots.extend(
        procs
            .iter()
            .filter(|(_, x)| x.conmon_for.is_some_and(|c| tree.contains(&c) || c == root))
            .map(|(&p, _)| p),
    );
    procs
        .keys()
        .copied()
        .filter(|&p| descends(p, &roots))
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/statm")).ok())
        .filter_map(|statm| {
            statm
                .split_whitespace()
                .nth(1)
                .and_then(|x| x.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .sum()
}

/// The `<pid>` of a `-n rcclfix-<pid>-<n>` (or `--name`) argument in a `conmon` command line
/// (`/proc/<pid>/cmdline`, NUL-separated), `None` for any other container.
fn conmon_container_pid(cmdline: &[u8]) -> Option<u32> {
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    args.windows(2)
        .filter(|w| w[0] == b"-n" || w[0] == b"--name")
        .find_map(|w| {
            let name = std::str::from_utf8(w[1]).ok()?;
            let (pid, n) = name.strip_prefix("rcclfix-")?.split_once('-')?;
            n.parse::<u64>().ok()?;
            pid.parse().ok()
        })
}

#[cfg(test)]
mod tests {
    use super::conmon_container_pid;

    #[test]
    fn conmon_names_are_read_only_in_rcclfix_form() {
        let c = |s: &str| conmon_container_pid(s.replace(' ', "\0").as_bytes());
        assert_eq!(
            c("/usr/bin/conmon --api-version 1 -c abc -n rcclfix-1234-7 -r /usr/bin/runc"),
            Some(1234)
        );
        assert_eq!(c("/usr/bin/conmon --name rcclfix-99-0"), Some(99));
        assert_eq!(c("/usr/bin/conmon -n other-1234-7"), None);
        assert_eq!(c("/usr/bin/conmon -n rcclfix-test-7"), None);
        assert_eq!(c("/usr/bin/conmon -n rcclfix-12-x"), None);
        assert_eq!(c("/usr/bin/conmon -n"), None);
    }
}
