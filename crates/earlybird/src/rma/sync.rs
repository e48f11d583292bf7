//! Synchronisation of windows: fence, post/start/complete/wait, locks, flushes (MPI 4.1
//! §12.5), on the words of the window's control blocks (see the module doc of `rma`).
//!
//! Operations complete when their call returns, so a synchronisation call only has to order
//! memory and to wait for the other side: a release store (or read-modify-write) on the way
//! out, an acquire load on the way in.
#![forbid(unsafe_code)]

use super::{
    err, LockType, Win, MODE_NOCHECK, MODE_NOPRECEDE, MODE_NOPUT, MODE_NOSTORE, MODE_NOSUCCEED,
};
use crate::comm::group::Group;
use crate::error::{ErrorClass, Result};
use crate::fabric::window::Word;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// The writer bit of a readers/writer word; the low bits count readers.
const WRITER: u64 = 1 << 63;

/// Take `w` shared if no writer holds it.
pub(crate) fn try_read_lock(w: &AtomicU64) -> bool {
    if w.load(Ordering::Relaxed) & WRITER != 0 {
        return false;
    }
    if w.fetch_add(1, Ordering::Acquire) & WRITER == 0 {
        return true;
    }
    w.fetch_sub(1, Ordering::Relaxed);
    false
}

pub(crate) fn read_unlock(w: &AtomicU64) {
    w.fetch_sub(1, Ordering::Release);
}

/// Take `w` exclusively if nobody holds it.
pub(crate) fn try_write_lock(w: &AtomicU64) -> bool {
    w.load(Ordering::Relaxed) == 0
        && w.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
}

pub(crate) fn write_unlock(w: &AtomicU64) {
    w.fetch_and(!WRITER, Ordering::Release);
}

/// A fence epoch: none, or open since a fence without NOSUCCEED (and whether an operation
/// was issued in it, which makes it a real access epoch that excludes the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fence {
    Closed,
    Open { used: bool },
}

/// This rank's epochs on one window.
#[derive(Debug)]
pub(crate) struct Epochs {
    fence: Fence,
    /// Targets of the PSCW access epoch (window ranks), if one is open.
    access: Option<Vec<usize>>,
    /// Origins of the PSCW exposure epoch, if one is open.
    exposure: Option<Vec<usize>>,
    /// Lock held on each target, and whether it was taken with NOCHECK (nothing to release).
    locks: Vec<Option<(LockType, bool)>>,
    nlocks: usize,
    /// lock_all held (and with NOCHECK).
    lock_all: Option<bool>,
    /// Per target: posts consumed by starts. Per origin: completes consumed by waits.
    started: Vec<u64>,
    waited: Vec<u64>,
    fences: u64,
}

impl Epochs {
    pub(crate) fn new(n: usize) -> Epochs {
        Epochs {
            fence: Fence::Closed,
            access: None,
            exposure: None,
            locks: vec![None; n],
            nlocks: 0,
            lock_all: None,
            started: vec![0; n],
            waited: vec![0; n],
            fences: 0,
        }
    }

    /// May this rank issue an operation to `t` now? MPI_ERR_RMA_SYNC naming the target if not.
    #[inline]
    pub(crate) fn may_access(&mut self, t: usize) -> Result<()> {
        if self.lock_all.is_some() || self.locks[t].is_some() {
            return Ok(());
        }
        if let Some(g) = &self.access {
            if g.contains(&t) {
                return Ok(());
            }
            return Err(err(
                ErrorClass::RmaSync,
                format!("RMA operation to rank {t}, which is not in the group of the access epoch (win_start)"),
            ));
        }
        if let Fence::Open { .. } = self.fence {
            self.fence = Fence::Open { used: true };
            return Ok(());
        }
        Err(err(
            ErrorClass::RmaSync,
            format!("RMA operation to rank {t} outside any access epoch (no fence, win_start, lock or lock_all)"),
        ))
    }

