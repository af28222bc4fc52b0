//! The terminal: everything the CLI prints to stdout and stderr (results, tables, errors at
//! exit, the log lines of the tracing subscriber) goes through one writer, [`Visible`], that
//! makes control, bidi and other hidden characters visible (`␛`, `\u202E`) and keeps only
//! line feeds and tabs. Printed text embeds names from scenario files, notes from the room and
//! replies from a mock's control API; an escape sequence among them would otherwise set the
//! window title, move the cursor or erase what was printed, and a bidi override would show
//! one name as another. (indicatif draws its progress bar on stderr itself, with its own
//! escape codes; the names it shows are made visible where its messages are built.)

use std::io::{self, Write};

use crate::markup::visible_lines;

/// A writer that passes text on with every hidden character made visible (see
/// [`crate::markup::visible_lines`]). UTF-8 split across writes is joined first; bytes that
/// are not UTF-8 are written as U+FFFD.
pub struct Visible<W: Write> {
    inner: W,
    /// The start of a character whose remaining bytes have not arrived yet.
    pending: Vec<u8>,
}

impl<W: Write> Visible<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self { inner, pending: Vec::new() }
    }
}

/// Stdout, locked, through [`Visible`].
pub fn stdout() -> Visible<io::StdoutLock<'static>> {
    Visible::new(io::stdout().lock())
}

impl<W: Write> Write for Visible<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let mut text = String::with_capacity(self.pending.len());
        let mut start = 0;
        while start < self.pending.len() {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(s) => {
                    text.push_str(s);
                    start = self.pending.len();
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    text.push_str(std::str::from_utf8(&self.pending[start..start + valid]).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            text.push('\u{fffd}');
                            start += valid + bad;
                        }
                        // A character cut at the end of this write: keep its start for the next.
                        None => {
                            start += valid;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        self.inner.write_all(visible_lines(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for Visible<W> {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.inner.write_all("\u{fffd}".as_bytes());
            let _ = self.inner.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::Visible;

    fn through(parts: &[&[u8]]) -> String {
        let mut out = Vec::new();
        {
            let mut w = Visible::new(&mut out);
            for p in parts {
                w.write_all(p).unwrap();
            }
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escape_sequences_and_bidi_overrides_never_reach_the_terminal() {
        let text =
            through(&["scenario \u{1b}]0;pwned\u{7} x\u{8}\u{8}\r\u{9b}2J \u{202e}cod.exe\nnext\tcol\n".as_bytes()]);
        assert_eq!(text, "scenario ␛]0;pwned␇ x␈␈␍\\u009B2J \\u202Ecod.exe\nnext\tcol\n");
    }

    #[test]
    fn a_character_split_across_writes_is_joined_and_bad_bytes_are_replaced() {
        let bidi = "\u{202e}".as_bytes();
        let emoji = "😀".as_bytes();
        assert_eq!(through(&[&bidi[..1], &bidi[1..], b"a", &emoji[..2], &emoji[2..]]), "\\u202Ea😀");
        assert_eq!(through(&[b"a\xffb", &emoji[..3]]), "a\u{fffd}b\u{fffd}");
    }
}
