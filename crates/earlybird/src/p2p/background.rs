//! Operations the engine advances by itself: progress that does not wait for a request's
//! own wait.
//!
//! # The progress design
//!
//! MPI 4.1 §3.7.4 and §6.12: every pending operation of a process progresses while the
//! process is inside any MPI call that blocks or polls, whichever request that call is about.
//! earlybird meets it in two tiers, both driven by [`Engine::progress`], which every blocking
//! or polling call runs (each turn of a wait loop: `wait`, `wait_any`/`all`/`some`, the
//! `test` family, `recv`, `probe`/`iprobe`, a synchronous or rendezvous send, a blocking
//! collective, finalize, buffer detach; once per call for the nonblocking tests):
//!
//! 1. **Frames.** Queued frames go out, arrived frames are handled: eager data is matched or
//!    queued as unexpected, a rendezvous is pulled once matched, acknowledgements complete
//!    sends. A point-to-point operation needs nothing more: it is finished by frames alone.
//! 2. **Operations made of steps** ([`Background`]): a nonblocking or started persistent
//!    collective, a communicator agreement. Such an operation posts its next messages only
//!    when its earlier ones have arrived, so frames alone do not finish it; its request puts
//!    it on the engine's background list when it becomes active (unless its first advance
//!    posted every operation it has: then frames alone move it, and its last local steps
//!    wait for its own test or wait), and every progress call
//!    advances each one on the list (post what can be posted, run the local steps whose
//!    messages have arrived). Without this, two ranks that wait for two collectives in
//!    opposite orders would each wait for the other to advance the one it does not wait
//!    for.
//!
//! The list holds weak references: the request owns its operation, and a request that goes
//! away (dropped, which completes or withdraws the operation first) leaves nothing behind.
//! An operation leaves the list once it reports completion (its result stays with it for its
//! request's next test or wait). While one operation is being advanced (by its own request,
//! or from this list) it is borrowed, and a progress call made meanwhile passes it over;
//! progress calls made from inside a background advance do not advance the list again.
#![forbid(unsafe_code)]

use super::engine::Engine;
use std::cell::RefCell;
use std::rc::Weak;

/// An operation the engine advances from every progress call until it completes.
pub(crate) trait Background {
    /// Advance without blocking; whether the operation still needs advancing (false once it
    /// has completed, or is no longer active).
    fn advance_in_background(&mut self, eng: &mut Engine) -> bool;
}

/// The engine's list of operations to advance.
#[derive(Default)]
pub(crate) struct BackgroundList {
    ops: Vec<Weak<RefCell<dyn Background>>>,
    /// A background advance is running (nested progress calls leave the list alone).
    running: bool,
}

impl BackgroundList {
    /// Whether there is nothing to advance (the fast path of every progress call).
    #[inline(always)]
    pub(crate) fn is_idle(&self) -> bool {
        self.ops.is_empty() || self.running
    }
}

impl Engine {
    /// Advance `op` from every progress call until it reports that it needs no more.
    pub(crate) fn advance_in_background(&mut self, op: Weak<RefCell<dyn Background>>) {
        self.background.ops.push(op);
    }

    /// Advance every operation on the background list once. What it does is not counted as
    /// progress by [`Engine::progress`]: an operation moves on only because frames arrived
    /// (which were counted), and a wait that spins on it must still yield its core when
    /// ranks outnumber cores.
    #[inline(never)]
    pub(crate) fn advance_background(&mut self) {
        let mut list = std::mem::take(&mut self.background.ops);
        self.background.running = true;
        list.retain(|w| {
            let Some(op) = w.upgrade() else {
                return false;
            };
            // Borrowed: being advanced further up this thread's stack; it stays.
            let Ok(mut op) = op.try_borrow_mut() else {
                return true;
            };
            op.advance_in_background(self)
        });
        self.background.running = false;
        // Operations added meanwhile go after the ones already there.
        list.append(&mut self.background.ops);
        self.background.ops = list;
    }
}
