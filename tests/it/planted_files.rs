//! Run folders and scenarios whose entries someone else planted (a CI artifact, a pull
//! request, a shared disk): a symlink where chaos writes, a FIFO or `/dev/zero` where it reads,
//! a profile naming a file elsewhere on the machine, a comparison's `--out` inside its inputs.
//! Every command either refuses (exit 2, naming the entry and what was expected, nothing
//! written) or writes only into the folder, never through a link; and every one ends within a
//! bound, whatever it is given.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn chaos() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chaos"));
    c.env("RUST_LOG", "warn");
    c
}

/// Runs `cmd` to its end, killing it (and failing the test) if it has not ended within a
/// generous bound: a FIFO once made these commands wait forever, `/dev/zero` fill memory.
fn bounded(cmd: &mut Command) -> Output {
    let out = tempfile::tempdir().unwrap();
    let (o, e) = (out.path().join("out"), out.path().join("err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{cmd:?} did not end within 120 s: {}", std::fs::read_to_string(&e).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output { status, stdout: std::fs::read(&o).unwrap(), stderr: std::fs::read(&e).unwrap() }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A copy of the committed example's naive run (with its gate) at `dir/name`.
fn example(dir: &Path, name: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/examples/slow-upstream/naive");
    let to = dir.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
    to
}

/// Every entry under `dir` (symlinks as their targets, not followed), with the bytes of files.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let t = std::fs::symlink_metadata(&p).unwrap().file_type();
        if t.is_symlink() {
            out.insert(p.clone(), std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes());
        } else if t.is_dir() {
            out.insert(p.clone(), b"<dir>".to_vec());
            out.extend(tree(&p));
        } else if t.is_file() {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        } else {
            out.insert(p.clone(), b"<special>".to_vec());
        }
    }
    out
}

/// A file outside every folder chaos is given, that no command may write.
fn victim(dir: &Path, name: &str) -> PathBuf {
    let v = dir.join(name);
    std::fs::write(&v, "precious\n").unwrap();
    v
}

/// Puts something at a path (a FIFO, a symlink to a device).
type Plant = fn(&Path);

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

fn assert_intact(victim: &Path, what: &str) {
    assert_eq!(std::fs::read_to_string(victim).unwrap(), "precious\n", "{what}: written through a planted symlink");
}

/// The temporary names chaos used to write next to a file (`junit.xml.tmp`), planted as
/// symlinks to victims: every command that rewrites a file must replace the name it writes,
/// never write through what is there.
#[test]
fn check_report_and_whatif_never_write_through_a_planted_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let run = example(dir.path(), "run");
    let mut victims = Vec::new();
    for name in ["junit.xml", "report.md", "report.html", "summary.json", "whatif.json"] {
        let v = victim(&elsewhere, name);
        std::os::unix::fs::symlink(&v, run.join(format!("{name}.tmp"))).unwrap();
        victims.push(v);
    }
    // A symlink at a name chaos writes is replaced, not followed.
    let at_name = victim(&elsewhere, "at-name");
    std::fs::remove_file(run.join("report.md")).unwrap();
    std::os::unix::fs::symlink(&at_name, run.join("report.md")).unwrap();
    victims.push(at_name);

    // The example has no [[gate]]: a baseline gives `check` something to judge.
    let baseline = example(dir.path(), "baseline");
    let o = bounded(chaos().arg("check").arg(&run).arg("--baseline").arg(&baseline));
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    assert!(std::fs::symlink_metadata(run.join("junit.xml")).unwrap().is_file(), "junit.xml written in the folder");
    let o = bounded(chaos().arg("report").arg(&run));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(std::fs::symlink_metadata(run.join("report.md")).unwrap().is_file(), "the symlink was replaced");
    let o = bounded(chaos().arg("whatif").arg(&run).args(["--policy", "hardened"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for v in &victims {
        assert_intact(v, &v.display().to_string());
    }
    let left: Vec<_> = tree(&run).into_keys().filter(|p| p.to_string_lossy().contains(".tmp.")).collect();
    assert!(left.is_empty(), "no temporary file is left: {left:?}");
}

/// `charts` planted as a symlink to another folder (or as a file): the run folder is refused
/// as damaged, naming `charts`, and nothing is written, in the folder or where it points.
#[test]
fn a_charts_entry_that_is_no_real_folder_refuses_the_folder_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let linked = example(dir.path(), "linked");
    std::os::unix::fs::symlink(&elsewhere, linked.join("charts")).unwrap();
    let file = example(dir.path(), "file");
    std::fs::write(file.join("charts"), "x").unwrap();
    for run in [&linked, &file] {
        let before = tree(run);
        for cmd in ["report", "check", "whatif"] {
            let o = bounded(chaos().arg(cmd).arg(run));
            assert_eq!(o.status.code(), Some(2), "{cmd}: {}", text(&o));
            assert!(text(&o).contains("charts: "), "{cmd}: names charts: {}", text(&o));
            assert_eq!(tree(run), before, "{cmd}: nothing written into {}", run.display());
        }
    }
    // A comparison's --out with `charts` linked elsewhere, and a victim at an old temporary
    // name: refused as damaged, nothing written through either.
    let cmp = dir.path().join("cmp");
    std::fs::create_dir(&cmp).unwrap();
    std::os::unix::fs::symlink(&elsewhere, cmp.join("charts")).unwrap();
    let v = victim(dir.path(), "victim");
    std::os::unix::fs::symlink(&v, cmp.join("comparison.json.tmp")).unwrap();
    let good = example(dir.path(), "good");
    let o = bounded(chaos().arg("compare").arg(&good).arg(&good).arg("--out").arg(&cmp));
    assert_eq!(o.status.code(), Some(2), "compare: {}", text(&o));
    assert!(text(&o).contains("charts: "), "compare: names charts: {}", text(&o));
    assert_intact(&v, "compare");
    assert!(!cmp.join("report.md").exists() && !cmp.join("comparison.json").exists(), "compare wrote nothing");
    assert!(tree(&elsewhere).is_empty(), "no chart written through the symlink");
}

/// `chaos run --out DIR --force` over a folder with planted entries: the names it writes are
/// replaced (a symlink removed, never followed), and `charts -> elsewhere` is removed, not
/// emptied or written into.
#[test]
fn run_force_removes_planted_symlinks_instead_of_writing_through_them() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        "name = \"planted\"\nseed = 7\n[[upstream]]\nname = \"primary\"\nlatency = { ttft = { dist = \"fixed\", value = \"10ms\" }, inter_token = { dist = \"fixed\", value = \"1ms\" }, output_tokens = { dist = \"fixed\", value = 3 } }\n[load]\nstream = false\n[[load.phase]]\nname = \"a\"\nduration = \"300ms\"\nusers = 1\n",
    )
    .unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let kept = victim(&elsewhere, "kept-chart.svg");
    let out = dir.path().join("run");
    std::fs::create_dir(&out).unwrap();
    let mut victims = vec![kept.clone()];
    for name in ["summary.json.tmp", "report.md.tmp", "samples.ndjson", "windows.ndjson"] {
        let v = victim(&elsewhere, name);
        std::os::unix::fs::symlink(&v, out.join(name)).unwrap();
        victims.push(v);
    }
    std::os::unix::fs::symlink(&elsewhere, out.join("charts")).unwrap();
    let o = bounded(chaos().arg("run").arg(&scenario).arg("--out").arg(&out).args(["--force", "--progress", "off"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for v in &victims {
        assert_intact(v, &v.display().to_string());
    }
    let names: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), victims.len(), "nothing added to or removed from the linked folder: {names:?}");
    assert!(std::fs::symlink_metadata(out.join("charts")).unwrap().is_dir(), "charts is the run's own folder");
    assert!(std::fs::symlink_metadata(out.join("samples.ndjson")).unwrap().is_file());
}

/// A log chaos appends to (the mock's attempt log) planted as a symlink or a hard link to a
/// victim: refused before anything is truncated, naming the file.
#[test]
fn an_appended_log_planted_as_a_link_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let sym = victim(&elsewhere, "sym");
    let hard = victim(&elsewhere, "hard");
    for (case, plant) in [("symlink", 0), ("hard link", 1)] {
        let log = dir.path().join(format!("attempts-{plant}.ndjson"));
        if plant == 0 {
            std::os::unix::fs::symlink(&sym, &log).unwrap();
        } else {
            std::fs::hard_link(&hard, &log).unwrap();
        }
        let mut mock = chaos()
            .args(["mock", "--profile", "mock-upstreams/instant.toml", "--attempt-log"])
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = mock.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() > deadline {
                mock.kill().unwrap();
                mock.wait().unwrap();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut mock.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.and_then(|s| s.code()), Some(2), "{case}: the mock refused its attempt log: {err}");
        assert!(err.contains(&log.display().to_string()), "{case}: names the file: {err}");
    }
    assert_intact(&sym, "symlink");
    assert_intact(&hard, "hard link");
}

