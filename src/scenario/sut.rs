//! `[sut]`: the system under test, and `[limits]` / `[abort]`: what bounds a run.
//!
//! The SUT is the built-in reference gateway (in-process or as a child process), a command the
//! harness starts, or a URL already serving. Without `[sut]`, load goes straight to the first
//! upstream — for calibrating the harness against the mock's known capacity.
//!
//! Text in `command`, `env` and `url` may use placeholders, expanded when the run starts:
//! `{upstream.NAME.url}` (an upstream's origin), `{upstream.NAME.port}`, `{upstreams}` (every
//! origin, comma-separated, in file order), `{sut.port}` (a free loopback port chosen for the
//! SUT) and `{run.dir}` (the run folder).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::located::Problems;

use super::Duration;

/// A placeholder in `[sut]` text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placeholder<'a> {
    /// `{sut.port}`.
    SutPort,
    /// `{run.dir}`.
    RunDir,
    /// `{upstreams}`.
    Upstreams,
    /// `{upstream.NAME.url}`.
    UpstreamUrl(&'a str),
    /// `{upstream.NAME.port}`.
    UpstreamPort(&'a str),
}

impl<'a> Placeholder<'a> {
    /// Every placeholder's text (between the braces) and what it parses to, in order; an
    /// unclosed brace yields its rest as unknown.
    pub fn scan(text: &'a str) -> Vec<(&'a str, Option<Placeholder<'a>>)> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else {
                out.push((after, None));
                break;
            };
            let key = &after[..close];
            out.push((key, Self::parse(key)));
            rest = &after[close + 1..];
        }
        out
    }

    /// The placeholder `key` (the text between the braces), if it is one.
    pub fn parse(key: &'a str) -> Option<Self> {
        match key.split('.').collect::<Vec<_>>().as_slice() {
            ["sut", "port"] => Some(Self::SutPort),
            ["run", "dir"] => Some(Self::RunDir),
            ["upstreams"] => Some(Self::Upstreams),
            ["upstream", name, "url"] => Some(Self::UpstreamUrl(name)),
            ["upstream", name, "port"] => Some(Self::UpstreamPort(name)),
            _ => None,
        }
    }
}

/// `text` with its placeholders filled for a check made before the run starts: ports as `1`,
/// origins as `http://127.0.0.1:1` (the harness fills them with loopback values), the run
/// folder as `/run.dir` (a path: read as a host, it is not this machine). Unknown ones stay.
pub fn fill_for_check(text: &str) -> String {
    let mut out = text.to_string();
    for (key, placeholder) in Placeholder::scan(text) {
        let value = match placeholder {
            Some(Placeholder::SutPort | Placeholder::UpstreamPort(_)) => "1",
            Some(Placeholder::UpstreamUrl(_) | Placeholder::Upstreams) => "http://127.0.0.1:1",
            Some(Placeholder::RunDir) => "/run.dir",
            None => continue,
        };
        out = out.replace(&format!("{{{key}}}"), value);
    }
    out
}

/// What placeholders can be, for error messages.
pub const KNOWN_PLACEHOLDERS: &str = "{upstream.NAME.url}, {upstream.NAME.port}, {upstreams}, {sut.port} or {run.dir}";

/// The check `chaos run` makes on `sut.url` before anything starts ([`crate::net::check_url`],
/// placeholders filled), found by `chaos validate` too.
fn url_problem(url: &str, allow_remote: &[String], push: &mut impl FnMut(&str, String, &str)) {
    let filled = fill_for_check(url);
    let Err(refused) = crate::net::check_url(&filled, crate::net::UrlShape::Origin, allow_remote) else { return };
    match refused.rule {
        crate::net::UrlRule::Remote(host) => push(
            "url",
            format!("`{url}` (host `{host}`, not this machine)"),
            &format!(
                "a loopback host (127.0.0.1, ::1, localhost), or `{host}` named in `allow_remote` and given to `chaos run --allow-remote {host}`"
            ),
        ),
        rule => push(
            "url",
            format!("`{url}`"),
            &format!("{rule} (an http:// origin, http://HOST[:PORT], e.g. http://127.0.0.1:{{sut.port}})"),
        ),
    }
}

/// Built-in systems under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Builtin {
    /// The reference AI gateway (`chaos gateway`).
    Gateway,
}

/// How the built-in gateway runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SutMode {
    /// In the harness process (default): nothing else to start.
    #[default]
    InProcess,
    /// As a child process (`chaos gateway …`), with its own CPU accounting and logs.
    Child,
}

