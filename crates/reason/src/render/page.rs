//! A report's two renderings from one list of blocks: report.md, and report.html — one
//! self-contained file (inline CSS, SVG and a small script), its sections linked from a table
//! of contents, raw material collapsed under `<details>`, and legible at a phone's width: the
//! page never scrolls sideways, a wide table or figure scrolls inside its own box.

use std::fmt::Write as _;

use crate::render::block::Block;
use crate::render::svg::esc;

/// Numbers are right-aligned, words left-aligned (the first column is always labels).
fn numeric_column(rows: &[Vec<String>], i: usize) -> bool {
    i > 0
        && rows.iter().all(|r| {
            r.get(i).is_none_or(|c| {
                c.is_empty()
                    || c.starts_with(|ch: char| ch.is_ascii_digit() || "-–✗+≥".contains(ch))
            })
        })
}

fn md_inline(s: &str) -> String {
    s.replace('|', "\\|")
}

/// A heading's anchor as GitHub makes it (lower case, letters, digits, `-` and `_` kept,
/// spaces as `-`, the rest dropped), so that report.md's links work where it is shown too;
/// a repeated one gets `-1`, `-2`, ….
fn slug(text: &str, seen: &mut Vec<String>) -> String {
    let base: String = text
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect();
    let mut id = base.clone();
    let mut k = 0;
    while seen.contains(&id) {
        k += 1;
        id = format!("{base}-{k}");
    }
    seen.push(id.clone());
    id
}

