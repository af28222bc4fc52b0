//! The wire of 2026 clients, end to end over loopback: the Responses API, tool calls in each
//! API, the retry signals SDKs obey, usage with prompt caching, and provider quirks. Each test
//! reads what a client would read and checks it against what the mock was told to do.

use crate::common;

use chaos::faults::{Fault, QuirkMode, ResetWhen, ToolCallMode};
use chaos::mock::{Decision, MockUpstream};
use chaos::scenario::{Profile, PromptCache, ToolCalls};
use serde_json::{Value, json};
use std::time::Duration;

fn tool(name: &str) -> Value {
    json!({"type": "object", "properties": {
        "city": {"type": "string", "minLength": 1},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"enum": ["c", "f"]}
    }, "required": ["city", "days"], "additionalProperties": false, "title": name})
}

/// Chat `tools` offering `get_weather` and `get_time`.
fn chat_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": tool("w")}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}
    ])
}

fn tools_profile(probability: f64, parallel: u32) -> Profile {
    Profile {
        tool_calls: ToolCalls { probability, parallel, arguments_tokens: 12, rounds: None },
        ..Profile::default()
    }
}

async fn post(
    mock: &MockUpstream,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    post_on(&common::http(), mock, path, body, headers).await
}

/// [`post`] on a client of the test's own: tests that send many requests keep one, as building
/// a client costs more than a request to the mock.
async fn post_on(
    http: &reqwest::Client,
    mock: &MockUpstream,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut req = http.post(format!("{}{path}", mock.uri())).json(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let (status, h) = (resp.status().as_u16(), resp.headers().clone());
    (status, h, resp.text().await.unwrap_or_default())
}

/// `(event, data)` of a typed SSE stream (Responses, Messages).
fn events(body: &str) -> Vec<(String, Value)> {
    common::sse_events(body)
}

fn is_schema_valid(args: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(args) else { return false };
    let days = v["days"].as_i64();
    v["city"].as_str().is_some_and(|c| !c.is_empty())
        && days.is_some_and(|d| (1..=14).contains(&d))
        && v.as_object().unwrap().keys().all(|k| ["city", "days", "unit"].contains(&k.as_str()))
}

// ---- Responses API ----------------------------------------------------------------------

#[tokio::test]
async fn a_whole_response_has_a_message_item_and_usage() {
    let mock = common::mock(Profile::default()).await;
    let (status, h, body) =
        post(&mock, "/v1/responses", &json!({"model": "gpt-4o-mini", "input": "hello there"}), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert!(h.get("x-request-id").is_some());
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((v["object"].as_str(), v["status"].as_str()), (Some("response"), Some("completed")));
    assert!(v["id"].as_str().unwrap().starts_with("resp_"));
    let item = &v["output"][0];
    assert_eq!((item["type"].as_str(), item["role"].as_str()), (Some("message"), Some("assistant")));
    let text = item["content"][0]["text"].as_str().unwrap();
    let u = &v["usage"];
    assert_eq!(u["output_tokens"].as_u64().unwrap() as usize, text.split(' ').count());
    assert_eq!(
        u["total_tokens"].as_u64(),
        Some(u["input_tokens"].as_u64().unwrap() + u["output_tokens"].as_u64().unwrap())
    );
    assert!(
        u["input_tokens_details"]["cached_tokens"].is_u64() && u["output_tokens_details"]["reasoning_tokens"].is_u64()
    );
    let a = mock.attempts().pop().unwrap();
    assert_eq!((a.api.path(), a.status), ("/v1/responses", 200));
}

#[tokio::test]
async fn a_streamed_response_is_numbered_typed_events_ending_completed_without_done() {
    let mock = common::mock(Profile::default()).await;
    let body = json!({"model": "gpt-4o-mini", "input": [{"role": "user", "content": "hi"}], "stream": true, "previous_response_id": "resp_abc"});
    let (status, h, text) = post(&mock, "/v1/responses", &body, &[]).await;
    assert_eq!(status, 200);
    assert!(h["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    assert!(!text.contains("[DONE]"));
    let ev = events(&text);
    assert_eq!(ev.first().unwrap().0, "response.created");
    assert_eq!(ev.last().unwrap().0, "response.completed");
    for (i, (name, data)) in ev.iter().enumerate() {
        assert_eq!(data["type"].as_str(), Some(name.as_str()));
        assert_eq!(data["sequence_number"].as_u64(), Some(i as u64), "event {i} {name}");
    }
    let deltas: String = ev
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    let done = &ev.last().unwrap().1["response"];
    assert_eq!(done["output"][0]["content"][0]["text"].as_str(), Some(deltas.as_str()));
    assert_eq!(done["usage"]["output_tokens"].as_u64().unwrap() as usize, deltas.split(' ').count());
}

#[tokio::test]
async fn a_response_with_max_output_tokens_is_incomplete() {
    let mock = common::mock(Profile::default()).await;
    let body = json!({"model": "m", "input": "hi", "max_output_tokens": 3, "stream": true});
    let (_, _, text) = post(&mock, "/v1/responses", &body, &[]).await;
    let last = events(&text).pop().unwrap();
    assert_eq!(last.0, "response.incomplete");
    assert_eq!(last.1["response"]["incomplete_details"]["reason"], "max_output_tokens");
}

#[tokio::test]
async fn a_response_cut_mid_stream_ends_without_a_terminal_event() {
    let mock = common::mock_with(Profile::default(), vec![Fault::reset(ResetWhen::MidStream)]).await;
    let resp = common::http()
        .post(format!("{}/v1/responses", mock.uri()))
        .json(&json!({"model": "m", "input": "hi", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut got = Vec::new();
    let mut stream = resp.bytes_stream();
    let mut failed = false;
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        match chunk {
            Ok(b) => got.extend_from_slice(&b),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert!(failed, "the connection is cut, not closed cleanly");
    assert!(text.contains("response.created") && !text.contains("response.completed"), "{text}");
}

#[tokio::test]
async fn a_responses_function_call_has_schema_valid_arguments_whole_and_streamed() {
    let mock = common::mock(tools_profile(0.0, 1)).await;
    let tools = json!([{"type": "function", "name": "get_weather", "parameters": tool("w")}]);
    let body = json!({"model": "m", "input": "weather?", "tools": tools, "tool_choice": "required"});
    let (_, _, text) = post(&mock, "/v1/responses", &body, &[]).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    let call =
        v["output"].as_array().unwrap().iter().find(|i| i["type"] == "function_call").expect("a function_call item");
    assert_eq!(call["name"], "get_weather");
    assert!(call["call_id"].as_str().unwrap().starts_with("call_"));
    assert!(is_schema_valid(call["arguments"].as_str().unwrap()), "{call}");

    let mut body = body;
    body["stream"] = json!(true);
    let (_, _, text) = post(&mock, "/v1/responses", &body, &[]).await;
    let ev = events(&text);
    let deltas: String = ev
        .iter()
        .filter(|(n, _)| n == "response.function_call_arguments.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    let done = ev.iter().find(|(n, _)| n == "response.function_call_arguments.done").unwrap();
    assert_eq!(done.1["arguments"].as_str(), Some(deltas.as_str()));
    assert!(is_schema_valid(&deltas));
    assert!(
        ev.iter().filter(|(n, _)| n == "response.function_call_arguments.delta").count() > 1,
        "arguments stream in fragments"
    );
    assert_eq!(ev.last().unwrap().0, "response.completed");
}

// ---- Tool calls on chat and Messages ---------------------------------------------------

#[tokio::test]
async fn chat_tool_calls_stream_id_and_name_on_the_first_fragment_only() {
    let mock = common::mock(tools_profile(1.0, 2)).await;
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "go"}], "tools": chat_tools()});
    let (status, _, text) = post(&mock, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(status, 200);
    let mut args: std::collections::BTreeMap<u64, (Option<String>, Option<String>, String, usize)> = Default::default();
    let mut finish = None;
    for d in common::sse_data(&text).iter().filter(|d| *d != "[DONE]") {
        let v: Value = serde_json::from_str(d).unwrap();
        if let Some(f) = v["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
        for c in v["choices"][0]["delta"]["tool_calls"].as_array().into_iter().flatten() {
            let e = args.entry(c["index"].as_u64().unwrap()).or_default();
            if let Some(id) = c["id"].as_str() {
                assert!(e.0.replace(id.to_string()).is_none(), "id sent once per call");
            }
            if let Some(n) = c["function"]["name"].as_str() {
                assert!(e.1.replace(n.to_string()).is_none(), "name sent once per call");
            }
            e.2.push_str(c["function"]["arguments"].as_str().unwrap_or(""));
            e.3 += 1;
        }
    }
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    assert_eq!(args.len(), 2, "two parallel calls with indexes 0 and 1");
    for (id, name, a, fragments) in args.values() {
        assert!(id.is_some() && fragments > &2);
        match name.as_deref() {
            Some("get_weather") => assert!(is_schema_valid(a), "{a}"),
            Some("get_time") => assert!(serde_json::from_str::<Value>(a).unwrap()["tz"].is_string()),
            other => panic!("unoffered {other:?}"),
        }
    }
    assert_eq!(mock.attempts().pop().unwrap().tool_calls, 2);
}

#[tokio::test]
async fn tool_choice_none_forbids_a_call_and_a_named_tool_forces_that_one() {
    let mock = common::mock(tools_profile(1.0, 1)).await;
    let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": chat_tools(), "tool_choice": "none"});
    let (_, _, text) = post(&mock, "/v1/chat/completions", &body, &[]).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["choices"][0]["message"]["tool_calls"].is_null() && v["choices"][0]["finish_reason"] == "stop");

    body["tool_choice"] = json!({"type": "function", "function": {"name": "get_time"}});
    for _ in 0..5 {
        let (_, _, text) = post(&mock, "/v1/chat/completions", &body, &[]).await;
        let v: Value = serde_json::from_str(&text).unwrap();
        let calls = v["choices"][0]["message"]["tool_calls"].as_array().unwrap();
        assert_eq!((calls.len(), calls[0]["function"]["name"].as_str()), (1, Some("get_time")));
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    }
}

#[tokio::test]
async fn the_probability_decides_how_often_auto_answers_call_a_tool() {
    let mock = common::mock(tools_profile(0.3, 1)).await;
    let (mut calls, http) = (0, common::http());
    for i in 0..200 {
        let body =
            json!({"model": "m", "messages": [{"role": "user", "content": format!("q{i}")}], "tools": chat_tools()});
        let (_, _, text) = post_on(&http, &mock, "/v1/chat/completions", &body, &[]).await;
        let v: Value = serde_json::from_str(&text).unwrap();
        calls += usize::from(v["choices"][0]["message"]["tool_calls"].is_array());
    }
    // Binomial(200, 0.3): mean 60, sd 6.5; ±4 sd.
    assert!((34..=86).contains(&calls), "{calls} of 200");
}

#[tokio::test]
async fn anthropic_tool_use_whole_and_streamed_as_input_json_deltas() {
    let mock = common::mock(tools_profile(0.0, 1)).await;
    let tools = json!([{"name": "get_weather", "input_schema": tool("w")}]);
    let mut body = json!({"model": "claude-x", "max_tokens": 200, "messages": [{"role": "user", "content": "hi"}], "tools": tools, "tool_choice": {"type": "any"}});
    let (status, h, text) = post(&mock, "/v1/messages", &body, &[]).await;
    assert_eq!(status, 200);
    assert!(h.get("request-id").is_some());
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["stop_reason"], "tool_use");
    let block = v["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use").unwrap();
    assert!(block["id"].as_str().unwrap().starts_with("toolu_"));
    assert!(is_schema_valid(&block["input"].to_string()), "{block}");

    body["stream"] = json!(true);
    let (_, _, text) = post(&mock, "/v1/messages", &body, &[]).await;
    let ev = events(&text);
    let start =
        ev.iter().find(|(n, d)| n == "content_block_start" && d["content_block"]["type"] == "tool_use").unwrap();
    let idx = start.1["index"].clone();
    let json: String = ev
        .iter()
        .filter(|(n, d)| n == "content_block_delta" && d["index"] == idx)
        .map(|(_, d)| {
            assert_eq!(d["delta"]["type"], "input_json_delta");
            d["delta"]["partial_json"].as_str().unwrap()
        })
        .collect();
    assert!(is_schema_valid(&json), "{json}");
    let delta = ev.iter().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");
    assert_eq!(ev.last().unwrap().0, "message_stop");
}

/// An agent's follow-up request on `path` carrying `rounds` tool rounds (two parallel calls
/// each), offering `get_weather` with `tool_choice` auto, in that API's shapes.
fn agent_request(path: &str, rounds: usize) -> Value {
    let mut items = vec![json!({"role": "user", "content": "weather in Oslo and Bergen?"})];
    for r in 0..rounds {
        let id = |k: usize| format!("call_{r}_{k}");
        match path {
            "/v1/chat/completions" => {
                let call = |k| json!({"id": id(k), "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\",\"days\":1}"}});
                items.push(json!({"role": "assistant", "content": null, "tool_calls": [call(0), call(1)]}));
                items.extend((0..2).map(|k| json!({"role": "tool", "tool_call_id": id(k), "content": "12 C"})));
            }
            "/v1/responses" => {
                items.extend((0..2).map(|k| json!({"type": "function_call", "call_id": id(k), "name": "get_weather", "arguments": "{\"city\":\"Oslo\",\"days\":1}"})));
                items.extend(
                    (0..2).map(|k| json!({"type": "function_call_output", "call_id": id(k), "output": "12 C"})),
                );
            }
            _ => {
                let uses: Vec<Value> = (0..2).map(|k| json!({"type": "tool_use", "id": id(k), "name": "get_weather", "input": {"city": "Oslo", "days": 1}})).collect();
                items.push(json!({"role": "assistant", "content": uses}));
                let results: Vec<Value> =
                    (0..2).map(|k| json!({"type": "tool_result", "tool_use_id": id(k), "content": "12 C"})).collect();
                items.push(json!({"role": "user", "content": results}));
            }
        }
    }
    match path {
        "/v1/chat/completions" => json!({"model": "m", "messages": items, "tools": chat_tools()}),
        "/v1/responses" => json!({"model": "m", "input": items,
            "tools": [{"type": "function", "name": "get_weather", "parameters": tool("w")}]}),
        _ => json!({"model": "claude-x", "max_tokens": 200, "messages": items,
            "tools": [{"name": "get_weather", "input_schema": tool("w")}]}),
    }
}

/// Whether an answer on `path` calls a tool, as its client reads it.
fn calls_a_tool(path: &str, text: &str) -> bool {
    let v: Value = serde_json::from_str(text).unwrap();
    match path {
        "/v1/chat/completions" => v["choices"][0]["finish_reason"] == "tool_calls",
        "/v1/responses" => v["output"].as_array().unwrap().iter().any(|i| i["type"] == "function_call"),
        _ => v["stop_reason"] == "tool_use",
    }
}

#[tokio::test]
async fn a_conversation_gets_tool_calls_for_its_rounds_then_text_in_every_api() {
    let mut p = tools_profile(1.0, 1);
    p.tool_calls.rounds = Some(3);
    let (mock, http) = (common::mock(p).await, common::http());
    for path in ["/v1/chat/completions", "/v1/responses", "/v1/messages"] {
        let mut called = Vec::new();
        for rounds in 0..=3 {
            let (status, _, text) = post_on(&http, &mock, path, &agent_request(path, rounds), &[]).await;
            assert_eq!(status, 200, "{path} {text}");
            let a = mock.attempts().pop().unwrap();
            assert_eq!(calls_a_tool(path, &text), a.tool_calls > 0, "{path}: the log agrees with the answer");
            called.push(calls_a_tool(path, &text));
        }
        assert_eq!(called, [true, true, true, false], "{path}: probability 1, rounds 3");
    }
    let mut required = agent_request("/v1/chat/completions", 3);
    required["tool_choice"] = json!("required");
    let (_, _, text) = post(&mock, "/v1/chat/completions", &required, &[]).await;
    assert!(calls_a_tool("/v1/chat/completions", &text), "`required` still forces a call");
}

// ---- Tool-call faults --------------------------------------------------------------------

async fn chat_tool_stream(fault: ToolCallMode, parallel: u32) -> (MockUpstream, String) {
    let mock = common::mock_with(tools_profile(0.0, parallel), vec![Fault::tool_call(fault)]).await;
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "go"}], "tools": chat_tools()});
    let resp = common::http().post(format!("{}/v1/chat/completions", mock.uri())).json(&body).send().await.unwrap();
    let text = match resp.bytes().await {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => String::new(),
    };
    (mock, text)
}

