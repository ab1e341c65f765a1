//! `rcclfix toolchain`: build, list and run toolchains. The arguments, the calls into
//! [`crate::container`] and the rendering (the table, `--json`, the built folder).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::container::{self, EngineKind, Mount, RunSpec};
use crate::ui::Ui;

/// The subcommand's arguments (clap): `rcclfix toolchain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: ToolchainCmd,
}

#[derive(Debug, clap::Subcommand)]
enum ToolchainCmd {
    /// Build a Debian-package toolchain rootfs (containers/<name>/toolchain.toml) with debootstrap
    /// into $RCCLFIX_HOME/toolchains/<name>; skipped when it is up to date.
    Build {
        /// Toolchain name, e.g. debian-trixie.
        name: String,
        /// Rebuild even when the stamp matches the description.
        #[arg(long)]
        force: bool,
    },
    /// List the toolchain descriptions and which are built.
    List {
        /// JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Run a command inside a toolchain (network off). The current directory is mounted read-write at
    /// the same path and is the working directory.
    Run {
        /// Toolchain name, e.g. debian-trixie.
        name: String,
        /// Engine (default: automatic; also RCCLFIX_ENGINE).
        #[arg(long, value_enum)]
        engine: Option<EngineKind>,
        /// Also mount HOST[:GUEST] read-write (GUEST defaults to HOST).
        #[arg(long = "volume", value_name = "HOST[:GUEST]")]
        volumes: Vec<String>,
        /// Allow network access.
        #[arg(long)]
        network: bool,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
}

/// Run the subcommand; `toolchain run` passes the command's own exit status through.
///
/// Errors: the toolchain cannot be built, listed or opened; the engine cannot start.
pub fn run(a: Args, _ui: &Ui) -> anyhow::Result<ExitCode> {
    match a.cmd {
        ToolchainCmd::Build { name, force } => {
            let dir = container::toolchain::build_rootfs(&name, force)?;
            crate::outln!("{}", dir.display())?;
        }
        ToolchainCmd::List { json } => {
            let rows = container::toolchain::list()?;
            if json {
                crate::outln!("{}", serde_json::to_string_pretty(&rows)?)?;
            } else {
                let rows: Vec<Vec<String>> = rows
                    .iter()
                    .map(|r| {
                        let size = r
                            .stamp
                            .as_ref()
                            .map(|s| format!("{:.1} GB", s.rootfs_bytes as f64 / 1e9))
                            .unwrap_or_default();
                        vec![r.name.clone(), r.state.clone(), size, r.description.clone()]
                    })
                    .collect();
                crate::out!(
                    "{}",
                    crate::ui::columns(&["TOOLCHAIN", "STATE", "SIZE", "DESCRIPTION"], &rows)
                )?;
            }
        }
        ToolchainCmd::Run {
            name,
            engine,
            volumes,
            network,
            argv,
        } => {
            let (engine, tc) = container::open(&name, engine)?;
            let cwd = std::env::current_dir()?;
            let cwd_s = cwd
                .to_str()
                .context("the current directory is not UTF-8")?
                .to_owned();
            // The current directory keeps its path inside the toolchain, except where
            // bubblewrap cannot create that mount point in the read-only rootfs (e.g. under
            // /var or /root): there it appears as /work.
            let guest = if engine.name() == "bubblewrap" && !bwrap_can_mount_at(tc.rootfs(), &cwd) {
                crate::ui::status("Mounting", format_args!("{} as /work", cwd.display()));
                "/work".to_owned()
            } else {
                cwd_s.clone()
            };
            let mut mounts = vec![Mount {
                host: cwd.clone(),
                guest: guest.clone(),
                writable: true,
            }];
            for v in volumes {
                let (h, g) = v.split_once(':').unwrap_or((&v, &v));
                let host = PathBuf::from(h);
                let host = fs_err::canonicalize(&host).with_context(|| format!("--volume {v}"))?;
                mounts.push(Mount {
                    host,
                    guest: g.to_owned(),
                    writable: true,
                });
            }
            let spec = RunSpec {
                summary: format!("{} in {name}", argv[0]),
                argv,
                mounts,
                workdir: guest,
                env: vec![],
                network,
                tmp: None,
            };
            if let Err(e) = engine.run_inherit(&tc.root(), &spec) {
                if let Some(ce) = e.downcast_ref::<crate::process::CommandError>() {
                    // Pass the command's own exit status through (`toolchain run -- false` → 1).
                    let code = ce
                        .status
                        .rsplit(' ')
                        .next()
                        .and_then(|s| s.parse::<u8>().ok())
                        .unwrap_or(2);
                    return Ok(ExitCode::from(code));
                }
                return Err(e);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether bubblewrap can bind a folder at `guest` inside `rootfs`: bwrap starts from a tmpfs root
/// with every top-level rootfs entry bound read-only over it and a scratch `/tmp`, so a mount point
/// can be created under `/tmp`, at a top-level name the rootfs lacks, or where the folder already
/// exists in the rootfs — not anywhere else.
fn bwrap_can_mount_at(rootfs: Option<&std::path::Path>, guest: &std::path::Path) -> bool {
    let Some(rootfs) = rootfs else { return true };
    let rel = match guest.strip_prefix("/") {
        Ok(r) => r,
        Err(_) => return false,
    };
    let mut comps = rel.components();
    let Some(top) = comps.next() else {
        return false;
    };
    if top.as_os_str() == "tmp" || !rootfs.join(top).exists() {
        return true;
    }
    rootfs.join(rel).is_dir()
}
