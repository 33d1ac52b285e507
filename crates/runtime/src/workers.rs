//! Worker threads: started together, each saying once whether it came up, and joined together.
//!
//! A worker builds its loop in its own thread (a ring or an epoll instance belongs to the thread
//! that uses it), then reports through its [`Ready`] before it runs; [`Threads::start`] returns
//! once every worker has reported, so a server that returns is serving, and one that cannot start
//! says which worker failed and why.

use std::io;
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How a worker says it came up (`Ok`) or could not (its number and the error), once.
#[derive(Clone, Debug)]
pub struct Ready {
    worker: usize,
    tx: Sender<Result<(), (usize, io::Error)>>,
}

impl Ready {
    /// Reports what building the worker gave (the error is copied: the worker returns it too).
    pub fn report<T>(&self, made: &io::Result<T>) {
        let _ = self.tx.send(match made {
            Ok(_) => Ok(()),
            Err(e) => Err((self.worker, io::Error::new(e.kind(), e.to_string()))),
        });
    }
}

/// Why workers could not start, or how one ended.
#[derive(Debug)]
pub enum WorkerError {
    /// The worker failed (to start, or while running) with this error.
    Failed { worker: usize, error: io::Error },
    /// The worker panicked.
    Panicked(usize),
}

/// The running workers.
#[derive(Debug, Default)]
pub struct Threads {
    threads: Vec<JoinHandle<io::Result<()>>>,
}

impl Threads {
    /// Starts `n` threads named `{name}-{w}`, each running `work(w, ready)`, and waits until
    /// each has reported through its `ready`. If one cannot start, `stop` is called (it must
    /// make the others return), every thread is joined and the first failure returned.
    pub fn start(
        n: usize,
        name: &str,
        work: impl Fn(usize, Ready) -> io::Result<()> + Send + Sync + 'static,
        stop: impl Fn(),
    ) -> Result<Threads, WorkerError> {
        let work = Arc::new(work);
        let (tx, rx) = channel();
        let mut t = Threads::default();
        for w in 0..n {
            let ready = Ready {
                worker: w,
                tx: tx.clone(),
            };
            let work = work.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{w}"))
                .spawn(move || work(w, ready));
            match spawned {
                Ok(h) => t.threads.push(h),
                Err(error) => {
                    stop();
                    let _ = t.join();
                    return Err(WorkerError::Failed { worker: w, error });
                }
            }
        }
        drop(tx);
        for _ in 0..n {
            let failed = match rx.recv() {
                Ok(Ok(())) => continue,
                Ok(Err((worker, error))) => WorkerError::Failed { worker, error },
                // Every sender gone before reporting: a worker panicked while starting.
                Err(_) => WorkerError::Panicked(0),
            };
            stop();
            let joined = t.join();
            return Err(match (failed, joined) {
                (WorkerError::Panicked(_), Err(e)) => e,
                (f, _) => f,
            });
        }
        Ok(t)
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Waits for every worker to return; the first failure, if any.
    pub fn join(&mut self) -> Result<(), WorkerError> {
        let mut result = Ok(());
        for (w, t) in self.threads.drain(..).enumerate() {
            let r = match t.join() {
                Ok(Ok(())) => continue,
                Ok(Err(error)) => WorkerError::Failed { worker: w, error },
                Err(_) => WorkerError::Panicked(w),
            };
            if result.is_ok() {
                result = Err(r);
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn starts_all_or_says_which_failed_and_stops_the_rest() {
        let mut t = Threads::start(
            3,
            "ok",
            |_, ready| {
                ready.report(&Ok(()));
                Ok(())
            },
            || {},
        )
        .unwrap();
        t.join().unwrap();
        assert!(t.is_empty());

        let stop = Arc::new(AtomicBool::new(false));
        let seen = stop.clone();
        let r = Threads::start(
            3,
            "bad",
            move |w, ready| {
                let made = if w == 1 {
                    Err(io::Error::other("no ring"))
                } else {
                    Ok(())
                };
                ready.report(&made);
                made?;
                while !seen.load(Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Ok(())
            },
            || stop.store(true, Ordering::SeqCst),
        );
        match r {
            Err(WorkerError::Failed { worker: 1, error }) => {
                assert_eq!(error.to_string(), "no ring")
            }
            other => panic!("{other:?}"),
        }
    }
}