fn call_fragments(text: &str) -> Vec<Value> {
    common::sse_data(text)
        .iter()
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .flat_map(|v| v["choices"][0]["delta"]["tool_calls"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn a_stream_cut_inside_arguments_never_finishes() {
    let mock = common::mock_with(tools_profile(0.0, 1), vec![Fault::tool_call(ToolCallMode::CutInArguments)]).await;
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "go"}], "tools": chat_tools()});
    let resp = common::http().post(format!("{}/v1/chat/completions", mock.uri())).json(&body).send().await.unwrap();
    let mut got = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(Ok(b)) = futures::StreamExt::next(&mut stream).await {
        got.extend_from_slice(&b);
    }
    let text = String::from_utf8_lossy(&got);
    let args: String = call_fragments(&text).iter().filter_map(|c| c["function"]["arguments"].as_str()).collect();
    assert!(!args.is_empty(), "some arguments arrived: {text}");
    assert!(serde_json::from_str::<Value>(&args).is_err(), "but not all of them: {args}");
    assert!(!text.contains("finish_reason\":\"") && !text.contains("[DONE]"));
    assert!(common::eventually(|| mock.attempts().last().is_some_and(|a| a.decision == Decision::ToolCall)).await);
}

#[tokio::test]
async fn invalid_arguments_finish_normally_but_do_not_parse() {
    let (_, text) = chat_tool_stream(ToolCallMode::InvalidArguments, 1).await;
    let args: String = call_fragments(&text).iter().filter_map(|c| c["function"]["arguments"].as_str()).collect();
    assert!(text.contains("\"finish_reason\":\"tool_calls\"") && text.ends_with("data: [DONE]\n\n"));
    assert!(serde_json::from_str::<Value>(&args).is_err(), "{args}");
}

