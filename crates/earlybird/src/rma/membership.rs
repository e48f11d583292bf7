//! Changing a window's communicator (seed 001, section 1.2.6: MPI_WIN_CHANGE_COMM): the
//! window moves to a new communicator, whose ranks that were not in it join it and whose
//! absent ranks leave it, and it stays the same window: its memory, its sync counters and the
//! counter references handed out before.
//!
//! The call is collective over the window's communicator and the new one. Members call
//! [`Win::change_comm`] (with `None` if they are not in the new communicator: they leave), the
//! new communicator's other ranks call [`Comm::win_join`], and every rank of the new
//! communicator names the same `peer_rank`, a rank of it that is a member of the window, which
//! tells the joiners what the window is.
//!
//! How: the members first agree over the old communicator (every epoch closed and no sync
//! request running, or the call fails everywhere); then, over the new one, a new segment is
//! made for the new group (a control block per rank), every member copies its own state into
//! it (its memory for the library's flavours, its counters' lines, its attach table) and the
//! window continues on it. Choices the seed leaves open:
//! - Joiners expose no memory (size 0; a dynamic window's joiner may attach later).
//! - The window's memory stays the same bytes, but the library's flavours (`win_allocate`,
//!   `win_allocate_shared`) move it into the new segment: addresses handed out before
//!   (`shared_query`, a C program's base pointer) are stale.
//! - Counters are named by a member id that survives (a member keeps the one it had; joiners
//!   get new ones), so references sent before still reach the same counter. Requests made
//!   before the change belong to the old window and fail (MPI_ERR_WIN): make them again.
//! - A window that changes its communicator keeps its name, info and error handler; a joiner
//!   gets the defaults.
#![forbid(unsafe_code)]

use super::{counter, err, Flavor, Hints, Win, RECORD};
use crate::comm::Comm;
use crate::error::{ErrorClass, Result};
use crate::fabric::window::{Mem, Word, SYNC_COUNTERS};
use crate::info::Info;
use std::sync::atomic::Ordering;

/// Words of a rank's record in the new communicator: the window's `RECORD` and its member
/// id (`NONE` for a joiner).
const JOIN_RECORD: usize = RECORD + 1;
const NONE: u64 = u64::MAX;

/// What the peer rank tells the new communicator: whether the members agreed, the flavour,
/// the serial, the next free member id, and `alloc_shared_noncontig` (which shapes the
/// layout every rank computes).
const HEADER: usize = 5;

fn flavor_of(code: u64) -> Option<Flavor> {
    [
        Flavor::Create,
        Flavor::Allocate,
        Flavor::Dynamic,
        Flavor::Shared,
    ]
    .into_iter()
    .find(|&f| f as u64 == code)
}

impl Win {
    /// MPIX_Win_change_comm (seed 001), for a member of the window: `new_comm` becomes the
    /// window's communicator (`None` when this rank is not in it: it leaves, and this window
    /// is freed here). Collective over the window's communicator and `new_comm`; `peer_rank`
    /// is a rank of `new_comm` that is a member of the window, the same on every rank of
    /// `new_comm` (see the module doc of `rma::membership`). Every epoch must be closed and
    /// no sync request running (MPI_ERR_RMA_SYNC on every rank otherwise).
    pub fn change_comm(&mut self, new_comm: Option<&Comm>, peer_rank: i32) -> Result<()> {
        let r = self.change_comm_inner(new_comm, peer_rank);
        self.ret("win_change_comm", r)
    }

