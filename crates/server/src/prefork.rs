//! `evlab serve --as processes`: N pre-forked worker processes, as Apache's prefork ran the
//! Linux Scalability Project's macro-benchmark. The parent binds the listener (one, inherited by
//! every child, for `shared` and `exclusive`; one SO_REUSEPORT socket per child for
//! `reuseport`), forks the children, and serves nothing itself: it closes its copies of the
//! listeners (so that a child that dies takes its reuseport socket, and the connections the
//! kernel would hash to it, along), then supervises.
//!
//! **Why fork without exec.** Fork copies only the calling thread, so a child of a threaded
//! process can inherit a lock (the allocator's, stdout's) that no thread of its own will ever
//! release. [`Prefork::start`] must therefore run before the process starts any thread, and
//! `evlab_sys::fork_run` refuses otherwise; `evlab serve` calls it first thing. Each child then
//! starts its one worker thread, and the parent none. Fork+exec of the same binary would work
//! from a threaded caller too, but needs the configuration and listeners passed through an
//! exec and a shared region passed by descriptor, for no gain here: this is Apache's model,
//! one image and its memory shared copy-on-write.
//!
//! **Supervision.** SIGCHLD is blocked before the first fork (each child unblocks it), so that
//! no child's end is missed, and SIGINT and SIGTERM once every child serves (until then they
//! end the parent, and PR_SET_PDEATHSIG its children: a start that hangs can be stopped). The
//! parent then takes them one at a time with `sigtimedwait`: no handler, no race. A stop signal is passed on to every child as
//! SIGTERM (each finishes its replies in flight, as a threads server does), and a second one
//! as SIGKILL; the parent returns once every child has been reaped. A child that ends on its
//! own is reported (and its slot says so in `/.evlab/stats`); the others go on serving, and the
//! stop that follows fails with what was lost. Every child has PR_SET_PDEATHSIG = SIGTERM, so
//! a parent killed outright takes its children along.
//!
//! **Stats.** The children publish their counters to slots of a shared mapping (`peers.rs`):
//! whichever child answers `GET /.evlab/stats` sums them all, and the parent prints the sum at
//! exit.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use evlab_sys::{self as sys, SigSet};

use crate::peers::{Peers, State};
use crate::stats::Shared;
use crate::{bind, validate, Config, Server, ServerError};
use evlab_runtime::ServiceState;

/// The signals the parent takes with `sigtimedwait`.
const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGCHLD];

/// A pre-forked server: the parent's view of its worker processes.
pub struct Prefork {
    addr: SocketAddr,
    /// Each worker's pid while it runs (`None` once reaped).
    pids: Vec<Option<u32>>,
    peers: Peers,
    shared: Arc<Shared>,
    signals: SigSet,
    /// A stop was passed on to the children (SIGTERM sent; a second stop sends SIGKILL).
    stopping: u8,
    died: Vec<String>,
}

impl Prefork {
    /// Binds, forks `cfg.workers` worker processes and returns once each says it serves (or
    /// the first that cannot, after stopping the rest). Must be called before this process
    /// starts any thread (refused otherwise, with the reason).
    pub fn start(cfg: Config) -> Result<Prefork, ServerError> {
        validate(&cfg)?;
        let n = cfg.workers;
        let setup = |e: std::io::Error| ServerError::Config(format!("--as processes: {e}"));
        if let Ok(t) = sys::threads_in_process() {
            if t != 1 {
                return Err(setup(std::io::Error::other(format!(
                    "{t} threads are running; worker processes are forked before any thread starts"
                ))));
            }
        }
        let peers = Peers::new(n, cfg.profile).map_err(setup)?;
        let (addr, listeners) = bind(&cfg, n)?;
        let signals = SigSet::of(&SIGNALS).map_err(setup)?;
        // SIGCHLD now, so that no child's end is missed; SIGINT and SIGTERM only once every
        // child serves, so that a start that hangs can still be stopped (the parent then dies
        // of the signal, and its children of theirs: PR_SET_PDEATHSIG).
        sys::block_signals_in_this_thread(&SigSet::of(&[libc::SIGCHLD]).map_err(setup)?)
            .map_err(setup)?;
        let shared = Arc::new(Shared::new(cfg.mechanism, n, cfg.profile).with_peers(peers.clone()));
        let mut p = Prefork {
            addr,
            pids: Vec::with_capacity(n),
            peers,
            shared,
            signals,
            stopping: 0,
            died: Vec::new(),
        };
        let started = p.fork_all(&cfg, &listeners);
        for fd in listeners {
            let _ = sys::close(fd);
        }
        if let Err(e) = started {
            p.stop_all(libc::SIGTERM);
            p.reap_all();
            let _ = sys::unblock_signals_in_this_thread(&p.signals);
            return Err(e);
        }
        sys::block_signals_in_this_thread(&p.signals).map_err(setup)?;
        Ok(p)
    }

