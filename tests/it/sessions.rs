//! Production-shaped load end to end, each on a case whose answer is known by construction:
//! a trace replayed row for row on time with its lengths, closed conversations whose turns
//! wait for their answers and grow, an agent whose tool rounds are fixed, retries multiplied
//! across the harness and the SUT, a prompt cache emptied at once and filled again, and
//! Little's law on sessions.

use std::collections::BTreeMap;
use std::path::Path;

use chaos::analysis::Summary;
use chaos::experiment::{self, RunOptions, Stopper};
use chaos::record::{Attempt, Sample, TaskEnd};
use chaos::run_folder::RunFolder;
use chaos::scenario::{Scenario, Source};

struct Run {
    summary: Summary,
    samples: Vec<Sample>,
    attempts: Vec<Attempt>,
}

async fn run_in(dir: &Path, text: &str) -> Run {
    let scenario =
        Scenario::from_source(&Source::new(dir.join("test.toml"), text)).unwrap_or_else(|e| panic!("{}", e.render()));
    let out = dir.join("run");
    let options =
        RunOptions { out: Some(out.clone()), chaos_bin: env!("CARGO_BIN_EXE_chaos").into(), ..RunOptions::default() };
    let summary = experiment::run(&scenario, &options, Stopper::default()).await.expect("run").summary;
    let folder = RunFolder::open(&out);
    Run { summary, samples: folder.samples().unwrap(), attempts: folder.attempts().unwrap() }
}

/// An upstream answering in 2 ms plus 0 per token, with `extra` TOML after it.
fn upstream(extra: &str) -> String {
    format!(
        r#"
[[upstream]]
name = "primary"
latency = {{ ttft = {{ dist = "fixed", value = "2ms" }}, inter_token = {{ dist = "fixed", value = "0ms" }}, output_tokens = {{ dist = "fixed", value = 8 }} }}
{extra}
"#
    )
}

