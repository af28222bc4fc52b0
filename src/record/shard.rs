//! One process's share of a run that several processes generate together (`chaos run
//! --worker I/N --start-at TIME`, `chaos mock --scenario … --start-at TIME`), and the
//! `shard.json` each of them leaves in its folder so `chaos merge` can check that the folders
//! belong to one run before it joins them.
//!
//! Ground layer: plain data with serde, no I/O; imports nothing from the crate.

use serde::{Deserialize, Serialize};

/// Shard `index` of `count` (0-based): open load takes every `count`-th arrival of the shared
/// seeded schedule starting at `index`; closed load takes every `count`-th user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, from 0.
    pub index: u32,
    /// How many shards share the load.
    pub count: u32,
}

impl Shard {
    /// The whole load, one process.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Shard `index` of `count`, if `index < count`.
    pub fn new(index: u32, count: u32) -> Option<Self> {
        (count > 0 && index < count).then_some(Self { index, count })
    }

    /// Whether this is one share of several.
    pub fn is_partial(self) -> bool {
        self.count > 1
    }

    /// Whether the `k`-th item (arrival or user, from 0) is this shard's.
    pub fn takes(self, k: u64) -> bool {
        k % u64::from(self.count) == u64::from(self.index)
    }

    /// How many of `total` items (users, or items numbered from 0) are this shard's.
    pub fn share(self, total: u64) -> u64 {
        let (n, i) = (u64::from(self.count), u64::from(self.index));
        if total > i { (total - i).div_ceil(n) } else { 0 }
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `I/N` with `0 ≤ I < N`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let expected = || format!("{s:?}: expected I/N with 0 ≤ I < N, e.g. 0/3");
        let (i, n) = s.split_once('/').ok_or_else(expected)?;
        let (i, n) =
            (i.trim().parse::<u32>().map_err(|_| expected())?, n.trim().parse::<u32>().map_err(|_| expected())?);
        Self::new(i, n).ok_or_else(expected)
    }
}

/// What role a folder played in a sharded run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardRole {
    /// A load generator (`chaos run --worker`).
    Worker,
    /// The shared mock upstreams (`chaos mock --scenario --start-at`).
    Mock,
}

/// How one shard's stage went, as its generator counted it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardStage {
    /// This shard's arrivals (open) or requests sent (closed).
    pub arrivals: u64,
    /// Taken by a user.
    pub claimed: u64,
    /// Not taken before the stage ended.
    pub dropped: u64,
    /// Skipped because the shard started after their intended time.
    pub missed: u64,
    /// Most requests in flight at once in this shard.
    pub max_in_flight: u64,
}

/// `shard.json`: who wrote the folder, for which run, and (once finished) what its generator
/// counted. Written when the shard starts and again when it ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardFile {
    /// Worker or mock.
    pub role: ShardRole,
    /// Which share (the mock: `0/N` of the workers it serves, `N` as given).
    pub shard: Shard,
    /// A hash of the scenario as run (its text, time scale and variant).
    pub scenario_hash: String,
    /// The scenario's name.
    pub scenario: String,
    /// The run seed.
    pub seed: u64,
    /// The shared start instant, RFC 3339.
    pub start_at: String,
    /// The load start on the shared run clock, µs (the same in every shard).
    pub t0_us: u64,
    /// How late this shard's generator started past the shared instant, ms (0: on time).
    #[serde(default)]
    pub late_start_ms: f64,
    /// Whether the shard has finished (its files are complete).
    #[serde(default)]
    pub finished: bool,
    /// Why the shard stopped early, if it did.
    #[serde(default)]
    pub abort_reason: Option<String>,
    /// When its load ended on the shared run clock, µs.
    #[serde(default)]
    pub load_end_us: u64,
    /// Goose users this shard ran.
    #[serde(default)]
    pub users: u64,
    /// Requests this shard issued.
    #[serde(default)]
    pub issued: u64,
    /// Samples its consumers could not take.
    #[serde(default)]
    pub lost_samples: u64,
    /// Whether it reached its share of the request limit.
    #[serde(default)]
    pub hit_request_limit: bool,
    /// Per stage, what its generator counted.
    #[serde(default)]
    pub stages: Vec<ShardStage>,
    /// A worker whose upstreams were the shared mock (`chaos run --worker … --mock URL`): its
    /// attempts are in the mock's folder, which `chaos merge` then needs exactly once.
    #[serde(default)]
    pub shared_mock: bool,
    /// Lines its `samples.ndjson` holds, as its writer counted them (absent in folders
    /// written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// Lines its `histograms.ndjson` holds, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histograms: Option<u64>,
    /// Lines its `attempts.ndjson` holds: the attempts its mocks recorded (a worker with its
    /// own mocks, or the shared mock once it has stopped), likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_items_and_users_without_overlap_or_gap() {
        for n in 1..=5u32 {
            let shards: Vec<Shard> = (0..n).map(|i| Shard::new(i, n).unwrap()).collect();
            for k in 0..100u64 {
                assert_eq!(shards.iter().filter(|s| s.takes(k)).count(), 1, "item {k} of {n} shards");
            }
            for total in 0..20u64 {
                assert_eq!(shards.iter().map(|s| s.share(total)).sum::<u64>(), total);
                for s in &shards {
                    assert_eq!(s.share(total), (0..total).filter(|k| s.takes(*k)).count() as u64);
                }
            }
        }
    }

    #[test]
    fn shards_parse_as_index_slash_count() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!("0/1".parse::<Shard>(), Ok(Shard::WHOLE));
        for bad in ["3/3", "1", "a/2", "0/0", "-1/2"] {
            assert!(bad.parse::<Shard>().unwrap_err().contains("expected I/N"), "{bad}");
        }
    }
}