/// A FIFO (which would block its reader until someone writes) and `/dev/zero` (which would
/// fill memory) as a log and as `summary.json`: every command that reads a run folder exits 2
/// within the bound, naming the file and what it is, and writes nothing.
#[test]
fn a_fifo_or_a_device_in_a_run_folder_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, Plant); 4] = [
        ("events.ndjson", "a FIFO", mkfifo),
        ("events.ndjson", "a character device", |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
        ("summary.json", "a FIFO", mkfifo),
        ("summary.json", "a character device", |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
    ];
    let good = example(dir.path(), "good");
    for (n, (file, what, plant)) in cases.into_iter().enumerate() {
        let run = example(dir.path(), &format!("bad{n}"));
        std::fs::remove_file(run.join(file)).unwrap();
        plant(&run.join(file));
        let before = tree(&run);
        let cmp = dir.path().join(format!("cmp{n}"));
        let runs: [(&str, Command); 4] = [
            ("report", {
                let mut c = chaos();
                c.arg("report").arg(&run);
                c
            }),
            ("check", {
                let mut c = chaos();
                c.arg("check").arg(&run);
                c
            }),
            ("whatif", {
                let mut c = chaos();
                c.arg("whatif").arg(&run);
                c
            }),
            ("compare", {
                let mut c = chaos();
                c.arg("compare").arg(&good).arg(&run).arg("--out").arg(&cmp);
                c
            }),
        ];
        for (cmd, mut c) in runs {
            let o = bounded(&mut c);
            let t = text(&o);
            assert_eq!(o.status.code(), Some(2), "{file} as {what}, {cmd}: {t}");
            assert!(t.contains(file) && t.contains(what), "{file} as {what}, {cmd}: names it: {t}");
            assert_eq!(tree(&run), before, "{file} as {what}, {cmd}: nothing written");
        }
        assert!(!cmp.exists(), "{file} as {what}: no comparison written");
        if file == "summary.json" {
            // As a baseline given as a file.
            let o = bounded(chaos().arg("check").arg(&good).arg("--baseline").arg(run.join(file)));
            assert_eq!(o.status.code(), Some(2), "{file} as {what}, a baseline: {}", text(&o));
            assert!(text(&o).contains(what), "{file} as {what}, a baseline: {}", text(&o));
        }
    }
}

/// A FIFO or `/dev/zero` given as a scenario, a profile a scenario names, or a file to
/// validate: exit 2 within the bound, naming it.
#[test]
fn a_fifo_or_a_device_as_a_scenario_or_profile_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.toml");
    mkfifo(&fifo);
    let zero = dir.path().join("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for (profile, what) in [("fifo.toml", "FIFO"), ("zero.toml", "/dev/zero")] {
        let s = dir.path().join(format!("s-{profile}"));
        std::fs::write(&s, format!("name = \"x\"\n[[upstream]]\nname = \"p\"\nprofile = \"{profile}\"\n")).unwrap();
        let o = bounded(chaos().arg("validate").arg(&s).current_dir(dir.path()));
        assert_eq!(o.status.code(), Some(2), "{what} as a profile: {}", text(&o));
        assert!(text(&o).contains("upstream[0].profile"), "{what} as a profile: located: {}", text(&o));
    }
    for file in [&fifo, &zero] {
        for cmd in [&["validate"][..], &["run", "--dry-run"]] {
            let o = bounded(chaos().args(cmd).arg(file));
            assert_eq!(o.status.code(), Some(2), "{cmd:?} {}: {}", file.display(), text(&o));
            assert!(text(&o).contains("not a regular file"), "{cmd:?} {}: {}", file.display(), text(&o));
        }
    }
}

