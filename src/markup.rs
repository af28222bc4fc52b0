//! Text that is shown to people: every output (report.md, report.html, junit.xml, the terminal)
//! embeds names and notes that anyone may have written, so this module is the one place that
//! says how such text is shown safely.
//!
//! - [`visible`] makes hidden characters visible: C0 controls and DEL as control pictures
//!   (`␛`), C1 controls, bidi overrides and isolates and the two noncharacters XML forbids as
//!   `\uXXXX`. An escape sequence then cannot drive a terminal, a name cannot make junit.xml
//!   malformed, and U+202E cannot reorder a name into another one.
//! - The report's inline mini-language: `**strong**`, `*emphasis*`, `` `code` `` spans (fenced
//!   as CommonMark fences them), backslash escapes and relative links. [`code`], [`text`] and
//!   [`link`] embed any string in it exactly; [`parse`] reads it back, so a renderer re-emits
//!   only these forms whatever a string holds (report.md escapes everything else, report.html
//!   escapes HTML). [`plain`] is the same text for a terminal.
//!
//! Written by hand: it is the definition of the mini-language, small, and no crate offers a
//! CommonMark *writer* for inline text. Ground layer: imports nothing from the crate.

/// Whether `c` is hidden or changes how the text around it is shown: a control character
/// (C0, DEL, C1), a bidi formatting character (U+061C, U+200E, U+200F, U+202A–U+202E,
/// U+2066–U+2069) or a noncharacter XML 1.0 forbids (U+FFFE, U+FFFF).
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        || matches!(c, '\u{fffe}' | '\u{ffff}')
}

/// The longest name a file may give (a scenario, phase, variant, upstream or fault), in
/// characters: names are in every output and in paths (a run folder, Kubernetes objects).
pub const MAX_NAME_CHARS: usize = 100;

/// What makes `name` unfit to name something every output shows: more than
/// [`MAX_NAME_CHARS`] characters, or a hidden character (see [`is_hidden`]), said without
/// echoing the name itself; `None` when it is fine.
pub fn name_problem(name: &str) -> Option<String> {
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Some(format!("a name of {chars} characters"));
    }
    name.chars().position(is_hidden).map(|at| {
        let c = name.chars().nth(at).unwrap_or_default();
        format!("a name holding U+{:04X} (a control or bidi character) at character {}", c as u32, at + 1)
    })
}

/// What [`name_problem`] accepts, for error messages.
pub const NAME_EXPECTED: &str =
    "a name of at most 100 characters with no control or bidi character (names are shown in every output)";

/// `s` with every hidden character (see [`is_hidden`]) made visible: C0 controls and DEL as
/// their control pictures (ESC as `␛`), the others as `\uXXXX` (which reads back as the same
/// character where the text is a JSON string).
pub fn visible(s: &str) -> String {
    shown(s, false)
}

/// Like [`visible`], but keeps line feeds and tabs: the lines and columns of terminal output.
pub fn visible_lines(s: &str) -> String {
    shown(s, true)
}

fn shown(s: &str, keep_lines: bool) -> String {
    if !s.chars().any(is_hidden) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' | '\t' if keep_lines => out.push(c),
            '\0'..='\u{1f}' => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}')),
            '\u{7f}' => out.push('\u{2421}'),
            c if is_hidden(c) => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A code span showing `s` exactly: fenced with one backtick more than the longest run of
/// backticks inside, and padded with a space when `s` starts or ends with a backtick or a
/// space (CommonMark strips one space from each side of a padded span, unless it holds only
/// spaces). CommonMark has no empty code span: `""` gives a span of one space.
pub fn code(s: &str) -> String {
    if s.is_empty() {
        return "` `".into();
    }
    let fence = "`".repeat(longest_backtick_run(s) + 1);
    let pad = s.chars().any(|c| c != ' ') && (s.starts_with(['`', ' ']) || s.ends_with(['`', ' ']));
    let pad = if pad { " " } else { "" };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// Text showing `s` literally, whatever is written before or after it: the mini-language's
/// own syntax backslash-escaped — every `` ` `` and `*`, a `\\` before punctuation or at the
/// end, a `]` before `(` or at the end (a link closes with `](`). Nothing else needs it: the
/// renderers escape everything that means something to Markdown or HTML, so a gate check's
/// `[storm]` stays as written wherever the text is shown raw (the live page, a terminal).
///
/// A word a renderer would turn into a link by itself — GitHub's autolinks of `www.…`, any
/// `scheme:…` with `//`, `mailto:`/`xmpp:` and e-mail addresses — goes in a code span instead:
/// escaping cannot stop them (linkifiers read the text after escapes are resolved), and a
/// report must not link where its author did not.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while !rest.is_empty() {
        let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, after) = rest.split_at(word_end);
        if would_autolink(word) {
            out.push_str(&code(word));
        } else {
            escape_into(&mut out, word, after.chars().next());
        }
        let space_end = after.find(|c: char| !c.is_whitespace()).unwrap_or(after.len());
        out.push_str(&after[..space_end]);
        rest = &after[space_end..];
    }
    out
}

