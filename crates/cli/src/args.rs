//! What the subcommands share in reading their arguments: durations with units, positive
//! numbers, and the usage error that exits 2 (as clap does for the errors it finds itself).

use std::fmt;

/// A usage error found after parsing (flags that do not go together, a value out of range):
/// `main` prints it and exits 2, so a script can tell a wrong command line from a failed run.
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A usage error as an `anyhow::Error`, for `return Err(usage(…))`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    Usage(msg.into()).into()
}

/// Seconds from "30", "30s", "1.5s", "500ms", "2m" or "1h"; zero allowed when `zero_ok`.
fn seconds_of(s: &str, zero_ok: bool) -> Result<f64, String> {
    duration_of(s, 1.0, zero_ok)
}

/// A duration in seconds from a number with a unit (`500ms`, `30s`, `2m`, `1h`), or a plain
/// number of `plain` seconds (1: seconds; 1e-3: milliseconds); zero allowed when `zero_ok`.
fn duration_of(s: &str, plain: f64, zero_ok: bool) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, plain)
    };
    let plain_words = if plain == 1.0 {
        "seconds (30, 1.5)"
    } else {
        "milliseconds (20, 2.5)"
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("'{s}' is not a duration: give {plain_words} or a number with a unit (500ms, 30s, 2m, 1h)")
    })?;
    let v = v * scale;
    if !v.is_finite() || v < 0.0 || (v == 0.0 && !zero_ok) {
        return Err(format!(
            "'{s}': a duration must be {}",
            if zero_ok {
                ">= 0 (0: none)"
            } else {
                "more than zero"
            }
        ));
    }
    Ok(v)
}

/// Milliseconds from a plain number of them (`20`, `2.5`) or a number with a unit (`500ms`,
/// `2s`, `1m`); zero allowed (`value_parser = args::millis`).
pub fn millis(s: &str) -> Result<f64, String> {
    duration_of(s, 1e-3, true).map(|v| v * 1e3)
}

/// A whole number of milliseconds, as [`millis`] reads it (`value_parser = args::whole_millis`).
pub fn whole_millis(s: &str) -> Result<u64, String> {
    let ms = millis(s)?;
    if ms.fract() != 0.0 || ms > u64::MAX as f64 {
        return Err(format!("'{s}': give a whole number of milliseconds"));
    }
    Ok(ms as u64)
}

/// A byte count: a whole number, optionally with a K, M or G suffix (powers of 1,024), as
/// every size flag takes it (`value_parser = args::bytes`).
pub fn bytes(s: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "'{s}' is not a valid byte count: give a whole number of bytes, optionally with a \
             K, M or G suffix (powers of 1,024), e.g. 67108864 or 64M"
        )
    };
    let t = s.trim();
    let (digits, shift) = match t.as_bytes().last().map(|b| b.to_ascii_uppercase()) {
        Some(b'K') => (&t[..t.len() - 1], 10),
        Some(b'M') => (&t[..t.len() - 1], 20),
        Some(b'G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1 << shift).ok_or_else(bad)
}

/// A byte count of at least one, as [`bytes`] reads it, that fits a `usize`.
pub fn size(s: &str) -> Result<usize, String> {
    match bytes(s)? {
        0 => Err(format!("'{s}': must be at least 1 byte")),
        n => usize::try_from(n).map_err(|_| format!("'{s}': too large")),
    }
}

/// A positive duration in seconds (`value_parser = args::seconds`).
pub fn seconds(s: &str) -> Result<f64, String> {
    seconds_of(s, false)
}

/// A duration in seconds where 0 means "no limit" (`value_parser = args::seconds_or_zero`).
pub fn seconds_or_zero(s: &str) -> Result<f64, String> {
    seconds_of(s, true)
}

/// The lowest rate a load takes: one per hour. Slower is no load to measure, and a schedule
/// that would leave hours to years between starts (`--rate 1e-9`: one every 32 years, with
/// the run waiting for its second) is a mistake, a sign or an exponent lost, not a wish; as
/// wrk and httperf do with their nonsense values, it is refused before anything starts.
pub const MIN_RATE: f64 = 1.0 / 3600.0;

/// A rate of at least one per hour ([`MIN_RATE`]), per second. The flag takes
/// `allow_hyphen_values`, so that "-5" reaches this and is refused as a negative rate rather
/// than read as a flag.
pub fn rate(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches("/s")
        .parse()
        .map_err(|_| format!("'{s}' is not a rate: give a number per second, e.g. 100"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("'{s}': a rate must be more than zero per second"));
    }
    if v < MIN_RATE {
        return Err(format!(
            "'{s}' per second is one start every {}: below the least a load takes, one per \
             hour ({MIN_RATE:.6}/s); a run that slow would wait longer than any window it could \
             measure",
            span(1.0 / v)
        ));
    }
    Ok(v)
}

/// A span of `secs` seconds in the unit a person reads it in: `45 s`, `12 min`, `5.0 h`,
/// `3 days`, `32 years`.
pub fn span(secs: f64) -> String {
    const DAY: f64 = 86_400.0;
    match secs.abs() {
        s if s < 120.0 => format!("{secs:.1} s"),
        s if s < 7_200.0 => format!("{:.0} min", secs / 60.0),
        s if s < 2.0 * DAY => format!("{:.1} h", secs / 3600.0),
        s if s < 730.0 * DAY => format!("{:.0} days", secs / DAY),
        _ => format!("{:.0} years", secs / (365.25 * DAY)),
    }
}

/// A share from 0 to 1: a fraction (0.01) or a percentage (1%), as `--max-error-rate`,
/// `--threshold` and `capacity --success` take it.
pub fn share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "'{s}' is not a share of connections or requests: give a fraction from 0 to 1 \
             (0.01) or a percentage from 0% to 100% (1%)"
        )),
    }
}

