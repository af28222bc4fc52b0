//! Arguments for a tool call, generated from the tool's JSON Schema so that a client (or an
//! agent framework validating them) accepts them, and seeded so a run repeats exactly.
//!
//! What is honoured: `type` (one or a list; `null` only when nothing else is allowed), `enum`,
//! `const`, object `properties` (every `required` one, each other one half the time) and
//! `additionalProperties: false`, array `items`, `minItems`/`maxItems`, string
//! `minLength`/`maxLength` and the `format`s `date-time`, `date`, `email`, `uri` and `uuid`,
//! number and integer `minimum`/`maximum` (and their exclusive forms) and `multipleOf` for
//! integers, `anyOf`/`oneOf` (one branch), `allOf` (its first branch, with the parent's
//! properties), and local `$ref`s (`#/$defs/…`, `#/definitions/…`, one level of recursion at
//! most). What is not: `pattern` (a string is words), `not`, `if`/`then`, `dependentSchemas`;
//! docs/wire.md lists these as deviations. Written by hand: no crate generates instances from
//! a schema, and the validators (`jsonschema`, a dev-dependency) only check them.
//!
//! The size follows `tokens`: the string values share that many words between them, so a call's
//! arguments stream in about that many fragments.
//!
//! Layer 3 (`mock`): pure; must not depend on `load`, `sut`, `gateway`, `analysis` or anything
//! above.

use rand::RngExt;
use serde_json::{Map, Number, Value};

use crate::seed::DecisionRng;
use crate::words::Words;

/// How deep a schema is followed before the generator stops nesting (a recursive `$ref`).
const MAX_DEPTH: usize = 8;

/// Arguments for `schema` as JSON text, with about `tokens` words in its strings.
pub fn generate(schema: &Value, tokens: u32, rng: &mut DecisionRng, words: &mut Words) -> String {
    let strings = count_strings(schema, schema, 0).max(1);
    let mut g = Generator { root: schema, rng, words, per_string: (tokens as usize / strings).max(1) };
    let value = match schema {
        // No schema (or an empty one): an object, as every function call's arguments are.
        Value::Null => Value::Object(Map::new()),
        s if s.as_object().is_some_and(Map::is_empty) => Value::Object(Map::new()),
        s => g.value(s, 0),
    };
    value.to_string()
}

struct Generator<'a> {
    root: &'a Value,
    rng: &'a mut DecisionRng,
    words: &'a mut Words,
    per_string: usize,
}

