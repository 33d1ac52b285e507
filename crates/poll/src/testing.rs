//! For tests only: the one place that decides whether a test whose requirement is missing
//! skips or fails.
//!
//! A test that needs something the machine may lack (io_uring, root, a cgroup, network
//! namespaces, nginx, …) asks [`require`]. When it is present the test runs. When it is
//! missing the test fails if the environment variable `EVLAB_REQUIRE` is `all` or a comma- or
//! space-separated list naming it (CI sets `all`), and otherwise skips: it prints
//! `SKIPPED(what): why` to stderr and, when `EVLAB_SKIP_LOG` names a file, appends one line
//! to it, so that a green run says how many tests did not run and why (`.ci/run` prints the
//! summary). Lines in that file are tab-separated: `skipped` or `missing` (the test failed),
//! what, the test's name, why.
//!
//! It lives in `evlab-poll` because every crate with such tests already depends on it; it is
//! hidden from the documentation and costs the library nothing it does not call.

use std::io::Write;

use crate::{Mechanism, Support};

/// Whether the environment asks for `what` to be present: `EVLAB_REQUIRE=all`, or a comma- or
/// space-separated list naming it.
pub fn required(what: &str) -> bool {
    names(&std::env::var("EVLAB_REQUIRE").unwrap_or_default(), what)
}

/// Whether the list `req` (`all`, or names separated by commas or spaces) names `what`.
fn names(req: &str, what: &str) -> bool {
    req.split([',', ' ']).any(|w| w == "all" || w == what)
}

/// `true` when `present`. When not: panics naming `what` and `why` if `EVLAB_REQUIRE` asks for
/// `what`, else prints `SKIPPED(what): why` to stderr and returns `false` (the test returns
/// without running). Either way, a line goes to the file `EVLAB_SKIP_LOG` names, if any.
#[track_caller]
pub fn require(what: &str, present: bool, why: &str) -> bool {
    if present {
        return true;
    }
    if required(what) {
        log("missing", what, why);
        panic!("missing {what}, which EVLAB_REQUIRE asks for: {why}");
    }
    log("skipped", what, why);
    eprintln!("SKIPPED({what}): {why}");
    false
}

/// What a mechanism needs of the kernel, as [`require`] names it: `io_uring` for those that
/// enter the kernel through io_uring (epoll-ctlv, uring-poll, the uring engine), `aio` for
/// aio-poll, `rtsig` for real-time signals, else the mechanism's own name.
pub fn needs(m: Mechanism) -> &'static str {
    use evlab_sys::Syscall;
    match m.wait_syscall() {
        Syscall::IoUringEnter => "io_uring",
        Syscall::IoGetevents => "aio",
        Syscall::SigTimedWait => "rtsig",
        _ => m.name(),
    }
}

/// [`require`] for a support probe's answer: `what` is missing when `support` is `No`, for the
/// reason it gives (after `context`).
#[track_caller]
pub fn supported(what: &str, support: Support, context: &str) -> bool {
    match support {
        Support::Yes => true,
        Support::No(why) => require(what, false, &format!("{context}: {why}")),
    }
}

/// [`require`] for a mechanism: `true` when this kernel runs it, else skip or fail with the
/// reason its support probe gives.
#[track_caller]
pub fn mechanism(m: Mechanism) -> bool {
    supported(needs(m), m.support(), &format!("mechanism {m} unavailable"))
}

/// [`require`] for a program on `PATH` (nginx, curl, groff, …), named as the requirement.
#[track_caller]
pub fn program(name: &str) -> bool {
    require(
        name,
        on_path(name),
        &format!("`{name}` is not installed (scripts/setup.sh installs it)"),
    )
}

/// Whether an executable `name` is on `PATH` (or, for a path, exists and is executable).
pub fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let exec = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        return exec(std::path::Path::new(name));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    // Where the servers live on Debian, even when PATH (of an ordinary user) leaves it out.
    let extra = std::env::split_paths("/usr/sbin:/sbin:/usr/local/sbin");
    std::env::split_paths(&path)
        .chain(extra)
        .any(|d| exec(&d.join(name)))
}

/// Whether the test runs as root (effective uid 0).
pub fn root() -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn log(kind: &str, what: &str, why: &str) {
    let Some(path) = std::env::var_os("EVLAB_SKIP_LOG").filter(|p| !p.is_empty()) else {
        return;
    };
    let line = line(kind, what, &test_name(), why);
    // One write to a file opened for appending: lines from tests in parallel processes do not
    // interleave.
    let r = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = r {
        eprintln!("EVLAB_SKIP_LOG={}: {e}", path.to_string_lossy());
    }
}

/// The running test: its binary (without cargo's hash) and the name libtest gave its thread.
fn test_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let binary = match stem.rsplit_once('-') {
        Some((b, hash)) if hash.len() == 16 && hash.bytes().all(|c| c.is_ascii_hexdigit()) => b,
        _ => &stem,
    };
    let thread = std::thread::current();
    format!("{binary} {}", thread.name().unwrap_or("?"))
}

/// One line of the skip log: tab-separated, with no tab or newline inside a field.
fn line(kind: &str, what: &str, test: &str, why: &str) -> String {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    format!("{kind}\t{}\t{}\t{}\n", clean(what), clean(test), clean(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn present_runs_and_the_io_uring_mechanisms_need_io_uring() {
        assert!(require("nothing-at-all", true, "never asked"));
        assert_eq!(needs(Mechanism::Uring), "io_uring");
        assert_eq!(needs(Mechanism::UringPoll), "io_uring");
        assert_eq!(needs(Mechanism::EpollCtlv), "io_uring");
        assert_eq!(needs(Mechanism::AioPoll), "aio");
        assert_eq!(needs(Mechanism::Poll), "poll");
        assert!(on_path("sh"));
        assert!(!on_path("no-such-program-evlab"));
    }

    #[test]
    fn a_log_line_is_four_tab_separated_fields() {
        let l = line(
            "skipped",
            "io_uring",
            "server each::Uring::get_one",
            "no\tring\nhere",
        );
        assert_eq!(
            l,
            "skipped\tio_uring\tserver each::Uring::get_one\tno ring here\n"
        );
        let t = test_name();
        assert!(
            t.starts_with("evlab_poll ") && t.ends_with("a_log_line_is_four_tab_separated_fields"),
            "{t}"
        );
    }

    #[test]
    fn the_list_names_what_or_all() {
        assert!(names("all", "io_uring"));
        assert!(names("root,io_uring", "io_uring"));
        assert!(names("root io_uring", "io_uring"));
        assert!(names("root, io_uring", "io_uring"));
        assert!(!names("root,cgroup", "io_uring"));
        assert!(!names("", "io_uring"));
        assert!(!names("io_uring_x", "io_uring"));
    }
}