/// Whether a linkifier (GFM's extended autolinks, markdown-it's linkify) would make `word` a link.
fn would_autolink(word: &str) -> bool {
    let w = word.to_ascii_lowercase();
    w.contains("://")
        || w.contains("www.")
        || w.contains("mailto:")
        || w.contains("xmpp:")
        || w.match_indices('@').any(|(i, _)| i > 0 && w[i + 1..].contains('.'))
}

/// The mini-language escapes of `word`; `next` is the character after it (a backslash at a
/// word's end escapes what follows).
fn escape_into(out: &mut String, word: &str, next_after: Option<char>) {
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied().or(next_after);
        let escape = match c {
            '`' | '*' => true,
            '\\' => next.is_none_or(|n| n.is_ascii_punctuation()),
            ']' => next.is_none_or(|n| n == '('),
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
    }
}

/// A link to a file beside the report: `[label](target)` when `target` is a relative path
/// (see [`safe_target`]), else the label with the target in a code span, never a link.
pub fn link(label: &str, target: &str) -> String {
    if safe_target(target) {
        format!("[{}]({target})", text(label))
    } else {
        format!("{} ({})", text(label), code(target))
    }
}

/// Whether a link may point at `target`: a relative path of letters, digits, `.`, `_`, `-`
/// and `/` that does not go up (`..`); never a scheme (`javascript:`), a host (`//x`) or a
/// root path.
pub fn safe_target(target: &str) -> bool {
    !target.is_empty()
        && !target.starts_with('/')
        && target.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
        && !target.split('/').any(|part| part.is_empty() || part == "..")
}

fn longest_backtick_run(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// One piece of mini-language text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inline {
    /// Literal text (escapes resolved).
    Text(String),
    /// A code span's content, exactly as [`code`] was given it.
    Code(String),
    /// `**`: strong emphasis starts or ends.
    Strong,
    /// `*`: emphasis starts or ends.
    Emphasis,
    /// A link to a relative path (the target passed [`safe_target`]).
    Link {
        /// The text shown.
        label: String,
        /// The path.
        target: String,
    },
}

/// Reads mini-language text: backslash escapes, code spans (CommonMark's matching: a run of
/// n backticks to the next run of exactly n), `**`, `*` and `[label](target)` links whose
/// target is safe. Anything else, an unmatched fence or an unsafe link included, is text.
pub fn parse(s: &str) -> Vec<Inline> {
    let mut out: Vec<Inline> = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        let mut piece = None;
        let mut taken = c.len_utf8();
        match c {
            '\\' => match rest[1..].chars().next() {
                Some(e) if e.is_ascii_punctuation() => {
                    text.push(e);
                    taken = 1 + e.len_utf8();
                }
                _ => text.push('\\'),
            },
            '`' => {
                let n = rest.len() - rest.trim_start_matches('`').len();
                match closing_fence(&rest[n..], n) {
                    Some(end) => {
                        piece = Some(Inline::Code(code_content(&rest[n..n + end])));
                        taken = 2 * n + end;
                    }
                    None => {
                        text.push_str(&rest[..n]);
                        taken = n;
                    }
                }
            }
            '*' if rest.starts_with("**") => {
                piece = Some(Inline::Strong);
                taken = 2;
            }
            '*' => piece = Some(Inline::Emphasis),
            '[' => match parse_link(rest) {
                Some((label, target, len)) => {
                    piece = Some(Inline::Link { label, target });
                    taken = len;
                }
                None => text.push('['),
            },
            c => text.push(c),
        }
        if let Some(p) = piece {
            if !text.is_empty() {
                out.push(Inline::Text(std::mem::take(&mut text)));
            }
            out.push(p);
        }
        rest = &rest[taken..];
    }
    if !text.is_empty() {
        out.push(Inline::Text(text));
    }
    out
}

