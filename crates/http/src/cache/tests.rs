use super::*;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::time::UNIX_EPOCH;

/// A directory under the system temp dir, unique to this process and test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("evlab-http-{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(p.join("root")).unwrap();
        fs::create_dir_all(p.join("outside")).unwrap();
        TempDir(p)
    }
    fn root(&self) -> PathBuf {
        self.0.join("root")
    }
    fn write(&self, rel: &str, body: &[u8]) -> PathBuf {
        let p = self.0.join(rel);
        if let Some(dir) = p.parent() {
            fs::create_dir_all(dir).unwrap();
        }
        fs::write(&p, body).unwrap();
        p
    }
    fn cache(&self) -> ContentCache {
        self.cache_with(|_| {})
    }
    fn cache_with(&self, f: impl FnOnce(&mut CacheConfig)) -> ContentCache {
        let mut cfg = CacheConfig::new(self.root());
        f(&mut cfg);
        ContentCache::new(cfg).unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Make anything chmod-ed readable again so removal cannot fail on it.
        let _ = fs::set_permissions(
            self.0.join("root/secret.txt"),
            fs::Permissions::from_mode(0o644),
        );
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn found(l: Lookup) -> Rc<Entry> {
    match l {
        Lookup::Found(e) => e,
        other => panic!("not found: {other:?}"),
    }
}

fn is_not_found(l: &Lookup) -> bool {
    matches!(l, Lookup::NotFound)
}

#[test]
fn root_must_be_a_directory() {
    let t = TempDir::new("root");
    let missing = t.0.join("nope");
    match ContentCache::new(CacheConfig::new(&missing)) {
        Err(e @ CacheError::Root { .. }) => {
            assert!(e.to_string().contains("nope"), "{e}")
        }
        other => panic!("{:?}", other.err()),
    }
    let file = t.write("root/f.txt", b"x");
    match ContentCache::new(CacheConfig::new(&file)) {
        Err(e @ CacheError::NotADirectory(_)) => {
            assert!(e.to_string().contains("f.txt"), "{e}")
        }
        other => panic!("{:?}", other.err()),
    }
    let c = t.cache();
    assert_eq!(c.root(), fs::canonicalize(t.root()).unwrap());
    assert!(c.is_empty());
}

#[test]
fn no_store_prefix_marks_gets_and_heads() {
    let t = TempDir::new("nostore");
    t.write("root/polymix/u/000001", b"abc");
    t.write("root/polymix/c/000001", b"abc");
    let mut c = t.cache_with(|c| c.no_store_prefix = Some("/polymix/u/".into()));
    let now = Instant::now();
    let u = found(c.lookup("/polymix/u/000001", now));
    assert!(std::str::from_utf8(&u.headers)
        .unwrap()
        .ends_with("\r\nCache-Control: no-store\r\n"));
    let k = found(c.lookup("/polymix/c/000001", now));
    assert!(!std::str::from_utf8(&k.headers)
        .unwrap()
        .contains("no-store"));
    let mut c = t.cache_with(|c| c.no_store_prefix = Some("/polymix/u/".into()));
    let Lookup::Head(m) = c.lookup_with("/polymix/u/000001", now, |_| false) else {
        panic!("expected a head")
    };
    assert!(std::str::from_utf8(&m.headers)
        .unwrap()
        .contains("Cache-Control: no-store"));
}

#[test]
fn serves_a_file_with_exact_headers() {
    let t = TempDir::new("found");
    let p = t.write("root/hello.txt", b"hello");
    let f = fs::File::options().write(true).open(&p).unwrap();
    // Nanoseconds are there to be truncated.
    f.set_modified(UNIX_EPOCH + Duration::new(784_111_777, 123_456_789))
        .unwrap();
    drop(f);
    let mut c = t.cache();
    let e = found(c.lookup("/hello.txt", Instant::now()));
    assert_eq!(&*e.body, b"hello");
    assert!(e.in_memory);
    assert_eq!(e.len, 5);
    assert_eq!(e.mtime, UNIX_EPOCH + Duration::from_secs(784_111_777));
    assert_eq!(
        std::str::from_utf8(&e.headers).unwrap(),
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n\
             Accept-Ranges: bytes\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             ETag: \"5-ae1b981c3a4d715\"\r\n"
    );
    // The parts a 206 and a 304 send.
    assert_eq!(e.headers.etag(), b"\"5-ae1b981c3a4d715\"");
    assert_eq!(
        e.headers.content_type(),
        b"Content-Type: text/plain; charset=utf-8\r\n"
    );
    assert!(e
        .headers
        .after_length()
        .starts_with(b"Accept-Ranges: bytes\r\nLast-Modified: "));
    assert_eq!(e.headers.validators(), b"ETag: \"5-ae1b981c3a4d715\"\r\n");
    assert_eq!(e.file.metadata().unwrap().len(), 5);
    assert_eq!(c.len(), 1);
    // A hit is the same entry.
    let again = found(c.lookup("/hello.txt", Instant::now()));
    assert!(Rc::ptr_eq(&e, &again));
    // A file is not a directory.
    assert!(is_not_found(&c.lookup("/hello.txt/", Instant::now())));
    assert!(is_not_found(&c.lookup("/missing.txt", Instant::now())));
}

#[test]
fn pre_epoch_mtime_does_not_panic() {
    let t = TempDir::new("epoch");
    let p = t.write("root/old.bin", b"");
    let f = fs::File::options().write(true).open(&p).unwrap();
    f.set_modified(UNIX_EPOCH - Duration::from_secs(86_400 * 365))
        .unwrap();
    drop(f);
    let e = found(t.cache().lookup("/old.bin", Instant::now()));
    assert_eq!(e.mtime, UNIX_EPOCH);
    assert_eq!(
        &*e.headers,
        b"Content-Type: application/octet-stream\r\nContent-Length: 0\r\n\
              Accept-Ranges: bytes\r\nLast-Modified: Thu, 01 Jan 1970 00:00:00 GMT\r\n\
              ETag: \"0-0\"\r\n"
    );
    assert!(e.in_memory);
    assert!(e.body.is_empty());
}

#[test]
fn directories_serve_index_html() {
    let t = TempDir::new("index");
    t.write("root/index.html", b"<root>");
    t.write("root/dir/index.html", b"<dir>");
    fs::create_dir_all(t.root().join("empty")).unwrap();
    let mut c = t.cache();
    let now = Instant::now();
    let e = found(c.lookup("/", now));
    assert_eq!(&*e.body, b"<root>");
    assert!(e
        .headers
        .starts_with(b"Content-Type: text/html; charset=utf-8\r\n"));
    assert_eq!(&*found(c.lookup("/dir/", now)).body, b"<dir>");
    assert_eq!(&*found(c.lookup("/dir/index.html", now)).body, b"<dir>");
    // Without its slash, a directory is redirected (so that relative links resolve in it),
    // whether or not it has an index.
    assert!(matches!(c.lookup("/dir", now), Lookup::Redirect));
    assert!(matches!(c.lookup("/empty", now), Lookup::Redirect));
    // No listings.
    assert!(is_not_found(&c.lookup("/empty/", now)));
}

#[test]
fn non_regular_files_are_not_found() {
    let t = TempDir::new("fifo");
    let fifo = t.root().join("pipe");
    evlab_sys::mkfifo(&fifo, 0o644).expect("mkfifo");
    let mut c = t.cache();
    // Would block forever if the cache opened the fifo without O_NONBLOCK or stat first.
    assert!(is_not_found(&c.lookup("/pipe", Instant::now())));
    // A directory whose index.html is a fifo.
    fs::create_dir_all(t.root().join("d")).unwrap();
    evlab_sys::mkfifo(&t.root().join("d/index.html"), 0o644).expect("mkfifo");
    assert!(is_not_found(&c.lookup("/d/", Instant::now())));
}

#[test]
fn symlinks_must_stay_under_the_root() {
    symlinks_stay_under_the_root(true);
}

/// The same through the component walk a kernel without openat2 gets.
#[test]
fn symlinks_must_stay_under_the_root_without_openat2() {
    symlinks_stay_under_the_root(false);
}

fn symlinks_stay_under_the_root(openat2: bool) {
    let t = TempDir::new(if openat2 { "symlink2" } else { "symlinkw" });
    t.write("outside/secret.txt", b"secret");
    t.write("root/real.txt", b"real");
    t.write("root/sub/inner.txt", b"inner");
    // A sibling whose name extends the root's: a string prefix test would let it through.
    t.write("rootx/evil.txt", b"evil");
    let root = t.root();
    symlink("../outside/secret.txt", root.join("leak")).unwrap();
    symlink(t.0.join("outside"), root.join("leakdir")).unwrap();
    symlink("../rootx/evil.txt", root.join("prefix")).unwrap();
    symlink("real.txt", root.join("alias.txt")).unwrap();
    symlink("sub", root.join("subalias")).unwrap();
    fs::create_dir_all(root.join("idx")).unwrap();
    symlink("../../outside/secret.txt", root.join("idx/index.html")).unwrap();
    // Absolute, but to a file under the root: followed (openat2 refuses it; the walk,
    // which it falls back to, checks it names the canonical root).
    let canon_root = fs::canonicalize(&root).unwrap();
    symlink(canon_root.join("sub"), root.join("abs-sub")).unwrap();
    symlink("sub/../../root/real.txt", root.join("updown")).unwrap();
    symlink("loop", root.join("loop")).unwrap();
    let mut c = t.cache_with(|cfg| cfg.openat2 = openat2);
    if openat2 && !c.uses_openat2() {
        eprintln!("this kernel has no openat2: the walk serves both cases");
    }
    assert!(openat2 || !c.uses_openat2());
    let now = Instant::now();
    assert_eq!(&*found(c.lookup("/abs-sub/inner.txt", now)).body, b"inner");
    // Climbs above the root on the way, even if it comes back: refused.
    assert!(is_not_found(&c.lookup("/updown", now)));
    assert!(is_not_found(&c.lookup("/loop", now)));
    assert!(is_not_found(&c.lookup("/leak", now)));
    assert!(is_not_found(&c.lookup("/leakdir/secret.txt", now)));
    assert!(is_not_found(&c.lookup("/prefix", now)));
    assert!(is_not_found(&c.lookup("/idx/", now)));
    assert_eq!(&*found(c.lookup("/alias.txt", now)).body, b"real");
    assert_eq!(&*found(c.lookup("/subalias/inner.txt", now)).body, b"inner");
    // Paths that did not come from the parser are refused outright.
    assert!(is_not_found(&c.lookup("/../outside/secret.txt", now)));
    assert!(is_not_found(&c.lookup("relative.txt", now)));
}

#[test]
fn changes_are_seen_after_revalidation() {
    let t = TempDir::new("reval");
    let p = t.write("root/f.txt", b"one");
    let mut c = t.cache_with(|cfg| cfg.revalidate = Duration::ZERO);
    let t0 = Instant::now();
    let e = found(c.lookup("/f.txt", t0));
    assert_eq!(&*e.body, b"one");
    fs::write(&p, b"second").unwrap();
    // Same instant: not re-checked yet.
    assert!(Rc::ptr_eq(&e, &found(c.lookup("/f.txt", t0))));
    let e2 = found(c.lookup("/f.txt", t0 + Duration::from_millis(1)));
    assert_eq!(&*e2.body, b"second");
    assert_eq!(e2.len, 6);
    // Unchanged: the same entry survives revalidation.
    let e3 = found(c.lookup("/f.txt", t0 + Duration::from_millis(2)));
    assert!(Rc::ptr_eq(&e2, &e3));
    // Vanishes, then reappears.
    fs::remove_file(&p).unwrap();
    assert!(is_not_found(
        &c.lookup("/f.txt", t0 + Duration::from_millis(3))
    ));
    fs::write(&p, b"third").unwrap();
    assert_eq!(
        &*found(c.lookup("/f.txt", t0 + Duration::from_millis(4))).body,
        b"third"
    );
    // A file that did not exist at first is found once it does.
    assert!(is_not_found(&c.lookup("/new.txt", t0)));
    t.write("root/new.txt", b"new");
    assert_eq!(
        &*found(c.lookup("/new.txt", t0 + Duration::from_millis(5))).body,
        b"new"
    );
}

#[test]
fn revalidates_at_most_once_per_interval() {
    let t = TempDir::new("interval");
    let p = t.write("root/f.txt", b"one");
    let mut c = t.cache();
    let t0 = Instant::now();
    let e = found(c.lookup("/f.txt", t0));
    fs::write(&p, b"two!").unwrap();
    // Within the second the cached answer stands, without a stat.
    let within = found(c.lookup("/f.txt", t0 + Duration::from_millis(999)));
    assert!(Rc::ptr_eq(&e, &within));
    let after = found(c.lookup("/f.txt", t0 + Duration::from_millis(1001)));
    assert_eq!(&*after.body, b"two!");
}

/// This thread's effective CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, dropped while it lives
/// (capabilities are per thread; other tests' threads keep theirs) and taken back from the
/// permitted set when dropped. Without them (not root) it changes nothing.
struct DacPrivilegesDropped(Option<evlab_sys::CapData>);

/// Two words of capabilities; `Some` sets them, `None` only reads them.
fn capabilities(set: Option<[evlab_sys::CapData; 2]>) -> Option<[evlab_sys::CapData; 2]> {
    match set {
        Some(d) => evlab_sys::set_capabilities(d).ok().map(|()| d),
        None => evlab_sys::capabilities().ok(),
    }
}

impl DacPrivilegesDropped {
    fn new() -> DacPrivilegesDropped {
        const DAC: u32 = 1 << 1 | 1 << 2; // CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        let Some(before) = capabilities(None) else {
            return DacPrivilegesDropped(None);
        };
        let mut less = before;
        less[0].effective &= !DAC;
        capabilities(Some(less)).expect("capset: dropping effective capabilities");
        DacPrivilegesDropped(Some(before[0]))
    }
}

