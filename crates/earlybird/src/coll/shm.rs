//! Collectives through shared memory (issue 18, item 3): a communicator's collective region
//! (`fabric::coll_region`, whose doc gives the layout and the protocol), when it is made,
//! and the runs of its lanes as this rank numbers them.
//!
//! # When a communicator has one
//!
//! An intracommunicator of 2 to [`MAX_RANKS`] ranks, all of them on this host, makes its
//! region when a blocking call makes it (init for MPI_COMM_WORLD; dup, split, create and
//! the topology constructors), or else at its first blocking collective (a communicator
//! from idup, an endpoint communicator): every member makes the same call, which may wait
//! for the others, as making a region does; a nonblocking or persistent call may not.
//! Until then, and on any other communicator, the message-based algorithms run. `EARLYBIRD_COLL_SHM=0` in the environment
//! makes none; a region that cannot be made (a full `/dev/shm`) leaves the communicator
//! without one, on every rank alike. The region goes when the communicator and every
//! request of it have gone; it is unlinked from the start, so nothing is left in `/dev/shm`
//! however the job ends.
//!
//! # Runs
//!
//! Every collective call on the communicator takes the next number of lane 0 (whatever
//! algorithm it then takes, and even if its arguments are wrong: so that every rank gives
//! the same call the same number); a call that runs in shared memory opens its run under
//! that number and closes it when it is done with the region; another one stores nothing. A persistent collective that runs in shared
//! memory takes a lane of its own at init (the first [`PERSISTENT_LANES`] to do so on a
//! communicator; later ones run by messages), and each start opens its next run there.
//!
//! A rank's watermark on a lane is the last run before its oldest open one (or its last
//! run, when none is open): it never claims a run whose slots the rank may still read.
#![forbid(unsafe_code)]

use crate::comm::Comm;
use crate::error::ErrorClass;
use crate::fabric::coll_region::{CollRegion, CollShape, PERSISTENT_LANES};
use crate::sys::lend::Loan;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;

pub(crate) use crate::fabric::coll_region::PAYLOAD;

/// The most ranks a communicator's collectives run through shared memory on: every rank
/// reads every other's line in a barrier or an allreduce, which beyond a few dozen ranks
/// costs more than the message-based trees.
pub(crate) const MAX_RANKS: i32 = 32;

/// How far a rank's watermark may lag behind what it has read before it is stored: a
/// rank that runs behind a writer (a bcast's root running ahead) then stores its line, and
/// the writer loads it, once every few runs instead of at every run, each time a miss on a
/// line the other core holds.
///
/// Why no wait can last: a rank that waits for a slot of run `s` needs every watermark at
/// `s - depth`. The earliest run `r` that any rank waits to write has every rank's part of
/// the runs before it, so every rank can finish reading them, reaching `r - 1`, and stores
/// at least `r - MARK_STEP`, which is `r - depth` or more as long as `MARK_STEP <= depth`.
const MARK_STEP: u64 = 4;
const _: () = assert!(MARK_STEP <= crate::fabric::coll_region::COMM_DEPTH);
const _: () = assert!(MARK_STEP <= crate::fabric::coll_region::LANE_DEPTH);

/// One lane as this rank sees it.
#[derive(Debug, Default)]
struct Lane {
    /// The last run opened.
    last: u64,
    /// Runs opened and not yet closed.
    open: Vec<u64>,
    /// The number the call being made took ([`CollShm::ticket`]), until it opens its run or
    /// gives the number up: the watermark stays below it meanwhile. A call that fails before
    /// either leaves it here until the next call takes its own (which only holds the
    /// watermark back a while: never past a run this rank will open).
    pending: Option<u64>,
    /// The watermark last stored.
    published: u64,
    /// Every rank's watermark was at least this when last loaded (so no load is needed
    /// for a run up to `depth` past it).
    free_through: u64,
}

