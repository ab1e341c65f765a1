//! Container engines: podman, docker, bubblewrap, and the host itself.
//!
//! An [`Engine`] turns a [`RunSpec`] (argv, mounts, environment, network on/off) and a [`Root`]
//! (an image, a rootfs folder, or the host) into the engine's own command line and runs it; the
//! image verbs (inspect, pull, import, build, remove) are its methods too, so `toolchain` asks the
//! engine and the engine knows nothing of toolchains. Per-engine flags that a host needs
//! (podman's `--runtime runc` and lowered ulimits on Debian 12 hosts, measured with podman 4.3) come
//! from [`EngineConfig`] (`containers/engines.toml`, or `$RCCLFIX_HOME/engines.toml`), never from
//! special cases in the code path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::process::Cmd;

mod images;
pub use images::{label_value, HOME_LABEL};

/// The engine configuration embedded at build time.
pub const EMBEDDED_ENGINES_TOML: &str = include_str!("../../containers/engines.toml");

/// Which program runs the toolchain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// `podman run` on a locally imported image (`localhost/rcclfix-<name>:<hash>`).
    Podman,
    /// `docker run` on a locally imported image.
    Docker,
    /// `bwrap` over the toolchain rootfs directory (read-only), no image needed.
    #[value(alias = "bwrap")]
    Bubblewrap,
    /// No container: run on the host (only for the `host` toolchain).
    Host,
}

impl EngineKind {
    /// The lowercase name (`podman`, `docker`, `bubblewrap`, `host`), as in `manifest.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Podman => "podman",
            EngineKind::Docker => "docker",
            EngineKind::Bubblewrap => "bubblewrap",
            EngineKind::Host => "host",
        }
    }

    fn program(self) -> &'static str {
        match self {
            EngineKind::Podman => "podman",
            EngineKind::Docker => "docker",
            EngineKind::Bubblewrap => "bwrap",
            EngineKind::Host => "env",
        }
    }

    /// Parse a name as given in `RCCLFIX_ENGINE` (`podman`, `docker`, `bubblewrap`/`bwrap`, `host`).
    pub fn parse(s: &str) -> anyhow::Result<EngineKind> {
        <EngineKind as clap::ValueEnum>::from_str(s, true).map_err(|_| {
            anyhow::anyhow!("unknown engine {s:?} (expected podman, docker, bubblewrap or host)")
        })
    }
}

/// Per-engine settings, one section per engine in `engines.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSettings {
    /// OCI runtime passed as `--runtime` when that program is installed (podman/docker); empty: none.
    #[serde(default)]
    pub runtime: String,
    /// `--ulimit` values (`nofile=1024:1024`), podman/docker.
    #[serde(default)]
    pub ulimits: Vec<String>,
    /// Extra arguments for every run, verbatim.
    #[serde(default)]
    pub run_args: Vec<String>,
}

/// `engines.toml`: settings per engine name (`podman`, `docker`, `bubblewrap`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// podman settings.
    #[serde(default)]
    pub podman: EngineSettings,
    /// docker settings.
    #[serde(default)]
    pub docker: EngineSettings,
    /// bubblewrap settings.
    #[serde(default)]
    pub bubblewrap: EngineSettings,
}

impl EngineConfig {
    /// `$RCCLFIX_HOME/engines.toml` when present, else the embedded `containers/engines.toml`.
    ///
    /// Errors: the file does not parse (one line naming the file).
    pub fn load() -> anyhow::Result<EngineConfig> {
        let user = crate::paths::engines_toml();
        let (text, origin) = if user.exists() {
            (
                crate::fsutil::read_text_capped(&user, 1 << 20, "an engine configuration")?,
                user.display().to_string(),
            )
        } else {
            (
                EMBEDDED_ENGINES_TOML.to_owned(),
                "containers/engines.toml".to_owned(),
            )
        };
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{origin}: {}", e.message()))
    }

    fn for_kind(&self, kind: EngineKind) -> &EngineSettings {
        static NONE: EngineSettings = EngineSettings {
            runtime: String::new(),
            ulimits: vec![],
            run_args: vec![],
        };
        match kind {
            EngineKind::Podman => &self.podman,
            EngineKind::Docker => &self.docker,
            EngineKind::Bubblewrap => &self.bubblewrap,
            EngineKind::Host => &NONE,
        }
    }
}

