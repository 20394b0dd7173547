//! Where the live driver's blocking store calls run, off the async threads.
//!
//! On a store whose writes all take one lock (SQLite), a thread of their own
//! (`jadpo-store`) makes them one after the other, in the order asked: one claim
//! follows another without waiting for a blocking thread to wake or behind the
//! attempts queued on the run's threads, and nothing else of the run waits
//! behind the store's lock. On a store whose writers work at once (PostgreSQL),
//! each call goes to tokio's blocking threads.

use std::sync::mpsc;

/// A store call, with what it does with its result.
type Job = Box<dyn FnOnce() + Send>;

/// Where store calls run.
#[derive(Clone)]
pub(super) enum StoreCalls {
    /// The store's own thread, fed in order.
    Thread(mpsc::Sender<Job>),
    /// Tokio's blocking threads.
    Blocking,
}

impl StoreCalls {
    /// The store's own thread, for a store with one writer (tokio's blocking
    /// threads if the system gives no thread); tokio's blocking threads
    /// otherwise. The thread logs where the caller's thread does (a test's log
    /// is its thread's), and ends once every handle is dropped and its calls made.
    pub fn new(one_writer: bool) -> StoreCalls {
        if !one_writer {
            return StoreCalls::Blocking;
        }
        let (calls, to_make) = mpsc::channel::<Job>();
        let log = tracing::dispatcher::get_default(Clone::clone);
        let thread = std::thread::Builder::new().name("jadpo-store".into()).spawn(move || {
            tracing::dispatcher::with_default(&log, || {
                for call in to_make {
                    call();
                }
            });
        });
        match thread {
            Ok(_) => StoreCalls::Thread(calls),
            Err(_) => StoreCalls::Blocking,
        }
    }

    /// Make `call` (which catches its own panics) off the async threads.
    pub fn make(&self, call: impl FnOnce() + Send + 'static) {
        match self {
            StoreCalls::Thread(calls) => {
                // The thread ends only when every sender is gone.
                if let Err(mpsc::SendError(call)) = calls.send(Box::new(call)) {
                    tokio::task::spawn_blocking(call);
                }
            }
            StoreCalls::Blocking => {
                tokio::task::spawn_blocking(call);
            }
        }
    }
}
