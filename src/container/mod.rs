//! Container engines (podman, docker, bubblewrap, host) and toolchains (Debian-package rootfs built by
//! rcclfix, official ROCm images, the host). Only this module spawns an engine: everything else hands
//! it a [`RunSpec`].
//!
//! `rcclfix toolchain build <name>` / `list` / `run <name> -- argv…` call into here from
//! `src/cmd/toolchain.rs`. [`engine`] runs a [`RunSpec`] in an [`engine::Root`] and knows the
//! image verbs; [`toolchain`] describes and prepares toolchains and asks the engine; [`rootfs`]
//! builds the Debian-package rootfs toolchains from a description and stamp ([`desc`]);
//! the official-image Containerfiles are parsed by `recipe::containerfile` for the recipe checks.

pub mod desc;
pub mod drift;
pub mod engine;
pub mod rootfs;
pub mod toolchain;

pub use engine::{Engine, EngineKind, Mount, Root, RunSpec};
pub use toolchain::{prepare, Toolchain, ToolchainDesc};

/// The engine requested by `--engine` or `RCCLFIX_ENGINE` (empty: automatic).
pub fn requested_engine(flag: Option<EngineKind>) -> anyhow::Result<Option<EngineKind>> {
    if flag.is_some() {
        return Ok(flag);
    }
    match std::env::var("RCCLFIX_ENGINE") {
        Ok(s) if !s.is_empty() && s != "auto" => Ok(Some(
            EngineKind::parse(&s).map_err(|e| anyhow::anyhow!("RCCLFIX_ENGINE: {e}"))?,
        )),
        _ => Ok(None),
    }
}

/// Open toolchain `name`, choose the engine, and prepare the toolchain for it.
pub fn open(name: &str, engine: Option<EngineKind>) -> anyhow::Result<(Engine, Toolchain)> {
    let mut tc = Toolchain::local(name)?;
    let engine = Engine::select(requested_engine(engine)?, &tc.root(), tc.name())?;
    prepare(&engine, &mut tc)?;
    Ok((engine, tc))
}
