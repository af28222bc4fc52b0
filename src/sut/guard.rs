//! The guard every started SUT command runs under (`chaos sut-guard`, hidden): a small
//! supervisor process between the harness and the SUT, so that nothing the SUT starts outlives
//! the harness, even when the harness is killed with SIGKILL and cannot stop anything itself.
//!
//! - It asks the kernel for SIGTERM when the harness dies (Linux `PR_SET_PDEATHSIG`). The
//!   harness cannot ask that for an arbitrary program: setting it between fork and exec needs
//!   `unsafe` code, which this crate forbids; the guard sets it on itself.
//! - It leads the SUT's process group (the harness starts it with its own group), so the
//!   harness's orderly stop still signals the group as before.
//! - It is a child subreaper (`PR_SET_CHILD_SUBREAPER`): a process the SUT forks and abandons —
//!   a wrapper script's background job, a daemon that calls `setsid` and so leaves the group —
//!   is re-parented to the guard instead of to init, so the guard can find and stop it.
//!
//! On SIGUSR1 (the harness's orderly stop), SIGTERM or SIGHUP (the harness's death, or anyone
//! else's stop) every descendant gets SIGTERM, then SIGKILL after the grace; on SIGINT (the
//! harness's emergency exit) SIGKILL at once. The harness never signals the group itself while
//! the guard lives, so the SUT gets exactly one SIGTERM whichever way the stop comes (an earlier
//! design told the two apart by the parent pid, which a sandbox kernel kept reporting after the
//! harness had died). When the
//! SUT's own process exits, whatever it left behind is stopped the same way and the guard exits
//! with the SUT's status (128 + N for a signal N, as shells report it).
//!
//! Layer 3 (with the rest of `sut`): it knows nothing of runs or faults.

use std::collections::HashMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// Exit code when the program cannot be started (as shells use it).
pub const CANNOT_START: i32 = 127;

/// How often the guard reaps and looks for signals.
const TICK: Duration = Duration::from_millis(50);

/// What to supervise.
#[derive(Clone, Debug)]
pub struct Guard {
    /// The harness's pid: the guard exits at once if its parent is already another process.
    pub parent: i32,
    /// SIGTERM-to-SIGKILL grace for the SUT and everything it started.
    pub grace: Duration,
    /// The SUT's program and arguments.
    pub command: Vec<OsString>,
}

/// Runs the SUT under the guard until it exits or the guard is told to stop; returns the exit
/// code the guard should exit with.
pub fn run(guard: &Guard) -> i32 {
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM) {
        say(&format!("cannot ask to die with the harness: {e}"));
    }
    if nix::unistd::getppid().as_raw() != guard.parent {
        say(&format!("the harness that started this SUT (pid {}) is gone; not starting it", guard.parent));
        return 1;
    }
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        say(&format!("cannot adopt the SUT's orphans (they may outlive the run): {e}"));
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            say(&format!("cannot start: {e}"));
            return 1;
        }
    };
    runtime.block_on(supervise(guard))
}

async fn supervise(guard: &Guard) -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let (Some(program), args) = (guard.command.first(), guard.command.get(1..).unwrap_or_default()) else {
        say("no program given");
        return CANNOT_START;
    };
    // Handlers go in before the SUT starts, so a stop that comes at once is not lost.
    let (Ok(mut stop), Ok(mut term), Ok(mut hup), Ok(mut int)) = (
        signal(SignalKind::user_defined1()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::interrupt()),
    ) else {
        say("cannot install signal handlers");
        return 1;
    };
    // std's Command, not tokio's: the guard reaps every child itself (`waitpid(-1)`, adopted
    // orphans included), which would race tokio's own reaping of the children it spawned.
    let main = match std::process::Command::new(program).args(args).spawn() {
        Ok(child) => Pid::from_raw(child.id() as i32),
        Err(e) => {
            say(&format!("cannot start {program:?}: {e}"));
            return CANNOT_START;
        }
    };
    let mut tick = tokio::time::interval(TICK);
    let status = loop {
        tokio::select! {
            _ = stop.recv() => break stop_all(main, guard.grace),
            _ = term.recv() => break stop_all(main, guard.grace),
            _ = hup.recv() => break stop_all(main, guard.grace),
            _ = int.recv() => break stop_all(main, Duration::ZERO),
            _ = tick.tick() => {
                if let Some(status) = reap().remove(&main) {
                    // The SUT exited by itself: stop what it left behind, then report it.
                    stop_all(main, guard.grace.min(Duration::from_secs(2)));
                    break Some(status);
                }
            }
        }
    };
    match status {
        Some(WaitStatus::Exited(_, code)) => code,
        Some(WaitStatus::Signaled(_, sig, _)) => 128 + sig as i32,
        _ => 128 + Signal::SIGTERM as i32,
    }
}

