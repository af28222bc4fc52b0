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
    assert_eq!(text("**x** `y` [z](javascript:alert(1)) \\"), "\\*\\*x\\*\\* \\`y\\` [z\\](javascript:alert(1)) \\\\");
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