/// A count of at least one (workers, connections).
pub fn count(s: &str) -> Result<usize, String> {
    match s.trim().replace('_', "").parse::<usize>() {
        Ok(0) => Err(format!("'{s}': must be at least 1")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a count")),
    }
}

/// A listening address: `ADDR:PORT`, or a bare port for 127.0.0.1 (`8080`, `:8080`).
pub fn listen_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    let t = s.trim();
    if let Ok(a) = t.parse() {
        return Ok(a);
    }
    match t.trim_start_matches(':').parse::<u16>() {
        Ok(port) => Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port))),
        Err(_) => Err(format!(
            "'{s}' is not an address to listen on: give ADDR:PORT (127.0.0.1:8080, 0.0.0.0:80) \
             or a bare port for 127.0.0.1 (8080)"
        )),
    }
}

/// `http://HOST[:PORT][/PATH]` as (host, port, path): the port 80 when absent, the path `/`
/// when empty. Only http: evlab load speaks no TLS.
pub fn http_url(url: &str) -> Result<(String, u16, String), String> {
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(if url.starts_with("https://") {
            format!("{url}: evlab load speaks HTTP only, not TLS (https)")
        } else {
            format!("{url}: not an http:// URL (give http://HOST[:PORT]/PATH, or --server, --port and --uri)")
        });
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (
            h,
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{url}: '{p}' is not a port"))?,
        ),
        _ => (authority, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("{url}: no host"));
    }
    Ok((host.to_string(), port, path.to_string()))
}