/// Where, in `s` (just after an opening fence of `n` backticks), the closing run of exactly
/// `n` backticks starts.
fn closing_fence(s: &str, n: usize) -> Option<usize> {
    let mut i = 0;
    while let Some(at) = s[i..].find('`') {
        let start = i + at;
        let run = s[start..].len() - s[start..].trim_start_matches('`').len();
        if run == n {
            return Some(start);
        }
        i = start + run;
    }
    None
}

/// A code span's content as CommonMark reads it: one space stripped from each side when both
/// sides have one and the content is not only spaces.
fn code_content(raw: &str) -> String {
    let padded = raw.len() >= 2 && raw.starts_with(' ') && raw.ends_with(' ') && raw.chars().any(|c| c != ' ');
    if padded { raw[1..raw.len() - 1].to_string() } else { raw.to_string() }
}

/// `[label](target)` at the start of `s`: the label (escapes resolved), the target and the
/// length taken; `None` unless the target is safe.
fn parse_link(s: &str) -> Option<(String, String, usize)> {
    let mut label = String::new();
    let mut chars = s.char_indices().skip(1);
    let close = loop {
        match chars.next()? {
            (_, '\\') => label.push(chars.next()?.1),
            (i, ']') => break i,
            (_, '[' | '`' | '*') => return None,
            (_, c) => label.push(c),
        }
    };
    let after = s[close + 1..].strip_prefix('(')?;
    let end = after.find(')')?;
    let target = &after[..end];
    safe_target(target).then(|| (label, target.to_string(), close + 2 + end + 1))
}

/// Mini-language text from elsewhere (a facilitator's action as the live page recorded it)
/// kept as it is, except that a link becomes its text: only the harness links. Code spans that
/// would touch (a code span, then a word [`text`] shows as code) become one: two fences side by
/// side would read as one longer run of backticks.
pub fn unlinked(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending = String::new();
    let push = |out: &mut String, pending: &mut String, rendered: String| {
        let starts_code = rendered.starts_with('`');
        if !pending.is_empty() && !starts_code {
            out.push_str(&code(&std::mem::take(pending)));
        }
        out.push_str(&rendered);
    };
    for piece in parse(s) {
        match piece {
            Inline::Code(c) => pending.push_str(&c),
            Inline::Text(t) => {
                let shown = text(&t);
                match whole_code(&shown) {
                    // The whole text is one code span: it joins the pending one.
                    Some(inner) if !pending.is_empty() => pending.push_str(&inner),
                    _ => push(&mut out, &mut pending, shown),
                }
            }
            Inline::Strong => push(&mut out, &mut pending, "**".into()),
            Inline::Emphasis => push(&mut out, &mut pending, "*".into()),
            Inline::Link { label, target } => push(&mut out, &mut pending, text(&format!("[{label}]({target})"))),
        }
    }
    if !pending.is_empty() {
        out.push_str(&code(&pending));
    }
    out
}

/// The content of `s` when `s` is exactly one code span as [`code`] writes it.
fn whole_code(s: &str) -> Option<String> {
    match parse(s).as_slice() {
        [Inline::Code(c)] => Some(c.clone()),
        _ => None,
    }
}

