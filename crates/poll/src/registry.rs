//! The mechanism registry: the one list of every event mechanism evlab knows.
//!
//! Everything that needs to know the mechanisms is generated from the list in
//! [`for_each_mechanism!`](crate::for_each_mechanism): here the [`Mechanism`] enum, `ALL`,
//! `NAMES`, `name()`, `describe()`, the aliases of `from_name()`, `kind()`, `wait_syscall()` and
//! the `support()` probes; elsewhere the server's dispatch (`crates/server/src/worker.rs`), the
//! per-mechanism test modules of `crates/poll/tests` and `crates/server/tests`, the CLI's
//! `--list-mechanisms` and the check that `docs/mechanisms.md` names every mechanism. The lab,
//! which holds no engine, reads the names from `evlab_wire::mechanisms::NAMES`, which a test
//! here keeps equal to [`Mechanism::NAMES`].
//!
//! Adding a readiness mechanism is its file in `crates/poll/src/` (a type implementing
//! [`Poller`](crate::Poller), overriding [`Poller::support`](crate::Poller::support) if the kernel
//! may refuse it) and one line in the list, which also declares the file's module (`lib.rs`
//! expands the list into `pub mod name;` for each `readiness($crate::name::Type)`); and its name
//! in `evlab_wire::mechanisms::NAMES`, for the documents' readers.

/// Calls `$callback! { … }` with the registry: one entry per mechanism, in listing order.
///
/// This is the single list of mechanisms; everything else is generated from it. Each entry reads
///
/// ```text
/// Variant => "name", aliases ["alias", …], waits SyscallVariant, kind (args), "description";
/// ```
///
/// - `Variant`: the [`Mechanism`](crate::Mechanism) variant;
/// - `"name"`: the name used on the command line, in specs, stats and docs;
/// - `aliases`: other spellings `from_name` accepts;
/// - `waits`: the [`Syscall`](evlab_sys::Syscall) variant in which the mechanism blocks for
///   events (what its server spends its idle time in; the stats tests look for it);
/// - `kind`: `readiness($crate::path::Type)`, a type implementing [`Poller`](crate::Poller) that
///   the server's generic loop runs, or `completion(support_fn)`, an engine of its own in the
///   server, whose kernel support `support_fn() -> Support` probes;
/// - the description printed by `evlab serve --list-mechanisms`.
///
/// A callback matches the whole list, and usually dispatches on the kind with internal rules:
///
/// ```
/// macro_rules! names_of_readiness {
///     ($($v:ident => $name:literal, aliases $a:tt, waits $w:ident, $kind:ident $args:tt, $d:literal;)*) => {
///         [$(names_of_readiness!(@one $name $kind)),*]
///     };
///     (@one $name:literal readiness) => { Some($name) };
///     (@one $name:literal completion) => { None };
/// }
/// let names = evlab_poll::for_each_mechanism!(names_of_readiness);
/// assert!(names.contains(&Some("epoll-et")));
/// assert!(!names.contains(&Some("uring")));
/// ```
#[macro_export]
macro_rules! for_each_mechanism {
    ($callback:ident) => {
        $callback! {
            Select => "select", aliases [], waits Select,
                readiness($crate::select::Select),
                "select(2) over growable fd bitmaps, copied and scanned every call";
            Poll => "poll", aliases [], waits Poll,
                readiness($crate::poll::Poll),
                "poll(2) over a pollfd array, copied and scanned every call";
            EpollLt => "epoll-lt", aliases ["epoll", "epoll_lt", "epoll-level"], waits EpollWait,
                readiness($crate::epoll::EpollLt),
                "level-triggered epoll, epoll_ctl(MOD) on every change of interest";
            EpollEt => "epoll-et", aliases ["epoll_et", "epoll-edge"], waits EpollWait,
                readiness($crate::epoll::EpollEt),
                "edge-triggered epoll, registered once, drained to EAGAIN";
            Epoll2 => "epoll2", aliases [], waits EpollWait,
                readiness($crate::epoll::Epoll2),
                "level-triggered epoll, IN|OUT registered once, unwanted events dropped in user space";
            EpollCtlv => "epoll-ctlv", aliases ["epoll_ctlv"], waits IoUringEnter,
                readiness($crate::epoll_ctlv::EpollCtlv),
                "level-triggered epoll, interest changes batched into one io_uring_enter";
            UringPoll => "uring-poll", aliases ["uring_poll", "uselect"], waits IoUringEnter,
                readiness($crate::uring_poll::UringPoll),
                "multishot io_uring poll, readiness harvested from shared memory";
            RtSig => "rtsig", aliases ["rt-signals", "sigio"], waits SigTimedWait,
                readiness($crate::rtsig::RtSig),
                "POSIX real-time signals (O_ASYNC, F_SETSIG) taken by sigtimedwait; a poll sweep after queue overflow";
            AioPoll => "aio-poll", aliases ["aio_poll", "aio"], waits IoGetevents,
                readiness($crate::aio_poll::AioPoll),
                "Linux AIO one-shot polls (IOCB_CMD_POLL), re-armed in one io_submit per wait, reaped by io_getevents";
            Uring => "uring", aliases ["io_uring", "io-uring"], waits IoUringEnter,
                completion($crate::uring_probe::engine_support),
                "io_uring completion engine: multishot accept and recv, send";
        }
    };
}

