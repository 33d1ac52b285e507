//! The SPECweb99-like workload: the static part of SPECweb99 over a file set made by
//! `evlab fileset`, drawn the way the μserver study's traces were (see `docs/workloads.md` for
//! every number and its source).
//!
//! Each request picks, independently:
//! - a class by the SPECweb99 mix: 35 % class 0, 50 % class 1, 14 % class 2, 1 % class 3;
//! - a directory by Zipf (α = 1 by default) over the directories: `dir00000` is the most popular;
//! - a file within the class by SPECweb99's within-class table, a Zipf(1) over the 9 files with
//!   the most popular in the middle: 3.9, 5.9, 8.8, 17.7, 35.3, 11.8, 7.1, 5.0, 4.4 %.
//!
//! Each connection (session) makes a number of requests drawn from [`CallsPerConn`]; the default
//! is SPECweb99's: 30 % of connections make one request (HTTP/1.0 style), 70 % are persistent
//! and make 5 to 15, uniformly (mean 7.3 requests per connection).

use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Call, Method, Workload, WorkloadError};
use crate::fileset::{self, CLASSES, FILES_PER_CLASS};
use crate::rng::Rng;

/// SPECweb99's class mix (fraction of requests per class).
pub const SPECWEB99_CLASS_MIX: [f64; CLASSES] = [0.35, 0.50, 0.14, 0.01];

/// Zipf(1) rank of each file of a class (file 4 is the most popular, file 0 the least): this is
/// SPECweb99's within-class table 3.9/5.9/8.8/17.7/35.3/11.8/7.1/5.0/4.4 %, which is exactly
/// `(1/rank) / H(9)` rounded to 0.1 %.
pub const SPECWEB99_FILE_RANK: [u32; FILES_PER_CLASS] = [9, 6, 4, 2, 1, 3, 5, 7, 8];

/// The within-class access probability of each file (from [`SPECWEB99_FILE_RANK`]).
pub fn file_pdf() -> [f64; FILES_PER_CLASS] {
    let h: f64 = (1..=FILES_PER_CLASS).map(|r| 1.0 / r as f64).sum();
    SPECWEB99_FILE_RANK.map(|r| 1.0 / (r as f64 * h))
}

/// The largest directory count the workload precomputes URIs for (36 per directory).
pub const MAX_DIRS: usize = fileset::MAX_DIRS;

/// How many requests each connection makes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CallsPerConn {
    /// Always `n`.
    Fixed(usize),
    /// Uniform over `min..=max`.
    Uniform { min: usize, max: usize },
    /// With probability `single`, one request; otherwise uniform over `min..=max`.
    Mixed { single: f64, min: usize, max: usize },
}

impl CallsPerConn {
    /// SPECweb99's: 30 % one request, 70 % 5..=15 (µserver's `genspec99sesslogs`, after the
    /// SPECweb99 whitepaper's keep-alive rules).
    pub const SPECWEB99: CallsPerConn = CallsPerConn::Mixed {
        single: 0.3,
        min: 5,
        max: 15,
    };

    /// Expected requests per connection.
    pub fn mean(&self) -> f64 {
        match *self {
            CallsPerConn::Fixed(n) => n as f64,
            CallsPerConn::Uniform { min, max } => (min + max) as f64 / 2.0,
            CallsPerConn::Mixed { single, min, max } => {
                single + (1.0 - single) * (min + max) as f64 / 2.0
            }
        }
    }

    fn draw(&self, rng: &mut Rng) -> usize {
        let uniform = |rng: &mut Rng, min: usize, max: usize| {
            min + rng.below((max - min + 1) as u64) as usize
        };
        match *self {
            CallsPerConn::Fixed(n) => n,
            CallsPerConn::Uniform { min, max } => uniform(rng, min, max),
            CallsPerConn::Mixed { single, min, max } => {
                if rng.f64() < single {
                    1
                } else {
                    uniform(rng, min, max)
                }
            }
        }
    }

