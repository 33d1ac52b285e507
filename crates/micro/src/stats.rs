//! Medians and percentiles for the benchmarks' repeated measurements.

/// The median of `xs` (the mean of the middle two for an even count); `None` when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The percentiles a report carries, defined in `evlab-wire`.
pub use evlab_wire::micro::Percentiles;

/// The `p`-th percentile (0–100) of `sorted`, by the nearest-rank method; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Sorts `nanos` and reads the percentiles off it.
pub fn percentiles(nanos: &mut [u64]) -> Percentiles {
    nanos.sort_unstable();
    let us = |n: u64| n as f64 / 1000.0;
    Percentiles {
        count: nanos.len(),
        p50_us: us(percentile(nanos, 50.0)),
        p90_us: us(percentile(nanos, 90.0)),
        p99_us: us(percentile(nanos, 99.0)),
        max_us: us(nanos.last().copied().unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&v, 0.0), 1);
        assert_eq!(percentile(&[], 50.0), 0);
        let mut n = vec![3000, 1000, 2000];
        let p = percentiles(&mut n);
        assert_eq!((p.count, p.p50_us, p.max_us), (3, 2.0, 3.0));
    }
}
