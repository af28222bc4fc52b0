//! The one way `chaos` opens a file it reads as input: scenarios, profiles, policy and faults
//! files, and every log and JSON document of a run folder. Whatever the path names (a symlink
//! is followed) must be a regular file: a FIFO would hang the reader until someone writes to
//! it, and `/dev/zero` would grow memory until the process is killed. A whole document is read
//! with a size cap, and a log line by line with a cap on each line, so no input makes the
//! harness hold more than the cap at once for one record. Refusals are `std::io::Error`s whose
//! text names what the path is and what was expected; callers add the path.
//!
//! Ground layer: imports nothing from the crate.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest TOML or JSON document read whole (a scenario, a profile, `summary.json`).
pub const DOCUMENT_CAP: u64 = 64 * 1024 * 1024;

/// The longest line of an NDJSON log (a record of `chaos` is a few hundred bytes; a worker's
/// histogram line a few hundred KiB).
pub const LINE_CAP: usize = 16 * 1024 * 1024;

/// What a file system entry is, in words, when it is not a regular file.
fn irregular(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a folder")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// The refusal of an entry that is `what`, where `expected` was wanted.
fn refused(what: &str, expected: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{what}, not a regular file; expected {expected}"))
}

/// Why the entry at `path` cannot be read as input, in words; `None` when it is a regular file
/// (after following symlinks) or absent. Nothing is opened.
pub fn kind_problem(path: &Path) -> Option<&'static str> {
    std::fs::metadata(path).ok().and_then(|m| irregular(m.file_type()))
}

/// Opens `path` for reading. It must be a regular file once symlinks are followed; anything
/// else is refused (kind `InvalidInput`) with what it is and `expected`, before a byte is read.
/// An absent file keeps its `NotFound` error. Opened non-blocking, so a FIFO swapped in after
/// the first look is refused by the second instead of hanging the open.
pub fn open(path: &Path, expected: &str) -> std::io::Result<std::fs::File> {
    if let Some(what) = kind_problem(path) {
        return Err(refused(what, expected));
    }
    let file = std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NONBLOCK).open(path)?;
    match irregular(file.metadata()?.file_type()) {
        Some(what) => Err(refused(what, expected)),
        None => Ok(file),
    }
}

/// Reads the whole file at `path` (see [`open`]), at most `cap` bytes; a longer file is
/// refused (kind `InvalidData`) before more than `cap` bytes are held.
pub fn read_capped(path: &Path, cap: u64, expected: &str) -> std::io::Result<Vec<u8>> {
    let file = open(path, expected)?;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than {} MiB; expected {expected}", cap / (1024 * 1024)),
        ));
    }
    Ok(bytes)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_text(path: &Path, cap: u64, expected: &str) -> std::io::Result<String> {
    String::from_utf8(read_capped(path, cap, expected)?).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8 text; expected {expected}"))
    })
}

/// One line of a log: its bytes without the newline, and whether a newline ended it (the last
/// line of a file cut short has none).
#[derive(Debug)]
pub struct Line {
    /// 1-based.
    pub number: usize,
    /// The bytes, without `\n`.
    pub bytes: Vec<u8>,
    /// Whether `\n` ended it.
    pub ended: bool,
    /// Whether it is the file's last line.
    pub last: bool,
}

/// The lines of a log, each at most [`LINE_CAP`] bytes (a longer one is an `InvalidData`
/// error naming its line), read as they come so memory holds one line at a time.
pub struct Lines {
    reader: BufReader<std::fs::File>,
    number: usize,
    done: bool,
}

impl Lines {
    /// The lines of the log at `path` (see [`open`]).
    pub fn open(path: &Path, expected: &str) -> std::io::Result<Self> {
        Ok(Self { reader: BufReader::new(open(path, expected)?), number: 0, done: false })
    }

    fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        let mut bytes = Vec::new();
        (&mut self.reader).take(LINE_CAP as u64 + 1).read_until(b'\n', &mut bytes)?;
        if bytes.is_empty() {
            return Ok(None);
        }
        self.number += 1;
        let ended = bytes.last() == Some(&b'\n');
        if ended {
            bytes.pop();
        }
        if bytes.len() > LINE_CAP {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("line {} is longer than {} MiB; expected one record per line", self.number, LINE_CAP >> 20),
            ));
        }
        let last = self.reader.fill_buf()?.is_empty();
        Ok(Some(Line { number: self.number, bytes, ended, last }))
    }
}

impl Iterator for Lines {
    type Item = std::io::Result<Line>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let line = self.next_line().transpose();
        if !matches!(line, Some(Ok(_))) {
            self.done = true;
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_and_a_device_are_refused_without_blocking_and_a_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let e = read_capped(&fifo, DOCUMENT_CAP, "a TOML file").unwrap_err();
        assert_eq!(e.to_string(), "a FIFO (named pipe), not a regular file; expected a TOML file");
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let e = Lines::open(&zero, "an NDJSON log").err().unwrap();
        assert!(e.to_string().starts_with("a character device, not a regular file"), "{e}");
        assert_eq!(open(dir.path(), "x").unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(open(&dir.path().join("absent"), "x").unwrap_err().kind(), std::io::ErrorKind::NotFound);
        let file = dir.path().join("f");
        std::fs::write(&file, "abc").unwrap();
        assert_eq!(read_text(&file, 3, "x").unwrap(), "abc");
        assert!(read_capped(&file, 2, "x").unwrap_err().to_string().starts_with("longer than"));
    }

    #[test]
    fn lines_are_capped_and_the_last_one_says_whether_it_was_ended() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        std::fs::write(&p, "a\n\nbc").unwrap();
        let lines: Vec<Line> = Lines::open(&p, "x").unwrap().map(Result::unwrap).collect();
        let got: Vec<_> = lines.iter().map(|l| (l.number, l.bytes.as_slice(), l.ended, l.last)).collect();
        assert_eq!(got, [(1, &b"a"[..], true, false), (2, &b""[..], true, false), (3, &b"bc"[..], false, true)]);
        let long = vec![b'x'; LINE_CAP + 1];
        std::fs::write(&p, [&b"{}\n"[..], &long].concat()).unwrap();
        let mut it = Lines::open(&p, "x").unwrap();
        assert!(it.next().unwrap().is_ok());
        let e = it.next().unwrap().unwrap_err();
        assert!(e.to_string().starts_with("line 2 is longer than 16 MiB"), "{e}");
        assert!(it.next().is_none(), "nothing after an error");
    }
}