    /// Passive-target epoch on `t` (for flushes).
    fn passive(&self, t: usize) -> bool {
        self.lock_all.is_some() || self.locks[t].is_some()
    }

    fn busy_passive(&self) -> bool {
        self.nlocks > 0 || self.lock_all.is_some()
    }

    pub(crate) fn check_free(&self) -> Result<()> {
        let open = if self.busy_passive() {
            Some("a lock or lock_all is held")
        } else if self.access.is_some() {
            Some("an access epoch (win_start) is open")
        } else if self.exposure.is_some() {
            Some("an exposure epoch (win_post) is open")
        } else if self.fence == (Fence::Open { used: true }) {
            Some("a fence epoch with operations is open (end it with a fence)")
        } else {
            None
        };
        match open {
            Some(why) => Err(err(ErrorClass::RmaSync, format!("win_free while {why}"))),
            None => Ok(()),
        }
    }

    /// An active-target or passive epoch of another kind may not start while a fence epoch
    /// with operations is open; an unused one just ends.
    fn leave_fence(&mut self, what: &str) -> Result<()> {
        if self.fence == (Fence::Open { used: true }) {
            return Err(err(
                ErrorClass::RmaSync,
                format!(
                    "{what} inside a fence epoch that has operations (end it with a fence first)"
                ),
            ));
        }
        self.fence = Fence::Closed;
        Ok(())
    }
}

fn check_assert(what: &str, assert: u32, allowed: u32) -> Result<()> {
    if assert & !allowed != 0 {
        return Err(err(
            ErrorClass::Assert,
            format!(
                "{what}: assertion {assert:#x} has bits {:#x} that {what} does not take",
                assert & !allowed
            ),
        ));
    }
    Ok(())
}

impl Win {
    /// The window ranks of `g`'s members: MPI_ERR_GROUP if one is not in the window.
    fn ranks_of(&self, g: &Group) -> Result<Vec<usize>> {
        let all: Vec<i32> = (0..g.size()).collect();
        let t = g.translate_ranks(&all, &self.group())?;
        t.iter()
            .zip(&all)
            .map(|(&w, &r)| {
                if w < 0 {
                    Err(err(
                        ErrorClass::Group,
                        format!("rank {r} of the group is not in the window's group"),
                    ))
                } else {
                    Ok(w as usize)
                }
            })
            .collect()
    }

    /// MPI_Win_fence: ends the fence epoch (every operation of every rank in it is then
    /// complete and visible) and, without MODE_NOSUCCEED, opens the next. Collective.
    /// Assertions: MODE_NOSTORE, MODE_NOPUT, MODE_NOPRECEDE, MODE_NOSUCCEED (MPI_ERR_ASSERT
    /// for others). A barrier on the control blocks' fence words, always: an assertion
    /// only saves work that earlybird does not do.
    pub fn fence(&self, assert: u32) -> Result<()> {
        let r = self.fence_inner(assert);
        self.ret("win_fence", r)
    }

    fn fence_inner(&self, assert: u32) -> Result<()> {
        self.check_live()?;
        // A bad assertion is the caller's alone: every rank checks the same call, so MPI's
        // rule that all give the same assertions makes every rank fail here together.
        check_assert(
            "win_fence",
            assert,
            MODE_NOSTORE | MODE_NOPUT | MODE_NOPRECEDE | MODE_NOSUCCEED,
        )?;
        // A wrong fence still takes part in the barrier, so that no peer waits for it.
        let (n, wrong) = {
            let mut e = self.inner.epochs.borrow_mut();
            e.fences += 1;
            if e.busy_passive() || e.access.is_some() || e.exposure.is_some() {
                (e.fences, true)
            } else {
                e.fence = if assert & MODE_NOSUCCEED != 0 {
                    Fence::Closed
                } else {
                    Fence::Open { used: false }
                };
                (e.fences, false)
            }
        };
        let seg = &self.inner.seg;
        let me = self.inner.rank;
        seg.word(me, Word::Fence).store(n, Ordering::Release);
        for q in 0..self.inner.size {
            if q != me {
                let w = seg.word(q, Word::Fence);
                self.wait_rma(q, || w.load(Ordering::Acquire) >= n)?;
            }
        }
        if wrong {
            return Err(err(
                ErrorClass::RmaSync,
                "win_fence while a lock, lock_all, win_start or win_post epoch is open",
            ));
        }
        Ok(())
    }

