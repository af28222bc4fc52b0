//! The process's file descriptors as a budget: raise the soft limit to the hard one before a
//! run, keep any one listener's connections to a share of it, and hold a few in reserve for
//! what a run must write at its end (its summary and report), so that a connection flood
//! that exhausts the rest still ends in a summary.
//!
//! Ground layer: imports nothing from the crate.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Raises the soft limit on open files to the hard limit; returns the limit now in force
/// (`None` when it cannot be read).
pub fn raise_limit() -> Option<u64> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard
        && let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
    {
        tracing::warn!("cannot raise the open-file limit from {soft} to {hard}: {e}");
        return Some(soft);
    }
    Some(hard.max(soft))
}

/// The soft limit on open files now (`None` when it cannot be read).
pub fn limit() -> Option<u64> {
    getrlimit(Resource::RLIMIT_NOFILE).ok().map(|(soft, _)| soft)
}

/// `wanted` connections, but at most a quarter of the open-file limit (and at least 4): one
/// listener can then never take the descriptors the rest of the process needs.
pub fn share(wanted: usize) -> usize {
    let quarter = limit().map_or(usize::MAX, |l| usize::try_from(l / 4).unwrap_or(usize::MAX));
    wanted.min(quarter).max(4)
}

/// Descriptors held open (on `/dev/null`) so they are there when they are needed: released
/// just before a run's end writes its files.
#[derive(Debug, Default)]
pub struct Reserve {
    held: Vec<std::fs::File>,
}

impl Reserve {
    /// Holds `n` descriptors (fewer if the process has fewer to give).
    pub fn hold(n: usize) -> Self {
        let held = (0..n).map_while(|_| std::fs::File::open("/dev/null").ok()).collect();
        Self { held }
    }

    /// How many it holds.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Gives them back to the process.
    pub fn release(&mut self) {
        self.held.clear();
    }
}
