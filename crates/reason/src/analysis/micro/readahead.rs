//! readahead's findings (the Linux Scalability Project's read-ahead for mmap and sendfile):
//! cold times of two ways paired by round, at the largest size, against thresholds fixed
//! before any run. `evlab-micro` runs the benchmark.

use evlab_wire::micro::readahead::{Cache, Report, Status, Way};
use evlab_wire::micro::{Finding, Verdict};

use crate::analysis::micro::{Judged, Measure};
use crate::analysis::sample::{Interval, MIN_REPEATS};

/// "At least as fast": cold sendfile's time over cold read and write's at most this (the
/// paper family's 10% margin, `SAME`).
pub const AS_FAST_AT_MOST: f64 = 1.10;
/// "Slower": plain mmap's cold time over advised mmap's at least this (a gap a reader of the
/// LSP's figures would call one, the same 10%).
pub const SLOWER_AT_LEAST: f64 = 1.10;
/// "Approaches read": advised mmap's cold time over read and write's at most this (within a
/// quarter, the scale of the paper family's DEGRADE and PAYS).
pub const APPROACHES_AT_MOST: f64 = 1.25;
/// The registry ids of the findings (the lab's `analysis::rules`, docs/findings.md).
pub const RULE_IDS: [&str; 4] = [
    "readahead-sendfile-as-read",
    "readahead-mmap-slower-than-sequential",
    "readahead-mmap-slower-than-willneed",
    "readahead-advised-mmap-near-read",
];

/// The cold times of `way` at `size`, by round.
fn cold_times(r: &Report, way: Way, size: u64) -> Vec<(usize, f64)> {
    r.points
        .iter()
        .filter(|p| p.way == way && p.size == size && p.cache == Cache::Cold)
        .filter(|p| p.status == Status::Ok && p.seconds > 0.0)
        .map(|p| (p.round, p.seconds))
        .collect()
}

/// A over B (cold times, paired by round) at the largest size both were measured at in the
/// most rounds; the size and one ratio per round.
fn paired(r: &Report, a: Way, b: Way) -> Option<(u64, Vec<f64>)> {
    let mut sizes: Vec<u64> = r.points.iter().map(|p| p.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|size| {
            let bs = cold_times(r, b, size);
            let ratios: Vec<f64> = cold_times(r, a, size)
                .into_iter()
                .filter_map(|(round, ta)| {
                    bs.iter()
                        .find(|(rb, _)| *rb == round)
                        .map(|(_, tb)| ta / tb)
                })
                .collect();
            (size, ratios)
        })
        .filter(|(_, v)| !v.is_empty())
        .max_by_key(|(size, v)| (v.len(), *size))
}

fn judge(
    r: &Report,
    id: &str,
    claim: &str,
    (a, b): (Way, Way),
    at_most: Option<f64>,
    at_least: Option<f64>,
) -> Judged {
    let Some((size, ratios)) = paired(r, a, b) else {
        let why = format!(
            "{} and {} were not both measured cold in one round",
            a.name(),
            b.name()
        );
        return Judged::new(Finding::decided(id, claim, Verdict::NotMeasured, why), None);
    };
    let Some(iv) = Interval::of_mean(&ratios) else {
        return Judged::new(
            Finding::decided(id, claim, Verdict::NotMeasured, "no finite time".into()),
            None,
        );
    };
    let verdict = match (at_most, at_least) {
        (Some(x), _) => iv.at_most(x),
        (None, Some(x)) => iv.at_least(x),
        (None, None) => Verdict::NotMeasured,
    };
    let mut why = format!(
        "{} over {} cold at {}: {}",
        a.name(),
        b.name(),
        size_words(size),
        iv.words(2, "rounds")
    );
    if iv.n < MIN_REPEATS {
        why.push_str(&format!(" ({} round(s): {MIN_REPEATS} needed)", iv.n));
    }
    let what = format!(
        "{}'s cold time ÷ {}'s, {}",
        a.name(),
        b.name(),
        size_words(size)
    );
    Judged::new(
        Finding::decided(id, claim, verdict, why),
        Measure::of(&iv, what),
    )
}

/// The LSP's claims on read-ahead, each on cold files at the largest size measured, one ratio
/// per round, decided on the 90% t interval of their mean.
pub fn findings(r: &Report) -> Vec<Finding> {
    judged(r).into_iter().map(|j| j.finding).collect()
}

