//! How numbers and command lines are written in evidence, reports and progress.

/// A whole number with thousands separators: 12,000.
pub fn thousands(v: f64) -> String {
    let n = v.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A number with thousands separators and `decimals` decimals.
pub fn num(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let s = format!("{:.*}", decimals, x.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i.to_string(), Some(f.to_string())),
        None => (s.clone(), None),
    };
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let sign = if x < 0.0 { "-" } else { "" };
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// Quotes an argv for a shell, so a report's command lines can be pasted.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A comment line of an experiment's TOML as a report shows it: without the source's module
/// paths (`model::knee`) that files written before they were taken out carry, each with the
/// `; ` or `, ` after it. Only comments: a value is as it ran.
pub fn without_module_paths(line: &str) -> String {
    if !line.trim_start().starts_with('#') {
        return line.to_string();
    }
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("::") {
        let start = rest[..at].rfind(|c: char| !ident(c)).map_or(0, |i| i + 1);
        let after = &rest[at + 2..];
        let end = after
            .find(|c: char| !ident(c) && c != ':')
            .unwrap_or(after.len());
        if start == at || end == 0 {
            // Not a path (`[::1]`): kept.
            out.push_str(&rest[..at + 2]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..start]);
        let tail = &after[end..];
        rest = tail
            .strip_prefix("; ")
            .or_else(|| tail.strip_prefix(", "))
            .unwrap_or(tail);
    }
    out.push_str(rest);
    out.replace(" ()", "").replace("()", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_lose_module_paths_and_values_keep_theirs() {
        assert_eq!(
            without_module_paths(
                "# The search after each point (model::knee; docs/methodology.md, \"The knee\"),"
            ),
            "# The search after each point (docs/methodology.md, \"The knee\"),"
        );
        assert_eq!(
            without_module_paths("# a search (model::knee)."),
            "# a search."
        );
        assert_eq!(without_module_paths("# on [::1]:8080"), "# on [::1]:8080");
        assert_eq!(without_module_paths("x = \"a::b\""), "x = \"a::b\"");
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(num(1234567.891, 1), "1,234,567.9");
        assert_eq!(num(-12.0, 0), "-12");
        assert_eq!(num(f64::NAN, 0), "-");
        assert_eq!(thousands(-12_000.4), "-12,000");
    }
}
