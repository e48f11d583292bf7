//! A value confined to whichever thread holds its lock: how one rank's state, made for a
//! single owner (`Rc`, `RefCell`, no lock on the critical path), is shared by the threads of
//! MPI_THREAD_SERIALIZED and MPI_THREAD_MULTIPLE (`crate::shared`).
//!
//! The rule that makes it sound, kept by this module's one user: everything reachable from
//! the value (and every value made from it that shares its `Rc`s: communicator handles,
//! requests) is touched only by the thread that holds the guard. A thread may keep such a
//! derived value across an unlock (a request it will test again), but does not touch it
//! until it holds the guard again, and drops it while holding the guard. The engine's
//! thread-local pools only ever hold values no other thread can reach (a lending region's
//! life goes back to a pool only when no loan of it is left).

#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};

/// Exclusive access to a [`Confined`] value.
pub(crate) type Guard<'a, T> = MutexGuard<'a, T>;

pub(crate) struct Confined<T>(Mutex<T>);

// SAFETY: `T` is reached only through `lock`, whose guard is neither `Send` nor `Sync`, so
// the thread that touches `T`'s non-atomic parts (reference counts, borrow flags) is always
// the one holding the mutex, and the mutex orders one holder's writes before the next
// holder's reads; values derived from `T` follow the same rule (module doc). Moving a
// `Confined` moves the mutex, which no one then holds; dropping it drops `T` on a thread
// that has the only reference.
unsafe impl<T> Send for Confined<T> {}
// SAFETY: as above: `&Confined<T>` gives access to `T` only through the mutex.
unsafe impl<T> Sync for Confined<T> {}

impl<T> Confined<T> {
    pub(crate) fn new(t: T) -> Confined<T> {
        Confined(Mutex::new(t))
    }

    /// Exclusive access to the value until the guard drops. A thread that panicked while
    /// holding it left the value as the panic found it: it is handed on (the rank's calls
    /// report what they find).
    pub(crate) fn lock(&self) -> Guard<'_, T> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A model of how threads sharing a rank wait (`crate::shared`): each call takes the lock,
/// starts or tests its operation, and lets the lock go between tests; whoever holds the lock
/// drives progress for everyone. loom checks, over every interleaving, that no waiting
/// thread misses the event it waits for (there is no sleeping wait to miss a wake-up) and
/// that every message is matched exactly once, in order per sender.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::Confined;
    use loom::sync::Arc;

    /// A toy engine: receives posted in order, messages arrived in order (the receive
    /// queue and the unexpected queue of one source and tag).
    #[derive(Default)]
    struct Engine {
        posted: std::collections::VecDeque<usize>,
        unexpected: std::collections::VecDeque<u32>,
        done: Vec<Option<u32>>,
    }

    impl Engine {
        fn post(&mut self) -> usize {
            self.done.push(None);
            let id = self.done.len() - 1;
            match self.unexpected.pop_front() {
                Some(m) => self.done[id] = Some(m),
                None => self.posted.push_back(id),
            }
            id
        }

        fn arrive(&mut self, m: u32) {
            match self.posted.pop_front() {
                Some(id) => self.done[id] = Some(m),
                None => self.unexpected.push_back(m),
            }
        }
    }

    /// Post under the lock, then test under the lock until matched, yielding between.
    fn recv(rank: &Confined<Engine>) -> u32 {
        let id = rank.lock().post();
        loop {
            if let Some(m) = rank.lock().done[id] {
                return m;
            }
            loom::thread::yield_now();
        }
    }

    #[test]
    fn loom_shared_rank_waits_miss_nothing() {
        // Two threads share the rank. One waits for a message, releasing the lock between
        // tests; the other posts a receive of its own, delivers two messages under the lock
        // (it must get the lock while the first thread waits: no deadlock between a waiting
        // thread and a sending one), then waits for its own receive. The waits spin, so the
        // preemptions are bounded; every order of posts, arrivals and tests that three
        // forced switches per run can make is explored.
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let rank = Arc::new(Confined::new(Engine::default()));
            let r = rank.clone();
            let waiter = loom::thread::spawn(move || recv(&r));
            let mine = rank.lock().post();
            for m in [1, 2] {
                rank.lock().arrive(m);
            }
            let own = loop {
                if let Some(m) = rank.lock().done[mine] {
                    break m;
                }
                loom::thread::yield_now();
            };
            let theirs = waiter.join().unwrap();
            let mut got = vec![own, theirs];
            got.sort_unstable();
            assert_eq!(got, vec![1, 2], "each message matched exactly once");
            let e = rank.lock();
            // Receives posted earlier match earlier messages (non-overtaking).
            let order: Vec<u32> = e.done.iter().map(|d| d.expect("matched")).collect();
            assert_eq!(order, vec![1, 2]);
        });
    }
}
