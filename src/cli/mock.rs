//! `chaos mock`: serve a profile (or pool) until SIGINT/SIGTERM; or, with `--scenario`, a
//! scenario's upstreams and fault timeline — the shared mock of a sharded run when
//! `--start-at` puts its clock and timeline on the workers' instant.

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
    #[arg(long, required_unless_present = "scenario", conflicts_with = "scenario")]
    pub profile: Option<PathBuf>,
    /// Serve a scenario's upstreams and its fault timeline instead (the shared mock of a
    /// sharded run: `chaos run --worker … --mock URL`).
    #[arg(long, conflicts_with = "faults")]
    pub scenario: Option<PathBuf>,
    /// With --scenario: its time scale, as the workers run it.
    #[arg(long, default_value_t = 1.0, requires = "scenario")]
    pub time_scale: f64,
    /// With --scenario: the variant the workers run.
    #[arg(long, requires = "scenario")]
    pub variant: Option<String>,
    /// With --scenario: the workers' shared start instant (RFC 3339); the fault timeline and
    /// the attempt times count from it, as in the workers' folders.
    #[arg(long, value_name = "TIME", requires = "scenario", value_parser = super::run::parse_instant)]
    pub start_at: Option<std::time::SystemTime>,
    /// With --start-at: how many workers share the run (recorded for `chaos merge`).
    #[arg(long, default_value_t = 1, requires = "start_at")]
    pub workers: u32,
    /// With --scenario: write attempts.ndjson, events.ndjson and shard.json into this folder
    /// (a folder `chaos merge` takes beside the workers').
    #[arg(long, requires = "scenario")]
    pub out: Option<PathBuf>,
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
    /// Bearer token the control API requires (default: a random one, printed as `control
    /// token TOKEN`).
    #[arg(long, env = "CHAOS_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Serve the control API without a token: loopback only, for scripts on this machine
    /// (any local process, and only it, can then change the faults).
    #[arg(long, conflicts_with_all = ["admin_token", "no_admin"])]
    pub admin_no_token: bool,
}

pub(super) async fn run(mut args: Args) -> Result<(), CliError> {
    let scenario = match args.scenario.clone() {
        Some(path) => Some(scenario_mock(&mut args, &path)?),
        None => None,
    };
    let mut upstreams = match (&scenario, &args.profile) {
        (Some(s), _) => s.upstreams.clone(),
        (None, Some(profile)) => load_profile(profile)?,
        (None, None) => return Err(CliError::Usage("give --profile or --scenario".into())),
    };
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
    let (faults, clock) = match (&scenario, &args.faults) {
        (Some(s), _) => {
            let mut faults = s.faults.clone();
            if let Some(crate::scenario::SutKind::External { url }) = s.sut.as_ref().map(|x| &x.kind) {
                for f in &mut faults {
                    crate::faults::ttl_expiry::expand_sut_url(&mut f.fault, url);
                }
            }
            let clock = match args.start_at {
                Some(at) => crate::experiment::shared_clock(at)
                    .ok_or_else(|| CliError::Usage("--start-at: too far in the past".into()))?,
                None => Clock::start(),
            };
            (faults, clock)
        }
        (None, Some(path)) => (load_faults(path, Some(&names))?, Clock::start()),
        (None, None) => (Vec::new(), Clock::start()),
    };
    let admin_token = admin_token(&args)?;
    // On a shared start the timeline counts from the workers' load start, not from now.
    let shared_t0 = args.start_at.map(|_| crate::experiment::SHARED_T0_US);
    let options = MockOptions {
        seed: args.seed,
        clock,
        attempt_log: args.attempt_log.clone(),
        attempt_ring: args.attempt_ring,
        grace: args.grace.as_std(),
        event_log: args.event_log.clone(),
        faults: if shared_t0.is_some() { Vec::new() } else { faults.clone() },
        admin: (!args.no_admin).then_some(args.admin),
        admin_token,
        admin_limits: crate::listen::Limits::CONTROL,
    };
    crate::listen::fds::raise_limit();
    // Handlers go in before the address is announced: whoever reads it may signal at once.
    let shutdown = super::signals::Shutdown::install()
        .map_err(|source| CliError::Io { context: "installing signal handlers".into(), source })?;
    let pool = MockPool::start(&upstreams, options).await?;
    if let Some(t0) = shared_t0 {
        pool.add_faults_at(faults, t0).map_err(|e| CliError::Usage(format!("faults: {e}")))?;
    }
    let shard = match (&scenario, &args.out) {
        (Some(s), Some(out)) => Some(ShardOut::start(s, &args, out, &pool)?),
        _ => None,
    };
    announce(&pool).map_err(|source| CliError::Io { context: "writing to stdout".into(), source })?;
    shutdown.wait().await;
    tracing::info!("shutting down");
    let stopped = pool.shutdown().await;
    if let Some(shard) = shard {
        shard.finish()?;
    }
    stopped?;
    Ok(())
}

