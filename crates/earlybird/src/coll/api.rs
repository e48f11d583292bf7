//! The collective calls on [`Comm`]: how a call becomes [`Args`], and the one driver that
//! runs it blocking, nonblocking or persistent.
#![forbid(unsafe_code)]

use super::op::{Op, Reducer};
use super::registry::{self, Algorithm, Forced};
use super::sched::{notify_error, Now, Record, Schedule, Wire};
use super::{check_len, check_root, Args, Coll, Elem};
use crate::comm::agree::coll_tag;
use crate::comm::Comm;
use crate::datatype::Equivalence;
use crate::error::Result;
use crate::request::Steps;
use crate::request::{Request, Scope};
use crate::sys::lend::Lent;
use std::rc::Rc;

/// MPI_IN_PLACE: see [`Src`].
#[derive(Clone, Copy, Debug)]
pub struct InPlace;

/// MPI_IN_PLACE, where a collective's send argument may take it: the data is taken from (and
/// the result left in) the receive buffer.
pub const IN_PLACE: InPlace = InPlace;

/// A collective's send argument: a slice, or [`IN_PLACE`]. A persistent collective given
/// `&mut [T]` lets the program change the data between starts through
/// [`Request::send_buffer_mut`].
#[derive(Debug)]
pub enum Src<'a, T> {
    Slice(&'a [T]),
    SliceMut(&'a mut [T]),
    InPlace,
}

impl<'a, T> From<&'a [T]> for Src<'a, T> {
    fn from(s: &'a [T]) -> Self {
        Src::Slice(s)
    }
}
impl<'a, T, const N: usize> From<&'a [T; N]> for Src<'a, T> {
    fn from(s: &'a [T; N]) -> Self {
        Src::Slice(s)
    }
}
impl<'a, T> From<&'a Vec<T>> for Src<'a, T> {
    fn from(s: &'a Vec<T>) -> Self {
        Src::Slice(s)
    }
}
impl<'a, T> From<&'a mut [T]> for Src<'a, T> {
    fn from(s: &'a mut [T]) -> Self {
        Src::SliceMut(s)
    }
}
impl<'a, T, const N: usize> From<&'a mut [T; N]> for Src<'a, T> {
    fn from(s: &'a mut [T; N]) -> Self {
        Src::SliceMut(s)
    }
}
impl<'a, T> From<&'a mut Vec<T>> for Src<'a, T> {
    fn from(s: &'a mut Vec<T>) -> Self {
        Src::SliceMut(s)
    }
}
impl<T> From<InPlace> for Src<'_, T> {
    fn from(_: InPlace) -> Self {
        Src::InPlace
    }
}

impl<T: Equivalence> Src<'_, T> {
    /// Elements given (`None` in place).
    pub(crate) fn len(&self) -> Option<usize> {
        match self {
            Src::Slice(s) => Some(s.len()),
            Src::SliceMut(s) => Some(s.len()),
            Src::InPlace => None,
        }
    }

    /// The buffer, whole, and whether it may be handed back writable.
    pub(crate) fn lend(self) -> (Option<Lent>, bool) {
        match self {
            Src::Slice(s) => (Some(Lent::of_elems(s)), false),
            Src::SliceMut(s) => (Some(Lent::of_elems_mut(s)), true),
            Src::InPlace => (None, false),
        }
    }
}

/// What identifies a blocking call as a repeat of the previous one (see
/// `Comm::blocking_repeat`): buffers, counts, root, operation, element type. The kept
/// steps are dropped when the communicator's hints change (they may force another
/// algorithm).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Repeat {
    send: Option<(u64, usize)>,
    recv: (u64, usize),
    count: usize,
    root: i32,
    op: Option<(usize, usize)>,
    elem: (usize, crate::datatype::Sig),
}

impl Repeat {
    /// Regular collectives of gapless element types only: the v, w and neighbour forms
    /// carry arrays, and a padded type's blocks carry its layout.
    fn may_cache(a: &Args) -> bool {
        a.elem.is_gapless()
            && a.rcounts.is_none()
            && a.scounts.is_none()
            && a.wblocks.is_none()
            && a.sources.is_none()
            && a.dests.is_none()
    }

