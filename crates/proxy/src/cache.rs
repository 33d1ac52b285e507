//! The object cache: whole responses kept in memory, one cache per worker, bounded in bytes.
//!
//! What is stored (documented in `docs/proxy.md`): the answer to a GET without a client's
//! `no-cache`, with status 200 and a `Content-Length` body no larger than `--cache-max-object`,
//! for as long as [`evlab_http::CacheInfo::shared_fresh_for`] says a shared cache may reuse it
//! (its own freshness, a `Last-Modified` heuristic or `--cache-ttl`, and nothing kept private
//! by `Authorization`, `Cookie` or `Set-Cookie`; see [`evlab_http::freshness`]). The key is
//! scheme, host and the request target in origin form, query included
//! ([`evlab_http::Forward::key`]). A stale object is dropped when next looked up (no
//! revalidation with the origin). Beyond `--cache-bytes` the least recently used objects are
//! dropped. Answers in flight hold their object (an `Rc`), so dropping one never cuts a
//! response short.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Instant, SystemTime};

/// A stored response.
#[derive(Debug)]
pub struct Object {
    /// The response's status code.
    pub status: u16,
    /// The status line and end-to-end fields as the origin sent them (rewritten by
    /// [`evlab_http::parse_response_head`]), without the final blank line.
    pub head: Box<[u8]>,
    pub body: Vec<u8>,
    pub last_modified: Option<SystemTime>,
    pub expires: Instant,
    /// When it was stored, and the `Age` it arrived with: a hit's `Age` is their sum with the
    /// time since.
    pub stored: Instant,
    pub age: u64,
    /// The response said it may be shared with a lifetime of its own (`s-maxage`, or `public`
    /// with one): only such an object answers a request with a `Cookie`, which a guessed or
    /// operator-given freshness does not cover.
    pub shared: bool,
}

impl Object {
    fn cost(&self, key: &str) -> u64 {
        (key.len() + self.head.len() + self.body.len()) as u64
    }
}

/// What the cache did, for the stats.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheCounts {
    pub stored: u64,
    pub evicted: u64,
    pub expired: u64,
    /// Objects refused for being larger than the cache could hold.
    pub rejected: u64,
}

#[derive(Debug)]
pub struct ObjectCache {
    map: HashMap<Box<str>, (Rc<Object>, u64), foldhash::fast::RandomState>,
    /// Use order: tick → key; the first entry is the least recently used.
    lru: BTreeMap<u64, Box<str>>,
    tick: u64,
    bytes: u64,
    max_bytes: u64,
    max_object: u64,
    pub counts: CacheCounts,
}

impl ObjectCache {
    /// A cache of at most `max_bytes` (keys, heads and bodies), each object at most
    /// `max_object`. `max_bytes == 0` stores nothing.
    pub fn new(max_bytes: u64, max_object: u64) -> ObjectCache {
        ObjectCache {
            map: HashMap::default(),
            lru: BTreeMap::new(),
            tick: 0,
            bytes: 0,
            max_bytes,
            max_object: max_object.min(max_bytes),
            counts: CacheCounts::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.max_bytes > 0
    }

    /// Whether a body of `len` bytes could be stored at all (checked before keeping a copy).
    pub fn may_store(&self, len: u64) -> bool {
        self.enabled() && len <= self.max_object
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The fresh object for `key`, marked as just used; a stale one is dropped.
    pub fn get(&mut self, key: &str, now: Instant) -> Option<Rc<Object>> {
        let (obj, tick) = self.map.get_mut(key)?;
        if obj.expires <= now {
            self.counts.expired += 1;
            self.remove(key);
            return None;
        }
        self.tick += 1;
        let k = self
            .lru
            .remove(tick)
            .expect("every entry has its place in the use order");
        *tick = self.tick;
        let obj = obj.clone();
        self.lru.insert(self.tick, k);
        Some(obj)
    }

    /// Stores `obj` under `key` (replacing any older one), dropping the least recently used
    /// objects to make room. Returns false when the object is too large to store.
    pub fn insert(&mut self, key: &str, obj: Object) -> bool {
        let cost = obj.cost(key);
        if !self.enabled() || obj.body.len() as u64 > self.max_object || cost > self.max_bytes {
            self.counts.rejected += 1;
            return false;
        }
        self.remove(key);
        while self.bytes + cost > self.max_bytes {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            if let Some((o, _)) = self.map.remove(&victim) {
                self.bytes -= o.cost(&victim);
                self.counts.evicted += 1;
            }
        }
        self.tick += 1;
        let key: Box<str> = key.into();
        self.lru.insert(self.tick, key.clone());
        self.map.insert(key, (Rc::new(obj), self.tick));
        self.bytes += cost;
        self.counts.stored += 1;
        true
    }

    /// Drops the object under `key`, if any.
    pub fn remove(&mut self, key: &str) {
        if let Some((o, tick)) = self.map.remove(key) {
            self.lru.remove(&tick);
            self.bytes -= o.cost(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn obj(body: usize, ttl: Duration) -> Object {
        Object {
            status: 200,
            head: b"HTTP/1.1 200 OK\r\n".to_vec().into_boxed_slice(),
            body: vec![7; body],
            last_modified: None,
            expires: Instant::now() + ttl,
            stored: Instant::now(),
            age: 0,
            shared: false,
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn least_recently_used_goes_first_and_bytes_stay_bounded() {
        let head = 17;
        let mut c = ObjectCache::new(3 * (100 + head + 2), 1000);
        let now = Instant::now();
        assert!(c.insert("/a", obj(100, HOUR)));
        assert!(c.insert("/b", obj(100, HOUR)));
        assert!(c.insert("/c", obj(100, HOUR)));
        assert_eq!(c.len(), 3);
        assert!(c.get("/a", now).is_some()); // /b is now the least recently used
        assert!(c.insert("/d", obj(100, HOUR)));
        assert!(c.get("/b", now).is_none());
        assert!(c.get("/a", now).is_some() && c.get("/c", now).is_some());
        assert_eq!(c.counts.evicted, 1);
        assert!(c.bytes() <= 3 * (100 + head + 2));
        // Replacing an object does not count its old bytes twice.
        assert!(c.insert("/a", obj(50, HOUR)));
        assert_eq!(c.get("/a", now).unwrap().body.len(), 50);
        assert_eq!(c.bytes(), (50 + head + 2) + 2 * (100 + head + 2));
    }

    #[test]
    fn too_large_stale_and_disabled() {
        let now = Instant::now();
        let mut c = ObjectCache::new(10_000, 500);
        assert!(!c.may_store(501) && c.may_store(500));
        assert!(!c.insert("/big", obj(501, HOUR)));
        assert_eq!(c.counts.rejected, 1);
        assert!(c.insert("/old", obj(10, Duration::ZERO)));
        assert!(c.get("/old", now + Duration::from_millis(1)).is_none());
        assert_eq!((c.counts.expired, c.len(), c.bytes()), (1, 0, 0));
        let mut off = ObjectCache::new(0, 500);
        assert!(!off.enabled() && !off.may_store(0));
        assert!(!off.insert("/x", obj(1, HOUR)));
    }

    #[test]
    fn an_object_in_use_outlives_its_eviction() {
        let now = Instant::now();
        let mut c = ObjectCache::new(200, 200);
        assert!(c.insert("/a", obj(150, HOUR)));
        let held = c.get("/a", now).unwrap();
        assert!(c.insert("/b", obj(150, HOUR)));
        assert!(c.get("/a", now).is_none());
        assert_eq!(held.body.len(), 150);
    }
}