    /// MPI_Win_post: open an exposure epoch to the ranks of `group` (of the window's
    /// group). Assertions MODE_NOCHECK (then the matching starts must give it too),
    /// MODE_NOSTORE, MODE_NOPUT. Ends with [`ExposureEpoch::wait`] or `test`.
    pub fn post(&self, group: &Group, assert: u32) -> Result<ExposureEpoch<'_>> {
        let r = (|| {
            self.check_live()?;
            check_assert("win_post", assert, MODE_NOCHECK | MODE_NOSTORE | MODE_NOPUT)?;
            let origins = self.ranks_of(group)?;
            let mut e = self.inner.epochs.borrow_mut();
            if e.exposure.is_some() {
                return Err(err(
                    ErrorClass::RmaSync,
                    "win_post while an exposure epoch is open already",
                ));
            }
            e.leave_fence("win_post")?;
            let me = self.inner.rank;
            if assert & MODE_NOCHECK == 0 {
                for &o in &origins {
                    self.inner.seg.post(o, me).fetch_add(1, Ordering::Release);
                }
            }
            e.exposure = Some(origins);
            Ok(ExposureEpoch {
                win: self,
                done: false,
            })
        })();
        self.ret("win_post", r)
    }

    /// MPI_Win_start: open an access epoch to the ranks of `group`; waits until each has
    /// posted (unless MODE_NOCHECK). Ends with [`AccessEpoch::complete`].
    pub fn start(&self, group: &Group, assert: u32) -> Result<AccessEpoch<'_>> {
        let r = (|| {
            self.check_live()?;
            check_assert("win_start", assert, MODE_NOCHECK)?;
            let targets = self.ranks_of(group)?;
            {
                let mut e = self.inner.epochs.borrow_mut();
                if e.access.is_some() {
                    return Err(err(
                        ErrorClass::RmaSync,
                        "win_start while an access epoch (win_start) is open already",
                    ));
                }
                if e.busy_passive() {
                    return Err(err(
                        ErrorClass::RmaSync,
                        "win_start while a lock or lock_all is held",
                    ));
                }
                e.leave_fence("win_start")?;
            }
            let me = self.inner.rank;
            if assert & MODE_NOCHECK == 0 {
                for &t in &targets {
                    let want = self.inner.epochs.borrow().started[t] + 1;
                    let w = self.inner.seg.post(me, t);
                    self.wait_rma(t, || w.load(Ordering::Acquire) >= want)?;
                    self.inner.epochs.borrow_mut().started[t] = want;
                }
            }
            self.inner.epochs.borrow_mut().access = Some(targets);
            Ok(AccessEpoch {
                win: self,
                done: false,
            })
        })();
        self.ret("win_start", r)
    }

    pub(crate) fn complete_raw(&self) -> Result<()> {
        self.check_live()?;
        let targets = self
            .inner
            .epochs
            .borrow_mut()
            .access
            .take()
            .ok_or_else(|| {
                err(
                    ErrorClass::RmaSync,
                    "win_complete without an access epoch (win_start)",
                )
            })?;
        let me = self.inner.rank;
        for t in targets {
            self.inner.seg.done(t, me).fetch_add(1, Ordering::Release);
        }
        Ok(())
    }

    /// Whether every origin of the exposure epoch has completed; if so the epoch ends.
    pub(crate) fn exposure_done(&self, block: bool) -> Result<bool> {
        self.check_live()?;
        let origins = match &self.inner.epochs.borrow().exposure {
            Some(g) => g.clone(),
            None => {
                return Err(err(
                    ErrorClass::RmaSync,
                    "win_wait or win_test without an exposure epoch (win_post)",
                ))
            }
        };
        let me = self.inner.rank;
        let seg = &self.inner.seg;
        let ready = |o: usize, e: &Epochs| seg.done(me, o).load(Ordering::Acquire) > e.waited[o];
        if block {
            for &o in &origins {
                let want = self.inner.epochs.borrow().waited[o];
                let w = seg.done(me, o);
                self.wait_rma(o, || w.load(Ordering::Acquire) > want)?;
            }
        } else {
            let e = self.inner.epochs.borrow();
            if !origins.iter().all(|&o| ready(o, &e)) {
                return Ok(false);
            }
        }
        let mut e = self.inner.epochs.borrow_mut();
        for &o in &origins {
            e.waited[o] += 1;
        }
        e.exposure = None;
        Ok(true)
    }

    /// MPI_Win_lock: a passive-target epoch on `rank`'s memory; waits until the lock is
    /// granted (MODE_NOCHECK: no lock is taken, the program asserts none conflicts).
    pub fn lock(&self, lock_type: LockType, rank: i32, assert: u32) -> Result<Lock<'_>> {
        let r = (|| {
            self.check_live()?;
            check_assert("win_lock", assert, MODE_NOCHECK)?;
            let t = self.check_rank(rank)?;
            {
                let mut e = self.inner.epochs.borrow_mut();
                if e.lock_all.is_some() {
                    return Err(err(
                        ErrorClass::RmaSync,
                        format!("win_lock of rank {t} while lock_all is held"),
                    ));
                }
                if e.locks[t].is_some() {
                    return Err(err(
                        ErrorClass::RmaSync,
                        format!("win_lock of rank {t}, which this rank has locked already"),
                    ));
                }
                if e.access.is_some() {
                    return Err(err(
                        ErrorClass::RmaSync,
                        format!("win_lock of rank {t} inside an access epoch (win_start)"),
                    ));
                }
                e.leave_fence("win_lock")?;
            }
            let nocheck = assert & MODE_NOCHECK != 0;
            if !nocheck {
                self.acquire(lock_type, t)?;
            }
            let mut e = self.inner.epochs.borrow_mut();
            e.locks[t] = Some((lock_type, nocheck));
            e.nlocks += 1;
            Ok(Lock {
                win: self,
                target: t,
                done: false,
            })
        })();
        self.ret("win_lock", r)
    }

    fn acquire(&self, lock_type: LockType, t: usize) -> Result<()> {
        let w = self.inner.seg.word(t, Word::Lock);
        match lock_type {
            LockType::Exclusive => self.wait_rma(t, || try_write_lock(w)),
            LockType::Shared => self.wait_rma(t, || try_read_lock(w)),
        }
    }

    pub(crate) fn unlock_raw(&self, t: usize) -> Result<()> {
        self.check_live()?;
        let held = {
            let mut e = self.inner.epochs.borrow_mut();
            let h = e.locks[t].take();
            if h.is_some() {
                e.nlocks -= 1;
            }
            h
        };
        match held {
            None => Err(err(
                ErrorClass::RmaSync,
                format!("win_unlock of rank {t}, which this rank has not locked"),
            )),
            Some((_, true)) => {
                fence(Ordering::Release);
                Ok(())
            }
            Some((LockType::Exclusive, false)) => {
                write_unlock(self.inner.seg.word(t, Word::Lock));
                Ok(())
            }
            Some((LockType::Shared, false)) => {
                read_unlock(self.inner.seg.word(t, Word::Lock));
                Ok(())
            }
        }
    }

    /// MPI_Win_lock_all: a shared lock on every rank's memory (MODE_NOCHECK: none taken).
    pub fn lock_all(&self, assert: u32) -> Result<LockAll<'_>> {
        let r = (|| {
            self.check_live()?;
            check_assert("win_lock_all", assert, MODE_NOCHECK)?;
            {
                let mut e = self.inner.epochs.borrow_mut();
                if e.busy_passive() {
                    return Err(err(
                        ErrorClass::RmaSync,
                        "win_lock_all while a lock or lock_all is held",
                    ));
                }
                if e.access.is_some() {
                    return Err(err(
                        ErrorClass::RmaSync,
                        "win_lock_all inside an access epoch (win_start)",
                    ));
                }
                e.leave_fence("win_lock_all")?;
            }
            let nocheck = assert & MODE_NOCHECK != 0;
            if !nocheck {
                for t in 0..self.inner.size {
                    if let Err(e) = self.acquire(LockType::Shared, t) {
                        for u in 0..t {
                            read_unlock(self.inner.seg.word(u, Word::Lock));
                        }
                        return Err(e);
                    }
                }
            }
            self.inner.epochs.borrow_mut().lock_all = Some(nocheck);
            Ok(LockAll {
                win: self,
                done: false,
            })
        })();
        self.ret("win_lock_all", r)
    }

    pub(crate) fn unlock_all_raw(&self) -> Result<()> {
        self.check_live()?;
        match self.inner.epochs.borrow_mut().lock_all.take() {
            None => Err(err(ErrorClass::RmaSync, "win_unlock_all without lock_all")),
            Some(true) => {
                fence(Ordering::Release);
                Ok(())
            }
            Some(false) => {
                for t in 0..self.inner.size {
                    read_unlock(self.inner.seg.word(t, Word::Lock));
                }
                Ok(())
            }
        }
    }

    fn flush_check(&self, what: &str, rank: Option<i32>) -> Result<()> {
        self.check_live()?;
        let e = self.inner.epochs.borrow();
        let ok = match rank {
            Some(r) => {
                let t = self.check_rank(r)?;
                e.passive(t)
            }
            None => e.busy_passive(),
        };
        if !ok {
            return Err(err(
                ErrorClass::RmaSync,
                match rank {
                    Some(r) => format!("{what} of rank {r} outside a passive-target epoch on it (lock or lock_all)"),
                    None => format!("{what} outside a passive-target epoch (lock or lock_all)"),
                },
            ));
        }
        // Operations are complete at the target when their calls return; a flush orders
        // them before what this rank does next.
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// MPI_Win_flush: every operation of this rank to `rank` is complete there.
    pub fn flush(&self, rank: i32) -> Result<()> {
        let r = self.flush_check("win_flush", Some(rank));
        self.ret("win_flush", r)
    }

    /// MPI_Win_flush_all.
    pub fn flush_all(&self) -> Result<()> {
        let r = self.flush_check("win_flush_all", None);
        self.ret("win_flush_all", r)
    }

    /// MPI_Win_flush_local: the origin buffers of operations to `rank` may be reused.
    pub fn flush_local(&self, rank: i32) -> Result<()> {
        let r = self.flush_check("win_flush_local", Some(rank));
        self.ret("win_flush_local", r)
    }

    /// MPI_Win_flush_local_all.
    pub fn flush_local_all(&self) -> Result<()> {
        let r = self.flush_check("win_flush_local_all", None);
        self.ret("win_flush_local_all", r)
    }

    /// MPI_Win_sync: order this rank's loads and stores of window memory with peers'
    /// operations (a full memory fence).
    pub fn sync(&self) -> Result<()> {
        let r = self.check_live();
        fence(Ordering::SeqCst);
        self.ret("win_sync", r)
    }
}

