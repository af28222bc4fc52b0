"""The official Python SDKs (openai, anthropic) against the chaos mock.

Run by ci/conformance.sh with MOCK_URL set. Every request carries `x-chaos-request-id` (the
mock logs it on each attempt, so attempts per request can be counted) and, where a fault is
wanted, `x-chaos-fault` (one fault for that request and its retries). Each check prints one
line; a failure names the SDK, its version and the request, and the exit code is 1.
"""

import json
import os
import sys
import urllib.request
import uuid

import anthropic
import openai

BASE = os.environ["MOCK_URL"]
FAILURES = []
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}


def check(sdk, request, ok, detail=""):
    line = f"{sdk}: {request}: {'ok' if ok else 'FAILED'}{' (' + detail + ')' if detail else ''}"
    print(line, flush=True)
    if not ok:
        FAILURES.append(line)


def attempts(tag):
    """The mock's attempt records of one tagged request, in arrival order."""
    with urllib.request.urlopen(f"{BASE}/_chaos/attempts", timeout=10) as r:
        rows = [json.loads(line) for line in r.read().decode().splitlines() if line.strip()]
    return [a for a in rows if a.get("request_id") == tag]


def headers(tag, fault=None):
    h = {"x-chaos-request-id": tag}
    if fault is not None:
        h["x-chaos-fault"] = json.dumps(fault)
    return h


def tag(name):
    return f"py-{name}-{uuid.uuid4().hex[:8]}"


def run(sdk, request, body):
    """Runs one check; an exception the check did not expect is its failure."""
    try:
        body()
    except Exception as e:  # noqa: BLE001 - any exception is a failed check, reported as such
        check(sdk, request, False, f"{type(e).__name__}: {e}")


def openai_checks():
    sdk = f"python openai {openai.__version__}"
    client = openai.OpenAI(base_url=f"{BASE}/v1", api_key="sk-test", max_retries=0)
    user = [{"role": "user", "content": "Say something."}]

    def chat():
        r = client.chat.completions.create(model="gpt-4o-mini", messages=user, extra_headers=headers(tag("chat")))
        text = r.choices[0].message.content
        check(sdk, "chat", bool(text) and r.usage.completion_tokens == len(text.split()), f"{r.usage.completion_tokens} tokens")

    def chat_stream():
        s = client.chat.completions.create(
            model="gpt-4o-mini", messages=user, stream=True, stream_options={"include_usage": True},
            extra_headers=headers(tag("chat-stream")))
        chunks = list(s)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        usage = chunks[-1].usage
        check(sdk, "chat streamed with include_usage", usage is not None and usage.completion_tokens == len(text.split()),
              f"{len(chunks)} chunks, usage {usage.completion_tokens if usage else None}")

    def chat_tools():
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
        with client.chat.completions.stream(
                model="gpt-4o-mini", messages=user, tools=tools, tool_choice="required",
                extra_headers=headers(tag("chat-tools"))) as s:
            final = s.get_final_completion()
        calls = final.choices[0].message.tool_calls or []
        args = [json.loads(c.function.arguments) for c in calls]
        check(sdk, "chat streamed with tool calls (stream helper)",
              len(calls) >= 1 and all(a.get("city") and 1 <= a.get("days", 0) <= 14 for a in args),
              f"{len(calls)} calls")

    def responses():
        r = client.responses.create(model="gpt-4o-mini", input="Say something.", extra_headers=headers(tag("responses")))
        check(sdk, "responses", r.status == "completed" and bool(r.output_text) and r.usage.output_tokens == len(r.output_text.split()),
              f"{r.usage.output_tokens} tokens")

    def responses_stream():
        events = list(client.responses.create(model="gpt-4o-mini", input="Say something.", stream=True,
                                              extra_headers=headers(tag("responses-stream"))))
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        last = events[-1]
        seq = [e.sequence_number for e in events]
        check(sdk, "responses streamed", last.type == "response.completed" and last.response.output_text == text
              and seq == list(range(len(events))), f"{len(events)} events")

    def responses_call():
        tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER, "strict": True}]
        r = client.responses.create(model="gpt-4o-mini", input="Weather?", tools=tools, tool_choice="required",
                                    extra_headers=headers(tag("responses-call")))
        calls = [o for o in r.output if o.type == "function_call"]
        check(sdk, "responses with a function call", len(calls) >= 1 and "city" in json.loads(calls[0].arguments))
        with client.responses.stream(model="gpt-4o-mini", input="Weather?", tools=tools, tool_choice="required",
                                     extra_headers=headers(tag("responses-call-stream"))) as s:
            final = s.get_final_response()
        calls = [o for o in final.output if o.type == "function_call"]
        check(sdk, "responses streamed with a function call (stream helper)",
              len(calls) >= 1 and "city" in json.loads(calls[0].arguments))

    def embeddings():
        r = client.embeddings.create(model="text-embedding-3-small", input="hello", extra_headers=headers(tag("embeddings")))
        check(sdk, "embeddings", len(r.data) == 1 and len(r.data[0].embedding) > 0, f"{len(r.data[0].embedding)} dimensions")

    def refused(name, fault, want, kind):
        t = tag(name)
        try:
            client.with_options(max_retries=2).chat.completions.create(model="gpt-4o-mini", messages=user, extra_headers=headers(t, fault))
            check(sdk, name, False, "the request succeeded")
            return
        except kind:
            pass
        got = attempts(t)
        # These SDKs leave Idempotency-Key unset by default; their retries are told apart by
        # x-stainless-retry-count, which the mock logs.
        keys = sorted({str(a.get("idempotency_key")) for a in got})
        counts = [a.get("stainless_retry_count") for a in got]
        detail = f"{len(got)} attempts, retry counts {counts}, idempotency keys {keys}"
        check(sdk, f"{name}: {want} attempt(s)", len(got) == want, detail)
        if want > 1:
            check(sdk, f"{name}: x-stainless-retry-count 0..{want - 1}", counts == list(range(want)), detail)

    run(sdk, "chat", chat)
    run(sdk, "chat streamed", chat_stream)
    run(sdk, "chat tools", chat_tools)
    run(sdk, "responses", responses)
    run(sdk, "responses streamed", responses_stream)
    run(sdk, "responses call", responses_call)
    run(sdk, "embeddings", embeddings)
    run(sdk, "429 storm", lambda: refused("429 storm, max_retries=2", {"kind": "status", "code": 429, "retry_after": "20ms"}, 3, openai.RateLimitError))
    run(sdk, "503 x-should-retry false", lambda: refused("503 with x-should-retry: false", {"kind": "status", "code": 503, "should_retry": False}, 1, openai.InternalServerError))
    run(sdk, "Retry-After 150", lambda: refused("429 with Retry-After: 150", {"kind": "status", "code": 429, "retry_after": "150s"}, 1, openai.RateLimitError))
    run(sdk, "spend limit", lambda: refused("spend-limit 429", {"kind": "spend_limit"}, 1, openai.RateLimitError))


