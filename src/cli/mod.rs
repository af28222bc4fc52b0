//! Command-line parsing and the exit-code table. One file per subcommand; no domain logic.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (gate passed) |
//! | 1 | gate failed |
//! | 2 | usage or scenario error |
//! | 3 | run aborted or harness failure |
//!
//! Layer 7: the top; nothing in the library depends on it.

mod check;
mod compare;
mod fault;
mod gateway;
mod mock;
mod report;
mod run;
pub mod schema;
mod signals;
mod validate;
mod whatif;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::mock::MockError;
use crate::scenario::ScenarioError;

/// `chaos`: chaos and load testing for services that call LLM APIs.
#[derive(Debug, Parser)]
#[command(name = "chaos", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve a mock LLM upstream (or a pool of them) from a profile file.
    Mock(mock::Args),
    /// Check scenario and profile files; print every problem with file:line:column.
    Validate(validate::Args),
    /// Print the JSON Schema of scenario, profile or faults files.
    Schema(schema::Args),
    /// Inspect and change a running mock's faults through its control API.
    Fault(fault::Args),
    /// Run the reference AI gateway (policy `naive` or `hardened`) in front of upstreams.
    Gateway(gateway::Args),
    /// Run a scenario: mocks, faults, the system under test and the load; write the run folder.
    Run(run::Args),
    /// Analyse a saved run folder again: summary.json, report.md, report.html, charts.
    Report(report::Args),
    /// Apply the gate to a saved run, optionally against a baseline run: exit 0 or 1.
    Check(check::Args),
    /// Compare saved runs of one scenario side by side (last quarter against today).
    Compare(compare::Args),
    /// Replay a saved run under other retry and protection policies, calibrated against it.
    Whatif(whatif::Args),
}

/// Exit codes, as documented in the README.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// A gate check failed.
    GateFailed = 1,
    /// Bad command line or bad scenario/profile file.
    Usage = 2,
    /// The run was aborted or the harness itself failed.
    Harness = 3,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

