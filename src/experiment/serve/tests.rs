use std::time::Duration;

use super::hub::{Live, Refused, RunView};
use super::metrics::classic;
use super::*;
use crate::clock::Clock;
use crate::record::ObservationKind;
use crate::scenario::NamedFault;

fn view() -> RunView {
    RunView {
        scenario: "s".into(),
        run_id: "r".into(),
        variant: None,
        folder: String::new(),
        total_s: 10.0,
        stages: Vec::new(),
        faults: Vec::new(),
        upstreams: vec!["primary".into()],
        started: false,
        controls: false,
    }
}

#[test]
fn openmetrics_counters_become_classic_text_families() {
    let om = "# HELP x_requests Requests.\n# TYPE x_requests counter\nx_requests_total{a=\"b\"} 3\n\
              # HELP x_lat Latency.\n# TYPE x_lat histogram\n# UNIT x_lat seconds\nx_lat_count 1\n# EOF\n";
    let text = classic(om);
    assert_eq!(
        text,
        "# HELP x_requests_total Requests.\n# TYPE x_requests_total counter\nx_requests_total{a=\"b\"} 3\n\
         # HELP x_lat Latency.\n# TYPE x_lat histogram\nx_lat_count 1\n"
    );
}

#[test]
fn an_observation_is_stamped_on_the_run_clock_from_the_load_start_and_written() {
    let dir = tempfile::tempdir().unwrap();
    let live = Live::default();
    assert!(matches!(live.observe(ObservationKind::Note, "too early", None), Err(Refused::NotNow(_))));
    let clock = Clock::from_epoch(std::time::Instant::now() - Duration::from_secs(5));
    live.begin_run(view(), dir.path(), clock);
    // The load "started" 2 s ago on the run clock.
    let t0 = clock.now_us() - 2_000_000;
    live.load_started(t0, None, None);
    let v = live.observe(ObservationKind::Note, "  pager fired for gateway p99 ", Some("sam")).unwrap();
    assert!((v.t_s - 2.0).abs() < 0.5, "{v:?}");
    assert_eq!((v.text.as_str(), v.author.as_deref(), v.kind), ("pager fired for gateway p99", Some("sam"), "note"));
    assert!(matches!(live.observe(ObservationKind::Note, "   ", None), Err(Refused::Bad(_))));
    let long = "x".repeat(hub::MAX_NOTE_CHARS + 1);
    assert!(matches!(live.observe(ObservationKind::Note, &long, None), Err(Refused::Bad(_))));
    let lines = crate::run_folder::RunFolder::open(dir.path()).observations().unwrap();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].text, "pager fired for gateway p99");
    assert!(lines[0].t_us >= t0 + 2_000_000, "{lines:?}");
    // Once the analysis reads them, no more.
    live.close_notes();
    assert!(matches!(live.observe(ObservationKind::Note, "late", None), Err(Refused::NotNow(_))));
    assert!(live.state_json().contains("pager fired"));
}

#[test]
fn a_stopped_adhoc_fault_keeps_the_window_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let live = Live::default();
    let clock = Clock::start();
    live.begin_run(view(), dir.path(), clock);
    live.load_started(0, Some(hub::MockControl { url: "http://127.0.0.1:1".into(), token: None }), None);
    let fault = crate::faults::Fault::status(429).lasting(Duration::from_secs(30)).after(Duration::from_secs(5));
    live.adhoc_started(NamedFault { name: "adhoc-1-status".into(), fault, group: None }, 5_000_000);
    // Stopped 3 s after it started: it ran 5–8 s, not its planned 30 s.
    assert!(live.adhoc_stopped("adhoc-1-status", 8_000_000));
    assert!(!live.adhoc_stopped("someone-else", 8_000_000));
    let f = &live.adhoc_faults()[0];
    assert_eq!(f.fault.envelope().start.unwrap().as_std(), Duration::from_secs(5));
    assert_eq!(f.fault.envelope().duration.unwrap().as_std(), Duration::from_secs(3));
    assert!(live.state_json().contains("\"end_s\":8.0"), "{}", live.state_json());
}

