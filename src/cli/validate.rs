//! `chaos validate FILE...`: check scenario, profile, faults and gateway policy files without
//! running anything.

use std::io::Write;
use std::path::PathBuf;

use crate::gateway::GatewayConfig;
use crate::scenario::{FileKind, Scenario, Source, faults_from_source, profile_from_source};

use super::CliError;

/// Arguments of `chaos validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files to check.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Treat every file as this kind instead of detecting it from its keys.
    #[arg(long, value_enum)]
    pub kind: Option<Kind>,
}

/// File kinds `validate` understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// A scenario.
    Scenario,
    /// A profile or pool.
    Profile,
    /// A faults file.
    Faults,
    /// A reference gateway policy.
    Gateway,
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    let mut failed = 0;
    let mut out = std::io::stdout().lock();
    for path in &args.files {
        match check(path, args.kind) {
            Ok(summary) => {
                let _ = writeln!(out, "ok: {} ({summary})", path.display());
            }
            Err(e) => {
                failed += 1;
                eprint!("{}", e.render());
            }
        }
    }
    if failed > 0 { Err(CliError::Invalid(failed)) } else { Ok(()) }
}

fn check(path: &std::path::Path, kind: Option<Kind>) -> Result<String, crate::scenario::ScenarioError> {
    let src = Source::read(path)?;
    if kind == Some(Kind::Gateway) || (kind.is_none() && GatewayConfig::looks_like(&src)) {
        let policy = GatewayConfig::from_source(&src)?;
        return Ok(format!("gateway policy `{}`", policy.name));
    }
    let kind = match kind {
        Some(Kind::Scenario) => FileKind::Scenario,
        Some(Kind::Profile) => FileKind::Profile,
        Some(Kind::Faults) => FileKind::Faults,
        Some(Kind::Gateway) | None => FileKind::detect(&src),
    };
    match kind {
        FileKind::Scenario => {
            let s = Scenario::from_source(&src)?;
            Ok(format!("scenario `{}`, {} upstream(s), {} fault(s)", s.name, s.upstreams.len(), s.faults.len()))
        }
        FileKind::Faults => {
            let faults = faults_from_source(&src, None)?;
            Ok(format!("{} fault(s)", faults.len()))
        }
        FileKind::Profile => {
            let ups = profile_from_source(&src)?;
            let names: Vec<&str> = ups.iter().map(|u| u.name.as_str()).collect();
            Ok(if ups.len() == 1 { format!("profile `{}`", names[0]) } else { format!("pool: {}", names.join(", ")) })
        }
    }
}
