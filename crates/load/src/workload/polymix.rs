//! A Polymix-like workload for a caching proxy: Web Polygraph's Polymix-4 as far as the seeds
//! describe it (Rosu & Rosu, USENIX 2003, §5–6), the rest chosen and said so. Every number and
//! its source is in `docs/workloads.md` ("Polymix-like").
//!
//! The origin's objects are a file set made by `evlab fileset DIR --polymix N`: `N` cacheable
//! objects `/polymix/c/NNNNNN` and `N` uncacheable ones `/polymix/u/NNNNNN` (the origin marks
//! them with `evlab serve --no-store-prefix /polymix/u/`). The size of object *i* is a function
//! of *i* alone ([`SizeDist::size`]), so the file set and the generator agree without sharing
//! anything but `N` and the size rule.
//!
//! Each request is, independently:
//! - with probability `hit_ratio`, an *offered hit*: a cacheable object this stream asked for
//!   before, chosen by Zipf(`zipf`) popularity over the order of first request (the first asked
//!   for is the most popular);
//! - otherwise an *offered miss*: an object never asked for before, uncacheable with
//!   probability `(1 − cacheable) / (1 − hit_ratio)` (so that the uncacheable share of all
//!   requests is `1 − cacheable`), else cacheable.
//!
//! "Never asked for before" holds while this stream has made fewer than `N` new requests of a
//! kind: past that the object numbers wrap, and the proxy may hold a "new" object already. The
//! hit ratio is what the generator *offers*; what the proxy achieves also depends on its cache.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Call, Method, Workload, WorkloadError};
use crate::rng::Rng;

/// The paper's Polymix-4 hit ratio: "The Polymix-4 workload has 58% hit rate" (§5).
pub const POLYMIX4_HIT_RATIO: f64 = 0.58;
/// The paper's Polymix-4 cacheability: "about 70% cacheability ratio" (§5).
pub const POLYMIX4_CACHEABLE: f64 = 0.70;
/// Requests per connection: "drawn from a Zipf(64) distribution" (§5); read as P(k) ∝ 1/k
/// over 1..=64.
pub const POLYMIX4_CALLS_ZIPF: usize = 64;
/// Median object size: "4KBytes is the 50-th percentile" (§5, microbenchmarks).
pub const POLYMIX4_MEDIAN: f64 = 4096.0;
/// Log-normal σ fitted (least squares on ln size) to the paper's other two percentiles,
/// "8KBytes is the 75-th percentile, and 25KBytes is the 95-th percentile": the fit gives
/// 8.4 KB and 24.5 KB. The log-normal shape itself is chosen, not from the seeds.
pub const POLYMIX4_SIGMA: f64 = 1.1017;
/// Object sizes are clamped to this range (chosen, not from the seeds).
pub const SIZE_MIN: u64 = 64;
pub const SIZE_MAX: u64 = 4 << 20;
/// The marker a Polymix file set carries at its top.
pub const MARKER: &str = ".evlab-polymix";
/// The most objects of each kind a file set may have.
pub const MAX_OBJECTS: usize = 1_000_000;

/// How big object *i* is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeDist {
    /// Log-normal with this median and σ, clamped to [`SIZE_MIN`]..=[`SIZE_MAX`].
    LogNormal { median: f64, sigma: f64 },
    /// Every object this many bytes (the paper's microbenchmarks: 4, 8, 12, 25, 64, 128 KB).
    Fixed(u64),
}

impl SizeDist {
    pub const POLYMIX4: SizeDist = SizeDist::LogNormal {
        median: POLYMIX4_MEDIAN,
        sigma: POLYMIX4_SIGMA,
    };

    /// The size of object `i`: a deterministic function of `i`, the same in the file set and
    /// the generator.
    pub fn size(&self, i: u64) -> u64 {
        match *self {
            SizeDist::Fixed(n) => n,
            SizeDist::LogNormal { median, sigma } => {
                // A uniform in (0, 1) from the object number alone.
                let u = ((Rng::new(i ^ 0x5017_4150).next_u64() >> 11) as f64 + 0.5)
                    / (1u64 << 53) as f64;
                let s = median * (sigma * inverse_normal(u)).exp();
                (s.round() as u64).clamp(SIZE_MIN, SIZE_MAX)
            }
        }
    }

