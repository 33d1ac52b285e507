//! A running service: the handle the server and the proxy both return from `start`.
//!
//! A service is listeners bound at one address, worker threads started together behind them
//! ([`Threads`]), and the state the workers share ([`ServiceState`]: their counters, wakers and
//! the shutdown request, in a [`Registry`], and the stats document). The handle gives the
//! address, the state and the stats; it asks the workers to stop, joins them, and closes the
//! listeners once they are done, also when it is dropped without a shutdown.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;

use evlab_sys as sys;

use crate::registry::{Registry, WorkerCounters};
use crate::workers::{Ready, Threads, WorkerError};

/// What the workers of one service share.
pub trait ServiceState: Send + Sync + 'static {
    /// The counters one worker writes.
    type Worker: WorkerCounters;

    /// The workers' counters and wakers, and the shutdown request.
    fn registry(&self) -> &Registry<Self::Worker>;

    /// The stats document (`GET /.evlab/stats`, the exit summary).
    fn to_json(&self) -> String;

    /// Asks every worker to stop: stop accepting, finish what is in flight, exit.
    fn request_shutdown(&self) {
        self.registry().request_shutdown();
    }

    fn shutdown_requested(&self) -> bool {
        self.registry().shutdown_requested()
    }

    /// The wakers' descriptors (for a signal handler, which cannot take a lock).
    fn wakers(&self) -> Vec<RawFd> {
        self.registry().wakers()
    }
}

/// Implements [`ServiceState`] for `$shared` (with a `registry: Registry<$worker>` field and
/// an inherent `to_json`) and [`WorkerCounters`] for `$worker` (with a `syscalls:
/// Arc<ThreadCounters>` field): what every service's two types say alike.
#[macro_export]
macro_rules! service_state {
    ($shared:ty, $worker:ty) => {
        impl $crate::WorkerCounters for $worker {
            fn syscalls(&self) -> &evlab_sys::ThreadCounters {
                &self.syscalls
            }
        }

        impl $crate::ServiceState for $shared {
            type Worker = $worker;
            fn registry(&self) -> &$crate::Registry<$worker> {
                &self.registry
            }
            fn to_json(&self) -> String {
                <$shared>::to_json(self)
            }
        }
    };
}

