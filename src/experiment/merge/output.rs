//! Where a merge writes: a new folder beside `--out` (a random name, created with
//! `create_dir`, which fails rather than reuse anything already there), renamed to `--out`
//! only once the merged run is finished. A merge that fails part-way — a histogram that
//! overflowed a percentile once did, after `merged/` was partly written — leaves no partly
//! written `--out`: its staging folder is removed, and a previous run's files in `--out`
//! (with `--force`) are replaced only at the end.
//!
//! Part of `experiment::merge` (layer 8).

use std::path::{Path, PathBuf};

use super::MergeError;
use crate::run_folder::{CreateError, RunFolder};

/// Refuses an `out` that cannot take the merged run (a file; a folder with files, without
/// `force`), before anything is read or written.
pub(super) fn precheck(out: &Path, force: bool) -> Result<(), MergeError> {
    match std::fs::metadata(out) {
        Ok(m) if !m.is_dir() => Err(CreateError::NotAFolder(out.to_path_buf()).into()),
        Ok(_) if !force && !empty(out)? => Err(CreateError::NotEmpty(out.to_path_buf()).into()),
        _ => Ok(()),
    }
}

fn empty(dir: &Path) -> Result<bool, MergeError> {
    let io = |source| CreateError::Io { path: dir.to_path_buf(), source };
    Ok(std::fs::read_dir(dir).map_err(io)?.next().is_none())
}

/// The folder a merge writes into before it becomes `--out`; removed when dropped before
/// [`Staging::commit`].
pub(super) struct Staging {
    dir: PathBuf,
    out: PathBuf,
    force: bool,
    committed: bool,
}

impl Staging {
    /// A new, empty staging folder beside `out`.
    pub(super) fn new(out: &Path, force: bool) -> Result<Self, MergeError> {
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| MergeError::Create(CreateError::Io { path, source })
        };
        std::fs::create_dir_all(&parent).map_err(io(&parent))?;
        let dir = parent.join(format!(".chaos-merge-{}", crate::listen::guard::random_token()));
        std::fs::create_dir(&dir).map_err(io(&dir))?;
        Ok(Self { dir, out: out.to_path_buf(), force, committed: false })
    }

    /// The staging folder, as a run folder.
    pub(super) fn folder(&self) -> RunFolder {
        RunFolder::open(&self.dir)
    }

    /// Makes the staged run `out`: renamed to it when it is new or empty, else (`--force`)
    /// its previous run's files removed and the staged files moved in.
    pub(super) fn commit(mut self) -> Result<(), MergeError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| MergeError::Write(crate::run_folder::FolderError::Io { path, source })
        };
        let exists = std::fs::metadata(&self.out).is_ok();
        if !exists || empty(&self.out)? {
            std::fs::rename(&self.dir, &self.out).map_err(io(&self.out))?;
        } else {
            RunFolder::create(Some(&self.out), Path::new("."), "", "", self.force)?;
            for entry in std::fs::read_dir(&self.dir).map_err(io(&self.dir))? {
                let from = entry.map_err(io(&self.dir))?.path();
                let to = self.out.join(from.file_name().unwrap_or_default());
                std::fs::rename(&from, &to).map_err(io(&to))?;
            }
            std::fs::remove_dir(&self.dir).map_err(io(&self.dir))?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
