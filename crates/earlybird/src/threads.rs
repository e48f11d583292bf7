//! Thread jobs: N ranks as threads of the calling process, on the same fabric code as
//! process jobs (an anonymous shared segment instead of an inherited one). Tests, examples
//! and later endpoints use them.
//!
//! ```
//! let sums = earlybird::threads::run(3, |u| {
//!     let w = u.world();
//!     let mut got = [0i32];
//!     let next = (w.rank() + 1) % w.size();
//!     let prev = (w.rank() + w.size() - 1) % w.size();
//!     w.sendrecv(&[w.rank()], next, 0, &mut got, prev, 0).unwrap();
//!     got[0]
//! }).unwrap();
//! assert_eq!(sums, vec![2, 0, 1]);
//! ```
#![forbid(unsafe_code)]

use crate::assertions::Assertions;
use crate::bootstrap::Placement;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::job::JobSegment;
use crate::Universe;
use std::time::{Duration, Instant};

/// A thread job under construction.
#[derive(Clone, Debug)]
pub struct Job {
    n: u32,
    timeout: Option<Duration>,
    assertions: Assertions,
}

impl Job {
    pub fn new(n: u32) -> Job {
        Job {
            n,
            timeout: None,
            assertions: Assertions::empty(),
        }
    }

    /// Every rank initialises with the promises `a` (as [`crate::init_with_assertions`];
    /// `EARLYBIRD_ASSERTIONS` is not read by thread jobs, so tests in one process do not
    /// leak promises into each other).
    pub fn assertions(mut self, a: Assertions) -> Job {
        self.assertions = a;
        self
    }

    /// Abort the job (every rank's waits return MPIX_ERR_PROC_FAILED) if it runs longer than
    /// `t`. Ranks that are computing rather than waiting are not interrupted.
    pub fn timeout(mut self, t: Duration) -> Job {
        self.timeout = Some(t);
        self
    }

    /// Run `f` on every rank, each in its own thread with its own [`Universe`]; returns the
    /// results in rank order. A panic in one rank aborts the job (so the others stop
    /// waiting); once every rank has ended, this panics with every rank's panic message, one
    /// line each (`rank R: message`), the rank that aborted the job first (the cause) on the
    /// first line, the others in rank order: an assertion that fails on a surviving rank is
    /// reported too, not hidden behind the first failure.
    pub fn run<R, F>(&self, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(Universe) -> R + Sync,
    {
        if self.n == 0 {
            return Err(Error::new(
                ErrorClass::Arg,
                "a thread job needs at least 1 rank, got 0",
            ));
        }
        let job = JobSegment::anonymous(self.n)?;
        let f = &f;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..self.n)
                .map(|rank| {
                    let job = job.clone();
                    std::thread::Builder::new()
                        .name(format!("earlybird-rank-{rank}"))
                        .spawn_scoped(s, move || {
                            let placement = Placement {
                                rank,
                                job: job.clone(),
                                processes: false,
                            };
                            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                match Universe::from_placement(
                                    placement,
                                    crate::ThreadLevel::Funneled,
                                    self.assertions,
                                ) {
                                    Ok(u) => f(u),
                                    Err(e) => panic!("rank {rank}: cannot start: {e}"),
                                }
                            }));
                            if r.is_err() {
                                job.abort(rank as i32, -1);
                            }
                            r
                        })
                        .expect("spawn rank thread")
                })
                .collect();
            if let Some(t) = self.timeout {
                let deadline = Instant::now() + t;
                while handles.iter().any(|h| !h.is_finished()) {
                    if Instant::now() >= deadline {
                        let mut report =
                            format!("earlybird: thread job timed out after {t:?}; aborting it\n");
                        for r in 0..self.n {
                            report.push_str(&format!("  rank {r}: {}\n", job.describe(r)));
                        }
                        for line in job.endpoint_reports() {
                            report.push_str(&format!("  {line}\n"));
                        }
                        eprint!("{report}");
                        job.abort(-1, -1);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            let mut out = Vec::with_capacity(handles.len());
            let mut panics = Vec::new();
            for (rank, h) in handles.into_iter().enumerate() {
                match h.join().expect("rank thread") {
                    Ok(r) => out.push(r),
                    Err(p) => panics.push((rank as i32, p)),
                }
            }
            if !panics.is_empty() {
                // The rank that aborted the job first is the cause; the others are usually
                // its consequences, but each is reported.
                let first = job.aborted().map(|(r, _)| r);
                panics.sort_by_key(|(r, _)| (Some(*r) != first, *r));
                let text: Vec<String> = panics
                    .iter()
                    .map(|(r, p)| format!("rank {r}: {}", panic_message(p)))
                    .collect();
                std::panic::resume_unwind(Box::new(text.join("\n")));
            }
            Ok(out)
        })
    }
}

/// The text of a panic's payload (a `String` or `&str` message, as `panic!` makes them).
fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// Run `f` on `n` ranks as threads (see [`Job::run`]).
pub fn run<R, F>(n: u32, f: F) -> Result<Vec<R>>
where
    R: Send,
    F: Fn(Universe) -> R + Sync,
{
    Job::new(n).run(f)
}