    fn change_comm_inner(&mut self, new_comm: Option<&Comm>, peer_rank: i32) -> Result<()> {
        self.check_live()?;
        let w = &self.inner;
        // Over the old communicator: may every member move? What a member can check of the
        // new communicator is checked here too, so that a failure there fails every member,
        // the leavers included, before anyone commits.
        let mine = w
            .epochs
            .borrow()
            .check_free()
            .and_then(|()| {
                if w.counters.borrow().any_waited() {
                    return Err(err(
                        ErrorClass::RmaSync,
                        "win_change_comm while a sync object request is active",
                    ));
                }
                if w.pmem.borrow().is_some() {
                    return Err(err(
                        ErrorClass::RmaFlavor,
                        "win_change_comm on a persistent window (pmem_is_pmem): its files are \
                         per rank of its communicator",
                    ));
                }
                Ok(())
            })
            .and_then(|()| new_comm.map_or(Ok(()), |c| check_peer(c, peer_rank, &w.comm)));
        let flag = [u64::from(mine.is_ok())];
        let mut all_ok = [0u64];
        w.comm
            .allreduce(&flag[..], &mut all_ok[..], &crate::coll::op::Op::MIN)?;
        let agreed = mine.and_then(|()| {
            if all_ok[0] == 0 {
                return Err(err(
                    ErrorClass::RmaSync,
                    "win_change_comm failed on another member of the window (an epoch open, a sync request running, or a bad new communicator or peer_rank there)",
                ));
            }
            Ok(())
        });
        let Some(c) = new_comm else {
            // Leaving: the window is freed here (the others keep their own mappings).
            agreed?;
            w.freed.set(true);
            w.attached.borrow_mut().clear();
            drop(w.owned.borrow_mut().take());
            return Ok(());
        };
        let me = w.rank;
        let part = &w.parts[me];
        let addr = match (&part.mem, w.flavor) {
            (Some(Mem::Local { addr, .. }), Flavor::Create) => *addr as u64,
            (Some(Mem::Remote { addr, .. }), Flavor::Create) => *addr,
            _ => 0,
        };
        let header = [
            u64::from(agreed.is_ok()),
            w.flavor as u64,
            w.serial,
            u64::from(w.next_id),
            u64::from(w.hints.borrow().alloc_shared_noncontig),
        ];
        let record = [
            part.size as u64,
            part.disp_unit as u64,
            u64::from(part.pid),
            addr,
            u64::from(w.ids[me]),
        ];
        let old = self.inner.clone();
        let plan = agree(c, peer_rank, Some(header), record)?;
        agreed?;
        let new = plan.assemble(c, old.hints.borrow().clone(), None)?;
        // Only now, the new window made, does the memory the old one owns move to it.
        *new.inner.owned.borrow_mut() = old.owned.borrow_mut().take();
        let nr = new.inner.rank;
        // Carry this rank's own state over: memory, counters, attach table.
        let mut copied = Ok(());
        if matches!(old.flavor, Flavor::Allocate | Flavor::Shared) {
            if let (Some(from), Some(to)) = (&old.parts[me].mem, &new.inner.parts[nr].mem) {
                let mut bytes = vec![0u8; from.len()];
                copied = from
                    .read(0, &mut bytes)
                    .and_then(|()| to.write(0, &bytes))
                    .map_err(|e| err(ErrorClass::Intern, format!("win_change_comm: {e}")));
            }
        }
        for i in 0..SYNC_COUNTERS {
            let (v, g) = old.seg.sync_counter(me, i);
            let (nv, ng) = new.inner.seg.sync_counter(nr, i);
            nv.store(v.load(Ordering::Acquire), Ordering::Relaxed);
            ng.store(g.load(Ordering::Acquire), Ordering::Release);
        }
        *new.inner.counters.borrow_mut() =
            std::mem::replace(&mut *old.counters.borrow_mut(), counter::Counters::new());
        let regions = std::mem::take(&mut *old.attached.borrow_mut());
        for (k, r) in regions.iter().enumerate() {
            let (a, l) = new.inner.seg.attached(nr, k);
            a.store(r.addr, Ordering::Relaxed);
            l.store(r.len as u64, Ordering::Relaxed);
        }
        new.inner
            .seg
            .word(nr, Word::AttachCount)
            .store(regions.len() as u64, Ordering::Release);
        *new.inner.attached.borrow_mut() = regions;
        *new.inner.name.borrow_mut() = old.name.borrow().clone();
        *new.inner.errh.borrow_mut() = old.errh.borrow().clone();
        // Nobody uses the new window before every member has carried its state over (the
        // others wait here even if this rank's copy failed).
        new.inner.comm.barrier()?;
        copied?;
        old.freed.set(true);
        self.inner = new.inner.clone();
        // `new` shares its state with `self` now, so dropping it leaves the state alone.
        drop(new);
        Ok(())
    }
}

impl Comm {
    /// MPIX_Win_change_comm (seed 001) for a rank of `self` that is not a member of the
    /// window: it joins the window that the window's members move to `self`
    /// ([`Win::change_comm`]); `peer_rank`, a rank of `self` that is a member, tells it what the
    /// window is. It exposes no memory (see the module doc of `rma::membership`).
    pub fn win_join(&self, peer_rank: i32) -> Result<Win> {
        let r = (|| {
            self.no_rma("win_join")?;
            let record = [0, 1, u64::from(crate::sys::process::pid()), 0, NONE];
            let plan = agree(self, peer_rank, None, record)?;
            let w = plan.assemble(self, Hints::from_info(&Info::new())?, None)?;
            // Members carry their state over before anyone uses the window.
            w.inner.comm.barrier()?;
            Ok(w)
        })();
        self.ret("win_change_comm", r)
    }
}

