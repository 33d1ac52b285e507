//! Merging clients' load reports: percentiles from the merged histogram equal those of every
//! raw sample pooled (within the histogram's precision, and exactly those of one histogram of
//! them all), counts add, the window is the latest start to the earliest end, and reports that
//! cannot be merged are refused with the reason.

use std::collections::BTreeMap;

use evlab_wire::histogram::{EncodedHistogram, HistogramError};
use evlab_wire::load::*;
use evlab_wire::merge::{merge, MergeError};
use hdrhistogram::Histogram;

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap()
}

/// A small deterministic generator (xorshift), uniform in [0, 1).
struct Rand(u64);

impl Rand {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Latencies in µs of one shape.
fn shape(name: &str, n: usize, seed: u64) -> Vec<u64> {
    let mut r = Rand(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..n)
        .map(|_| {
            let u = r.next();
            let v = match name {
                "uniform" => 50.0 + u * 2_000.0,
                "exponential" => 300.0 * -(1.0 - u).ln(),
                // Most replies fast, a tenth stalled behind a 200 ms hiccup.
                "bimodal" if u < 0.9 => 80.0 + r.next() * 40.0,
                "bimodal" => 200_000.0 + r.next() * 50_000.0,
                // Pareto, α = 1.2: a long tail.
                "pareto" => 100.0 / (1.0 - u).powf(1.0 / 1.2),
                "constant" => 777.0,
                _ => unreachable!(),
            };
            (v as u64).clamp(1, 3_000_000_000)
        })
        .collect()
}

fn zeros() -> TimeSummary {
    TimeSummary {
        min: 0.0,
        avg: 0.0,
        max: 0.0,
        median: 0.0,
        stddev: 0.0,
    }
}

/// A client's report: its latencies, its clock, and counts derived from `k` so that sums are
/// checkable.
fn report(lat: &[u64], started_at: f64, duration_s: f64, k: u64) -> LoadReport {
    let mut h = hist();
    for &v in lat {
        h.record(v).unwrap();
    }
    let replies = lat.len() as u64;
    // Replies spread over one-second samples, the last one partial.
    let n = duration_s.ceil() as usize;
    let mut samples = Vec::new();
    for i in 0..n {
        let share = replies / n as u64 + u64::from(i == 0) * (replies % n as u64);
        samples.push(Sample {
            start_s: i as f64,
            end_s: (i + 1) as f64,
            replies: share,
            reply_rate: share as f64,
            partial: false,
        });
    }
    LoadReport {
        tool: "evlab load".into(),
        version: "0.1.0".into(),
        config: RunConfig {
            server: "127.0.0.1".into(),
            port: 8080,
            rate: 100.0 * k as f64,
            poisson: false,
            num_conns: Some(replies),
            duration_s: None,
            stop_after_s: None,
            timeout_s: 5.0,
            threads: 1,
            pipeline: 1,
            source_addrs: 64,
            workload: None,
            closed_loop: false,
            request_rate: None,
        },
        duration_s,
        connections: Connections {
            initiated: replies + k,
            completed: replies,
            max_concurrent: k,
            rate: 0.0,
            conn_time_ms: zeros(),
            connect_ms: zeros(),
            replies_per_conn: 1.0,
        },
        requests: Requests {
            sent: replies + 2 * k,
            rate: 0.0,
        },
        replies: Replies {
            total: replies,
            rate: ReplyRate {
                min: 0.0,
                avg: 0.0,
                max: 0.0,
                stddev: 0.0,
                samples: 0,
            },
            response_ms: Mean { avg: 0.0 },
            transfer_ms: Mean { avg: 0.0 },
            size: ReplySize {
                header: 0.0,
                content: 0.0,
                footer: 0.0,
                total: 0.0,
            },
            status: StatusClasses {
                s1xx: 0,
                s2xx: replies - k.min(replies),
                s3xx: 0,
                s4xx: k.min(replies),
                s5xx: 0,
                other: 0,
            },
        },
        latency_ms: Latency::from_histogram(&h, 1e3),
        latency_uncorrected_ms: None,
        late_starts: LateStarts {
            count: k,
            max_ms: k as f64,
        },
        schedule: Schedule {
            offered_rate: 100.0 * k as f64,
            achieved_start_rate: None,
            lateness_ms: Lateness {
                p50: 0.0,
                p90: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
            },
            end_lag_ms: 0.0,
            lag_ms: Vec::new(),
        },
        cpu: Cpu {
            user_s: 0.0,
            system_s: 0.0,
            percent: 0.0,
            quota_cpus: None,
            throttled_s: None,
        },
        net: Net {
            kb_per_s: 0.0,
            bytes_in: 1000 * k,
            bytes_out: 10 * k,
        },
        errors: ErrorCounts {
            total: 3 * k,
            by_cause: Errors {
                client_timo: k,
                connreset: 2 * k,
                ..Errors::default()
            },
        },
        samples,
        syscalls: BTreeMap::new(),
        interrupted: false,
        clock: Some(Clock {
            start_at: Some(1_000.0),
            started_at,
            late_ms: Some((started_at - 1_000.0) * 1e3),
            ended_at: started_at + duration_s,
        }),
        latency_histogram: Some(EncodedHistogram::encode(&h, "us").unwrap()),
    }
}

fn named(parts: Vec<LoadReport>) -> Vec<(String, LoadReport)> {
    parts
        .into_iter()
        .enumerate()
        .map(|(i, r)| (format!("client{i}.json"), r))
        .collect()
}

/// The value at quantile `q` of `sorted`, as HdrHistogram ranks it: the ceil(q·n)-th.
fn exact(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

#[test]
fn merged_percentiles_are_those_of_all_samples_pooled() {
    let cases: &[&[(&str, usize)]] = &[
        &[("uniform", 5_000), ("uniform", 3_000)],
        &[("exponential", 20_000), ("bimodal", 7_000)],
        &[("pareto", 4_000), ("constant", 100), ("exponential", 9_000)],
        &[
            ("bimodal", 2_000),
            ("pareto", 30_000),
            ("uniform", 1),
            ("exponential", 12_345),
        ],
    ];
    let mut averaging_would_have_differed = false;
    for (c, parts) in cases.iter().enumerate() {
        let lats: Vec<Vec<u64>> = parts
            .iter()
            .enumerate()
            .map(|(i, &(s, n))| shape(s, n, (c * 10 + i) as u64 + 1))
            .collect();
        let reports = lats
            .iter()
            .enumerate()
            .map(|(i, l)| report(l, 1_000.0 + i as f64 * 0.01, 10.0, i as u64 + 1))
            .collect();
        let m = merge(&named(reports)).unwrap();
        let mut pooled: Vec<u64> = lats.concat();
        pooled.sort_unstable();
        let mut one = hist();
        for &v in &pooled {
            one.record(v).unwrap();
        }
        let got = [
            (0.5, m.latency_ms.p50),
            (0.9, m.latency_ms.p90),
            (0.99, m.latency_ms.p99),
            (0.999, m.latency_ms.p999),
        ];
        for (q, ms) in got {
            let raw = exact(&pooled, q);
            let us = (ms * 1e3).round() as u64;
            // The raw sample's bucket: the histogram reports its highest equivalent value.
            assert_eq!(us, one.highest_equivalent(raw), "case {c} q {q}: raw {raw}");
            assert_eq!(us, one.value_at_quantile(q), "case {c} q {q}");
            // Within the precision of 3 significant figures.
            assert!(
                us >= raw && (us - raw) as f64 <= raw as f64 / 1000.0 + 1.0,
                "case {c} q {q}: {us} µs for a raw {raw} µs"
            );
        }
        let max = *pooled.last().unwrap();
        assert_eq!(
            (m.latency_ms.max * 1e3).round() as u64,
            one.highest_equivalent(max)
        );
        let mean = pooled.iter().sum::<u64>() as f64 / pooled.len() as f64;
        assert!(
            (m.latency_ms.mean * 1e3 - mean).abs() <= mean / 1000.0,
            "case {c}: mean {} against {mean}",
            m.latency_ms.mean * 1e3
        );
        // The merged histogram is the pooled one, and says so.
        let back = m.latency_histogram.decode().unwrap();
        assert_eq!(back.len(), pooled.len() as u64);
        assert_eq!(back, one);
        let avg_p99 = m.clients.iter().map(|c| c.p99_ms).sum::<f64>() / m.clients.len() as f64;
        if (avg_p99 - m.latency_ms.p99).abs() > m.latency_ms.p99 / 100.0 {
            averaging_would_have_differed = true;
        }
    }
    assert!(averaging_would_have_differed);
}

#[test]
fn counts_add_and_rates_are_over_the_common_window() {
    // Three clients: started 0, 50 and 20 ms after 1000 s, running 10, 10 and 9.5 s.
    let a = report(&shape("uniform", 1_000, 1), 1_000.0, 10.0, 1);
    let b = report(&shape("exponential", 2_000, 2), 1_000.05, 10.0, 2);
    let c = report(&shape("bimodal", 500, 3), 1_000.02, 9.5, 3);
    let m = merge(&named(vec![a.clone(), b.clone(), c.clone()])).unwrap();
    let all = [&a, &b, &c];
    let sum = |f: &dyn Fn(&LoadReport) -> u64| all.iter().map(|r| f(r)).sum::<u64>();
    assert_eq!(m.replies.total, 3_500);
    assert_eq!(m.connections.initiated, sum(&|r| r.connections.initiated));
    assert_eq!(m.connections.completed, sum(&|r| r.connections.completed));
    assert_eq!(m.connections.max_concurrent, 6);
    assert_eq!(m.requests.sent, sum(&|r| r.requests.sent));
    assert_eq!(m.replies.status.s2xx, 3_500 - 6);
    assert_eq!(m.replies.status.s4xx, 6);
    assert_eq!(m.replies.status.total(), 3_500);
    assert_eq!(
        (
            m.errors.total,
            m.errors.by_cause.client_timo,
            m.errors.by_cause.connreset
        ),
        (18, 6, 12)
    );
    assert_eq!((m.net.bytes_in, m.net.bytes_out), (6_000, 60));
    assert_eq!((m.late_starts.count, m.late_starts.max_ms), (6, 3.0));
    // The window: the latest start (b's) to the earliest end (c's).
    assert_eq!(m.window.start, 1_000.05);
    assert_eq!(m.window.end, 1_000.02 + 9.5);
    assert!((m.window.duration_s - 9.47).abs() < 1e-9);
    assert_eq!(m.clients.len(), 3);
    assert_eq!(m.clients[1].name, "client1.json");
    assert!((m.clients[1].late_ms.unwrap() - 50.0).abs() < 1e-6);
    // Each client's own rate, summed; and the offered rates.
    let own = 1_000.0 / 10.0 + 2_000.0 / 10.0 + 500.0 / 9.5;
    assert!((m.rates.reply_rate_sum - own).abs() < 1e-9);
    assert_eq!(m.rates.offered_rate_sum, 600.0);
    // Inside the window (1000.05 to 1009.52): a loses the first 50 ms and the last 480 ms of
    // its one-second samples, b the last 530 ms, c its first 30 ms (its last sample, cut
    // short by its end at 9.5 s, is wholly inside); a sample's replies taken as even.
    let per_s = |r: &LoadReport, i: usize| r.samples[i].replies as f64;
    let expect = 3_500.0
        - per_s(&a, 0) * 0.05
        - per_s(&a, 9) * 0.48
        - per_s(&b, 9) * 0.53
        - per_s(&c, 0) * 0.03;
    assert!(
        (m.rates.window_replies - expect).abs() < 1e-6,
        "{} against {expect}",
        m.rates.window_replies
    );
    assert!((m.rates.window_reply_rate - expect / 9.47).abs() < 1e-6);
    // The merged report reads back as itself.
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(
        serde_json::from_str::<evlab_wire::merge::MergedLoad>(&json).unwrap(),
        m
    );
}

#[test]
fn unlike_or_incomplete_reports_are_refused() {
    let a = report(&shape("uniform", 100, 1), 1_000.0, 5.0, 1);
    let mut b = report(&shape("uniform", 100, 2), 1_000.0, 5.0, 1);
    let mismatch = |m: Result<_, MergeError>, what: &str| match m {
        Err(MergeError::Histogram {
            name,
            err: HistogramError::Mismatch { what: w, .. },
        }) => {
            assert_eq!(name, "client1.json");
            assert_eq!(w, what);
        }
        r => panic!("{what}: {r:?}"),
    };
    // Another precision.
    let mut two = Histogram::new_with_bounds(1, 3_600_000_000, 2).unwrap();
    two.record(100).unwrap();
    b.latency_histogram = Some(EncodedHistogram::encode(&two, "us").unwrap());
    mismatch(
        merge(&named(vec![a.clone(), b.clone()])),
        "precision (significant figures)",
    );
    // Another unit.
    let mut ns = hist();
    ns.record(100_000).unwrap();
    b.latency_histogram = Some(EncodedHistogram::encode(&ns, "ns").unwrap());
    mismatch(merge(&named(vec![a.clone(), b.clone()])), "unit");
    // Corrupt data: an error naming the client.
    let mut bad = a.latency_histogram.clone().unwrap();
    bad.data = bad.data[..bad.data.len() / 2].to_string();
    b.latency_histogram = Some(bad);
    let e = merge(&named(vec![a.clone(), b.clone()])).unwrap_err();
    assert!(e.to_string().starts_with("client1.json: "), "{e}");
    // No histogram, no clock: written by an older generator.
    b.latency_histogram = None;
    assert_eq!(
        merge(&named(vec![a.clone(), b.clone()])).unwrap_err(),
        MergeError::NoHistogram("client1.json".into())
    );
    let mut c = a.clone();
    c.clock = None;
    assert_eq!(
        merge(&named(vec![a.clone(), c])).unwrap_err(),
        MergeError::NoClock("client1.json".into())
    );
    // Runs one after the other have no common window.
    let later = report(&shape("uniform", 100, 3), 1_010.0, 5.0, 1);
    assert!(matches!(
        merge(&named(vec![a.clone(), later])),
        Err(MergeError::NoOverlap { .. })
    ));
    assert_eq!(merge(&[]).unwrap_err(), MergeError::Empty);
    // One report merges into itself.
    let m = merge(&named(vec![a.clone()])).unwrap();
    assert_eq!(m.latency_ms, a.latency_ms);
    assert_eq!(m.latency_histogram, a.latency_histogram.unwrap());
}