/// A resolved engine: its kind, the program path, and its settings.
#[derive(Debug, Clone)]
pub struct Engine {
    /// Which engine.
    pub kind: EngineKind,
    /// The program (`/usr/bin/podman`).
    pub path: PathBuf,
    /// Settings from `engines.toml`.
    pub settings: EngineSettings,
    /// Whether rcclfix runs as root (rootful podman; bwrap with capabilities dropped).
    pub as_root: bool,
}

/// A host directory visible inside the toolchain.
#[derive(Debug, Clone)]
pub struct Mount {
    /// Host path (must exist).
    pub host: PathBuf,
    /// Absolute path inside the toolchain.
    pub guest: String,
    /// Mounted read-write (else read-only).
    pub writable: bool,
}

/// One command to run inside a toolchain.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// What it is for ("configure rccl"), used in logs and errors.
    pub summary: String,
    /// argv inside the toolchain.
    pub argv: Vec<String>,
    /// Host directories to mount.
    pub mounts: Vec<Mount>,
    /// Working directory inside the toolchain.
    pub workdir: String,
    /// Extra environment inside the toolchain (PATH, HOME, LANG are always set).
    pub env: Vec<(String, String)>,
    /// Whether the network is reachable; build steps run with `false`.
    pub network: bool,
    /// A host directory used as `/tmp` inside (big temporaries of the device link go to disk, not
    /// RAM); `None`: the engine's default (a tmpfs for bubblewrap).
    pub tmp: Option<PathBuf>,
}

impl RunSpec {
    /// A spec with no mounts, workdir `/`, network off.
    pub fn new(summary: impl Into<String>, argv: Vec<String>) -> Self {
        RunSpec {
            summary: summary.into(),
            argv,
            mounts: vec![],
            workdir: "/".into(),
            env: vec![],
            network: false,
            tmp: None,
        }
    }
}

/// What a command runs in: the engine-level view of a toolchain
/// (`crate::container::Toolchain::root`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Root {
    /// An OCI image for podman/docker.
    Image {
        /// The local image reference (`localhost/rcclfix-…:<hash>`); `None` until the toolchain
        /// was prepared for the engine.
        reference: Option<String>,
        /// Folders put first on `PATH` inside.
        path_prepend: Vec<String>,
    },
    /// A rootfs folder, for bubblewrap (or imported into podman/docker as an image).
    Rootfs {
        /// The folder.
        rootfs: PathBuf,
        /// The image it was imported as (podman/docker), once prepared.
        reference: Option<String>,
        /// Folders put first on `PATH` inside.
        path_prepend: Vec<String>,
    },
    /// The host itself, no container.
    Host,
}

impl Root {
    /// Whether this is the host.
    pub fn is_host(&self) -> bool {
        matches!(self, Root::Host)
    }

    /// The rootfs folder, for a rootfs root.
    pub fn rootfs(&self) -> Option<&Path> {
        match self {
            Root::Rootfs { rootfs, .. } => Some(rootfs),
            _ => None,
        }
    }

    /// The local image reference podman/docker run, once prepared.
    pub fn image_ref(&self) -> Option<&str> {
        match self {
            Root::Image { reference, .. } | Root::Rootfs { reference, .. } => reference.as_deref(),
            Root::Host => None,
        }
    }

    /// Folders put first on `PATH` inside.
    pub fn path_prepend(&self) -> &[String] {
        match self {
            Root::Image { path_prepend, .. } | Root::Rootfs { path_prepend, .. } => path_prepend,
            Root::Host => &[],
        }
    }
}

/// Whether this process runs as root (uid 0), read from `/proc/self`.
pub fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

fn uid_gid() -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| (m.uid(), m.gid()))
        .unwrap_or((0, 0))
}