    fn key(a: &Args, wire: &Wire) -> Repeat {
        Repeat {
            send: a.send.as_ref().map(|l| (l.addr(), l.len())),
            recv: (a.recv.addr(), a.recv.len()),
            count: a.count,
            root: a.root,
            op: wire.reducer.as_ref().map(|r| r.identity()),
            elem: (a.elem.size, a.elem.sig),
        }
    }
}

/// Per collective kind on a communicator: the last blocking call seen, and the steps kept
/// for the one that repeated.
#[derive(Debug, Default)]
pub(crate) struct RepeatSlot {
    seen: Option<Repeat>,
    kept: Option<(Repeat, &'static str, Box<Schedule>)>,
}

/// The communicator info key of how hard persistent collectives work at init.
pub const INIT_EFFORT: &str = "earlybird_coll_init_effort";

/// Tuning at init (see `Comm::tune`).
struct Tune;

impl Tune {
    /// Runs of each candidate.
    const RUNS: usize = 5;

    /// Whether running the collective at init leaves the program's data as it was: not in
    /// place (an in-place reduction would fold its input into itself), and no v, w or
    /// neighbour form (kept simple: one algorithm each, or nearly).
    fn safe(a: &Args) -> bool {
        let in_place = a.send.is_none() && !matches!(a.coll, Coll::Barrier | Coll::Bcast);
        !in_place && Repeat::may_cache(a)
    }
}

/// How a collective call runs.
pub(crate) enum Mode<'s, 'e> {
    Blocking,
    Nonblocking(&'s Scope<'s, 'e>),
    Persistent(&'s Scope<'s, 'e>),
}

/// A collective call, before it runs: its arguments (or the error they gave), and for
/// reductions the reducer.
pub(crate) struct Call {
    pub(crate) what: &'static str,
    pub(crate) args: Result<Args>,
    pub(crate) reducer: Option<Reducer>,
    /// Whether the send buffer was lent writable (persistent collectives hand it back).
    pub(crate) send_writable: bool,
}

impl Call {
    /// A call without an operation, from its checked arguments.
    pub(crate) fn plain(what: &'static str, args: Result<Args>, send_writable: bool) -> Call {
        Call {
            what,
            args,
            reducer: None,
            send_writable,
        }
    }

    /// A reduction, from its checked arguments and reducer.
    pub(crate) fn reduction(
        what: &'static str,
        r: Result<(Args, Reducer)>,
        send_writable: bool,
    ) -> Call {
        let (args, reducer) = match r {
            Ok((a, r)) => (Ok(a), Some(r)),
            Err(e) => (Err(e), None),
        };
        Call {
            what,
            args,
            reducer,
            send_writable,
        }
    }
}

impl Comm {
    /// The algorithms forced for this communicator.
    fn forced(&self) -> Rc<Forced> {
        let mut f = self.shared.coll_forced.borrow_mut();
        f.get_or_insert_with(|| Rc::new(Forced::new(&self.shared.info.borrow())))
            .clone()
    }

    /// Run a collective call in `mode`: the one path of every collective.
    pub(crate) fn collective<'s>(
        &self,
        call: Call,
        mode: Mode<'s, '_>,
    ) -> Result<Option<Request<'s>>> {
        let what = call.what;
        let r = (|| {
            self.check_live()?;
            self.check_intra(what)?;
            let seq = self.next_seq();
            let wire = Wire {
                ctx: self.ctx + 1,
                tag: coll_tag(seq, 0),
                map: self.map.clone(),
                reducer: call.reducer,
                what,
                notice_tag: coll_tag(seq, 1),
                me: self.rank,
                size: self.size,
            };
            if let (Mode::Blocking, Ok(a)) = (&mode, &call.args) {
                if Repeat::may_cache(a) {
                    return self.blocking_repeat(a, wire);
                }
            }
            let chosen = call
                .args
                .and_then(|a| registry::choose(&a, &self.forced()).map(|alg| (a, alg)));
            let (args, alg) = match chosen {
                Ok(x) => x,
                Err(err) => {
                    // Take no part, but say so: the others' waits end with this error
                    // instead of waiting for us.
                    notify_error(&mut self.eng.borrow_mut(), &wire, &err);
                    return Err(err);
                }
            };
            match mode {
                Mode::Blocking => self.run_now(&args, alg, &wire).map(|()| None),
                Mode::Nonblocking(s) => {
                    let mut rec = Record::new(wire);
                    (alg.run)(&args, &mut rec);
                    let sched = rec.finish(s.ops.id());
                    Ok(Some(Request::steps(
                        &self.eng,
                        &s.ops,
                        Box::new(sched),
                        &self.shared,
                    )))
                }
                Mode::Persistent(s) => {
                    let alg = if self.init_effort_tune() && Tune::safe(&args) {
                        let best = self.tune(&args, &wire, alg)?;
                        registry::note_last(best.name);
                        best
                    } else {
                        alg
                    };
                    let mut rec = Record::new(wire);
                    (alg.run)(&args, &mut rec);
                    let sched = rec.finish(s.ops.id());
                    let send = if call.send_writable {
                        args.send.clone()
                    } else {
                        None
                    };
                    Ok(Some(Request::coll_persistent(
                        &self.eng,
                        &s.ops,
                        sched,
                        args.recv.clone(),
                        send,
                        &self.shared,
                    )))
                }
            }
        })();
        self.ret(what, r)
    }