impl Drop for DacPrivilegesDropped {
    fn drop(&mut self) {
        if let Some(first) = self.0 {
            let mut d = capabilities(None).unwrap_or_default();
            d[0] = first;
            let _ = capabilities(Some(d));
        }
    }
}

#[test]
fn unreadable_file_is_forbidden() {
    let t = TempDir::new("forbidden");
    let p = t.write("root/secret.txt", b"secret");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads mode-000 files (CAP_DAC_OVERRIDE): this thread gives that up.
    let _modes_apply = DacPrivilegesDropped::new();
    if !evlab_poll::testing::require(
        "file-modes",
        fs::File::open(&p).is_err(),
        "this thread reads a mode-000 file even without CAP_DAC_OVERRIDE",
    ) {
        return;
    }
    let mut c = t.cache();
    assert!(matches!(
        c.lookup("/secret.txt", Instant::now()),
        Lookup::Forbidden
    ));
}

#[test]
fn large_files_stay_on_disk() {
    let t = TempDir::new("large");
    let big = vec![b'x'; 10_000];
    t.write("root/big.bin", &big);
    t.write("root/small.bin", &big[..100]);
    let mut c = t.cache_with(|cfg| cfg.max_in_memory = 100);
    let e = found(c.lookup("/big.bin", Instant::now()));
    assert!(!e.in_memory);
    assert!(e.body.is_empty());
    assert_eq!(e.len, 10_000);
    assert!(std::str::from_utf8(&e.headers)
        .unwrap()
        .contains("\r\nContent-Length: 10000\r\n"));
    // The descriptor is open and positioned at 0 for sendfile.
    let mut buf = [0u8; 4];
    assert_eq!(e.file.read_at(&mut buf, 9_996).unwrap(), 4);
    let s = found(c.lookup("/small.bin", Instant::now()));
    assert!(s.in_memory);
    assert_eq!(s.body.len(), 100);
}