impl Engine {
    /// Resolve an engine of a given kind: find its program with `which` and load its settings.
    ///
    /// Errors: the program is not installed (with a `help:` line).
    pub fn of_kind(kind: EngineKind) -> anyhow::Result<Engine> {
        let path = which::which(kind.program()).map_err(|_| {
            anyhow::anyhow!(
                "engine {} requested but `{}` is not installed\nhelp: install it, or choose another engine with --engine or RCCLFIX_ENGINE",
                kind.as_str(),
                kind.program()
            )
        })?;
        let config = EngineConfig::load()?;
        Ok(Engine {
            kind,
            path,
            settings: config.for_kind(kind).clone(),
            as_root: running_as_root(),
        })
    }

    /// Choose an engine for `root` (toolchain `name`, for messages): `requested` (from
    /// `--engine`/`RCCLFIX_ENGINE`) if given, else the first available of podman, docker (only when
    /// its daemon answers), bubblewrap (only for a rootfs), host (only for the host).
    ///
    /// Errors: the requested engine cannot run this root, or no engine fits (with a `help:` line).
    pub fn select(
        requested: Option<EngineKind>,
        root: &Root,
        name: &str,
    ) -> anyhow::Result<Engine> {
        if let Some(kind) = requested {
            let e = Engine::of_kind(kind)?;
            e.check_fits(root, name)?;
            return Ok(e);
        }
        if root.is_host() {
            return Engine::of_kind(EngineKind::Host);
        }
        if which::which("podman").is_ok() {
            return Engine::of_kind(EngineKind::Podman);
        }
        if which::which("docker").is_ok()
            && Cmd::new("probe docker daemon", "docker")
                .args(["version", "--format", "{{.Server.Version}}"])
                .read_with_deadline(crate::process::PROBE_DEADLINE)
                .is_ok()
        {
            return Engine::of_kind(EngineKind::Docker);
        }
        if root.rootfs().is_some() && which::which("bwrap").is_ok() {
            return Engine::of_kind(EngineKind::Bubblewrap);
        }
        bail!(
            "no container engine found for toolchain {name}\nhelp: install podman (or bubblewrap for local toolchains), or set RCCLFIX_ENGINE"
        )
    }

    fn check_fits(&self, root: &Root, name: &str) -> anyhow::Result<()> {
        match self.kind {
            EngineKind::Host if !root.is_host() => bail!(
                "engine host runs no container, so it can only run the `host` toolchain, not {name}\nhelp: use podman or bubblewrap for {name}"
            ),
            EngineKind::Bubblewrap if root.rootfs().is_none() => bail!(
                "engine bubblewrap needs a local rootfs toolchain; {name} is an OCI image\nhelp: use podman or docker"
            ),
            EngineKind::Podman | EngineKind::Docker | EngineKind::Bubblewrap if root.is_host() => {
                bail!("the host toolchain runs without a container\nhelp: use --engine host")
            }
            _ => Ok(()),
        }
    }

