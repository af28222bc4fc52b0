//! What `chaos merge` checks of its command line before it reads a record: every input is a
//! folder, given once; `--out` is none of them, inside none and contains none (compared as
//! canonical paths, so a symlink to an input counts: `--out w0 --force` once deleted the
//! input's files); the folders are one run's shards, every worker present once and finished;
//! and the shared mock's folder is there exactly once when the workers say they shared one.
//!
//! Part of `experiment::merge` (layer 8); it reads only `shard.json` and a summary's flag.

use std::path::{Path, PathBuf};

use super::{MergeError, Shard};
use crate::record::{ShardFile, ShardRole};
use crate::run_folder::RunFolder;

/// What a folder's path must be, for the errors.
const GIVE: &str = "give a folder `chaos run --worker` or `chaos mock --scenario … --out` wrote";

/// The canonical path of each input: each must be a folder, and none may be given twice.
pub(super) fn resolve(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, MergeError> {
    let mut out: Vec<(PathBuf, &PathBuf)> = Vec::new();
    for d in dirs {
        let bad = |what: String| MergeError::Path { path: d.clone(), what };
        let meta = std::fs::metadata(d).map_err(|e| bad(format!("cannot be read ({e}); {GIVE}")))?;
        if !meta.is_dir() {
            return Err(bad(format!("a file, not a folder; {GIVE}")));
        }
        let canonical = d.canonicalize().map_err(|e| bad(format!("cannot be resolved ({e}); {GIVE}")))?;
        if let Some((_, first)) = out.iter().find(|(c, _)| *c == canonical) {
            let also = if *first == d { String::new() } else { format!(" (also as {})", first.display()) };
            return Err(bad(format!(
                "given twice{also}: each folder is merged once, or its records would count twice"
            )));
        }
        out.push((canonical, d));
    }
    Ok(out.into_iter().map(|(c, _)| c).collect())
}

/// Refuses an `out` that is one of the inputs (`canonical`, from [`resolve`]), lies inside one
/// or holds one: the check `chaos compare` shares ([`crate::run_folder::out_overlap`]).
pub(super) fn check_out(out: &Path, dirs: &[PathBuf], canonical: &[PathBuf]) -> Result<(), MergeError> {
    match crate::run_folder::out_overlap(out, canonical) {
        Ok(None) => Ok(()),
        Ok(Some((how, i))) => Err(MergeError::OutIsInput { out: out.to_path_buf(), how, input: dirs[i].clone() }),
        Err(e) => Err(MergeError::Path {
            path: out.to_path_buf(),
            what: format!("--out cannot be resolved ({e}); give a new or empty folder"),
        }),
    }
}

/// Reads every folder's `shard.json` and checks that they hold one whole run; returns the
/// workers by index, then the mocks.
pub(super) fn shards(dirs: &[PathBuf]) -> Result<(Vec<Shard>, Vec<Shard>), MergeError> {
    let mut shards = Vec::new();
    for d in dirs {
        let file = RunFolder::open(d).shard()?.ok_or_else(|| MergeError::NotAShard(d.clone()))?;
        shards.push(Shard { dir: d.clone(), file });
    }
    let (mut workers, mocks): (Vec<Shard>, Vec<Shard>) =
        shards.into_iter().partition(|s| s.file.role == ShardRole::Worker);
    let first = workers.first().ok_or(MergeError::NoWorker)?.file.clone();
    for s in workers.iter().chain(&mocks) {
        let sh = s.file.shard;
        if sh.count == 0 || (s.file.role == ShardRole::Worker && sh.index >= sh.count) {
            return Err(MergeError::Foreign {
                dir: s.dir.clone(),
                what: format!("shard.json: shard {sh}: expected I/N with 0 ≤ I < N, as `--worker I/N` gives"),
            });
        }
        let what = differences(&s.file, &first);
        if !what.is_empty() {
            return Err(MergeError::Foreign {
                dir: s.dir.clone(),
                what: format!("{} (the first worker's folder has the other)", what.join("; ")),
            });
        }
    }
    workers.sort_by_key(|s| s.file.shard.index);
    for pair in workers.windows(2) {
        if pair[0].file.shard.index == pair[1].file.shard.index {
            return Err(MergeError::Duplicate {
                first: pair[0].dir.clone(),
                second: pair[1].dir.clone(),
                shard: pair[0].file.shard.to_string(),
            });
        }
    }
    missing(&workers, first.shard.count)?;
    if let Some(s) = workers.iter().find(|s| !s.file.finished) {
        return Err(MergeError::Unfinished { dir: s.dir.clone(), shard: s.file.shard.to_string() });
    }
    check_mocks(&workers, &mocks)?;
    Ok((workers, mocks))
}

/// Most missing shards one refusal names (a forged count of 4,294,967,295 once built a list
/// of four billion).
const NAMED: u32 = 10;

/// `Ok` when `workers` (sorted by index, no index twice, each below `n`) are all `n` shards;
/// else the first [`NAMED`] missing ones and how many more.
fn missing(workers: &[Shard], n: u32) -> Result<(), MergeError> {
    let given = workers.len() as u32;
    if given >= n {
        return Ok(());
    }
    let mut named: Vec<String> = Vec::new();
    let mut i = 0u32;
    while named.len() < NAMED as usize && i < n {
        if !workers.iter().any(|s| s.file.shard.index == i) {
            named.push(format!("{i}/{n}"));
        }
        i += 1;
    }
    let more = (n - given).saturating_sub(named.len() as u32);
    let missing = if more > 0 {
        format!("{}, and {more} more ({given} worker folder(s) given)", named.join(", "))
    } else {
        named.join(", ")
    };
    Err(MergeError::Missing { missing, count: n })
}

/// How `f` differs from the first worker's `first`, if it does.
fn differences(f: &ShardFile, first: &ShardFile) -> Vec<String> {
    [
        (f.scenario_hash != first.scenario_hash).then(|| {
            format!(
                "scenario {} (hash {}) vs {} (hash {})",
                f.scenario, f.scenario_hash, first.scenario, first.scenario_hash
            )
        }),
        (f.seed != first.seed).then(|| format!("seed {} vs {}", f.seed, first.seed)),
        (f.shard.count != first.shard.count).then(|| format!("{} workers vs {}", f.shard.count, first.shard.count)),
        (f.start_at != first.start_at).then(|| format!("start {} vs {}", f.start_at, first.start_at)),
        (f.t0_us != first.t0_us).then(|| format!("load start t0_us {} vs {}", f.t0_us, first.t0_us)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Whether the worker in `dir` ran against the shared mock: its `shard.json` says so, or (a
/// folder written before it did) its `summary.json`.
fn shared(s: &Shard) -> bool {
    #[derive(serde::Deserialize, Default)]
    struct Summary {
        #[serde(default)]
        generator: Generator,
    }
    #[derive(serde::Deserialize, Default)]
    struct Generator {
        #[serde(default)]
        shared_mock: bool,
    }
    s.file.shared_mock
        || RunFolder::open(&s.dir)
            .read_json::<Summary>(crate::run_folder::RunFile::Summary)
            .ok()
            .flatten()
            .is_some_and(|x| x.generator.shared_mock)
}

/// Exactly one mock folder when the workers shared a mock, none when they ran their own.
fn check_mocks(workers: &[Shard], mocks: &[Shard]) -> Result<(), MergeError> {
    let flags: Vec<bool> = workers.iter().map(shared).collect();
    if let Some(k) = flags.iter().position(|f| *f != flags[0]) {
        let (a, b) = (&workers[0], &workers[k]);
        let says = |f: bool| if f { "the shared mock" } else { "mocks of its own" };
        return Err(MergeError::Foreign {
            dir: b.dir.clone(),
            what: format!(
                "worker {} ran against {}, worker {} ({}) against {}",
                b.file.shard,
                says(flags[k]),
                a.file.shard,
                a.dir.display(),
                says(flags[0])
            ),
        });
    }
    let what = match (flags[0], mocks) {
        (true, [_]) | (false, []) => return Ok(()),
        (true, []) => "the workers shared a mock (their shard.json says so), but its folder is not given: give the folder `chaos mock --scenario … --out DIR` wrote, once; without its attempts the merged run would count no upstream attempt".to_string(),
        (true, [a, b, ..]) => format!(
            "{} and {}: two mock folders, but the workers shared one mock: give its folder once; two would count every attempt twice",
            a.dir.display(),
            b.dir.display()
        ),
        (false, [m, ..]) => format!(
            "{}: a shared mock's folder, but the workers ran mocks of their own (their shard.json says so): leave it out; its attempts are not theirs",
            m.dir.display()
        ),
    };
    Err(MergeError::Mocks(what))
}
