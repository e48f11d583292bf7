//! Blocking collectives straight through the communicator's collective region (issue 18,
//! item 3): a small blocking barrier, bcast or allreduce that runs in shared memory takes
//! its run of lane 0, waits on flags, copies the message and combines the contributions,
//! without recording or replaying a schedule, or lending the region's slots out as
//! buffers (an allreduce over more than two ranks allocates the scratch of its partial
//! results, `algo::reduce_shm`). The protocol is that of `fabric::coll_region` and the
//! steps those of `algo::barrier_shm`, `algo::bcast_shm` and `algo::allreduce_shm` (the
//! allreduce combines the slots in the canonical association, so its bits are those of
//! every other algorithm).
//!
//! # When
//!
//! A blocking call on a communicator with a region ([`takes`]): every barrier, every
//! bcast of at most [`PAYLOAD`] bytes, and every allreduce whose contribution fits a slot
//! (a type without gaps, at most [`PAYLOAD`] bytes), unless another algorithm is forced for
//! it (`EARLYBIRD_COLL_<COLLECTIVE>`, the info hint). The nonblocking calls make the same
//! choice and run the same protocol as a request's steps (`shm_nonblocking.rs`); the
//! persistent bcast defaults to messages, and the persistent allreduce on fewer than four
//! ranks (their schedules through the region measured slower), which is sound because MPI
//! never matches a persistent collective with a blocking or nonblocking one. A blocking
//! call made under
//! [`waits_aside`](crate::p2p::wait::waits_aside) runs here too, its waits pausing, so
//! that it meets the same call on ranks that are not set aside. The choice depends only
//! on what every rank of a correct program has alike (the message's length, the
//! forcing), so all ranks take it together. A bcast or allreduce whose lengths differ
//! between ranks gets MPI_ERR_TRUNCATE on the ranks that see it, as by messages, as long
//! as every rank's length is on the same side of [`PAYLOAD`].
#![forbid(unsafe_code)]

use super::algo::{fold_with, Folder};
use super::api::SHM;
use super::registry::{self, Forced};
use super::sched::{notice, shm_block, unusable, wait_until, Wire, NOTICE_EVERY};
use super::shm::PAYLOAD;
use super::{Args, Coll};
use crate::comm::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::coll_region::CollRegion;
use crate::p2p::wait::Pause;
use crate::sys::lend::{Loan, Unusable};
use std::rc::Rc;

/// Whether a blocking call with arguments `a` runs here (see the module doc); `forced` is
/// looked at only for a call that could.
#[inline(always)]
pub(super) fn takes(a: &Args, forced: impl FnOnce() -> Rc<Forced>) -> bool {
    a.shm && takes_on_region(a, forced)
}

/// [`takes`], for a call on a communicator known to have a region.
#[inline(always)]
pub(super) fn takes_on_region(a: &Args, forced: impl FnOnce() -> Rc<Forced>) -> bool {
    let fits = match a.coll {
        Coll::Barrier => true,
        Coll::Bcast => a.bytes <= PAYLOAD,
        Coll::Allreduce => super::algo::reduction_fits_slot(a),
        _ => false,
    };
    fits && a.remote.is_none() && a.size >= 2 && forced().allows(a.coll, SHM)
}

impl Comm {
    /// Run the blocking call `a` (which [`takes`] said runs here; `send` and `recv` are its
    /// buffers) in its run of the communicator's region, taken by `wire`'s ticket. Under
    /// [`waits_aside`](crate::p2p::wait::waits_aside), its waits call `aside` between polls
    /// with the rank let go.
    pub(super) fn shm_blocking(
        &self,
        a: &Args,
        wire: &mut Wire,
        send: Option<Loan>,
        recv: Option<Loan>,
        aside: Option<Pause>,
    ) -> Result<()> {
        let (shm, seq) = wire
            .ticket
            .take()
            .expect("a call on a communicator with a region");
        registry::note_last(SHM);
        shm.enter(0, seq);
        let me = shm.me();
        let wait = |ready: &dyn Fn() -> bool| match aside {
            None => wait_until(&mut self.eng.borrow_mut(), wire, |_| ready()),
            Some(pause) => self.wait_pausing(wire, pause, ready),
        };
        let r = (|| {
            let put = |src: &Loan| -> Result<()> {
                shm.region()
                    .put_payload(0, seq, me, src)
                    .map_err(|u| unusable(wire.what, u))?;
                shm.publish(0, seq);
                shm.claim_next(0, seq);
                Ok(())
            };
            match a.coll {
                Coll::Barrier => {
                    wait(&|| shm.slot_free(0, seq))?;
                    put(&Loan::EMPTY)?;
                    wait(&|| shm.arrived(0, seq, None))
                }
                Coll::Bcast => {
                    // The message: the buffer through its datatype's layout, if it has
                    // one. (Another loan of a plain buffer only costs time: 0.20 against
                    // 0.145 us a bcast, the root's new loan waiting on its slot's stores.)
                    let whole = recv.as_ref().expect("a bcast's buffer");
                    let part;
                    let buf = if a.elem.is_gapless() && a.recv.is_all_of(whole) {
                        whole
                    } else {
                        part = a.rblock(0, a.count).within(whole);
                        &part
                    };
                    if a.rank == a.root {
                        wait(&|| shm.slot_free(0, seq))?;
                        return put(buf);
                    }
                    let root = a.root as usize;
                    wait(&|| shm.arrived(0, seq, Some(a.root)))?;
                    read_bcast(wire, shm.region(), seq, root, buf)
                }
                Coll::Allreduce => {
                    // This rank's part into its slot (in place, from the receive buffer,
                    // which the result overwrites), then every rank's parts combined from
                    // the slots in the canonical association, as `algo::allreduce_shm`.
                    let whole = recv.as_ref().expect("an allreduce's buffer");
                    let bytes = a.count * a.elem.size;
                    let (mut dst_part, mut own_part) = (None, None);
                    let dst = if a.recv.is_all_of(whole) && bytes == whole.len() {
                        whole
                    } else {
                        dst_part.insert(a.elem.run(&a.recv, 0, a.count).within(whole))
                    };
                    let own = match (&send, &a.send) {
                        (Some(s), Some(b))
                            if b.is_all_of(s) && a.count * a.selem.size == s.len() =>
                        {
                            s
                        }
                        (Some(s), _) => own_part.insert(a.sblock(0, a.count).within(s)),
                        (None, _) => dst,
                    };
                    wait(&|| shm.slot_free(0, seq))?;
                    put(own)?;
                    wait(&|| shm.arrived(0, seq, None))?;
                    fold_slots(
                        a.size,
                        bytes,
                        wire,
                        shm.region(),
                        seq,
                        me,
                        own.packed_len(),
                        dst,
                    )
                }
                c => Err(Error::new(
                    ErrorClass::Intern,
                    format!("{}: no shared-memory path for {}", wire.what, c.name()),
                )),
            }
        })();
        shm.close(0, seq);
        r
    }

