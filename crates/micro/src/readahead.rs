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

use crate::{this_machine, MicroError};

/// The findings, figures and table, from the report alone (`evlab-reason`, which the lab reads
/// them with too).
pub use evlab_reason::analysis::micro::readahead::{
    findings, APPROACHES_AT_MOST, AS_FAST_AT_MOST, RULE_IDS, SLOWER_AT_LEAST,
};
pub use evlab_reason::render::micro::readahead::{plots, render};

pub use evlab_wire::micro::readahead::{Cache, Point, Report, Status, Way};

/// Rounds by default: the rules need at least
/// [`MIN_REPEATS`](evlab_reason::analysis::sample::MIN_REPEATS).
pub const REPEAT: usize = 5;
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

#[cfg(test)]
mod tests {
    use super::*;

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