/// A scenario from a pull request naming `/proc/self/environ`, a secrets file elsewhere, or a
/// symlink to one, as its profile or gateway policy: a located error at the key saying the
/// rule, and not one byte of the file in the output. A profile in the working directory's
/// tree (the shipped scenarios' `../mock-upstreams/`) still reads.
#[test]
fn a_scenario_cannot_make_chaos_read_a_file_outside_its_folder_or_the_working_directory() {
    let root = tempfile::tempdir().unwrap();
    let (work, secrets) = (root.path().join("work"), root.path().join("secrets"));
    let scenarios = work.join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    std::fs::create_dir_all(&secrets).unwrap();
    // Invalid TOML, so an error that showed the file's line would show the secret.
    let secret = secrets.join("token.toml");
    std::fs::write(&secret, "ghp_FILESECRET=1 2\n").unwrap();
    std::os::unix::fs::symlink(&secret, scenarios.join("linked.toml")).unwrap();
    let cases = [
        ("profile", "/proc/self/environ".to_string()),
        ("profile", secret.display().to_string()),
        ("profile", "../../secrets/token.toml".to_string()),
        ("profile", "linked.toml".to_string()),
        ("policy", secret.display().to_string()),
    ];
    for (n, (key, path)) in cases.iter().enumerate() {
        let s = scenarios.join(format!("s{n}.toml"));
        let (upstream, sut) = match *key {
            "profile" => (format!("profile = \"{path}\"\n"), String::new()),
            _ => (String::new(), format!("[sut]\nbuiltin = \"gateway\"\npolicy = \"{path}\"\n")),
        };
        std::fs::write(&s, format!("name = \"x\"\n[[upstream]]\nname = \"p\"\n{upstream}{sut}")).unwrap();
        let o = bounded(chaos().arg("validate").arg(&s).current_dir(&work).env("MY_CI_TOKEN", "ghp_ENVSECRET"));
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{key} = {path}: {t}");
        assert!(!t.contains("SECRET"), "{key} = {path}: the file's bytes are in the output: {t}");
        let at = if *key == "profile" { format!("s{n}.toml:4:") } else { format!("s{n}.toml:6:") };
        assert!(t.contains(&at), "{key} = {path}: located at the key: {t}");
        assert!(t.contains(path.as_str()) && t.contains("inside this file's folder or the working directory"), "{t}");
    }
    // Inside the working directory's tree, outside the scenario's: read.
    std::fs::write(work.join("p.toml"), "name = \"p\"\n").unwrap();
    let s = scenarios.join("ok.toml");
    std::fs::write(&s, "name = \"x\"\n[[upstream]]\nname = \"p\"\nprofile = \"../p.toml\"\n").unwrap();
    let o = bounded(chaos().arg("validate").arg(&s).current_dir(&work));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Run from elsewhere, the same scenario is refused: ../p.toml is in neither tree.
    let o = bounded(chaos().arg("validate").arg(&s).current_dir(&secrets));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// `chaos compare A B --out DIR` with DIR one of the runs, inside one or holding one (also
/// through a symlink): exit 2 naming both, and the runs are left as they were.
#[test]
fn compare_refuses_an_out_that_is_inside_or_holds_a_compared_run() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let (a, b) = (example(&runs, "a"), example(&runs, "b"));
    std::os::unix::fs::symlink(&a, dir.path().join("link")).unwrap();
    let before = tree(&runs);
    for (out, how) in [
        (a.clone(), "is the compared run folder"),
        (a.join("sub"), "is inside the compared run folder"),
        (runs.clone(), "holds the compared run folder"),
        (dir.path().join("link"), "is the compared run folder"),
    ] {
        let o = bounded(chaos().arg("compare").arg(&a).arg(&b).arg("--out").arg(&out));
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "--out {}: {t}", out.display());
        assert!(t.contains(how), "--out {}: {t}", out.display());
        assert_eq!(tree(&runs), before, "--out {}: the runs are untouched", out.display());
    }
}