/// A communicator's collective region and its lanes.
#[derive(Debug)]
pub(crate) struct CollShm {
    region: CollRegion,
    me: usize,
    n: usize,
    lanes: RefCell<Vec<Lane>>,
    /// Persistent lanes handed out.
    taken: Cell<usize>,
}

impl CollShm {
    /// The number of the call being made on the communicator (lane 0): taken by every call,
    /// whatever it runs, and turned into a run by [`open_ticket`](Self::open_ticket) if it
    /// runs in shared memory, else given up ([`give_up`](Self::give_up)). Nothing is stored
    /// in the region for a call that does not run there.
    pub(crate) fn ticket(&self) -> u64 {
        let mut lanes = self.lanes.borrow_mut();
        let l = &mut lanes[0];
        l.last += 1;
        l.pending = Some(l.last);
        l.last
    }

    /// The call numbered `seq` runs in shared memory: its run.
    pub(crate) fn open_ticket(self: &Rc<Self>, seq: u64) -> ShmRun {
        self.open_at(0, seq)
    }

    /// The call numbered `seq` does not run in shared memory: it has nothing to read.
    pub(crate) fn give_up(&self, seq: u64) {
        let mut lanes = self.lanes.borrow_mut();
        let l = &mut lanes[0];
        if l.pending == Some(seq) {
            l.pending = None;
        }
    }

    /// Open the next run of lane `lane` (a persistent collective's start; lane 0 for an
    /// algorithm timed at a persistent init).
    pub(crate) fn open(self: &Rc<Self>, lane: usize) -> ShmRun {
        let seq = {
            let mut lanes = self.lanes.borrow_mut();
            let l = &mut lanes[lane];
            l.last += 1;
            l.last
        };
        self.open_at(lane, seq)
    }

    /// Open run `seq` of lane `lane`, taken already.
    fn open_at(self: &Rc<Self>, lane: usize, seq: u64) -> ShmRun {
        self.enter(lane, seq);
        ShmRun(Rc::new(Open {
            shm: self.clone(),
            lane,
            seq,
            closed: Cell::new(false),
        }))
    }

    /// Mark run `seq` of lane `lane` (taken already) open, without a handle on it: a
    /// blocking call (`coll/shm_blocking.rs`) that closes it itself with
    /// [`close`](Self::close) before it returns, whatever happens.
    pub(crate) fn enter(&self, lane: usize, seq: u64) {
        let mut lanes = self.lanes.borrow_mut();
        let l = &mut lanes[lane];
        if l.pending == Some(seq) {
            l.pending = None;
        }
        l.open.push(seq);
        self.publish_mark(lane, l);
    }

    /// Close run `seq` of lane `lane` and store the new watermark if it rose.
    pub(crate) fn close(&self, lane: usize, seq: u64) {
        let mut lanes = self.lanes.borrow_mut();
        let l = &mut lanes[lane];
        if let Some(i) = l.open.iter().position(|&s| s == seq) {
            l.open.swap_remove(i);
        }
        self.publish_mark(lane, l);
    }

    /// Store lane `lane`'s watermark if it rose by [`MARK_STEP`]: the run before the oldest
    /// open (or pending) one, or the last run. Done at every open too, since calls that ran
    /// by messages store nothing: the rank's first run in shared memory after them tells the
    /// others that it is done with theirs (else they would wait for it, and it for them).
    fn publish_mark(&self, lane: usize, l: &mut Lane) {
        let mark = l
            .open
            .iter()
            .chain(&l.pending)
            .min()
            .map_or(l.last, |&s| s - 1);
        if mark >= l.published + MARK_STEP {
            l.published = mark;
            self.region
                .watermark(lane, self.me)
                .store(mark, Ordering::Release);
        }
    }