macro_rules! epoch_guard {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[must_use = "the epoch ends when this value is consumed or dropped"]
        pub struct $name<'w> {
            win: &'w Win,
            done: bool,
        }

        impl std::ops::Deref for $name<'_> {
            type Target = Win;
            fn deref(&self) -> &Win {
                self.win
            }
        }

        impl std::fmt::Debug for $name<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($name), "({:?})"), self.win)
            }
        }
    };
}

epoch_guard!(
    /// An access epoch opened by [`Win::start`]; operations go through it (it derefs to the
    /// window). [`complete`](Self::complete) ends it; dropping it completes it too.
    AccessEpoch
);
epoch_guard!(
    /// An exposure epoch opened by [`Win::post`]; [`wait`](Self::wait) ends it, as does
    /// dropping it.
    ExposureEpoch
);
epoch_guard!(
    /// All ranks' memory locked shared ([`Win::lock_all`]); [`unlock_all`](Self::unlock_all)
    /// or dropping it ends the epoch.
    LockAll
);

/// A lock on one rank's memory ([`Win::lock`]); [`unlock`](Self::unlock) or dropping it ends
/// the epoch. Operations go through it (it derefs to the window).
#[must_use = "the lock is released when this value is consumed or dropped"]
pub struct Lock<'w> {
    win: &'w Win,
    target: usize,
    done: bool,
}

