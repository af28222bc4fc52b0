//! How a run folder's files are read and written when its entries may have been planted by
//! someone else (a folder from a CI artifact, a pull request, a shared disk). Reads go through
//! the ground's one input reader ([`crate::located::input`]): a regular file, a capped
//! document, capped lines. Writes never follow what is at the name: a whole file is written to
//! a fresh temporary file (a random name, created with `O_EXCL`, which never follows a symlink)
//! and renamed over the name, which replaces a symlink instead of writing through it; a log is
//! opened with `O_NOFOLLOW` and must be a regular file with no other name (a hard link) before
//! it is truncated; and `charts/` must be a real folder, or the folder is refused as damaged.
//! `ln -s ~/victim RUN/junit.xml.tmp; chaos check RUN` once overwrote the victim.
//!
//! Layer 1, like its parent: it imports the ground only.

use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use serde::de::DeserializeOwned;

use super::{Damaged, FolderError, RunFile, RunFolder};
use crate::located::input;

/// What a log of a run folder must be, for the refusals.
const LOG: &str = "the NDJSON log chaos writes";

/// What a JSON document of a run folder must be.
const DOCUMENT: &str = "the JSON document chaos writes";

/// Why chaos will not write at `path` (what is there, in words); `None` when nothing is there
/// or a regular file is. Symlinks are not followed.
fn unwritable(path: &Path) -> Option<&'static str> {
    let t = std::fs::symlink_metadata(path).ok()?.file_type();
    if t.is_symlink() {
        Some("a symbolic link (chaos never writes through one)")
    } else if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a folder")
    } else {
        Some("not a regular file")
    }
}

/// Writes `bytes` to `path` atomically: into a fresh temporary file beside it (a random
/// name, created exclusively, so nothing planted is followed or reused), then renamed over
/// `path`, which replaces whatever entry was there (a symlink included) and never writes
/// through it. On failure the temporary file is removed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().map_or_else(|| "file".into(), |n| n.to_string_lossy());
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    // A failed rename hands the file back; dropping it removes it.
    tmp.persist(path).map(drop).map_err(|e| e.error)
}

/// Opens `path` as a new, empty log to append to, creating it. An existing entry must be a
/// regular file with no other name: a symlink is refused (`O_NOFOLLOW`), and so are a FIFO, a
/// device and a hard link to a file elsewhere, before anything is truncated.
pub(super) fn create_log(path: &Path) -> std::io::Result<std::fs::File> {
    let refuse = |what: &str| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{what}, not a regular file; expected {LOG}"))
    };
    if let Some(what) = unwritable(path) {
        return Err(refuse(what));
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(refuse("not a regular file"));
    }
    if meta.nlink() > 1 {
        return Err(refuse("a file with another name too (a hard link)"));
    }
    file.set_len(0)?;
    Ok(file)
}

/// Whether the file at `path` ends in anything but a newline (its last line was cut short);
/// only its last byte is read.
pub(super) fn ends_cut(path: &Path) -> bool {
    let Ok(mut f) = input::open(path, LOG) else { return false };
    if f.seek(std::io::SeekFrom::End(-1)).is_err() {
        return false; // empty
    }
    let mut last = [0u8];
    f.read_exact(&mut last).is_ok() && last[0] != b'\n'
}

impl RunFolder {
    /// What is wrong with the folder's entries, each naming its file and what was expected: a
    /// file of the run that is not a regular file once symlinks are followed (a FIFO would hang
    /// its reader, `/dev/zero` fill memory), or a `charts` that is not a real folder (charts
    /// written through a symlink would land anywhere). Part of [`RunFolder::damage`].
    pub fn entry_problems(&self) -> Vec<String> {
        let mut out: Vec<String> = RunFile::ALL
            .into_iter()
            .filter_map(|f| {
                let what = input::kind_problem(&self.path(f))?;
                Some(format!("{}: {what}, not a regular file; expected the file chaos writes", f.name()))
            })
            .collect();
        if let Some(what) = self.charts_problem() {
            out.push(format!("charts: {what}; expected the folder of charts chaos writes, or none"));
        }
        out
    }