#[test]
fn max_entries_bounds_the_map() {
    let t = TempDir::new("bound");
    for i in 0..5 {
        t.write(&format!("root/{i}.txt"), b"x");
    }
    let mut c = t.cache_with(|cfg| cfg.max_entries = 3);
    let now = Instant::now();
    for i in 0..5 {
        found(c.lookup(&format!("/{i}.txt"), now));
        assert!(c.len() <= 3);
    }
    // Misses count too.
    for i in 0..10 {
        let _ = c.lookup(&format!("/nope{i}"), now);
        assert!(c.len() <= 3);
    }
}

/// Issue "Hardening", item 1, without a server, for both resolutions: `d` swapped again and
/// again with a symlink to a directory outside while fresh paths `L<i>/secret.txt` (with
/// `L<i> -> d`) are looked up.
fn swap_race(openat2: bool) {
    let t = TempDir::new(if openat2 { "race2" } else { "racew" });
    let root = t.root();
    t.write("outside/dir/secret.txt", b"OUTSIDE");
    t.write("root/d/secret.txt", b"inside");
    symlink(t.0.join("outside/dir"), root.join("x")).unwrap();
    for i in 0..2000 {
        symlink("d", root.join(format!("L{i}"))).unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (d, x) = (root.join("d"), root.join("x"));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                evlab_sys::rename_exchange(&d, &x).unwrap();
            }
        })
    };
    let mut c = t.cache_with(|cfg| cfg.openat2 = openat2);
    let (mut inside, mut outside) = (0, 0);
    for i in 0..2000 {
        match c.lookup(&format!("/L{i}/secret.txt"), Instant::now()) {
            Lookup::Found(e) if &*e.body == b"inside" => inside += 1,
            Lookup::Found(_) => outside += 1,
            _ => {}
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    if root.join("d").is_symlink() {
        evlab_sys::rename_exchange(&root.join("d"), &root.join("x")).unwrap();
    }
    assert_eq!(
        outside, 0,
        "served the file outside the root {outside} times"
    );
    assert!(inside > 0);
}

#[test]
fn swapped_directory_never_leads_outside() {
    swap_race(true);
}

#[test]
fn swapped_directory_never_leads_outside_without_openat2() {
    swap_race(false);
}

#[test]
fn head_reads_no_body_and_keeps_no_descriptor() {
    let t = TempDir::new("head");
    let body: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    t.write("root/f.bin", &body);
    let mut c = t.cache();
    let now = Instant::now();
    let Lookup::Head(m) = c.lookup_with("/f.bin", now, |_| false) else {
        panic!("not a head");
    };
    assert_eq!(m.len, 100_000);
    assert!(std::str::from_utf8(&m.headers)
        .unwrap()
        .contains("\r\nContent-Length: 100000\r\n"));
    assert_eq!((c.bytes_held(), c.files_held()), (0, 0));
    // need_body sees the meta; the first GET loads the body.
    let e = found(c.lookup_with("/f.bin", now, |m| m.len == 100_000));
    assert_eq!(&*e.body, &body[..]);
    assert_eq!(e.headers, m.headers);
    assert_eq!((c.bytes_held(), c.files_held()), (100_000, 1));
    // A HEAD of a loaded entry answers from the same meta.
    assert!(matches!(
        c.lookup_with("/f.bin", now, |_| false),
        Lookup::Head(_)
    ));
    assert!(Rc::ptr_eq(&e, &found(c.lookup("/f.bin", now))));
}

#[test]
fn bodies_are_bounded_by_bytes_least_recently_used_first() {
    let t = TempDir::new("bytes");
    let bodies: Vec<Vec<u8>> = (0..6u8).map(|i| vec![b'a' + i; 1000]).collect();
    for (i, b) in bodies.iter().enumerate() {
        t.write(&format!("root/{i}.bin"), b);
    }
    t.write("root/huge.bin", &[b'h'; 5000]);
    let mut c = t.cache_with(|cfg| cfg.max_bytes = 3000);
    let now = Instant::now();
    for (i, body) in bodies.iter().enumerate().take(3) {
        assert_eq!(&*found(c.lookup(&format!("/{i}.bin"), now)).body, &body[..]);
    }
    assert_eq!((c.bytes_held(), c.files_held()), (3000, 3));
    // 0 is used again: 1 is now the least recently used, and goes first.
    let zero = found(c.lookup("/0.bin", now));
    let three = found(c.lookup("/3.bin", now));
    assert_eq!(&*three.body, &bodies[3][..]);
    assert_eq!((c.bytes_held(), c.files_held()), (3000, 3));
    assert!(Rc::ptr_eq(&zero, &found(c.lookup("/0.bin", now))));
    let one = found(c.lookup("/1.bin", now));
    assert_eq!(&*one.body, &bodies[1][..], "reloaded byte for byte");
    // 2 went to make room for 1.
    let two = found(c.lookup("/2.bin", now));
    assert_eq!(&*two.body, &bodies[2][..]);
    assert!(c.bytes_held() <= 3000);
    // Larger than the whole bound: sent from the file, holding no memory.
    let huge = found(c.lookup("/huge.bin", now));
    assert!(!huge.in_memory && huge.body.is_empty() && huge.len == 5000);
    assert!(c.bytes_held() <= 3000);
    // A dropped body stays alive for whoever still holds it.
    for i in 0..6 {
        found(c.lookup(&format!("/{i}.bin"), now));
    }
    assert_eq!(&*zero.body, &bodies[0][..]);
}

#[test]
fn descriptors_are_bounded() {
    let t = TempDir::new("files");
    for i in 0..10 {
        t.write(&format!("root/{i}.txt"), b"x");
    }
    let mut c = t.cache_with(|cfg| cfg.max_files = 4);
    let now = Instant::now();
    for round in 0..3 {
        for i in 0..10 {
            let e = found(c.lookup(&format!("/{i}.txt"), now));
            assert_eq!(&*e.body, b"x", "round {round}");
            assert!(c.files_held() <= 4);
        }
    }
    assert_eq!(c.files_held(), 4);
    assert_eq!(
        c.len(),
        10,
        "the paths' answers stay cached without their bodies"
    );
    // No descriptor at all: every GET opens and reads, nothing is kept.
    let mut none = t.cache_with(|cfg| cfg.max_files = 0);
    assert_eq!(&*found(none.lookup("/1.txt", now)).body, b"x");
    assert_eq!((none.bytes_held(), none.files_held()), (0, 0));
}

#[test]
fn a_changed_file_drops_its_body() {
    let t = TempDir::new("changed");
    let p = t.write("root/f.txt", b"12345");
    let mut c = t.cache_with(|cfg| cfg.revalidate = Duration::ZERO);
    let t0 = Instant::now();
    found(c.lookup("/f.txt", t0));
    assert_eq!(c.bytes_held(), 5);
    fs::write(&p, b"123").unwrap();
    let Lookup::Head(m) = c.lookup_with("/f.txt", t0 + Duration::from_millis(1), |_| false) else {
        panic!("not a head");
    };
    assert_eq!(m.len, 3);
    assert_eq!((c.bytes_held(), c.files_held()), (0, 0));
    fs::remove_file(&p).unwrap();
    assert!(is_not_found(
        &c.lookup("/f.txt", t0 + Duration::from_millis(2))
    ));
}