impl Generator<'_> {
    fn value(&mut self, schema: &Value, depth: usize) -> Value {
        let Some(s) = schema.as_object() else { return Value::Object(Map::new()) };
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        if let Some(target) = s.get("$ref").and_then(Value::as_str).and_then(|r| resolve(self.root, r)) {
            return self.value(target, depth + 1);
        }
        if let Some(c) = s.get("const") {
            return c.clone();
        }
        if let Some(options) = s.get("enum").and_then(Value::as_array).filter(|o| !o.is_empty()) {
            return options[self.rng.random_range(0..options.len())].clone();
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = s.get(key).and_then(Value::as_array).filter(|b| !b.is_empty()) {
                // The first branch that is not `null`: `oneOf` needs exactly one to match, and
                // typed branches rarely overlap.
                let branch =
                    branches.iter().find(|b| b.get("type") != Some(&Value::from("null"))).unwrap_or(&branches[0]);
                return self.value(branch, depth + 1);
            }
        }
        if let Some(first) = s.get("allOf").and_then(Value::as_array).and_then(|a| a.first()) {
            let mut merged = first.as_object().cloned().unwrap_or_default();
            for (k, v) in s.iter().filter(|(k, _)| *k != "allOf") {
                merged.entry(k.clone()).or_insert_with(|| v.clone());
            }
            return self.value(&Value::Object(merged), depth + 1);
        }
        match type_of(s) {
            "object" => self.object(s, depth),
            "array" => {
                let lo = s.get("minItems").and_then(Value::as_u64).unwrap_or(1);
                let hi = s.get("maxItems").and_then(Value::as_u64).unwrap_or(lo + 2).max(lo);
                let n = self.rng.random_range(lo..=hi.min(lo + 2));
                let items = s.get("items").cloned().unwrap_or(Value::Null);
                Value::Array((0..n).map(|_| self.value(&items, depth + 1)).collect())
            }
            "string" => Value::String(self.string(s)),
            "integer" => Value::Number(self.integer(s).into()),
            "number" => self.number(s),
            "boolean" => Value::Bool(self.rng.random::<bool>()),
            "null" => Value::Null,
            _ => Value::Object(Map::new()),
        }
    }

    fn object(&mut self, s: &Map<String, Value>, depth: usize) -> Value {
        let mut out = Map::new();
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                // Each draw is made whether or not the property is required, so adding
                // `required` to a schema changes only which properties appear.
                let optional_in = self.rng.random::<bool>();
                if required.contains(&name.as_str()) || optional_in {
                    out.insert(name.clone(), self.value(prop, depth + 1));
                }
            }
        }
        // A required property that `properties` does not describe still has to be there.
        for name in required {
            out.entry(name.to_string()).or_insert_with(|| Value::String("value".into()));
        }
        Value::Object(out)
    }

    fn string(&mut self, s: &Map<String, Value>) -> String {
        let canned = match s.get("format").and_then(Value::as_str) {
            Some("date-time") => {
                Some(format!("2026-0{}-1{}T09:30:00Z", self.rng.random_range(1..=9), self.rng.random_range(0..=9)))
            }
            Some("date") => Some(format!("2026-0{}-1{}", self.rng.random_range(1..=9), self.rng.random_range(0..=9))),
            Some("email") => Some(format!("user{}@example.com", self.rng.random_range(1..1000))),
            Some("uri") => Some(format!("https://example.com/item/{}", self.rng.random_range(1..1000))),
            Some("uuid") => {
                Some(format!("{:08x}-0000-4000-8000-{:012x}", self.rng.random::<u32>(), self.rng.random::<u64>() >> 16))
            }
            _ => None,
        };
        let mut text = canned.unwrap_or_else(|| {
            let mut t = String::new();
            for _ in 0..self.per_string {
                let tok = self.words.next_token();
                if !t.is_empty() {
                    t.push(' ');
                }
                t.push_str(tok.word);
            }
            t
        });
        let chars = |t: &str| t.chars().count() as u64;
        if let Some(max) = s.get("maxLength").and_then(Value::as_u64) {
            text = text.chars().take(usize::try_from(max).unwrap_or(usize::MAX)).collect();
        }
        if let Some(min) = s.get("minLength").and_then(Value::as_u64) {
            while chars(&text) < min {
                text.push('x');
            }
        }
        text
    }

    fn integer(&mut self, s: &Map<String, Value>) -> i64 {
        let (lo, hi) = bounds(s, 0.0, 100.0);
        let (lo, hi) = (lo.ceil() as i64, hi.floor() as i64);
        let mut v = if lo <= hi { self.rng.random_range(lo..=hi) } else { lo };
        if let Some(m) = s.get("multipleOf").and_then(Value::as_i64).filter(|m| *m > 0) {
            // The nearest multiple at or above `lo` (the bounds allow at least one, or none fit).
            v = (v / m) * m;
            if v < lo {
                v += m;
            }
        }
        v
    }

    fn number(&mut self, s: &Map<String, Value>) -> Value {
        let (lo, hi) = bounds(s, 0.0, 100.0);
        let v = if lo < hi { lo + (hi - lo) * self.rng.random::<f64>() } else { lo };
        // Two decimals: short on the wire, and still inside exclusive bounds.
        let v = ((v * 100.0).round() / 100.0).clamp(lo, hi);
        Number::from_f64(v).map_or(Value::Null, Value::Number)
    }
}

/// The schema's type: `type` (the first non-null of a list), else guessed from its keywords.
fn type_of(s: &Map<String, Value>) -> &str {
    match s.get("type") {
        Some(Value::String(t)) => t,
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .or_else(|| ts.iter().find_map(Value::as_str))
            .unwrap_or("object"),
        _ if s.contains_key("properties") => "object",
        _ if s.contains_key("items") => "array",
        _ => "string",
    }
}

/// `[minimum, maximum]` with exclusive bounds moved inwards, defaulting to `[lo, hi]`.
fn bounds(s: &Map<String, Value>, lo: f64, hi: f64) -> (f64, f64) {
    let f = |k: &str| s.get(k).and_then(Value::as_f64);
    // Draft 4 wrote exclusivity as a boolean beside the bound; later drafts as the bound.
    let ex = |k: &str, bound: &str| match s.get(k) {
        Some(Value::Bool(true)) => f(bound),
        Some(v) => v.as_f64(),
        None => None,
    };
    let step: f64 = 0.01;
    let lo_v = ex("exclusiveMinimum", "minimum").map(|v| v + step.max(v.abs() * 1e-9)).or(f("minimum"));
    let hi_v = ex("exclusiveMaximum", "maximum").map(|v| v - step.max(v.abs() * 1e-9)).or(f("maximum"));
    match (lo_v, hi_v) {
        (Some(a), Some(b)) => (a, b),
        (Some(a), None) => (a, a.max(0.0) + (hi - lo)),
        (None, Some(b)) => (b.min(hi) - (hi - lo), b),
        (None, None) => (lo, hi),
    }
}

