//! The system under test: start it, wait until it is ready, watch it, stop it.
//!
//! Three kinds: the built-in reference gateway (in this process, or as a `chaos gateway`
//! child), a command the harness starts, or an origin already serving. A started command's
//! stdout and stderr go to the run folder; if it never becomes ready the error carries its
//! last log lines; it is stopped with SIGTERM, then SIGKILL after a grace. Placeholders in
//! its command, environment and URL (`{upstream.NAME.url}`, `{sut.port}`, …) are expanded
//! here. This module knows nothing of faults.
//!
//! Layer 3: builds on `scenario`, `gateway` (to start the built-in one) and the ground; must
//! not depend on `mock`, `load`, `faults` or anything above.

use process::{Process, log_tail, spawn};
pub use process::{StartedChild, kill_started_now};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use crate::gateway::{self, GatewayConfig, RunningGateway};
use crate::scenario::{Placeholder, Source, Sut, SutKind, SutMode};

/// Why the SUT could not be started or did not become ready.
#[derive(Debug, thiserror::Error)]
pub enum SutError {
    /// A placeholder in `[sut]` names something unknown.
    #[error(
        "sut: unknown placeholder {{{0}}} (known: upstream.NAME.url, upstream.NAME.port, upstreams, sut.port, run.dir)"
    )]
    Placeholder(String),
    /// The target is not on this machine and not allowed, or not a plain origin.
    #[error("sut: {url}: {}{}", rule.sentence(), if matches!(rule, crate::net::UrlRule::Remote(_)) {
        "; name the host in the scenario's allow_remote and with --allow-remote"
    } else { "" })]
    Remote {
        /// The URL.
        url: String,
        /// What it broke.
        rule: crate::net::UrlRule,
    },
    /// The gateway policy file is invalid.
    #[error("{0}")]
    Policy(#[from] crate::scenario::ScenarioError),
    /// The built-in gateway failed to start.
    #[error("{0}")]
    Gateway(#[from] gateway::GatewayError),
    /// The command could not be started.
    #[error("sut: cannot start {program:?}: {source}")]
    Spawn {
        /// Program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It did not become ready in time.
    #[error("sut: not ready after {waited:?} ({last}){}", tail(log_tail))]
    NotReady {
        /// How long we waited.
        waited: Duration,
        /// The last readiness result.
        last: String,
        /// Its last log lines.
        log_tail: Vec<String>,
    },
    /// It exited while starting.
    #[error("sut: exited while starting ({status}){}", tail(log_tail))]
    Exited {
        /// Exit status.
        status: String,
        /// Its last log lines.
        log_tail: Vec<String>,
    },
    /// Files in the run folder.
    #[error("sut: {context}: {source}")]
    Io {
        /// What.
        context: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn tail(lines: &[String]) -> String {
    if lines.is_empty() { String::new() } else { format!("\n  last log lines:\n    {}", lines.join("\n    ")) }
}

/// What the SUT is started against.
#[derive(Clone, Debug)]
pub struct SutContext {
    /// Upstream names and origins, in scenario order.
    pub upstreams: Vec<(String, String)>,
    /// The run folder (logs go here).
    pub run_dir: PathBuf,
    /// Non-loopback hosts allowed (named by both the scenario and the command line).
    pub allow_remote: Vec<String>,
    /// The `chaos` binary, for running the gateway as a child.
    pub chaos_bin: PathBuf,
}

/// A running (or reachable) system under test.
#[allow(clippy::large_enum_variant, reason = "one value per run; boxing buys nothing")]
pub enum RunningSut {
    /// No SUT: load goes to the first upstream.
    Direct {
        /// Its origin.
        url: String,
    },
    /// The gateway in this process.
    InProcess {
        /// It.
        gateway: RunningGateway,
    },
    /// A child process (a SUT command under its guard, or the gateway child).
    Child {
        /// It, and its process group.
        child: Box<StartedChild>,
        /// Its origin.
        url: String,
        /// What it is, for reports.
        what: String,
        /// SIGTERM-to-SIGKILL grace.
        stop_timeout: Duration,
        /// Its stdout and stderr logs.
        logs: [PathBuf; 2],
    },
    /// Already running elsewhere on this machine.
    External {
        /// Its origin.
        url: String,
    },
}

impl std::fmt::Debug for RunningSut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RunningSut({})", self.describe())
    }
}

/// Checks that `url` is an origin ([`crate::net::check_url`]) on loopback or an allowed host.
pub fn check_target(url: &str, allow_remote: &[String]) -> Result<(), SutError> {
    crate::net::check_url(url, crate::net::UrlShape::Origin, allow_remote)
        .map(drop)
        .map_err(|e| SutError::Remote { url: e.url, rule: e.rule })
}

/// Checks, before anything starts, that a SUT given by URL is loopback or allowed. A URL
/// with placeholders is checked with them filled in as the harness fills them
/// ([`crate::scenario::fill_for_check`]).
pub fn precheck(sut: Option<&Sut>, allow_remote: &[String]) -> Result<(), SutError> {
    let url = match sut.map(|s| &s.kind) {
        Some(SutKind::External { url } | SutKind::Command { url, .. }) => url,
        _ => return Ok(()),
    };
    let filled = crate::scenario::fill_for_check(url);
    check_target(&filled, allow_remote).map_err(|e| match e {
        SutError::Remote { rule, .. } => SutError::Remote { url: url.clone(), rule },
        other => other,
    })
}

/// Expands `{…}` placeholders in `text`.
pub fn expand(text: &str, ctx: &SutContext, sut_port: u16) -> Result<String, SutError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    for (key, placeholder) in Placeholder::scan(text) {
        let at = rest.find(&format!("{{{key}}}")).ok_or_else(|| SutError::Placeholder(key.into()))?;
        out.push_str(&rest[..at]);
        let upstream = |name: &str| {
            ctx.upstreams
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, u)| u.clone())
                .ok_or_else(|| SutError::Placeholder(key.into()))
        };
        out.push_str(&match placeholder.ok_or_else(|| SutError::Placeholder(key.into()))? {
            Placeholder::SutPort => sut_port.to_string(),
            Placeholder::RunDir => ctx.run_dir.display().to_string(),
            Placeholder::Upstreams => ctx.upstreams.iter().map(|(_, u)| u.as_str()).collect::<Vec<_>>().join(","),
            Placeholder::UpstreamUrl(name) => upstream(name)?,
            Placeholder::UpstreamPort(name) => upstream(name)?.rsplit(':').next().unwrap_or_default().to_string(),
        });
        rest = &rest[at + key.len() + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A free loopback port (bound and released; the SUT binds it next).
fn free_port() -> Result<u16, SutError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|source| SutError::Io { context: "finding a free port".into(), source })
}

