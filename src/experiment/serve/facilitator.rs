//! The facilitator's controls on the live page: start an ad-hoc fault of any shipped kind, stop
//! one. Faults go through the run's mock control API (`POST /_chaos/faults`, `DELETE
//! /_chaos/faults/NAME`) like `chaos fault --mock`, so the mock validates them and logs them in
//! `events.ndjson`; each action is also an observation of kind `action` (a marker on the charts)
//! and the fault's window joins the run's record (`resolved.json`, the report's shading).

use std::time::Duration as StdDuration;

use serde::Serialize;
use serde_json::Value;

use super::hub::{Live, MockControl, Refused};
use crate::faults::{Fault, HangMode, MalformedMode, NetworkFault, ResetWhen};
use crate::record::ObservationKind;
use crate::scenario::NamedFault;

/// A fault the page offers as a starting point (editable before it is sent).
#[derive(Clone, Debug, Serialize)]
pub struct Template {
    /// What it does, in words.
    pub label: &'static str,
    /// The fault as JSON (the control API's body).
    pub fault: Value,
}

/// One template per shipped fault kind (two for `status`: a 429 storm and 503s). Built with
/// the fault builders, so each is valid by construction (a test posts every one to a mock).
pub fn templates() -> Vec<Template> {
    let s = StdDuration::from_secs;
    let list = [
        ("latency ×5 for 60 s", Fault::latency(5.0).lasting(s(60))),
        ("429 storm for 30 s", Fault::status(429).lasting(s(30))),
        ("503 on half the requests for 30 s", Fault::status(503).probability(0.5).lasting(s(30))),
        ("rate limit lowered to 60 rpm for 60 s", Fault::rate_limit(60).lasting(s(60))),
        ("10 % of requests hang for 30 s", Fault::hang(HangMode::NoResponse).probability(0.1).lasting(s(30))),
        ("10 % of connections reset for 30 s", Fault::reset(ResetWhen::BeforeResponse).probability(0.1).lasting(s(30))),
        ("30 % empty answers for 30 s", Fault::malformed(MalformedMode::EmptyContent).probability(0.3).lasting(s(30))),
        ("outage (connections refused) for 20 s", Fault::outage().lasting(s(20))),
        ("answers of the next 10 s expire together", Fault::ttl_expiry(s(10))),
    ];
    list.into_iter()
        .map(|(label, fault)| Template {
            label,
            fault: serde_json::to_value(&fault).ok().and_then(set_only).unwrap_or(Value::Null),
        })
        .collect()
}

/// `v` without its unset (null) fields and the objects left empty: what a person would write.
fn set_only(v: Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Object(o) => {
            let kept: serde_json::Map<String, Value> =
                o.into_iter().filter_map(|(k, v)| Some((k, set_only(v)?))).collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        other => Some(other),
    }
}

/// Why a facilitator action failed: the HTTP status to answer with, and why.
pub type Failure = (u16, String);

fn refused(e: Refused) -> Failure {
    match e {
        Refused::NotNow(m) => (409, m),
        Refused::Bad(m) => (400, m),
        Refused::Full(m) => (413, m),
    }
}