impl std::ops::Deref for Lock<'_> {
    type Target = Win;
    fn deref(&self) -> &Win {
        self.win
    }
}

impl std::fmt::Debug for Lock<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lock(rank {}, {:?})", self.target, self.win)
    }
}

/// An error where nobody can take it (a guard dropped): printed, as a failed finalize at drop.
fn report(what: &str, e: crate::error::Error) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("earlybird: {what} at drop failed: {e}\n").as_bytes());
}

impl Lock<'_> {
    /// MPI_Win_unlock: every operation to the rank is complete there, and the lock is
    /// released.
    pub fn unlock(mut self) -> Result<()> {
        self.done = true;
        let r = self.win.unlock_raw(self.target);
        self.win.ret("win_unlock", r)
    }

    /// The locked rank.
    pub fn target(&self) -> i32 {
        self.target as i32
    }
}

impl Drop for Lock<'_> {
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = self.win.unlock_raw(self.target) {
                report("win_unlock", e);
            }
        }
    }
}

impl LockAll<'_> {
    /// MPI_Win_unlock_all.
    pub fn unlock_all(mut self) -> Result<()> {
        self.done = true;
        let r = self.win.unlock_all_raw();
        self.win.ret("win_unlock_all", r)
    }
}

impl Drop for LockAll<'_> {
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = self.win.unlock_all_raw() {
                report("win_unlock_all", e);
            }
        }
    }
}