/// Starts the SUT (`None`: load goes straight to the first upstream).
pub async fn start(sut: Option<&Sut>, ctx: &SutContext) -> Result<RunningSut, SutError> {
    let Some(sut) = sut else {
        let url = ctx.upstreams.first().map(|(_, u)| u.clone()).unwrap_or_default();
        return Ok(RunningSut::Direct { url });
    };
    let urls: Vec<String> = ctx.upstreams.iter().map(|(_, u)| u.clone()).collect();
    match &sut.kind {
        SutKind::Gateway { policy, mode: SutMode::InProcess } => {
            let config = policy_config(policy)?;
            gateway::check_upstreams(&urls, &ctx.allow_remote)?;
            let gateway = gateway::start(config, urls, "127.0.0.1:0".parse().expect("a valid address")).await?;
            Ok(RunningSut::InProcess { gateway })
        }
        SutKind::Gateway { policy, mode: SutMode::Child } => {
            policy_config(policy)?; // a bad policy file is a scenario error, reported before anything starts
            let port = free_port()?;
            let mut args = vec!["gateway".to_string()];
            if matches!(policy.as_str(), "naive" | "hardened") {
                args.extend(["--policy".into(), policy.clone()]);
            } else {
                args.extend(["--config".into(), policy.clone()]);
            }
            args.extend(["--upstream".into(), urls.join(","), "--listen".into(), format!("127.0.0.1:{port}")]);
            for host in &ctx.allow_remote {
                args.extend(["--allow-remote".into(), host.clone()]);
            }
            let program = ctx.chaos_bin.display().to_string();
            let what = format!("chaos gateway --policy {policy} (child)");
            let url = format!("http://127.0.0.1:{port}");
            let env = vec![(gateway::PARENT_PID_ENV.to_string(), std::process::id().to_string())];
            spawn(Process { program, args, env, cwd: None, url, what, guarded: false }, sut, ctx)
        }
        SutKind::Command { command, env, cwd, url } => {
            let port = free_port()?;
            let url = expand(url, ctx, port)?;
            check_target(&url, &ctx.allow_remote)?;
            let args: Vec<String> = command[1..].iter().map(|a| expand(a, ctx, port)).collect::<Result<_, _>>()?;
            let env: Vec<(String, String)> =
                env.iter().map(|(k, v)| Ok((k.clone(), expand(v, ctx, port)?))).collect::<Result<_, SutError>>()?;
            let program = expand(&command[0], ctx, port)?;
            // As it was started: placeholders resolved (`{sut.port}` → the port chosen).
            let what = format!(
                "command {}",
                std::iter::once(program.as_str()).chain(args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
            );
            spawn(Process { program, args, env, cwd: Some(cwd), url, what, guarded: true }, sut, ctx)
        }
        SutKind::External { url } => {
            let url = expand(url, ctx, 0)?;
            check_target(&url, &ctx.allow_remote)?;
            Ok(RunningSut::External { url })
        }
    }
}

/// The most retries the SUT makes per request, when known: the scenario's `sut.max_retries`,
/// else the built-in gateway policy's `retry.max_retries`.
pub fn declared_max_retries(sut: Option<&Sut>) -> Option<u32> {
    let sut = sut?;
    sut.max_retries.or_else(|| match &sut.kind {
        SutKind::Gateway { policy, .. } => policy_config(policy).ok().map(|c| c.retry.max_retries),
        _ => None,
    })
}

/// The built-in gateway's policy, when the SUT is the built-in gateway and its policy reads.
pub fn declared_policy(sut: Option<&Sut>) -> Option<GatewayConfig> {
    match &sut?.kind {
        SutKind::Gateway { policy, .. } => policy_config(policy).ok(),
        _ => None,
    }
}

fn policy_config(policy: &str) -> Result<GatewayConfig, SutError> {
    match GatewayConfig::shipped(policy) {
        Some(c) => Ok(c),
        None => Ok(GatewayConfig::from_source(&Source::read(Path::new(policy))?)?),
    }
}

impl RunningSut {
    /// The origin load goes to.
    pub fn url(&self) -> String {
        match self {
            Self::Direct { url } | Self::External { url } | Self::Child { url, .. } => url.clone(),
            Self::InProcess { gateway } => gateway.uri(),
        }
    }

    /// What it is, for reports.
    pub fn describe(&self) -> String {
        match self {
            Self::Direct { url } => format!("none: load goes straight to the first upstream ({url})"),
            Self::InProcess { gateway } => format!("built-in gateway, policy {} (in process)", gateway.config().name),
            Self::Child { what, .. } => what.clone(),
            Self::External { url } => format!("external, at {url}"),
        }
    }

    /// Whether a started process has exited, and how.
    pub fn exited(&mut self) -> Option<String> {
        match self {
            Self::Child { child, .. } => match child.child.try_wait() {
                Ok(Some(status)) => Some(exit_text(status, child.group.is_some_and(|g| g.guarded))),
                Ok(None) => None,
                Err(e) => Some(e.to_string()),
            },
            _ => None,
        }
    }

    /// One readiness check: `path` answers 2xx (or, without a path, the port accepts).
    pub async fn ready_once(&self, client: &reqwest::Client, path: Option<&str>) -> Result<(), String> {
        let url = self.url();
        match path {
            Some(path) => match client.get(format!("{url}{path}")).send().await {
                Ok(r) if r.status().is_success() => Ok(()),
                Ok(r) => Err(format!("GET {path} answered {}", r.status())),
                Err(e) => Err(format!("GET {path}: {e}")),
            },
            None => {
                let authority = url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_string();
                tokio::net::TcpStream::connect(authority).await.map(|_| ()).map_err(|e| format!("connect: {e}"))
            }
        }
    }

    /// Waits until it is ready, failing with its last log lines after `timeout` or if it exits.
    pub async fn wait_ready(&mut self, path: Option<&str>, timeout: Duration) -> Result<(), SutError> {
        if matches!(self, Self::Direct { .. }) {
            return Ok(());
        }
        let client = probe_client();
        let started = Instant::now();
        loop {
            let last = match self.ready_once(&client, path).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if let Some(status) = self.exited() {
                return Err(SutError::Exited { status, log_tail: self.log_tail() });
            }
            if started.elapsed() >= timeout {
                return Err(SutError::NotReady { waited: started.elapsed(), last, log_tail: self.log_tail() });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Its last log lines (started processes only).
    pub fn log_tail(&self) -> Vec<String> {
        match self {
            Self::Child { logs, .. } => log_tail(logs, 10),
            _ => Vec::new(),
        }
    }

    /// Stops what the harness started: SIGTERM, then SIGKILL after the grace.
    pub async fn stop(self) {
        match self {
            Self::InProcess { gateway } => gateway.shutdown().await,
            Self::Child { mut child, stop_timeout, .. } => {
                // The child leads its own process group (see `spawn`). A guard is asked to stop
                // (SIGUSR1): it gives every process below it — the group, and what left it —
                // SIGTERM, the grace, then SIGKILL, and gets a little longer than the grace
                // before the group is killed from here. A plain child's group is signalled from
                // here, as systemd's control-group kill does: SIGTERM, the grace, SIGKILL.
                let group = child.group.map(|g| Pid::from_raw(g.group));
                let guarded = child.group.is_some_and(|g| g.guarded);
                child.stopped();
                let signal = |s| group.map(|g| nix::sys::signal::killpg(g, s));
                if guarded {
                    let _ = group.map(|g| nix::sys::signal::kill(g, nix::sys::signal::Signal::SIGUSR1));
                } else {
                    let _ = signal(Some(nix::sys::signal::Signal::SIGTERM));
                }
                let margin = if guarded { GUARD_MARGIN } else { Duration::ZERO };
                let deadline = tokio::time::Instant::now() + stop_timeout + margin;
                let _ = tokio::time::timeout_at(deadline, child.child.wait()).await;
                while signal(None).is_some_and(|r| r.is_ok()) && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let _ = signal(Some(nix::sys::signal::Signal::SIGKILL));
                let _ = child.child.kill().await;
            }
            Self::Direct { .. } | Self::External { .. } => {}
        }
    }
}

/// How much longer than the stop timeout a guard gets before its group is killed from here.
const GUARD_MARGIN: Duration = Duration::from_secs(2);

/// How a started process ended, in words. A guard exits 128 + N when the SUT died of signal N
/// (as shells report it).
fn exit_text(status: std::process::ExitStatus, guarded: bool) -> String {
    match status.code() {
        Some(code) if guarded && code > 128 => match nix::sys::signal::Signal::try_from(code - 128) {
            Ok(sig) => format!("killed by {sig}"),
            Err(_) => status.to_string(),
        },
        _ => status.to_string(),
    }
}

/// An HTTP client for readiness checks: short timeouts, no proxy.
pub fn probe_client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().unwrap_or_default()
}

pub mod guard;
mod process;
#[cfg(test)]
mod tests;