    /// Run `alg`'s steps for `args` as they come (a blocking call, nothing recorded).
    fn run_now(&self, args: &Args, alg: &Algorithm, wire: &Wire) -> Result<()> {
        let mut e = self.eng.borrow_mut();
        let mut now = Now::new(&mut e, wire);
        (alg.run)(args, &mut now);
        now.finish()
    }

    /// A blocking call that may repeat the previous one of its kind on this communicator:
    /// when it repeats it for the second time in a row (same algorithm, buffers, counts, root
    /// and operation), its steps are recorded and kept, and from then on each repeat replays
    /// them as a persistent collective's start does, under the new call's tags. Whether a
    /// call is a repeat is local (buffer addresses differ between ranks), which is harmless:
    /// every call takes its sequence number either way, and replayed steps are the steps.
    fn blocking_repeat(&self, args: &Args, wire: Wire) -> Result<Option<Request<'static>>> {
        let key = Repeat::key(args, &wire);
        let mut cache = self.shared.coll_repeat.borrow_mut();
        let slot = &mut cache[args.coll.index()];
        let hit = matches!(&slot.kept, Some((k, _, _)) if *k == key);
        let alg = if hit {
            None
        } else {
            match registry::choose(args, &self.forced()) {
                Ok(a) => Some(a),
                Err(err) => {
                    drop(cache);
                    notify_error(&mut self.eng.borrow_mut(), &wire, &err);
                    return Err(err);
                }
            }
        };
        if let (Some(alg), true) = (alg, slot.seen.as_ref() != Some(&key)) {
            slot.seen = Some(key);
            drop(cache);
            return self.run_now(args, alg, &wire).map(|()| None);
        }
        if let Some(alg) = alg {
            let mut rec = Record::new(wire.clone());
            (alg.run)(args, &mut rec);
            slot.kept = Some((key, alg.name, Box::new(rec.finish(0))));
        }
        let (_, name, sched) = slot.kept.as_mut().expect("kept above");
        registry::note_last(name);
        sched.reuse_for(&wire);
        let mut e = self.eng.borrow_mut();
        let r = match sched.advance(&mut e) {
            Some(r) => r,
            None => {
                let blocked = sched.blocked();
                e.wait_for(blocked, |e| sched.advance(e)).and_then(|r| r)
            }
        };
        if !sched.at_rest() {
            // The wait failed (the job is ending): withdraw what is in flight and forget it.
            sched.abandon(&mut e);
            slot.kept = None;
        }
        r.map(|_| None)
    }

    /// Whether the communicator's info asks persistent collectives to work hard at init
    /// (`earlybird_coll_init_effort` = `tune`; the default, `choose`, takes the registry's
    /// choice).
    fn init_effort_tune(&self) -> bool {
        matches!(
            self.shared.info.borrow().get(INIT_EFFORT),
            Ok(Some(v)) if v.trim() == "tune"
        )
    }