/// `[sut]` as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SutSection {
    /// A built-in SUT: `gateway`.
    pub builtin: Option<Builtin>,
    /// The gateway policy: `naive`, `hardened`, or a policy file (relative to the scenario).
    pub policy: Option<String>,
    /// `in_process` (default) or `child`, for the built-in gateway.
    pub mode: Option<SutMode>,
    /// A program and its arguments to start (no shell), e.g. `["./gateway", "--port", "{sut.port}"]`.
    pub command: Option<Vec<String>>,
    /// Environment for `command`, e.g. `{ UPSTREAM_URL = "{upstream.primary.url}" }`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory for `command` (relative to the scenario; default: the scenario's folder).
    pub cwd: Option<String>,
    /// The SUT's origin, e.g. `http://127.0.0.1:{sut.port}` (required with `command`, or alone for
    /// a SUT that is already running).
    pub url: Option<String>,
    /// A path polled until it answers 2xx before load starts, e.g. `/healthz` (default: for the
    /// built-in gateway `/readyz`; otherwise until the port accepts connections).
    pub ready: Option<String>,
    /// Longest wait for readiness (default 30s).
    pub startup_timeout: Option<Duration>,
    /// Grace between SIGTERM and SIGKILL when stopping a started SUT (default 10s).
    pub stop_timeout: Option<Duration>,
    /// The most retries the SUT makes for one request, when known: the N of the reference
    /// amplification (1 − p^(N+1)) / (1 − p). Default: what the built-in gateway's policy
    /// says; otherwise the largest number observed.
    pub max_retries: Option<u32>,
}

/// What the SUT is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SutKind {
    /// The reference gateway with a shipped policy or a policy file.
    Gateway {
        /// `naive`, `hardened`, or a path (resolved against the scenario's folder).
        policy: String,
        /// In-process or child.
        mode: SutMode,
    },
    /// A command the harness starts.
    Command {
        /// Program and arguments (placeholders not yet expanded).
        command: Vec<String>,
        /// Environment (placeholders not yet expanded).
        env: BTreeMap<String, String>,
        /// Working directory.
        cwd: std::path::PathBuf,
        /// Its origin (placeholders not yet expanded).
        url: String,
    },
    /// Already running at this origin.
    External {
        /// Its origin.
        url: String,
    },
}

/// `[sut]` resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sut {
    /// What it is.
    #[serde(flatten)]
    pub kind: SutKind,
    /// Readiness path (None: wait for the port only).
    pub ready: Option<String>,
    /// Longest wait for readiness.
    pub startup_timeout: Duration,
    /// SIGTERM-to-SIGKILL grace.
    pub stop_timeout: Duration,
    /// Retries per request the scenario declares (`sut.max_retries`).
    #[serde(default)]
    pub max_retries: Option<u32>,
}

impl SutSection {
    /// What is wrong with `[sut]`; `allow_remote` is the scenario's list of hosts a
    /// `sut.url` may name besides this machine.
    pub(crate) fn problems(&self, upstreams: &[&str], allow_remote: &[String]) -> Problems {
        let mut out = Problems::default();
        let mut texts: Vec<(String, &str)> = Vec::new();
        if let Some(c) = &self.command {
            texts.extend(c.iter().enumerate().map(|(i, a)| (format!("sut.command[{i}]"), a.as_str())));
        }
        texts.extend(self.env.iter().map(|(k, v)| (format!("sut.env.{k}"), v.as_str())));
        if let Some(u) = &self.url {
            texts.push(("sut.url".into(), u.as_str()));
        }
        for (key, text) in texts {
            for (found, p) in Placeholder::scan(text) {
                let bad = match p {
                    None => Some(format!("{{{found}}}")),
                    Some(Placeholder::UpstreamUrl(n) | Placeholder::UpstreamPort(n)) if !upstreams.contains(&n) => {
                        Some(format!("{{{found}}}: no upstream {n:?} (upstreams: {})", upstreams.join(", ")))
                    }
                    _ => None,
                };
                if let Some(bad) = bad {
                    out.push(key.clone(), bad, KNOWN_PLACEHOLDERS);
                }
            }
        }
        let mut push = |k: &str, found: String, expected: &str| out.push(format!("sut.{k}"), found, expected);
        match (&self.builtin, &self.command, &self.url) {
            (Some(_), Some(_), _) => {
                push("command", "both builtin and command".into(), "builtin = \"gateway\" or command = [...]")
            }
            (Some(_), None, Some(_)) => {
                push("url", "a url with builtin".into(), "no url: the harness knows where it listens")
            }
            (None, Some(_), None) => {
                push("url", "a command without url".into(), "url = \"http://127.0.0.1:{sut.port}\"")
            }
            (None, None, None) => {
                push("builtin", "an empty [sut]".into(), "builtin = \"gateway\", command + url, or url")
            }
            _ => {}
        }
        if self.builtin.is_none() && self.policy.is_some() {
            push("policy", "a policy without builtin".into(), "policy only with builtin = \"gateway\"");
        }
        if self.builtin.is_none() && self.mode.is_some() {
            push("mode", "a mode without builtin".into(), "mode only with builtin = \"gateway\"");
        }
        if self.command.as_ref().is_some_and(Vec::is_empty) {
            push("command", "[]".into(), "a program and its arguments");
        }
        if self.command.is_none() && (!self.env.is_empty() || self.cwd.is_some()) {
            push("env", "env or cwd without command".into(), "env and cwd only with command");
        }
        if let Some(url) = &self.url {
            url_problem(url, allow_remote, &mut push);
        }
        if let Some(r) = &self.ready
            && !r.starts_with('/')
        {
            push("ready", format!("{r:?}"), "a path starting with /");
        }
        out
    }

