//! In-process cost of the mock's request handler, without sockets: N non-streaming chat
//! completions through `chaos::mock::App` on a single-threaded runtime.
//!
//! Wall time here is noisy; run it under `valgrind --tool=callgrind` for an exact instruction
//! count per request (`ci/bench-handler.sh` does), which is what changes to the hot path are
//! compared by.
//!
//! Usage: bench_handler [N] [FAULTS_FILE]
#![allow(clippy::print_stdout, reason = "a benchmark program reports on stdout")]

use bytes::Bytes;
use chaos::mock::{App, MockOptions};
use chaos::scenario::{Profile, Upstream};
use http_body_util::{BodyExt, Full};

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let faults = std::env::args()
        .nth(2)
        .map(|path| chaos::scenario::load_faults(std::path::Path::new(&path), None).expect("faults file"))
        .unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let upstream = Upstream { name: "bench".into(), listen: None, profile: Profile { ..Profile::default() } };
    let body = Bytes::from_static(br#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]}"#);
    let started = std::time::Instant::now();
    let bytes = rt.block_on(async {
        let app = App::new(&upstream, &MockOptions { faults, ..MockOptions::default() }).expect("app");
        let mut total = 0usize;
        for _ in 0..n {
            let req = hyper::Request::post("/v1/chat/completions")
                .header("content-type", "application/json")
                .body(Full::new(body.clone()))
                .expect("request");
            // A fault may drop the connection (a reset) or end a body early: both count as 0 bytes.
            if let Ok(resp) = app.call(req).await {
                total += resp.into_body().collect().await.map(|c| c.to_bytes().len()).unwrap_or(0);
            }
        }
        total
    });
    let ns = started.elapsed().as_nanos() as f64 / n as f64;
    println!("{n} requests, {bytes} response bytes, {ns:.0} ns/request wall");
}