    /// Forks every worker, then reads each one's report (`K ok` or `K err WHY`).
    fn fork_all(&mut self, cfg: &Config, listeners: &[RawFd]) -> Result<(), ServerError> {
        let setup = |e: std::io::Error| ServerError::Config(format!("--as processes: {e}"));
        let (rx, tx) = sys::pipe_blocking().map_err(setup)?;
        for k in 0..cfg.workers {
            let child = Child {
                k,
                cfg: cfg.clone(),
                addr: self.addr,
                listeners,
                peers: &self.peers,
                signals: &self.signals,
                tx: &tx,
                rx: &rx,
            };
            match sys::fork_run(libc::SIGTERM, || child.run()) {
                Ok(pid) => {
                    self.peers.set_pid(k, pid);
                    self.pids.push(Some(pid));
                }
                Err(error) => return Err(ServerError::Worker { worker: k, error }),
            }
        }
        drop(tx);
        let mut ok = 0;
        for line in BufReader::new(std::fs::File::from(rx)).lines() {
            let Ok(line) = line else { break };
            let (k, rest) = line.split_once(' ').unwrap_or((&line, ""));
            let k: usize = k.parse().unwrap_or(0);
            match rest.strip_prefix("err ") {
                Some(why) => {
                    return Err(ServerError::Worker {
                        worker: k,
                        error: std::io::Error::other(why.to_string()),
                    })
                }
                None => ok += 1,
            }
            if ok == cfg.workers {
                return Ok(());
            }
        }
        Err(ServerError::Config(format!(
            "--as processes: {} of {} worker processes ended before serving",
            cfg.workers - ok,
            cfg.workers
        )))
    }

    /// The bound address (with the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The worker processes still running.
    pub fn pids(&self) -> Vec<u32> {
        self.pids.iter().flatten().copied().collect()
    }

    /// The counters of every worker process (the parent's exit summary).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Supervises until SIGINT or SIGTERM, then stops every worker process and waits for all.
    /// `report` hears of each worker process that ends on its own while serving. Fails if one
    /// did, or if one ended badly while stopping; returns early (failing) if every one ended.
    pub fn run(mut self, report: &mut dyn FnMut(&str)) -> Result<(), ServerError> {
        while !self.pids().is_empty() {
            let sig = match sys::sigtimedwait(&self.signals, None) {
                Ok(s) => s.signo,
                Err(_) => continue, // EINTR
            };
            match sig {
                libc::SIGCHLD => self.reap(report),
                _ => {
                    self.stopping = self.stopping.saturating_add(1);
                    let how = if self.stopping == 1 {
                        libc::SIGTERM
                    } else {
                        libc::SIGKILL
                    };
                    self.stop_all(how);
                }
            }
        }
        let _ = sys::unblock_signals_in_this_thread(&self.signals);
        if self.died.is_empty() {
            Ok(())
        } else {
            Err(ServerError::Config(format!(
                "worker processes lost: {}",
                self.died.join("; ")
            )))
        }
    }

