//! JSON Schema export of the file formats, generated from the serde types so the schema can
//! never drift from what the parser accepts. Editors use it for completion and validation;
//! a test checks the committed copies under `schemas/` are current.

use schemars::generate::SchemaSettings;

use super::{FaultsFile, ProfileFile, ScenarioFile};

/// Which schema to produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemaKind {
    /// Scenario files (`scenarios/*.toml`).
    Scenario,
    /// Profile and pool files (`mock-upstreams/*.toml`).
    Profile,
    /// Faults files (`chaos mock --faults`); the control API takes the same fault objects.
    Faults,
}

impl SchemaKind {
    /// Every kind, for tests and `--all`.
    pub const ALL: [SchemaKind; 3] = [SchemaKind::Scenario, SchemaKind::Profile, SchemaKind::Faults];

    /// The committed file name under `schemas/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Scenario => "scenario.schema.json",
            Self::Profile => "profile.schema.json",
            Self::Faults => "faults.schema.json",
        }
    }
}

/// The schema as pretty-printed JSON with a trailing newline.
pub fn generate(kind: SchemaKind) -> String {
    match kind {
        SchemaKind::Scenario => render::<ScenarioFile>(),
        SchemaKind::Profile => render::<ProfileFile>(),
        SchemaKind::Faults => render::<FaultsFile>(),
    }
}

/// The draft 2020-12 schema of `T`, pretty-printed with a trailing newline (also used for
/// formats defined outside this module, such as gateway policies).
pub fn render<T: schemars::JsonSchema>() -> String {
    let schema = SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<T>();
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