    fn validate(&self) -> Result<(), String> {
        let range = |min: usize, max: usize| {
            if min == 0 || min > max {
                Err(format!(
                    "requests per connection {min}-{max}: need 1 <= min <= max"
                ))
            } else {
                Ok(())
            }
        };
        match *self {
            CallsPerConn::Fixed(0) => Err("requests per connection must be at least 1".into()),
            CallsPerConn::Fixed(_) => Ok(()),
            CallsPerConn::Uniform { min, max } => range(min, max),
            CallsPerConn::Mixed { single, min, max } => {
                if !(0.0..=1.0).contains(&single) {
                    return Err(format!(
                        "single-request fraction {single} must be within 0..1"
                    ));
                }
                range(min, max)
            }
        }
    }
}

impl std::fmt::Display for CallsPerConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            CallsPerConn::Fixed(n) => write!(f, "{n}"),
            CallsPerConn::Uniform { min, max } => write!(f, "uniform:{min}-{max}"),
            CallsPerConn::Mixed { single, min, max } => write!(f, "mixed:{single},{min}-{max}"),
        }
    }
}

impl FromStr for CallsPerConn {
    type Err = String;
    /// `specweb99`, `N` (or `fixed:N`), `uniform:MIN-MAX`, `mixed:P,MIN-MAX` (P = fraction of
    /// single-request connections).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let bad = || {
            format!(
                "bad requests-per-connection '{s}': expected specweb99, N, uniform:MIN-MAX or \
                 mixed:P,MIN-MAX"
            )
        };
        let num = |t: &str| t.trim().parse::<usize>().map_err(|_| bad());
        let range = |t: &str| -> Result<(usize, usize), String> {
            let (a, b) = t.split_once('-').ok_or_else(bad)?;
            Ok((num(a)?, num(b)?))
        };
        let v = if s.eq_ignore_ascii_case("specweb99") {
            CallsPerConn::SPECWEB99
        } else if let Some(r) = s.strip_prefix("uniform:") {
            let (min, max) = range(r)?;
            CallsPerConn::Uniform { min, max }
        } else if let Some(r) = s.strip_prefix("mixed:") {
            let (p, r) = r.split_once(',').ok_or_else(bad)?;
            let single = p.trim().parse::<f64>().map_err(|_| bad())?;
            let (min, max) = range(r)?;
            CallsPerConn::Mixed { single, min, max }
        } else {
            CallsPerConn::Fixed(num(s.strip_prefix("fixed:").unwrap_or(s))?)
        };
        v.validate()?;
        Ok(v)
    }
}

#[derive(Clone, Debug)]
pub struct SpecWebConfig {
    /// Directories to draw from; 0 reads the count back from the file set.
    pub dirs: usize,
    /// Requests per connection.
    pub calls: CallsPerConn,
    /// Zipf exponent over directories (SPECweb99: 1.0).
    pub dir_alpha: f64,
    /// Fraction of requests per class (normalised; SPECweb99: 35/50/14/1 %).
    pub class_mix: [f64; CLASSES],
    /// Prepended to every URI, for a file set that sits below the server's document root
    /// (e.g. `/specweb`); empty when the file set is the document root.
    pub uri_prefix: String,
}

impl Default for SpecWebConfig {
    fn default() -> Self {
        SpecWebConfig {
            dirs: 0,
            calls: CallsPerConn::SPECWEB99,
            dir_alpha: 1.0,
            class_mix: SPECWEB99_CLASS_MIX,
            uri_prefix: String::new(),
        }
    }
}

/// Tables shared by every clone (one per engine thread).
#[derive(Debug)]
struct Tables {
    /// `[d * 36 + c * 9 + i]`.
    uris: Vec<Arc<str>>,
    dir_cdf: Vec<f64>,
    class_cdf: [f64; CLASSES],
    file_cdf: [f64; FILES_PER_CLASS],
    cfg: SpecWebConfig,
    seed: u64,
    /// Clones taken so far: each gets its own random stream.
    clones: AtomicU64,
}

#[derive(Debug)]
pub struct SpecWeb {
    t: Arc<Tables>,
    rng: Rng,
}