/// Each section heading (`##`, at any depth of the document) with its anchor, in order.
fn sections(doc: &[Block]) -> Vec<(String, String)> {
    fn walk(doc: &[Block], seen: &mut Vec<String>, out: &mut Vec<(String, String)>) {
        for b in doc {
            match b {
                Block::H(_, t) => {
                    let id = slug(t, seen);
                    if matches!(b, Block::H(2, _)) {
                        out.push((t.clone(), id));
                    }
                }
                Block::Details(_, inner) => walk(inner, seen, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(doc, &mut Vec::new(), &mut out);
    out
}

/// The document as Markdown.
pub(crate) fn markdown(doc: &[Block]) -> String {
    let toc = sections(doc);
    let mut o = String::new();
    md_blocks(&mut o, doc, &toc);
    o
}

fn md_blocks(o: &mut String, doc: &[Block], toc: &[(String, String)]) {
    for b in doc {
        match b {
            Block::H(l, t) => {
                let _ = writeln!(o, "{} {t}\n", "#".repeat(*l as usize));
            }
            Block::P(t) => {
                let _ = writeln!(o, "{t}\n");
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(o, "- {i}");
                }
                o.push('\n');
            }
            Block::Table(h, rows) => md_table(o, h, rows),
            Block::Figure { file, alt, .. } => {
                let _ = writeln!(o, "![{alt}]({file})\n");
            }
            Block::Code(lines) => {
                let _ = writeln!(o, "```\n{}\n```\n", lines.join("\n"));
            }
            Block::Raw { md, .. } => o.push_str(md),
            Block::Details(summary, inner) => {
                let _ = writeln!(o, "{summary}:\n");
                md_blocks(o, inner, toc);
            }
            Block::Toc if !toc.is_empty() => {
                let links: Vec<String> =
                    toc.iter().map(|(t, id)| format!("[{t}](#{id})")).collect();
                let _ = writeln!(o, "**Contents:** {}\n", links.join(" · "));
            }
            Block::Toc => {}
        }
    }
}

fn md_table(o: &mut String, h: &[String], rows: &[Vec<String>]) {
    let line = |r: &[String]| {
        format!(
            "| {} |",
            r.iter()
                .map(|c| md_inline(c))
                .collect::<Vec<_>>()
                .join(" | ")
        )
    };
    let _ = writeln!(o, "{}", line(h));
    let _ = writeln!(
        o,
        "|{}",
        (0..h.len())
            .map(|i| if numeric_column(rows, i) {
                "---:|"
            } else {
                "---|"
            })
            .collect::<String>()
    );
    for r in rows {
        let _ = writeln!(o, "{}", line(r));
    }
    o.push('\n');
}

/// Escapes, then turns `code` and **bold** into HTML (the micro-benchmarks' reports too).
pub(crate) fn html_inline(s: &str) -> String {
    let e = esc(s);
    let mut out = String::new();
    for (i, part) in e.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            for (j, q) in part.split("**").enumerate() {
                if j % 2 == 1 {
                    let _ = write!(out, "<strong>{q}</strong>");
                } else {
                    out.push_str(q);
                }
            }
        }
    }
    out
}

/// The page's style: wide enough for two figures side by side (640 px each), text in a
/// readable measure; at a phone's width the page keeps to the screen and each table, figure
/// and block of code scrolls inside its own box (a figure is never drawn under 480 px, where
/// its 12 px text would shrink below 9).
pub(crate) const CSS: &str = "body{font-family:Helvetica,Arial,sans-serif;max-width:1320px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45;overflow-wrap:break-word}\
p,ul{max-width:72em}.scroll{overflow-x:auto;max-width:100%}\
figure{margin:0.8em 8px 0.8em 0;display:inline-block;vertical-align:top;max-width:100%;overflow-x:auto}\
figure svg{display:block;max-width:100%;min-width:480px;height:auto}\
table{border-collapse:collapse;margin:0.5em 0 1.2em;font-size:0.9em}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th:first-child,td:first-child,.words th,.words td{text-align:left}th{background:#f3f3f3}code{background:#f5f5f5;padding:0 3px}\
pre{background:#f7f7f7;padding:0.8em;overflow-x:auto;font-size:0.85em}\
h2{border-bottom:1px solid #ddd;padding-bottom:0.2em;margin-top:1.6em}.verdict-reproduced{color:#176b1d}\
.verdict-not{color:#a11}.verdict-inconclusive{color:#777}td[class^=verdict]{text-align:left}\
.answer{display:flex;flex-wrap:wrap;gap:0 1.5em;align-items:flex-start}.answer figure{margin-top:0}.answer figure svg{min-width:340px}\
#controls{flex:1 1 16em;max-width:28em;border:1px solid #ddd;background:#fafafa;padding:0 1em;margin-bottom:1em}\
#controls h3{margin:0.6em 0 0.3em}#controls ul{padding-left:1.1em;margin:0.3em 0 0.8em}#controls li{margin:0.3em 0}\
.control-passed{color:#176b1d;font-weight:bold}.control-failed{color:#b2182b;font-weight:bold}\
.control-not-decided{color:#8a5a00;font-weight:bold}.control-not-in-this-run{color:#666}\
nav#contents{margin:0.6em 0 1em;line-height:1.8}\
details{margin:0.4em 0 1em}summary{cursor:pointer;color:#1f4e8c}\
@media (max-width:600px){body{margin:1em auto;padding:0 0.7em}h1{font-size:1.5em}th,td{padding:2px 5px}}";

/// The document as one self-contained HTML page titled `title`.
pub(crate) fn html(title: &str, doc: &[Block]) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head><body>\n",
        esc(title)
    );
    let toc = sections(doc);
    html_blocks(&mut o, doc, &toc, &mut Vec::new());
    o.push_str(crate::render::svg::SCRIPT);
    o.push_str("</body></html>\n");
    o
}