    fn charts_problem(&self) -> Option<&'static str> {
        let t = std::fs::symlink_metadata(self.charts_dir()).ok()?.file_type();
        if t.is_dir() {
            None
        } else if t.is_symlink() {
            Some("a symbolic link, not a folder (chaos never writes through one)")
        } else {
            Some("not a folder")
        }
    }

    /// The chart folder, created when absent; refused as damage when `charts` is anything but
    /// a real folder (a symlink to one included), so nothing is written through it.
    pub fn charts(&self) -> Result<PathBuf, Damaged> {
        let dir = self.charts_dir();
        let created = match std::fs::create_dir(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Some(e.to_string()),
            _ => None,
        };
        let damage = match (created, self.charts_problem()) {
            (_, Some(what)) => format!("charts: {what}; expected the folder of charts chaos writes, or none"),
            (Some(e), None) => format!("charts: cannot be created ({e})"),
            (None, None) => return Ok(dir),
        };
        Err(Damaged { dir: self.dir.clone(), damage: vec![damage] })
    }

    /// A whole-file JSON document (`summary.json`, `resolved.json`) as `T`; `None` when the
    /// file does not exist. It must be a regular file of at most 64 MiB.
    pub fn read_json<T: DeserializeOwned>(&self, file: RunFile) -> Result<Option<T>, FolderError> {
        let path = self.path(file);
        let bytes = match input::read_capped(&path, input::DOCUMENT_CAP, DOCUMENT) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(FolderError::Io { path, source }),
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| FolderError::Format {
            path,
            line: e.line(),
            message: e.to_string(),
        })
    }
}

/// Reads an NDJSON file line by line (each line capped), each record passed through `check`
/// (an error names its line); absent is empty. A last line cut short (the run was killed
/// while writing it) is skipped; any other bad line is an error naming it.
pub(super) fn read_ndjson_checked<T: DeserializeOwned>(
    path: &Path,
    check: impl Fn(&T) -> Result<(), String>,
) -> Result<Vec<T>, FolderError> {
    let io = |source| FolderError::Io { path: path.to_path_buf(), source };
    let lines = match input::Lines::open(path, LOG) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
    };
    let mut out = Vec::new();
    for line in lines {
        let line = line.map_err(io)?;
        if line.bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let format = |message| FolderError::Format { path: path.to_path_buf(), line: line.number, message };
        match serde_json::from_slice(&line.bytes) {
            Ok(v) => {
                check(&v).map_err(format)?;
                out.push(v);
            }
            Err(e) if line.last && e.is_eof() => {}
            Err(e) => return Err(format(e.to_string())),
        }
    }
    Ok(out)
}

/// How `out` overlaps one of `inputs`: `Some((how, i))` when it is input `i` (`"is"`), lies
/// inside it (`"is inside"`) or holds it (`"holds"`), compared as canonical paths (a symlink to
/// an input counts), `out` perhaps not existing yet. Writing there would replace or mix into
/// the inputs' files; `chaos merge` and `chaos compare` both refuse it.
pub fn out_overlap(out: &Path, inputs: &[PathBuf]) -> std::io::Result<Option<(&'static str, usize)>> {
    let o = canonical_out(out)?;
    for (i, input) in inputs.iter().enumerate() {
        let c = input.canonicalize()?;
        let how = if o == c {
            "is"
        } else if o.starts_with(&c) {
            "is inside"
        } else if c.starts_with(&o) {
            "holds"
        } else {
            continue;
        };
        return Ok(Some((how, i)));
    }
    Ok(None)
}

/// `out` as a canonical path, though it (or its parents) may not exist yet: the canonical form
/// of its nearest existing ancestor, then the rest with `.` and `..` applied.
fn canonical_out(out: &Path) -> std::io::Result<PathBuf> {
    let abs = std::path::absolute(out)?;
    let parts: Vec<Component<'_>> = abs.components().collect();
    // The longest prefix that exists (a dangling symlink counts: it is resolved, and fails).
    let exists = (1..=parts.len())
        .rev()
        .find(|&k| std::fs::symlink_metadata(parts[..k].iter().collect::<PathBuf>()).is_ok())
        .unwrap_or(0);
    let mut path = parts[..exists].iter().collect::<PathBuf>().canonicalize()?;
    for c in &parts[exists..] {
        match c {
            Component::ParentDir => {
                path.pop();
            }
            Component::CurDir => {}
            other => path.push(other),
        }
    }
    Ok(path)
}