    /// `lognormal:MEDIAN,SIGMA` or `fixed:BYTES`, as the marker records it.
    pub fn to_spec(&self) -> String {
        match *self {
            SizeDist::Fixed(n) => format!("fixed:{n}"),
            SizeDist::LogNormal { median, sigma } => format!("lognormal:{median},{sigma}"),
        }
    }

    pub fn from_spec(s: &str) -> Result<SizeDist, String> {
        let bad = || format!("bad size rule '{s}': expected lognormal:MEDIAN,SIGMA or fixed:BYTES");
        if let Some(n) = s.strip_prefix("fixed:") {
            let n: u64 = n.trim().parse().map_err(|_| bad())?;
            return Ok(SizeDist::Fixed(n));
        }
        let r = s.strip_prefix("lognormal:").ok_or_else(bad)?;
        let (m, g) = r.split_once(',').ok_or_else(bad)?;
        let median: f64 = m.trim().parse().map_err(|_| bad())?;
        let sigma: f64 = g.trim().parse().map_err(|_| bad())?;
        if !(median.is_finite() && median > 0.0 && sigma.is_finite() && sigma >= 0.0) {
            return Err(bad());
        }
        Ok(SizeDist::LogNormal { median, sigma })
    }
}

/// The standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9).
pub fn inverse_normal(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[derive(Clone, Debug)]
pub struct PolymixConfig {
    /// Offered hits, as a share of all requests.
    pub hit_ratio: f64,
    /// Cacheable objects, as a share of all requests (at least `hit_ratio`).
    pub cacheable: f64,
    /// Zipf exponent of the offered hits' popularity (chosen: 1.0).
    pub zipf: f64,
    /// Requests per connection: Zipf(1) over 1..=`calls_max` (Polymix-4: 64); 1 for one.
    pub calls_max: usize,
    /// Objects of each kind in the file set; 0 reads the count from the file set's marker.
    pub objects: usize,
    /// Prepended to every URI (a file set below the origin's document root).
    pub uri_prefix: String,
}

impl Default for PolymixConfig {
    fn default() -> Self {
        PolymixConfig {
            hit_ratio: POLYMIX4_HIT_RATIO,
            cacheable: POLYMIX4_CACHEABLE,
            zipf: 1.0,
            calls_max: POLYMIX4_CALLS_ZIPF,
            objects: 0,
            uri_prefix: String::new(),
        }
    }
}

impl PolymixConfig {
    fn validate(&self) -> Result<(), String> {
        let share = |v: f64| v.is_finite() && (0.0..=1.0).contains(&v);
        if !share(self.hit_ratio) || !share(self.cacheable) {
            return Err(format!(
                "hit ratio {} and cacheable share {} must be within 0..1",
                self.hit_ratio, self.cacheable
            ));
        }
        if self.cacheable < self.hit_ratio {
            return Err(format!(
                "cacheable share {} below the hit ratio {}: every hit is a cacheable object",
                self.cacheable, self.hit_ratio
            ));
        }
        if self.hit_ratio == 1.0 && self.cacheable < 1.0 {
            return Err("a hit ratio of 1 leaves no request for uncacheable objects".into());
        }
        if !(self.zipf.is_finite() && self.zipf >= 0.0) {
            return Err(format!(
                "Zipf exponent {} must be finite and >= 0",
                self.zipf
            ));
        }
        if self.calls_max == 0 {
            return Err("requests per connection: the Zipf range must be at least 1".into());
        }
        Ok(())
    }

    /// Expected requests per connection.
    pub fn mean_calls(&self) -> f64 {
        let n = self.calls_max;
        n as f64 / (1..=n).map(|k| 1.0 / k as f64).sum::<f64>()
    }
}

/// `/polymix/c/000042` or `/polymix/u/000042`, relative to the file set's root.
pub fn uri(cacheable: bool, i: usize) -> String {
    format!("/polymix/{}/{i:06}", if cacheable { 'c' } else { 'u' })
}

/// What a Polymix file set's marker says.
#[derive(Clone, Debug, PartialEq)]
pub struct FilesetInfo {
    pub objects: usize,
    pub sizes: SizeDist,
}

/// Reads the marker of a Polymix file set.
pub fn inspect(root: &Path) -> Result<FilesetInfo, WorkloadError> {
    let path = root.join(MARKER);
    let text = std::fs::read_to_string(&path).map_err(|error| WorkloadError::Io {
        path: path.clone(),
        error,
    })?;
    let invalid = |msg: String| WorkloadError::Invalid {
        path: path.clone(),
        msg,
    };
    let mut objects = None;
    let mut sizes = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("objects=") {
            objects = Some(
                v.trim()
                    .parse()
                    .map_err(|_| invalid(format!("bad line '{line}'")))?,
            );
        } else if let Some(v) = line.strip_prefix("sizes=") {
            sizes = Some(SizeDist::from_spec(v.trim()).map_err(invalid)?);
        }
    }
    match (objects, sizes) {
        (Some(objects), Some(sizes)) => Ok(FilesetInfo { objects, sizes }),
        _ => Err(invalid("no objects= or sizes= line".into())),
    }
}

