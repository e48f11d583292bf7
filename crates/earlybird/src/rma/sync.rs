//! Synchronisation of windows: fence, post/start/complete/wait, locks, flushes (MPI 4.1
//! §12.5), on the words of the window's control blocks (see the module doc of `rma`).
//!
//! Operations complete when their call returns (the puts of a PSCW epoch that travel in mail
//! boxes when the target waits), so a synchronisation call only has to order memory and to
//! wait for the other side: a release store (or read-modify-write) on the way out, an acquire
//! load on the way in.
#![forbid(unsafe_code)]

use super::{
    err, LockType, Win, MODE_NOCHECK, MODE_NOPRECEDE, MODE_NOPUT, MODE_NOSTORE, MODE_NOSUCCEED,
};
use crate::comm::group::Group;
use crate::error::{ErrorClass, Result};
use crate::fabric::window::{Word, MAIL_PAYLOAD};
use std::rc::Rc;
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

/// An origin's state towards one target in a PSCW access epoch.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Out {
    /// Whether the target's post of this epoch has been seen (or NOCHECK said so).
    posted: bool,
    /// The count of the target's posts to this rank that means it has posted this epoch.
    want: u64,
    /// Bytes of the epoch's mail (in `Epochs::mail`) in use.
    staged: usize,
}

/// What an RMA call does at its target, as the sync counter requests that permit calls
/// outside an epoch name it (seed 001's modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// MPI_Put (MODE_WIN_PUT).
    Put = 0,
    /// MPI_Get (MODE_WIN_GET).
    Get = 1,
    /// Accumulate, get_accumulate, fetch_and_op, compare_and_swap (MODE_WIN_ACCUMULATE).
    Acc = 2,
}

/// This rank's epochs on one window.
#[derive(Debug)]
pub(crate) struct Epochs {
    /// Per target, per [`Access`]: the active sync counter requests (seed 001) that permit
    /// such calls to it without another epoch.
    pub(crate) covered: Vec<[u32; 3]>,
    /// Active sync ops requests, whatever their modes (a window with one cannot be freed).
    pub(crate) sync_ops_active: usize,
    fence: Fence,
    /// Targets of the PSCW access epoch (window ranks), if one is open.
    access: Option<Rc<[usize]>>,
    /// Origins of the PSCW exposure epoch, if one is open.
    exposure: Option<Rc<[usize]>>,
    /// The last groups given to post and start, with their window ranks: a program that
    /// opens epochs over the same group again does not translate it again.
    groups: [Option<(Group, Rc<[usize]>)>; 2],
    /// Lock held on each target, and whether it was taken with NOCHECK (nothing to release).
    locks: Vec<Option<(LockType, bool)>>,
    nlocks: usize,
    /// lock_all held (and with NOCHECK).
    lock_all: Option<bool>,
    /// Per origin: its access epochs this rank has waited for (applied).
    waited: Vec<u64>,
    /// Per target: access epochs opened to it without MODE_NOCHECK, each of which matches
    /// one post the target counts (posts with NOCHECK are not counted on either side).
    started: Vec<u64>,
    /// Per origin: posts this rank has made to it. Per target: access epochs completed to
    /// it. Each post word and mail box has one writer, which stores its own count there: a
    /// store, where a read-modify-write would wait for the peer's cache line.
    posted: Vec<u64>,
    completed: Vec<u64>,
    /// Per target of the open access epoch: what this rank has done towards it.
    out: Vec<Out>,
    /// Per target: how many of this rank's access epochs it has applied, as last seen.
    consumed: Vec<u64>,
    /// Per target: the small puts of the open access epoch (MAIL_PAYLOAD bytes each), copied
    /// into the target's mail box at complete.
    mail: Vec<u8>,
    fences: u64,
}

impl Epochs {
    pub(crate) fn new(n: usize) -> Epochs {
        Epochs {
            covered: vec![[0; 3]; n],
            sync_ops_active: 0,
            fence: Fence::Closed,
            access: None,
            exposure: None,
            groups: [None, None],
            locks: vec![None; n],
            nlocks: 0,
            lock_all: None,
            waited: vec![0; n],
            started: vec![0; n],
            posted: vec![0; n],
            completed: vec![0; n],
            out: vec![Out::default(); n],
            consumed: vec![0; n],
            mail: vec![0; n * MAIL_PAYLOAD],
            fences: 0,
        }
    }

