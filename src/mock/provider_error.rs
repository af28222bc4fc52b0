//! Error bodies in each provider's own shape, so SDK error types parse them: OpenAI's
//! `{"error":{"message","type","param","code"}}` and Anthropic's
//! `{"type":"error","error":{"type","message"},"request_id"}`.

use bytes::Bytes;
use serde_json::json;

use super::request::Api;

/// Which provider's error shape to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// OpenAI (chat completions, embeddings, models, unknown paths).
    OpenAi,
    /// Anthropic (`/v1/messages`).
    Anthropic,
}

impl From<Api> for Flavor {
    fn from(api: Api) -> Self {
        if api == Api::Messages { Self::Anthropic } else { Self::OpenAi }
    }
}

/// An error to send: status, message, and optional OpenAI `param`/`type`/`code` refinements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderError {
    /// HTTP status.
    pub status: u16,
    /// Message text.
    pub message: String,
    /// OpenAI `param`.
    pub param: Option<&'static str>,
    /// OpenAI `type` (default chosen from the status).
    pub kind: Option<&'static str>,
    /// OpenAI `code` (default chosen from the status).
    pub code: Option<&'static str>,
}

impl ProviderError {
    /// An error with the default type and code for its status.
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Self { status, message: message.into(), param: None, kind: None, code: None }
    }

    /// Sets the OpenAI `param`.
    pub fn param(mut self, param: Option<&'static str>) -> Self {
        self.param = param;
        self
    }

    /// Sets the OpenAI `type` and `code`.
    pub fn kind(mut self, kind: &'static str, code: Option<&'static str>) -> Self {
        self.kind = Some(kind);
        self.code = code;
        self
    }

    /// The JSON body in `flavor`'s shape; Anthropic's carries the `request_id` too.
    pub fn body(&self, flavor: Flavor, request_id: Option<&str>) -> Bytes {
        let value = match flavor {
            Flavor::OpenAi => {
                let (kind, code) = openai_defaults(self.status);
                json!({"error": {
                    "message": self.message,
                    "type": self.kind.unwrap_or(kind),
                    "param": self.param,
                    "code": self.code.or(code),
                }})
            }
            Flavor::Anthropic => json!({
                "type": "error",
                "error": {"type": anthropic_type(self.status), "message": self.message},
                "request_id": request_id,
            }),
        };
        Bytes::from(serde_json::to_vec(&value).unwrap_or_default())
    }
}

fn openai_defaults(status: u16) -> (&'static str, Option<&'static str>) {
    match status {
        400 | 405 | 413 => ("invalid_request_error", None),
        401 => ("invalid_request_error", Some("invalid_api_key")),
        404 => ("invalid_request_error", Some("unknown_url")),
        429 => ("requests", Some("rate_limit_exceeded")),
        503 | 529 => ("server_error", Some("overloaded")),
        _ => ("server_error", None),
    }
}

fn anthropic_type(status: u16) -> &'static str {
    match status {
        400 | 405 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_shape_has_message_type_param_code() {
        let body = ProviderError::new(400, "bad").param(Some("messages")).body(Flavor::OpenAi, None);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["param"], "messages");
        assert!(v["error"]["code"].is_null());
    }

    #[test]
    fn anthropic_shape_names_the_error_type() {
        let body = ProviderError::new(529, "Overloaded").body(Flavor::Anthropic, Some("req_1"));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["request_id"], "req_1");
        assert_eq!((v["type"].as_str(), v["error"]["type"].as_str()), (Some("error"), Some("overloaded_error")));
    }
}