/// [`findings`], each with the measure it was decided on: A's cold time over B's.
pub fn judged(r: &Report) -> Vec<Judged> {
    vec![
        judge(
            r,
            RULE_IDS[0],
            "cold sendfile is at least as fast as cold read and write (its time at most 1.10×)",
            (Way::Sendfile, Way::Read),
            Some(AS_FAST_AT_MOST),
            None,
        ),
        judge(
            r,
            RULE_IDS[1],
            "plain mmap of a cold file is slower than mmap advised MADV_SEQUENTIAL (its time at least 1.10×)",
            (Way::Mmap, Way::MmapSequential),
            None,
            Some(SLOWER_AT_LEAST),
        ),
        judge(
            r,
            RULE_IDS[2],
            "plain mmap of a cold file is slower than mmap advised MADV_WILLNEED (its time at least 1.10×)",
            (Way::Mmap, Way::MmapWillneed),
            None,
            Some(SLOWER_AT_LEAST),
        ),
        judge(
            r,
            RULE_IDS[3],
            "mmap advised MADV_SEQUENTIAL approaches read and write on a cold file (its time at most 1.25×)",
            (Way::MmapSequential, Way::Read),
            Some(APPROACHES_AT_MOST),
            None,
        ),
    ]
}

/// A size in the largest binary unit that divides it: 64 MiB, 256 KiB, 100 B.
pub fn size_words(size: u64) -> String {
    if size >= 1 << 20 && size.is_multiple_of(1 << 20) {
        format!("{} MiB", size >> 20)
    } else if size >= 1 << 10 && size.is_multiple_of(1 << 10) {
        format!("{} KiB", size >> 10)
    } else {
        format!("{size} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evlab_wire::micro::readahead::Point;

    fn report(times: &[(Way, [f64; 3])]) -> Report {
        let mut points = Vec::new();
        for (way, t) in times {
            for (round, &s) in t.iter().enumerate() {
                for size in [1 << 20, 64 << 20] {
                    points.push(Point {
                        way: *way,
                        cache: Cache::Cold,
                        size,
                        round,
                        status: Status::Ok,
                        reason: None,
                        resident_before: 0.0,
                        seconds: s * (size as f64 / (64 << 20) as f64),
                        cpu_us_per_mib: 100.0,
                    });
                }
            }
        }
        Report {
            benchmark: "readahead".into(),
            machine: crate::analysis::micro::machine(),
            dir: "/var/tmp/x".into(),
            filesystem: "ext4".into(),
            repeat: 3,
            points,
            findings: vec![],
        }
    }

    #[test]
    fn the_rules_decide_on_rounds_at_the_largest_size() {
        use Verdict::*;
        // The LSP's shape: sendfile as fast as read, plain mmap far slower than advised.
        let r = report(&[
            (Way::Read, [1.0, 1.02, 0.98]),
            (Way::Sendfile, [0.9, 0.92, 0.88]),
            (Way::Mmap, [2.0, 2.1, 1.9]),
            (Way::MmapSequential, [1.05, 1.07, 1.03]),
            (Way::MmapWillneed, [1.0, 1.0, 1.0]),
        ]);
        let f = findings(&r);
        let v: Vec<Verdict> = f.iter().map(|x| x.verdict).collect();
        assert_eq!(v, [Reproduced, Reproduced, Reproduced, Reproduced]);
        assert!(
            f[0].evidence
                .starts_with("sendfile over read cold at 64 MiB: 0.90 ["),
            "{}",
            f[0].evidence
        );
        // The opposite shape.
        let r = report(&[
            (Way::Read, [1.0, 1.0, 1.0]),
            (Way::Sendfile, [2.0, 2.05, 1.95]),
            (Way::Mmap, [1.0, 1.0, 1.01]),
            (Way::MmapSequential, [1.0, 1.01, 1.0]),
            (Way::MmapWillneed, [1.0, 1.0, 1.0]),
        ]);
        let v: Vec<Verdict> = findings(&r).iter().map(|x| x.verdict).collect();
        assert_eq!(v, [NotReproduced, NotReproduced, NotReproduced, Reproduced]);
        // Nothing cold measured: not measured.
        let mut r = report(&[(Way::Read, [1.0, 1.0, 1.0])]);
        r.points.clear();
        assert!(findings(&r).iter().all(|f| f.verdict == NotMeasured));
    }
}
