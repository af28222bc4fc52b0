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

pub(super) async fn run(args: Args) -> Result<(), CliError> {
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
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", running.uri())
            .and_then(|()| out.flush())
            .map_err(|source| CliError::Io { context: "writing to stdout".into(), source })?;
    }
    tracing::info!(policy = %running.config().name, uri = %running.uri(), upstreams = ?args.upstream, "gateway serving");
    shutdown.wait().await;
    running.shutdown().await;
    Ok(())
}
