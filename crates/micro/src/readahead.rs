//! readahead: the Linux Scalability Project's "Read-ahead for mmap and sendfile".
//!
//! The LSP taught `mmap` to read ahead on sequential faults, gave applications `madvise` and
//! `mincore` to steer the page cache, and argued that `sendfile`, which reads a file from its
//! start to its end, can always read ahead. evlab measures what today's kernel does with a file
//! that is not in memory: files of 64 KiB to 64 MiB on a real file system, made cold
//! (`posix_fadvise(DONTNEED)`, checked with `mincore`) or warm (read just before), sent over a
//! loopback TCP connection to a reader in this process by read and write, by `mmap` and one
//! write of the mapping (plain, or advised `MADV_SEQUENTIAL` or `MADV_WILLNEED` first) and by
//! `sendfile`. Per point: the time from the first byte sent to the reader's last byte, and the
//! sending thread's CPU time per MiB. Rounds are interleaved: every point once per round.
//!
//! The section states no numbers, so its claims are judged on thresholds fixed before any run
//! (docs/findings.md, family `micro`): cold `sendfile` is at least as fast as cold read and
//! write; plain `mmap` of a cold file is slower than advised `mmap`, which approaches read and
//! write.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::os;
use evlab_sys as sys;
use evlab_sys::{Advice, Mapping};

use crate::plot::{Plot, Xy};
use crate::stats::{Interval, MIN_REPEATS};
use crate::table::{num, Table};
use crate::{render_findings, this_machine, Finding, MicroError, Verdict};

pub use evlab_wire::micro::readahead::{Cache, Point, Report, Status, Way};

/// Rounds by default: the rules need at least [`MIN_REPEATS`].
pub const REPEAT: usize = 5;
/// "At least as fast": cold sendfile's time over cold read and write's at most this (the
/// paper family's 10% margin, `SAME`).
pub const AS_FAST_AT_MOST: f64 = 1.10;
/// "Slower": plain mmap's cold time over advised mmap's at least this (a gap a reader of the
/// LSP's figures would call one, the same 10%).
pub const SLOWER_AT_LEAST: f64 = 1.10;
/// "Approaches read": advised mmap's cold time over read and write's at most this (within a
/// quarter, the scale of the paper family's DEGRADE and PAYS).
pub const APPROACHES_AT_MOST: f64 = 1.25;
/// A file counts as cold when at most this share of its pages stayed in memory.
const COLD_AT_MOST: f64 = 0.05;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub ways: Vec<Way>,
    pub caches: Vec<Cache>,
    /// File sizes, bytes.
    pub sizes: Vec<u64>,
    pub repeat: usize,
    /// Where the files are made (a directory on a disk: tmpfs cannot be made cold); None: a
    /// new directory under /var/tmp, removed at the end.
    pub dir: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            ways: Way::ALL.to_vec(),
            caches: vec![Cache::Cold, Cache::Warm],
            sizes: vec![64 << 10, 1 << 20, 16 << 20, 64 << 20],
            repeat: REPEAT,
            dir: None,
        }
    }
}

/// The files of a run, removed when dropped if the run made their directory.
struct Files {
    dir: PathBuf,
    made_dir: bool,
    paths: Vec<(u64, PathBuf)>,
}

