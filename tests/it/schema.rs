//! The committed JSON Schemas are generated from the serde types and must stay current; the
//! shipped files validate against them, and invalid files do not.

use std::path::Path;

use chaos::cli::schema::{Format, generate};

#[test]
fn committed_schemas_are_current() {
    for kind in Format::ALL {
        let path = Path::new("schemas").join(kind.file_name());
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generate(kind),
            "{} is stale: run `cargo run -- schema {} > {}`",
            path.display(),
            kind.file_name().split('.').next().unwrap(),
            path.display()
        );
    }
}

fn validator(kind: Format) -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(&generate(kind)).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn as_json(toml_text: &str) -> serde_json::Value {
    toml::from_str(toml_text).unwrap()
}

#[test]
fn shipped_profiles_validate_against_the_profile_schema() {
    let v = validator(Format::Profile);
    for entry in std::fs::read_dir("mock-upstreams").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let doc = as_json(&std::fs::read_to_string(&path).unwrap());
            let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        }
    }
}

#[test]
fn the_schema_rejects_what_the_parser_rejects() {
    let v = validator(Format::Profile);
    for bad in [
        "slotz = 1",
        "[capacity]\noverflow = 500",
        "[capacity]\nslots = \"many\"",
        "[latency]\nttft = { dist = \"lognorm\", p50 = \"1s\", p99 = \"2s\" }",
        "[latency]\nttft = { dist = \"fixed\", value = \"100 parsecs\" }",
    ] {
        assert!(!v.is_valid(&as_json(bad)), "schema accepted: {bad}");
    }
    assert!(v.is_valid(&as_json("[latency]\nttft = { dist = \"fixed\", value = \"1.5s\" }")));
}

#[test]
fn the_gateway_schema_is_current_and_accepts_the_shipped_policies() {
    let text = generate(Format::Gateway);
    assert_eq!(
        std::fs::read_to_string("schemas/gateway.schema.json").unwrap(),
        text,
        "run `cargo run -- schema gateway > schemas/gateway.schema.json`"
    );
    let v = jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap();
    for name in ["naive", "hardened"] {
        let doc = as_json(&std::fs::read_to_string(format!("gateway/{name}.toml")).unwrap());
        let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
    }
    assert!(!v.is_valid(&as_json("name = \"x\"\n[retry]\nmax_retries = \"three\"")));
}