    pub(crate) fn resolve(&self, dir: &std::path::Path) -> Sut {
        let kind = match (&self.builtin, &self.command, &self.url) {
            (Some(Builtin::Gateway), _, _) => {
                let policy = self.policy.clone().unwrap_or_else(|| "hardened".into());
                let policy = if matches!(policy.as_str(), "naive" | "hardened") {
                    policy
                } else {
                    dir.join(policy).display().to_string()
                };
                SutKind::Gateway { policy, mode: self.mode.unwrap_or_default() }
            }
            (None, Some(command), url) => SutKind::Command {
                command: command.clone(),
                env: self.env.clone(),
                cwd: self.cwd.as_ref().map_or_else(|| dir.to_path_buf(), |c| dir.join(c)),
                url: url.clone().unwrap_or_default(),
            },
            (None, None, url) => SutKind::External { url: url.clone().unwrap_or_default() },
        };
        let ready = match (&self.ready, &kind) {
            (Some(r), _) => Some(r.clone()),
            (None, SutKind::Gateway { .. }) => Some("/readyz".into()),
            (None, _) => None,
        };
        Sut {
            kind,
            ready,
            startup_timeout: self.startup_timeout.unwrap_or(Duration::from_secs(30)),
            stop_timeout: self.stop_timeout.unwrap_or(Duration::from_secs(10)),
            max_retries: self.max_retries,
        }
    }
}

/// `[limits]`: every run is bounded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    /// Longest load (default: the phases and steps, plus the client timeout and 30 s for the
    /// last requests to finish).
    pub max_duration: Option<Duration>,
    /// Most client requests (default 1,000,000).
    pub max_requests: Option<u64>,
}

/// `[abort]`: conditions that stop a run early.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AbortSection {
    /// Stop when the share of failed requests (neither `ok` nor `fallback`) stays above this,
    /// 0–1 …
    pub error_rate: Option<f64>,
    /// … for this long (default 30s).
    #[serde(rename = "for")]
    pub for_: Option<Duration>,
    /// Requests needed in that time before the rate counts (default 20).
    pub min_requests: Option<u64>,
    /// Stop when the SUT's readiness check fails for this long (a started SUT only).
    pub sut_not_ready_for: Option<Duration>,
}

/// Run bounds and abort conditions, resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Longest load, as written (`None`: see [`Limits::max_duration`]).
    pub max_duration_set: Option<Duration>,
    /// Most client requests.
    pub max_requests: u64,
    /// Error-rate abort: (rate, for, min requests).
    pub abort_error_rate: Option<(f64, Duration, u64)>,
    /// Readiness abort.
    pub abort_sut_not_ready_for: Option<Duration>,
}

/// Requests allowed when `[limits]` does not say.
pub const DEFAULT_MAX_REQUESTS: u64 = 1_000_000;

pub(crate) fn limit_problems(limits: &LimitsSection, abort: &AbortSection) -> Problems {
    let mut out = Problems::default();
    if limits.max_requests == Some(0) {
        out.push("limits.max_requests", "0", "at least 1");
    }
    if limits.max_duration.is_some_and(|d| d.as_std().is_zero()) {
        out.push("limits.max_duration", "0s", "a duration > 0");
    }
    if let Some(r) = abort.error_rate
        && !(0.0..=1.0).contains(&r)
    {
        out.push("abort.error_rate", r.to_string(), "a share from 0 to 1");
    }
    out
}

impl Limits {
    /// The longest the load may run: as written, or the plan's `length` plus the client
    /// `timeout` and 30 s for the last requests to finish.
    pub fn max_duration(&self, length: Duration, timeout: Duration) -> Duration {
        self.max_duration_set.unwrap_or(length + timeout + Duration::from_secs(30))
    }
}

pub(crate) fn resolve_limits(limits: &LimitsSection, abort: &AbortSection) -> Limits {
    Limits {
        max_duration_set: limits.max_duration,
        max_requests: limits.max_requests.unwrap_or(DEFAULT_MAX_REQUESTS),
        abort_error_rate: abort
            .error_rate
            .map(|r| (r, abort.for_.unwrap_or(Duration::from_secs(30)), abort.min_requests.unwrap_or(20))),
        abort_sut_not_ready_for: abort.sut_not_ready_for,
    }
}