/// A cumulative distribution whose last entry is exactly 1, so a draw in [0, 1) always lands.
fn cdf(weights: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let w: Vec<f64> = weights.into_iter().collect();
    let total: f64 = w.iter().sum();
    let mut acc = 0.0;
    let mut out: Vec<f64> = w
        .iter()
        .map(|x| {
            acc += x / total;
            acc
        })
        .collect();
    if let Some(last) = out.last_mut() {
        *last = 1.0;
    }
    out
}

#[inline]
fn pick(cdf: &[f64], u: f64) -> usize {
    cdf.partition_point(|&c| c <= u).min(cdf.len() - 1)
}

impl SpecWeb {
    /// Builds the workload over the file set at `dir` (made by `evlab fileset`). With
    /// `cfg.dirs == 0` the directory count is read from the file set; with a count given and
    /// the file set present, the count must not exceed what is there (else the server would
    /// answer 404s that look like a slow server). A path that does not exist is accepted with an
    /// explicit count (a server on another host).
    pub fn new(dir: &Path, cfg: SpecWebConfig, seed: u64) -> Result<SpecWeb, WorkloadError> {
        let invalid = |msg: String| WorkloadError::Invalid {
            path: dir.to_path_buf(),
            msg,
        };
        cfg.calls.validate().map_err(WorkloadError::Config)?;
        if !(cfg.dir_alpha.is_finite() && cfg.dir_alpha >= 0.0) {
            return Err(WorkloadError::Config(format!(
                "Zipf alpha {} must be finite and >= 0",
                cfg.dir_alpha
            )));
        }
        if cfg.class_mix.iter().any(|w| !w.is_finite() || *w < 0.0)
            || cfg.class_mix.iter().sum::<f64>() <= 0.0
        {
            return Err(WorkloadError::Config(format!(
                "class mix {:?} must be non-negative with a positive sum",
                cfg.class_mix
            )));
        }
        let found = if dir.exists() {
            Some(
                fileset::inspect(dir)
                    .map_err(|e| invalid(e.to_string()))?
                    .dirs,
            )
        } else {
            None
        };
        let dirs =
            match (cfg.dirs, found) {
                (0, Some(n)) => n,
                (0, None) => return Err(invalid(
                    "no such file set (make one with `evlab fileset`, or give the directory count)"
                        .into(),
                )),
                (n, Some(have)) if n > have => {
                    return Err(invalid(format!(
                        "asked for {n} directories but the file set has {have}"
                    )))
                }
                (n, _) => n,
            };
        if dirs > MAX_DIRS {
            return Err(WorkloadError::Config(format!(
                "{dirs} directories: at most {MAX_DIRS}"
            )));
        }
        let prefix = cfg.uri_prefix.trim_end_matches('/');
        if !prefix.is_empty() && !prefix.starts_with('/') {
            return Err(WorkloadError::Config(format!(
                "URI prefix '{}' must start with '/'",
                cfg.uri_prefix
            )));
        }
        let mut uris = Vec::with_capacity(dirs * CLASSES * FILES_PER_CLASS);
        for d in 0..dirs {
            for c in 0..CLASSES {
                for i in 0..FILES_PER_CLASS {
                    uris.push(Arc::from(format!("{prefix}{}", fileset::uri(d, c, i))));
                }
            }
        }
        let alpha = cfg.dir_alpha;
        let dir_cdf = cdf((0..dirs).map(|d| 1.0 / ((d + 1) as f64).powf(alpha)));
        let class_cdf: [f64; CLASSES] = cdf(cfg.class_mix).try_into().expect("4 classes");
        let file_cdf: [f64; FILES_PER_CLASS] = cdf(file_pdf()).try_into().expect("9 files");
        let cfg = SpecWebConfig { dirs, ..cfg };
        Ok(SpecWeb {
            rng: Rng::new(seed),
            t: Arc::new(Tables {
                uris,
                dir_cdf,
                class_cdf,
                file_cdf,
                cfg,
                seed,
                clones: AtomicU64::new(0),
            }),
        })
    }

    /// The configuration in effect (with the directory count resolved).
    pub fn config(&self) -> &SpecWebConfig {
        &self.t.cfg
    }