/// A proxy's origin, as `--origin` takes it: `HOST:PORT`, or the server's http:// URL
/// (`http://HOST:PORT`, with or without a trailing slash; port 80 when absent), returned as
/// `HOST:PORT` to resolve. An IPv6 address goes in brackets. Anything else (TLS, a path, a query,
/// user info) is refused, saying why: every request goes to the origin with its own path.
pub fn origin(s: &str) -> Result<String, String> {
    let t = s.trim();
    let give = "give HOST:PORT (127.0.0.1:8080) or http://HOST:PORT";
    let is_http = t
        .get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("http://"));
    let authority = if is_http {
        let rest = &t[7..];
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if let Some(i) = rest.find(['/', '?', '#']) {
            return Err(format!(
                "'{s}': the origin is a server, not a URL with a path ({}): each request goes \
                 there with its own path; {give}",
                &rest[i..]
            ));
        }
        rest
    } else if let Some((scheme, _)) = t.split_once("://") {
        return Err(if scheme.eq_ignore_ascii_case("https") {
            format!("'{s}': evlab proxy speaks plain HTTP to its origin, not TLS (https); {give}")
        } else {
            format!("'{s}': not an http:// URL; {give}")
        });
    } else {
        t
    };
    if authority.contains('@') {
        return Err(format!(
            "'{s}': user information is not sent to an origin; {give}"
        ));
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("'{s}': an IPv6 address needs its closing ']'"))?;
        match after.strip_prefix(':') {
            Some(p) => (h, Some(p)),
            None if after.is_empty() => (h, None),
            None => return Err(format!("'{s}': {give}")),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err(format!(
                    "'{s}': an IPv6 address goes in brackets, [::1]:8080"
                ))
            }
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("'{s}': no host; {give}"));
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("'{s}': '{p}' is not a port (1 to 65535)"))?,
        None if is_http => 80,
        None => return Err(format!("'{s}': no port; {give}")),
    };
    Ok(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_origin_is_host_port_or_an_http_url_of_a_server() {
        use super::origin;
        for (given, want) in [
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("http://127.0.0.1:8080", "127.0.0.1:8080"),
            ("http://127.0.0.1:8080/", "127.0.0.1:8080"),
            ("HTTP://localhost", "localhost:80"),
            ("http://[::1]:81/", "[::1]:81"),
            ("[::1]:81", "[::1]:81"),
            (" origin.lan:3128 ", "origin.lan:3128"),
        ] {
            assert_eq!(origin(given).as_deref(), Ok(want), "{given}");
        }
        for (given, says) in [
            ("https://127.0.0.1:8443", "not TLS"),
            ("http://127.0.0.1:8080/one", "not a URL with a path (/one)"),
            ("http://127.0.0.1:8080/?x=1", "with a path (/?x=1)"),
            ("http://h:8080#top", "with a path (#top)"),
            ("ftp://h:21", "not an http:// URL"),
            ("http://u:p@h:80", "user information"),
            ("127.0.0.1", "no port"),
            ("::1:80", "in brackets"),
            ("[::1", "closing ']'"),
            ("http://:80", "no host"),
            ("h:0", "not a port"),
            ("h:99999", "not a port"),
            ("http://h:x/", "not a port"),
            ("", "no host"),
        ] {
            let e = origin(given).unwrap_err();
            assert!(e.contains(says), "{given}: {e}");
        }
    }

    #[test]
    fn listen_takes_an_address_or_a_bare_port() {
        use super::listen_addr;
        assert_eq!(listen_addr("8080"), Ok("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(listen_addr(":0"), Ok("127.0.0.1:0".parse().unwrap()));
        assert_eq!(listen_addr("0.0.0.0:80"), Ok("0.0.0.0:80".parse().unwrap()));
        assert!(listen_addr("localhost:x")
            .unwrap_err()
            .contains("ADDR:PORT"));
        assert!(listen_addr("70000").is_err());
    }

    #[test]
    fn urls_give_server_port_and_uri() {
        use super::http_url;
        assert_eq!(
            http_url("http://127.0.0.1:8080/one"),
            Ok(("127.0.0.1".into(), 8080, "/one".into()))
        );
        assert_eq!(
            http_url("http://localhost"),
            Ok(("localhost".into(), 80, "/".into()))
        );
        assert_eq!(
            http_url("http://h:81/a/b?x=1"),
            Ok(("h".into(), 81, "/a/b?x=1".into()))
        );
        assert!(http_url("https://h/").unwrap_err().contains("not TLS"));
        assert!(http_url("h:80/x")
            .unwrap_err()
            .contains("not an http:// URL"));
        assert!(http_url("http://h:0/").is_err());
        assert!(http_url("http://h:x/").is_err());
        assert!(http_url("http:///x").is_err());
    }

    use super::*;

    #[test]
    fn durations_take_units_and_refuse_nonsense() {
        assert_eq!(seconds("30"), Ok(30.0));
        assert_eq!(seconds("1.5s"), Ok(1.5));
        assert_eq!(seconds("500ms"), Ok(0.5));
        assert_eq!(seconds("2m"), Ok(120.0));
        assert_eq!(seconds("1h"), Ok(3600.0));
        assert_eq!(seconds_or_zero("0"), Ok(0.0));
        for bad in ["0", "-1", "10x", "", "inf", "NaN", "s"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert!(seconds("10x").unwrap_err().contains("500ms, 30s, 2m, 1h"));
    }

    #[test]
    fn millisecond_flags_take_plain_milliseconds_or_units() {
        assert_eq!(millis("20"), Ok(20.0));
        assert_eq!(millis("2.5"), Ok(2.5));
        assert_eq!(millis("2s"), Ok(2000.0));
        assert_eq!(millis("500ms"), Ok(500.0));
        assert_eq!(millis("0"), Ok(0.0));
        assert_eq!(whole_millis("50"), Ok(50));
        assert_eq!(whole_millis("1s"), Ok(1000));
        assert!(whole_millis("1.5").is_err());
        for bad in ["-1", "x", "inf", "ms"] {
            assert!(millis(bad).is_err(), "{bad}");
        }
        assert!(millis("x").unwrap_err().contains("milliseconds (20, 2.5)"));
    }

    #[test]
    fn sizes_take_k_m_and_g() {
        assert_eq!(bytes("4096"), Ok(4096));
        assert_eq!(bytes("64K"), Ok(65536));
        assert_eq!(bytes("1m"), Ok(1 << 20));
        assert_eq!(bytes("2G"), Ok(2 << 30));
        assert_eq!(size("512"), Ok(512));
        for bad in ["", "K", "1.5K", "-1", "1T", "99999999999G"] {
            assert!(bytes(bad).is_err(), "{bad}");
        }
        assert!(size("0").is_err());
    }

    #[test]
    fn rates_are_positive_and_at_least_one_per_hour() {
        assert_eq!(rate("100"), Ok(100.0));
        assert_eq!(rate("2.5/s"), Ok(2.5));
        assert_eq!(rate("0.001"), Ok(0.001));
        assert!(rate(&format!("{MIN_RATE}")).is_ok());
        for bad in ["0", "-5", "x", "inf", "1e-9", "0.0002", "1e-300", "5e-324"] {
            assert!(rate(bad).is_err(), "{bad}");
        }
        assert!(rate("-5").unwrap_err().contains("more than zero"));
        let e = rate("1e-9").unwrap_err();
        assert!(
            e.contains("every 32 years") && e.contains("one per hour"),
            "{e}"
        );
        assert_eq!(span(30.0), "30.0 s");
        assert_eq!(span(720.0), "12 min");
        assert_eq!(span(5.0 * 3600.0), "5.0 h");
        assert_eq!(span(3.0 * 86_400.0), "3 days");
    }
}

/// The event loop's flags that `evlab serve` and `evlab proxy` share, flattened into each.
#[derive(clap::Args, Debug, Clone)]
pub struct LoopFlags {
    /// Maximum simultaneous connections; accepting pauses at the limit
    #[arg(long, default_value_t = 100_000)]
    pub max_conns: usize,
    /// Answer GET /.evlab/stats with the counters as JSON, syscalls included (the proxy
    /// answers it itself, never forwards it)
    #[arg(long)]
    pub stats: bool,
    /// Time every syscall (for the syscall profile; costs a clock read per call)
    #[arg(long)]
    pub profile: bool,
    /// listen(2) backlog
    #[arg(long, default_value_t = 4096)]
    pub backlog: i32,
    /// Events asked for per wait
    #[arg(long, default_value_t = 512)]
    pub events_per_wait: usize,
    /// uring-poll: how many waits in a row may be answered from the completion ring in memory
    /// before one enters the kernel anyway (the proxy paper's uselect, user-level connection
    /// tracking, calls this MaxPass)
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_pass: u32,
}

/// Sets a server's or a proxy's configuration `$cfg` from [`LoopFlags`] `$f` (the two
/// configurations are different types with these fields alike), and uring-poll's MaxPass.
macro_rules! apply_loop_flags {
    ($cfg:expr, $f:expr) => {{
        let f: &$crate::args::LoopFlags = &$f;
        $cfg.max_conns = f.max_conns;
        $cfg.stats = f.stats;
        $cfg.profile = f.profile;
        $cfg.backlog = f.backlog;
        $cfg.events_per_wait = f.events_per_wait.max(1);
        evlab_poll::uring_poll::set_max_pass(f.max_pass);
    }};
}
pub(crate) use apply_loop_flags;