#[tokio::test]
async fn interleaved_deltas_alternate_indexes_and_index_zero_numbers_every_call_zero() {
    let (_, text) = chat_tool_stream(ToolCallMode::Interleaved, 1).await;
    let order: Vec<u64> = call_fragments(&text).iter().map(|c| c["index"].as_u64().unwrap()).collect();
    let switches = order.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(order.contains(&1) && switches >= 3, "deltas interleave by index: {order:?}");

    let (_, text) = chat_tool_stream(ToolCallMode::IndexZero, 3).await;
    let frags = call_fragments(&text);
    let ids: std::collections::HashSet<&str> = frags.iter().filter_map(|c| c["id"].as_str()).collect();
    assert!(ids.len() >= 2, "several calls: {ids:?}");
    assert!(frags.iter().all(|c| c["index"] == 0));
}

#[tokio::test]
async fn an_unknown_tool_is_a_name_the_request_never_offered() {
    let (_, text) = chat_tool_stream(ToolCallMode::UnknownTool, 1).await;
    let names: Vec<&str> = call_fragments(&text)
        .iter()
        .filter_map(|c| c["function"]["name"].as_str().map(str::to_owned))
        .map(|s| &*s.leak())
        .collect();
    assert_eq!(names.len(), 1);
    assert!(!["get_weather", "get_time"].contains(&names[0]), "{names:?}");
}

