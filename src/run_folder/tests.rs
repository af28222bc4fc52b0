//! Unit tests of the parent module.

use super::*;

#[test]
fn ids_sort_by_time_and_names_are_safe() {
    let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_795_000_000);
    assert_eq!(run_id(t), "20261118T110640Z");
    assert_eq!(slug("slow upstream / game day"), "slow-upstream---game-day");
    assert_eq!(slug("../x"), "x");
}

#[test]
fn same_second_runs_get_their_own_folder_and_writes_are_whole() {
    let root = tempfile::tempdir().unwrap();
    let a = RunFolder::create(None, root.path(), "s", "ID", false).unwrap();
    let b = RunFolder::create(None, root.path(), "s", "ID", false).unwrap();
    assert_ne!(a, b);
    assert!(b.dir().ends_with("s/ID-2"));
    a.write_json(RunFile::Summary, &serde_json::json!({"x": 1})).unwrap();
    assert_eq!(std::fs::read_to_string(a.path(RunFile::Summary)).unwrap(), "{\n  \"x\": 1\n}\n");
    assert_eq!(std::fs::read_dir(a.dir()).unwrap().count(), 1, "no temporary file left");
}

#[test]
fn an_out_folder_must_be_new_empty_or_forced_and_a_file_is_named() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("run");
    RunFolder::create(Some(&out), root.path(), "s", "ID", false).unwrap().write(RunFile::Summary, b"{}").unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let e = RunFolder::create(Some(&out), root.path(), "s", "ID", false).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}: not empty", out.display())), "{e}");
    RunFolder::create(Some(&out), root.path(), "s", "ID", true).unwrap();
    assert!(!out.join("summary.json").exists(), "the previous run's files are gone");
    assert!(out.join("notes.txt").exists(), "anything else is left alone");
    let file = root.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let e = RunFolder::create(Some(&file), root.path(), "s", "ID", true).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}: exists and is not a folder", file.display())), "{e}");
}

#[test]
fn a_cut_off_last_line_is_skipped_but_a_bad_line_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let folder = RunFolder::open(dir.path());
    let p = folder.path(RunFile::Windows);
    std::fs::write(
        &p,
        "{\"t_s\":0,\"requests\":1,\"outcomes\":{},\"latency_ms\":null,\"ttft_p95_ms\":null}\n{\"t_s\":1,\"req",
    )
    .unwrap();
    assert_eq!(folder.windows().unwrap().len(), 1);
    std::fs::write(&p, "{\"t_s\":\"x\"}\n{}\n").unwrap();
    let e = folder.windows().unwrap_err().to_string();
    assert!(e.contains("windows.ndjson:1:"), "{e}");
    assert!(folder.samples().unwrap().is_empty(), "an absent log is empty");
}

#[test]
fn what_the_appender_writes_the_reader_reads() {
    let dir = tempfile::tempdir().unwrap();
    let folder = RunFolder::open(dir.path());
    let mut out = folder.appender(RunFile::Samples).unwrap();
    let samples: Vec<Sample> = (0..3).map(|i| Sample::answered(i, i * 10, i * 10 + 5)).collect();
    for s in &samples {
        out.append(s).unwrap();
    }
    out.flush().unwrap();
    assert_eq!(folder.samples().unwrap(), samples);
}

#[test]
fn a_full_disk_leaves_whole_lines_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let folder = RunFolder::open(dir.path());
    let mut out = folder.appender(RunFile::Samples).unwrap();
    let samples: Vec<Sample> = (0..40).map(|i| Sample::answered(i, i * 10, i * 10 + 5)).collect();
    // Room for the first batch and half a line more: the second batch fails part-way.
    for s in &samples[..10] {
        out.append(s).unwrap();
    }
    out.flush().unwrap();
    let size = std::fs::metadata(folder.path(RunFile::Samples)).unwrap().len();
    out.limit = Some(size + 60);
    for s in &samples[10..20] {
        out.append(s).unwrap();
    }
    let e = out.flush().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::StorageFull);
    assert!(e.to_string().contains("samples.ndjson"), "the error names the file: {e}");
    // Cut back to the last whole line: the ten written records, nothing of the failed batch.
    assert_eq!(std::fs::metadata(folder.path(RunFile::Samples)).unwrap().len(), size);
    assert_eq!(folder.samples().unwrap(), samples[..10]);
    assert_eq!(out.lines(), 10, "the lines on disk, not those that failed");
    assert!(folder.damage().is_empty(), "{:?}", folder.damage());
    // Every later record is refused with the same error, and nothing more is written.
    let again = out.append(&samples[30]).unwrap_err();
    assert!(again.to_string().contains("samples.ndjson"), "{again}");
    drop(out);
    assert_eq!(folder.samples().unwrap(), samples[..10]);
}

#[test]
fn an_atomic_write_that_fails_leaves_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("missing-dir").join("summary.json");
    assert!(write_atomic(&target, b"{}").is_err());
    let dir_entries = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(dir_entries, 0);
    // A rename onto a directory fails after the temp file was written: it is removed.
    let onto_dir = dir.path().join("summary.json");
    std::fs::create_dir(&onto_dir).unwrap();
    assert!(write_atomic(&onto_dir, b"{}").is_err());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("summary.json")], "only the directory: no .tmp left");
}

#[test]
fn a_record_past_the_horizon_is_refused_with_its_line_field_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut late = Sample::answered(1, 10, 20);
    late.done_us = 5_000_000;
    let lines = [Sample::answered(0, 10, 20), late];
    let text: String = lines.iter().map(|s| serde_json::to_string(s).unwrap() + "\n").collect();
    std::fs::write(dir.path().join("samples.ndjson"), text).unwrap();
    let folder = RunFolder::open(dir.path());
    assert_eq!(folder.samples().unwrap().len(), 2, "within any run's bound");
    let e = folder.clone().within(4_000_000).samples().unwrap_err().to_string();
    assert!(e.contains("samples.ndjson:2: done_us = 5000000: past the run's end (4000000 µs"), "{e}");
    // The horizon: the end, plus the run's length, plus the margin; never past ten years.
    assert_eq!(run_horizon(1_000_000, 3_000_000), 5_000_000 + HORIZON_MARGIN_US);
    assert_eq!(run_horizon(0, u64::MAX), MAX_RECORD_US);
}

#[test]
fn a_log_short_of_what_its_summary_or_shard_counts_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let folder = RunFolder::open(dir.path());
    std::fs::write(folder.path(RunFile::Summary), r#"{"totals": {"requests": 3, "upstream_attempts": 4}}"#).unwrap();
    let text: String = (0..2).map(|i| serde_json::to_string(&Sample::answered(i, 10, 20)).unwrap() + "\n").collect();
    std::fs::write(folder.path(RunFile::Samples), text).unwrap();
    let d = folder.damage();
    assert!(d.contains(&"samples.ndjson: 2 lines, but summary.json counts 3 requests".to_string()), "{d:?}");
    assert!(d.iter().any(|x| x.starts_with("windows.ndjson: missing")), "{d:?}");
    assert!(d.iter().any(|x| x.starts_with("attempts.ndjson: missing, but summary.json counts 4")), "{d:?}");
    let e = folder.trusted().unwrap_err().to_string();
    assert!(e.contains("damaged run folder (samples.ndjson: 2 lines"), "{e}");
}