    /// May this rank issue an operation of kind `what` to `t` now? MPI_ERR_RMA_SYNC naming
    /// the target if not.
    #[inline]
    pub(crate) fn may_access(&mut self, t: usize, what: Access) -> Result<()> {
        if self.lock_all.is_some() || self.locks[t].is_some() || self.covered[t][what as usize] > 0
        {
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
            format!("RMA operation ({what:?}) to rank {t} outside any access epoch (no fence, win_start, lock, lock_all, or active sync counter request covering it)"),
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
        } else if self.sync_ops_active > 0 {
            Some("a sync ops request (seed 001) is active")
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
    /// The window ranks of `g`'s members: MPI_ERR_GROUP if one is not in the window. The
    /// group `slot` (0 post, 1 start) was given last is remembered with its ranks.
    fn ranks_of(&self, g: &Group, slot: usize) -> Result<Rc<[usize]>> {
        if let Some((last, ranks)) = &self.inner.epochs.borrow().groups[slot] {
            if last.is(g) {
                return Ok(ranks.clone());
            }
        }
        let all: Vec<i32> = (0..g.size()).collect();
        let t = g.translate_ranks(&all, &self.group())?;
        let ranks: Rc<[usize]> = t
            .iter()
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
            .collect::<Result<_>>()?;
        self.inner.epochs.borrow_mut().groups[slot] = Some((g.clone(), ranks.clone()));
        Ok(ranks)
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
        match self.fence_core(assert, None)? {
            (_, Some(wrong)) => Err(wrong),
            (_, None) => Ok(()),
        }
    }

    /// The fence; with `flag` (a persisting fence, seed 004), each rank also publishes a
    /// flag with its fence word, and this returns whether any rank's flag was set: an
    /// agreement that costs no more than the fence's own barrier. A fence called with an
    /// epoch open takes part in the barrier and gives its error second (so that a
    /// persisting fence can take part in what follows too).
    pub(super) fn fence_core(
        &self,
        assert: u32,
        flag: Option<bool>,
    ) -> Result<(bool, Option<crate::error::Error>)> {
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
        let mut any = flag == Some(true);
        if let Some(f) = flag {
            seg.persist_flag(me, n)
                .store(u64::from(f), Ordering::Relaxed);
        }
        seg.word(me, Word::Fence).store(n, Ordering::Release);
        for q in 0..self.inner.size {
            if q != me {
                let w = seg.word(q, Word::Fence);
                self.wait_rma(q, || w.load(Ordering::Acquire) >= n)?;
                if flag.is_some() {
                    any |= seg.persist_flag(q, n).load(Ordering::Relaxed) != 0;
                }
            }
        }
        let wrong = wrong.then(|| {
            err(
                ErrorClass::RmaSync,
                "win_fence while a lock, lock_all, win_start or win_post epoch is open",
            )
        });
        Ok((any, wrong))
    }

    /// MPI_Win_post: open an exposure epoch to the ranks of `group` (of the window's
    /// group). Assertions MODE_NOCHECK (then the matching starts must give it too),
    /// MODE_NOSTORE, MODE_NOPUT. Ends with [`ExposureEpoch::wait`] or `test`.
    pub fn post(&self, group: &Group, assert: u32) -> Result<ExposureEpoch<'_>> {
        let r = (|| {
            self.check_live()?;
            check_assert("win_post", assert, MODE_NOCHECK | MODE_NOSTORE | MODE_NOPUT)?;
            let origins = self.ranks_of(group, 0)?;
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
                for &o in origins.iter() {
                    e.posted[o] += 1;
                    self.inner
                        .seg
                        .post(o, me)
                        .store(e.posted[o], Ordering::Release);
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
            let targets = self.ranks_of(group, 1)?;
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
            // The posts are waited for by the first operation that reaches a target's
            // memory; puts small enough for the mail box need none (see `stage_put`).
            let mut e = self.inner.epochs.borrow_mut();
            let nocheck = assert & MODE_NOCHECK != 0;
            for &t in targets.iter() {
                if !nocheck {
                    e.started[t] += 1;
                }
                e.out[t] = Out {
                    posted: nocheck,
                    want: e.started[t],
                    staged: 0,
                };
            }
            drop(e);
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
        for &t in targets.iter() {
            let k = self.inner.epochs.borrow().completed[t] + 1;
            self.claim_box(t, k)?;
            let p = (k % 2) as usize;
            let mut e = self.inner.epochs.borrow_mut();
            let used = e.out[t].staged;
            if used > 0 {
                let mail = &e.mail[t * MAIL_PAYLOAD..t * MAIL_PAYLOAD + used];
                self.inner.outbox[t][p]
                    .write(0, mail)
                    .map_err(|x| err(ErrorClass::Intern, format!("win_complete: mail box: {x}")))?;
            }
            let [seq, cons, _] = self.inner.seg.mail_words(t, me, p);
            cons.store(e.waited[t], Ordering::Relaxed);
            seq.store(k << 16 | used as u64, Ordering::Release);
            e.completed[t] = k;
        }
        Ok(())
    }

    /// Wait until `t` has applied this rank's access epoch `k - 2`, which used the mail box
    /// that epoch `k` is to use.
    fn claim_box(&self, t: usize, k: u64) -> Result<()> {
        let need = k.saturating_sub(2);
        if self.inner.epochs.borrow().consumed[t] >= need {
            return Ok(());
        }
        let report = self.inner.seg.mail_report(self.inner.rank, t);
        self.wait_rma(t, || report.load(Ordering::Acquire) >= need)?;
        let mut e = self.inner.epochs.borrow_mut();
        e.consumed[t] = e.consumed[t].max(report.load(Ordering::Acquire));
        Ok(())
    }

    /// Whether a put to `t` belongs to an open PSCW access epoch (and to no active sync
    /// counter request, whose completion must find it done), so that it may travel as mail.
    #[inline]
    pub(crate) fn pscw_put(&self, t: usize) -> bool {
        let e = self.inner.epochs.borrow();
        e.access.as_ref().is_some_and(|g| g.contains(&t)) && e.covered[t][Access::Put as usize] == 0
    }

    /// Before an operation reaches `t`'s memory in a PSCW access epoch: wait for `t`'s post
    /// of the epoch. Nothing to do in other epochs.
    #[inline]
    pub(crate) fn await_post(&self, t: usize) -> Result<()> {
        let want = {
            let e = self.inner.epochs.borrow();
            if e.out[t].posted || e.access.as_ref().is_none_or(|g| !g.contains(&t)) {
                return Ok(());
            }
            e.out[t].want
        };
        let w = self.inner.seg.post(self.inner.rank, t);
        self.wait_rma(t, || w.load(Ordering::Acquire) >= want)?;
        self.inner.epochs.borrow_mut().out[t].posted = true;
        Ok(())
    }

    /// In a PSCW access epoch, put the `n` bytes that `fill` writes into the slice it is
    /// given (bound for byte `off` of `t`'s memory) into this epoch's mail to `t` instead, for
    /// `t` to apply when it waits: the put then needs no post from `t`, and `t` learns of it
    /// with the epoch's completion, in the same cache line. `false` (nothing done) outside a
    /// PSCW epoch or when the mail is full.
    pub(crate) fn stage_put(
        &self,
        t: usize,
        off: usize,
        n: usize,
        fill: impl FnOnce(&mut [u8]) -> std::io::Result<()>,
    ) -> Result<bool> {
        let rec = 8 + n.next_multiple_of(8);
        let mut e = self.inner.epochs.borrow_mut();
        let used = e.out[t].staged;
        if e.access.is_none() || used + rec > MAIL_PAYLOAD || off >= 1 << 48 {
            return Ok(false);
        }
        let at = t * MAIL_PAYLOAD + used;
        let head = (off as u64) << 16 | n as u64;
        e.mail[at..at + 8].copy_from_slice(&head.to_le_bytes());
        fill(&mut e.mail[at + 8..at + 8 + n])
            .map_err(|x| err(ErrorClass::Intern, format!("win_put: mail: {x}")))?;
        e.out[t].staged = used + rec;
        Ok(true)
    }

    /// Apply the puts of origin `o`'s access epoch `k` (complete: `word` is its mail box's
    /// seq word) to this rank's memory, and tell `o` so.
    fn apply_mail(&self, o: usize, k: u64, word: u64) -> Result<()> {
        let me = self.inner.rank;
        let p = (k % 2) as usize;
        let len = (word & 0xffff) as usize;
        if len > 0 {
            let mut buf = [0u8; MAIL_PAYLOAD];
            let buf = &mut buf[..len.min(MAIL_PAYLOAD)];
            let mine = self.inner.parts[me].mem.as_ref();
            let r = self.inner.inbox[o][p].read(0, buf).and_then(|()| {
                let mut at = 0;
                while at + 8 <= buf.len() {
                    let head = u64::from_le_bytes(buf[at..at + 8].try_into().unwrap_or_default());
                    let (off, n) = ((head >> 16) as usize, (head & 0xffff) as usize);
                    let data = buf.get(at + 8..at + 8 + n).ok_or_else(|| {
                        std::io::Error::other(format!("a record of {n} bytes past the box"))
                    })?;
                    match mine {
                        Some(m) => m.write(off, data)?,
                        None => return Err(std::io::Error::other("no window memory")),
                    }
                    at += 8 + n.next_multiple_of(8);
                }
                Ok(())
            });
            r.map_err(|x| {
                err(
                    ErrorClass::Intern,
                    format!("win_wait: the puts of rank {o}'s epoch {k}: {x}"),
                )
            })?;
        }
        let [_, cons, _] = self.inner.seg.mail_words(me, o, p);
        // Acquire: this rank refills its box to `o` on the strength of this value, after `o`
        // has read it.
        let seen = cons.load(Ordering::Acquire);
        let mut e = self.inner.epochs.borrow_mut();
        e.consumed[o] = e.consumed[o].max(seen);
        e.waited[o] = k;
        // `o` reads this only when it must wait for a box (the count also travels in the
        // box of this rank's next access epoch to `o`).
        self.inner
            .seg
            .mail_report(o, me)
            .store(k, Ordering::Release);
        Ok(())
    }

    /// Whether every origin of the exposure epoch has completed; if so their puts are
    /// applied and the epoch ends.
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
        let want = |o: usize| self.inner.epochs.borrow().waited[o] + 1;
        let seq = |o: usize, k: u64| seg.mail_words(me, o, (k % 2) as usize)[0];
        for &o in origins.iter() {
            let k = want(o);
            let w = seq(o, k);
            if block {
                self.wait_rma(o, || w.load(Ordering::Acquire) >> 16 >= k)?;
            } else if w.load(Ordering::Acquire) >> 16 < k {
                return Ok(false);
            }
        }
        for &o in origins.iter() {
            let k = want(o);
            let word = seq(o, k).load(Ordering::Acquire);
            self.apply_mail(o, k, word)?;
        }
        self.inner.epochs.borrow_mut().exposure = None;
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
        // them before what this rank does next: a full fence after plain stores. On x86-64
        // an accumulate is a locked instruction, which orders everything around it as a
        // full fence does, so a flush after accumulates alone has nothing to wait for.
        if self.inner.stores.get() || !cfg!(target_arch = "x86_64") {
            fence(Ordering::SeqCst);
            self.inner.stores.set(false);
        } else {
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
        }
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
        self.inner.stores.set(false);
        self.ret("win_sync", r)
    }
}

/// Epochs without their values, for bindings that cannot keep a value across calls (the C
/// ABI: MPI_Win_lock and MPI_Win_unlock are two calls). An epoch opened by [`Win::lock`],
/// [`Win::lock_all`], [`Win::start`] or [`Win::post`] is kept open by the value's
/// `keep_open` and ended by these; each is MPI_ERR_RMA_SYNC when no such epoch is open.
impl Win {
    /// MPI_Win_unlock of `rank`.
    pub fn unlock_rank(&self, rank: i32) -> Result<()> {
        let r = self.check_rank(rank).and_then(|t| self.unlock_raw(t));
        self.ret("win_unlock", r)
    }

    /// MPI_Win_unlock_all.
    pub fn unlock_all_ranks(&self) -> Result<()> {
        let r = self.unlock_all_raw();
        self.ret("win_unlock_all", r)
    }

    /// MPI_Win_complete.
    pub fn complete_access(&self) -> Result<()> {
        let r = self.complete_raw();
        self.ret("win_complete", r)
    }

    /// MPI_Win_wait.
    pub fn wait_exposure(&self) -> Result<()> {
        let r = self.exposure_done(true).map(drop);
        self.ret("win_wait", r)
    }

    /// MPI_Win_test: whether the exposure epoch has ended (it has when this says so).
    pub fn test_exposure(&self) -> Result<bool> {
        let r = self.exposure_done(false);
        self.ret("win_test", r)
    }
}

macro_rules! epoch_guard {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[must_use = "the epoch ends when this value is consumed or dropped"]
        pub struct $name<'w> {
            pub(super) win: &'w Win,
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

        impl $name<'_> {
            /// Give the value up and leave the epoch open, to be ended by the window's call
            /// of the same name (see "Epochs without their values" on [`Win`]).
            pub fn keep_open(mut self) {
                self.done = true;
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

    /// Give the value up and leave the lock held, to be released by [`Win::unlock_rank`].
    pub fn keep_open(mut self) {
        self.done = true;
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