impl Drop for Files {
    fn drop(&mut self) {
        for (_, p) in &self.paths {
            let _ = std::fs::remove_file(p);
        }
        if self.made_dir {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

fn make_files(cfg: &Config) -> Result<Files, MicroError> {
    let (dir, made_dir) = match &cfg.dir {
        Some(d) => (d.clone(), false),
        None => (
            PathBuf::from("/var/tmp").join(format!("evlab-readahead-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir).map_err(MicroError::io(format!("creating {}", dir.display())))?;
    let mut files = Files {
        dir,
        made_dir,
        paths: Vec::new(),
    };
    // Bytes that no file system stores as a hole or compresses away.
    let block: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for &size in &cfg.sizes {
        let p = files.dir.join(format!("readahead-{size}.bin"));
        let what = format!("writing {}", p.display());
        let mut f = std::fs::File::create(&p).map_err(MicroError::io(what.clone()))?;
        files.paths.push((size, p));
        let mut left = size;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            f.write_all(&block[..n])
                .map_err(MicroError::io(what.clone()))?;
            left -= n as u64;
        }
        os::fdatasync(f.as_raw_fd()).map_err(MicroError::io(what))?;
    }
    Ok(files)
}

/// Runs every point, calling `progress` after each.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Point)) -> Result<Report, MicroError> {
    if cfg.ways.is_empty() || cfg.caches.is_empty() || cfg.sizes.is_empty() {
        return Err(MicroError::Config(
            "nothing to run: no way, cache state or size".into(),
        ));
    }
    if cfg.repeat == 0 || cfg.sizes.contains(&0) {
        return Err(MicroError::Config(
            "repeat and every size must be at least 1".into(),
        ));
    }
    let machine = this_machine();
    let files = make_files(cfg)?;
    let filesystem = os::filesystem(&files.dir).unwrap_or_else(|e| format!("unknown ({e})"));
    let mut points = Vec::new();
    for round in 0..cfg.repeat {
        for (size, path) in &files.paths {
            for &cache in &cfg.caches {
                for &way in &cfg.ways {
                    let p = point(path, *size, way, cache, round);
                    progress(&p);
                    points.push(p);
                }
            }
        }
    }
    let mut r = Report {
        benchmark: "readahead".into(),
        machine,
        dir: files.dir.display().to_string(),
        filesystem,
        repeat: cfg.repeat,
        points,
        findings: Vec::new(),
    };
    r.findings = findings(&r);
    Ok(r)
}

fn point(path: &Path, size: u64, way: Way, cache: Cache, round: usize) -> Point {
    let mut p = Point {
        way,
        cache,
        size,
        round,
        status: Status::Ok,
        reason: None,
        resident_before: 0.0,
        seconds: 0.0,
        cpu_us_per_mib: 0.0,
    };
    match measure(path, size, way, cache) {
        Ok(Measured::Done {
            resident,
            seconds,
            cpu,
        }) => {
            p.resident_before = resident;
            p.seconds = seconds;
            p.cpu_us_per_mib = cpu.as_secs_f64() * 1e6 / (size as f64 / (1 << 20) as f64);
        }
        Ok(Measured::NotCold(resident)) => {
            p.status = Status::Skipped;
            p.resident_before = resident;
            p.reason = Some(format!(
                "{:.0}% of the file stayed in the page cache after POSIX_FADV_DONTNEED (a \
                 file system in memory, such as tmpfs, cannot be made cold)",
                resident * 100.0
            ));
        }
        Err(e) => {
            p.status = Status::Failed;
            p.reason = Some(e.to_string());
        }
    }
    p
}

enum Measured {
    Done {
        resident: f64,
        seconds: f64,
        cpu: Duration,
    },
    NotCold(f64),
}

fn measure(path: &Path, size: u64, way: Way, cache: Cache) -> io::Result<Measured> {
    let mut f = std::fs::File::open(path)?;
    let len = usize::try_from(size).map_err(|_| io::Error::other("a file too large to map"))?;
    match cache {
        Cache::Cold => os::drop_cached(f.as_raw_fd())?,
        Cache::Warm => {
            let mut buf = vec![0u8; 1 << 20];
            while f.read(&mut buf)? > 0 {}
            // Back to the start: the read way reads from the file's position.
            std::io::Seek::rewind(&mut f)?;
        }
    }
    let resident = os::resident(f.as_raw_fd(), len)?;
    if cache == Cache::Cold && resident > COLD_AT_MOST {
        return Ok(Measured::NotCold(resident));
    }
    // The reader: accepts one connection and reads until `size` bytes have come.
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> io::Result<Instant> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 256 << 10];
        let mut got = 0u64;
        while got < size {
            match s.read(&mut buf)? {
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the sender stopped short",
                    ))
                }
                n => got += n as u64,
            }
        }
        Ok(Instant::now())
    });
    let mut sock = TcpStream::connect(addr)?;
    let before = sys::getrusage(sys::Who::Thread)?;
    let start = Instant::now();
    let sent = send(&mut f, &mut sock, len, way);
    let after = sys::getrusage(sys::Who::Thread)?;
    let _ = sock.shutdown(std::net::Shutdown::Write);
    let end = reader
        .join()
        .map_err(|_| io::Error::other("the reader thread panicked"))??;
    sent?;
    Ok(Measured::Done {
        resident,
        seconds: end.duration_since(start).as_secs_f64(),
        cpu: after.since(&before).cpu.total(),
    })
}

