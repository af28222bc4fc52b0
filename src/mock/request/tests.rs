//! Unit tests of the parent module.

use super::*;
use proptest::prelude::*;

fn chat(body: &str) -> Result<ChatRequest, BadRequest> {
    parse_chat(body.as_bytes(), Api::Chat)
}

#[test]
fn reads_openai_fields() {
    let r = chat(
        r#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":7,
        "messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi [chaos:r-1]"}]}"#,
    )
    .unwrap();
    assert_eq!((&*r.model, r.stream, r.include_usage, r.max_tokens), ("m", true, true, Some(7)));
    assert_eq!(r.marker.as_deref(), Some("r-1"));
}

#[test]
fn prompt_hash_ignores_markers_but_not_text() {
    let a = chat(r#"{"model":"m","messages":[{"role":"user","content":"hello [chaos:1] world"}]}"#).unwrap();
    let b = chat(r#"{"model":"m","messages":[{"role":"user","content":"hello [chaos:2] world"}]}"#).unwrap();
    let c = chat(r#"{"model":"m","messages":[{"role":"user","content":"hello  world!"}]}"#).unwrap();
    assert_eq!(a.prompt_hash, b.prompt_hash);
    assert_ne!(a.prompt_hash, c.prompt_hash);
}

#[test]
fn content_parts_count_as_text() {
    let a = chat(r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x [chaos:abc]"},{"type":"image_url","image_url":{"url":"u"}}]}]}"#).unwrap();
    assert_eq!(a.marker.as_deref(), Some("abc"));
}

#[test]
fn marker_is_taken_from_the_last_user_message_only() {
    let a = chat(r#"{"model":"m","messages":[{"role":"user","content":"[chaos:old]"},{"role":"assistant","content":"[chaos:asst]"},{"role":"user","content":"new"}]}"#).unwrap();
    assert_eq!(a.marker, None);
}

#[test]
fn missing_messages_and_model_are_bad_requests() {
    assert_eq!(chat(r#"{"model":"m"}"#).unwrap_err().param, Some("messages"));
    assert_eq!(chat(r#"{"messages":[]}"#).unwrap_err().param, Some("model"));
    assert!(chat("{not json").is_err());
}

#[test]
fn anthropic_requires_max_tokens_and_reads_system() {
    let body =
        r#"{"model":"claude","system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(parse_chat(body.as_bytes(), Api::Messages).unwrap_err().param, Some("max_tokens"));
    let body = r#"{"model":"claude","max_tokens":5,"system":"sys","messages":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(parse_chat(body.as_bytes(), Api::Messages).unwrap().max_tokens, Some(5));
}

#[test]
fn malformed_markers_are_ignored() {
    assert_eq!(last_marker("[chaos:] [chaos:a b] [chaos:ok]"), Some("ok"));
    assert_eq!(last_marker("[chaos:unterminated"), None);
    let pieces: Vec<&str> = without_markers("a[chaos:x]b[chaos:]c").collect();
    assert_eq!(pieces, vec!["a", "b[chaos:]c"]);
}

#[test]
fn embeddings_accept_string_and_array_inputs() {
    let r = parse_embeddings(br#"{"model":"e","input":["a","b"],"dimensions":8,"encoding_format":"base64"}"#).unwrap();
    assert_eq!((r.inputs.len(), r.dimensions, r.base64), (2, Some(8), true));
    assert!(parse_embeddings(br#"{"model":"e","input":[]}"#).is_err());
}

proptest! {
    #[test]
    fn parsing_never_panics_on_bytes(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_chat(&body, Api::Chat);
        let _ = parse_chat(&body, Api::Messages);
        let _ = parse_embeddings(&body);
    }

    #[test]
    fn parsing_never_panics_on_near_valid_json(content in ".*", role in "[a-z]{0,8}", marker in "\\[chaos:[^\\]]{0,10}\\]?") {
        let msg = serde_json::json!({"model": "m", "messages": [{"role": role, "content": format!("{content}{marker}")}]});
        let _ = parse_chat(msg.to_string().as_bytes(), Api::Chat);
    }
}
