//! The one way to stop a run early: Ctrl-C, an abort rule, the watchdog, a full disk or the
//! live page's facilitator all call [`Stopper::stop`]; the first reason given is the one the
//! summary records.
//!
//! Layer 8, inside `experiment`: tokio's watch channel only; must not depend on anything of
//! the run.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// Stops a run, remembering the first reason given.
#[derive(Clone, Debug)]
pub struct Stopper {
    tx: Arc<watch::Sender<bool>>,
    reason: Arc<Mutex<Option<String>>>,
}

impl Default for Stopper {
    fn default() -> Self {
        Self { tx: Arc::new(watch::channel(false).0), reason: Arc::new(Mutex::new(None)) }
    }
}

impl Stopper {
    /// Asks the run to stop (the first reason wins).
    pub fn stop(&self, reason: impl Into<String>) {
        let mut r = self.reason.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_none() {
            *r = Some(reason.into());
        }
        let _ = self.tx.send(true);
    }

    /// The reason, once stopped.
    pub fn reason(&self) -> Option<String> {
        self.reason.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A receiver that turns true when the run should stop.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }
}
