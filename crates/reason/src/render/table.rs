//! Plain-text tables: a header, rows, columns padded to their widest cell (text left, numbers
//! right); and the findings printed under a micro-benchmark's table.

use evlab_wire::micro::Finding;

/// A table to print.
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let ncols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut width = vec![0usize; ncols];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let numeric = |c: &str| {
            c.trim_start_matches(['-', '+'])
                .chars()
                .next()
                .is_some_and(|ch| ch.is_ascii_digit())
        };
        let mut out = String::new();
        let line = |r: &[String], out: &mut String| {
            let cells: Vec<String> = (0..ncols)
                .map(|i| {
                    let c = r.get(i).map(String::as_str).unwrap_or("");
                    let pad = width[i] - c.chars().count();
                    if numeric(c) {
                        format!("{}{c}", " ".repeat(pad))
                    } else {
                        format!("{c}{}", " ".repeat(pad))
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        };
        line(&self.header, &mut out);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        out.push_str(&rule.join("  "));
        out.push('\n');
        for r in &self.rows {
            line(r, &mut out);
        }
        out
    }
}

/// The findings as lines under a table.
pub fn render_findings(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nfindings on this run:\n");
    for f in findings {
        out.push_str(&format!(
            "  {}: {} — {}\n",
            f.claim,
            f.verdict.word(),
            f.evidence
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_columns() {
        let mut t = Table::new(["pipes", "poll"]);
        t.row(["10", "1,234.5"]);
        t.row(["10000", "skipped"]);
        let s = t.render();
        assert_eq!(
            s,
            "pipes  poll\n-----  -------\n   10  1,234.5\n10000  skipped\n"
        );
    }
}