/// How a mechanism delivers work to the server.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A [`Poller`](crate::Poller): the server's generic loop asks it which descriptors are
    /// ready, then makes the reads and writes itself.
    Readiness,
    /// An engine of its own in the server: the kernel performs the I/O and reports completions.
    Completion,
}

/// Whether this build and kernel can run a mechanism, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    Yes,
    No(String),
}

impl Support {
    /// `Yes` when nothing is missing, else `No` with the reason.
    pub fn unless(missing: Option<String>) -> Support {
        match missing {
            None => Support::Yes,
            Some(why) => Support::No(why),
        }
    }

    /// An `Unsupported` error naming the mechanism and the reason, for constructors.
    pub fn require(self, mechanism: &str) -> std::io::Result<()> {
        match self {
            Support::Yes => Ok(()),
            Support::No(why) => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!("{mechanism} unavailable: {why}"),
            )),
        }
    }
}

macro_rules! define_mechanisms {
    ($($variant:ident => $name:literal, aliases [$($alias:literal),*], waits $waits:ident,
        $kind:ident $args:tt, $about:literal;)*) => {
        /// The run-time name table of mechanisms (lighttpd's fdevent table, as an enum),
        /// generated from [`for_each_mechanism!`](crate::for_each_mechanism).
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum Mechanism {
            $(#[doc = $about] $variant,)*
        }

        impl Mechanism {
            /// How many mechanisms there are.
            pub const COUNT: usize = [$($name),*].len();

            /// Every mechanism evlab knows, in the order they are listed and plotted.
            pub const ALL: [Mechanism; Mechanism::COUNT] = [$(Mechanism::$variant),*];

            /// Every mechanism's name, in the order of [`Mechanism::ALL`].
            pub const NAMES: [&'static str; Mechanism::COUNT] = [$($name),*];

            pub const fn name(self) -> &'static str {
                match self {
                    $(Mechanism::$variant => $name,)*
                }
            }

            pub const fn describe(self) -> &'static str {
                match self {
                    $(Mechanism::$variant => $about,)*
                }
            }

            /// The other spellings [`Mechanism::from_name`] accepts for this mechanism.
            pub const fn aliases(self) -> &'static [&'static str] {
                match self {
                    $(Mechanism::$variant => &[$($alias),*],)*
                }
            }

            /// Readiness (a [`Poller`](crate::Poller)) or completion (an engine of its own).
            pub const fn kind(self) -> Kind {
                match self {
                    $(Mechanism::$variant => define_mechanisms!(@kind $kind),)*
                }
            }

            /// The syscall in which the mechanism blocks waiting for events.
            pub const fn wait_syscall(self) -> ::evlab_sys::Syscall {
                match self {
                    $(Mechanism::$variant => ::evlab_sys::Syscall::$waits,)*
                }
            }

            /// Whether this build implements the mechanism and this kernel allows it.
            pub fn support(self) -> Support {
                match self {
                    $(Mechanism::$variant => define_mechanisms!(@support $kind $args),)*
                }
            }

            /// Looks a name (or alias) up, ignoring case; the error lists every valid name.
            pub fn from_name(name: &str) -> Result<Mechanism, UnknownMechanism> {
                let lower = name.trim().to_ascii_lowercase();
                match lower.as_str() {
                    $($name $(| $alias)* => Ok(Mechanism::$variant),)*
                    _ => Err(UnknownMechanism(name.to_string())),
                }
            }
        }

        // Each Poller names the variant it is registered under; a line pointing at the wrong
        // type fails the build here.
        $(define_mechanisms!(@check $variant $kind $args);)*
    };

    (@kind readiness) => { Kind::Readiness };
    (@kind completion) => { Kind::Completion };
    (@support readiness ($ty:ty)) => { <$ty as $crate::Poller>::support() };
    (@support completion ($probe:path)) => { $probe() };
    (@check $variant:ident readiness ($ty:ty)) => {
        const _: () = assert!(
            matches!(<$ty as $crate::Poller>::MECHANISM, Mechanism::$variant),
            concat!(
                "the type registered for Mechanism::",
                stringify!($variant),
                " names another variant as its Poller::MECHANISM"
            ),
        );
    };
    (@check $variant:ident completion $args:tt) => {};
}

