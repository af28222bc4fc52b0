//! The simulated response cache: entries with their expiry and eviction order, as the gateway's
//! cache behaves for the keys a run draws. Plain state; no clock of its own.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy)]
pub(super) struct CacheEntry {
    pub(super) expires_us: u64,
    pub(super) attempts: u32,
    pub(super) tokens: u32,
    pub(super) invalid: bool,
    /// When it was last read or written (its place in the eviction order).
    pub(super) used: u64,
}

/// The response cache: entries with their expiry, and `max_entries` kept by evicting the least
/// recently used. (The gateway's moka cache admits by TinyLFU; for keys drawn uniformly both
/// hold a random `max_entries` of them, and for skewed keys both keep the hot ones.)
#[derive(Debug, Default)]
pub(super) struct Cache {
    entries: BTreeMap<u32, CacheEntry>,
    order: BTreeMap<u64, u32>,
    clock: u64,
}

impl Cache {
    /// The live entry for `key` at `now_us`, marked as used.
    pub(super) fn get(&mut self, key: u32, now_us: u64) -> Option<CacheEntry> {
        let e = self.entries.get(&key).copied()?;
        if e.expires_us <= now_us {
            self.entries.remove(&key);
            self.order.remove(&e.used);
            return None;
        }
        self.touch(key, e.used);
        Some(e)
    }

    fn touch(&mut self, key: u32, old: u64) {
        self.clock += 1;
        self.order.remove(&old);
        self.order.insert(self.clock, key);
        if let Some(e) = self.entries.get_mut(&key) {
            e.used = self.clock;
        }
    }

    pub(super) fn insert(&mut self, key: u32, entry: CacheEntry, max_entries: u64) {
        if let Some(old) = self.entries.insert(key, entry) {
            self.order.remove(&old.used);
        }
        self.touch(key, u64::MAX);
        while self.entries.len() as u64 > max_entries.max(1) {
            let Some((_, victim)) = self.order.pop_first() else { break };
            self.entries.remove(&victim);
        }
    }
}
