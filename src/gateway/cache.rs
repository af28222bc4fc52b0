//! The gateway's response cache, keyed by normalized prompt, for non-streaming requests.
//!
//! moka does the work: plain `get`/`insert` for the naive policy (every concurrent miss goes
//! upstream — the stampede), and `or_try_insert_with` for the hardened one, which runs one load
//! per key while concurrent callers wait for it (single-flight). Each entry carries its own
//! TTL, jittered so entries written together do not expire together.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::StatusCode;
use hyper::header::HeaderMap;
use rand::RngExt;
use xxhash_rust::xxh3::Xxh3;

use super::config::CacheConfig;

/// A finished answer that can be sent to any number of clients.
#[derive(Clone, Debug)]
pub(super) struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers to pass on (content type, `Retry-After`, `x-fallback`).
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
    /// Upstream attempts it took.
    pub attempts: u32,
    /// The upstream that answered (none: the gateway answered itself).
    pub upstream: Option<usize>,
    /// The request outcome it stands for, for metrics (`ok`, `upstream_error`, `shed`, …).
    pub outcome: &'static str,
    /// How long it may be cached (set when cached).
    pub ttl: Duration,
}

/// Whether an answer came from the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lookup {
    /// Served from the cache (or by waiting for another request's load of the same key).
    Hit,
    /// Fetched upstream for this request.
    Miss,
}

struct PerEntryTtl;

impl moka::Expiry<u64, Reply> for PerEntryTtl {
    fn expire_after_create(&self, _: &u64, value: &Reply, _: Instant) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// The cache.
pub(super) struct ResponseCache {
    cfg: CacheConfig,
    entries: moka::future::Cache<u64, Reply>,
}

impl ResponseCache {
    /// An empty cache.
    pub(super) fn new(cfg: CacheConfig) -> Self {
        let entries = moka::future::Cache::builder().max_capacity(cfg.max_entries).expire_after(PerEntryTtl).build();
        Self { cfg, entries }
    }

    /// The TTL of a new entry: `ttl × (1 ± jitter)`.
    fn ttl(&self) -> Duration {
        let spread =
            if self.cfg.jitter > 0.0 { rand::rng().random_range(-self.cfg.jitter..=self.cfg.jitter) } else { 0.0 };
        crate::duration::mul_saturating(self.cfg.ttl.as_std(), 1.0 + spread)
    }

    /// The cached reply for `key`, or `fetch`'s. Only 200s are cached (`fetch` returns them as
    /// `Ok`); errors are passed on, to every coalesced waiter too.
    pub(super) async fn get_or_fetch(
        &self,
        key: u64,
        fetch: impl Future<Output = Result<Reply, Reply>>,
    ) -> (Reply, Lookup) {
        if self.cfg.single_flight {
            let ttl = self.ttl();
            let load = async move { fetch.await.map(|r| Reply { ttl, ..r }) };
            return match self.entries.entry(key).or_try_insert_with(load).await {
                Ok(entry) => {
                    let lookup = if entry.is_fresh() { Lookup::Miss } else { Lookup::Hit };
                    (entry.into_value(), lookup)
                }
                Err(error) => ((*error).clone(), Lookup::Miss),
            };
        }
        if let Some(hit) = self.entries.get(&key).await {
            return (hit, Lookup::Hit);
        }
        match fetch.await {
            Ok(reply) => {
                let reply = Reply { ttl: self.ttl(), ..reply };
                self.entries.insert(key, reply.clone()).await;
                (reply, Lookup::Miss)
            }
            Err(reply) => (reply, Lookup::Miss),
        }
    }

    /// Drops every entry (the cache admin endpoint, e.g. a `ttl_expiry` flush hook).
    pub(super) fn flush(&self) -> u64 {
        let n = self.entries.entry_count();
        self.entries.invalidate_all();
        n
    }
}

/// The cache key of a chat request: model and messages, roles and texts with whitespace
/// collapsed and case folded, and `[chaos:ID]` correlation markers removed (a request id is
/// not part of the question). `None` when the body is not a chat request.
pub(super) fn key(body: &serde_json::Value) -> Option<u64> {
    let mut h = Xxh3::new();
    h.update(body.get("model")?.as_str()?.as_bytes());
    let mut text = |s: &str| {
        for word in s.split_whitespace().filter(|w| !(w.starts_with("[chaos:") && w.ends_with(']'))) {
            h.update(word.to_lowercase().as_bytes());
            h.update(b" ");
        }
    };
    for m in body.get("messages")?.as_array()? {
        text(m.get("role").and_then(|r| r.as_str()).unwrap_or_default());
        match m.get("content") {
            Some(serde_json::Value::String(s)) => text(s),
            Some(serde_json::Value::Array(parts)) => {
                parts.iter().filter_map(|p| p.get("text")?.as_str()).for_each(&mut text)
            }
            _ => {}
        }
        text("\u{1e}");
    }
    Some(h.digest())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration as D;
    use serde_json::json;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn reply() -> Reply {
        Reply {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            body: Bytes::from_static(b"{}"),
            attempts: 1,
            upstream: Some(0),
            outcome: "ok",
            ttl: Duration::ZERO,
        }
    }

    fn cfg(single_flight: bool) -> CacheConfig {
        CacheConfig { enabled: true, ttl: D::from_secs(60), jitter: 0.1, single_flight, max_entries: 100 }
    }

    #[test]
    fn keys_ignore_case_spacing_and_request_ids_but_not_words() {
        let k =
            |content: &str| key(&json!({"model": "m", "messages": [{"role": "user", "content": content}]})).unwrap();
        assert_eq!(k("Hello  World [chaos:r1]"), k("hello world [chaos:r2]"));
        assert_ne!(k("hello world"), k("hello there"));
        assert_eq!(key(&json!({"messages": []})), None);
    }

    async fn stampede(single_flight: bool) -> u32 {
        let cache = Arc::new(ResponseCache::new(cfg(single_flight)));
        let fetches = Arc::new(AtomicU32::new(0));
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let (cache, fetches) = (cache.clone(), fetches.clone());
                tokio::spawn(async move {
                    cache
                        .get_or_fetch(7, async move {
                            fetches.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            Ok(reply())
                        })
                        .await
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        fetches.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn single_flight_sends_one_fetch_for_fifty_concurrent_misses() {
        assert_eq!(stampede(true).await, 1);
        assert_eq!(stampede(false).await, 50);
    }

    #[test]
    fn ttl_is_jittered_within_its_bounds() {
        let c = ResponseCache::new(cfg(true));
        let ttls: Vec<Duration> = (0..200).map(|_| c.ttl()).collect();
        assert!(ttls.iter().all(|t| (54..=66).contains(&t.as_secs())));
        assert!(ttls.iter().any(|t| *t < Duration::from_secs(59)) && ttls.iter().any(|t| *t > Duration::from_secs(61)));
    }
}