    /// Whether this rank may write its slot of run `seq` of lane `lane`: every rank has
    /// finished reading the slot's last run. The watermarks are loaded only when the last
    /// load does not already say so.
    #[inline]
    pub(crate) fn slot_free(&self, lane: usize, seq: u64) -> bool {
        let Some(need) = seq.checked_sub(CollRegion::depth(lane)) else {
            return true;
        };
        let mut lanes = self.lanes.borrow_mut();
        let l = &mut lanes[lane];
        if l.free_through >= need {
            return true;
        }
        let low = (0..self.n)
            .map(|r| self.region.watermark(lane, r).load(Ordering::Acquire))
            .min()
            .unwrap_or(0);
        l.free_through = l.free_through.max(low);
        low >= need
    }

    /// Say that this rank's slot of run `seq` of lane `lane` holds its part.
    #[inline]
    pub(crate) fn publish(&self, lane: usize, seq: u64) {
        self.region
            .flag(lane, seq, self.me)
            .store(seq, Ordering::Release);
    }

    /// Once this rank has published its part of run `seq` of lane `lane`: ask for the line
    /// of its slot of the next run, to write. The readers of that slot's last run (`depth`
    /// runs ago) hold the line; fetched now, it is this core's again when the next run
    /// writes it, instead of that write waiting in the store buffer for it, and every later
    /// load that cannot take its value from a store waiting behind it. (8 B bcast in a
    /// back-to-back loop, 2 ranks: 0.19 against 0.13 to 0.17 us.) A reader that fetched the
    /// line meanwhile (spinning on the next run's flag) only takes it back.
    #[inline(always)]
    pub(crate) fn claim_next(&self, lane: usize, seq: u64) {
        self.region.prefetch_slot::<true>(lane, seq + 1, self.me);
    }

    /// Whether `from` (every other rank: `None`) has published its part of run `seq` of
    /// lane `lane`.
    #[inline]
    pub(crate) fn arrived(&self, lane: usize, seq: u64, from: Option<i32>) -> bool {
        let here = |r: usize| self.region.flag(lane, seq, r).load(Ordering::Acquire) >= seq;
        match from {
            Some(r) => here(r as usize),
            None => (0..self.n).filter(|&r| r != self.me).all(here),
        }
    }

    /// This rank's communicator rank.
    pub(crate) fn me(&self) -> usize {
        self.me
    }

    /// The communicator's collective region.
    pub(crate) fn region(&self) -> &CollRegion {
        &self.region
    }

    /// A lane for a persistent collective, if one is left (every rank calls this at every
    /// persistent init, so all hand out the same lanes).
    pub(crate) fn take_lane(&self) -> Option<usize> {
        let t = self.taken.get() + 1;
        self.taken.set(t);
        (t <= PERSISTENT_LANES).then_some(t)
    }

    /// Back lane `lane` with memory now, for a persistent collective that runs there: an
    /// error here (a full `/dev/shm`) rather than a SIGBUS at its first start.
    pub(crate) fn back_lane(&self, lane: usize) -> std::io::Result<()> {
        self.region.populate(lane)
    }
}

/// An open run: closed when it is done with the region, or when the last handle on it goes.
#[derive(Debug)]
struct Open {
    shm: Rc<CollShm>,
    lane: usize,
    seq: u64,
    closed: Cell<bool>,
}

impl Drop for Open {
    fn drop(&mut self) {
        if !self.closed.replace(true) {
            self.shm.close(self.lane, self.seq);
        }
    }
}

/// One run of a lane: what a collective's shared-memory steps act on.
#[derive(Clone, Debug)]
pub(crate) struct ShmRun(Rc<Open>);

impl ShmRun {
    fn region(&self) -> &CollRegion {
        &self.0.shm.region
    }

    /// Whether this rank may write its slot of the run: every rank has finished reading
    /// the slot's last run.
    pub(crate) fn slot_free(&self) -> bool {
        self.0.shm.slot_free(self.0.lane, self.0.seq)
    }