#[tokio::test]
async fn tool_call_faults_leave_requests_without_tools_alone() {
    let mock = common::mock_with(Profile::default(), vec![Fault::tool_call(ToolCallMode::CutInArguments)]).await;
    let (status, _, body, _) = common::chat(&mock, "no tools here", true).await;
    assert_eq!(status, 200);
    assert!(body.ends_with("data: [DONE]\n\n"));
    assert_eq!(mock.attempts().pop().unwrap().decision, Decision::Ok);
}

// ---- Retry signals -----------------------------------------------------------------------

#[tokio::test]
async fn should_retry_and_retry_after_past_the_cliff_are_sent_as_told() {
    let mock = common::mock_with(
        Profile::default(),
        vec![Fault::status(503).should_retry(false).retry_after(Duration::from_secs(150))],
    )
    .await;
    let (status, h, body, _) = common::chat(&mock, "x", false).await;
    assert_eq!(status, 503);
    assert_eq!(h["x-should-retry"], "false");
    assert_eq!(h["retry-after"], "150");
    assert_eq!(h["retry-after-ms"], "150000");
    let rid = h["x-request-id"].to_str().unwrap();
    assert!(rid.starts_with("req_"));
    assert!(serde_json::from_str::<Value>(&body).unwrap()["error"].is_object());
}

