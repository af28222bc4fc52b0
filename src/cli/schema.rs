//! `chaos schema`: print the JSON Schema of a file format.

use std::io::Write;

use crate::scenario::schema::{SchemaKind, generate};

use super::CliError;

/// Arguments of `chaos schema`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which file format.
    #[arg(value_enum, default_value = "scenario")]
    pub kind: SchemaKind,
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    std::io::stdout()
        .write_all(generate(args.kind).as_bytes())
        .map_err(|source| CliError::Io { context: "writing the schema".into(), source })
}