    /// The engine's program name for messages (`podman`).
    pub fn name(&self) -> &'static str {
        self.kind.as_str()
    }

    fn base_env(root: &Root, spec: &RunSpec) -> Vec<(String, String)> {
        let mut path: Vec<String> = root.path_prepend().to_vec();
        path.extend(
            [
                "/usr/local/sbin",
                "/usr/local/bin",
                "/usr/sbin",
                "/usr/bin",
                "/sbin",
                "/bin",
            ]
            .map(String::from),
        );
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        env.insert("PATH".into(), path.join(":"));
        env.insert("HOME".into(), "/tmp".into());
        env.insert("LANG".into(), "C.UTF-8".into());
        env.insert("TMPDIR".into(), "/tmp".into());
        for (k, v) in &spec.env {
            env.insert(k.clone(), v.clone());
        }
        env.into_iter().collect()
    }

    /// The full host command line for `spec` in `root` (its image must exist for podman/docker:
    /// see [`super::prepare`]).
    pub fn command(&self, root: &Root, spec: &RunSpec) -> anyhow::Result<Cmd> {
        self.check_fits(root, "this toolchain")?;
        let env = Engine::base_env(root, spec);
        let mut cmd = Cmd::new(spec.summary.clone(), &self.path);
        match self.kind {
            EngineKind::Podman | EngineKind::Docker => {
                // `podman run` outlives a killed rcclfix (the container runs under conmon); with a
                // parent-death signal it gets SIGTERM instead, proxies it, and the container stops
                // (`--rm` removes it). util-linux's setpriv sets that signal and execs the engine.
                if let Ok(setpriv) = which::which("setpriv") {
                    cmd = Cmd::new(spec.summary.clone(), setpriv)
                        .args(["--pdeathsig", "TERM", "--"])
                        .arg(&self.path);
                }
                let image = root.image_ref().context("toolchain image not prepared")?;
                cmd = cmd.args(["run", "--rm", "--init"]);
                cmd = cmd.arg(format!(
                    "--name=rcclfix-{}-{}",
                    std::process::id(),
                    next_id()
                ));
                if !spec.network {
                    cmd = cmd.arg("--network=none");
                }
                let s = &self.settings;
                if !s.runtime.is_empty() && which::which(&s.runtime).is_ok() {
                    cmd = cmd.arg(format!("--runtime={}", s.runtime));
                }
                for u in &s.ulimits {
                    cmd = cmd.arg(format!("--ulimit={u}"));
                }
                if !self.as_root {
                    let (uid, gid) = uid_gid();
                    cmd = match self.kind {
                        EngineKind::Podman => cmd.arg("--userns=keep-id"),
                        _ => cmd.arg(format!("--user={uid}:{gid}")),
                    };
                }
                if let Some(t) = &spec.tmp {
                    cmd = cmd.arg(format!("--volume={}:/tmp:z", t.display()));
                }
                for m in &spec.mounts {
                    let mode = if m.writable { "rw" } else { "ro" };
                    cmd = cmd.arg(format!(
                        "--volume={}:{}:{mode},z",
                        m.host.display(),
                        m.guest
                    ));
                }
                for (k, v) in &env {
                    cmd = cmd.arg(format!("--env={k}={v}"));
                }
                cmd = cmd.arg(format!("--workdir={}", spec.workdir));
                cmd = cmd.args(&s.run_args);
                cmd = cmd.arg(image).args(&spec.argv);
            }
            EngineKind::Bubblewrap => {
                let rootfs = root
                    .rootfs()
                    .context("bubblewrap needs a rootfs toolchain")?;
                // bwrap starts from an empty tmpfs root: bind every top-level entry of the rootfs
                // read-only (symlinks as symlinks), so new mount points (/src, /build) can be created.
                let mut entries: Vec<_> =
                    fs_err::read_dir(rootfs)?.filter_map(|e| e.ok()).collect();
                entries.sort_by_key(|e| e.file_name());
                for e in entries {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if matches!(name.as_str(), "proc" | "dev" | "tmp" | "sys")
                        || name.starts_with('.')
                    {
                        continue;
                    }
                    let p = e.path();
                    let meta = fs_err::symlink_metadata(&p)?;
                    if meta.file_type().is_symlink() {
                        let target = fs_err::read_link(&p)?;
                        cmd = cmd.arg("--symlink").arg(target).arg(format!("/{name}"));
                    } else if meta.is_dir() {
                        cmd = cmd.arg("--ro-bind").arg(&p).arg(format!("/{name}"));
                    }
                }
                cmd = cmd.args(["--proc", "/proc", "--dev", "/dev"]);
                match &spec.tmp {
                    Some(t) => cmd = cmd.arg("--bind").arg(t).arg("/tmp"),
                    None => cmd = cmd.args(["--tmpfs", "/tmp"]),
                }
                for m in &spec.mounts {
                    cmd = cmd
                        .arg(if m.writable { "--bind" } else { "--ro-bind" })
                        .arg(&m.host)
                        .arg(&m.guest);
                }
                cmd = cmd.args([
                    "--unshare-pid",
                    "--unshare-ipc",
                    "--unshare-uts",
                    "--die-with-parent",
                ]);
                if !spec.network {
                    cmd = cmd.arg("--unshare-net");
                }
                if self.as_root {
                    cmd = cmd.args(["--cap-drop", "ALL"]);
                } else {
                    let (uid, gid) = uid_gid();
                    cmd = cmd.args([
                        "--unshare-user",
                        "--uid",
                        &uid.to_string(),
                        "--gid",
                        &gid.to_string(),
                    ]);
                }
                cmd = cmd.arg("--clearenv");
                for (k, v) in &env {
                    cmd = cmd.args(["--setenv", k, v]);
                }
                cmd = cmd.args(["--chdir", &spec.workdir]);
                cmd = cmd.args(&self.settings.run_args);
                cmd = cmd.arg("--").args(&spec.argv);
                // bwrap inherits rcclfix's environment unless cleared; the toolchain sees only `env`.
                cmd = cmd.env_clear();
            }
            EngineKind::Host => {
                // No container: host paths are used as they are, so mounts must map to themselves.
                for m in &spec.mounts {
                    if m.host != Path::new(&m.guest) {
                        bail!(
                            "engine host cannot mount {} at {}",
                            m.host.display(),
                            m.guest
                        );
                    }
                }
                cmd = cmd.arg("-i");
                for (k, v) in &env {
                    if k == "PATH" {
                        cmd = cmd.arg(format!(
                            "PATH={}",
                            std::env::var("PATH").unwrap_or_default()
                        ));
                    } else if let (true, Some(t)) = (k == "TMPDIR", &spec.tmp) {
                        // No /tmp of its own: the spec's temporary folder is TMPDIR instead.
                        cmd = cmd.arg(format!("TMPDIR={}", t.display()));
                    } else {
                        cmd = cmd.arg(format!("{k}={v}"));
                    }
                }
                cmd = cmd.args(&spec.argv).cwd(&spec.workdir);
            }
        }
        Ok(cmd)
    }

    /// Run `spec` in `root`, streaming merged output lines to `log` and `on_line`.
    ///
    /// Errors: the engine cannot start, or the command fails ([`crate::process::CommandError`] with
    /// the last lines of output).
    pub fn run_streamed(
        &self,
        root: &Root,
        spec: &RunSpec,
        log: &mut dyn std::io::Write,
        on_line: impl FnMut(&str),
    ) -> anyhow::Result<()> {
        self.command(root, spec)?.stream(log, on_line)
    }

    /// Run `spec` in `root` with inherited stdout/stderr (`toolchain run`).
    pub fn run_inherit(&self, root: &Root, spec: &RunSpec) -> anyhow::Result<()> {
        self.command(root, spec)?.run()
    }

    /// Run `spec` in `root` and return its stdout.
    pub fn read(&self, root: &Root, spec: &RunSpec) -> anyhow::Result<String> {
        self.command(root, spec)?.read()
    }
}

