//! Several named upstreams from one process, as `mock-upstreams/pool.toml` describes.

use crate::common;

use std::collections::HashSet;
use std::path::Path;

use chaos::mock::{MockOptions, MockPool};
use chaos::scenario::load_profile;

#[tokio::test]
async fn pool_file_starts_three_named_upstreams_on_their_own_ports() {
    let upstreams = load_profile(Path::new("mock-upstreams/pool.toml")).unwrap();
    let names: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["primary", "secondary", "tertiary"]);
    // Inherited from the referenced profiles: anthropic's 529 overflow, openai's 64 slots.
    assert_eq!(upstreams[1].profile.capacity.overflow.status(), 529);
    assert_eq!(upstreams[2].profile.capacity.slots, Some(64));
    assert_ne!(upstreams[0].profile.latency.ttft, upstreams[2].profile.latency.ttft);

    let mut fast = upstreams.clone();
    for u in &mut fast {
        u.profile = chaos::scenario::Profile { name: u.name.clone(), ..Default::default() };
    }
    let pool = MockPool::start(&fast, MockOptions::default()).await.unwrap();
    let ports: HashSet<u16> = pool.upstreams().iter().map(|u| u.addr().port()).collect();
    assert_eq!(ports.len(), 3);
    for u in pool.upstreams() {
        common::http()
            .post(format!("{}/v1/chat/completions", u.uri()))
            .json(&common::chat_body("x", false))
            .send()
            .await
            .unwrap();
    }
    let seen: Vec<String> = pool.attempts().iter().map(|a| a.upstream.to_string()).collect();
    assert_eq!(seen, ["primary", "secondary", "tertiary"]);
    assert_eq!(pool.get("secondary").unwrap().attempts().len(), 1);
    let metrics = pool.metrics_text();
    for name in ["primary", "secondary", "tertiary"] {
        assert!(metrics.contains(&format!("chaos_mock_requests_total{{upstream=\"{name}\",api=\"chat\"}} 1")));
    }
    pool.shutdown().await.unwrap();
}
