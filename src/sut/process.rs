//! Started SUT processes: each leads its own process group, so stopping it (or killing every
//! started group at once, for an emergency exit) reaches every process it started. A SUT
//! command runs under its guard (`guard.rs`), which dies with the harness and adopts what the
//! command abandons; the built-in gateway child asks for the parent-death signal itself.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::{RunningSut, SutContext, SutError};
use crate::scenario::Sut;

/// One started process group the harness has not stopped yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Started {
    /// The group, whose leader is the process the harness started.
    pub(super) group: i32,
    /// The leader is a guard (`chaos sut-guard`): SIGINT makes it kill everything below it at
    /// once, including what left the group.
    pub(super) guarded: bool,
}

/// Process groups of the SUTs started and not yet stopped, so an emergency exit (a second
/// interrupt) can still take them down: a static, since the signal handler has nothing else.
static GROUPS: std::sync::Mutex<Vec<Started>> = std::sync::Mutex::new(Vec::new());

pub(super) fn groups() -> std::sync::MutexGuard<'static, Vec<Started>> {
    GROUPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Kills every SUT the harness started and has not stopped yet, with no grace: there is no
/// time left for one. A guard is told first (it kills what left the group, too), then the group
/// is killed whatever the guard managed. For an exit that cannot wait for the orderly stop.
pub fn kill_started_now() {
    let started: Vec<Started> = groups().drain(..).collect();
    for s in started.iter().filter(|s| s.guarded) {
        let _ = kill(Pid::from_raw(s.group), Signal::SIGINT);
    }
    // The guard takes milliseconds; a bounded wait lets it finish before the group goes.
    let until = std::time::Instant::now() + Duration::from_millis(500);
    while started.iter().any(|s| s.guarded && killpg(Pid::from_raw(s.group), None).is_ok())
        && std::time::Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    for s in started {
        let _ = killpg(Pid::from_raw(s.group), Signal::SIGKILL);
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
    /// Run it under its guard (`chaos sut-guard`): every command the scenario names. The
    /// gateway child is `chaos` itself and asks for the parent-death signal on its own.
    pub(super) guarded: bool,
}

pub(super) fn spawn(p: Process<'_>, sut: &Sut, ctx: &SutContext) -> Result<RunningSut, SutError> {
    let logs = [ctx.run_dir.join("sut.stdout.log"), ctx.run_dir.join("sut.stderr.log")];
    let open = |p: &PathBuf| {
        std::fs::File::create(p).map_err(|source| SutError::Io { context: format!("creating {}", p.display()), source })
    };
    let stop_timeout = sut.stop_timeout.as_std();
    let (program, args) = if p.guarded { guarded(&p, stop_timeout, ctx)? } else { (p.program.clone(), p.args) };
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(args)
        .envs(p.env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(open(&logs[0])?)
        .stderr(open(&logs[1])?)
        // Its own process group, so stopping it reaches every process it started.
        .process_group(0);
    if let Some(dir) = p.cwd {
        cmd.current_dir(dir);
    }
    let child = cmd.spawn().map_err(|source| SutError::Spawn { program: p.program.clone(), source })?;
    let group = child.id().and_then(|p| i32::try_from(p).ok()).map(|group| Started { group, guarded: p.guarded });
    if let Some(g) = group {
        groups().push(g);
    }
    Ok(RunningSut::Child {
        child: Box::new(StartedChild { child, group }),
        url: p.url,
        what: p.what,
        stop_timeout,
        logs,
    })
}

/// The guard's command line for `p`: `chaos sut-guard --parent PID --grace MS -- PROGRAM ARGS…`,
/// with PROGRAM found first on the SUT's own PATH (from its cwd), so a program that does not
/// exist is named here, as `spawn` would name it, rather than by a guard that exited.
fn guarded(p: &Process<'_>, grace: Duration, ctx: &SutContext) -> Result<(String, Vec<String>), SutError> {
    let path =
        p.env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).or_else(|| std::env::var("PATH").ok());
    let cwd = p.cwd.map_or_else(|| std::env::current_dir().unwrap_or_default(), Path::to_path_buf);
    let resolved = which::which_in(&p.program, path, &cwd).map_err(|e| SutError::Spawn {
        program: p.program.clone(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string()),
    })?;
    let mut args = vec![
        "sut-guard".to_string(),
        "--parent".into(),
        std::process::id().to_string(),
        "--grace".into(),
        format!("{}ms", grace.as_millis()),
        "--".into(),
        resolved.display().to_string(),
    ];
    args.extend(p.args.iter().cloned());
    Ok((ctx.chaos_bin.display().to_string(), args))
}

/// A started SUT process and its group, stopped with the group when dropped without an orderly
/// stop (an early return or a panic in the harness): a guard gets SIGINT, so it kills what it
/// adopted too; a plain child's group gets SIGKILL.
#[derive(Debug)]
pub struct StartedChild {
    pub(super) child: tokio::process::Child,
    pub(super) group: Option<Started>,
}

impl StartedChild {
    /// Forgets the group: the orderly stop has taken care of it.
    pub(super) fn stopped(&mut self) {
        if let Some(g) = self.group.take() {
            groups().retain(|x| *x != g);
        }
    }
}

impl Drop for StartedChild {
    fn drop(&mut self) {
        if let Some(g) = self.group.take() {
            groups().retain(|x| *x != g);
            let signal = if g.guarded { Signal::SIGINT } else { Signal::SIGKILL };
            let _ = kill(Pid::from_raw(g.group), signal);
            if !g.guarded {
                let _ = killpg(Pid::from_raw(g.group), Signal::SIGKILL);
            }
        }
    }
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
