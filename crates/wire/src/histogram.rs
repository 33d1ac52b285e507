//! A latency histogram as it crosses a process or a host: HdrHistogram's V2 serialization,
//! deflate-compressed, in base64 (the `HISTF…` strings HdrHistogram's own tools and log
//! readers take), with its unit and precision written beside it.
//!
//! The data carry the histogram's lowest discernible value, highest trackable value and
//! significant figures in their own header; the fields beside them repeat those for a reader
//! who has no decoder at hand, and [`EncodedHistogram::decode`] checks that the two agree.
//!
//! Decoding never panics and never allocates more than the data can justify, whatever it is
//! given (a report read from another host is input like any other): the base64, the outer and
//! inner cookies, the lengths, the deflate stream and every encoded count are checked before
//! the histogram is rebuilt.

use std::io::Read;

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The one format written and read: [`EncodedHistogram::format`].
pub const FORMAT: &str = "hdrhistogram-v2-deflate-base64";

/// HdrHistogram's cookies: V2, and V2 deflate-compressed (its Java, C and Rust versions agree).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// Cookie, payload length, normalizing offset, significant figures, lowest, highest, ratio.
const V2_HEADER: usize = 40;
/// More than any histogram evlab makes needs uncompressed (one with 5 significant figures up
/// to an hour in microseconds takes under 3 MiB even if every count were distinct and huge).
const MAX_INFLATED: usize = 64 << 20;

/// A histogram of values in `unit`, encoded. Serialized as
/// `{"format", "unit", "significant_figures", "lowest_discernible_value",
/// "highest_trackable_value", "count", "data"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncodedHistogram {
    /// Always [`FORMAT`].
    pub format: String,
    /// What one recorded value is: `ns`, `us` or `ms`.
    pub unit: String,
    pub significant_figures: u8,
    /// In `unit`.
    pub lowest_discernible_value: u64,
    /// In `unit`; larger values could not be recorded.
    pub highest_trackable_value: u64,
    /// Values recorded.
    pub count: u64,
    /// The histogram: HdrHistogram V2, deflate-compressed, base64 (standard alphabet, padded).
    pub data: String,
}

/// Why a histogram cannot be read, or cannot be merged with another.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistogramError {
    #[error("format {0:?} is not {FORMAT:?}")]
    Format(String),
    #[error("unit {0:?} is not one of ns, us, ms")]
    Unit(String),
    #[error("data is not base64: {0}")]
    Base64(String),
    #[error("data is truncated: {0}")]
    Truncated(&'static str),
    #[error("cookie {0:#010x} is not that of a compressed V2 HdrHistogram ({V2_COMPRESSED_COOKIE:#010x})")]
    Cookie(u32),
    #[error("the compressed data is not a valid zlib (deflate) stream: {0}")]
    Deflate(String),
    #[error("the histogram inflates to more than {MAX_INFLATED} bytes")]
    TooLarge,
    #[error("the V2 encoding is invalid: {0}")]
    Invalid(String),
    #[error("the fields beside the data disagree with it: {0}")]
    Inconsistent(String),
    #[error("histograms of different {what} cannot be merged: {a} and {b}")]
    Mismatch {
        what: &'static str,
        a: String,
        b: String,
    },
    #[error("cannot encode the histogram: {0}")]
    Encode(String),
}

/// How many of `unit` make a millisecond, for the units a histogram may be in.
pub fn units_per_ms(unit: &str) -> Result<f64, HistogramError> {
    match unit {
        "ns" => Ok(1e6),
        "us" => Ok(1e3),
        "ms" => Ok(1.0),
        _ => Err(HistogramError::Unit(unit.to_string())),
    }
}

impl EncodedHistogram {
    /// Encodes `h`, whose values are in `unit`.
    pub fn encode(h: &Histogram<u64>, unit: &str) -> Result<EncodedHistogram, HistogramError> {
        units_per_ms(unit)?;
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(h, &mut bytes)
            .map_err(|e| HistogramError::Encode(format!("{e:?}")))?;
        Ok(EncodedHistogram {
            format: FORMAT.into(),
            unit: unit.into(),
            significant_figures: h.sigfig(),
            lowest_discernible_value: h.low(),
            highest_trackable_value: h.high(),
            count: h.len(),
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        })
    }

