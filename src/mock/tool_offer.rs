//! The tools a request offers and what it allows the model to do with them, read from each
//! API's own spelling into one shape:
//!
//! - Chat Completions: `tools: [{type: "function", function: {name, parameters}}]`,
//!   `tool_choice: "none" | "auto" | "required" | {type: "function", function: {name}}`,
//!   `parallel_tool_calls` (default true).
//! - Responses: `tools: [{type: "function", name, parameters}]`, `tool_choice: "none" | "auto"
//!   | "required" | {type: "function", name}`, `parallel_tool_calls` (default true).
//! - Messages: `tools: [{name, input_schema}]`, `tool_choice: {type: "auto" | "any" | "tool" |
//!   "none", name, disable_parallel_tool_use}`.
//!
//! Tools of other types (web search, code interpreter, …) are not functions the mock can call
//! and are left out. Only requests that offer tools pay for this: the fields are borrowed raw
//! JSON until then.
//!
//! Layer 3 (`mock`): parsing only; must not depend on `load`, `sut`, `gateway`, `analysis` or
//! anything above.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::request::BadRequest;
use crate::record::Api;

/// One function the model may call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// The JSON Schema of its arguments (`null` when the request gave none).
    pub schema: Value,
}

/// What `tool_choice` allows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Choice {
    /// The model decides (`auto`, the default).
    #[default]
    Auto,
    /// No tool call (`none`).
    None,
    /// At least one call, any tool (`required`; Messages `any`).
    Required,
    /// A call of this tool (`{type: "function", …name}`; Messages `{type: "tool", name}`).
    Named(String),
}

/// The tools a request offers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOffer {
    /// The functions, in the request's order.
    pub tools: Vec<Tool>,
    /// What `tool_choice` allows.
    pub choice: Choice,
    /// Whether several calls may come in one answer.
    pub parallel: bool,
}

impl ToolOffer {
    /// The offer read from a request's raw `tools`, `tool_choice` and `parallel_tool_calls`
    /// in `api`'s spelling; `None` when it offers no function.
    pub(crate) fn read(
        api: Api,
        tools: Option<&RawValue>,
        choice: Option<&RawValue>,
        parallel: Option<bool>,
    ) -> Result<Option<Self>, BadRequest> {
        let Some(tools) = tools else { return Ok(None) };
        let raw: Vec<RawTool> = serde_json::from_str(tools.get())
            .map_err(|e| BadRequest::new(format!("Invalid 'tools': {e}"), Some("tools")))?;
        let mut out = Vec::with_capacity(raw.len());
        for t in raw {
            let function = match (api, t.kind.as_deref()) {
                // Chat nests the function; Responses and Messages do not.
                (Api::Chat, Some("function")) => t.function.map(|f| (f.name, f.parameters)),
                (Api::Responses, Some("function")) => t.name.map(|n| (Some(n), t.parameters)),
                (Api::Messages, None | Some("custom")) => t.name.map(|n| (Some(n), t.input_schema)),
                _ => None,
            };
            let Some((name, schema)) = function else { continue };
            let Some(name) = name.filter(|n| !n.is_empty()) else {
                return Err(BadRequest::new("Invalid 'tools': a function needs a 'name'", Some("tools")));
            };
            out.push(Tool { name, schema: schema.unwrap_or(Value::Null) });
        }
        if out.is_empty() {
            return Ok(None);
        }
        let (choice, no_parallel) = match choice {
            None => (Choice::Auto, false),
            Some(raw) => read_choice(api, raw)?,
        };
        if let Choice::Named(name) = &choice
            && !out.iter().any(|t| &t.name == name)
        {
            return Err(BadRequest::new(
                format!("Invalid 'tool_choice': no tool named {name:?} was offered"),
                Some("tool_choice"),
            ));
        }
        Ok(Some(Self { tools: out, choice, parallel: parallel.unwrap_or(true) && !no_parallel }))
    }