/// Mini-language text for a terminal: code spans in single backticks, emphasis dropped, a
/// link as its label, and every hidden character made visible.
pub fn plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for piece in parse(s) {
        match piece {
            Inline::Text(t) => out.push_str(&t),
            Inline::Code(c) => {
                out.push('`');
                out.push_str(&c);
                out.push('`');
            }
            Inline::Link { label, .. } => out.push_str(&label),
            Inline::Strong | Inline::Emphasis => {}
        }
    }
    visible(&out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn hidden_characters_become_visible_and_lines_survive_only_for_the_terminal() {
        assert_eq!(visible("a\u{1b}]0;pwned\u{7}b"), "a␛]0;pwned␇b");
        assert_eq!(visible("x\u{8}\u{7f}\r\n\t"), "x␈␡␍␊␉");
        assert_eq!(visible("\u{202e}gnp.exe \u{2066}\u{9b}"), "\\u202Egnp.exe \\u2066\\u009B");
        assert_eq!(visible("\u{61c}\u{200e}\u{200f}\u{fffe}\u{ffff}"), "\\u061C\\u200E\\u200F\\uFFFE\\uFFFF");
        assert_eq!(visible_lines("a\nb\tc\u{1b}[2J\r"), "a\nb\tc␛[2J␍");
        // Ordinary text, accents and emoji included, is left alone.
        assert_eq!(visible("naïve — 😀 ±10 %"), "naïve — 😀 ±10 %");
        assert!(!is_hidden('é') && !is_hidden(' ') && is_hidden('\u{85}') && is_hidden('\u{2069}'));
    }

    #[test]
    fn a_code_span_is_fenced_longer_than_any_backtick_run_inside() {
        assert_eq!(code("slow"), "`slow`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("``x"), "``` ``x ```");
        assert_eq!(code(" x "), "`  x  `");
        assert_eq!(code("   "), "`   `");
        assert_eq!(parse(&code("a``b`")), vec![Inline::Code("a``b`".into())]);
    }

    #[test]
    fn text_escapes_only_the_mini_language_and_reads_back_literally() {
        assert_eq!(
            text("**x** `y` [z](javascript:alert(1)) \\"),
            "\\*\\*x\\*\\* \\`y\\` [z\\](javascript:alert(1)) \\\\"
        );
        assert_eq!(parse(&text("**x** [z](a.md)")), vec![Inline::Text("**x** [z](a.md)".into())]);
        assert_eq!(text("a [storm] <= 1.5 C:\\dir"), "a [storm] <= 1.5 C:\\dir");
        // Pieces escaped one by one never join into a link.
        let joined = format!("{}{}{}", text("[a"), text("]"), text("(b.md)"));
        assert_eq!(parse(&joined), vec![Inline::Text("[a](b.md)".into())]);
    }

    #[test]
    fn only_relative_paths_become_links() {
        assert_eq!(
            parse(&link("naive", "naive/report.md")),
            vec![Inline::Link { label: "naive".into(), target: "naive/report.md".into() }]
        );
        for bad in ["javascript:alert(1)", "//evil.example/x", "/etc/passwd", "../up.md", "a b.md", "x?y", ""] {
            assert!(!safe_target(bad), "{bad}");
            assert!(parse(&link("x", bad)).iter().all(|p| !matches!(p, Inline::Link { .. })), "{bad}");
        }
        // Written by hand, an unsafe link is text too.
        assert_eq!(parse("[x](javascript:alert(1))"), vec![Inline::Text("[x](javascript:alert(1))".into())]);
    }

    #[test]
    fn the_mini_language_reads_strong_emphasis_code_and_escapes() {
        assert_eq!(
            parse("**Gate: FAILED** `p95` *x* \\*"),
            vec![
                Inline::Strong,
                Inline::Text("Gate: FAILED".into()),
                Inline::Strong,
                Inline::Text(" ".into()),
                Inline::Code("p95".into()),
                Inline::Text(" ".into()),
                Inline::Emphasis,
                Inline::Text("x".into()),
                Inline::Emphasis,
                Inline::Text(" *".into()),
            ]
        );
        // An unmatched fence is literal.
        assert_eq!(parse("a ``b` c"), vec![Inline::Text("a ``b` c".into())]);
        assert_eq!(plain("**Recovered** after `slow` \u{1b}[31m"), "Recovered after `slow` ␛[31m");
    }

    fn hostile() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop::sample::select(vec![
                "<", ">", "&", "\"", "'", "\\", "`", "*", "_", "[", "]", "(", ")", "!", "#", "|", "\n", "\r", "\u{1b}",
                "\u{7}", "\u{8}", "\u{202e}", "\u{2066}", " ", "a", "Z", "7", "é", "😀",
            ]),
            1..24,
        )
        .prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn code_and_text_embed_any_string_exactly(s in hostile()) {
            if s.chars().any(|c| c != ' ') {
                prop_assert_eq!(parse(&code(&s)), vec![Inline::Code(s.clone())]);
            }
            prop_assert_eq!(parse(&text(&s)), vec![Inline::Text(s.clone())]);
            let mixed = format!("**{}**{}{}{}", text(&s), code(&s), text(&s), text(&s));
            let codes: Vec<Inline> = parse(&mixed).into_iter().filter(|p| matches!(p, Inline::Code(_))).collect();
            if s.chars().any(|c| c != ' ') {
                prop_assert_eq!(codes, vec![Inline::Code(s.clone())]);
            }
        }

        #[test]
        fn visible_text_has_no_hidden_character(s in hostile()) {
            prop_assert!(!visible(&s).chars().any(is_hidden));
            prop_assert!(!visible_lines(&s).chars().any(|c| is_hidden(c) && c != '\n' && c != '\t'));
        }
    }
}
