//! `chaos fault`: a command-line front for a running mock's control API.

use std::io::Write;
use std::path::PathBuf;

use bytes::Bytes;
use comfy_table::Table;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::faults::Fault;
use crate::scenario::{Source, faults_from_source};

use super::CliError;

/// Arguments of `chaos fault`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The mock's control API (the `control on http://…` line `chaos mock` prints).
    #[arg(long, env = "CHAOS_MOCK_CONTROL")]
    pub mock: String,
    /// Bearer token, when the control API requires one.
    #[arg(long, env = "CHAOS_ADMIN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// `chaos fault` actions.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Add a fault given as KEY=VALUE pairs (`kind=status code=429 retry_after=2s duration=30s`),
    /// or every fault of a faults file; `start` counts from now.
    Add {
        /// A faults file ([[fault]] tables) instead of pairs.
        #[arg(long, conflicts_with = "pairs")]
        file: Option<PathBuf>,
        /// KEY=VALUE pairs of one fault; dotted keys work (`match.upstream=primary`).
        #[arg(required_unless_present = "file")]
        pairs: Vec<String>,
    },
    /// List the timeline.
    List,
    /// Remove a fault by name.
    Rm {
        /// The fault's name.
        name: String,
    },
    /// Remove every fault.
    Reset,
    /// Upstreams and faults right now.
    Status,
}

pub(super) async fn run(args: Args) -> Result<(), CliError> {
    let api = Control { base: args.mock.trim_end_matches('/').to_string(), token: args.token };
    let mut out = super::term::stdout();
    let text = match args.action {
        Action::Add { file, pairs } => {
            let faults = match file {
                Some(path) => faults_from_source(&Source::read(&path)?, None)?
                    .into_iter()
                    .map(|f| {
                        let mut fault = f.fault;
                        *fault.envelope_mut().name = Some(f.name);
                        fault
                    })
                    .collect(),
                None => vec![from_pairs(&pairs)?],
            };
            let body = serde_json::to_vec(&faults).unwrap_or_default();
            let reply = api.call("POST", "/_chaos/faults", Some(body)).await?;
            format!(
                "added {}\n",
                reply["added"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default()
            )
        }
        Action::List => faults_table(&api.call("GET", "/_chaos/faults", None).await?),
        Action::Rm { name } => {
            api.call("DELETE", &format!("/_chaos/faults/{name}"), None).await?;
            format!("removed {name}\n")
        }
        Action::Reset => {
            api.call("POST", "/_chaos/reset", None).await?;
            "removed every fault\n".into()
        }
        Action::Status => {
            let status = api.call("GET", "/_chaos/status", None).await?;
            let mut t = Table::new();
            t.set_header(["UPSTREAM", "ADDRESS", "STATE", "IN FLIGHT", "QUEUED", "CONNECTIONS", "REQUESTS"]);
            for u in status["upstreams"].as_array().into_iter().flatten() {
                let state = if u["down"].as_bool() == Some(true) { "down" } else { "up" };
                t.add_row([
                    text(&u["name"]),
                    text(&u["addr"]),
                    state.into(),
                    text(&u["in_flight"]),
                    text(&u["queued"]),
                    text(&u["connections"]),
                    text(&u["requests"]),
                ]);
            }
            format!("{t}\n{}", faults_table(&status["faults"]))
        }
    };
    out.write_all(text.as_bytes()).map_err(|source| CliError::Io { context: "writing to stdout".into(), source })
}

/// One fault from `KEY=VALUE` pairs, read as TOML so errors point at the pair (line = pair).
fn from_pairs(pairs: &[String]) -> Result<Fault, CliError> {
    let mut toml_text = String::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(CliError::Usage(format!("`{pair}` is not KEY=VALUE")));
        };
        // Numbers, booleans, arrays and inline tables as written; anything else as a string.
        let literal = toml::from_str::<toml::Table>(&format!("v = {value}")).is_ok();
        let value = if literal { value.to_string() } else { toml::Value::String(value.to_string()).to_string() };
        toml_text.push_str(&format!("{key} = {value}\n"));
    }
    let fault: Fault = Source::new("command line", toml_text).parse()?;
    let problems = fault.problems();
    match problems.0.first() {
        Some(p) => Err(CliError::Usage(p.to_string())),
        None => Ok(fault),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn faults_table(faults: &Value) -> String {
    let list = faults.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return "no faults\n".into();
    }
    let secs = |v: &Value| v.as_u64().map_or("end".to_string(), |us| format!("{:.1}s", us as f64 / 1e6));
    let mut t = Table::new();
    t.set_header(["FAULT", "KIND", "ACTIVE", "STRENGTH", "HITS", "FROM", "UNTIL"]);
    for f in list {
        let strength = f["strength"].as_f64().map_or("-".into(), |s| format!("{s:.2}"));
        t.add_row([
            text(&f["name"]),
            text(&f["kind"]),
            text(&f["active"]),
            strength,
            text(&f["hits"]),
            secs(&f["start_us"]),
            secs(&f["end_us"]),
        ]);
    }
    format!("{t}\n")
}

struct Control {
    base: String,
    token: Option<String>,
}

impl Control {
    async fn call(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> Result<Value, CliError> {
        let url = format!("{}{path}", self.base);
        let mut req = hyper::Request::builder().method(method).uri(&url).header("content-type", "application/json");
        if let Some(t) = &self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| CliError::Usage(format!("{url}: {e}")))?;
        let client = Client::builder(TokioExecutor::new()).build_http();
        let unreachable = |e: String| CliError::Control { status: None, message: format!("{method} {url}: {e}") };
        let resp = tokio::time::timeout(std::time::Duration::from_secs(10), client.request(req))
            .await
            .map_err(|_| unreachable("timed out".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await.map_err(|e| unreachable(e.to_string()))?.to_bytes();
        let value: Value =
            if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        if status.is_success() {
            Ok(value)
        } else {
            let message = value["error"]["message"].as_str().map_or_else(|| status.to_string(), str::to_string);
            Err(CliError::Control { status: Some(status.as_u16()), message })
        }
    }
}
