//! `chaos note URL "text"`: writes an observation into a running game day's log from a
//! terminal, as the live page's box does. It is stamped on the run clock when the harness
//! receives it and lands in the run folder's `observations.ndjson` and in the report.

use serde_json::{Value, json};

use super::CliError;

/// Arguments of `chaos note`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The live page's URL (`chaos run --serve` prints it), e.g. http://127.0.0.1:7070/.
    pub url: String,
    /// What you saw ("pager fired for gateway p99").
    pub text: String,
    /// Who wrote it (default: $USER).
    #[arg(long)]
    pub author: Option<String>,
    /// The live listener's token, when it has one (`--serve-token`).
    #[arg(long, env = "CHAOS_SERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

pub(super) async fn run(args: Args) -> Result<(), CliError> {
    let base = args.url.split(['?', '#']).next().unwrap_or_default().trim_end_matches('/').to_string();
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(CliError::Usage(format!(
            "{}: expected the live page's URL, e.g. http://127.0.0.1:7070/ (chaos run --serve prints it)",
            args.url
        )));
    }
    let author = args.author.or_else(|| std::env::var("USER").ok());
    let mut request = reqwest::Client::new()
        .post(format!("{base}/api/notes"))
        .header("content-type", "application/json")
        .body(json!({ "text": args.text, "author": author }).to_string());
    if let Some(t) = &args.token {
        request = request.bearer_auth(t);
    }
    let reply = request
        .send()
        .await
        .map_err(|e| CliError::Control { status: None, message: format!("{base}: {e} (is the run serving?)") })?;
    let status = reply.status().as_u16();
    let text = reply.text().await.unwrap_or_default();
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if status != 201 {
        let message =
            body.pointer("/error/message").and_then(Value::as_str).map_or_else(|| body.to_string(), str::to_string);
        return Err(CliError::Control { status: Some(status), message: format!("{base}: {message}") });
    }
    let t = body.get("t_s").and_then(Value::as_f64).unwrap_or_default();
    super::run::print(&format!("noted at {t:.1} s from the load start ({})\n", body["at"].as_str().unwrap_or("")))
}