/// A local `$ref` (`#/…`), followed by JSON Pointer.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    root.pointer(reference.strip_prefix('#')?)
}

/// How many string values `schema` produces at most (for sharing the words between them).
fn count_strings(schema: &Value, root: &Value, depth: usize) -> usize {
    let Some(s) = schema.as_object() else { return 0 };
    if depth > MAX_DEPTH {
        return 0;
    }
    if let Some(t) = s.get("$ref").and_then(Value::as_str).and_then(|r| resolve(root, r)) {
        return count_strings(t, root, depth + 1);
    }
    if s.contains_key("enum") || s.contains_key("const") || s.contains_key("format") {
        return 0;
    }
    let nested: usize = ["anyOf", "oneOf", "allOf"]
        .iter()
        .filter_map(|k| s.get(*k).and_then(Value::as_array).and_then(|a| a.first()))
        .map(|b| count_strings(b, root, depth + 1))
        .sum();
    nested
        + match type_of(s) {
            "string" => 1,
            "object" => s
                .get("properties")
                .and_then(Value::as_object)
                .map_or(0, |p| p.values().map(|v| count_strings(v, root, depth + 1)).sum()),
            "array" => 2 * s.get("items").map_or(0, |i| count_strings(i, root, depth + 1)),
            _ => 0,
        }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use serde_json::json;

    use super::*;

    fn args(schema: &Value, seed: u64, tokens: u32) -> Value {
        let mut rng = DecisionRng::seed_from_u64(seed);
        let mut words = Words::new(seed, 7);
        serde_json::from_str(&generate(schema, tokens, &mut rng, &mut words)).expect("arguments are JSON")
    }

    /// Schemas as agent frameworks and the providers' own examples write them; every generated
    /// instance, over 200 seeds each, validates against its schema with an independent
    /// validator (the `jsonschema` crate).
    #[test]
    fn generated_arguments_validate_against_their_schema() {
        let schemas = [
            json!({"type": "object", "properties": {"location": {"type": "string", "description": "City"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"], "additionalProperties": false}),
            json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 3, "maxLength": 40},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                "score": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                "even": {"type": "integer", "multipleOf": 2, "minimum": 3, "maximum": 9},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
                "when": {"type": "string", "format": "date-time"},
                "id": {"type": "string", "format": "uuid"},
                "mail": {"type": "string", "format": "email"},
                "strict": {"type": "boolean"},
                "note": {"type": ["string", "null"]},
                "mode": {"const": "fast"}},
              "required": ["query", "limit", "score", "even", "tags", "when", "id", "mail", "strict", "note", "mode"]}),
            json!({"$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}},
                   "type": "object", "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"},
                   "via": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/point"}}]}},
                   "required": ["from", "to", "via"]}),
            json!({"type": "object", "properties": {"step": {"oneOf": [{"type": "integer", "minimum": 10, "maximum": 10}, {"type": "string", "enum": ["a"]}]},
                   "meta": {"allOf": [{"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}]}},
                   "required": ["step", "meta"]}),
            json!({"type": "object", "properties": {"nested": {"type": "object", "properties": {"deep": {"type": "object", "properties": {"leaf": {"type": "integer", "exclusiveMinimum": 5, "maximum": 6}}, "required": ["leaf"]}}, "required": ["deep"]}}, "required": ["nested"]}),
            json!({}),
            json!({"type": "object"}),
        ];
        for schema in &schemas {
            let validator = jsonschema::validator_for(schema).expect("a valid schema");
            for seed in 0..200 {
                let v = args(schema, seed, 20);
                let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
                assert!(errors.is_empty(), "seed {seed}: {v} against {schema}: {errors:?}");
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_arguments_and_tokens_set_their_size() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a", "b"]});
        assert_eq!(args(&schema, 3, 20), args(&schema, 3, 20));
        assert_ne!(args(&schema, 3, 20), args(&schema, 4, 20));
        let words =
            |v: &Value| v.as_object().unwrap().values().map(|s| s.as_str().unwrap().split(' ').count()).sum::<usize>();
        assert_eq!(words(&args(&schema, 3, 20)), 20, "20 tokens shared by two strings");
        assert_eq!(words(&args(&schema, 3, 60)), 60);
        assert_eq!(args(&Value::Null, 1, 5), json!({}), "no schema: an empty object");
    }

    #[test]
    fn a_recursive_reference_stops() {
        let schema = json!({"$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}, "required": ["child"]}},
                            "$ref": "#/$defs/node"});
        let v = args(&schema, 1, 5);
        assert!(v.to_string().len() < 400, "{v}");
    }
}
