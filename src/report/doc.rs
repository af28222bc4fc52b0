//! A tiny document model — headings, paragraphs, lists, tables, charts — rendered twice: as
//! Markdown for CI job summaries and PR comments, and as one self-contained HTML file with
//! the charts' SVG inlined (no network, no scripts). One model, so the two never disagree.

use std::fmt::Write;

/// One block of a report.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// A heading (level 1–3).
    Heading(u8, String),
    /// A paragraph.
    Para(String),
    /// A bulleted list.
    List(Vec<String>),
    /// A table: header and rows.
    Table(Vec<String>, Vec<Vec<String>>),
    /// A chart: its name (`charts/<name>.svg|png`) and alt text.
    Chart(String, String),
}

/// A report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Doc {
    /// Its blocks, in order.
    pub blocks: Vec<Block>,
}

impl Doc {
    /// Appends a block.
    pub fn push(&mut self, b: Block) {
        self.blocks.push(b);
    }

    /// Markdown; charts link the PNGs relative to the run folder.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for b in &self.blocks {
            match b {
                Block::Heading(level, text) => {
                    let _ = writeln!(out, "{} {text}\n", "#".repeat(usize::from(*level).clamp(1, 6)));
                }
                Block::Para(text) => {
                    let _ = writeln!(out, "{text}\n");
                }
                Block::List(items) => {
                    for i in items {
                        let _ = writeln!(out, "- {i}");
                    }
                    out.push('\n');
                }
                Block::Table(header, rows) => {
                    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
                    let _ = writeln!(out, "| {} |", header.iter().map(|h| cell(h)).collect::<Vec<_>>().join(" | "));
                    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
                    for r in rows {
                        let _ = writeln!(out, "| {} |", r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | "));
                    }
                    out.push('\n');
                }
                Block::Chart(name, alt) => {
                    let _ = writeln!(out, "![{alt}](charts/{name}.png)\n");
                }
            }
        }
        out
    }

    /// One HTML file; `svg(name)` gives a chart's SVG text to inline.
    pub fn html(&self, title: &str, svg: impl Fn(&str) -> Option<String>) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>{STYLE}</style></head><body>\n",
            escape(title)
        );
        for b in &self.blocks {
            match b {
                Block::Heading(level, text) => {
                    let l = level.clamp(&1, &3);
                    let _ = writeln!(out, "<h{l}>{}</h{l}>", inline(text));
                }
                Block::Para(text) => {
                    let _ = writeln!(out, "<p>{}</p>", inline(text));
                }
                Block::List(items) => {
                    out.push_str("<ul>\n");
                    for i in items {
                        let _ = writeln!(out, "<li>{}</li>", inline(i));
                    }
                    out.push_str("</ul>\n");
                }
                Block::Table(header, rows) => {
                    out.push_str("<table><thead><tr>");
                    for h in header {
                        let _ = write!(out, "<th>{}</th>", inline(h));
                    }
                    out.push_str("</tr></thead><tbody>\n");
                    for r in rows {
                        out.push_str("<tr>");
                        for c in r {
                            let _ = write!(out, "<td>{}</td>", inline(c));
                        }
                        out.push_str("</tr>\n");
                    }
                    out.push_str("</tbody></table>\n");
                }
                Block::Chart(name, alt) => match svg(name) {
                    Some(s) => {
                        let _ = writeln!(
                            out,
                            "<figure role=\"img\" aria-label=\"{}\">{}</figure>",
                            escape(alt),
                            strip_prolog(&s)
                        );
                    }
                    None => {
                        let _ = writeln!(out, "<p><em>chart {} unavailable</em></p>", escape(name));
                    }
                },
            }
        }
        out.push_str("</body></html>\n");
        out
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}\
th{background:#f3f3f3}figure{margin:1em 0}svg{max-width:100%;height:auto}code{background:#f3f3f3;padding:0 3px}";

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Escapes, then renders the two inline Markdown forms reports use: `**bold**` and `` `code` ``.
fn inline(s: &str) -> String {
    let mut out = String::new();
    let text = escape(s);
    let mut bold = false;
    let mut code = false;
    let mut rest = text.as_str();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("**") {
            out.push_str(if bold { "</strong>" } else { "<strong>" });
            bold = !bold;
            rest = r;
        } else if let Some(r) = rest.strip_prefix('`') {
            out.push_str(if code { "</code>" } else { "<code>" });
            code = !code;
            rest = r;
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    if bold {
        out.push_str("</strong>");
    }
    if code {
        out.push_str("</code>");
    }
    out
}

/// An SVG file without its XML prolog, to inline in HTML.
fn strip_prolog(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_model_renders_as_markdown_and_html() {
        let mut d = Doc::default();
        d.push(Block::Heading(1, "Run <x>".into()));
        d.push(Block::Para("**FAILED**: `p95` too high".into()));
        d.push(Block::Table(vec!["a".into(), "b|c".into()], vec![vec!["1".into(), "2".into()]]));
        d.push(Block::Chart("latency".into(), "latency over time".into()));
        let md = d.markdown();
        assert!(md.starts_with("# Run <x>\n"), "{md}");
        assert!(md.contains("| a | b\\|c |\n|---|---|\n| 1 | 2 |"), "{md}");
        assert!(md.contains("![latency over time](charts/latency.png)"), "{md}");
        let html = d.html("t", |n| (n == "latency").then(|| "<?xml version=\"1.0\"?><svg>x</svg>".to_string()));
        assert!(html.contains("<h1>Run &lt;x&gt;</h1>"), "{html}");
        assert!(html.contains("<p><strong>FAILED</strong>: <code>p95</code> too high</p>"), "{html}");
        assert!(html.contains("<figure role=\"img\" aria-label=\"latency over time\"><svg>x</svg></figure>"), "{html}");
        assert!(!html.contains("<?xml"));
        assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("<script"), "self-contained");
    }
}