/// What the new communicator agreed on: the window's flavour, serial and layout hint, every
/// rank's record and member id.
struct Plan {
    flavor: Flavor,
    serial: u64,
    noncontig: bool,
    records: Vec<u64>,
    ids: Vec<u32>,
    next_id: u32,
}

impl Plan {
    /// The window's state over `c`: a new segment for the new group (collective over `c`).
    fn assemble(self, c: &Comm, mut hints: Hints, owned: Option<super::Owned>) -> Result<Win> {
        hints.alloc_shared_noncontig = self.noncontig;
        Win::assemble(
            c.dup()?,
            self.flavor,
            hints,
            &self.records,
            owned,
            Some((self.serial, self.ids, self.next_id)),
            None,
        )
    }
}

/// What a member checks of the new communicator before the members agree: an
/// intracommunicator, and `peer_rank` one of its ranks that is a member of the window
/// (whose communicator is `old`).
fn check_peer(c: &Comm, peer_rank: i32, old: &Comm) -> Result<()> {
    c.check_live()?;
    if c.is_inter() {
        return Err(err(
            ErrorClass::Comm,
            "win_change_comm: the new communicator must be an intracommunicator",
        ));
    }
    if peer_rank < 0 || peer_rank >= c.size() {
        return Err(err(
            ErrorClass::Rank,
            format!(
                "win_change_comm: peer_rank {peer_rank} is not a rank of the new communicator ({} ranks)",
                c.size()
            ),
        ));
    }
    let there = c.group().translate_ranks(&[peer_rank], &old.group())?;
    if there[0] == crate::comm::group::UNDEFINED {
        return Err(err(
            ErrorClass::Arg,
            format!("win_change_comm: peer_rank {peer_rank} is not a member of the window"),
        ));
    }
    Ok(())
}

/// Over the new communicator `c`: the peer's `header` reaches every rank, every rank's
/// `record` (JOIN_RECORD words) every other, and joiners get member ids. An error (the same
/// on every rank) if the peer is no member or the members did not agree.
fn agree(
    c: &Comm,
    peer_rank: i32,
    header: Option<[u64; HEADER]>,
    record: [u64; JOIN_RECORD],
) -> Result<Plan> {
    c.check_live()?;
    if c.is_inter() {
        return Err(err(
            ErrorClass::Comm,
            "win_change_comm: the new communicator must be an intracommunicator",
        ));
    }
    let size = c.size() as usize;
    if peer_rank < 0 || peer_rank as usize >= size {
        return Err(err(
            ErrorClass::Rank,
            format!("win_change_comm: peer_rank {peer_rank} is not a rank of the new communicator ({size} ranks)"),
        ));
    }
    // The peer says what the window is; a peer that is no member says so with zeros.
    let mut h = if c.rank() == peer_rank {
        header.unwrap_or([0; HEADER])
    } else {
        [0; HEADER]
    };
    c.bcast(&mut h[..], peer_rank)?;
    let mut all = vec![0u64; JOIN_RECORD * size];
    c.allgather(&record[..], &mut all[..])?;
    let Some(flavor) = flavor_of(h[1]) else {
        return Err(err(
            ErrorClass::Arg,
            format!("win_change_comm: peer_rank {peer_rank} is not a member of the window"),
        ));
    };
    if h[0] == 0 {
        return Err(err(
            ErrorClass::RmaSync,
            "win_change_comm failed on a member of the window (an epoch was open or a sync request running there)",
        ));
    }
    // Member ids: members keep theirs; joiners take the next ones, in rank order.
    let mut next = h[3] as u32;
    let ids: Vec<u32> = (0..size)
        .map(|r| match all[r * JOIN_RECORD + RECORD] {
            NONE => {
                next += 1;
                next - 1
            }
            id => id as u32,
        })
        .collect();
    let records = (0..size)
        .flat_map(|r| all[r * JOIN_RECORD..r * JOIN_RECORD + RECORD].to_vec())
        .collect();
    Ok(Plan {
        flavor,
        serial: h[2],
        noncontig: h[4] != 0,
        records,
        ids,
        next_id: next,
    })
}
