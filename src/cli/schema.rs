//! `chaos schema`: print the JSON Schema of a file format.

use std::io::Write;

use crate::gateway::GatewayConfig;
use crate::scenario::schema::{SchemaKind, generate};

use super::CliError;

/// Arguments of `chaos schema`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which file format.
    #[arg(value_enum, default_value = "scenario")]
    pub kind: Kind,
}

/// Formats with a schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Scenario files (`scenarios/*.toml`).
    Scenario,
    /// Profile and pool files (`mock-upstreams/*.toml`).
    Profile,
    /// Faults files and control API fault objects.
    Faults,
    /// Reference gateway policies (`gateway/*.toml`).
    Gateway,
    /// A run's `summary.json`.
    Summary,
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    let text = match args.kind {
        Kind::Scenario => generate(SchemaKind::Scenario),
        Kind::Profile => generate(SchemaKind::Profile),
        Kind::Faults => generate(SchemaKind::Faults),
        Kind::Gateway => GatewayConfig::schema(),
        Kind::Summary => crate::scenario::schema::render::<crate::analysis::Summary>(),
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(|source| CliError::Io { context: "writing the schema".into(), source })
}
