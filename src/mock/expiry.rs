//! Fires `ttl_expiry` faults at their instant: logs the expiry event, empties the upstreams'
//! prompt caches when the fault says `prompt_cache = true` (each logged as a `flush_ok` of that
//! upstream), then runs the flush hook (an HTTP call to a loopback URL, or a command run without
//! a shell — only for a fault placed from a file, never for one that came over the network),
//! each bounded by a timeout, and logs how it went. One scheduler per mock process; it ends with
//! the process's shared state (it holds only a weak reference).
//!
//! Layer 3 (`mock`): must not depend on `load`, `sut`, `gateway`, `analysis` or anything above.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::events::{Event, EventKind};
use super::state::Shared;
use crate::faults::{Entry, Fault, FlushHook};

/// Longest a flush hook may take.
pub(super) const HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs until the mock's shared state is gone.
pub(crate) async fn run(shared: Weak<Shared>) {
    let mut fired: HashSet<(Arc<str>, u64)> = HashSet::new();
    let Some(mut changes) = shared.upgrade().map(|s| s.timeline.subscribe()) else { return };
    loop {
        let Some(state) = shared.upgrade() else { return };
        let now = state.clock.now_us();
        let mut next: Option<u64> = None;
        for (entry, at) in state.timeline.snapshot().expiries() {
            if fired.contains(&(entry.name.clone(), at)) {
                continue;
            }
            if at <= now {
                fired.insert((entry.name.clone(), at));
                let Fault::TtlExpiry(f) = &entry.fault else { continue };
                let event = Event {
                    t_us: at,
                    kind: EventKind::TtlExpiry,
                    upstream: None,
                    fault: Some(entry.name.clone()),
                    detail: None,
                };
                state.events.record(event);
                if f.clears_prompt_caches() {
                    clear_prompt_caches(&state, entry);
                }
                if let Some(hook) = f.flush.clone() {
                    // Only an entry placed from a file runs a command (never one from the network).
                    let command = entry.flush_command().map(<[String]>::to_vec);
                    tokio::spawn(flush(Arc::downgrade(&state), entry.name.clone(), hook, command));
                }
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        let wake = next.map(|us| state.clock.instant_at(us));
        drop(state);
        tokio::select! {
            () = async { match wake { Some(at) => tokio::time::sleep_until(at.into()).await, None => std::future::pending().await } } => {}
            changed = changes.changed() => if changed.is_err() { return },
        }
    }
}

/// Empties the prompt cache of every upstream the fault matches (by `match.upstream`; the
/// other match keys describe requests), each logged as a flush of that upstream.
fn clear_prompt_caches(state: &Shared, entry: &Entry) {
    let only = entry.fault.envelope().matches.upstream.as_deref();
    for upstream in state.live_upstreams() {
        let Some(cache) = &upstream.prompt_cache else { continue };
        if only.is_some_and(|name| name != &*upstream.name) {
            continue;
        }
        let dropped = cache.clear();
        state.events.record(Event {
            t_us: state.clock.now_us(),
            kind: EventKind::FlushOk,
            upstream: Some(upstream.name.clone()),
            fault: Some(entry.name.clone()),
            detail: Some(format!("prompt cache cleared: {dropped} entries dropped")),
        });
    }
}

async fn flush(shared: Weak<Shared>, fault: Arc<str>, hook: FlushHook, command: Option<Vec<String>>) {
    let result = tokio::time::timeout(HOOK_TIMEOUT, run_hook(&hook, command.as_deref()))
        .await
        .unwrap_or_else(|_| Err(format!("timed out after {}s", HOOK_TIMEOUT.as_secs())));
    let Some(state) = shared.upgrade() else { return };
    let (kind, detail) = match result {
        Ok(detail) => (EventKind::FlushOk, detail),
        Err(detail) => (EventKind::FlushFailed, detail),
    };
    let t_us = state.clock.now_us();
    state.events.record(Event { t_us, kind, upstream: None, fault: Some(fault), detail: Some(detail) });
}

/// Runs the HTTP hook, or `command`: the hook's command when its entry came from a file.
async fn run_hook(hook: &FlushHook, command: Option<&[String]>) -> Result<String, String> {
    match (&hook.http, command) {
        (Some(url), _) => {
            let method = hook.method.as_deref().unwrap_or("POST");
            let req = hyper::Request::builder()
                .method(method)
                .uri(url)
                .body(Empty::<Bytes>::new())
                .map_err(|e| format!("bad request: {e}"))?;
            let client = Client::builder(TokioExecutor::new()).build_http();
            let resp = client.request(req).await.map_err(|e| format!("{method} {url}: {e}"))?;
            let status = resp.status();
            let _ = resp.into_body().collect().await;
            if status.is_success() {
                Ok(format!("{method} {url}: {status}"))
            } else {
                Err(format!("{method} {url}: {status}"))
            }
        }
        (None, Some(cmd)) => {
            let (program, args) = cmd.split_first().ok_or("empty command")?;
            let out = tokio::process::Command::new(program)
                .args(args)
                .kill_on_drop(true)
                .output()
                .await
                .map_err(|e| format!("{program}: {e}"))?;
            let text = String::from_utf8_lossy(&out.stdout).trim().chars().take(200).collect::<String>();
            if out.status.success() {
                Ok(format!("{}: {text}", cmd.join(" ")))
            } else {
                Err(format!("{}: {} {text}", cmd.join(" "), out.status))
            }
        }
        (None, None) if hook.command.is_some() => Err(crate::faults::network::COMMAND_REFUSED.into()),
        (None, None) => Err("no hook".into()),
    }
}