#[tokio::test]
async fn the_spend_limit_is_a_429_that_says_do_not_retry_in_each_providers_words() {
    let mock = common::mock_with(Profile::default(), vec![Fault::spend_limit()]).await;
    let (status, h, body, _) = common::chat(&mock, "x", false).await;
    assert_eq!((status, h["x-should-retry"].to_str().unwrap()), (429, "false"));
    assert!(h.get("retry-after").is_none());
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "insufficient_quota");

    let body = json!({"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let (status, h, text) = post(&mock, "/v1/messages", &body, &[]).await;
    assert_eq!((status, h["x-should-retry"].to_str().unwrap()), (429, "false"));
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((v["type"].as_str(), v["error"]["type"].as_str()), (Some("error"), Some("rate_limit_error")));
    assert_eq!(v["request_id"].as_str(), h["request-id"].to_str().ok(), "the body names the request id of the header");
    assert!(v["error"]["message"].as_str().unwrap().contains("spend"));
}

#[tokio::test]
async fn every_refusal_carries_a_request_id_and_anthropic_bodies_repeat_it() {
    let mock = common::mock_with(Profile::default(), vec![Fault::status(529)]).await;
    let body = json!({"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let (status, h, text) = post(&mock, "/v1/messages", &body, &[]).await;
    assert_eq!(status, 529);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["type"], "overloaded_error");
    assert_eq!(v["request_id"].as_str(), h["request-id"].to_str().ok());
    let (status, h, _) = post(&mock, "/v1/chat/completions", &json!({"model": "m"}), &[]).await;
    assert_eq!(status, 400, "a bad request is refused too");
    assert!(h.get("x-request-id").is_some());
}

#[tokio::test]
async fn the_attempt_log_keeps_the_idempotency_key_and_retry_count_of_each_attempt() {
    let mock = common::mock(Profile::default()).await;
    for n in 0..3 {
        let n = n.to_string();
        post(
            &mock,
            "/v1/chat/completions",
            &common::chat_body("x", false),
            &[("idempotency-key", "stainless-python-retry-0b7e"), ("x-stainless-retry-count", &n)],
        )
        .await;
    }
    let log = mock.attempts();
    assert!(log.iter().all(|a| a.idempotency_key.as_deref() == Some("stainless-python-retry-0b7e")));
    let counts: Vec<_> = log.iter().map(|a| a.stainless_retry_count).collect();
    assert_eq!(counts, [Some(0), Some(1), Some(2)]);
}

// ---- Usage and the prompt cache --------------------------------------------------------

fn cached_profile() -> Profile {
    let mut p = Profile::fixed(Duration::from_millis(200), 8);
    p.prompt_cache = Some(PromptCache { min_tokens: 256, block_tokens: 64, ..PromptCache::default() });
    p
}

fn long_conversation(last: &str) -> Vec<Value> {
    let system = "You are a careful assistant. ".repeat(120);
    vec![json!({"role": "system", "content": system}), json!({"role": "user", "content": last})]
}

#[tokio::test]
async fn a_repeated_prefix_is_a_cache_hit_in_usage_and_time_to_first_token() {
    let mock = common::mock(cached_profile()).await;
    let mut times = Vec::new();
    let mut usages = Vec::new();
    for q in ["first question", "second question"] {
        let body = json!({"model": "m", "messages": long_conversation(q), "stream": true, "stream_options": {"include_usage": true}});
        let t = std::time::Instant::now();
        let (_, _, text) = post(&mock, "/v1/chat/completions", &body, &[]).await;
        times.push(t.elapsed());
        let usage = common::sse_data(&text)
            .iter()
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .find(|v| v["usage"].is_object())
            .unwrap()["usage"]
            .clone();
        usages.push(usage);
    }
    assert_eq!(usages[0]["prompt_tokens_details"]["cached_tokens"], 0);
    let cached = usages[1]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    let prompt = usages[1]["prompt_tokens"].as_u64().unwrap();
    assert!(cached >= 256 && cached < prompt && cached % 64 == 0, "{cached} of {prompt}");
    assert!(times[1] < times[0], "a hit is faster: {times:?}");
    let log = mock.attempts();
    assert_eq!((log[0].cached_tokens, log[1].cached_tokens), (0, cached as u32));
    assert_eq!(log[1].prompt_tokens, prompt as u32);

    // The same conversation through Messages reports its cache read in Anthropic's fields.
    let body = json!({"model": "claude-x", "max_tokens": 20, "system": "You are a careful assistant. ".repeat(120), "messages": [{"role": "user", "content": "a"}]});
    post(&mock, "/v1/messages", &body, &[]).await;
    let mut body = body;
    body["messages"][0]["content"] = json!("b");
    body["stream"] = json!(true);
    let (_, _, text) = post(&mock, "/v1/messages", &body, &[]).await;
    let start = events(&text).into_iter().find(|(n, _)| n == "message_start").unwrap().1;
    assert!(start["message"]["usage"]["cache_read_input_tokens"].as_u64().unwrap() >= 256);
}

/// Block `i`: 2032 ASCII characters, exactly 512 tokens of prefix as one message (the mock's
/// estimate: ceil(characters / 4) + 4 a message, + 3 a prompt).
fn block(i: usize) -> String {
    let mut text = format!("block {i:04}: ").repeat(200);
    text.truncate(2032);
    text
}

/// A request on `path` of one user message per block.
fn blocks_request(path: &str, ids: impl IntoIterator<Item = usize>) -> Value {
    let messages: Vec<Value> = ids.into_iter().map(|i| json!({"role": "user", "content": block(i)})).collect();
    match path {
        "/v1/messages" => json!({"model": "claude-x", "max_tokens": 20, "messages": messages}),
        "/v1/responses" => json!({"model": "m", "input": messages}),
        _ => json!({"model": "m", "messages": messages}),
    }
}

/// `(prompt tokens, cached tokens)` as each API's usage reports them.
fn cache_usage(path: &str, text: &str) -> (u64, u64) {
    let u = serde_json::from_str::<Value>(text).unwrap()["usage"].clone();
    let n = |v: &Value| v.as_u64().unwrap();
    match path {
        "/v1/messages" => {
            let cached = n(&u["cache_read_input_tokens"]);
            (n(&u["input_tokens"]) + cached + n(&u["cache_creation_input_tokens"]), cached)
        }
        "/v1/responses" => (n(&u["input_tokens"]), n(&u["input_tokens_details"]["cached_tokens"])),
        _ => (n(&u["prompt_tokens"]), n(&u["prompt_tokens_details"]["cached_tokens"])),
    }
}

#[tokio::test]
async fn prompts_sharing_12_of_14_blocks_read_exactly_12_blocks_from_the_cache() {
    let ttft = Duration::from_millis(100);
    for path in ["/v1/chat/completions", "/v1/messages", "/v1/responses"] {
        let mut p = Profile::fixed(ttft, 8);
        p.prompt_cache = Some(PromptCache { block_tokens: 512, ..PromptCache::default() });
        let mock = common::mock(p).await;
        let (_, _, first) = post(&mock, path, &blocks_request(path, 0..14), &[]).await;
        let (_, _, second) = post(&mock, path, &blocks_request(path, (0..12).chain([100, 101])), &[]).await;
        assert_eq!(cache_usage(path, &first), (14 * 512 + 3, 0), "{path}: {first}");
        assert_eq!(cache_usage(path, &second), (14 * 512 + 3, 12 * 512), "{path}: {second}");
        let log = mock.attempts();
        assert_eq!((log[0].cached_tokens, log[1].cached_tokens), (0, 6144), "{path}");
        // The constant ttft falls by prefill_share × cached / prompt: 100 ms × (1 − 0.5 × 6144 / 7171).
        let expected = ttft.mul_f64(1.0 - 0.5 * 6144.0 / 7171.0);
        let took = |i: usize| Duration::from_micros(log[i].ttft_us.unwrap());
        assert!(took(0) >= ttft && took(0) < ttft + Duration::from_millis(150), "{path}: {:?}", took(0));
        assert!(took(1) >= expected && took(1) < expected + Duration::from_millis(150), "{path}: {:?}", took(1));
    }
}

#[tokio::test]
async fn a_ttl_expiry_on_prompt_caches_empties_them_at_its_instant_and_they_fill_again() {
    let cache = PromptCache { min_tokens: 64, block_tokens: 64, ..PromptCache::default() };
    let mock = common::mock(Profile { prompt_cache: Some(cache), ..Profile::default() }).await;
    let conversation = |c: usize| {
        let system = format!("You are assistant {c}. ").repeat(20);
        json!({"model": "m", "messages": [{"role": "system", "content": system}, {"role": "user", "content": "go on"}]})
    };
    // One client: a new one per request costs more than the request.
    let (http, url) = (common::http(), format!("{}/v1/chat/completions", mock.uri()));
    let send_all = || async {
        for c in 0..10 {
            let resp = http.post(&url).json(&conversation(c)).send().await.unwrap();
            assert_eq!(resp.status(), 200);
            resp.bytes().await.unwrap();
        }
    };
    for _ in 0..20 {
        send_all().await;
    }
    let before = mock.attempts();
    let hits = before.iter().filter(|a| a.cached_tokens > 0).count();
    assert_eq!(hits, 190, "every conversation hits but its first time: 95 %");
    // The window starts now and ends 100 ms later: the instant.
    let mut fault = Fault::ttl_expiry(Duration::from_millis(100)).named("expire");
    if let Fault::TtlExpiry(t) = &mut fault {
        t.prompt_cache = Some(true);
    }
    let group = None;
    mock.add_faults(vec![chaos::scenario::NamedFault { name: "expire".into(), fault, group }]).unwrap();
    let cleared = || mock.events().into_iter().find(|e| e.upstream.is_some());
    assert!(common::eventually(|| cleared().is_some()).await, "{:?}", mock.events());
    let event = cleared().unwrap();
    assert_eq!((event.kind, event.fault.as_deref()), (chaos::mock::EventKind::FlushOk, Some("expire")));
    assert!(event.detail.as_deref().unwrap().contains("prompt cache cleared"), "{event:?}");
    send_all().await;
    send_all().await;
    let after = &mock.attempts()[before.len()..];
    let cached: Vec<bool> = after.iter().map(|a| a.cached_tokens > 0).collect();
    assert_eq!(&cached[..10], [false; 10], "right after the instant: nothing cached");
    assert_eq!(&cached[10..], [true; 10], "and the next turn hits again");
}

#[tokio::test]
async fn a_hit_rate_cache_reports_hits_at_that_rate() {
    let cache = PromptCache { min_tokens: 1, block_tokens: 1, hit_rate: Some(0.5), ..PromptCache::default() };
    let p = Profile { prompt_cache: Some(cache), ..Profile::default() };
    let (mock, http) = (common::mock(p).await, common::http());
    for i in 0..100 {
        let body = common::chat_body(&format!("unique prompt {i}"), false);
        post_on(&http, &mock, "/v1/chat/completions", &body, &[]).await;
    }
    let hits = mock.attempts().iter().filter(|a| a.cached_tokens > 0).count();
    assert!((30..=70).contains(&hits), "{hits} of 100");
}

// ---- Exact output length ------------------------------------------------------------------

/// `(usage output tokens, content deltas or words)` of an answer in any API, whole or streamed.
fn output_of(path: &str, stream: bool, text: &str) -> (u64, usize) {
    if !stream {
        let v: Value = serde_json::from_str(text).unwrap();
        return match path {
            "/v1/messages" => {
                let words = v["content"][0]["text"].as_str().unwrap().split(' ').count();
                (v["usage"]["output_tokens"].as_u64().unwrap(), words)
            }
            "/v1/responses" => {
                let words = v["output"][0]["content"][0]["text"].as_str().unwrap().split(' ').count();
                (v["usage"]["output_tokens"].as_u64().unwrap(), words)
            }
            _ => {
                let words = v["choices"][0]["message"]["content"].as_str().unwrap().split(' ').count();
                (v["usage"]["completion_tokens"].as_u64().unwrap(), words)
            }
        };
    }
    match path {
        "/v1/messages" => {
            let ev = events(text);
            let deltas = ev.iter().filter(|(n, _)| n == "content_block_delta").count();
            let usage = ev.iter().find(|(n, _)| n == "message_delta").unwrap().1["usage"]["output_tokens"].clone();
            (usage.as_u64().unwrap(), deltas)
        }
        "/v1/responses" => {
            let ev = events(text);
            let deltas = ev.iter().filter(|(n, _)| n == "response.output_text.delta").count();
            (ev.last().unwrap().1["response"]["usage"]["output_tokens"].as_u64().unwrap(), deltas)
        }
        _ => {
            let chunks: Vec<Value> = common::sse_data(text)
                .iter()
                .filter(|d| *d != "[DONE]")
                .map(|d| serde_json::from_str(d).unwrap())
                .collect();
            let deltas =
                chunks.iter().filter(|c| c["choices"][0]["delta"]["content"].as_str().is_some_and(|t| !t.is_empty()));
            let usage = chunks.iter().find(|c| c["usage"].is_object()).unwrap()["usage"]["completion_tokens"].clone();
            (usage.as_u64().unwrap(), deltas.count())
        }
    }
}

fn body_for(path: &str, stream: bool, max_tokens: Option<u32>) -> Value {
    let mut body = match path {
        "/v1/messages" => {
            json!({"model": "claude-x", "max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]})
        }
        "/v1/responses" => json!({"model": "m", "input": "hi"}),
        _ => {
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}})
        }
    };
    body["stream"] = json!(stream);
    if let Some(m) = max_tokens {
        body[if path == "/v1/responses" { "max_output_tokens" } else { "max_tokens" }] = json!(m);
    }
    if !stream {
        body.as_object_mut().unwrap().remove("stream_options");
    }
    body
}

#[tokio::test]
async fn the_output_tokens_header_sets_the_answer_length_in_every_api_capped_by_max_tokens() {
    let (mock, http) = (common::mock(Profile::default()).await, common::http());
    assert_eq!(Profile::default().latency.output_tokens, chaos::scenario::Distribution::fixed(16));
    for path in ["/v1/chat/completions", "/v1/messages", "/v1/responses"] {
        for stream in [false, true] {
            let cases: [(Option<&str>, Option<u32>, u64); 6] = [
                (Some("37"), None, 37),
                (Some("37"), Some(10), 10),
                (None, None, 16),
                (Some("0"), None, 16),
                (Some("1000001"), None, 16),
                (Some("many"), None, 16),
            ];
            for (header, max_tokens, want) in cases {
                let headers: Vec<(&str, &str)> = header.map(|h| ("x-chaos-output-tokens", h)).into_iter().collect();
                let (status, _, text) =
                    post_on(&http, &mock, path, &body_for(path, stream, max_tokens), &headers).await;
                assert_eq!(status, 200, "{path} {text}");
                let case = format!("{path} stream={stream} header={header:?} max_tokens={max_tokens:?}");
                assert_eq!(output_of(path, stream, &text), (want, want as usize), "{case}");
                assert_eq!(u64::from(mock.attempts().pop().unwrap().output_tokens), want, "{case}");
            }
        }
    }
}

// ---- Prefill ---------------------------------------------------------------------------------

#[tokio::test]
async fn the_prompts_length_adds_prefill_time_to_the_first_token() {
    let mut p = Profile::default();
    p.latency.prefill_per_1k_tokens = Some(Duration::from_millis(100).into());
    let mock = common::mock(p).await;
    // ceil(4000 / 4) + 4 per message + 3 = 1007 tokens: 100.7 ms; "hi" is 8 tokens: 0.8 ms.
    for (prompt, stream) in [("x".repeat(4000), false), ("hi".into(), false), ("x".repeat(4000), true)] {
        post(&mock, "/v1/chat/completions", &common::chat_body(&prompt, stream), &[]).await;
    }
    let log = mock.attempts();
    let ttft = |i: usize| Duration::from_micros(log[i].ttft_us.unwrap());
    assert_eq!((log[0].prompt_tokens, log[1].prompt_tokens), (1007, 8));
    for long in [ttft(0), ttft(2)] {
        assert!(long >= Duration::from_micros(100_700), "no sooner than its prefill: {long:?}");
        assert!(long < Duration::from_millis(1100), "{long:?}");
    }
    assert!(ttft(1) < ttft(0) - Duration::from_millis(50), "a short prompt is quick: {:?} vs {:?}", ttft(1), ttft(0));
}

// ---- Provider quirks ----------------------------------------------------------------------

#[tokio::test]
async fn quirks_duplicate_frames_null_choices_and_drop_the_usage_chunk() {
    let chat = |quirk| async move {
        let mock = common::mock_with(Profile::default(), vec![Fault::quirk(quirk)]).await;
        let body = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "hi"}]});
        post(&mock, "/v1/chat/completions", &body, &[]).await.2
    };
    let text = chat(QuirkMode::DuplicateFrames).await;
    let data = common::sse_data(&text);
    assert!(data.len() >= 4 && data.chunks(2).all(|p| p.len() == 2 && p[0] == p[1]), "{data:?}");

    let text = chat(QuirkMode::NullChoices).await;
    assert!(text.contains("\"choices\":null"), "{text}");

    let text = chat(QuirkMode::NoUsageChunk).await;
    assert!(text.ends_with("data: [DONE]\n\n") && !text.contains("\"usage\":{"), "{text}");
}

#[tokio::test]
async fn a_tool_call_fault_applies_at_its_probability() {
    let fault = Fault::tool_call(ToolCallMode::InvalidArguments).probability(0.2);
    let (mock, http) = (common::mock_with(tools_profile(0.5, 1), vec![fault]).await, common::http());
    for i in 0..300 {
        let body =
            json!({"model": "m", "messages": [{"role": "user", "content": format!("q{i}")}], "tools": chat_tools()});
        post_on(&http, &mock, "/v1/chat/completions", &body, &[]).await;
    }
    let hit = mock.attempts().iter().filter(|a| a.decision == Decision::ToolCall).count();
    // Binomial(300, 0.2): mean 60, sd 6.9; ±4 sd.
    assert!((33..=87).contains(&hit), "{hit} of 300");
}
