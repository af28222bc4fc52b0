//! `chaos validate FILE...`: check scenario, profile, faults and gateway policy files without
//! running anything.

use std::io::Write;
use std::path::PathBuf;

use crate::gateway::GatewayConfig;
use crate::scenario::{
    Format, Scenario, ScenarioError, Source, detect_format, faults_from_source, profile_from_source,
};

use super::CliError;

/// Arguments of `chaos validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files to check.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Treat every file as this kind instead of detecting it from its keys.
    #[arg(long, value_enum)]
    pub kind: Option<Format>,
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    let mut failed = 0;
    let mut out = super::term::stdout();
    for path in &args.files {
        match check(path, args.kind) {
            Ok(summary) => {
                let _ = writeln!(out, "ok: {} ({summary})", path.display());
            }
            Err(e) => {
                failed += 1;
                super::to_stderr(&e.render());
            }
        }
    }
    if failed > 0 { Err(CliError::Invalid(failed)) } else { Ok(()) }
}

fn check(path: &std::path::Path, kind: Option<Format>) -> Result<String, ScenarioError> {
    let src = Source::read(path)?;
    let format = match kind {
        Some(k) => k,
        None if src.top_level_keys().iter().any(|k| matches!(k.as_str(), "throttle" | "quota" | "adaptive")) => {
            Format::Policy
        }
        None if GatewayConfig::looks_like(&src) => Format::Gateway,
        None => detect_format(&src),
    };
    match format {
        Format::Gateway => {
            let policy = GatewayConfig::from_source(&src)?;
            Ok(format!("gateway policy `{}`", policy.name))
        }
        Format::Scenario => {
            let s = Scenario::from_source(&src)?;
            Ok(format!("scenario `{}`, {} upstream(s), {} fault(s)", s.name, s.upstreams.len(), s.faults.len()))
        }
        Format::Faults => {
            let faults = faults_from_source(&src, None)?;
            Ok(format!("{} fault(s)", faults.len()))
        }
        Format::Profile => {
            let ups = profile_from_source(&src)?;
            let names: Vec<&str> = ups.iter().map(|u| u.name.as_str()).collect();
            Ok(if ups.len() == 1 { format!("profile `{}`", names[0]) } else { format!("pool: {}", names.join(", ")) })
        }
        Format::Policy => {
            let policy = crate::whatif::Policy::from_source(&src)?;
            Ok(format!("what-if policy `{}`", policy.name))
        }
        Format::Summary | Format::Comparison | Format::Whatif | Format::Replicates => Err(src.invalid(
            "",
            "an output file written by `chaos run` or `chaos compare`",
            "a file you write (scenario, profile, faults, gateway); check a run with `chaos check RUN_DIR`",
        )),
    }
}