/// What [`create`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateSummary {
    pub files: usize,
    pub total_bytes: u64,
    pub unchanged: usize,
}

/// Writes `objects` cacheable and `objects` uncacheable files under `root/polymix/`, sized by
/// `sizes`, and the marker. Files already right are left alone.
pub fn create(
    root: &Path,
    objects: usize,
    sizes: SizeDist,
) -> Result<CreateSummary, WorkloadError> {
    if objects == 0 || objects > MAX_OBJECTS {
        return Err(WorkloadError::Config(format!(
            "--polymix {objects}: must be between 1 and {MAX_OBJECTS}"
        )));
    }
    if let SizeDist::Fixed(n) = sizes {
        if n > 1 << 30 {
            return Err(WorkloadError::Config(format!(
                "object size {n}: at most 1 GiB"
            )));
        }
    }
    let io = |path: &Path| {
        let path: PathBuf = path.to_path_buf();
        move |error| WorkloadError::Io { path, error }
    };
    const LINE: &[u8; 64] = b"evlab Polymix-like object: deterministic filler content........\n";
    let mut buf: Vec<u8> = Vec::new();
    let mut s = CreateSummary {
        files: 0,
        total_bytes: 0,
        unchanged: 0,
    };
    for kind in ['c', 'u'] {
        let dir = root.join("polymix").join(kind.to_string());
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        for i in 0..objects {
            let len = sizes.size(i as u64) as usize;
            let path = dir.join(format!("{i:06}"));
            s.files += 1;
            s.total_bytes += len as u64;
            if std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == len as u64) {
                // Same size, same rule: the content is the pattern (a damaged file of the
                // right size is not looked for; delete the set to rebuild it).
                s.unchanged += 1;
                continue;
            }
            if buf.len() < len {
                buf = LINE.iter().copied().cycle().take(len).collect();
            }
            std::fs::write(&path, &buf[..len]).map_err(io(&path))?;
        }
    }
    let marker = root.join(MARKER);
    std::fs::write(
        &marker,
        format!(
            "evlab-polymix 1\nobjects={objects}\nsizes={}\n",
            sizes.to_spec()
        ),
    )
    .map_err(io(&marker))?;
    Ok(s)
}

/// Tables shared by every clone (one per engine thread).
#[derive(Debug)]
struct Tables {
    /// `[i]` cacheable, `[objects + i]` uncacheable.
    uris: Vec<Arc<str>>,
    calls_cdf: Vec<f64>,
    /// P(uncacheable | offered miss).
    miss_uncacheable: f64,
    cfg: PolymixConfig,
    sizes: Option<SizeDist>,
    seed: u64,
    clones: AtomicU64,
}

/// The Polymix-like workload; see the module's documentation.
#[derive(Debug)]
pub struct Polymix {
    t: Arc<Tables>,
    rng: Rng,
    /// Where this stream's object numbers start (streams of different threads differ).
    start: usize,
    /// New cacheable and new uncacheable objects asked for so far.
    new_c: usize,
    new_u: usize,
}