#[tokio::test]
async fn every_fault_template_is_accepted_by_a_mock_timeline() {
    let mock = crate::mock::MockUpstream::builder().start().await.unwrap();
    for (i, t) in facilitator::templates().into_iter().enumerate() {
        let fault: crate::faults::Fault =
            serde_json::from_value(t.fault.clone()).unwrap_or_else(|e| panic!("{}: {e}", t.label));
        mock.add_faults(vec![NamedFault { name: format!("t{i}"), fault, group: None }])
            .unwrap_or_else(|e| panic!("{}: {e}", t.label));
    }
    let kinds: std::collections::BTreeSet<&str> =
        mock.faults().entries().iter().map(|e| e.fault.kind()).collect::<Vec<_>>().into_iter().collect();
    // Every shipped kind is offered.
    assert_eq!(kinds.len(), 8, "{kinds:?}");
}

#[tokio::test]
async fn off_loopback_needs_a_token_and_then_every_request_carries_it() {
    let open = LiveServer::start(ServeOptions {
        addr: "0.0.0.0:0".parse().unwrap(),
        view_token: None,
        admin_token: "a".into(),
    })
    .await;
    assert!(matches!(open, Err(ServeError::Open(_))), "{open:?}");

    let server = LiveServer::start(ServeOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        view_token: Some("view".into()),
        admin_token: "admin".into(),
    })
    .await
    .unwrap();
    let url = server.url();
    let http = reqwest::Client::new();
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(status(http.get(&url).send().await.unwrap()), 401);
    assert_eq!(status(http.get(format!("{url}?token=view")).send().await.unwrap()), 200);
    assert_eq!(status(http.get(format!("{url}metrics")).bearer_auth("view").send().await.unwrap()), 200);
    // The fault controls need the admin token besides.
    let post = http
        .post(format!("{url}api/faults"))
        .bearer_auth("view")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(status(post), 403);
    let post = http
        .post(format!("{url}api/faults"))
        .bearer_auth("view")
        .header("x-chaos-admin", "admin")
        .header("content-type", "application/json")
        .body(r#"{"kind":"latency","multiplier":2}"#)
        .send()
        .await
        .unwrap();
    // No run is going: nothing to put a fault on.
    assert_eq!(status(post), 409);
    // Only a run's report files are served.
    for path in ["files/../summary.json", "files/charts/../../etc", "files/scenario.toml", "files/charts/.x.svg"] {
        let r = http.get(format!("{url}{path}")).bearer_auth("view").send().await.unwrap();
        assert_eq!(status(r), 404, "{path}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_page_that_connects_gets_the_whole_state_then_the_changes() {
    let dir = tempfile::tempdir().unwrap();
    let server = LiveServer::start(ServeOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        view_token: None,
        admin_token: "a".into(),
    })
    .await
    .unwrap();
    let live = server.live();
    live.begin_run(view(), dir.path(), Clock::start());
    let w = |t| crate::record::WindowSummary {
        t_s: t,
        requests: 3,
        outcomes: [("ok".to_string(), 3)].into(),
        latency_ms: None,
        valid_latency_ms: None,
        ttft_p95_ms: None,
    };
    live.windows(&[w(0), w(1)]);
    let mut stream = reqwest::get(format!("{}events", server.url())).await.unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let mut text = String::new();
    while !text.contains("event: snapshot") || !text.ends_with("\n\n") {
        text.push_str(&String::from_utf8_lossy(&stream.chunk().await.unwrap().unwrap()));
    }
    assert!(text.contains("retry: 2000"), "{text}");
    assert!(text.contains(r#""windows":[{"t_s":0"#), "{text}");
    live.windows(&[w(2)]);
    let mut more = String::new();
    while !more.contains("event: window") {
        more.push_str(&String::from_utf8_lossy(&stream.chunk().await.unwrap().unwrap()));
    }
    assert!(more.contains(r#""t_s":2"#), "{more}");
    server.shutdown().await;
    // The stream ends with the listener.
    while let Ok(Some(_)) = stream.chunk().await {}
}

/// Every page that connects gets the same encoded snapshot — one serialization per change,
/// not one per connection (150 pages after 3000 notes used to cost 150 copies) — and a change
/// makes the next page see it.
#[test]
fn every_page_shares_one_encoded_snapshot_until_the_state_changes() {
    let dir = tempfile::tempdir().unwrap();
    let live = Live::default();
    live.begin_run(view(), dir.path(), Clock::start());
    live.load_started(0, None, None);
    for i in 0..300 {
        live.observe(ObservationKind::Note, &format!("note {i}"), None).unwrap();
    }
    let before = live.encodings();
    let pages: Vec<bytes::Bytes> = (0..150).map(|_| live.snapshot()).collect();
    assert_eq!(live.encodings(), before + 1, "150 pages, one serialization");
    assert!(pages.iter().all(|p| p.as_ptr() == pages[0].as_ptr()), "every page holds the same bytes");
    // /api/state is the same bytes' JSON.
    let state = live.state_bytes();
    assert_eq!(live.encodings(), before + 1);
    assert!(pages[0].starts_with(b"event: snapshot\ndata: {") && pages[0].ends_with(b"}\n\n"));
    assert_eq!(&pages[0][b"event: snapshot\ndata: ".len()..pages[0].len() - 2], &state[..]);
    let v: serde_json::Value = serde_json::from_slice(&state).unwrap();
    assert_eq!(v["observations"].as_array().unwrap().len(), 300);
    live.observe(ObservationKind::Note, "one more", None).unwrap();
    let after = live.snapshot();
    assert_eq!(live.encodings(), before + 2);
    assert!(String::from_utf8_lossy(&after).contains("one more"));
}

/// Notes stop at the cap, with a message saying so; the facilitator's actions still go in.
#[test]
fn notes_are_capped_in_number_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let live = Live::default();
    live.begin_run(view(), dir.path(), Clock::start());
    for i in 0..hub::MAX_NOTES {
        live.observe(ObservationKind::Note, &format!("n{i}"), None).unwrap();
    }
    let Err(Refused::Full(m)) = live.observe(ObservationKind::Note, "one too many", None) else {
        panic!("not refused")
    };
    assert!(m.contains("the observation log is full") && m.contains("1000 notes"), "{m}");
    assert!(live.observe(ObservationKind::Action, "started fault `x`", None).is_ok());
    // By size: 2000-character notes fill 512 KiB after 262.
    let live = Live::default();
    live.begin_run(view(), dir.path(), Clock::start());
    let long = "x".repeat(hub::MAX_NOTE_CHARS);
    let taken = (0..hub::MAX_NOTES).take_while(|_| live.observe(ObservationKind::Note, &long, None).is_ok()).count();
    assert_eq!(taken, hub::MAX_NOTES_BYTES / hub::MAX_NOTE_CHARS);
}

#[test]
fn the_end_of_a_run_shows_its_ten_second_read_first() {
    let dir = tempfile::tempdir().unwrap();
    let live = Live::default();
    live.begin_run(view(), dir.path(), Clock::from_epoch(std::time::Instant::now()));
    let mut s = crate::analysis::Summary::empty(crate::analysis::summary::RunIdentity::for_tests());
    s.story =
        vec!["Fault `slow` (latency ×6) from 8 s to 30 s at 20 req/s (47 s run).".into(), "Objective missed.".into()];
    live.end(&s, None, dir.path());
    let state: serde_json::Value = serde_json::from_str(&live.state_json()).unwrap();
    let headlines = state.pointer("/end/headlines").and_then(|h| h.as_array()).expect("an end view");
    assert_eq!(headlines[0], "Fault `slow` (latency ×6) from 8 s to 30 s at 20 req/s (47 s run).");
    assert_eq!(headlines[1], "Objective missed.");
}
