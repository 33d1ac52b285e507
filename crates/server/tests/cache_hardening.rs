//! The content cache hardened, checked through the real server for every mechanism:
//! - a directory swapped with a symlink to outside the root while requests go through other
//!   symlinks to it never serves the outside file;
//! - HEAD (and 304) answers hold no bodies and no descriptors;
//! - bodies held in memory are bounded by bytes, and stay byte-exact when evicted.

mod common;

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

/// The tests that measure this process's memory and descriptors take turns (`cargo test` runs
/// a binary's tests as threads of one process; nextest gives each its own).
static MEASURE: Mutex<()> = Mutex::new(());

const MIB: usize = 1 << 20;

/// This process's resident anonymous memory (heap), in bytes.
fn rss_anon() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .expect("RssAnon in /proc/self/status");
    let kib: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("RssAnon value");
    kib * 1024
}

/// How many of this process's descriptors are open on something under `dir`.
fn fds_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

/// Distinct contents of `len` bytes, one per `seed`.
fn content(seed: u32, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i ^ seed.wrapping_mul(0x9e37_79b9)).wrapping_mul(2_654_435_761) as u8)
        .collect()
}

/// `files` distinct files of `len` bytes under `dir`, each reachable by `links` names (hard
/// links: many cache entries, little disk). Returns (name, content index) per path.
fn linked_files(dir: &Path, files: u32, links: u32, len: usize) -> (Vec<Vec<u8>>, Vec<String>) {
    std::fs::create_dir_all(dir).unwrap();
    let bodies: Vec<Vec<u8>> = (0..files).map(|f| content(f + 1, len)).collect();
    let mut names = Vec::new();
    for (f, body) in bodies.iter().enumerate() {
        let first = dir.join(format!("f{f}-0.bin"));
        std::fs::write(&first, body).unwrap();
        names.push(format!("f{f}-0.bin"));
        for l in 1..links {
            let name = format!("f{f}-{l}.bin");
            std::fs::hard_link(&first, dir.join(&name)).unwrap();
            names.push(name);
        }
    }
    (bodies, names)
}

fn index_of(name: &str) -> usize {
    name[1..name.find('-').unwrap()].parse().unwrap()
}

mod cases {
    use super::*;