/// What one request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Draw {
    pub cacheable: bool,
    pub object: usize,
    /// An offered hit (an object this stream asked for before).
    pub hit: bool,
}

impl Polymix {
    /// Builds the workload over the Polymix file set at `dir` (made by `evlab fileset DIR
    /// --polymix N`); with `cfg.objects` given, a missing `dir` is accepted (an origin on
    /// another host).
    pub fn new(dir: &Path, cfg: PolymixConfig, seed: u64) -> Result<Polymix, WorkloadError> {
        cfg.validate().map_err(WorkloadError::Config)?;
        let info = if dir.join(MARKER).exists() {
            Some(inspect(dir)?)
        } else {
            None
        };
        let objects = match (cfg.objects, &info) {
            (0, Some(i)) => i.objects,
            (0, None) => {
                return Err(WorkloadError::Invalid {
                    path: dir.to_path_buf(),
                    msg: "no Polymix file set (make one with `evlab fileset DIR --polymix N`)"
                        .into(),
                })
            }
            (n, Some(i)) if n > i.objects => {
                return Err(WorkloadError::Invalid {
                    path: dir.to_path_buf(),
                    msg: format!("asked for {n} objects but the file set has {}", i.objects),
                })
            }
            (n, _) => n,
        };
        Self::with_objects(objects, info.map(|i| i.sizes), cfg, seed)
    }

    /// Builds the workload for `objects` objects of each kind, without a file set.
    pub fn with_objects(
        objects: usize,
        sizes: Option<SizeDist>,
        cfg: PolymixConfig,
        seed: u64,
    ) -> Result<Polymix, WorkloadError> {
        cfg.validate().map_err(WorkloadError::Config)?;
        if objects == 0 || objects > MAX_OBJECTS {
            return Err(WorkloadError::Config(format!(
                "{objects} objects: must be between 1 and {MAX_OBJECTS}"
            )));
        }
        let prefix = cfg.uri_prefix.trim_end_matches('/');
        if !prefix.is_empty() && !prefix.starts_with('/') {
            return Err(WorkloadError::Config(format!(
                "URI prefix '{}' must start with '/'",
                cfg.uri_prefix
            )));
        }
        let mut uris = Vec::with_capacity(2 * objects);
        for c in [true, false] {
            for i in 0..objects {
                uris.push(Arc::from(format!("{prefix}{}", uri(c, i))));
            }
        }
        let n = cfg.calls_max;
        let h: f64 = (1..=n).map(|k| 1.0 / k as f64).sum();
        let mut acc = 0.0;
        let mut calls_cdf: Vec<f64> = (1..=n)
            .map(|k| {
                acc += 1.0 / (k as f64 * h);
                acc
            })
            .collect();
        *calls_cdf.last_mut().expect("at least 1") = 1.0;
        let miss_uncacheable = if cfg.hit_ratio >= 1.0 {
            0.0
        } else {
            ((1.0 - cfg.cacheable) / (1.0 - cfg.hit_ratio)).clamp(0.0, 1.0)
        };
        let cfg = PolymixConfig { objects, ..cfg };
        Ok(Polymix {
            rng: Rng::new(seed),
            start: 0,
            new_c: 0,
            new_u: 0,
            t: Arc::new(Tables {
                uris,
                calls_cdf,
                miss_uncacheable,
                cfg,
                sizes,
                seed,
                clones: AtomicU64::new(0),
            }),
        })
    }

    pub fn config(&self) -> &PolymixConfig {
        &self.t.cfg
    }

    /// Zipf(`alpha`) rank in `0..n` (continuous inverse, O(1) whatever `n`): rank 0 the most
    /// popular.
    fn zipf_rank(&mut self, n: usize) -> usize {
        let u = self.rng.f64();
        let alpha = self.t.cfg.zipf;
        let top = (n + 1) as f64;
        let x = if (alpha - 1.0).abs() < 1e-9 {
            top.powf(u)
        } else {
            let e = 1.0 - alpha;
            (1.0 + u * (top.powf(e) - 1.0)).powf(1.0 / e)
        };
        (x.floor() as usize).saturating_sub(1).min(n - 1)
    }

