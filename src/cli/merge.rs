//! `chaos merge WORKER_DIR... --out DIR`: join the folders of a sharded run into one run
//! folder, then print what `chaos run` prints at its end.

use std::path::PathBuf;

use super::CliError;

/// Arguments of `chaos merge`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The folders of the run's workers (`chaos run --worker I/N`), and of its shared mock
    /// (`chaos mock --scenario … --out`) when it had one.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// The merged run folder (new or empty).
    #[arg(long)]
    pub out: PathBuf,
    /// Replace a previous run's files in --out.
    #[arg(long)]
    pub force: bool,
    /// Wait up to this long for every worker to finish (a merge Job started beside the
    /// workers), e.g. 30m; then merge, or say which shard is missing.
    #[arg(long, default_value = "0s")]
    pub wait: crate::scenario::Duration,
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    if !args.wait.as_std().is_zero() {
        crate::experiment::merge::wait_for(&args.dirs, args.wait.as_std());
    }
    let merged = crate::experiment::merge::merge(&args.dirs, &args.out, args.force)?;
    let s = &merged.finished.summary;
    let mut text = format!(
        "merged {} workers{} into {}\n",
        merged.workers,
        if merged.mocks > 0 { format!(" and {} shared mock folder(s)", merged.mocks) } else { String::new() },
        merged.dir.display()
    );
    if s.generator.missed > 0 {
        text.push_str(&format!(
            "warning: {} arrivals missed: a worker started {:.0} ms after the shared start\n",
            s.generator.missed, s.generator.late_start_ms
        ));
    }
    super::run::print(&text)?;
    super::run::finished(&crate::experiment::RunOutcome {
        dir: merged.dir,
        summary: merged.finished.summary,
        verdict: merged.finished.verdict,
    })
}