fn send(f: &mut std::fs::File, sock: &mut TcpStream, len: usize, way: Way) -> io::Result<()> {
    match way {
        Way::Read => {
            let mut buf = vec![0u8; 64 << 10];
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                sock.write_all(&buf[..n])?;
            }
        }
        Way::Mmap | Way::MmapSequential | Way::MmapWillneed => {
            let m = Mapping::new(f.as_raw_fd(), len)?;
            match way {
                Way::MmapSequential => m.advise(Advice::Sequential)?,
                Way::MmapWillneed => m.advise(Advice::WillNeed)?,
                _ => {}
            }
            sock.write_all(m.bytes())
        }
        Way::Sendfile => {
            let mut off = 0i64;
            while (off as usize) < len {
                let left = len - off as usize;
                let n = sys::sendfile(sock.as_raw_fd(), f.as_raw_fd(), &mut off, left)?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file ended early",
                    ));
                }
            }
            Ok(())
        }
    }
}

// ---- judging ----

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
) -> Finding {
    let Some((size, ratios)) = paired(r, a, b) else {
        return Finding::decided(
            id,
            claim,
            Verdict::NotMeasured,
            format!(
                "{} and {} were not both measured cold in one round",
                a.name(),
                b.name()
            ),
        );
    };
    let Some(iv) = Interval::of_mean(&ratios) else {
        return Finding::decided(id, claim, Verdict::NotMeasured, "no finite time".into());
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
    Finding::decided(id, claim, verdict, why)
}

/// The LSP's claims on read-ahead, each on cold files at the largest size measured, one ratio
/// per round, decided on the 90% t interval of their mean.
pub fn findings(r: &Report) -> Vec<Finding> {
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

fn size_words(size: u64) -> String {
    if size >= 1 << 20 && size.is_multiple_of(1 << 20) {
        format!("{} MiB", size >> 20)
    } else if size >= 1 << 10 && size.is_multiple_of(1 << 10) {
        format!("{} KiB", size >> 10)
    } else {
        format!("{size} B")
    }
}

// ---- output ----

/// Mean of `f` over the rounds of each (way, size) at `cache`, as one line per way.
fn lines(r: &Report, cache: Cache, f: fn(&Point) -> f64) -> Vec<(Way, Vec<Xy>)> {
    let mut sizes: Vec<u64> = r.points.iter().map(|p| p.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    Way::ALL
        .into_iter()
        .map(|way| {
            let xy = sizes
                .iter()
                .filter_map(|&size| {
                    let v: Vec<f64> = r
                        .points
                        .iter()
                        .filter(|p| p.way == way && p.cache == cache && p.size == size)
                        .filter(|p| p.status == Status::Ok)
                        .map(f)
                        .collect();
                    (!v.is_empty()).then(|| {
                        Xy::new(size as f64 / 1024.0, v.iter().sum::<f64>() / v.len() as f64)
                    })
                })
                .collect();
            (way, xy)
        })
        .collect()
}

/// A figure's tag, title, y label and quantity.
type Metric = (&'static str, &'static str, &'static str, fn(&Point) -> f64);

/// Per cache state: time to the last byte, and the sender's CPU per MiB, against the file's
/// size (both axes logarithmic), one line per way (means over the rounds).
pub fn plots(r: &Report) -> Vec<Plot> {
    let mut out = Vec::new();
    for cache in [Cache::Cold, Cache::Warm] {
        if !r
            .points
            .iter()
            .any(|p| p.cache == cache && p.status == Status::Ok)
        {
            continue;
        }
        let metrics: [Metric; 2] = [
            ("time", "time to the last byte", "seconds", |p| p.seconds),
            ("cpu", "the sender's CPU per MiB", "CPU µs per MiB", |p| {
                p.cpu_us_per_mib
            }),
        ];
        for (tag, what, y, f) in metrics {
            let mut p = Plot::new(
                &format!("readahead-{tag}-{}", cache.name()),
                format!("{what}, {} files, over a loopback socket", cache.name()),
                "file size (KiB)",
                y,
            )
            .log_x()
            .log_y();
            for (way, xy) in lines(r, cache, f) {
                p.line(way.name(), xy);
            }
            out.push(p);
        }
    }
    out
}

/// The points as a table (means over the rounds), the skipped ones with their reason.
pub fn render(r: &Report) -> String {
    let mut out = format!(
        "readahead: {} round(s), files in {} ({})\n{}\n\n",
        r.repeat,
        r.dir,
        r.filesystem,
        r.machine.line()
    );
    let mut t = Table::new([
        "cache",
        "size",
        "way",
        "rounds",
        "seconds (mean)",
        "MiB/s",
        "CPU us/MiB",
        "resident before",
    ]);
    let mut notes = Vec::new();
    let mut keys: Vec<(Cache, u64, Way)> =
        r.points.iter().map(|p| (p.cache, p.size, p.way)).collect();
    keys.sort_by_key(|(c, s, w)| (*c != Cache::Cold, *s, Way::ALL.iter().position(|x| x == w)));
    keys.dedup();
    for (cache, size, way) in keys {
        let at: Vec<&Point> = r
            .points
            .iter()
            .filter(|p| p.cache == cache && p.size == size && p.way == way)
            .collect();
        let ok: Vec<&&Point> = at.iter().filter(|p| p.status == Status::Ok).collect();
        if ok.is_empty() {
            if let Some(why) = at.iter().find_map(|p| p.reason.as_ref()) {
                notes.push(format!(
                    "  {} {} {}: {why}",
                    cache.name(),
                    size_words(size),
                    way.name()
                ));
            }
            continue;
        }
        let mean = |f: fn(&Point) -> f64| ok.iter().map(|p| f(p)).sum::<f64>() / ok.len() as f64;
        let secs = mean(|p| p.seconds);
        t.row([
            cache.name().to_string(),
            size_words(size),
            way.name().to_string(),
            ok.len().to_string(),
            num(secs, 4),
            num(size as f64 / (1 << 20) as f64 / secs.max(1e-12), 0),
            num(mean(|p| p.cpu_us_per_mib), 0),
            format!("{:.0}%", mean(|p| p.resident_before) * 100.0),
        ]);
    }
    out.push_str(&t.render());
    if !notes.is_empty() {
        out.push_str("\nnot measured:\n");
        for n in notes {
            out.push_str(&n);
            out.push('\n');
        }
    }
    out.push_str(&render_findings(&r.findings));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
            machine: this_machine(),
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

    #[test]
    fn a_small_real_run_measures_every_way() {
        let cfg = Config {
            sizes: vec![256 << 10],
            repeat: 1,
            ..Config::default()
        };
        let r = run(&cfg, |_| {}).unwrap();
        assert_eq!(r.points.len(), Way::ALL.len() * 2);
        for p in &r.points {
            match p.status {
                Status::Ok => {
                    // One sending thread: its CPU time is at most the time the send took (and a
                    // tick of accounting).
                    let cpu_s = p.cpu_us_per_mib * (p.size as f64 / (1 << 20) as f64) / 1e6;
                    assert!(p.seconds > 0.0 && cpu_s >= 0.0, "{p:?}");
                    assert!(cpu_s <= p.seconds + 0.011, "{p:?}");
                    if p.cache == Cache::Warm {
                        assert!(p.resident_before > 0.95, "{p:?}");
                    } else {
                        assert!(p.resident_before <= COLD_AT_MOST, "{p:?}");
                    }
                }
                // Only where the file system keeps every page in memory.
                Status::Skipped => assert_eq!(p.cache, Cache::Cold, "{p:?}"),
                Status::Failed => panic!("{p:?}"),
            }
        }
        assert!(
            !Path::new(&r.dir).exists(),
            "the files and their directory are removed"
        );
        assert_eq!(r.findings.len(), 4);
    }
}