fn next_id() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rootfs_root(rootfs: &Path, reference: Option<&str>) -> Root {
        Root::Rootfs {
            rootfs: rootfs.to_owned(),
            reference: reference.map(str::to_owned),
            path_prepend: vec!["/usr/lib/llvm-17/bin".into()],
        }
    }

    fn image_root(reference: Option<&str>) -> Root {
        Root::Image {
            reference: reference.map(str::to_owned),
            path_prepend: vec!["/usr/lib/llvm-17/bin".into()],
        }
    }

    fn engine(kind: EngineKind, settings: EngineSettings, as_root: bool) -> Engine {
        Engine {
            kind,
            path: PathBuf::from(format!("/usr/bin/{}", kind.program())),
            settings,
            as_root,
        }
    }

    fn spec() -> RunSpec {
        RunSpec {
            summary: "configure".into(),
            argv: vec!["cmake".into(), "-S".into(), "/src".into()],
            mounts: vec![Mount {
                host: "/h/src".into(),
                guest: "/src".into(),
                writable: true,
            }],
            workdir: "/build".into(),
            env: vec![("X".into(), "1".into())],
            network: false,
            tmp: Some("/h/tmp".into()),
        }
    }

    fn argv(cmd: &Cmd) -> Vec<String> {
        cmd.argv()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn podman_run_carries_the_engine_configuration() {
        let config: EngineConfig = toml::from_str(EMBEDDED_ENGINES_TOML).unwrap();
        let e = engine(EngineKind::Podman, config.podman.clone(), true);
        let tc = rootfs_root(
            Path::new("/r"),
            Some("localhost/rcclfix-debian-trixie:abababababab"),
        );
        let a = argv(&e.command(&tc, &spec()).unwrap());
        let run = a.iter().position(|x| x == "run").expect("podman run");
        assert!(a[..run].iter().any(|x| x.ends_with("podman")), "{a:?}");
        for want in [
            "--rm",
            "--init",
            "--network=none",
            "--ulimit=nofile=1024:1024",
            "--ulimit=nproc=4096:4096",
            "--volume=/h/tmp:/tmp:z",
            "--volume=/h/src:/src:rw,z",
            "--env=X=1",
            "--env=HOME=/tmp",
            "--workdir=/build",
        ] {
            assert!(a.contains(&want.to_owned()), "{want} missing from {a:?}");
        }
        assert_eq!(
            a.contains(&"--runtime=runc".to_owned()),
            which::which("runc").is_ok(),
            "{a:?}"
        );
        let img = a
            .iter()
            .position(|x| x == "localhost/rcclfix-debian-trixie:abababababab")
            .unwrap();
        assert_eq!(&a[img + 1..], ["cmake", "-S", "/src"]);
        assert!(
            a.iter()
                .any(|x| x.starts_with("--env=PATH=/usr/lib/llvm-17/bin:")),
            "{a:?}"
        );
        // Rootless podman keeps the caller's uid.
        let rootless = argv(
            &engine(EngineKind::Podman, config.podman, false)
                .command(&tc, &spec())
                .unwrap(),
        );
        assert!(rootless.contains(&"--userns=keep-id".to_owned()));
    }

    #[test]
    fn network_on_only_when_asked() {
        let e = engine(EngineKind::Docker, EngineSettings::default(), false);
        let tc = image_root(Some("localhost/x:1"));
        let mut s = spec();
        s.network = true;
        let a = argv(&e.command(&tc, &s).unwrap());
        assert!(!a.iter().any(|x| x.starts_with("--network")), "{a:?}");
        assert!(
            a.iter().any(|x| x.starts_with("--user=")),
            "docker maps the caller's uid: {a:?}"
        );
    }

    #[test]
    fn bubblewrap_binds_the_rootfs_read_only_and_unshares_the_network() {
        let root = tempfile::tempdir().unwrap();
        for d in ["usr", "etc", "proc", "tmp"] {
            std::fs::create_dir(root.path().join(d)).unwrap();
        }
        std::os::unix::fs::symlink("usr/bin", root.path().join("bin")).unwrap();
        let tc = rootfs_root(root.path(), None);
        let a = argv(
            &engine(EngineKind::Bubblewrap, EngineSettings::default(), true)
                .command(&tc, &spec())
                .unwrap(),
        );
        let joined = a.join(" ");
        assert!(
            joined.contains(&format!("--ro-bind {}/usr /usr", root.path().display())),
            "{joined}"
        );
        assert!(joined.contains("--symlink usr/bin /bin"), "{joined}");
        assert!(
            !joined.contains("/proc /proc --ro")
                && !joined.contains(&format!("{}/proc", root.path().display())),
            "{joined}"
        );
        assert!(joined.contains("--bind /h/tmp /tmp"), "{joined}");
        assert!(joined.contains("--bind /h/src /src"), "{joined}");
        for want in [
            "--unshare-net",
            "--die-with-parent",
            "--clearenv",
            "--cap-drop",
        ] {
            assert!(a.contains(&want.to_owned()), "{want} missing: {joined}");
        }
        let dd = a.iter().position(|x| x == "--").unwrap();
        assert_eq!(&a[dd + 1..], ["cmake", "-S", "/src"]);
    }

    #[test]
    fn engines_refuse_toolchains_they_cannot_run() {
        let host = Root::Host;
        let rootfs = rootfs_root(Path::new("/r"), None);
        let image = image_root(None);
        let e = |k| engine(k, EngineSettings::default(), true);
        assert!(e(EngineKind::Host).command(&rootfs, &spec()).is_err());
        assert!(e(EngineKind::Bubblewrap).command(&image, &spec()).is_err());
        assert!(e(EngineKind::Podman).command(&host, &spec()).is_err());
        // The host engine cannot remap paths.
        let err = e(EngineKind::Host)
            .command(&host, &spec())
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot mount /h/src at /src"), "{err}");
    }
}