    /// Reaps every child that has ended and records how.
    fn reap(&mut self, report: &mut dyn FnMut(&str)) {
        while let Ok(Some((pid, how))) = sys::reap_any() {
            let Some(k) = self.pids.iter().position(|p| *p == Some(pid)) else {
                continue;
            };
            self.pids[k] = None;
            let asked = self.stopping > 0;
            self.peers.ended(k, how, asked && how.success());
            if !asked || !how.success() {
                let msg = format!("worker {k} (pid {pid}) ended: {how}");
                if asked {
                    report(&format!("evlab serve: {msg} while stopping"));
                } else {
                    report(&format!(
                        "evlab serve: {msg}; {} still serving",
                        self.pids().len()
                    ));
                }
                self.died.push(msg);
            }
        }
    }

    fn stop_all(&self, sig: i32) {
        for pid in self.pids() {
            let _ = sys::kill(pid, sig);
        }
    }

    /// Waits for every child (after a failed start).
    fn reap_all(&mut self) {
        for pid in self.pids() {
            let _ = sys::wait_child(pid);
        }
        self.pids.clear();
    }
}

impl Drop for Prefork {
    /// No child outlives its parent's handle: those still running are killed and reaped.
    fn drop(&mut self) {
        if !self.pids().is_empty() {
            self.stop_all(libc::SIGKILL);
            self.reap_all();
        }
    }
}

/// What one child needs, borrowed from the parent's memory (the child has its own copy).
struct Child<'a> {
    k: usize,
    cfg: Config,
    addr: SocketAddr,
    listeners: &'a [RawFd],
    peers: &'a Peers,
    signals: &'a SigSet,
    tx: &'a OwnedFd,
    rx: &'a OwnedFd,
}

impl Child<'_> {
    /// The child's life: its one worker on its listener until a stop; the exit code.
    fn run(self) -> i32 {
        let _ = sys::unblock_signals_in_this_thread(self.signals);
        // The report goes through the inherited write end, closed once written: the parent
        // reads until every child has reported or ended, and a copy left open in a child that
        // never reports would keep it waiting. (The child leaves with `_exit`; its copies of
        // the parent's descriptors are never dropped, so closing them here closes them once.)
        let _ = sys::close(self.rx.as_raw_fd());
        let tx = self.tx.as_raw_fd();
        let report = |line: String| {
            let r = sys::write(tx, line.as_bytes());
            let _ = sys::close(tx);
            r.is_ok()
        };
        // Its own listener: the shared one, or its reuseport socket; the others are closed.
        let mine = self.listeners[self.k.min(self.listeners.len() - 1)];
        for &fd in self.listeners {
            if fd != mine {
                let _ = sys::close(fd);
            }
        }
        let mut cfg = self.cfg;
        cfg.workers = 1;
        let peers = self.peers.for_worker(self.k);
        let shared = Arc::new(Shared::new(cfg.mechanism, 1, cfg.profile).with_peers(peers.clone()));
        let server = match Server::launch(cfg, self.addr, vec![mine], self.k, shared) {
            Ok(s) => s,
            Err(e) => {
                let why = e.to_string().replace('\n', " ");
                report(format!("{} err {why}\n", self.k));
                return 1;
            }
        };
        if let Err(e) = evlab_runtime::signals::install(&server.shared().wakers()) {
            report(format!("{} err installing signal handlers: {e}\n", self.k));
            return 1;
        }
        peers.set_state(self.k, State::Serving, std::process::id());
        if !report(format!("{} ok\n", self.k)) {
            return 1;
        }
        match server.wait() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("evlab serve: worker {}: {e}", self.k);
                1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evlab_poll::Mechanism;

    /// The test harness runs tests on threads: forking here is what `start` must refuse, before
    /// binding anything.
    #[test]
    fn a_threaded_process_is_refused_with_the_reason() {
        let _t = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(2)));
        let mut cfg = Config::new(
            "127.0.0.1:0".parse().unwrap(),
            std::env::temp_dir(),
            Mechanism::EpollLt,
        );
        cfg.workers = 2;
        let e = Prefork::start(cfg).err().expect("refused").to_string();
        assert!(
            e.contains("threads are running") && e.contains("before any thread"),
            "{e}"
        );
    }
}
