//! Scopes: the region in which buffers may be lent to nonblocking and persistent operations.
//! A [`Scope`] is a lending region of `sys::lend` whose settling ([`ScopeOps`]) completes,
//! on every endpoint it used, the operations tagged with its id.
#![forbid(unsafe_code)]

use super::EngineRef;
use crate::p2p::engine::Engine;
use crate::p2p::ops::OpId;
use crate::sys::lend::{lending, Lending, Settle};
use std::cell::RefCell;
use std::rc::Rc;

/// A scope's bookkeeping: its id, with which every operation that may touch a buffer
/// borrowed for the scope is tagged in its engine, and the engines it used (usually one).
/// When the scope ends, each engine settles the operations tagged with the id.
pub struct ScopeOps {
    id: u32,
    /// The first engine used (almost always the only one), kept inline: no allocation.
    first: RefCell<Option<EngineRef>>,
    /// Any further engines (a thread that drives two endpoints within one scope).
    more: RefCell<Vec<EngineRef>>,
}

impl std::fmt::Debug for ScopeOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeOps").field("id", &self.id).finish()
    }
}

impl Default for ScopeOps {
    fn default() -> Self {
        /// Ids handed to threads in blocks, so that no two scopes of one process share an
        /// id (threads sharing a rank under MPI_THREAD_MULTIPLE tag operations of one engine)
        /// while a scope costs no atomic operation.
        const BLOCK: u32 = 1 << 12;
        static NEXT_BLOCK: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        thread_local! {
            /// The next id of this thread's block, and the block's end.
            static NEXT_SCOPE: std::cell::Cell<(u32, u32)> = const { std::cell::Cell::new((0, 0)) };
        }
        // 0 means "no scope" and is skipped.
        let id = NEXT_SCOPE.with(|n| {
            let (mut id, mut end) = n.get();
            if id == end {
                id = NEXT_BLOCK.fetch_add(BLOCK, std::sync::atomic::Ordering::Relaxed);
                end = id.wrapping_add(BLOCK);
                if id == 0 {
                    id = 1;
                }
            }
            n.set((id.wrapping_add(1), end));
            id
        });
        ScopeOps {
            id,
            first: RefCell::new(None),
            more: RefCell::new(Vec::new()),
        }
    }
}

impl ScopeOps {
    /// The id operations of this scope are tagged with.
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// Tag `op` (just started on `e`, the engine behind `eng`) with this scope.
    #[inline(always)]
    pub(crate) fn register(&self, eng: &EngineRef, e: &mut Engine, op: OpId) {
        e.set_scope(op, self.id);
        self.note_engine(eng);
    }

    /// Remember that `eng` has (or will have) operations of this scope to settle.
    #[inline(always)]
    pub(crate) fn note_engine(&self, eng: &EngineRef) {
        let mut first = self.first.borrow_mut();
        match &*first {
            None => *first = Some(eng.clone()),
            Some(f) if Rc::ptr_eq(f, eng) => {}
            Some(_) => {
                let mut v = self.more.borrow_mut();
                if !v.iter().any(|x| Rc::ptr_eq(x, eng)) {
                    v.push(eng.clone());
                }
            }
        }
    }
}

impl Settle for ScopeOps {
    fn settle(&self) {
        let first = self.first.borrow_mut().take();
        let more = std::mem::take(&mut *self.more.borrow_mut());
        for eng in first.into_iter().chain(more) {
            let Ok(mut e) = eng.try_borrow_mut() else {
                // Only reachable while unwinding out of the engine itself, with buffers of
                // this scope possibly still read by a peer thread: stopping here is the only
                // safe move.
                eprintln!("earlybird: scope ended while its endpoint is in use; aborting");
                std::process::abort();
            };
            e.settle_scope(self.id);
        }
    }
}

/// The region in which buffers may be lent to nonblocking and persistent operations: a
/// lending region whose end settles the operations of the scope. See [`scope`].
pub type Scope<'scope, 'env> = Lending<'scope, 'env, ScopeOps>;

/// A [`Scope`] that never ends, for buffers that live as long as the program (`&'static`
/// borrows only): its operations are not settled by any scope end, so each must be completed
/// (waited for, tested to completion, or freed) by its request. Made for bindings whose
/// operations outlive every Rust call, such as the C ABI; each call leaks one small region.
pub fn endless_scope() -> &'static Scope<'static, 'static> {
    crate::sys::lend::endless(ScopeOps::default())
}

/// Run `f` with a [`Scope`] in which nonblocking and persistent operations may borrow
/// buffers that live at least as long as the scope. When `f` returns (or unwinds), every
/// operation still in flight has completed before `scope` returns: a receive nobody matched
/// is cancelled, a send is waited for.
///
/// ```no_run
/// # fn main() -> earlybird::Result<()> {
/// let universe = earlybird::init()?;
/// let world = universe.world();
/// let data = [1.0f64; 4];
/// let mut got = [0.0f64; 4];
/// let (right, left) = ((world.rank() + 1) % world.size(), (world.rank() + world.size() - 1) % world.size());
/// earlybird::scope(|s| -> earlybird::Result<()> {
///     let mut reqs = vec![world.irecv(s, &mut got, left, 0)?, world.isend(s, &data, right, 0)?];
///     earlybird::wait_all(&mut reqs)?;
///     Ok(())
/// })?;
/// # Ok(()) }
/// ```
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    lending(ScopeOps::default(), f)
}