    /// One request's (directory, class, file).
    #[inline]
    pub fn draw(&mut self) -> (usize, usize, usize) {
        let class = pick(&self.t.class_cdf, self.rng.f64());
        let dir = pick(&self.t.dir_cdf, self.rng.f64());
        let file = pick(&self.t.file_cdf, self.rng.f64());
        (dir, class, file)
    }

    /// Expected reply body size in bytes under the configured class mix.
    pub fn mean_file_bytes(&self) -> f64 {
        let pdf = file_pdf();
        let mix = &self.t.cfg.class_mix;
        let total: f64 = mix.iter().sum();
        (0..CLASSES)
            .map(|c| {
                mix[c] / total
                    * (0..FILES_PER_CLASS)
                        .map(|i| pdf[i] * fileset::file_size(c, i) as f64)
                        .sum::<f64>()
            })
            .sum()
    }
}

impl Clone for SpecWeb {
    /// Each clone draws its own stream, seeded from the base seed and the clone's ordinal, so
    /// engine threads do not all replay one sequence, and a run with the same seed and thread
    /// count is reproducible.
    fn clone(&self) -> SpecWeb {
        let k = self.t.clones.fetch_add(1, Ordering::Relaxed) + 1;
        SpecWeb {
            t: Arc::clone(&self.t),
            rng: Rng::new(self.t.seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        }
    }
}

impl Workload for SpecWeb {
    fn next_session(&mut self, out: &mut Vec<Call>) {
        let n = self.t.cfg.calls.draw(&mut self.rng).max(1);
        for _ in 0..n {
            let (d, c, i) = self.draw();
            let uri = self.t.uris[(d * CLASSES + c) * FILES_PER_CLASS + i].clone();
            out.push(Call {
                uri,
                think: Duration::ZERO,
                method: Method::Get,
            });
        }
    }

    fn describe(&self) -> String {
        let c = &self.t.cfg;
        format!(
            "SPECweb99-like: {} directories (Zipf alpha {}), class mix {:?}, {} requests per \
             connection (mean {:.2}), mean file {:.0} bytes",
            c.dirs,
            c.dir_alpha,
            c.class_mix,
            c.calls,
            c.calls.mean(),
            self.mean_file_bytes()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_pdf_is_specweb99_table() {
        let table = [
            0.039, 0.059, 0.088, 0.177, 0.353, 0.118, 0.071, 0.050, 0.044,
        ];
        for (p, t) in file_pdf().iter().zip(table) {
            assert!((p - t).abs() < 0.0006, "{p} vs {t}");
        }
        assert!((file_pdf().iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn calls_per_conn_parses() {
        assert_eq!("specweb99".parse(), Ok(CallsPerConn::SPECWEB99));
        assert_eq!("5".parse(), Ok(CallsPerConn::Fixed(5)));
        assert_eq!("fixed:2".parse(), Ok(CallsPerConn::Fixed(2)));
        assert_eq!(
            "uniform:1-9".parse(),
            Ok(CallsPerConn::Uniform { min: 1, max: 9 })
        );
        assert_eq!("mixed:0.3,5-15".parse(), Ok(CallsPerConn::SPECWEB99));
        assert!("0".parse::<CallsPerConn>().is_err());
        assert!("uniform:9-1".parse::<CallsPerConn>().is_err());
        assert!("mixed:2,1-3".parse::<CallsPerConn>().is_err());
        assert!("lots".parse::<CallsPerConn>().is_err());
        assert!((CallsPerConn::SPECWEB99.mean() - 7.3).abs() < 1e-9);
        for s in ["7", "uniform:2-4", "mixed:0.5,1-3"] {
            let v: CallsPerConn = s.parse().unwrap();
            assert_eq!(v.to_string().parse::<CallsPerConn>().unwrap(), v);
        }
    }

    #[test]
    fn pick_covers_edges() {
        let c = cdf([1.0, 1.0]);
        assert_eq!(pick(&c, 0.0), 0);
        assert_eq!(pick(&c, 0.4999), 0);
        assert_eq!(pick(&c, 0.5), 1);
        assert_eq!(pick(&c, 0.99999), 1);
    }
}
