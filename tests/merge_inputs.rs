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

fn merge(dirs: &[PathBuf], out: &Path, force: bool) -> Output {
    let mut c = chaos();
    c.arg("merge").args(dirs).arg("--out").arg(out);
    if force {
        c.arg("--force");
    }
    c.output().unwrap()
}

/// Asserts that merging `dirs` into a new `out` exits 2 saying each of `says`, creates no
/// `out` and leaves every input as it was.
fn refused(dirs: &[PathBuf], out: &Path, says: &[&str], case: &str) {
    let before: Vec<_> = dirs.iter().filter(|d| d.is_dir()).map(|d| snapshot(d)).collect();
    let o = merge(dirs, out, false);
    assert_eq!(o.status.code(), Some(2), "{case}: {}", text(&o));
    for s in says {
        assert!(text(&o).contains(s), "{case}: expected {s:?} in: {}", text(&o));
    }
    assert!(!out.exists(), "{case}: nothing is written to --out");
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