    /// The histogram, checked: an error (never a panic) for anything that is not a compressed
    /// V2 histogram agreeing with the fields beside it.
    pub fn decode(&self) -> Result<Histogram<u64>, HistogramError> {
        if self.format != FORMAT {
            return Err(HistogramError::Format(self.format.clone()));
        }
        units_per_ms(&self.unit)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.data.trim())
            .map_err(|e| HistogramError::Base64(e.to_string()))?;
        let v2 = inflate(&bytes)?;
        check_v2(&v2)?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &v2[..])
            .map_err(|e| HistogramError::Invalid(e.to_string()))?;
        let stated = (
            self.significant_figures,
            self.lowest_discernible_value,
            self.highest_trackable_value,
            self.count,
        );
        let found = (h.sigfig(), h.low(), h.high(), h.len());
        if stated != found {
            return Err(HistogramError::Inconsistent(format!(
                "(significant figures, lowest, highest, count) are {stated:?} beside data of \
                 {found:?}"
            )));
        }
        Ok(h)
    }

    /// Refuses to merge histograms that do not measure alike: another unit, or another
    /// precision (significant figures or lowest discernible value). The highest trackable value
    /// may differ: the merge tracks the largest.
    pub fn check_mergeable(&self, other: &EncodedHistogram) -> Result<(), HistogramError> {
        let mismatch = |what, a: &dyn ToString, b: &dyn ToString| {
            Err(HistogramError::Mismatch {
                what,
                a: a.to_string(),
                b: b.to_string(),
            })
        };
        if self.unit != other.unit {
            return mismatch("unit", &self.unit, &other.unit);
        }
        if self.significant_figures != other.significant_figures {
            return mismatch(
                "precision (significant figures)",
                &self.significant_figures,
                &other.significant_figures,
            );
        }
        if self.lowest_discernible_value != other.lowest_discernible_value {
            return mismatch(
                "precision (lowest discernible value)",
                &self.lowest_discernible_value,
                &other.lowest_discernible_value,
            );
        }
        Ok(())
    }
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The uncompressed V2 histogram inside a compressed one.
fn inflate(bytes: &[u8]) -> Result<Vec<u8>, HistogramError> {
    let cookie = be32(bytes, 0).ok_or(HistogramError::Truncated("no cookie"))?;
    if cookie != V2_COMPRESSED_COOKIE {
        return Err(HistogramError::Cookie(cookie));
    }
    let len = be32(bytes, 4).ok_or(HistogramError::Truncated("no compressed length"))? as usize;
    let body = bytes
        .get(8..8usize.saturating_add(len))
        .ok_or(HistogramError::Truncated(
            "shorter than its compressed length",
        ))?;
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(body)
        .take(MAX_INFLATED as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| HistogramError::Deflate(e.to_string()))?;
    if out.len() > MAX_INFLATED {
        return Err(HistogramError::TooLarge);
    }
    Ok(out)
}