/// Starts the fault in `body` (one JSON fault object, as `POST /_chaos/faults` takes it),
/// named `adhoc-N-KIND` unless it has a name. Returns the name. It is read as every fault from
/// the network is: a flush command is refused, saying why.
pub async fn start(live: &Live, body: &[u8], author: Option<&str>) -> Result<String, Failure> {
    let (admin, clock, t0) = live.control().map_err(refused)?;
    let text = std::str::from_utf8(body).map_err(|_| (400, "the body is not UTF-8 text".to_string()))?;
    let mut fault = NetworkFault::from_text(text).map_err(|e| (400, e.to_string()))?;
    let name = match fault.name() {
        Some(n) => n.to_string(),
        None => live.next_adhoc_name(fault.fault().kind()),
    };
    fault.set_name(name.clone());
    let body = serde_json::to_vec(fault.fault()).map_err(|e| (500, e.to_string()))?;
    let reply = send(&admin, reqwest::Method::POST, "/_chaos/faults", body).await?;
    let status = reply.status().as_u16();
    let text = reply.text().await.unwrap_or_default();
    if status != 201 {
        return Err((status, control_message(&text)));
    }
    // For the run's record: the same fault with its start counted from the load start.
    let now = clock.now_us();
    let delay = fault.fault().envelope().start.map_or(0, |d| d.as_std().as_micros() as u64);
    let start_us = now + delay;
    let mut recorded = fault.into_fault();
    *recorded.envelope_mut().start = Some(StdDuration::from_micros(start_us.saturating_sub(t0)).into());
    let what = bounded(&describe(&recorded), MAX_DESCRIPTION_CHARS);
    live.adhoc_started(NamedFault { name: name.clone(), fault: recorded, group: None }, start_us);
    // The fault is on the mock: it is reported started whatever becomes of its note (a note
    // refused here would tell the room a fault that runs had failed).
    let note = format!("started fault {}: {}", crate::markup::code(&name), crate::markup::text(&what));
    if let Err(e) = live.observe(ObservationKind::Action, &note, author) {
        tracing::warn!(fault = %name, "the fault started, but its action note was not recorded: {}", refused(e).1);
    }
    Ok(name)
}

/// The longest fault description an action note carries (its fields can be as long as the
/// control API's body): well under [`super::hub::MAX_NOTE_CHARS`], even escaped.
const MAX_DESCRIPTION_CHARS: usize = 300;

/// `text` cut to `max` characters, the last of them `…` when it was longer.
fn bounded(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Stops the fault `name` (any fault on the timeline, not only the page's).
pub async fn stop(live: &Live, name: &str, author: Option<&str>) -> Result<(), Failure> {
    let (admin, clock, _) = live.control().map_err(refused)?;
    let reply = send(&admin, reqwest::Method::DELETE, &format!("/_chaos/faults/{name}"), Vec::new()).await?;
    let status = reply.status().as_u16();
    if !(200..300).contains(&status) {
        let text = reply.text().await.unwrap_or_default();
        return Err((status, control_message(&text)));
    }
    let ours = live.adhoc_stopped(name, clock.now_us());
    let text = if ours {
        format!("stopped fault {}", crate::markup::code(name))
    } else {
        format!("removed the scenario's fault {} from the timeline", crate::markup::code(name))
    };
    // Stopped on the mock: reported so, whatever becomes of its note.
    if let Err(e) = live.observe(ObservationKind::Action, &text, author) {
        tracing::warn!(fault = %name, "the fault stopped, but its action note was not recorded: {}", refused(e).1);
    }
    Ok(())
}

/// One call to the run's mock control API, with its token.
async fn send(
    admin: &MockControl,
    method: reqwest::Method,
    path: &str,
    body: Vec<u8>,
) -> Result<reqwest::Response, Failure> {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", admin.url))
        .header("content-type", "application/json")
        .body(body);
    if let Some(t) = &admin.token {
        req = req.bearer_auth(t);
    }
    req.send().await.map_err(|e| (502, format!("the mock's control API at {}: {e}", admin.url)))
}

/// The control API's `{"error": {"message"}}`, or the text as it came.
fn control_message(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| text.to_string())
}

/// A fault in a few words: its kind and the fields set (`status: code 429, duration 3s`).
fn describe(f: &Fault) -> String {
    let set = serde_json::to_value(f).ok().and_then(set_only);
    let fields: Vec<String> = set
        .as_ref()
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| !matches!(k.as_str(), "kind" | "name" | "start"))
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k} {s}"),
            other => format!("{k} {other}"),
        })
        .collect();
    if fields.is_empty() { f.kind().to_string() } else { format!("{}: {}", f.kind(), fields.join(", ")) }
}