    /// Time every algorithm that fits a persistent collective's call on its own buffers
    /// (each run [`Tune::RUNS`] times, the slowest rank's time counting) and return the
    /// fastest. Every rank times the same candidates in the same order and takes the same
    /// decision from the maximum over ranks, so all keep the same algorithm.
    fn tune(
        &self,
        args: &Args,
        wire: &Wire,
        default: &'static Algorithm,
    ) -> Result<&'static Algorithm> {
        let candidates = registry::fitting(args);
        if candidates.len() < 2 {
            return Ok(default);
        }
        let mut times = Vec::with_capacity(candidates.len());
        for alg in &candidates {
            let seq = self.next_seq();
            let w = Wire {
                tag: coll_tag(seq, 0),
                notice_tag: coll_tag(seq, 1),
                ..wire.clone()
            };
            let mut rec = Record::new(w);
            (alg.run)(args, &mut rec);
            let mut sched = rec.finish(0);
            let t0 = std::time::Instant::now();
            for _ in 0..Tune::RUNS {
                sched.rewind();
                let mut e = self.eng.borrow_mut();
                let blocked = sched.blocked();
                e.wait_for(blocked, |e| sched.advance(e))??;
            }
            times.push(t0.elapsed().as_secs_f64());
        }
        self.allreduce(IN_PLACE, &mut times, &Op::MAX)?;
        let best = (0..times.len())
            .min_by(|&a, &b| times[a].total_cmp(&times[b]))
            .expect("two candidates at least");
        Ok(candidates[best])
    }

    pub(super) fn blocking(&self, call: Call) -> Result<()> {
        self.collective(call, Mode::Blocking).map(|_| ())
    }

    pub(super) fn started<'s>(&self, call: Call, s: &'s Scope<'s, '_>) -> Result<Request<'s>> {
        self.collective(call, Mode::Nonblocking(s))
            .map(|r| r.expect("a nonblocking collective makes a request"))
    }

    pub(super) fn inactive<'s>(&self, call: Call, s: &'s Scope<'s, '_>) -> Result<Request<'s>> {
        self.collective(call, Mode::Persistent(s))
            .map(|r| r.expect("a persistent collective makes a request"))
    }

    // ---- barrier ------------------------------------------------------------------------

    fn barrier_call(&self, what: &'static str) -> Call {
        let args = Elem::of::<u8>().map(|e| Args::new(Coll::Barrier, self.rank, self.size, e));
        Call::plain(what, args, false)
    }

    /// MPI_Barrier.
    pub fn barrier(&self) -> Result<()> {
        self.blocking(self.barrier_call("barrier"))
    }

    /// MPI_Ibarrier.
    pub fn ibarrier<'s>(&self, s: &'s Scope<'s, '_>) -> Result<Request<'s>> {
        self.started(self.barrier_call("ibarrier"), s)
    }

    /// MPI_Barrier_init.
    pub fn barrier_init<'s>(&self, s: &'s Scope<'s, '_>) -> Result<Request<'s>> {
        self.inactive(self.barrier_call("barrier_init"), s)
    }

    // ---- bcast --------------------------------------------------------------------------

    fn bcast_call<T: Equivalence>(&self, what: &'static str, buf: &mut [T], root: i32) -> Call {
        let args = (|| {
            check_root(what, root, self.size)?;
            let mut a = Args::new(Coll::Bcast, self.rank, self.size, Elem::of::<T>()?);
            a.root = root;
            a.count = buf.len();
            a.bytes = std::mem::size_of_val(buf);
            a.recv = Lent::of_elems_mut(buf);
            Ok(a)
        })();
        Call::plain(what, args, false)
    }

    /// MPI_Bcast: `buf` of `root` to every rank's `buf` (of the same length everywhere).
    pub fn bcast<T: Equivalence>(&self, buf: &mut [T], root: i32) -> Result<()> {
        self.blocking(self.bcast_call("bcast", buf, root))
    }

    /// MPI_Ibcast.
    pub fn ibcast<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut [T],
        root: i32,
    ) -> Result<Request<'s>> {
        self.started(self.bcast_call("ibcast", buf, root), s)
    }

    /// MPI_Bcast_init. The root changes the data between starts through
    /// [`Request::buffer_mut`], and the others read what arrived the same way.
    pub fn bcast_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut [T],
        root: i32,
    ) -> Result<Request<'s>> {
        self.inactive(self.bcast_call("bcast_init", buf, root), s)
    }

    // ---- reduce, allreduce --------------------------------------------------------------

    /// The arguments of a reduction of `count` elements everywhere (reduce, allreduce, scans).
    pub(crate) fn reduction_call<'a, T: Equivalence>(
        &self,
        what: &'static str,
        coll: Coll,
        send: Src<'a, T>,
        recv: &mut [T],
        op: &Op,
        root: Option<i32>,
    ) -> Call {
        let at_root = root.is_none_or(|r| r == self.rank);
        let mut writable = false;
        let args = (|| {
            if let Some(r) = root {
                check_root(what, r, self.size)?;
            }
            let count = match send.len() {
                Some(n) => n,
                None if at_root => recv.len(),
                None => {
                    return Err(crate::Error::new(
                        crate::ErrorClass::Buffer,
                        format!("{what}: MPI_IN_PLACE is allowed only at the root"),
                    ))
                }
            };
            if at_root {
                check_len(what, "the receive buffer", recv.len(), count)?;
            }
            let reducer = super::reducer::<T>(op)?;
            let mut a = Args::new(coll, self.rank, self.size, Elem::of::<T>()?);
            a.root = root.unwrap_or(0);
            a.count = count;
            a.bytes = count * std::mem::size_of::<T>();
            a.commutative = op.is_commutative();
            let (sb, w) = send.lend();
            writable = w;
            a.send = sb;
            a.recv = if at_root {
                Lent::of_elems_mut(&mut recv[..count])
            } else {
                Lent::EMPTY
            };
            Ok((a, reducer))
        })();
        Call::reduction(what, args, writable)
    }

    /// MPI_Reduce: combine every rank's `send` with `op` into `recv` at `root` (`recv` may be
    /// empty elsewhere). `send` may be [`IN_PLACE`] at the root.
    pub fn reduce<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
        op: &Op,
        root: i32,
    ) -> Result<()> {
        self.blocking(self.reduction_call(
            "reduce",
            Coll::Reduce,
            send.into(),
            recv,
            op,
            Some(root),
        ))
    }

    /// MPI_Ireduce.
    pub fn ireduce<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        op: &Op,
        root: i32,
    ) -> Result<Request<'s>> {
        self.started(
            self.reduction_call("ireduce", Coll::Reduce, send.into(), recv, op, Some(root)),
            s,
        )
    }

    /// MPI_Reduce_init.
    pub fn reduce_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        op: &Op,
        root: i32,
    ) -> Result<Request<'s>> {
        self.inactive(
            self.reduction_call(
                "reduce_init",
                Coll::Reduce,
                send.into(),
                recv,
                op,
                Some(root),
            ),
            s,
        )
    }

    /// MPI_Allreduce: combine every rank's `send` with `op` into every rank's `recv`.
    pub fn allreduce<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
        op: &Op,
    ) -> Result<()> {
        self.blocking(self.reduction_call(
            "allreduce",
            Coll::Allreduce,
            send.into(),
            recv,
            op,
            None,
        ))
    }

    /// MPI_Iallreduce.
    pub fn iallreduce<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        op: &Op,
    ) -> Result<Request<'s>> {
        self.started(
            self.reduction_call("iallreduce", Coll::Allreduce, send.into(), recv, op, None),
            s,
        )
    }

    /// MPI_Allreduce_init.
    pub fn allreduce_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        op: &Op,
    ) -> Result<Request<'s>> {
        self.inactive(
            self.reduction_call(
                "allreduce_init",
                Coll::Allreduce,
                send.into(),
                recv,
                op,
                None,
            ),
            s,
        )
    }
}