/// Stops every descendant: SIGTERM, the grace, then SIGKILL (at once when `grace` is zero).
/// Returns the SUT's own exit status when it was reaped here.
fn stop_all(main: Pid, grace: Duration) -> Option<WaitStatus> {
    let mut status = None;
    let mut note = |reaped: HashMap<Pid, WaitStatus>| {
        if let Some(s) = reaped.get(&main) {
            status = Some(*s);
        }
    };
    signal_all(if grace.is_zero() { Signal::SIGKILL } else { Signal::SIGTERM });
    let deadline = Instant::now() + grace;
    loop {
        note(reap());
        if descendants().is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(TICK.min(Duration::from_millis(20)));
    }
    // Whatever is left, and whatever it forks meanwhile, until nothing is (bounded: a process
    // that forks faster than it can be killed must not keep the guard here forever).
    let until = Instant::now() + Duration::from_secs(5);
    while !descendants().is_empty() && Instant::now() < until {
        signal_all(Signal::SIGKILL);
        std::thread::sleep(Duration::from_millis(10));
        note(reap());
    }
    note(reap());
    status
}

fn signal_all(signal: Signal) {
    for pid in descendants() {
        let _ = kill(pid, signal);
    }
}

/// Reaps every child that has exited (the SUT, and orphans adopted as subreaper).
fn reap() -> HashMap<Pid, WaitStatus> {
    let mut out = HashMap::new();
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return out,
            Ok(s) => {
                if let Some(pid) = s.pid() {
                    out.insert(pid, s);
                }
            }
        }
    }
}

/// Every living process below this one, read from `/proc` (children of children too: a
/// subreaper adopts orphans only once their parent has died).
fn descendants() -> Vec<Pid> {
    let me = std::process::id() as i32;
    let parents = parents();
    let mut found = Vec::new();
    let mut frontier = vec![me];
    while let Some(p) = frontier.pop() {
        for (&pid, &(ppid, zombie)) in &parents {
            if ppid == p && !found.contains(&Pid::from_raw(pid)) {
                frontier.push(pid);
                // A zombie is dead already; it only waits to be reaped.
                if !zombie {
                    found.push(Pid::from_raw(pid));
                }
            }
        }
    }
    found
}

/// pid → (parent pid, is a zombie), for every process in `/proc`.
fn parents() -> HashMap<i32, (i32, bool)> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if let Ok(stat) = std::fs::read_to_string(entry.path().join("stat"))
            && let Some(parsed) = parse_stat(&stat)
        {
            out.insert(pid, parsed);
        }
    }
    out
}

/// The parent pid and zombie state from a `/proc/PID/stat` line: `pid (comm) state ppid …`,
/// where `comm` may hold spaces and parentheses, so the fields are read after the last `)`.
fn parse_stat(stat: &str) -> Option<(i32, bool)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state == "Z"))
}

/// A line on the SUT's stderr log, which is where the guard's own stderr goes.
fn say(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "chaos sut-guard: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        assert_eq!(parse_stat("42 (sh) S 7 42 42 0 -1"), Some((7, false)));
        assert_eq!(parse_stat("43 (a (b) c) Z 9 1 1"), Some((9, true)));
        assert_eq!(parse_stat("44 (x) y) R 1 1"), Some((1, false)));
        assert_eq!(parse_stat("garbage"), None);
    }
}
