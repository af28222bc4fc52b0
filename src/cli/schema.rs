//! `chaos schema`: print the JSON Schema of a file format.

use std::io::Write;

use crate::gateway::GatewayConfig;
use crate::scenario::schema::render;
use crate::scenario::{FaultsFile, ProfileFile, ScenarioFile};

use super::CliError;

/// Arguments of `chaos schema`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which file format.
    #[arg(value_enum, default_value = "scenario")]
    pub kind: Format,
}

pub use crate::located::Format;

/// The draft 2020-12 schema of a format, pretty-printed with a trailing newline.
pub fn generate(format: Format) -> String {
    match format {
        Format::Scenario => render::<ScenarioFile>(),
        Format::Profile => render::<ProfileFile>(),
        Format::Faults => render::<FaultsFile>(),
        Format::Gateway => render::<GatewayConfig>(),
        Format::Summary => render::<crate::report::SummaryFile>(),
        Format::Comparison => render::<crate::gate::compare::Comparison>(),
        Format::Policy => render::<crate::whatif::Policy>(),
        Format::Whatif => render::<crate::analysis::policy_outcomes::WhatIf>(),
        Format::Replicates => render::<crate::gate::replicates::Replicated>(),
    }
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    super::term::stdout()
        .write_all(generate(args.kind).as_bytes())
        .map_err(|source| CliError::Io { context: "writing the schema".into(), source })
}