/// Declares `$name`, a started service's handle over [`Service`]`<$shared>` (field `svc`),
/// which it dereferences to: the address, the state, the stats, shutdown and join.
#[macro_export]
macro_rules! service_handle {
    ($(#[$doc:meta])* $name:ident, $shared:ty) => {
        $(#[$doc])*
        pub struct $name {
            svc: $crate::Service<$shared>,
        }

        impl std::ops::Deref for $name {
            type Target = $crate::Service<$shared>;
            fn deref(&self) -> &$crate::Service<$shared> {
                &self.svc
            }
        }
    };
}

/// A running service with state `S`.
pub struct Service<S: ServiceState> {
    addr: SocketAddr,
    shared: Arc<S>,
    threads: Threads,
    listeners: Vec<RawFd>,
}

impl<S: ServiceState> Service<S> {
    /// Starts `n` workers named `{name}-{w}`, worker `w` running `work(w, ready)`, behind
    /// `listeners` bound at `addr`, and returns once every one has come up. If one cannot, the
    /// others are stopped and joined, the listeners closed, and its failure returned.
    pub fn start(
        n: usize,
        name: &str,
        (addr, listeners): (SocketAddr, Vec<RawFd>),
        shared: Arc<S>,
        work: impl Fn(usize, Ready) -> io::Result<()> + Send + Sync + 'static,
    ) -> Result<Service<S>, WorkerError> {
        let stop = || shared.request_shutdown();
        match Threads::start(n, name, work, stop) {
            Ok(threads) => Ok(Service {
                addr,
                shared,
                threads,
                listeners,
            }),
            Err(e) => {
                for fd in listeners {
                    let _ = sys::close(fd);
                }
                Err(e)
            }
        }
    }

    /// The bound address (with the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The state the workers share.
    pub fn shared(&self) -> &Arc<S> {
        &self.shared
    }

    /// The stats document.
    pub fn stats_json(&self) -> String {
        self.shared.to_json()
    }

    /// Asks every worker to stop: stop accepting, finish what is in flight, exit.
    pub fn request_shutdown(&self) {
        self.shared.request_shutdown();
    }

    /// Waits for the workers to exit (after a shutdown request or a fatal error), then closes
    /// the listeners; the first worker's failure, if any.
    pub fn wait(mut self) -> Result<(), WorkerError> {
        self.join()
    }

    /// Requests shutdown and waits.
    pub fn shutdown(self) -> Result<(), WorkerError> {
        self.request_shutdown();
        self.wait()
    }

    fn join(&mut self) -> Result<(), WorkerError> {
        let result = self.threads.join();
        for fd in self.listeners.drain(..) {
            let _ = sys::close(fd);
        }
        result
    }
}

impl<S: ServiceState> Drop for Service<S> {
    fn drop(&mut self) {
        if !self.threads.is_empty() || !self.listeners.is_empty() {
            self.shared.request_shutdown();
            let _ = self.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Waker;
    use evlab_sys::ThreadCounters;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counts {
        syscalls: Arc<ThreadCounters>,
    }

    impl Counts {
        fn new() -> Counts {
            Counts {
                syscalls: evlab_sys::thread_counters(),
            }
        }
    }

    impl WorkerCounters for Counts {
        fn syscalls(&self) -> &ThreadCounters {
            &self.syscalls
        }
    }

    #[derive(Default)]
    struct State {
        registry: Registry<Counts>,
        ran: AtomicUsize,
    }

    impl ServiceState for State {
        type Worker = Counts;
        fn registry(&self) -> &Registry<Counts> {
            &self.registry
        }
        fn to_json(&self) -> String {
            format!("{{\"ran\":{}}}", self.ran.load(Ordering::SeqCst))
        }
    }

    fn listener() -> (SocketAddr, Vec<RawFd>) {
        let fd = sys::tcp_listener(&"127.0.0.1:0".parse().unwrap(), 8, false).unwrap();
        (sys::getsockname(fd).unwrap(), vec![fd])
    }

    fn open(fd: RawFd) -> bool {
        sys::fcntl_int(fd, libc::F_GETFD, 0).is_ok()
    }

    /// Workers that wait on their waker until the shutdown request.
    fn worker(state: Arc<State>) -> impl Fn(usize, Ready) -> io::Result<()> + Send + Sync {
        move |_, ready| {
            let mut waker = Waker::new();
            ready.report(&waker);
            let waker = waker
                .as_mut()
                .map_err(|e| io::Error::new(e.kind(), "waker"))?;
            state.registry.add(Arc::new(Counts::new()), waker);
            state.ran.fetch_add(1, Ordering::SeqCst);
            while !state.shutdown_requested() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            state.registry.remove_waker(waker);
            waker.close();
            Ok(())
        }
    }

    #[test]
    fn starts_reports_and_stops_closing_its_listeners() {
        let state = Arc::new(State::default());
        let (addr, fds) = listener();
        let fd = fds[0];
        let s = Service::start(3, "t", (addr, fds), state.clone(), worker(state.clone())).unwrap();
        assert_eq!(s.local_addr(), addr);
        while state.ran.load(Ordering::SeqCst) < 3 {
            std::thread::yield_now();
        }
        assert_eq!(s.stats_json(), "{\"ran\":3}");
        assert!(open(fd));
        s.shutdown().unwrap();
        assert!(
            !open(fd),
            "the listener is closed once the workers are done"
        );
    }

    #[test]
    fn a_worker_that_cannot_start_is_named_and_the_listeners_closed() {
        let state = Arc::new(State::default());
        let (addr, fds) = listener();
        let fd = fds[0];
        let work = {
            let w = worker(state.clone());
            move |n: usize, ready: Ready| {
                if n == 1 {
                    let e: io::Result<()> = Err(io::Error::other("no ring"));
                    ready.report(&e);
                    return e;
                }
                w(n, ready)
            }
        };
        let e = Service::start(2, "t", (addr, fds), state.clone(), work).err();
        assert!(
            matches!(&e, Some(WorkerError::Failed { worker: 1, error }) if error.to_string() == "no ring"),
            "{e:?}"
        );
        assert!(!open(fd));
    }

    #[test]
    fn dropped_without_a_shutdown_it_stops_its_workers() {
        let state = Arc::new(State::default());
        let (addr, fds) = listener();
        let fd = fds[0];
        let s = Service::start(2, "t", (addr, fds), state.clone(), worker(state.clone())).unwrap();
        drop(s);
        assert!(state.shutdown_requested());
        assert!(!open(fd));
    }
}