/// The mock's attempt tap, and how many attempts have come out of it.
type Tap = std::sync::Mutex<(std::sync::mpsc::Receiver<std::sync::Arc<crate::mock::Attempt>>, u64)>;

/// The `shard.json` of a shared mock's folder: written as it starts, and again once it has
/// stopped with the attempts it recorded, so `chaos merge` can tell an attempt log that was cut
/// or emptied afterwards.
struct ShardOut {
    folder: crate::run_folder::RunFolder,
    file: crate::record::ShardFile,
    /// Every attempt recorded, as it is; drained as the mock runs (the tap is unbounded).
    tap: std::sync::Arc<Tap>,
    drain: tokio::task::JoinHandle<()>,
}

impl ShardOut {
    fn start(
        s: &crate::scenario::Scenario,
        args: &Args,
        out: &std::path::Path,
        pool: &MockPool,
    ) -> Result<Self, CliError> {
        let shard = crate::record::Shard::new(0, args.workers.max(1)).unwrap_or(crate::record::Shard::WHOLE);
        let file = crate::experiment::shard_file(
            s,
            crate::record::ShardRole::Mock,
            shard,
            args.start_at.unwrap_or_else(std::time::SystemTime::now),
        );
        let folder = crate::run_folder::RunFolder::open(out);
        folder
            .write_json(crate::run_folder::RunFile::Shard, &file)
            .map_err(|e| CliError::Usage(format!("--out: {e}")))?;
        let tap: std::sync::Arc<Tap> = std::sync::Arc::new(std::sync::Mutex::new((pool.tap_attempts(), 0)));
        let t = tap.clone();
        let drain = tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(200));
            loop {
                tick.tick().await;
                Self::count(&t);
            }
        });
        Ok(Self { folder, file, tap, drain })
    }

    fn count(tap: &Tap) -> u64 {
        let mut t = tap.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        t.1 += t.0.try_iter().count() as u64;
        t.1
    }

    /// After the mock has stopped (every attempt recorded is in the tap by then).
    fn finish(mut self) -> Result<(), CliError> {
        self.drain.abort();
        self.file.attempts = Some(Self::count(&self.tap));
        self.file.finished = true;
        self.folder
            .write_json(crate::run_folder::RunFile::Shard, &self.file)
            .map_err(|e| CliError::Io { context: "writing shard.json".into(), source: std::io::Error::other(e) })
    }
}

/// The scenario the mock serves (`--scenario`), scaled and narrowed to its variant; its
/// logs go to `--out` unless given on their own.
fn scenario_mock(args: &mut Args, path: &std::path::Path) -> Result<crate::scenario::Scenario, CliError> {
    if !(args.time_scale > 0.0 && args.time_scale.is_finite()) {
        return Err(CliError::Usage(format!("--time-scale {}: expected a number > 0", args.time_scale)));
    }
    let mut s = crate::scenario::Scenario::load(path)?.scaled(args.time_scale);
    if let Some(name) = &args.variant {
        s = s.variant_named(name).map_err(CliError::Usage)?.clone();
    }
    if args.seed == DEFAULT_SEED {
        args.seed = s.seed;
    }
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)
            .map_err(|source| CliError::Io { context: format!("creating {}", out.display()), source })?;
        let folder = crate::run_folder::RunFolder::open(out);
        args.attempt_log.get_or_insert_with(|| folder.path(crate::run_folder::RunFile::Attempts));
        args.event_log.get_or_insert_with(|| folder.path(crate::run_folder::RunFile::Events));
    }
    Ok(s)
}

/// The control API's token: the one given, a random one, or none with `--admin-no-token`
/// (loopback only).
fn admin_token(args: &Args) -> Result<Option<String>, CliError> {
    if args.admin_no_token {
        if !args.admin.ip().is_loopback() {
            return Err(CliError::Usage(format!(
                "--admin-no-token with --admin {}: off loopback the control API needs a token (drop --admin-no-token: one is made and printed)",
                args.admin
            )));
        }
        return Ok(None);
    }
    match &args.admin_token {
        Some(t) if t.trim().is_empty() => Err(CliError::Usage("--admin-token: the token is empty".into())),
        Some(t) => Ok(Some(t.clone())),
        None => Ok(Some(crate::listen::guard::random_token())),
    }
}

/// `listening on http://ADDR` per upstream, first line first; pools add the name; then
/// `control on http://ADDR` for the control API and `control token TOKEN` when it has one.
fn announce(pool: &MockPool) -> std::io::Result<()> {
    let mut out = super::term::stdout();
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
        if let Some(token) = pool.admin_token() {
            writeln!(out, "control token {token}")?;
            tracing::info!("change faults with: chaos fault --mock {admin} --token {token} list");
        }
    }
    out.flush()
}