/// Every error a subcommand can end with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A scenario or profile file is wrong.
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    /// The mock could not start or stop cleanly.
    #[error("{0}")]
    Mock(#[from] MockError),
    /// The gateway could not start.
    #[error("{0}")]
    Gateway(#[from] crate::gateway::GatewayError),
    /// An I/O failure in the harness itself.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// Files failed validation (already reported).
    #[error("{0} file(s) failed validation")]
    Invalid(usize),
    /// A command line the harness cannot act on.
    #[error("{0}")]
    Usage(String),
    /// A run could not start or finish.
    #[error("{0}")]
    Run(#[from] crate::experiment::RunError),
    /// Runs could not be compared.
    #[error(transparent)]
    Compare(#[from] crate::experiment::CompareError),
    /// A run folder could not be analysed.
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// A gate check failed (the verdict was printed).
    #[error("gate failed: {failed} of {total} checks\n  report: {dir}")]
    GateFailed {
        /// Checks that failed.
        failed: usize,
        /// All checks.
        total: usize,
        /// The run folder.
        dir: String,
    },
    /// A run ended early; its folder holds a partial report.
    #[error("run aborted: {reason}\n  partial report: {dir}")]
    Aborted {
        /// Why.
        reason: String,
        /// The run folder.
        dir: String,
    },
    /// The control API refused a change (`status` 4xx) or could not be reached.
    #[error("{message}")]
    Control {
        /// HTTP status, when the API answered.
        status: Option<u16>,
        /// Its explanation.
        message: String,
    },
}

impl CliError {
    /// The exit code for this error (the one table every error goes through).
    pub fn exit(&self) -> Exit {
        match self {
            Self::Scenario(_) | Self::Invalid(_) | Self::Usage(_) => Exit::Usage,
            Self::Control { status: Some(400..=499), .. } => Exit::Usage,
            Self::Gateway(crate::gateway::GatewayError::Upstream { .. }) => Exit::Usage,
            Self::Run(e) if e.is_usage() => Exit::Usage,
            Self::Compare(
                crate::experiment::CompareError::NotComparable(_) | crate::experiment::CompareError::Read(_),
            ) => Exit::Usage,
            Self::Compare(_) => Exit::Harness,
            // Off loopback without a token is not allowed: a usage error, like a remote target.
            Self::Mock(crate::mock::MockError::AdminExposed(_))
            | Self::Run(crate::experiment::RunError::Mock(crate::mock::MockError::AdminExposed(_))) => Exit::Usage,
            Self::Mock(_) | Self::Gateway(_) | Self::Io { .. } | Self::Control { .. } => Exit::Harness,
            Self::Report(crate::report::ReportError::Read(_) | crate::report::ReportError::Damaged { .. }) => {
                Exit::Usage
            }
            Self::Run(_) | Self::Aborted { .. } | Self::Report(_) => Exit::Harness,
            Self::GateFailed { .. } => Exit::GateFailed,
        }
    }

    /// Text for stderr.
    pub fn render(&self) -> String {
        match self {
            Self::Scenario(e) | Self::Run(crate::experiment::RunError::Sut(crate::sut::SutError::Policy(e))) => {
                e.render()
            }
            Self::Invalid(_) => String::new(),
            other => format!("error: {other}\n"),
        }
    }
}

/// Entry point of the binary: parse, set up logging and the runtime, run, map to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match runtime(worker_threads(&cli.command)) {
        Ok(rt) => rt,
        Err(e) => {
            to_stderr(&format!("error: cannot start the async runtime: {e}\n"));
            return Exit::Harness.into();
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => Exit::Ok.into(),
        Err(e) => {
            to_stderr(&e.render());
            e.exit().into()
        }
    }
}

/// Writes to stderr, ignoring failures: with stderr closed (`2>&-`) or a broken pipe the
/// message has nowhere to go, and `eprint!` would panic instead of returning the exit code.
pub fn to_stderr(text: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

/// Worker threads for the command: the mock honours `--threads` (default: the CPUs this process
/// may run on); everything else uses one per CPU.
fn worker_threads(command: &Command) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    match command {
        Command::Mock(args) => args.threads.unwrap_or(cpus).max(1),
        _ => cpus,
    }
}

/// One worker means a current-thread runtime: on a single CPU the multi-thread scheduler's
/// cross-thread bookkeeping cost ~10 % CPU and lengthened the mock's latency tail.
fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    if threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()
    }
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Mock(args) => mock::run(args).await,
        Command::Validate(args) => validate::run(&args),
        Command::Schema(args) => schema::run(&args),
        Command::Fault(args) => fault::run(args).await,
        Command::Gateway(args) => gateway::run(args).await,
        Command::Run(args) => run::run(args).await,
        Command::Report(args) => report::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Compare(args) => compare::run(&args),
        Command::Whatif(args) => whatif::run(&args),
    }
}

fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    // Goose logs every failed request at warn level through `log`; the run reports them itself.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,goose=error"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A person at a terminal reads status lines; a log file (CI) keeps full records with
    // timestamps and module paths.
    let _ = if std::io::stderr().is_terminal() {
        builder.event_format(StatusLine).try_init()
    } else {
        builder.with_ansi(false).try_init()
    };
}

/// A log event as a plain status line: the message and its fields, `warning:`/`error:` in
/// front of what went wrong, no timestamp or module path.
struct StatusLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for StatusLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        match *event.metadata().level() {
            tracing::Level::ERROR => write!(writer, "error: ")?,
            tracing::Level::WARN => write!(writer, "warning: ")?,
            _ => {}
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::StatusLine;

    /// A writer into a shared buffer, for capturing what the subscriber prints.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_terminal_gets_plain_status_lines() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber =
            tracing_subscriber::fmt().event_format(StatusLine).with_writer(move || writer.clone()).finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("system under test ready: gateway at http://127.0.0.1:1");
            tracing::warn!("chart not drawn: no data");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "system under test ready: gateway at http://127.0.0.1:1\nwarning: chart not drawn: no data\n");
    }
}
