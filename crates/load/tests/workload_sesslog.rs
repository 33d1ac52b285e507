//! httperf `--wsesslog` session files: the good format and each malformed case with its message.

use std::path::Path;
use std::time::Duration;

use evlab_load::workload::sesslog::SessLog;
use evlab_load::workload::{Call, Method, Workload, WorkloadError};

const THINK: Duration = Duration::from_millis(1500);

fn parse(text: &str) -> Result<SessLog, WorkloadError> {
    SessLog::parse(text, THINK, Method::Get, Path::new("test.log"))
}

fn uris(calls: &[Call]) -> Vec<&str> {
    calls.iter().map(|c| &*c.uri).collect()
}

#[test]
fn parses_sessions_bursts_and_think_times() {
    let text = "\
# the httperf man page's example, GET only
/foo.html think=2.0
    /pict1.gif
\t/pict2.gif
/foo2.html method=GET
    /pict3.gif
    /pict4.gif

# new session definition
/foo3.html method=get
/foo4.html
";
    let log = parse(text).unwrap();
    assert_eq!(log.sessions(), 2);
    let s0 = log.session(0);
    assert_eq!(
        uris(s0),
        [
            "/foo.html",
            "/pict1.gif",
            "/pict2.gif",
            "/foo2.html",
            "/pict3.gif",
            "/pict4.gif"
        ]
    );
    // The think time of a burst comes before the next burst's first call; the first burst
    // starts at once; embedded calls follow without a pause.
    let thinks: Vec<Duration> = s0.iter().map(|c| c.think).collect();
    assert_eq!(
        thinks,
        [
            Duration::ZERO,
            Duration::ZERO,
            Duration::ZERO,
            Duration::from_secs(2),
            Duration::ZERO,
            Duration::ZERO
        ]
    );
    let s1 = log.session(1);
    assert_eq!(uris(s1), ["/foo3.html", "/foo4.html"]);
    // No think= on /foo3.html: the default applies.
    assert_eq!(s1[1].think, THINK);
    assert!(log.describe().contains("2 sessions"), "{}", log.describe());
}

#[test]
fn sessions_replay_in_file_order_cycling() {
    let mut log = parse("/a\n\n/b\n/c\n\n\n\n/d\n").unwrap();
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..6 {
        out.clear();
        log.next_session(&mut out);
        assert!(!out.is_empty());
        seen.push(uris(&out).join(","));
    }
    assert_eq!(seen, ["/a", "/b,/c", "/d", "/a", "/b,/c", "/d"]);
}

#[test]
fn comments_crlf_and_think_on_embedded_lines() {
    let log = parse("# c\r\n/a\r\n  # indented comment\r\n  /b think=0.25\r\n/c\r\n").unwrap();
    assert_eq!(log.sessions(), 1);
    let s = log.session(0);
    assert_eq!(uris(s), ["/a", "/b", "/c"]);
    assert_eq!(s[2].think, Duration::from_millis(250));
}

#[test]
fn malformed_files_name_the_line_and_the_problem() {
    // (file text, line of the error, part of the message)
    let cases: &[(&str, usize, &str)] = &[
        ("/a\n  /b\n\n  /c\n", 4, "indented line"),
        ("  /a\n", 1, "indented line"),
        ("/a\n/b think=abc\n", 2, "think=abc: not a number"),
        ("/a think=-1\n", 1, "non-negative"),
        ("/a think=inf\n", 1, "finite"),
        ("/a\n/b method=POST\n", 2, "method=POST is not supported"),
        ("/a method=OPTIONS\n", 1, "method=OPTIONS is not supported"),
        (
            "/a contents='x y'\n",
            1,
            "contents= (a request body) is not supported",
        ),
        ("/a contents='unterminated\n", 1, "unterminated"),
        ("/a\n/b colour=red\n", 2, "unknown attribute 'colour='"),
        ("/a extra\n", 1, "unexpected 'extra'"),
        ("#\n\nfoo.html\n", 3, "must start with '/'"),
    ];
    for &(text, line, msg) in cases {
        match parse(text) {
            Err(WorkloadError::Parse {
                line: l,
                msg: m,
                path,
            }) => {
                assert_eq!(l, line, "{text:?}: {m}");
                assert!(m.contains(msg), "{text:?}: got '{m}', want '{msg}'");
                assert_eq!(path, Path::new("test.log"));
            }
            other => panic!("{text:?}: expected a parse error, got {other:?}"),
        }
        let shown = parse(text).unwrap_err().to_string();
        assert!(shown.starts_with(&format!("test.log:{line}: ")), "{shown}");
    }
}

#[test]
fn empty_and_missing_files_are_errors() {
    for text in ["", "\n\n", "# only\n# comments\n"] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains("test.log") && e.contains("no sessions"), "{e}");
    }
    let e = SessLog::from_file(Path::new("/nonexistent/evlab.sess"), THINK, Method::Get)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/nonexistent/evlab.sess") && e.contains("cannot read"),
        "{e}"
    );
}

#[test]
fn from_file_reads_a_real_file() {
    let path = std::env::temp_dir().join(format!("evlab-sesslog-{}.log", std::process::id()));
    std::fs::write(&path, "/x think=1\n /y\n/z\n").unwrap();
    let log = SessLog::from_file(&path, THINK, Method::Get);
    std::fs::remove_file(&path).unwrap();
    let log = log.unwrap();
    assert_eq!(uris(log.session(0)), ["/x", "/y", "/z"]);
    assert_eq!(log.session(0)[2].think, Duration::from_secs(1));
}

#[test]
fn method_per_line_and_default() {
    let text = "/a method=HEAD\n /b\n /c method=get\n/d\n";
    let log = parse(text).unwrap();
    let methods: Vec<Method> = log.session(0).iter().map(|c| c.method).collect();
    assert_eq!(
        methods,
        [Method::Head, Method::Get, Method::Get, Method::Get],
        "a line without method= takes the default"
    );
    let log = SessLog::parse(text, THINK, Method::Head, Path::new("t")).unwrap();
    let methods: Vec<Method> = log.session(0).iter().map(|c| c.method).collect();
    assert_eq!(
        methods,
        [Method::Head, Method::Head, Method::Get, Method::Head]
    );
}
