//! Faults that arrive over the network: the mock's control API (`POST /_chaos/faults`), the
//! live page's facilitator (`POST /api/faults`) and the per-request `x-chaos-fault` header.
//! They are read into a [`NetworkFault`], whose only constructor refuses a `flush.command`
//! (a program run on this machine): that is accepted only from scenario and faults files read
//! from disk. A timeline entry placed from a `NetworkFault` is also marked so that the expiry
//! scheduler never runs a command for it ([`super::Entry::flush_command`]).
//!
//! Errors name the key with what was found and what was expected, never the parser's
//! internals ("expected internally tagged enum Fault").

use serde_json::Value;

use super::Fault;

/// Why a `flush.command` is refused over the network.
pub const COMMAND_REFUSED: &str = "flush.command runs a program on this machine; it is accepted only from scenario and faults files, never over the network; use flush.http";

/// A fault read from the network. It cannot carry a `flush.command`.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkFault(Fault);

/// Why a fault from the network was refused: the key, what was found and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct NetworkFaultError {
    /// The key path within the fault (empty: the fault as a whole).
    pub key: String,
    /// What was there.
    pub found: String,
    /// What was expected.
    pub expected: String,
    /// All of it in a sentence.
    pub message: String,
}

impl NetworkFaultError {
    fn new(key: &str, found: impl Into<String>, expected: impl Into<String>) -> Self {
        let (found, expected) = (found.into(), expected.into());
        let message = if key.is_empty() {
            format!("{found}: expected {expected}")
        } else {
            format!("`{key}` is {found}: expected {expected}")
        };
        Self { key: key.to_string(), found, expected, message }
    }
}

impl NetworkFault {
    /// Reads one fault object (JSON), refusing a flush command.
    pub fn from_json(value: &Value) -> Result<Self, NetworkFaultError> {
        let kinds = || format!("one of {}", Fault::KINDS.join(", "));
        let Value::Object(object) = value else {
            return Err(NetworkFaultError::new("", describe(value), "a fault: a JSON object with a `kind`"));
        };
        match object.get("kind") {
            None => return Err(NetworkFaultError::new("kind", "missing", kinds())),
            Some(Value::String(k)) if Fault::KINDS.contains(&k.as_str()) => {}
            Some(other) => return Err(NetworkFaultError::new("kind", describe(other), kinds())),
        }
        let fault: Fault = serde_path_to_error::deserialize(value).map_err(|e| problem_of(value, &e))?;
        if let Fault::TtlExpiry(t) = &fault
            && t.flush.as_ref().is_some_and(|h| h.command.is_some())
        {
            return Err(NetworkFaultError {
                key: "flush.command".into(),
                found: "a command".into(),
                expected: "flush.http".into(),
                message: COMMAND_REFUSED.into(),
            });
        }
        Ok(Self(fault))
    }

    /// Reads one fault from JSON text.
    pub fn from_text(text: &str) -> Result<Self, NetworkFaultError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| NetworkFaultError::new("", format!("not JSON ({e})"), "a fault as a JSON object"))?;
        Self::from_json(&value)
    }

    /// The fault.
    pub fn fault(&self) -> &Fault {
        &self.0
    }

    /// Its name, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.0.envelope().name
    }

    /// Names it.
    pub fn set_name(&mut self, name: String) {
        *self.0.envelope_mut().name = Some(name);
    }

    /// The same fault without `start`, `duration` or `ramp` (see [`Fault::untimed`]).
    pub fn untimed(self) -> Self {
        Self(self.0.untimed())
    }

    /// The fault, for the record (a timeline entry is made with
    /// [`super::Entry::from_network`]).
    pub fn into_fault(self) -> Fault {
        self.0
    }
}

/// A JSON value in words: `"nope"` for a string, `a number` otherwise.
fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(n) => format!("the number {n}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// The key, what was found and what was expected for a fault object serde refused. Serde
/// reports errors inside the internally tagged fault table against the table as a whole
/// (path `.`), so the object is read again as TOML through the scenario reader, which finds
/// the offending key the way it does for files.
fn problem_of(item: &Value, e: &serde_path_to_error::Error<serde_json::Error>) -> NetworkFaultError {
    let path = e.path().to_string();
    let kind = item.get("kind").and_then(Value::as_str).unwrap_or("fault");
    let fallback = || {
        if path == "." || path.is_empty() {
            NetworkFaultError::new("", "this object", format!("a `{kind}` fault (see `chaos schema faults`)"))
        } else {
            NetworkFaultError::new(&path, "this value", e.inner().to_string())
        }
    };
    let Ok(text) = toml::to_string(item) else { return fallback() };
    match crate::located::Source::new("fault", text).parse::<Fault>() {
        Err(located) if !located.key_path().is_empty() => {
            let (found, expected) = located.found_expected();
            NetworkFaultError::new(&located.key_path(), found, expected)
        }
        _ => fallback(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused(v: Value) -> NetworkFaultError {
        NetworkFault::from_json(&v).unwrap_err()
    }

    #[test]
    fn a_flush_command_never_comes_over_the_network() {
        let e = refused(json!({"kind": "ttl_expiry", "duration": "1s", "flush": {"command": ["touch", "/tmp/x"]}}));
        assert_eq!((e.key.as_str(), e.message.as_str()), ("flush.command", COMMAND_REFUSED));
        let http = json!({"kind": "ttl_expiry", "duration": "1s", "flush": {"http": "http://127.0.0.1:1/flush"}});
        assert!(NetworkFault::from_json(&http).is_ok());
        assert!(NetworkFault::from_text(&http.to_string()).is_ok());
    }

    #[test]
    fn a_missing_or_unknown_kind_says_which_kinds_there_are() {
        for (v, found) in [
            (json!({"code": 429}), "missing"),
            (json!({"kind": "nope"}), "\"nope\""),
            (json!({"kind": 3}), "the number 3"),
        ] {
            let e = refused(v);
            assert_eq!((e.key.as_str(), e.found.as_str()), ("kind", found));
            assert!(
                e.message.starts_with(&format!("`kind` is {found}: expected one of latency, rate_limit, status, "))
            );
            assert!(!e.message.contains("internally tagged"), "{e}");
        }
        let e = refused(json!("status"));
        assert!(e.message.contains("a JSON object with a `kind`"), "{e}");
        let e = NetworkFault::from_text("{").unwrap_err();
        assert!(e.message.starts_with("not JSON"), "{e}");
    }

    #[test]
    fn a_bad_value_names_its_key() {
        let e = refused(json!({"kind": "latency", "multiplier": "fast"}));
        assert_eq!(e.key, "multiplier");
        assert!(e.found.contains("fast"), "{e:?}");
        let e = refused(json!({"kind": "status", "cod": 500}));
        assert!(e.message.contains("cod"), "{e}");
        assert!(!e.message.contains("internally tagged") && !e.message.contains("`.`"), "{e}");
    }
}
