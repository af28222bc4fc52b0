//! `chaos mock`: serve a profile (or pool) until SIGINT/SIGTERM.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::clock::Clock;
use crate::mock::{DEFAULT_RING, MockOptions, MockPool};
use crate::scenario::{DEFAULT_SEED, Duration, load_faults, load_profile};

use super::CliError;

/// Arguments of `chaos mock`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Profile or pool file (e.g. mock-upstreams/openai.toml).
    #[arg(long)]
    pub profile: PathBuf,
    /// Address of the first upstream; pool members follow on the next ports (port 0: each ephemeral).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Seed for latency draws and generated content.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Write every attempt record to this NDJSON file.
    #[arg(long)]
    pub attempt_log: Option<PathBuf>,
    /// Attempt records kept in memory for GET /_chaos/attempts.
    #[arg(long, default_value_t = DEFAULT_RING)]
    pub attempt_ring: usize,
    /// How long shutdown waits for in-flight responses.
    #[arg(long, default_value = "5s")]
    pub grace: Duration,
    /// Worker threads (default: the CPUs this process may run on; 1 uses a single-threaded runtime).
    #[arg(long)]
    pub threads: Option<usize>,
    /// A faults file ([[fault]] tables): the timeline at start, times counted from start.
    #[arg(long)]
    pub faults: Option<PathBuf>,
    /// Write fault events (expiries, flush hooks, outages) to this NDJSON file.
    #[arg(long)]
    pub event_log: Option<PathBuf>,
    /// Address of the control API (see `chaos fault`).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub admin: SocketAddr,
    /// Do not serve the control API.
    #[arg(long, conflicts_with = "admin")]
    pub no_admin: bool,
    /// Bearer token the control API requires (needed to bind it off loopback).
    #[arg(long, env = "CHAOS_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
}

pub(super) async fn run(args: Args) -> Result<(), CliError> {
    let mut upstreams = load_profile(&args.profile)?;
    for (i, u) in upstreams.iter_mut().enumerate() {
        if i == 0 || u.listen.is_none() {
            let mut addr = args.listen;
            if addr.port() != 0 {
                addr.set_port(addr.port().saturating_add(i as u16));
            }
            u.listen = Some(u.listen.filter(|_| i > 0).unwrap_or(addr));
        }
        if let Some(addr) = u.listen.filter(|a| !a.ip().is_loopback()) {
            tracing::warn!(upstream = %u.name, %addr, "listening on a non-loopback address: the mock is reachable from other hosts");
        }
    }
    let names: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
    let faults = match &args.faults {
        Some(path) => load_faults(path, Some(&names))?,
        None => Vec::new(),
    };
    let options = MockOptions {
        seed: args.seed,
        clock: Clock::start(),
        attempt_log: args.attempt_log.clone(),
        attempt_ring: args.attempt_ring,
        grace: args.grace.as_std(),
        event_log: args.event_log.clone(),
        faults,
        admin: (!args.no_admin).then_some(args.admin),
        admin_token: args.admin_token.clone(),
    };
    // Handlers go in before the address is announced: whoever reads it may signal at once.
    let shutdown = super::signals::Shutdown::install()
        .map_err(|source| CliError::Io { context: "installing signal handlers".into(), source })?;
    let pool = MockPool::start(&upstreams, options).await?;
    announce(&pool).map_err(|source| CliError::Io { context: "writing to stdout".into(), source })?;
    shutdown.wait().await;
    tracing::info!("shutting down");
    pool.shutdown().await?;
    Ok(())
}

/// `listening on http://ADDR` per upstream, first line first; pools add the name; then
/// `control on http://ADDR` for the control API.
fn announce(pool: &MockPool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let single = pool.upstreams().len() == 1;
    for u in pool.upstreams() {
        if single {
            writeln!(out, "listening on {}", u.uri())?;
        } else {
            writeln!(out, "listening on {} ({})", u.uri(), u.name())?;
        }
        tracing::info!(upstream = u.name(), uri = %u.uri(), "serving");
    }
    if let Some(admin) = pool.admin_uri() {
        writeln!(out, "control on {admin}")?;
    }
    out.flush()
}