def anthropic_checks():
    sdk = f"python anthropic {anthropic.__version__}"
    client = anthropic.Anthropic(base_url=BASE, api_key="sk-ant-test", max_retries=0)
    user = [{"role": "user", "content": "Say something."}]
    model = "claude-sonnet-4-5"

    def messages():
        m = client.messages.create(model=model, max_tokens=100, messages=user, extra_headers=headers(tag("messages")))
        text = "".join(b.text for b in m.content if b.type == "text")
        check(sdk, "messages", bool(text) and m.usage.output_tokens == len(text.split()), f"{m.usage.output_tokens} tokens")

    def messages_stream():
        with client.messages.stream(model=model, max_tokens=100, messages=user, extra_headers=headers(tag("messages-stream"))) as s:
            text = "".join(s.text_stream)
            final = s.get_final_message()
        check(sdk, "messages streamed", bool(text) and final.usage.output_tokens == len(text.split()) and final.stop_reason == "end_turn")

    def tool_use():
        tools = [{"name": "get_weather", "input_schema": WEATHER}]
        m = client.messages.create(model=model, max_tokens=200, messages=user, tools=tools, tool_choice={"type": "any"},
                                   extra_headers=headers(tag("tool-use")))
        blocks = [b for b in m.content if b.type == "tool_use"]
        check(sdk, "messages with a tool_use block", m.stop_reason == "tool_use" and len(blocks) >= 1 and "city" in blocks[0].input)
        with client.messages.stream(model=model, max_tokens=200, messages=user, tools=tools, tool_choice={"type": "any"},
                                    extra_headers=headers(tag("tool-use-stream"))) as s:
            final = s.get_final_message()
        blocks = [b for b in final.content if b.type == "tool_use"]
        check(sdk, "messages streamed with a tool_use block", len(blocks) >= 1 and isinstance(blocks[0].input, dict) and "city" in blocks[0].input)

    def refused(name, fault, want):
        t = tag(name)
        try:
            client.with_options(max_retries=2).messages.create(model=model, max_tokens=10, messages=user, extra_headers=headers(t, fault))
            check(sdk, name, False, "the request succeeded")
            return
        except anthropic.APIStatusError:
            pass
        got = attempts(t)
        check(sdk, f"{name}: {want} attempt(s)", len(got) == want, f"{len(got)} attempts")

    run(sdk, "messages", messages)
    run(sdk, "messages streamed", messages_stream)
    run(sdk, "tool use", tool_use)
    run(sdk, "529 storm", lambda: refused("529 storm, max_retries=2", {"kind": "status", "code": 529, "retry_after": "20ms"}, 3))
    run(sdk, "spend limit", lambda: refused("spend-limit 429", {"kind": "spend_limit"}, 1))


openai_checks()
anthropic_checks()
if FAILURES:
    print(f"{len(FAILURES)} Python SDK check(s) failed", file=sys.stderr)
    sys.exit(1)
