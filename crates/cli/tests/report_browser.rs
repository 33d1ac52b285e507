//! Every committed report, opened in a real browser (Debian's headless Chromium): it loads with
//! no script error; no text of any figure lies outside the figure's image; each legend entry
//! hides exactly its own series (line, markers, bars) when clicked and shows it again on the
//! next click; every marker carries its values for hovering (its `<title>`).
//!
//! The reports of the committed reference runs (those `evlab report` renders today) are also
//! laid out as a person reads them: at a desktop's width (1,400 px) and a phone's (390 px) the
//! page never scrolls sideways (a wide table or figure scrolls inside its own box), and every
//! link of the table of contents leads to a section.
//!
//! One harness page frames every report and, once all have loaded, runs the checks in each and
//! writes what it found into itself; `chromium --dump-dom` prints it. Chromium is needed:
//! without it the test skips (`EVLAB_REQUIRE=all`, as CI sets, makes that a failure).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn reports(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            reports(&p, out);
        } else if p.file_name().is_some_and(|n| n == "report.html") {
            out.push(p);
        }
    }
}

fn browser() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| evlab_poll::testing::on_path(b))
}

/// Runs in the harness once every frame has loaded; writes a JSON summary into `#result`.
const CHECKS: &str = r#"
window.addEventListener('load', function () {
  var out = {reports: 0, figures: 0, legends: 0, marks: 0, texts: 0, laid_out: 0, links: 0, errors: []};
  function shown(doc, el) { return doc.defaultView.getComputedStyle(el).display !== 'none'; }
  document.querySelectorAll('iframe').forEach(function (frame) {
    var doc = frame.contentDocument, name = frame.getAttribute('data-name');
    if (!doc || !doc.body) { out.errors.push(name + ': did not load'); return; }
    if (frame.hasAttribute('data-current')) {
      out.laid_out++;
      var root = doc.documentElement, width = frame.getAttribute('width');
      if (root.scrollWidth > root.clientWidth + 1) {
        out.errors.push(name + ' at ' + width + ' px: the page scrolls sideways (' + root.scrollWidth + ' px wide)');
      }
      doc.querySelectorAll('nav#contents a').forEach(function (a) {
        out.links++;
        if (!doc.getElementById(a.getAttribute('href').slice(1))) {
          out.errors.push(name + ': contents link ' + a.getAttribute('href') + ' leads nowhere');
        }
      });
      if (frame.hasAttribute('data-phone')) return;
    }
    out.reports++;
    doc.querySelectorAll('svg').forEach(function (svg, si) {
      out.figures++;
      var where = name + ', figure ' + (si + 1) + ' (' + svg.getAttribute('aria-label') + ')';
      var box = svg.getBoundingClientRect();
      svg.querySelectorAll('text').forEach(function (t) {
        var b = t.getBoundingClientRect();
        if (b.width === 0 && b.height === 0) return;
        out.texts++;
        if (b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1 || b.bottom > box.bottom + 1) {
          out.errors.push(where + ': text "' + t.textContent + '" lies outside the image');
        }
      });
      var all = [].slice.call(svg.querySelectorAll('[data-series]')).filter(function (e) {
        return !e.classList.contains('legend');
      });
      svg.querySelectorAll('g.legend[data-series]').forEach(function (g) {
        out.legends++;
        var s = g.getAttribute('data-series');
        var mine = all.filter(function (e) { return e.getAttribute('data-series') === s; });
        var others = all.filter(function (e) { return e.getAttribute('data-series') !== s && shown(doc, e); });
        if (mine.length === 0) { out.errors.push(where + ': legend "' + s + '" names nothing drawn'); return; }
        g.dispatchEvent(new MouseEvent('click', {bubbles: true}));
        if (mine.some(function (e) { return shown(doc, e); })) out.errors.push(where + ': "' + s + '" not hidden by its legend');
        if (!others.every(function (e) { return shown(doc, e); })) out.errors.push(where + ': "' + s + '" hid another series');
        g.dispatchEvent(new MouseEvent('click', {bubbles: true}));
        if (!mine.every(function (e) { return shown(doc, e); })) out.errors.push(where + ': "' + s + '" not shown again');
      });
      svg.querySelectorAll('.mark').forEach(function (m) {
        out.marks++;
        var t = m.querySelector('title');
        if (!t || t.textContent.indexOf(m.getAttribute('data-series') + ': ') !== 0 || t.textContent.indexOf(' \u2192 ') < 0) {
          out.errors.push(where + ': a marker without its values: ' + (t ? t.textContent : 'no title'));
        }
      });
    });
  });
  var pre = document.createElement('pre');
  pre.id = 'result';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
"#;

#[test]
fn committed_reports_work_in_a_browser() {
    let Some(chromium) = browser() else {
        evlab_poll::testing::require(
            "chromium",
            false,
            "no chromium on PATH (scripts/setup.sh installs it)",
        );
        return;
    };
    let mut files = Vec::new();
    reports(&workspace().join("results"), &mut files);
    assert!(files.len() >= 20, "only {} committed reports", files.len());
    let dir = std::env::temp_dir().join(format!("evlab-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let frames: String = files
        .iter()
        .map(|f| {
            let name = f
                .strip_prefix(workspace().join("results"))
                .unwrap_or(f)
                .display()
                .to_string();
            let src = f.canonicalize().unwrap().display().to_string();
            // A reference run's report, as `evlab report` renders it today.
            let current = name.starts_with("reference/")
                && f.parent()
                    .is_some_and(|d| d.join("summary.json").is_file() || d.join("micro.json").is_file());
            let mark = if current { " data-current" } else { "" };
            let mut out = format!(
                "<iframe data-name=\"{name}\"{mark} src=\"file://{src}\" width=\"1400\" height=\"900\"></iframe>\n"
            );
            if current {
                out.push_str(&format!(
                    "<iframe data-name=\"{name}\" data-current data-phone src=\"file://{src}\" width=\"390\" height=\"844\"></iframe>\n"
                ));
            }
            out
        })
        .collect();
    let harness = dir.join("harness.html");
    std::fs::write(
        &harness,
        format!("<!doctype html><html><body>\n{frames}<script>{CHECKS}</script></body></html>\n"),
    )
    .unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--allow-file-access-from-files",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=30000",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", harness.display()))
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    let result = dom
        .split("<pre id=\"result\">")
        .nth(1)
        .and_then(|r| r.split("</pre>").next())
        .unwrap_or_else(|| panic!("no result in the page: {dom:.2000}\n{err:.4000}"))
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    // Raw: the test page's own tally (its script writes it), not an evlab document.
    let v: serde_json::Value = serde_json::from_str(&result).unwrap();
    let errors: Vec<&str> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        errors.is_empty(),
        "{} problems:\n{}",
        errors.len(),
        errors.join("\n")
    );
    assert_eq!(v["reports"].as_u64(), Some(files.len() as u64), "{v}");
    // Each reference report at both widths, and its contents' links.
    assert!(v["laid_out"].as_u64().unwrap_or(0) >= 2 * 40, "{v}");
    for k in ["figures", "legends", "marks", "texts", "links"] {
        assert!(v[k].as_u64().unwrap_or(0) > 0, "{k}: {v}");
    }
    // No script error in any report (the console's messages go to stderr).
    let script_errors: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("Uncaught") || (l.contains("CONSOLE") && l.contains("rror")))
        .collect();
    assert!(script_errors.is_empty(), "{}", script_errors.join("\n"));
}
