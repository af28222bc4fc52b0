//! Tool calls as a client assembles them: fragments of a call's name and arguments arrive
//! keyed by an index (chat's `index`, a Messages content block, a Responses output item) and
//! are joined per key, as the official SDKs join them. A call is usable when it names a tool
//! the request offered and its arguments are a JSON object; a stream cut inside the
//! arguments, arguments that are not JSON, or two calls merged under one index are not.
//!
//! Layer 3 (`load`): must not depend on the mock, the analysis or reports.

/// The calls of one answer, by key in arrival order.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Calls {
    calls: Vec<(u64, String, String)>,
}

impl Calls {
    fn entry(&mut self, key: u64) -> &mut (u64, String, String) {
        let i = match self.calls.iter().position(|c| c.0 == key) {
            Some(i) => i,
            None => {
                self.calls.push((key, String::new(), String::new()));
                self.calls.len() - 1
            }
        };
        &mut self.calls[i]
    }

    /// Appends a fragment of call `key`'s name (chat sends it once; a quirky provider again).
    pub(super) fn name(&mut self, key: u64, name: &str) {
        self.entry(key).1.push_str(name);
    }

    /// Appends a fragment of call `key`'s arguments.
    pub(super) fn arguments(&mut self, key: u64, fragment: &str) {
        // Bounded: an answer that streams megabytes of arguments is broken anyway.
        let e = self.entry(key);
        if e.2.len() < 1 << 20 {
            e.2.push_str(fragment);
        }
    }

    /// Each call's name and arguments, in arrival order.
    pub(super) fn pairs(&self) -> Vec<(String, String)> {
        self.calls.iter().map(|(_, name, args)| (name.clone(), args.clone())).collect()
    }

    /// How many calls.
    pub(super) fn len(&self) -> usize {
        self.calls.len()
    }

    /// What makes the calls unusable, if anything: an unoffered name, or arguments that are
    /// not a JSON object (empty arguments count as `{}`).
    pub(super) fn broken(&self, offered: &[String]) -> Option<String> {
        self.calls.iter().find_map(|(_, name, args)| {
            if !offered.iter().any(|o| o == name) {
                return Some(format!("a call to {name}, which was not offered"));
            }
            let parsed = if args.trim().is_empty() { Ok(serde_json::json!({})) } else { serde_json::from_str(args) };
            match parsed {
                Ok(serde_json::Value::Object(_)) => None,
                _ => Some(format!("{name}'s arguments are not a JSON object")),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_join_by_key_and_merged_calls_break() {
        let offered = ["f".to_string(), "g".to_string()];
        let mut c = Calls::default();
        c.name(0, "f");
        c.name(1, "g");
        c.arguments(0, "{\"query\":");
        c.arguments(1, "{}");
        c.arguments(0, "\"x\"}");
        assert_eq!((c.len(), c.broken(&offered)), (2, None), "interleaved fragments join by index");
        let mut merged = Calls::default();
        merged.name(0, "f");
        merged.arguments(0, "{\"query\":\"a\"}");
        merged.name(0, "g");
        merged.arguments(0, "{\"query\":\"b\"}");
        assert_eq!(merged.broken(&offered).as_deref(), Some("a call to fg, which was not offered"), "index 0 for both");
        let mut cut = Calls::default();
        cut.name(3, "f");
        cut.arguments(3, "{\"que");
        assert_eq!(cut.broken(&offered).as_deref(), Some("f's arguments are not a JSON object"));
        let mut empty = Calls::default();
        empty.name(0, "g");
        assert_eq!(empty.broken(&offered), None, "no arguments are {{}}");
    }
}