    /// The next request.
    pub fn draw(&mut self) -> Draw {
        let objects = self.t.cfg.objects;
        let wanted_hit = self.rng.f64() < self.t.cfg.hit_ratio;
        if wanted_hit && self.new_c > 0 {
            let r = self.zipf_rank(self.new_c);
            return Draw {
                cacheable: true,
                object: (self.start + r) % objects,
                hit: true,
            };
        }
        // A miss (or a hit asked for before anything could be one: a new cacheable object).
        let uncacheable = !wanted_hit && self.rng.f64() < self.t.miss_uncacheable;
        let counter = if uncacheable {
            &mut self.new_u
        } else {
            &mut self.new_c
        };
        let object = (self.start + *counter) % objects;
        *counter += 1;
        Draw {
            cacheable: !uncacheable,
            object,
            hit: false,
        }
    }

    /// The URI of a draw.
    pub fn uri_of(&self, d: Draw) -> &Arc<str> {
        let objects = self.t.cfg.objects;
        &self.t.uris[if d.cacheable { 0 } else { objects } + d.object]
    }

    fn calls(&mut self) -> usize {
        let u = self.rng.f64();
        let cdf = &self.t.calls_cdf;
        cdf.partition_point(|&c| c <= u).min(cdf.len() - 1) + 1
    }
}

impl Clone for Polymix {
    /// Each clone draws its own stream and starts its object numbers elsewhere, so engine
    /// threads neither replay one sequence nor offer each other's objects as new.
    fn clone(&self) -> Polymix {
        let k = self.t.clones.fetch_add(1, Ordering::Relaxed) + 1;
        let objects = self.t.cfg.objects;
        // Spread by the golden ratio: well apart for any thread count.
        let start = ((k as f64 * 0.618_033_988_749_895).fract() * objects as f64) as usize;
        Polymix {
            t: Arc::clone(&self.t),
            rng: Rng::new(self.t.seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            start: start % objects,
            new_c: 0,
            new_u: 0,
        }
    }
}

impl Workload for Polymix {
    fn next_session(&mut self, out: &mut Vec<Call>) {
        let n = self.calls();
        for _ in 0..n {
            let d = self.draw();
            out.push(Call {
                uri: self.uri_of(d).clone(),
                think: Duration::ZERO,
                method: Method::Get,
            });
        }
    }

    fn describe(&self) -> String {
        let c = &self.t.cfg;
        format!(
            "Polymix-like: {} objects of each kind{}, offered hit ratio {}, cacheable {}, Zipf {} \
             popularity, requests per connection Zipf over 1..={} (mean {:.2})",
            c.objects,
            self.t
                .sizes
                .map(|s| format!(" (sizes {})", s.to_spec()))
                .unwrap_or_default(),
            c.hit_ratio,
            c.cacheable,
            c.zipf,
            c.calls_max,
            c.mean_calls()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_normal_matches_known_quantiles() {
        for (p, z) in [
            (0.5, 0.0),
            (0.75, 0.674_489_75),
            (0.95, 1.644_853_63),
            (0.01, -2.326_347_87),
        ] {
            assert!(
                (inverse_normal(p) - z).abs() < 1e-6,
                "{p}: {}",
                inverse_normal(p)
            );
        }
    }

    #[test]
    fn size_specs_round_trip() {
        for s in [SizeDist::POLYMIX4, SizeDist::Fixed(8192)] {
            assert_eq!(SizeDist::from_spec(&s.to_spec()), Ok(s));
        }
        assert!(SizeDist::from_spec("lognormal:-1,1").is_err());
        assert!(SizeDist::from_spec("big").is_err());
    }

    #[test]
    fn refuses_impossible_mixes() {
        let bad = |hit_ratio, cacheable| {
            let cfg = PolymixConfig {
                hit_ratio,
                cacheable,
                ..PolymixConfig::default()
            };
            Polymix::with_objects(10, None, cfg, 1).is_err()
        };
        assert!(bad(0.6, 0.5));
        assert!(bad(1.0, 0.9));
        assert!(bad(-0.1, 0.5));
        assert!(!bad(0.0, 0.0));
        assert!(!bad(1.0, 1.0));
    }
}
