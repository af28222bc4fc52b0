//! `chaos gateway`: run the reference AI gateway in front of mock (or real) upstreams.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::gateway::{self, GatewayConfig};
use crate::scenario::Source;

use super::CliError;

/// Arguments of `chaos gateway`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A shipped policy: `naive` (the incidents) or `hardened` (the fix).
    #[arg(long, value_parser = ["naive", "hardened"], default_value = "hardened", conflicts_with = "config")]
    pub policy: String,
    /// A policy file of your own instead (see gateway/*.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Upstream origins, comma-separated, in priority order (e.g. http://127.0.0.1:9000).
    #[arg(long, required = true, value_delimiter = ',')]
    pub upstream: Vec<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// A non-loopback upstream host the gateway may send load to (repeatable).
    #[arg(long)]
    pub allow_remote: Vec<String>,
}

/// A gateway started by `chaos run` dies with it, even when the harness is killed with
/// SIGKILL and cannot stop it: the kernel sends SIGTERM on the parent's death (Linux
/// `PR_SET_PDEATHSIG`, asked for here by the child itself, since setting it from the parent
/// needs `unsafe` code between fork and exec). If the parent is already gone, exit now.
fn die_with_parent() -> Result<(), CliError> {
    let Some(parent) = std::env::var(gateway::PARENT_PID_ENV).ok().and_then(|p| p.parse::<i32>().ok()) else {
        return Ok(());
    };
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM) {
        tracing::warn!("cannot ask to die with the harness: {e}");
    }
    if nix::unistd::getppid().as_raw() != parent {
        return Err(CliError::Usage(format!("the harness that started this gateway (pid {parent}) is gone")));
    }
    Ok(())
}

pub(super) async fn run(args: Args) -> Result<(), CliError> {
    die_with_parent()?;
    let config = match &args.config {
        Some(path) => GatewayConfig::from_source(&Source::read(path)?)?,
        None => GatewayConfig::shipped(&args.policy)
            .ok_or_else(|| CliError::Usage(format!("no policy {:?}", args.policy)))?,
    };
    gateway::check_upstreams(&args.upstream, &args.allow_remote)?;
    // Handlers go in before the address is announced: whoever reads it may signal at once.
    let shutdown = super::signals::Shutdown::install()
        .map_err(|source| CliError::Io { context: "installing signal handlers".into(), source })?;
    let running = gateway::start(config, args.upstream.clone(), args.listen).await?;
    {
        let mut out = super::term::stdout();
        writeln!(out, "listening on {}", running.uri())
            .and_then(|()| out.flush())
            .map_err(|source| CliError::Io { context: "writing to stdout".into(), source })?;
    }
    tracing::info!(policy = %running.config().name, uri = %running.uri(), upstreams = ?args.upstream, "gateway serving");
    shutdown.wait().await;
    running.shutdown().await;
    Ok(())
}
