//! The object cache: whole responses kept in memory, one cache per worker, bounded in bytes.
//!
//! What is stored, and when a stored response may answer, is decided elsewhere (the policy in
//! [`evlab_http::freshness`], the path in the worker's `cache_path` room; `docs/proxy.md`, "The
//! cache"). This keeps the objects: under their URL's key (scheme, host and the request target
//! in origin form, [`evlab_http::Forward::key`]), or, for a response with `Vary`, as the variant
//! the request's fields select (the URL, NUL, and those fields' values). A stale object is kept
//! if it has validators (it may be validated and freshened), else dropped when next looked up.
//! Beyond `--cache-bytes` the least recently used objects are dropped. Answers in flight hold
//! their object (an `Rc`), so dropping one never cuts a response short.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

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
    /// It has a validator (`ETag` or `Last-Modified`): once stale it is kept, to be validated
    /// with a conditional request rather than fetched anew.
    pub validators: bool,
    /// Never served stale, whatever a request accepts (`must-revalidate`, `proxy-revalidate`,
    /// `s-maxage`, `no-cache`).
    pub never_stale: bool,
}

impl Object {
    /// Its age at `now`: the `Age` it came with and its time here (RFC 9111 §4.2.3).
    pub fn age(&self, now: Instant) -> Duration {
        Duration::from_secs(self.age) + now.saturating_duration_since(self.stored)
    }

    /// Its freshness lifetime: its age when stored and the time it was fresh for from then.
    pub fn lifetime(&self) -> Duration {
        Duration::from_secs(self.age) + self.expires.saturating_duration_since(self.stored)
    }

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

/// A URL's `Vary` (the request fields it names) and the keys of the variants stored for it.
type Variants = (Box<[String]>, Vec<Box<str>>);

#[derive(Debug)]
pub struct ObjectCache {
    map: HashMap<Box<str>, (Rc<Object>, u64), foldhash::fast::RandomState>,
    /// URLs whose latest stored response had a `Vary`: the request fields it names, and the
    /// keys of the variants stored (`URL`, NUL, the request's values in those fields).
    vary: HashMap<Box<str>, Variants, foldhash::fast::RandomState>,
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
            vary: HashMap::default(),
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

    /// The object for `key`, marked as just used: fresh, or stale with validators (the
    /// caller decides whether it may answer); a stale one without validators is dropped.
    pub fn get(&mut self, key: &str, now: Instant) -> Option<Rc<Object>> {
        let (obj, tick) = self.map.get_mut(key)?;
        if obj.expires <= now && !obj.validators {
            self.counts.expired += 1;
            self.remove_key(key);
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

    /// The key under which a request for `url` with head `request_head` finds its object: the
    /// URL, or, when the URL's responses vary, the variant its request fields select.
    pub fn lookup_key<'k>(&self, url: &'k str, request_head: &[u8]) -> Cow<'k, str> {
        if self.vary.is_empty() {
            return Cow::Borrowed(url);
        }
        match self.vary.get(url) {
            Some((names, _)) => Cow::Owned(variant(url, names, request_head)),
            None => Cow::Borrowed(url),
        }
    }

    /// Stores `obj` for `url`: under the URL, or, for a response that varies on the request
    /// fields `vary` (the head of the request it answers is `request_head`), as the variant that
    /// request selects; the URL's other variants stay while its `Vary` names the same fields.
    /// Returns false when the object is too large to store.
    pub fn insert_for(
        &mut self,
        url: &str,
        vary: &[String],
        request_head: &[u8],
        obj: Rc<Object>,
    ) -> bool {
        if vary.is_empty() {
            self.remove(url);
            return self.insert(url, obj);
        }
        let key = variant(url, vary, request_head);
        if self.vary.get(url).is_none_or(|(names, _)| **names != *vary) {
            // Another Vary: what was stored for the URL answers nothing any more.
            self.remove(url);
            self.vary
                .insert(url.into(), (vary.to_vec().into_boxed_slice(), Vec::new()));
        }
        let stored = self.insert(&key, obj);
        if let Some((_, keys)) = self.vary.get_mut(url) {
            if stored && !keys.iter().any(|k| **k == *key) {
                keys.push(key.into_boxed_str());
            }
        }
        stored
    }

    /// Stores `obj` under `key` (replacing any older one), dropping the least recently used
    /// objects to make room. Returns false when the object is too large to store.
    pub fn insert(&mut self, key: &str, obj: Rc<Object>) -> bool {
        let cost = obj.cost(key);
        if !self.enabled() || obj.body.len() as u64 > self.max_object || cost > self.max_bytes {
            self.counts.rejected += 1;
            return false;
        }
        self.remove_key(key);
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
        self.map.insert(key, (obj, self.tick));
        self.bytes += cost;
        self.counts.stored += 1;
        true
    }

    /// Drops what is stored for `url`: its object, or every variant of it.
    pub fn remove(&mut self, url: &str) {
        if let Some((_, keys)) = self.vary.remove(url) {
            for k in keys {
                self.remove_key(&k);
            }
        }
        self.remove_key(url);
    }

    /// Drops the object under `key` (a URL or a variant's key), if any.
    pub fn remove_key(&mut self, key: &str) {
        if let Some((o, tick)) = self.map.remove(key) {
            self.lru.remove(&tick);
            self.bytes -= o.cost(key);
        }
    }
}

/// A variant's key: the URL, NUL, and what the request sends in the fields `names`.
fn variant(url: &str, names: &[String], request_head: &[u8]) -> String {
    let mut k = String::with_capacity(url.len() + 32);
    k.push_str(url);
    k.push('\0');
    k.push_str(&evlab_http::freshness::variant_key(names, request_head));
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn obj(body: usize, ttl: Duration) -> Rc<Object> {
        Rc::new(Object {
            status: 200,
            head: b"HTTP/1.1 200 OK\r\n".to_vec().into_boxed_slice(),
            body: vec![7; body],
            last_modified: None,
            expires: Instant::now() + ttl,
            stored: Instant::now(),
            age: 0,
            shared: false,
            validators: false,
            never_stale: false,
        })
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
        // A stale object with a validator is kept, to be validated.
        let mut v = obj(10, Duration::ZERO);
        Rc::get_mut(&mut v).unwrap().validators = true;
        assert!(c.insert("/v", v));
        let got = c.get("/v", now + Duration::from_secs(5)).unwrap();
        assert!(got.age(now + Duration::from_secs(5)) >= got.lifetime());
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
