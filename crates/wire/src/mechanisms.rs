//! The names of the μserver's event mechanisms, as specs, stats (`ServerStats::mechanism`) and
//! reports spell them: the documents' vocabulary, for readers that hold no engine (the lab's
//! model reads an experiment's `mechanisms` against it).
//!
//! The registry in `evlab-poll` (`for_each_mechanism!`) is the source; a test there keeps this
//! list equal to its `Mechanism::NAMES`, in its order (the order the lab sweeps and plots).

/// Every mechanism's name, readiness and completion alike, in the registry's order.
pub const NAMES: &[&str] = &[
    "select",
    "poll",
    "epoll-lt",
    "epoll-et",
    "epoll2",
    "epoll-ctlv",
    "uring-poll",
    "rtsig",
    "aio-poll",
    "uring",
];