/// Checks an uncompressed V2 histogram in full, so that HdrHistogram's deserializer, which
/// trusts the lengths and counts it reads, is only ever given a valid one.
fn check_v2(v2: &[u8]) -> Result<(), HistogramError> {
    let invalid = |s: String| Err(HistogramError::Invalid(s));
    if v2.len() < V2_HEADER {
        return Err(HistogramError::Truncated("shorter than a V2 header"));
    }
    let field32 = |at| be32(v2, at).unwrap_or(0);
    let cookie = field32(0);
    if cookie != V2_COOKIE {
        return invalid(format!(
            "inner cookie {cookie:#010x} is not V2's ({V2_COOKIE:#010x})"
        ));
    }
    let payload = field32(4) as usize;
    if payload > v2.len() - V2_HEADER {
        return Err(HistogramError::Truncated(
            "counts shorter than their length",
        ));
    }
    if field32(8) != 0 {
        return invalid("a normalizing index offset is not supported".into());
    }
    let digits = field32(12);
    let low = be64(v2, 16).unwrap_or(0);
    let high = be64(v2, 24).unwrap_or(0);
    let ratio = f64::from_bits(be64(v2, 32).unwrap_or(0));
    if ratio != 1.0 {
        return invalid(format!(
            "integer-to-double conversion ratio {ratio} (only 1 is supported)"
        ));
    }
    // HdrHistogram's own limits on its parameters; checked before making one of that size.
    if digits > 5 || low < 1 || high < low.saturating_mul(2) {
        return invalid(format!(
            "significant figures {digits}, lowest {low}, highest {high} make no histogram"
        ));
    }
    let slots = Histogram::<u64>::new_with_bounds(low, high, digits as u8)
        .map_err(|e| HistogramError::Invalid(format!("{e:?}")))?
        .distinct_values();
    // The counts: LEB128 varints (at most 9 bytes, the 9th whole), zig-zag encoded; a
    // negative number is a run of empty slots.
    let mut rest = &v2[V2_HEADER..V2_HEADER + payload];
    let (mut slot, mut total) = (0usize, 0u64);
    while !rest.is_empty() {
        let mut v = 0u64;
        let mut used = 0;
        loop {
            let Some(&b) = rest.get(used) else {
                return Err(HistogramError::Truncated("a count is cut short"));
            };
            if used == 8 {
                v |= u64::from(b) << 56;
                used += 1;
                break;
            }
            v |= u64::from(b & 0x7f) << (7 * used);
            used += 1;
            if b & 0x80 == 0 {
                break;
            }
        }
        rest = &rest[used..];
        let n = ((v >> 1) as i64) ^ -((v & 1) as i64);
        if n < 0 {
            let run = n.checked_neg().and_then(|r| usize::try_from(r).ok());
            slot = match run.and_then(|r| slot.checked_add(r)) {
                Some(s) if s <= slots => s,
                _ => return invalid("a run of empty counts goes past the histogram".into()),
            };
        } else {
            if n > 0 {
                if slot >= slots {
                    return invalid(format!(
                        "a count at slot {slot} of a histogram of {slots} slots"
                    ));
                }
                total = total
                    .checked_add(n as u64)
                    .ok_or_else(|| HistogramError::Invalid("the counts overflow".into()))?;
            }
            slot += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap()
    }

    fn sample() -> Histogram<u64> {
        let mut h = hist();
        for v in [1u64, 7, 250, 251, 1_000, 12_345, 999_999, 3_599_999_999] {
            h.record_n(v, v % 5 + 1).unwrap();
        }
        h
    }

    fn with_data(e: &EncodedHistogram, data: String) -> EncodedHistogram {
        EncodedHistogram { data, ..e.clone() }
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn raw(e: &EncodedHistogram) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .decode(&e.data)
            .unwrap()
    }

    /// The bytes of a compressed V2 histogram wrapping `v2` as it is.
    fn wrap(v2: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(v2).unwrap();
        let body = z.finish().unwrap();
        let mut out = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    fn v2_of(e: &EncodedHistogram) -> Vec<u8> {
        inflate(&raw(e)).unwrap()
    }

    #[test]
    fn a_round_trip_is_exact() {
        let h = sample();
        let e = EncodedHistogram::encode(&h, "us").unwrap();
        assert!(e.data.starts_with("HISTF"), "{}", e.data);
        assert_eq!(
            (
                e.significant_figures,
                e.lowest_discernible_value,
                e.highest_trackable_value,
                e.count
            ),
            (3, 1, 3_600_000_000, h.len())
        );
        let back = e.decode().unwrap();
        assert_eq!(back, h);
        let pairs = |h: &Histogram<u64>| {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect::<Vec<_>>()
        };
        assert_eq!(pairs(&back), pairs(&h));
        assert_eq!(
            (back.min(), back.max(), back.len()),
            (h.min(), h.max(), h.len())
        );
        // And through JSON.
        let json = serde_json::to_string(&e).unwrap();
        let again: EncodedHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(again.decode().unwrap(), h);
        // An empty histogram too.
        let empty = EncodedHistogram::encode(&hist(), "us").unwrap();
        assert!(empty.decode().unwrap().is_empty());
    }

    /// The zig-zag LEB128 varint of `n`, as V2 encodes counts, appended to `out`.
    fn push_varint(out: &mut Vec<u8>, n: i64) {
        let mut v = ((n << 1) ^ (n >> 63)) as u64;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
    }

    /// The next of a xorshift sequence: bytes that are random enough and the same every run.
    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    #[test]
    fn a_corrupt_wrapping_is_an_error() {
        let e = EncodedHistogram::encode(&sample(), "us").unwrap();
        let bytes = raw(&e);
        let v2 = v2_of(&e);
        let err = |d: String| with_data(&e, d).decode().unwrap_err();
        assert!(matches!(
            err("not base64!".into()),
            HistogramError::Base64(_)
        ));
        assert!(matches!(err(String::new()), HistogramError::Truncated(_)));
        let mut wrong = bytes.clone();
        wrong[3] ^= 0x01;
        assert!(matches!(err(b64(&wrong)), HistogramError::Cookie(_)));
        // The uncompressed V2 cookie outside: not what this format carries.
        assert!(matches!(err(b64(&v2)), HistogramError::Cookie(_)));
        // Cut anywhere: an error every time.
        for cut in 0..bytes.len() {
            let r = with_data(&e, b64(&bytes[..cut])).decode();
            assert!(r.is_err(), "cut at {cut} of {} decoded", bytes.len());
        }
        // The deflate stream damaged.
        let mut bad = bytes.clone();
        for b in &mut bad[8..] {
            *b = !*b;
        }
        assert!(matches!(err(b64(&bad)), HistogramError::Deflate(_)));
        // A compressed length beyond the data.
        let mut long = bytes.clone();
        long[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(err(b64(&long)), HistogramError::Truncated(_)));
    }

    #[test]
    fn a_corrupt_v2_payload_is_an_error() {
        let e = EncodedHistogram::encode(&sample(), "us").unwrap();
        let v2 = v2_of(&e);
        let err = |d: String| with_data(&e, d).decode().unwrap_err();
        // Inside: a wrong inner cookie, a payload length beyond the data (the deserializer
        // would allocate it), impossible parameters, a count past the end, a run of i64::MIN.
        let mut inner = v2.clone();
        inner[0] ^= 0xff;
        assert!(matches!(
            err(b64(&wrap(&inner))),
            HistogramError::Invalid(_)
        ));
        let mut inner = v2.clone();
        inner[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            err(b64(&wrap(&inner))),
            HistogramError::Truncated(_)
        ));
        let mut inner = v2.clone();
        inner[12..16].copy_from_slice(&9u32.to_be_bytes());
        assert!(matches!(
            err(b64(&wrap(&inner))),
            HistogramError::Invalid(_)
        ));
        let mut inner = v2.clone();
        inner[16..24].copy_from_slice(&0u64.to_be_bytes());
        assert!(matches!(
            err(b64(&wrap(&inner))),
            HistogramError::Invalid(_)
        ));
        let mut inner = v2[..V2_HEADER].to_vec();
        // 2^40 empty slots, then a count of 1.
        push_varint(&mut inner, -(1 << 40));
        push_varint(&mut inner, 1);
        let n = (inner.len() - V2_HEADER) as u32;
        inner[4..8].copy_from_slice(&n.to_be_bytes());
        assert!(matches!(
            err(b64(&wrap(&inner))),
            HistogramError::Invalid(_)
        ));
        let mut inner = v2[..V2_HEADER].to_vec();
        inner.extend_from_slice(&[0xff; 9]); // zig-zag u64::MAX: i64::MIN
        inner[4..8].copy_from_slice(&9u32.to_be_bytes());
        assert!(matches!(
            err(b64(&wrap(&inner))),
            HistogramError::Invalid(_)
        ));
        let mut inner = v2[..V2_HEADER].to_vec();
        inner.extend_from_slice(&[0x80, 0x80]); // a varint that never ends
        inner[4..8].copy_from_slice(&2u32.to_be_bytes());
        assert!(matches!(
            err(b64(&wrap(&inner))),
            HistogramError::Truncated(_)
        ));
    }

    #[test]
    fn random_bytes_are_an_error_or_a_histogram_never_a_panic() {
        let e = EncodedHistogram::encode(&sample(), "us").unwrap();
        let v2 = v2_of(&e);
        // Random bytes after a valid cookie, many times: errors or histograms, never a panic.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..400 {
            let mut junk = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
            for _ in 0..len {
                junk.push(xorshift(&mut x) as u8);
            }
            let _ = with_data(&e, b64(&junk)).decode();
            let _ = with_data(&e, b64(&wrap(&junk[4..]))).decode();
        }
        // The valid encoding with bytes changed after its inner cookie, or cut short with its
        // length mended: an error or some histogram, never a panic.
        for i in 0..2_000 {
            let mut m = v2.clone();
            for _ in 0..1 + i % 3 {
                xorshift(&mut x);
                let at = 4 + (x as usize >> 8) % (m.len() - 4);
                m[at] ^= (x as u8) | 1;
            }
            if i % 4 == 0 {
                let keep = V2_HEADER + (x as usize >> 16) % (m.len() - V2_HEADER + 1);
                m.truncate(keep);
                let n = (keep - V2_HEADER) as u32;
                m[4..8].copy_from_slice(&n.to_be_bytes());
            }
            let _ = with_data(&e, b64(&wrap(&m))).decode();
        }
    }

    #[test]
    fn fields_that_disagree_are_an_error() {
        let e = EncodedHistogram::encode(&sample(), "us").unwrap();
        // Fields that disagree with the data, another format, a unit not known.
        let lie = EncodedHistogram {
            significant_figures: 2,
            ..e.clone()
        };
        assert!(matches!(lie.decode(), Err(HistogramError::Inconsistent(_))));
        let lie = EncodedHistogram {
            count: e.count + 1,
            ..e.clone()
        };
        assert!(matches!(lie.decode(), Err(HistogramError::Inconsistent(_))));
        let other = EncodedHistogram {
            format: "hdrhistogram-v2".into(),
            ..e.clone()
        };
        assert!(matches!(other.decode(), Err(HistogramError::Format(_))));
        let furlongs = EncodedHistogram {
            unit: "furlongs".into(),
            ..e.clone()
        };
        assert!(matches!(furlongs.decode(), Err(HistogramError::Unit(_))));
    }

    #[test]
    fn unlike_histograms_are_refused() {
        let us = EncodedHistogram::encode(&sample(), "us").unwrap();
        let ns = EncodedHistogram::encode(&sample(), "ns").unwrap();
        let two = EncodedHistogram::encode(
            &Histogram::new_with_bounds(1, 3_600_000_000, 2).unwrap(),
            "us",
        )
        .unwrap();
        let low = EncodedHistogram::encode(
            &Histogram::new_with_bounds(1000, 3_600_000_000, 3).unwrap(),
            "us",
        )
        .unwrap();
        let wider = EncodedHistogram::encode(
            &Histogram::new_with_bounds(1, 7_200_000_000, 3).unwrap(),
            "us",
        )
        .unwrap();
        for (other, what) in [
            (&ns, "unit"),
            (&two, "precision (significant figures)"),
            (&low, "precision (lowest discernible value)"),
        ] {
            match us.check_mergeable(other) {
                Err(HistogramError::Mismatch { what: w, .. }) => assert_eq!(w, what),
                r => panic!("{what}: {r:?}"),
            }
        }
        assert!(us.check_mergeable(&wider).is_ok());
        assert!(EncodedHistogram::encode(&sample(), "s").is_err());
    }
}
