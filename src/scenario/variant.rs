//! `[[variant]]`: one scenario, run several ways. A variant has a `name` and overrides of the
//! scenario's own keys (`sut.policy = "naive"`, `fault.slow-provider.multiplier = 6.0`,
//! `load.phase.fault.rate = 20.0`); arrays of named tables (`upstream`, `fault`,
//! `load.phase`) are addressed by the element's `name`. A variant keeps the scenario's name
//! and seed, so its runs share the arrival schedule and the fault decisions and compare.
//!
//! Each variant is merged into the file's TOML and validated like a scenario of its own when
//! the file is read, so `chaos validate` finds a broken variant. Errors are put back on the
//! file as written: on the override when the override is at fault, else on the base key,
//! always naming the variant.
//!
//! Layer 1 (inside `scenario`): builds on the ground only.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::{Table, Value};

use crate::located::{ScenarioError, Source};

/// A `[[variant]]` table as written: a name, a description and any scenario keys to override.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VariantSpec {
    /// The variant's name (letters, digits, `-` and `_`): its run folder's name.
    pub name: String,
    /// What this variant stands for ("before the fix").
    pub description: Option<String>,
    /// Scenario keys to override, e.g. `sut.policy = "naive"`; arrays of named tables are
    /// addressed by name: `fault.slow-provider.multiplier = 6.0`.
    #[serde(flatten)]
    pub overrides: std::collections::BTreeMap<String, serde_json::Value>,
}

/// Keys of a `[[variant]]` table that are not overrides.
const OWN_KEYS: [&str; 2] = ["name", "description"];
/// Scenario keys a variant may not change: they make runs comparable.
const FIXED: [&str; 4] = ["name", "seed", "repeat", "variant"];
/// Arrays of tables whose elements are addressed by their `name`.
const NAMED_ARRAYS: [&str; 3] = ["upstream", "fault", "load.phase"];

/// One variant, merged: its name, description and the text of the scenario it makes.
#[derive(Clone, Debug, PartialEq)]
pub struct Merged {
    /// Its position among the file's `[[variant]]` tables.
    pub index: usize,
    /// The variant's name.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// The merged scenario as TOML text (no `[[variant]]` tables).
    pub text: String,
}

/// The variants of the file in `src` that merge into the base scenario, and the problems found
/// in the `[[variant]]` tables themselves (a variant with one is left out of the list). Both
/// empty when the file has none.
pub fn merge_all(src: &Source) -> (Vec<Merged>, Vec<ScenarioError>) {
    let Ok(mut root) = toml::from_str::<Table>(&src.text) else { return (Vec::new(), Vec::new()) };
    let Some(Value::Array(variants)) = root.remove("variant") else { return (Vec::new(), Vec::new()) };
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        let at = format!("variant[{i}]");
        let Some(table) = v.as_table() else { continue }; // serde has refused it already
        let name = table.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        if let Some(problem) = crate::markup::name_problem(&name) {
            errors.push(src.invalid(&format!("{at}.name"), problem, crate::markup::NAME_EXPECTED));
            continue;
        }
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            errors.push(src.invalid(
                &format!("{at}.name"),
                format!("`{name}`"),
                "a non-empty name of letters, digits, `-` and `_` (it names the variant's run folder)",
            ));
            continue;
        }
        let named = |e: ScenarioError| ScenarioError::InVariant { name: name.clone(), error: Box::new(e) };
        if out.iter().any(|m: &Merged| m.name == name) {
            errors.push(src.invalid(&format!("{at}.name"), format!("`{name}` again"), "a name no other variant has"));
            continue;
        }
        let mut merged = root.clone();
        let before = errors.len();
        for (key, value) in table.iter().filter(|(k, _)| !OWN_KEYS.contains(&k.as_str())) {
            if FIXED.contains(&key.as_str()) {
                let mut e = src.invalid(
                    key,
                    format!("an override of `{key}`"),
                    "overrides of other keys: a variant keeps the scenario's name and seed, so its runs compare",
                );
                e.set_location(src.locate(&format!("{at}.{key}")));
                errors.push(named(e));
                continue;
            }
            if let Err((path, found, expected)) = apply(&mut merged, key, value) {
                let mut e = src.invalid(&path, found, expected);
                e.set_location(src.locate(&format!("{at}.{path}")));
                errors.push(named(e));
            }
        }
        if errors.len() > before {
            continue;
        }
        out.push(Merged {
            index: i,
            name,
            description: table.get("description").and_then(Value::as_str).map(str::to_string),
            text: toml::to_string(&merged).unwrap_or_default(),
        });
    }
    (out, errors)
}