/// Upstream attempts by the request id they carried.
fn by_request(attempts: &[Attempt]) -> BTreeMap<u64, Vec<&Attempt>> {
    let mut out: BTreeMap<u64, Vec<&Attempt>> = BTreeMap::new();
    for a in attempts {
        if let Some(id) = a.request_id.as_deref().and_then(|r| r.strip_prefix('r')).and_then(|r| r.parse().ok()) {
            out.entry(id).or_default().push(a);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_replays_every_row_at_its_offset_with_its_lengths() {
    let dir = tempfile::tempdir().unwrap();
    // 40 rows over 1.97 s, in pairs sent at once then a lull; outputs 1–40 tokens, inputs
    // 100–2,050, the even rows sharing their first block.
    let rows: Vec<(u64, u32, u32)> =
        (0..40u32).map(|i| (u64::from(i / 3 * 150 + if i % 3 == 2 { 20 } else { 0 }), 100 + i * 50, 1 + i)).collect();
    let mut text = String::new();
    for (i, (ms, input, output)) in rows.iter().enumerate() {
        let blocks: Vec<u32> =
            (0..input.div_ceil(512)).map(|b| if b == 0 && i % 2 == 0 { 7 } else { 1000 + i as u32 * 8 + b }).collect();
        text.push_str(&format!(
            "{{\"timestamp\": {ms}, \"input_length\": {input}, \"output_length\": {output}, \"hash_ids\": {blocks:?}}}\n"
        ));
    }
    std::fs::write(dir.path().join("trace.jsonl"), text).unwrap();
    let scenario = format!(
        r#"
name = "replay"
seed = 5
{}
[load]
stream = true
timeout = "5s"
[[load.phase]]
name = "replay"
duration = "3s"
trace = {{ file = "trace.jsonl", format = "mooncake" }}
"#,
        upstream("")
    );
    let r = run_in(dir.path(), &scenario).await;
    assert_eq!(r.samples.len(), 40, "K rows, K requests");
    let t0 = r.summary.load_start_us;
    let mut planned: Vec<u64> = rows.iter().map(|(ms, ..)| ms * 1000).collect();
    planned.sort_unstable();
    let mut intended: Vec<u64> = r.samples.iter().map(|s| s.intended_us - t0).collect();
    intended.sort_unstable();
    assert_eq!(intended, planned, "each row is planned at its own offset");
    let mut lag: Vec<u64> = r.samples.iter().map(|s| s.sent_us - s.intended_us).collect();
    lag.sort_unstable();
    assert!(lag[20] <= 3_000, "median lag {} µs", lag[20]);
    let schedule = r.summary.stages[0].schedule.as_ref().expect("an open stage's schedule");
    assert_eq!(schedule.planned, 40);
    assert_eq!(r.summary.stages[0].trace.as_ref().map(|t| t.file.as_str()), Some("trace.jsonl"));

    // The mock answered each row with the row's output length and counted its input length
    // (plus 3 tokens of chat framing).
    let attempts = by_request(&r.attempts);
    let mut seen: Vec<(u32, u32)> = r
        .samples
        .iter()
        .map(|s| {
            let a = attempts[&s.id][0];
            assert_eq!(s.tokens, a.output_tokens, "the client read what the mock sent");
            (a.prompt_tokens - 3, a.output_tokens)
        })
        .collect();
    seen.sort_unstable();
    let mut want: Vec<(u32, u32)> = rows.iter().map(|&(_, i, o)| (i, o)).collect();
    want.sort_unstable();
    assert_eq!(seen, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_conversations_send_each_turn_after_the_last_answer_with_a_growing_prompt() {
    let dir = tempfile::tempdir().unwrap();
    // 20 users; a conversation is 5 turns 150 ms apart (≈ 0.6 s), so each user's first
    // conversation finishes inside the 1 s phase and its second is cut by the end.
    let scenario = format!(
        r#"
name = "chat"
seed = 9
{}
[load]
stream = true
timeout = "5s"
[load.session]
turns = 5
think = {{ dist = "fixed", value = "150ms" }}
system_tokens = 200
[[load.phase]]
name = "chat"
duration = "1s"
users = 20
"#,
        upstream("")
    );
    let r = run_in(dir.path(), &scenario).await;
    let mut sessions: BTreeMap<u64, Vec<&Sample>> = BTreeMap::new();
    for s in &r.samples {
        sessions.entry(s.session.expect("every sample is a step").session).or_default().push(s);
    }
    let t0 = r.summary.load_start_us;
    let first: Vec<&Vec<&Sample>> = sessions.values().filter(|v| v[0].intended_us - t0 < 50_000).collect();
    assert_eq!(first.len(), 20, "one conversation per user at the start");
    assert_eq!(first.iter().map(|v| v.len()).sum::<usize>(), 100, "20 conversations × 5 turns");
    let attempts = by_request(&r.attempts);
    for steps in &first {
        let mut steps = steps.to_vec();
        steps.sort_by_key(|s| s.session.unwrap().step);
        assert_eq!(steps.iter().map(|s| s.session.unwrap().step).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        assert_eq!(steps[4].session.unwrap().end, Some(TaskEnd::Done));
        assert!(steps[..4].iter().all(|s| s.session.unwrap().end.is_none()));
        for w in steps.windows(2) {
            assert!(w[1].intended_us >= w[0].done_us + 150_000, "a turn waits for the answer and the think time");
            let (a, b) = (attempts[&w[0].id][0].prompt_tokens, attempts[&w[1].id][0].prompt_tokens);
            assert!(b > a + w[0].tokens, "the prompt carries the last answer and a new question: {a} → {b}");
        }
    }
    let x = r.summary.sessions.as_ref().expect("sessions");
    assert_eq!(x.done, 20);
    assert_eq!(x.success_rate, Some(1.0));
    assert_eq!(x.steps_mean, Some(5.0));
    assert_eq!(x.started, x.done + x.unfinished, "the second conversations were cut, not failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_three_tool_rounds_sends_four_requests_per_task() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = format!(
        r#"
name = "agent"
seed = 11
{}
[load]
api = "responses"
stream = true
timeout = "5s"
[load.tools]
names = ["search_docs"]
[load.session]
kind = "agent"
tool_latency = {{ dist = "fixed", value = "50ms" }}
[[load.phase]]
name = "tasks"
duration = "1s"
users = 4
"#,
        upstream("tool_calls = { probability = 1.0, rounds = 3 }")
    );
    let r = run_in(dir.path(), &scenario).await;
    let x = r.summary.sessions.as_ref().expect("sessions");
    assert!(x.done >= 4, "{x:?}");
    assert_eq!((x.steps_mean, x.steps_max, x.success_rate), (Some(4.0), 4, Some(1.0)), "{x:?}");
    let p50 = x.latency_ms.as_ref().unwrap().p50;
    assert!(p50 >= 150.0, "three tool waits of 50 ms: {p50} ms");
    for s in r.samples.iter().filter(|s| s.session.is_some_and(|k| k.end == Some(TaskEnd::Done))) {
        assert_eq!((s.session.unwrap().step, s.tool_calls), (3, 0), "the 4th step answers in text");
    }
    assert!(r.samples.iter().all(|s| s.ttft_us.is_some()), "a stream that only calls a tool has a first token too");
    let calls: u32 = r.samples.iter().filter(|s| s.session.unwrap().step < 3).map(|s| s.tool_calls).sum();
    assert_eq!(calls as usize, r.samples.iter().filter(|s| s.session.unwrap().step < 3).count());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_multiply_across_the_harness_and_the_sut_and_are_split_by_layer() {
    let dir = tempfile::tempdir().unwrap();
    // The naive gateway (immediate retries of everything), retrying twice.
    let naive = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("gateway/naive.toml")).unwrap();
    assert!(naive.contains("max_retries = 3\n"));
    std::fs::write(dir.path().join("retry-twice.toml"), naive.replace("max_retries = 3\n", "max_retries = 2\n"))
        .unwrap();
    // Every attempt is a 429: the SUT tries 3 times, the harness asks twice (retries = 1).
    let scenario = format!(
        r#"
name = "layers"
seed = 13
{}
[sut]
builtin = "gateway"
policy = "retry-twice.toml"
[load]
api = "openai"
timeout = "5s"
[load.tools]
names = ["search_docs"]
[load.session]
kind = "agent"
retries = 1
[[load.phase]]
name = "storm"
duration = "1s"
users = 3
[[fault]]
name = "all-429"
kind = "status"
code = 429
"#,
        upstream("tool_calls = { probability = 1.0, rounds = 3 }")
    );
    let r = run_in(dir.path(), &scenario).await;
    let x = r.summary.sessions.as_ref().expect("sessions");
    assert!(x.failed >= 3 && x.done == 0, "{x:?}");
    assert_eq!(x.attempts.harness_per_step, Some(2.0), "{x:?}");
    assert_eq!(x.attempts.sut_per_harness, Some(3.0), "{x:?}");
    assert_eq!(x.attempts.upstream_per_step, Some(6.0), "3 × 2 per step: {x:?}");
    let per_request = by_request(&r.attempts);
    assert!(r.samples.iter().all(|s| s.attempts == 2 && per_request[&s.id].len() == 6), "{:?}", r.samples[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_cache_expiry_turns_hits_into_full_prefills_and_they_come_back() {
    let dir = tempfile::tempdir().unwrap();
    // 12 conversations, a turn every 1.2 s: each sends at most one request in any second. The
    // system prompt (100 tokens) is below the cache's 200-token minimum and no two
    // conversations open with the same question (~300 tokens), so only a conversation's own earlier turns are ever read: every turn but
    // the first hits, until the cache empties at 4.5 s; the next turn of each misses, and the
    // one after hits again.
    let scenario = format!(
        r#"
name = "expiry"
seed = 17
{}
[load]
stream = true
timeout = "5s"
prompts = {{ count = 5000, words = 200 }}
[load.session]
turns = 50
think = {{ dist = "fixed", value = "1200ms" }}
system_tokens = 100
[[load.phase]]
name = "chat"
duration = "8s"
users = 12
[[fault]]
name = "flush"
kind = "ttl_expiry"
start = "0s"
duration = "4500ms"
prompt_cache = true
"#,
        upstream("prompt_cache = { min_tokens = 200, block_tokens = 1 }")
    );
    let r = run_in(dir.path(), &scenario).await;
    let p = r.summary.prompt_cache.as_ref().expect("prompt cache analysis");
    let e = &p.expiries[0];
    assert!((e.at_s - 4.5).abs() < 0.05, "{e:?}");
    // Before: 4 turns per conversation, the first a miss.
    assert_eq!(e.hit_rate_before, Some(0.75), "{e:?}");
    assert_eq!(e.hit_rate_after, Some(0.0), "{e:?}");
    assert_eq!(e.misses_after, 12, "one full prefill per conversation: {e:?}");
    assert_eq!(e.recovered_after_s, Some(1), "{e:?}");
    assert_eq!(e.cached_share_after, Some(0.0));
    assert!(e.cached_share_before.unwrap() > 0.5, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_and_closed_sessions_match_littles_law() {
    let dir = tempfile::tempdir().unwrap();
    // 8 conversations a second, 3 turns 200 ms apart: each lasts ≈ 0.4 s, so L ≈ 3.2.
    let scenario = format!(
        r#"
name = "little"
seed = 19
{}
[load]
stream = true
timeout = "5s"
[load.session]
turns = 3
think = {{ dist = "fixed", value = "200ms" }}
[[load.phase]]
name = "open"
duration = "5s"
rate = 8.0
arrival = "poisson"
"#,
        upstream("")
    );
    let r = run_in(dir.path(), &scenario).await;
    let c = r.summary.sessions.as_ref().and_then(|x| x.concurrency).expect("concurrency");
    assert!((c.mean_duration_s - 0.41).abs() < 0.05, "{c:?}");
    assert!((c.little - c.measured).abs() <= 0.1 * c.measured, "λW against measured: {c:?}");
    assert!((c.measured - 3.3).abs() < 1.0, "{c:?}");

    // 10 closed users, all starting at once, each holding one conversation at a time: L = 10.
    let closed = scenario
        .replace("rate = 8.0\narrival = \"poisson\"", "users = 10")
        .replace("duration = \"5s\"", "duration = \"3s\"");
    assert!(closed.contains("users = 10"));
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(dir.path(), &closed).await;
    let x = r.summary.sessions.as_ref().expect("sessions");
    // At the plan's end each user's last session is cut once: a user does not start session
    // after session in the last think time.
    assert!(x.unfinished <= 10, "{x:?}");
    let c = x.concurrency.expect("concurrency");
    assert!(c.steady, "{c:?}");
    assert!((c.measured - 10.0).abs() < 0.5, "{c:?}");
    // Closed users that started together start again in waves of up to 10; a window of whole
    // mean durations can still cut one wave short when the durations drift (a busy machine),
    // so the count of starts in it is right to within one wave: 10 of ~50 here.
    assert!((c.little - c.measured).abs() <= 0.25 * c.measured, "λW against measured: {c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_over_speed_finds_the_knee_of_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    // A trace of one request every 100 ms (10 req/s at ×1) against 4 slots of a fixed 100 ms
    // answer (40 req/s): the knee is at ×4, 40 req/s.
    let text: String = (0..600u64)
        .map(|i| format!("{{\"timestamp\": {}, \"input_length\": 20, \"output_length\": 1}}\n", i * 100))
        .collect();
    std::fs::write(dir.path().join("steady.jsonl"), text).unwrap();
    let scenario = r#"
name = "speeds"
seed = 23
[[upstream]]
name = "primary"
latency = { ttft = { dist = "fixed", value = "100ms" }, output_tokens = { dist = "fixed", value = 1 } }
capacity = { slots = 4, queue = 1000 }
[load]
timeout = "5s"
[load.sweep]
speeds = [1, 2, 3, 4, 5, 6]
step = "2s"
warmup = "500ms"
trace = { file = "steady.jsonl" }
"#;
    let r = run_in(dir.path(), scenario).await;
    let steps: Vec<_> = r.summary.stages.iter().filter(|s| s.kind == "step").collect();
    assert_eq!(steps.len(), 6);
    for (st, speed) in steps.iter().zip([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) {
        assert_eq!(st.trace.as_ref().map(|t| t.speed), Some(speed), "{}", st.name);
    }
    let sweep = r.summary.sweep.as_ref().expect("a sweep");
    let k = sweep.knee.as_ref().unwrap_or_else(|| panic!("no knee: {sweep:?}"));
    let (lo, hi) = k.range(1.0).unwrap_or_else(|| panic!("the knee is the last step: {k:?}"));
    assert!(lo <= 40.0 && 40.0 <= hi, "the knee lies in [{lo}, {hi}], not at 40 req/s: {k:?}");
}