for_each_mechanism!(define_mechanisms);

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Mechanism {
    type Err = UnknownMechanism;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mechanism::from_name(s)
    }
}

/// An unknown mechanism name; its message lists the valid ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMechanism(pub String);

impl std::fmt::Display for UnknownMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown mechanism '{}'; valid mechanisms: {}",
            self.0,
            Mechanism::NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownMechanism {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_lists_all() {
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::from_name(m.name()).unwrap(), m);
            for a in m.aliases() {
                assert_eq!(Mechanism::from_name(a).unwrap(), m, "alias {a}");
            }
        }
        assert_eq!(Mechanism::from_name("EPOLL").unwrap(), Mechanism::EpollLt);
        assert_eq!(
            Mechanism::from_name(" uselect ").unwrap(),
            Mechanism::UringPoll
        );
        let err = Mechanism::from_name("kqueue").unwrap_err().to_string();
        assert!(err.contains("kqueue"), "{err}");
        for m in Mechanism::ALL {
            assert!(err.contains(m.name()), "{err}");
        }
    }

    #[test]
    fn names_and_aliases_are_distinct_lowercase_words() {
        let mut seen = std::collections::HashSet::new();
        for m in Mechanism::ALL {
            for n in std::iter::once(m.name()).chain(m.aliases().iter().copied()) {
                assert!(seen.insert(n), "{n} is listed twice");
                assert_eq!(n, n.trim().to_ascii_lowercase(), "{n} would never match");
                // "all" is the lab's word for every mechanism.
                assert_ne!(n, "all");
            }
        }
        assert_eq!(Mechanism::NAMES.len(), Mechanism::ALL.len());
    }

    /// The documents' readers (the lab) know the mechanisms by wire's list, not this crate.
    #[test]
    fn wire_names_the_registry_mechanisms_in_its_order() {
        assert_eq!(
            evlab_wire::mechanisms::NAMES,
            &Mechanism::NAMES[..],
            "evlab_wire::mechanisms::NAMES (left) differs from the registry (right)"
        );
    }

    #[test]
    fn readiness_mechanisms_report_support_and_the_engine_is_completion() {
        for m in [Mechanism::Select, Mechanism::Poll, Mechanism::EpollLt] {
            assert_eq!(m.support(), Support::Yes);
            assert_eq!(m.kind(), Kind::Readiness);
        }
        assert_eq!(Mechanism::Uring.kind(), Kind::Completion);
    }
}
