//! `chaos merge` refuses what it cannot trust, as a careless or hostile user would hand it:
//! an `--out` that is (or holds, or lies in) an input, a log cut or emptied after the run, the
//! shared mock's folder left out or given twice, a damaged `shard.json`, a garbage line, a
//! symlink loop, a file for a folder, a record stamped past the run. Each is exit 2 naming the
//! folder and the file, with `--out` never created and every input byte for byte as it was.
//! One small sharded run (a shared mock and two workers) is made per test and copied for each
//! case.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

fn chaos() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chaos"));
    c.env("RUST_LOG", "warn");
    c
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// 40 req/s for 2 s straight at the shared mock, with a 429 burst the client retries once.
const SCENARIO: &str = r#"
name = "merge-inputs"
seed = 3
[[upstream]]
name = "primary"
latency = { ttft = { dist = "fixed", value = "20ms" }, inter_token = { dist = "fixed", value = "1ms" }, output_tokens = { dist = "fixed", value = 3 } }
[load]
stream = false
[load.retry]
max_retries = 1
on_status = [429]
[[load.phase]]
name = "steady"
duration = "2s"
rate = 40
[[fault]]
name = "burst"
kind = "status"
code = 429
start = "1s"
duration = "500ms"
"#;

/// A finished sharded run in `root`: `mock`, `w0`, `w1`.
fn sharded_run(root: &Path) -> Vec<PathBuf> {
    let scenario = root.join("s.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let at = humantime::format_rfc3339_millis(SystemTime::now() + Duration::from_secs(4)).to_string();
    let mut mock = chaos()
        .args(["mock", "--scenario"])
        .arg(&scenario)
        .args(["--start-at", &at, "--workers", "2", "--out"])
        .arg(root.join("mock"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(mock.stdout.take().unwrap());
    let mut line = String::new();
    lines.read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").expect("the mock announces its address").to_string();
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    let workers: Vec<_> = (0..2)
        .map(|i| {
            chaos()
                .arg("run")
                .arg(&scenario)
                .args(["--worker", &format!("{i}/2"), "--start-at", &at, "--mock", &url, "--progress", "off", "--out"])
                .arg(root.join(format!("w{i}")))
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut w in workers {
        assert!(w.wait().unwrap().success(), "a worker failed");
    }
    // SIGTERM, so the mock writes its logs and its final shard.json.
    let _ = Command::new("kill").arg("-TERM").arg(mock.id().to_string()).status();
    let _ = mock.wait();
    ["mock", "w0", "w1"].iter().map(|d| root.join(d)).collect()
}

/// Every file under `dir`, by path, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(snapshot(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
}

/// `chaos merge` under a 2 GB address-space limit and a 120 s timeout: a forged number that
/// makes it allocate by what a file says (once 4 GB buffers and a four-billion-entry list)
/// fails the test at once, as an abort or exit 124, instead of eating the machine.
fn merge(dirs: &[PathBuf], out: &Path, force: bool) -> Output {
    let mut c = Command::new("prlimit");
    c.args(["--as=2000000000", "--", "timeout", "120"]).arg(env!("CARGO_BIN_EXE_chaos")).env("RUST_LOG", "warn");
    c.arg("merge").args(dirs).arg("--out").arg(out);
    if force {
        c.arg("--force");
    }
    c.output().unwrap()
}

/// Asserts that merging `dirs` into a new `out` exits 2 saying each of `says`, creates no
/// `out` (nor leaves a staging folder beside it) and leaves every input as it was.
fn refused(dirs: &[PathBuf], out: &Path, says: &[&str], case: &str) {
    let before: Vec<_> = dirs.iter().filter(|d| d.is_dir()).map(|d| snapshot(d)).collect();
    let o = merge(dirs, out, false);
    assert_eq!(o.status.code(), Some(2), "{case}: {}", text(&o));
    for s in says {
        assert!(text(&o).contains(s), "{case}: expected {s:?} in: {}", text(&o));
    }
    assert!(!out.exists(), "{case}: nothing is written to --out");
    let staged = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(".chaos-merge-"))
        .count();
    assert_eq!(staged, 0, "{case}: no staging folder is left beside --out");
    let after: Vec<_> = dirs.iter().filter(|d| d.is_dir()).map(|d| snapshot(d)).collect();
    assert!(before == after, "{case}: the inputs are untouched");
}

/// Rewrites `file` in `dir` with `f` applied to its lines.
fn edit(dir: &Path, file: &str, f: impl FnOnce(&mut Vec<String>)) {
    let p = dir.join(file);
    let mut lines: Vec<String> = std::fs::read_to_string(&p).unwrap_or_default().lines().map(String::from).collect();
    f(&mut lines);
    std::fs::write(&p, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

/// Cuts the last `n` bytes off `file` in `dir` (a line cut mid-way).
fn cut(dir: &Path, file: &str, n: usize) {
    let p = dir.join(file);
    let b = std::fs::read(&p).unwrap();
    std::fs::write(&p, &b[..b.len() - n]).unwrap();
}

#[test]
fn out_may_not_be_an_input_hold_one_or_lie_in_one() {
    let root = tempfile::tempdir().unwrap();
    let dirs = sharded_run(root.path());
    // The merge itself works, and says so.
    let o = merge(&dirs, &root.path().join("merged"), false);
    assert!(o.status.success(), "{}", text(&o));
    let link = root.path().join("link-to-w0");
    std::os::unix::fs::symlink(&dirs[1], &link).unwrap();
    let cases: [(&str, PathBuf, &str); 5] = [
        ("an input, forced", dirs[1].clone(), "is the input"),
        ("a symlink to an input", link.clone(), "is the input"),
        ("inside an input", dirs[1].join("merged"), "is inside the input"),
        ("an input by `..`", dirs[1].join("new").join(".."), "is the input"),
        ("the inputs' parent", root.path().to_path_buf(), "holds the input"),
    ];
    for (case, out, says) in cases {
        let before: Vec<_> = dirs.iter().map(|d| snapshot(d)).collect();
        let o = merge(&dirs, &out, true);
        assert_eq!(o.status.code(), Some(2), "{case}: {}", text(&o));
        assert!(text(&o).contains(says) && text(&o).contains("--out"), "{case}: {}", text(&o));
        let after: Vec<_> = dirs.iter().map(|d| snapshot(d)).collect();
        assert!(before == after, "{case}: every input file is as it was");
        assert!(!dirs[1].join("merged").exists() && !dirs[1].join("new").exists(), "{case}: nothing created");
    }
}

#[test]
fn logs_cut_emptied_or_missing_after_the_run_are_refused_naming_them() {
    let root = tempfile::tempdir().unwrap();
    let dirs = sharded_run(root.path());
    type Damage = fn(&Path);
    // (what, which folder, the damage, what the error names)
    let cases: [(&str, usize, Damage, &[&str]); 9] = [
        ("histograms cut mid-line", 1, |d| cut(d, "histograms.ndjson", 30), &["w0", "histograms.ndjson", "cut short"]),
        (
            "histograms without their last lines",
            2,
            |d| edit(d, "histograms.ndjson", |l| l.truncate(l.len() / 2)),
            &["w1", "histograms.ndjson", "shard.json counts"],
        ),
        ("samples cut mid-line", 1, |d| cut(d, "samples.ndjson", 10), &["w0", "samples.ndjson", "cut short"]),
        (
            "samples without half their lines",
            2,
            |d| edit(d, "samples.ndjson", |l| l.truncate(l.len() / 2)),
            &["w1", "samples.ndjson", "summary.json counts"],
        ),
        (
            "samples gone",
            1,
            |d| std::fs::remove_file(d.join("samples.ndjson")).unwrap(),
            &["w0", "samples.ndjson: missing"],
        ),
        (
            "the mock's attempts cut mid-line",
            0,
            |d| cut(d, "attempts.ndjson", 10),
            &["mock", "attempts.ndjson", "cut short"],
        ),
        (
            "the mock's attempts without half their lines",
            0,
            |d| edit(d, "attempts.ndjson", |l| l.truncate(l.len() / 2)),
            &["mock", "attempts.ndjson", "shard.json counts"],
        ),
        (
            "the mock's attempts gone",
            0,
            |d| std::fs::remove_file(d.join("attempts.ndjson")).unwrap(),
            &["mock", "attempts.ndjson: missing"],
        ),
        // A worker's shard.json from before it counted its lines: the histograms are still
        // checked against its samples.
        (
            "histograms short, uncounted",
            2,
            |d| {
                let mut shard: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(d.join("shard.json")).unwrap()).unwrap();
                shard.as_object_mut().unwrap().remove("histograms");
                std::fs::write(d.join("shard.json"), shard.to_string()).unwrap();
                edit(d, "histograms.ndjson", |l| {
                    l.remove(0);
                });
            },
            &["w1", "histograms.ndjson: its windows count"],
        ),
    ];
    for (n, (case, which, damage, says)) in cases.into_iter().enumerate() {
        let copies: Vec<PathBuf> =
            dirs.iter().map(|d| root.path().join(format!("c{n}")).join(d.file_name().unwrap())).collect();
        for (d, c) in dirs.iter().zip(&copies) {
            copy(d, c);
        }
        damage(&copies[which]);
        refused(&copies, &root.path().join(format!("out{n}")), says, case);
    }
}

#[test]
fn the_shared_mock_is_needed_exactly_once_and_bad_inputs_are_named() {
    let root = tempfile::tempdir().unwrap();
    let dirs = sharded_run(root.path());
    let (mock, w0, w1) = (dirs[0].clone(), dirs[1].clone(), dirs[2].clone());
    let out = root.path().join("out");
    refused(&[w0.clone(), w1.clone()], &out, &["the workers shared a mock", "its folder is not given"], "no mock");
    refused(&[w0.clone(), w1.clone(), mock.clone(), mock.clone()], &out, &["mock: given twice"], "the mock twice");
    let again = root.path().join("mock-again");
    copy(&mock, &again);
    refused(&[w0.clone(), w1.clone(), mock.clone(), again], &out, &["two mock folders"], "a copy of the mock");
    refused(&[w0.clone(), w1.clone(), w1.clone(), mock.clone()], &out, &["w1: given twice"], "a worker twice");

    // Garbage where a record should be, a damaged shard.json, a loop, a file: exit 2, named.
    let bad = root.path().join("bad");
    copy(&w1, &bad);
    edit(&bad, "histograms.ndjson", |l| l[1] = "garbage".into());
    refused(&[w0.clone(), bad.clone(), mock.clone()], &out, &["bad/histograms.ndjson:2"], "a garbage histogram line");
    copy(&w1, &bad);
    std::fs::write(bad.join("shard.json"), "{\"role\": \"worker\", ").unwrap();
    refused(&[w0.clone(), bad.clone(), mock.clone()], &out, &["bad/shard.json"], "a damaged shard.json");
    let looped = root.path().join("loop");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    refused(&[w0.clone(), looped, mock.clone()], &out, &["loop: cannot be read"], "a symlink loop");
    refused(&[w0.clone(), w1.join("shard.json"), mock.clone()], &out, &["shard.json: a file, not a folder"], "a file");
}

#[test]
fn records_stamped_past_the_run_are_refused_with_file_line_and_value() {
    let root = tempfile::tempdir().unwrap();
    let dirs = sharded_run(root.path());
    let set = |field: &'static str, value: u64| {
        move |l: &mut Vec<String>| {
            let mut v: serde_json::Value = serde_json::from_str(&l[2]).unwrap();
            v[field] = value.into();
            l[2] = v.to_string();
        }
    };
    // 10^13 µs is 115 days: not past any run, but far past this one's 2 s.
    for (n, value) in [u64::MAX, 10_000_000_000_000].into_iter().enumerate() {
        let cases: [(usize, &str, &str); 4] = [
            (1, "samples.ndjson", "done_us"),
            (2, "samples.ndjson", "intended_us"),
            (0, "attempts.ndjson", "t_us"),
            (0, "events.ndjson", "t_us"),
        ];
        for (k, (which, file, field)) in cases.into_iter().enumerate() {
            let copies: Vec<PathBuf> =
                dirs.iter().map(|d| root.path().join(format!("c{n}-{k}")).join(d.file_name().unwrap())).collect();
            for (d, c) in dirs.iter().zip(&copies) {
                copy(d, c);
            }
            if file == "events.ndjson" {
                // The mock may have had no event: give it three, the third stamped badly.
                let e = r#"{"t_us":1000,"kind":"fault_added","upstream":null,"fault":"x","detail":null}"#;
                std::fs::write(copies[0].join(file), format!("{e}\n{e}\n{e}\n")).unwrap();
            }
            edit(&copies[which], file, set(field, value));
            let case = format!("{file} {field} = {value}");
            let says = [format!("{file}:3"), format!("{field} = {value}")];
            refused(&copies, &root.path().join(format!("out{n}-{k}")), &[&says[0], &says[1], "past"], &case);
        }
        // A worker's histogram window, in seconds from the load start.
        let copies: Vec<PathBuf> =
            dirs.iter().map(|d| root.path().join(format!("h{n}")).join(d.file_name().unwrap())).collect();
        for (d, c) in dirs.iter().zip(&copies) {
            copy(d, c);
        }
        let seconds = value / 1_000_000;
        edit(&copies[1], "histograms.ndjson", |l| {
            let mut v: serde_json::Value = serde_json::from_str(&l[0]).unwrap();
            v["window"]["t_s"] = seconds.into();
            l[0] = v.to_string();
        });
        let says = format!("histograms.ndjson: a window at t_s = {seconds} is past the run's end");
        refused(&copies, &root.path().join(format!("out-h{n}")), &["w0", &says], "a histogram window past the run");
    }
}

/// Rewrites `file` (a JSON document) in `dir` with `f` applied to it.
fn edit_json(dir: &Path, file: &str, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join(file);
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&p, v.to_string()).unwrap();
}

/// Rewrites the `key` histogram of the stage line in `dir`'s histograms.ndjson with `f`
/// applied to its serialized bytes.
fn edit_stage_histogram(dir: &Path, key: &str, f: impl Fn(Vec<u8>) -> Vec<u8>) {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    edit(dir, "histograms.ndjson", |lines| {
        let at = lines.iter().position(|l| l.starts_with("{\"stage\"")).expect("a stage line");
        let mut v: serde_json::Value = serde_json::from_str(&lines[at]).unwrap();
        let bytes = b64.decode(v["stage"][key].as_str().unwrap()).unwrap();
        v["stage"][key] = b64.encode(f(bytes)).into();
        lines[at] = v.to_string();
    });
}

/// w1's `shard.json` (its counts) as w0's, so a copy of w1's logs in w0 agrees with it.
fn shard_as_w0(c: &[PathBuf]) {
    std::fs::copy(c[2].join("shard.json"), c[1].join("shard.json")).unwrap();
    edit_json(&c[1], "shard.json", |v| v["shard"]["index"] = 0.into());
}

/// HDR V2 + DEFLATE bytes with their inner header's payload length set to `len`.
fn with_payload_len(bytes: Vec<u8>, len: u32) -> Vec<u8> {
    use std::io::{Read as _, Write as _};
    let mut inner = Vec::new();
    flate2::read::ZlibDecoder::new(&bytes[8..]).read_to_end(&mut inner).unwrap();
    inner[4..8].copy_from_slice(&len.to_be_bytes());
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&inner).unwrap();
    let z = z.finish().unwrap();
    let mut out = bytes[..4].to_vec();
    out.extend((z.len() as u32).to_be_bytes());
    out.extend(z);
    out
}

/// The histogram in `bytes` with 2^62 more values of 1 ms.
fn with_huge_count(bytes: Vec<u8>) -> Vec<u8> {
    use hdrhistogram::serialization::Serializer as _;
    let mut h: hdrhistogram::Histogram<u64> =
        hdrhistogram::serialization::Deserializer::new().deserialize(&mut std::io::Cursor::new(bytes)).unwrap();
    h.record_n(1000, 1 << 62).unwrap();
    let mut out = Vec::new();
    hdrhistogram::serialization::V2DeflateSerializer::new().serialize(&h, &mut out).unwrap();
    out
}

/// Every forgery the security review made of a worker's folder — a load end or a record far
/// past the plan, a histogram header claiming 4 GB, counts of 2^62, a shard count of
/// u32::MAX, another worker's samples copied or symlinked in, generator counts of u64::MAX —
/// is exit 2 naming the folder, the file and the field, in bounded memory (see `merge`),
/// with no `--out` (nor a staging folder) left behind. Before, these aborted (4 GB, 9 GB, a
/// four-billion-entry list), panicked after `merged/` was partly written, or merged cleanly
/// into wrong numbers (A 0.8x where the truth was 1.5x; "18446744073709551615 arrivals missed").
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one forged shard per case, each with its expected refusal, over one real sharded run"
)]
fn forged_shards_are_refused_naming_them_in_bounded_memory() {
    let root = tempfile::tempdir().unwrap();
    let dirs = sharded_run(root.path());
    // (what, the damage to the copies mock, w0, w1, what the error names)
    type Forge = fn(&[PathBuf]);
    let cases: [(&str, Forge, &[&str]); 12] = [
        (
            "load_end_us of 1.5e14 in both workers and a sample at 2.9e14",
            |c| {
                for w in &c[1..] {
                    edit_json(w, "shard.json", |v| v["load_end_us"] = 150_000_000_000_000u64.into());
                }
                edit(&c[1], "samples.ndjson", |l| {
                    let last = l.len() - 1;
                    let mut v: serde_json::Value = serde_json::from_str(&l[last]).unwrap();
                    v["done_us"] = 290_000_000_000_000u64.into();
                    l[last] = v.to_string();
                });
            },
            &["w0", "shard.json: load_end_us = 150000000000000: the load ends between its start"],
        ),
        (
            "load_end_us of 3e14 alone",
            |c| edit_json(&c[2], "shard.json", |v| v["load_end_us"] = 300_000_000_000_000u64.into()),
            &["w1", "shard.json: load_end_us = 300000000000000"],
        ),
        (
            "a histogram header claiming 0xFFFFFFF0 payload bytes",
            |c| edit_stage_histogram(&c[1], "latency", |b| with_payload_len(b, 0xFFFF_FFF0)),
            &["w0", "histograms.ndjson:", "says 4294967280 payload bytes"],
        ),
        (
            "counts of 2^62 in both workers' stage latencies",
            |c| {
                for w in &c[1..] {
                    edit_stage_histogram(w, "latency", with_huge_count);
                }
            },
            &["w0", "histograms.ndjson:", "latency holds 4611686018427387", "requests"],
        ),
        (
            "a shard count of u32::MAX in every shard.json",
            |c| {
                for d in c {
                    edit_json(d, "shard.json", |v| v["shard"]["count"] = u32::MAX.into());
                }
            },
            &["2/4294967295, 3/4294967295", "and 4294967283 more (2 worker folder(s) given)"],
        ),
        (
            "w1's samples, histograms, summary and counts copied into w0",
            |c| {
                for f in ["samples.ndjson", "histograms.ndjson", "summary.json"] {
                    std::fs::copy(c[2].join(f), c[1].join(f)).unwrap();
                }
                shard_as_w0(c);
            },
            &["w0", "samples.ndjson:1: request id", "is not worker 0/2's"],
        ),
        (
            "w0's samples a symlink to w1's, its histograms and summary copies",
            |c| {
                std::fs::remove_file(c[1].join("samples.ndjson")).unwrap();
                std::os::unix::fs::symlink(c[2].join("samples.ndjson"), c[1].join("samples.ndjson")).unwrap();
                for f in ["histograms.ndjson", "summary.json"] {
                    std::fs::copy(c[2].join(f), c[1].join(f)).unwrap();
                }
                shard_as_w0(c);
            },
            &["w0", "samples.ndjson:1: request id", "is not worker 0/2's"],
        ),
        (
            "users of u64::MAX",
            |c| edit_json(&c[1], "shard.json", |v| v["users"] = u64::MAX.into()),
            &["w0", "shard.json: users = 18446744073709551615"],
        ),
        (
            "issued of u64::MAX",
            |c| edit_json(&c[1], "shard.json", |v| v["issued"] = u64::MAX.into()),
            &["w0", "shard.json: issued = 18446744073709551615"],
        ),
        (
            "missed of u64::MAX",
            |c| edit_json(&c[2], "shard.json", |v| v["stages"][0]["missed"] = u64::MAX.into()),
            &["w1", "shard.json: stages[0] = {arrivals", "missed 18446744073709551615"],
        ),
        (
            "missed arrivals beyond the plan, counted consistently",
            |c| {
                edit_json(&c[2], "shard.json", |v| {
                    v["stages"][0]["missed"] = 1_000_000u64.into();
                    let arrivals = v["stages"][0]["arrivals"].as_u64().unwrap();
                    v["stages"][0]["arrivals"] = (arrivals + 1_000_000).into();
                })
            },
            &["w1", "shard.json: stages[0]", "at most 260 (the plan's bound)"],
        ),
        (
            "late_start_ms of 1e308",
            |c| edit_json(&c[1], "shard.json", |v| v["late_start_ms"] = 1e308.into()),
            &["w0", "shard.json: late_start_ms = 1e308"],
        ),
    ];
    for (n, (case, forge, says)) in cases.into_iter().enumerate() {
        let copies: Vec<PathBuf> =
            dirs.iter().map(|d| root.path().join(format!("f{n}")).join(d.file_name().unwrap())).collect();
        for (d, c) in dirs.iter().zip(&copies) {
            copy(d, c);
        }
        forge(&copies);
        refused(&copies, &root.path().join(format!("f{n}")).join("merged"), says, case);
    }
}

/// A merge that fails over an earlier merged run (`--force`) leaves that run as it was: the
/// merged files are written beside `--out` and only replace it once everything is done.
#[test]
fn a_failed_merge_with_force_leaves_the_previous_out_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    let dirs = sharded_run(root.path());
    let out = root.path().join("merged");
    let o = merge(&dirs, &out, false);
    assert!(o.status.success(), "{}", text(&o));
    let before = snapshot(&out);
    let copies: Vec<PathBuf> = dirs.iter().map(|d| root.path().join("bad").join(d.file_name().unwrap())).collect();
    for (d, c) in dirs.iter().zip(&copies) {
        copy(d, c);
    }
    for w in &copies[1..] {
        edit_stage_histogram(w, "latency", with_huge_count);
    }
    let o = merge(&copies, &out, true);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(snapshot(&out) == before, "the previous merged run is untouched");
    // And a good merge with --force replaces it.
    let o = merge(&dirs, &out, true);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.join("summary.json").is_file() && out.join("report.md").is_file());
}