    /// The offered tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// `tool_choice` in `api`'s spelling, and whether it turns parallel calls off (Messages).
fn read_choice(api: Api, raw: &RawValue) -> Result<(Choice, bool), BadRequest> {
    let bad = || BadRequest::new(format!("Invalid 'tool_choice': {}", raw.get()), Some("tool_choice"));
    let value: RawChoice = serde_json::from_str(raw.get()).map_err(|_| bad())?;
    let choice = match (api, value) {
        (Api::Chat | Api::Responses, RawChoice::Word(w)) => match w.as_str() {
            "auto" => Choice::Auto,
            "none" => Choice::None,
            "required" => Choice::Required,
            _ => return Err(bad()),
        },
        (Api::Chat, RawChoice::Object(o)) if o.kind.as_deref() == Some("function") => {
            Choice::Named(o.function.and_then(|f| f.name).ok_or_else(bad)?)
        }
        (Api::Responses, RawChoice::Object(o)) if o.kind.as_deref() == Some("function") => {
            Choice::Named(o.name.ok_or_else(bad)?)
        }
        (Api::Messages, RawChoice::Object(o)) => {
            let choice = match o.kind.as_deref() {
                Some("auto") => Choice::Auto,
                Some("any") => Choice::Required,
                Some("none") => Choice::None,
                Some("tool") => Choice::Named(o.name.ok_or_else(bad)?),
                _ => return Err(bad()),
            };
            return Ok((choice, o.disable_parallel_tool_use.unwrap_or(false)));
        }
        _ => return Err(bad()),
    };
    Ok((choice, false))
}

#[derive(Deserialize)]
struct RawTool {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
    function: Option<RawFunction>,
    parameters: Option<Value>,
    input_schema: Option<Value>,
}

#[derive(Deserialize)]
struct RawFunction {
    name: Option<String>,
    parameters: Option<Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawChoice {
    Word(String),
    Object(RawChoiceObject),
}

#[derive(Deserialize)]
struct RawChoiceObject {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
    function: Option<RawFunction>,
    disable_parallel_tool_use: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    fn offer(
        api: Api,
        tools: &str,
        choice: Option<&str>,
        parallel: Option<bool>,
    ) -> Result<Option<ToolOffer>, BadRequest> {
        let (t, c) = (raw(tools), choice.map(raw));
        ToolOffer::read(api, Some(&t), c.as_deref(), parallel)
    }

    #[test]
    fn each_api_spells_its_tools_its_own_way() {
        let chat = offer(
            Api::Chat,
            r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},{"type":"web_search"}]"#,
            None,
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(chat.tools.len(), 1, "a built-in tool is not a function");
        assert_eq!((chat.tools[0].name.as_str(), &chat.choice, chat.parallel), ("get_weather", &Choice::Auto, true));
        let responses = offer(
            Api::Responses,
            r#"[{"type":"function","name":"f","parameters":{"type":"object"}}]"#,
            Some(r#"{"type":"function","name":"f"}"#),
            Some(false),
        )
        .unwrap()
        .unwrap();
        assert_eq!((&responses.choice, responses.parallel), (&Choice::Named("f".into()), false));
        let messages = offer(
            Api::Messages,
            r#"[{"name":"f","input_schema":{"type":"object","properties":{"x":{"type":"string"}}}}]"#,
            Some(r#"{"type":"any","disable_parallel_tool_use":true}"#),
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!((&messages.choice, messages.parallel), (&Choice::Required, false));
        assert_eq!(messages.tools[0].schema["properties"]["x"]["type"], "string");
    }

    #[test]
    fn choices_follow_each_api() {
        let tools = r#"[{"type":"function","function":{"name":"f"}}]"#;
        for (word, want) in [("\"none\"", Choice::None), ("\"required\"", Choice::Required), ("\"auto\"", Choice::Auto)]
        {
            assert_eq!(offer(Api::Chat, tools, Some(word), None).unwrap().unwrap().choice, want);
        }
        let named = offer(Api::Chat, tools, Some(r#"{"type":"function","function":{"name":"f"}}"#), None);
        assert_eq!(named.unwrap().unwrap().choice, Choice::Named("f".into()));
        let m = r#"[{"name":"f","input_schema":{}}]"#;
        assert_eq!(offer(Api::Messages, m, Some(r#"{"type":"none"}"#), None).unwrap().unwrap().choice, Choice::None);
        assert_eq!(
            offer(Api::Messages, m, Some(r#"{"type":"tool","name":"f"}"#), None).unwrap().unwrap().choice,
            Choice::Named("f".into())
        );
    }

    #[test]
    fn bad_offers_are_bad_requests_and_empty_ones_nothing() {
        let tools = r#"[{"type":"function","function":{"name":"f"}}]"#;
        assert_eq!(offer(Api::Chat, tools, Some("\"sometimes\""), None).unwrap_err().param, Some("tool_choice"));
        let unknown = offer(Api::Chat, tools, Some(r#"{"type":"function","function":{"name":"g"}}"#), None);
        assert!(unknown.unwrap_err().message.contains("no tool named \"g\""));
        assert_eq!(offer(Api::Chat, "{}", None, None).unwrap_err().param, Some("tools"));
        assert_eq!(
            offer(Api::Chat, r#"[{"type":"function","function":{}}]"#, None, None).unwrap_err().param,
            Some("tools")
        );
        assert_eq!(offer(Api::Chat, "[]", None, None).unwrap(), None);
        assert_eq!(ToolOffer::read(Api::Chat, None, None, None).unwrap(), None);
    }
}
