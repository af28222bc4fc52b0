//! The run folder, `reports/<scenario>/<run-id>/`: created before anything starts, written
//! atomically (temporary file, then rename) so a crash never leaves half a `summary.json`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A run id from the wall clock, e.g. `20261129T201530Z`.
pub fn run_id(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string().replace(['-', ':'], "")
}

/// Makes a name safe as one path component.
pub fn slug(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' }).collect();
    let s = s.trim_matches(['-', '.']).to_string();
    if s.is_empty() { "scenario".into() } else { s }
}

/// Creates the run folder: `out` as given, or `<root>/<scenario>/<run-id>` (with `-2`, `-3`…
/// appended when two runs start in the same second).
pub fn create(out: Option<&Path>, root: &Path, scenario: &str, id: &str) -> std::io::Result<PathBuf> {
    if let Some(dir) = out {
        std::fs::create_dir_all(dir)?;
        return Ok(dir.to_path_buf());
    }
    let parent = root.join(slug(scenario));
    std::fs::create_dir_all(&parent)?;
    for n in 1.. {
        let dir = if n == 1 { parent.join(id) } else { parent.join(format!("{id}-{n}")) };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("the loop returns")
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("{}.tmp", path.extension().and_then(|e| e.to_str()).unwrap_or("part")));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Writes `value` as pretty JSON (with a final newline) to `path` atomically.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
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
        let a = create(None, root.path(), "s", "ID").unwrap();
        let b = create(None, root.path(), "s", "ID").unwrap();
        assert_ne!(a, b);
        assert!(b.ends_with("s/ID-2"));
        let f = a.join("summary.json");
        write_json(&f, &serde_json::json!({"x": 1})).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "{\n  \"x\": 1\n}\n");
        assert_eq!(std::fs::read_dir(&a).unwrap().count(), 1, "no temporary file left");
    }
}