/// A problem with one override: (key path under the variant, found, expected).
type OverrideProblem = (String, String, String);

/// Merges `value` into `base[key]`: tables into tables key by key, a table into an array of
/// named tables element by element (by name), anything else replaces what was there.
fn apply(base: &mut Table, key: &str, value: &Value) -> Result<(), OverrideProblem> {
    apply_at(base, key, key, value)
}

fn apply_at(base: &mut Table, key: &str, path: &str, value: &Value) -> Result<(), OverrideProblem> {
    match (base.get_mut(key), value) {
        (Some(Value::Table(b)), Value::Table(o)) => {
            for (k, v) in o {
                apply_at(b, k, &format!("{path}.{k}"), v)?;
            }
            Ok(())
        }
        (Some(Value::Array(items)), Value::Table(o)) if NAMED_ARRAYS.contains(&path) => {
            for (name, v) in o {
                let names: Vec<String> =
                    items.iter().filter_map(|i| i.get("name").and_then(Value::as_str).map(str::to_string)).collect();
                let Some(item) = items.iter_mut().find(|i| i.get("name").and_then(Value::as_str) == Some(name)) else {
                    return Err((
                        format!("{path}.{name}"),
                        format!("no `{path}` named `{name}`"),
                        format!("the name of one of them: {}", quoted(&names)),
                    ));
                };
                let (Some(target), Value::Table(fields)) = (item.as_table_mut(), v) else {
                    return Err((
                        format!("{path}.{name}"),
                        "a value that is not a table".into(),
                        format!("a table of keys to change in `{path}` `{name}`, e.g. {path}.{name}.KEY = VALUE"),
                    ));
                };
                for (k, fv) in fields {
                    apply_at(target, k, &format!("{path}.{name}.{k}"), fv)?;
                }
            }
            Ok(())
        }
        _ => {
            base.insert(key.to_string(), value.clone());
            Ok(())
        }
    }
}

