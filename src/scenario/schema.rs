//! JSON Schema export of the file formats, generated from the serde types so the schema can
//! never drift from what the parser accepts. Editors use it for completion and validation;
//! a test checks the committed copies under `schemas/` are current. Which formats
//! exist is `cli::schema::Format`'s business.

use schemars::generate::SchemaSettings;

/// The draft 2020-12 schema of `T`, pretty-printed with a trailing newline.
pub fn render<T: schemars::JsonSchema>() -> String {
    let schema = SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<T>();
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
