//! The documents keep their format: committed ones (the reference results' load and micro
//! reports, and stats the server and the proxy answered, captured in `tests/data/`) read into
//! the wire types and write out the same JSON value, field for field, so no field was renamed,
//! dropped or added on the way.

use std::path::{Path, PathBuf};

use evlab_wire::load::LoadReport;
use evlab_wire::micro::{fdalloc, herd, malloc, pipetest};
use evlab_wire::proxy::ProxyStats;
use evlab_wire::server::ServerStats;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The reference results of one machine.
fn reference() -> PathBuf {
    workspace().join("results/reference/amd-epyc-2vcpu-linux-6.18")
}

/// Reads `text` into `T` and writes it back; the two JSON values must be equal.
fn round_trip<T: DeserializeOwned + Serialize>(text: &str, what: &str) -> T {
    let typed: T =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: does not read: {e}"));
    let original: Value = serde_json::from_str(text).unwrap();
    let again = serde_json::to_value(&typed).unwrap();
    assert_eq!(again, original, "{what}: written back differently");
    typed
}

/// The first place where a field of `old` is missing from `new` or differs (`new` may add
/// fields), as a path.
fn differs(new: &Value, old: &Value, at: &str) -> Option<String> {
    match (new, old) {
        (Value::Object(n), Value::Object(o)) => o.iter().find_map(|(k, v)| match n.get(k) {
            None => Some(format!("{at}.{k} missing")),
            Some(x) => differs(x, v, &format!("{at}.{k}")),
        }),
        (Value::Array(n), Value::Array(o)) if n.len() == o.len() => n
            .iter()
            .zip(o)
            .enumerate()
            .find_map(|(i, (x, y))| differs(x, y, &format!("{at}[{i}]"))),
        _ if new == old => None,
        _ => Some(format!("{at}: {old} became {new}")),
    }
}

/// As `round_trip`, for a report written before fields were added to its type: it reads,
/// and writes back every field it had, unchanged (the new ones with their defaults).
fn reads_back<T: DeserializeOwned + Serialize>(text: &str, what: &str) -> T {
    let typed: T =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: does not read: {e}"));
    // The old verdict words read back as today's (Verdict's serde aliases).
    let text = text
        .replace("\"verdict\": \"holds\"", "\"verdict\": \"reproduced\"")
        .replace(
            "\"verdict\": \"does-not-hold\"",
            "\"verdict\": \"not-reproduced\"",
        );
    let original: Value = serde_json::from_str(&text).unwrap();
    let again = serde_json::to_value(&typed).unwrap();
    if let Some(d) = differs(&again, &original, "") {
        panic!("{what}: written back differently at {d}");
    }
    typed
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_reference_load_report_reads_and_writes_back_the_same() {
    let path = reference().join("lse-deadconn/load/point-001.json");
    let r: LoadReport = round_trip(&read(&path), "lse-deadconn/load/point-001.json");
    assert_eq!(r.tool, "evlab load");
    assert!(r.replies.total > 0 && r.replies.status.s2xx > 0);
    assert_eq!(r.replies.status.other, 0);
    assert!(!r.samples.is_empty());
}

/// The `quick-run*` reference runs were measured by an older generator, whose `samples` were
/// bare reply rates (now `{start_s, end_s, replies, reply_rate}`) and which had no
/// `interrupted`: their raw reports are kept as they were written and are not read back (the
/// lab re-renders a run from its `summary.json`).
fn older_generator(run: &str) -> bool {
    run.contains("results/archive/")
}

#[test]
fn every_committed_load_report_reads_and_writes_back_the_same() {
    let (mut current, mut older) = (0, 0);
    // The archived one-trial quick runs were written by an older generator.
    let archive = workspace().join("results/archive/amd-epyc-2vcpu-linux-6.18");
    let runs = std::fs::read_dir(reference())
        .unwrap()
        .chain(std::fs::read_dir(archive).unwrap());
    for run in runs {
        let run = run.unwrap().path();
        let Ok(files) = std::fs::read_dir(run.join("load")) else {
            continue;
        };
        let name = run.to_string_lossy().to_string();
        for f in files {
            let f = f.unwrap().path();
            if f.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let what = f.display().to_string();
            if older_generator(&name) {
                let e = serde_json::from_str::<LoadReport>(&read(&f)).unwrap_err();
                assert!(
                    e.to_string().contains("expected struct Sample"),
                    "{what}: {e}"
                );
                older += 1;
            } else {
                round_trip::<LoadReport>(&read(&f), &what);
                current += 1;
            }
        }
    }
    assert!(
        current >= 200 && older > 0,
        "{current} and {older} load reports found"
    );
}

#[test]
fn the_reference_micro_reports_read_and_write_back_the_same() {
    let dir = reference();
    let file = |b: &str| read(&dir.join(format!("{b}/{b}.json")));
    // Written before pipetest's repeats and fdalloc's control existed: their new fields come
    // back with their defaults.
    let p: pipetest::Report = reads_back(&file("pipetest"), "pipetest.json");
    assert!(!p.points.is_empty() && !p.findings.is_empty());
    let h: herd::Report = reads_back(&file("herd"), "herd.json");
    assert!(!h.points.is_empty());
    let f: fdalloc::Report = reads_back(&file("fdalloc"), "fdalloc.json");
    assert!(!f.points.is_empty());
    let m: malloc::Report = reads_back(&file("malloc"), "malloc.json");
    assert!(!m.points.is_empty());
}

/// Stats as the server and the proxy answer them: pretty JSON and a newline. The type writes
/// them back byte for byte.
fn same_bytes<T: DeserializeOwned + Serialize>(text: &str, what: &str) -> T {
    let typed: T = round_trip(text, what);
    assert_eq!(
        serde_json::to_string_pretty(&typed).unwrap() + "\n",
        text,
        "{what}"
    );
    typed
}

#[test]
fn server_stats_read_and_write_back_byte_for_byte() {
    // `evlab serve --stats --profile --workers 2 --mechanism epoll-et`, after a 200 and a 404.
    let s: ServerStats = same_bytes(
        include_str!("data/server-stats.json"),
        "data/server-stats.json",
    );
    assert_eq!((s.workers, s.per_worker.len()), (2, 2));
    assert_eq!((s.responses.s2xx, s.responses.s4xx), (1, 1));
    assert!(s.syscalls["epoll_wait"].ns.is_some());
}

#[test]
fn proxy_stats_read_and_write_back_byte_for_byte() {
    // `evlab proxy --forward splice --stats` in front of `evlab serve`, after two GETs of one
    // file and a 404.
    let s: ProxyStats = same_bytes(
        include_str!("data/proxy-stats.json"),
        "data/proxy-stats.json",
    );
    assert_eq!(s.forward, "splice");
    assert_eq!(
        (s.responses.s2xx, s.responses.s4xx, s.cache.hits),
        (2, 1, 1)
    );
}