impl AccessEpoch<'_> {
    /// MPI_Win_complete: every operation of the epoch is complete at its target, and each
    /// target learns so.
    pub fn complete(mut self) -> Result<()> {
        self.done = true;
        let r = self.win.complete_raw();
        self.win.ret("win_complete", r)
    }
}

impl Drop for AccessEpoch<'_> {
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = self.win.complete_raw() {
                report("win_complete", e);
            }
        }
    }
}

impl<'w> ExposureEpoch<'w> {
    /// MPI_Win_wait: waits until every origin of the epoch has completed its access epoch.
    pub fn wait(mut self) -> Result<()> {
        self.done = true;
        let r = self.win.exposure_done(true).map(drop);
        self.win.ret("win_wait", r)
    }

    /// MPI_Win_test: the epoch if some origin has not completed yet (`Err(epoch)`), or
    /// `Ok(())` when it has ended.
    pub fn test(mut self) -> Result<std::result::Result<(), ExposureEpoch<'w>>> {
        let r = self.win.exposure_done(false);
        match self.win.ret("win_test", r) {
            Ok(true) => {
                self.done = true;
                Ok(Ok(()))
            }
            Ok(false) => Ok(Err(self)),
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }
}

impl Drop for ExposureEpoch<'_> {
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = self.win.exposure_done(true) {
                report("win_wait", e);
            }
        }
    }
}