fn html_blocks(o: &mut String, doc: &[Block], toc: &[(String, String)], seen: &mut Vec<String>) {
    for b in doc {
        match b {
            Block::H(l, t) => {
                let id = slug(t, seen);
                let _ = writeln!(o, "<h{l} id=\"{id}\">{}</h{l}>", html_inline(t));
            }
            Block::P(t) => {
                let _ = writeln!(o, "<p>{}</p>", html_inline(t));
            }
            Block::List(items) => {
                o.push_str("<ul>\n");
                for i in items {
                    let class = if i.starts_with("**reproduced**") {
                        " class=\"verdict-reproduced\""
                    } else if i.starts_with("**not reproduced**") {
                        " class=\"verdict-not\""
                    } else if i.starts_with("**inconclusive**") {
                        " class=\"verdict-inconclusive\""
                    } else {
                        ""
                    };
                    let _ = writeln!(o, "<li{class}>{}</li>", html_inline(i));
                }
                o.push_str("</ul>\n");
            }
            Block::Table(h, rows) => html_table(o, h, rows),
            Block::Figure { file, svg, .. } => {
                let _ = writeln!(o, "<figure id=\"{}\">{svg}</figure>", esc(file));
            }
            Block::Code(lines) => {
                let _ = writeln!(o, "<pre>{}</pre>", esc(&lines.join("\n")));
            }
            Block::Raw { html, .. } => o.push_str(html),
            Block::Details(summary, inner) => {
                let _ = writeln!(o, "<details><summary>{}</summary>", html_inline(summary));
                html_blocks(o, inner, toc, seen);
                o.push_str("</details>\n");
            }
            Block::Toc if !toc.is_empty() => {
                let links: Vec<String> = toc
                    .iter()
                    .map(|(t, id)| format!("<a href=\"#{id}\">{}</a>", html_inline(t)))
                    .collect();
                let _ = writeln!(
                    o,
                    "<nav id=\"contents\"><strong>Contents:</strong> {}</nav>",
                    links.join(" · ")
                );
            }
            Block::Toc => {}
        }
    }
}

fn html_table(o: &mut String, h: &[String], rows: &[Vec<String>]) {
    let align: Vec<bool> = (0..rows.first().map_or(0, |r| r.len()))
        .map(|i| numeric_column(rows, i))
        .collect();
    // Headings align with their column: numbers right, words left.
    let style = |i: usize| {
        if align.get(i) == Some(&false) && i > 0 {
            " style=\"text-align:left\""
        } else {
            ""
        }
    };
    o.push_str("<div class=\"scroll\"><table><thead><tr>");
    for (i, c) in h.iter().enumerate() {
        let _ = write!(o, "<th{}>{}</th>", style(i), html_inline(c));
    }
    o.push_str("</tr></thead><tbody>\n");
    for r in rows {
        o.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            // A verdict by itself is coloured as the findings list colours it (left-aligned by
            // its class).
            let attr = match c.as_str() {
                "reproduced" | "**reproduced**" => " class=\"verdict-reproduced\"",
                "not reproduced" | "**not reproduced**" => " class=\"verdict-not\"",
                "inconclusive" | "**inconclusive**" => " class=\"verdict-inconclusive\"",
                _ => style(i),
            };
            let _ = write!(o, "<td{attr}>{}</td>", html_inline(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_githubs_and_the_contents_link_every_section() {
        let mut seen = Vec::new();
        assert_eq!(
            slug("Reply rate, 10,000 idle connections", &mut seen),
            "reply-rate-10000-idle-connections"
        );
        assert_eq!(
            slug("Where the server's time goes (as Table 1)", &mut seen),
            "where-the-servers-time-goes-as-table-1"
        );
        assert_eq!(slug("Capacity", &mut seen), "capacity");
        assert_eq!(slug("Capacity", &mut seen), "capacity-1");
        let doc = vec![
            Block::H(1, "evlab run: x".into()),
            Block::Toc,
            Block::H(2, "Capacity".into()),
            Block::Details(
                "Every search".into(),
                vec![Block::Table(vec!["a".into()], vec![vec!["1".into()]])],
            ),
            Block::H(2, "Validity".into()),
        ];
        let md = markdown(&doc);
        assert!(
            md.contains("**Contents:** [Capacity](#capacity) · [Validity](#validity)"),
            "{md}"
        );
        let html = html("x", &doc);
        assert!(
            html.contains("<a href=\"#capacity\">Capacity</a>"),
            "{html}"
        );
        assert!(html.contains("<h2 id=\"capacity\">Capacity</h2>"), "{html}");
        assert!(
            html.contains(
                "<details><summary>Every search</summary>\n<div class=\"scroll\"><table>"
            ),
            "{html}"
        );
        assert!(html.contains("name=\"viewport\""), "{html}");
    }
}