    /// Wait until `ready`, progressing the rank and calling `pause` between polls with the
    /// rank let go, or until another rank's error notice for the call arrives.
    fn wait_pausing(&self, wire: &Wire, pause: Pause, ready: &dyn Fn() -> bool) -> Result<()> {
        let mut polls = 0u32;
        while !ready() {
            {
                let mut e = self.eng.borrow_mut();
                e.progress();
                polls = polls.wrapping_add(1);
                if polls.is_multiple_of(NOTICE_EVERY) {
                    if let Some(x) = notice(&mut e, wire) {
                        return Err(x);
                    }
                }
            }
            pause()?;
        }
        Ok(())
    }
}

/// The root's message in run `seq` of lane 0 copied into `buf`; MPI_ERR_TRUNCATE if it is
/// not as long as `buf`'s.
#[inline(always)]
pub(super) fn read_bcast(
    wire: &Wire,
    region: &CollRegion,
    seq: u64,
    root: usize,
    buf: &Loan,
) -> Result<()> {
    let sent = region
        .get_payload(0, seq, root, buf)
        .map_err(|u| unusable(wire.what, u))?;
    let expect = buf.packed_len();
    if sent != expect {
        return Err(Error::new(
            ErrorClass::Truncate,
            format!(
                "{}: a message of {sent} bytes arrived where {expect} were expected (counts or datatypes differ between ranks)",
                wire.what
            ),
        ));
    }
    Ok(())
}

/// The parts in the slots of run `seq` of lane 0 of a communicator of `size` ranks (`bytes`
/// of elements each) combined into `dst` (the fold of `algo::reduce_shm`, on the slots'
/// loans); MPI_ERR_TRUNCATE if a part's length is not `put` bytes, ours.
#[allow(clippy::too_many_arguments)]
pub(super) fn fold_slots(
    size: i32,
    bytes: usize,
    wire: &Wire,
    region: &CollRegion,
    seq: u64,
    me: usize,
    put: usize,
    dst: &Loan,
) -> Result<()> {
    let mut f = Loans {
        wire,
        bytes,
        failed: None,
    };
    // A part of another length than ours: the first such rank, and its length.
    let odd = std::cell::Cell::new(None);
    let slot = |r: i32| {
        let (p, sent) = region.payload_sent(0, seq, r as usize, r as usize == me);
        if sent != put && odd.get().is_none() {
            odd.set(Some((r, sent)));
        }
        shm_block(r, bytes).within(&p)
    };
    fold_with(size, dst, &slot, &mut f);
    if let Some((r, sent)) = odd.get() {
        return Err(Error::new(
            ErrorClass::Truncate,
            format!(
                "{}: a part of {sent} bytes arrived from rank {r} where {put} were expected (counts or datatypes differ between ranks)",
                wire.what
            ),
        ));
    }
    match f.failed {
        Some(u) => Err(unusable(wire.what, u)),
        None => Ok(()),
    }
}

/// [`fold_with`] on loans: the slots' payloads and the receive buffer, the first error kept.
struct Loans<'w> {
    wire: &'w Wire,
    bytes: usize,
    failed: Option<Unusable>,
}

impl Folder for Loans<'_> {
    type Part = Loan;

    fn copy(&mut self, src: Loan, dst: Loan) {
        if self.failed.is_none() {
            self.failed = src.copy_to(&dst).err();
        }
    }

    fn reduce(&mut self, src: Loan, dst: Loan) {
        if self.failed.is_none() {
            self.failed = self.wire.reduce(&src, &dst).err();
        }
    }

    fn scratch(&mut self) -> Loan {
        Loan::zeroed(self.bytes)
    }
}