    /// Copy `src` (at most [`PAYLOAD`] bytes) into this rank's slot of the run, its length
    /// beside it; the slot must be free ([`slot_free`](Self::slot_free)).
    pub(crate) fn put(&self, src: &Loan) -> Result<(), crate::sys::lend::Unusable> {
        let o = &self.0;
        self.region().put_payload(o.lane, o.seq, o.shm.me, src)
    }

    /// Ask for the line of this rank's slot of the lane's next run, to write (see
    /// [`CollShm::claim_next`]).
    pub(crate) fn claim_next(&self) {
        self.0.shm.claim_next(self.0.lane, self.0.seq)
    }

    /// Say that this rank's slot of the run holds its part.
    pub(crate) fn publish(&self) {
        self.0.shm.publish(self.0.lane, self.0.seq)
    }

    /// Whether `from` (every other rank: `None`) has published its part of the run.
    pub(crate) fn arrived(&self, from: Option<i32>) -> bool {
        self.0.shm.arrived(self.0.lane, self.0.seq, from)
    }

    /// This rank is done with the region for this run.
    pub(crate) fn close(&self) {
        if !self.0.closed.replace(true) {
            self.0.shm.close(self.0.lane, self.0.seq);
        }
    }

    /// `rank`'s payload in this run (writable for this rank's own).
    pub(crate) fn payload(&self, rank: i32) -> Loan {
        let o = &self.0;
        let r = rank as usize;
        self.region().payload(o.lane, o.seq, r, r == o.shm.me)
    }
}

/// Whether `EARLYBIRD_COLL_SHM` leaves shared-memory collectives on (read once).
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        !matches!(
            std::env::var("EARLYBIRD_COLL_SHM")
                .as_deref()
                .map(str::trim),
            Ok("0") | Ok("off") | Ok("no") | Ok("false")
        )
    })
}

impl Comm {
    /// The communicator's collective region, if it has one.
    pub(crate) fn coll_shm(&self) -> Option<Rc<CollShm>> {
        match &*self.shared.coll_shm.borrow() {
            crate::comm::CollShmState::Made(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// What a blocking collective does before it starts, without the collective: make the
    /// communicator's collective region if it may have one and has not tried yet.
    /// Collective, at the point of every member's sequence of collective calls where a
    /// blocking collective would make it. For a layer that runs a blocking collective as its
    /// nonblocking form and a wait (the C ABI under MPI_THREAD_MULTIPLE, so that the wait
    /// can let the process's lock go): with this first, the pair matches a blocking call on
    /// the other members exactly.
    pub fn prepare_blocking_collective(&self) {
        if !self.is_inter() && self.check_live().is_ok() {
            self.make_coll_shm();
        }
    }

    /// At a blocking collective: make the communicator's region if it may have one and
    /// has not tried yet (see the module doc). Collective; a failure leaves it without
    /// one, on every rank.
    pub(crate) fn make_coll_shm(&self) {
        use crate::comm::CollShmState;
        if !matches!(*self.shared.coll_shm.borrow(), CollShmState::Untried) {
            return;
        }
        // A member on another host: `shared_region` fails on every rank alike, before a word
        // is exchanged.
        if self.is_inter() || !(2..=MAX_RANKS).contains(&self.size) || !enabled() {
            *self.shared.coll_shm.borrow_mut() = CollShmState::None;
            return;
        }
        let shape = CollShape {
            n: self.size as usize,
        };
        let r = self.shared_region(
            shape.total_bytes(),
            shape.reserved_bytes(),
            "the collective region",
            ErrorClass::NoMem,
            |seg, _| CollRegion::new(seg, shape),
        );
        *self.shared.coll_shm.borrow_mut() = match r {
            Ok(region) => CollShmState::Made(Rc::new(CollShm {
                region: region.mapped,
                me: self.rank as usize,
                n: self.size as usize,
                lanes: RefCell::new((0..=PERSISTENT_LANES).map(|_| Lane::default()).collect()),
                taken: Cell::new(0),
            })),
            Err(_) => CollShmState::None,
        };
    }
}
