//! `chaos sut-guard` (hidden): the supervisor `chaos run` starts every SUT command under (see
//! `sut::guard`). Not for people: its arguments are the harness's.

use std::ffi::OsString;

/// Arguments of `chaos sut-guard`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The harness's pid (the guard refuses to start the SUT if its parent is already gone).
    #[arg(long)]
    pub parent: i32,
    /// SIGTERM-to-SIGKILL grace for the SUT and everything it started.
    #[arg(long)]
    pub grace: crate::duration::Duration,
    /// The SUT's program and arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

/// Runs the guard; its exit code is the SUT's.
pub(super) fn run(args: Args) -> std::process::ExitCode {
    let guard = crate::sut::guard::Guard { parent: args.parent, grace: args.grace.as_std(), command: args.command };
    let code = crate::sut::guard::run(&guard);
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