    /// Issue "Hardening", item 1: `d` (a directory inside the root) is swapped again and again
    /// with `x`, a symlink to a directory outside, while `GET /L<i>/secret.txt` goes through
    /// the symlinks `L<i> -> d`. Canonicalise-then-open followed the swapped-in symlink at the
    /// open; resolving beneath the root's descriptor never leaves it.
    pub fn swapped_symlink_never_serves_outside(m: &str) {
        let Some(t) = start(m, |_| {}) else { return };
        let root = t.docroot();
        let outside = t.root.outside.join("dir");
        std::fs::create_dir_all(&outside).unwrap();
        const OUTSIDE: &[u8] = b"outside the root: must never be served\n";
        const INSIDE: &[u8] = b"inside\n";
        std::fs::write(outside.join("secret.txt"), OUTSIDE).unwrap();
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/secret.txt"), INSIDE).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("x")).unwrap();
        const N: usize = 3000;
        for i in 0..N {
            std::os::unix::fs::symlink("d", root.join(format!("L{i}"))).unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            let (d, x) = (root.join("d"), root.join("x"));
            std::thread::spawn(move || {
                let mut swaps = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    evlab_sys::rename_exchange(&d, &x).expect("renameat2 RENAME_EXCHANGE");
                    swaps += 1;
                }
                swaps
            })
        };
        let (mut outside_bodies, mut inside_bodies, mut others) = (0, 0, 0);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut s = connect(t.addr);
        let mut buf = Vec::new();
        let mut sent = 0;
        // Every path once: each is a fresh load, not an answer cached for a second.
        for i in 0..N {
            if Instant::now() > deadline {
                break;
            }
            write!(s, "GET /L{i}/secret.txt HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            let r = read_response(&mut s, &mut buf, false).expect("a response");
            sent += 1;
            match (r.status, r.body.as_slice()) {
                (_, b) if b == OUTSIDE => outside_bodies += 1,
                (200, b) if b == INSIDE => inside_bodies += 1,
                (403 | 404, _) => others += 1,
                (status, body) => panic!(
                    "unexpected answer {status}: {:?}",
                    String::from_utf8_lossy(body)
                ),
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        // Leave the tree as it was made (d a directory) for the cleanup.
        if root.join("d").is_symlink() {
            let _ = evlab_sys::rename_exchange(&root.join("d"), &root.join("x"));
        }
        eprintln!(
            "{m}: {sent} requests, {swaps} swaps: {inside_bodies} inside, {others} refused, \
             {outside_bodies} OUTSIDE"
        );
        assert_eq!(
            outside_bodies, 0,
            "{outside_bodies} of {sent} requests were answered with the file outside the root"
        );
        assert!(inside_bodies > 0, "the race never let a request through");
        assert!(sent >= 500, "only {sent} requests in 30 s");
    }

    /// Issue "Hardening", item 2: 48 HEADs of 2 MiB files added 98.5 MB of RSS and kept 48
    /// descriptors. A HEAD needs the file's size and mtime, not its body.
    pub fn head_holds_no_bodies(m: &str) {
        let _turn = MEASURE.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = start(m, |_| {}) else { return };
        let dir = t.docroot().join("h");
        let (_, names) = linked_files(&dir, 4, 12, 2 * MIB);
        assert_eq!(names.len(), 48);
        let mut s = connect(t.addr);
        let mut buf = Vec::new();
        // Warm up the connection and the worker.
        s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        read_response(&mut s, &mut buf, false).unwrap();
        let (rss0, fds0) = (rss_anon(), fds_under(&dir));
        // Each file's own Last-Modified: writing 48 files may cross a second boundary.
        let mut modified = Vec::new();
        for name in &names {
            write!(s, "HEAD /h/{name} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            let r = read_response(&mut s, &mut buf, true).unwrap();
            assert_eq!(r.status, 200, "{name}");
            assert_eq!(r.header("content-length"), Some("2097152"), "{name}");
            modified.push(r.header("last-modified").unwrap().to_string());
        }
        // And conditional GETs answered 304 need no body either.
        for (name, lm) in names.iter().zip(&modified) {
            write!(
                s,
                "GET /h/{name} HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: {lm}\r\n\r\n"
            )
            .unwrap();
            let r = read_response(&mut s, &mut buf, false).unwrap();
            assert_eq!(r.status, 304, "{name}");
        }
        let grew = rss_anon().saturating_sub(rss0);
        let fds = fds_under(&dir) - fds0.min(fds_under(&dir));
        eprintln!("{m}: 48 HEADs and 48 304s of 2 MiB files: RSS +{grew} bytes, {fds} descriptors");
        assert!(
            grew < 16 * MIB,
            "48 HEADs and 304s of 2 MiB files grew the heap by {} MiB",
            grew / MIB
        );
        assert_eq!(fds, 0, "descriptors kept open for HEAD and 304 answers");
        // A GET still gets the body.
        write!(s, "GET /h/{} HTTP/1.1\r\nHost: t\r\n\r\n", names[5]).unwrap();
        let r = read_response(&mut s, &mut buf, false).unwrap();
        assert_eq!(r.body, content(1, 2 * MIB));
    }

    /// GETs of 96 paths of 2 MiB (192 MiB of bodies) under the default bound of 64 MiB: the
    /// heap holds at most about the bound, and every body is byte-exact, evicted or not.
    pub fn gets_beyond_the_default_bound_evict(m: &str) {
        let _turn = MEASURE.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = start(m, |_| {}) else { return };
        let dir = t.docroot().join("g");
        let (bodies, names) = linked_files(&dir, 8, 12, 2 * MIB);
        let mut s = connect(t.addr);
        let mut buf = Vec::new();
        s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        read_response(&mut s, &mut buf, false).unwrap();
        let rss0 = rss_anon();
        for round in 0..2 {
            for name in &names {
                write!(s, "GET /g/{name} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                let r = read_response(&mut s, &mut buf, false).unwrap();
                assert_eq!(r.status, 200, "{name}");
                assert!(
                    r.body == bodies[index_of(name)],
                    "round {round}: /g/{name}: body differs"
                );
            }
        }
        let grew = rss_anon().saturating_sub(rss0);
        eprintln!("{m}: 2 x 96 GETs of 2 MiB paths: RSS +{} MiB", grew / MIB);
        assert!(
            grew < 100 * MIB,
            "192 MiB of bodies under a 64 MiB bound grew the heap by {} MiB",
            grew / MIB
        );
    }

    /// `cache_bytes` and `cache_files` set small: 96 paths of 2 MiB, got twice, keep at most 4
    /// files open and about 8 MiB of bodies, and every body is byte-exact.
    pub fn small_bounds_evict(m: &str) {
        let _turn = MEASURE.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = start(m, |cfg| {
            cfg.cache_bytes = 8 << 20;
            cfg.cache_files = 4;
        }) else {
            return;
        };
        let dir = t.docroot().join("s");
        let (bodies, names) = linked_files(&dir, 8, 12, 2 * MIB);
        let mut s = connect(t.addr);
        let mut buf = Vec::new();
        s.write_all(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        read_response(&mut s, &mut buf, false).unwrap();
        let rss0 = rss_anon();
        let mut most_fds = 0;
        for _ in 0..2 {
            for name in &names {
                write!(s, "GET /s/{name} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                let r = read_response(&mut s, &mut buf, false).unwrap();
                assert_eq!(r.status, 200, "{name}");
                assert!(r.body == bodies[index_of(name)], "/s/{name}: body differs");
                most_fds = most_fds.max(fds_under(&dir));
            }
        }
        let grew = rss_anon().saturating_sub(rss0);
        eprintln!(
            "{m}: 192 GETs, bound 8 MiB / 4 files: RSS +{} MiB, at most {most_fds} descriptors",
            grew / MIB
        );
        assert!(most_fds <= 4, "{most_fds} descriptors held, bound 4");
        assert!(
            grew < 40 * MIB,
            "the heap grew by {} MiB under an 8 MiB bound",
            grew / MIB
        );
    }
}

macro_rules! mechanism_tests {
    ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
        mod each {$(
        #[allow(non_snake_case)]
        mod $v {
            const M: &str = $name;
            #[test] fn swapped_symlink_never_serves_outside() { crate::cases::swapped_symlink_never_serves_outside(M) }
            #[test] fn head_holds_no_bodies() { crate::cases::head_holds_no_bodies(M) }
            #[test] fn gets_beyond_the_default_bound_evict() { crate::cases::gets_beyond_the_default_bound_evict(M) }
            #[test] fn small_bounds_evict() { crate::cases::small_bounds_evict(M) }
        }
        )*}
    };
}

evlab_poll::for_each_mechanism!(mechanism_tests);
