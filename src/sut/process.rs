//! Started SUT processes: each leads its own process group, so stopping it (or killing every
//! started group at once, for an emergency exit) reaches every process it started.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::{RunningSut, SutContext, SutError};
use crate::scenario::Sut;

/// Process groups of the SUTs started and not yet stopped, so an emergency exit (a second
/// interrupt) can still take them down: a static, since the signal handler has nothing else.
static GROUPS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

pub(super) fn groups() -> std::sync::MutexGuard<'static, Vec<i32>> {
    GROUPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Kills every SUT process group the harness started and has not stopped yet (SIGKILL: there
/// is no time left for a grace). For an exit that cannot wait for the orderly stop.
pub fn kill_started_now() {
    for g in groups().drain(..) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(g), nix::sys::signal::Signal::SIGKILL);
    }
}

/// A process to start as the SUT.
pub(super) struct Process<'a> {
    pub(super) program: String,
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) cwd: Option<&'a Path>,
    /// Where it will listen.
    pub(super) url: String,
    /// How to describe it.
    pub(super) what: String,
}

pub(super) fn spawn(p: Process<'_>, sut: &Sut, ctx: &SutContext) -> Result<RunningSut, SutError> {
    let Process { program, args, env, cwd, url, what } = p;
    let logs = [ctx.run_dir.join("sut.stdout.log"), ctx.run_dir.join("sut.stderr.log")];
    let open = |p: &PathBuf| {
        std::fs::File::create(p).map_err(|source| SutError::Io { context: format!("creating {}", p.display()), source })
    };
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(args)
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(open(&logs[0])?)
        .stderr(open(&logs[1])?)
        .kill_on_drop(true)
        // Its own process group, so stopping it reaches every process it started.
        .process_group(0);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let child = cmd.spawn().map_err(|source| SutError::Spawn { program, source })?;
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        groups().push(pid);
    }
    Ok(RunningSut::Child { child, url, what, stop_timeout: sut.stop_timeout.as_std(), logs })
}

/// The last `n` lines of the SUT's logs (stderr first).
pub(super) fn log_tail(logs: &[PathBuf; 2], n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for path in logs.iter().rev() {
        if let Ok(text) = std::fs::read_to_string(path) {
            let lines: Vec<&str> = text.lines().collect();
            out.extend(lines[lines.len().saturating_sub(n)..].iter().map(|l| l.to_string()));
        }
    }
    out
}