fn quoted(names: &[String]) -> String {
    if names.is_empty() {
        return "(none have names)".into();
    }
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// Puts the errors found in a merged variant back on the file as written: on the variant's
/// override when it wrote the key (or a table above it), else on the base key; either way
/// naming the variant. With `base_failed`, errors on base keys are left out: the base
/// scenario's own errors already name them.
pub fn relocate(
    src: &Source,
    index: usize,
    variant: &str,
    merged: &Source,
    error: ScenarioError,
    base_failed: bool,
) -> Vec<ScenarioError> {
    match error {
        ScenarioError::Multiple(list) => {
            list.into_iter().flat_map(|e| relocate(src, index, variant, merged, e, base_failed)).collect()
        }
        ScenarioError::Read { .. } => vec![error],
        mut e => {
            let key = e.key_path();
            let named = by_name(merged, &key);
            let over = format!("variant[{index}].{named}");
            let header = format!("variant[{index}]");
            let on_override = !named.is_empty() && src.has(&over);
            if base_failed && !on_override {
                return Vec::new();
            }
            let at = if on_override {
                src.locate(&over)
            } else if !key.is_empty() && src.has(&key) {
                src.locate(&key)
            } else {
                src.locate(&header)
            };
            e.set_location(at);
            if on_override {
                e.set_key_path(&named);
            }
            vec![ScenarioError::InVariant { name: variant.to_string(), error: Box::new(e) }]
        }
    }
}

/// A key path with the indices of named arrays replaced by the element's name, as a variant
/// writes it: `fault[1].multiplier` → `fault.slow-provider.multiplier`.
fn by_name(merged: &Source, key: &str) -> String {
    let Ok(root) = toml::from_str::<Table>(&merged.text) else { return key.to_string() };
    let mut out = Vec::new();
    let mut table = Some(&root);
    for part in key.split('.').filter(|p| !p.is_empty()) {
        let (name, index) = match part.split_once('[') {
            Some((n, rest)) => (n, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let mut current = table.and_then(|t| t.get(name));
        match (index, current) {
            (Some(i), Some(Value::Array(items))) => {
                let element = items.get(i);
                match element.and_then(|e| e.get("name")).and_then(Value::as_str) {
                    Some(n) => out.push(format!("{name}.{n}")),
                    None => out.push(part.to_string()),
                }
                current = element;
            }
            _ => out.push(part.to_string()),
        }
        table = current.and_then(Value::as_table);
    }
    out.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
name = "s"
seed = 3
[[upstream]]
name = "primary"
profile = "p.toml"
[sut]
builtin = "gateway"
policy = "hardened"
[[fault]]
name = "slow"
kind = "latency"
multiplier = 3.0
[load]
[[load.phase]]
name = "a"
rate = 1.0
duration = "1s"
[[load.phase]]
name = "b"
rate = 1.0
duration = "1s"
"#;

    fn merged(variants: &str) -> Result<Vec<Merged>, Vec<ScenarioError>> {
        let (ok, errors) = merge_all(&Source::new("s.toml", format!("{BASE}\n{variants}")));
        if errors.is_empty() { Ok(ok) } else { Err(errors) }
    }

    fn table(text: &str) -> Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn overrides_merge_into_tables_and_named_array_elements() {
        let m = merged(
            "[[variant]]\nname = \"naive\"\nsut.policy = \"naive\"\nfault.slow.multiplier = 6.0\nload.phase.b.rate = 5.0\n\
             [[variant]]\nname = \"hardened\"\n",
        )
        .unwrap();
        assert_eq!(m.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["naive", "hardened"]);
        let t = table(&m[0].text);
        assert_eq!(t["sut"]["policy"].as_str(), Some("naive"));
        assert_eq!(t["sut"]["builtin"].as_str(), Some("gateway"), "untouched keys stay");
        assert_eq!(t["fault"][0]["multiplier"].as_float(), Some(6.0));
        assert_eq!(t["load"]["phase"][1]["rate"].as_float(), Some(5.0));
        assert_eq!(t["load"]["phase"][0]["rate"].as_float(), Some(1.0), "the other phase is untouched");
        assert!(t.get("variant").is_none());
        assert_eq!(table(&m[1].text), {
            let mut b = table(BASE);
            b.remove("variant");
            b
        });
    }

    #[test]
    fn unknown_elements_names_and_fixed_keys_are_refused_where_written() {
        let errors = merged("[[variant]]\nname = \"x\"\nfault.fast.multiplier = 2.0\n").unwrap_err();
        let text = errors[0].to_string();
        assert!(text.contains("no `fault` named `fast`") && text.contains("`slow`"), "{text}");
        assert!(text.starts_with("s.toml:") && text.contains(": variant `x`: `fault.fast`"), "{text}");
        let errors = merged("[[variant]]\nname = \"x\"\nseed = 4\n").unwrap_err();
        assert!(errors[0].to_string().contains("keeps the scenario's name and seed"), "{}", errors[0]);
        let errors = merged("[[variant]]\nname = \"a b\"\n").unwrap_err();
        assert!(errors[0].to_string().contains("letters, digits"), "{}", errors[0]);
        let errors = merged("[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a\"\n").unwrap_err();
        assert!(errors[0].to_string().contains("no other variant has"), "{}", errors[0]);
    }

    #[test]
    fn key_paths_name_the_elements_of_named_arrays() {
        let src = Source::new("m.toml", BASE);
        assert_eq!(by_name(&src, "fault[0].multiplier"), "fault.slow.multiplier");
        assert_eq!(by_name(&src, "load.phase[1].rate"), "load.phase.b.rate");
        assert_eq!(by_name(&src, "sut.policy"), "sut.policy");
    }
}
