//! The collective calls on [`Comm`]: how a call becomes [`Args`] and the views of its
//! buffers ([`Call`]), and the one driver per mode (blocking, nonblocking, persistent) that
//! lends the buffers and runs the chosen algorithm's steps.
#![forbid(unsafe_code)]

use super::buffers::{place, Dst, Side, Src, Units};
use super::op::{Op, Reducer};
use super::registry::{self, Algorithm, Forced};
use super::sched::{notify_error, Block, Bound, Buf, Now, Persistent, Record, Schedule, Wire};
use super::{check_len, check_root, Args, Coll, Elem, Stage};
use crate::comm::agree::coll_tag;
use crate::comm::Comm;
use crate::error::Result;
use crate::error::{Error, ErrorClass};
use crate::request::steps::{Run, SharedRun, Steps};
use crate::request::{Request, Scope};
use crate::sys::lend::{lending, Lending, Loan, Settle, View};
use std::rc::Rc;

/// MPI_IN_PLACE: see [`Src`].
#[derive(Clone, Copy, Debug)]
pub struct InPlace;

/// MPI_IN_PLACE, where a collective's send argument may take it: the data is taken from (and
/// the result left in) the receive buffer.
pub const IN_PLACE: InPlace = InPlace;

/// The program's buffers of a collective call, as views, until the call lends them for its
/// mode (for the call itself when blocking, for the scope otherwise).
#[derive(Debug, Default)]
pub(crate) struct CallBufs<'b> {
    send: Option<View<'b>>,
    /// Whether the send buffer was given as `&mut` (a persistent collective hands it back).
    send_writable: bool,
    recv: Option<View<'b>>,
}

impl<'b> CallBufs<'b> {
    /// The receive buffer, whole (its bytes, padding included), and its elements.
    #[inline(always)]
    pub(crate) fn recv(&mut self, r: &mut Side<'b>) -> Block {
        let bytes = r.view.len();
        self.recv = Some(r.view.take());
        Block::whole(Buf::Recv, bytes)
    }

    /// The send buffer, whole, and its elements (`None` in place).
    #[inline(always)]
    pub(crate) fn send(&mut self, s: &mut Side<'b>) -> Block {
        let bytes = s.view.len();
        self.send_writable = s.view.is_writable();
        self.send = Some(s.view.take());
        Block::whole(Buf::Send, bytes)
    }

    /// Lend the buffers for region `l`: `(send, recv)`.
    fn lend<S: Settle>(self, l: &Lending<'b, '_, S>) -> (Option<Loan>, Option<Loan>) {
        (
            self.send.map(|v| Loan::new(v, l)),
            self.recv.map(|v| Loan::new(v, l)),
        )
    }

    /// Lend the buffers to a persistent request: the receive buffer, and the send buffer if
    /// given as `&mut`, to the request alone, which hands them back between starts.
    fn lend_persistent(self, s: &'b Scope<'b, '_>) -> (Option<Loan>, Option<Loan>) {
        let w = self.send_writable;
        let (send, recv) = self.lend(s);
        (
            send.map(|l| if w { l.exclusive() } else { l }),
            recv.map(Loan::exclusive),
        )
    }
}

impl Args {
    /// Count in the elements `e` (both buffers', until a send buffer says otherwise).
    #[inline(always)]
    pub(crate) fn count_in(&mut self, e: &Elem) {
        if !e.same_plain(&self.elem) {
            self.elem = e.clone();
            self.selem = e.clone();
        }
    }

    /// Lend the send buffer (`None`: in place, or not significant) and take its elements.
    #[inline(always)]
    pub(crate) fn lend_send<'b>(&mut self, calls: &mut CallBufs<'b>, s: Option<&mut Side<'b>>) {
        if let Some(s) = s {
            self.send = Some(calls.send(s));
            // Assigned only when they differ (the common case moves nothing).
            if !s.elem.same_plain(&self.selem) {
                self.selem = s.elem.clone();
            }
        }
    }

    /// Lend the first `n` elements of the receive buffer and take its elements.
    #[inline(always)]
    pub(crate) fn lend_recv_first<'b>(
        &mut self,
        calls: &mut CallBufs<'b>,
        r: &mut Side<'b>,
        n: usize,
    ) {
        r.prefix(n);
        self.lend_recv(calls, r);
    }

    /// Lend the receive buffer and take its elements (and the send buffer's, in place).
    #[inline(always)]
    pub(crate) fn lend_recv<'b>(&mut self, calls: &mut CallBufs<'b>, r: &mut Side<'b>) {
        self.recv_len = r.len();
        self.recv = calls.recv(r);
        if !r.elem.same_plain(&self.elem) {
            self.elem = r.elem.clone();
        }
        if self.send.is_none() && !r.elem.same_plain(&self.selem) {
            self.selem = r.elem.clone();
        }
    }

    /// A reduction whose buffers count in bytes runs on packed copies in elements of
    /// `reducer`'s type (see `algo::run`): every count must be a whole number of them.
    #[inline(always)]
    pub(crate) fn stage(&mut self, what: &str, units: Units, reducer: &Reducer) -> Result<()> {
        if units == Units::Elements {
            return Ok(());
        }
        // The scratch holds elements of the reduction's type as the kernel sees them: with
        // their padding for a type that has some, moved through its own datatype.
        let (unit, elem) = match reducer.kernel.padded {
            None => (reducer.elem, Elem::plain(reducer.elem, self.elem.sig)),
            Some(own) => {
                let dt = own()?;
                (dt.size(), Elem::padded(reducer.elem, dt, self.elem.sig))
            }
        };
        let send_len = self.send.as_ref().map_or(0, |_| self.staged_send_len());
        let recv_len = self.recv_len;
        let lists = [&self.rcounts, &self.rdispls, &self.scounts, &self.sdispls];
        let whole = |n: usize| n.is_multiple_of(unit);
        let ok = unit > 0
            && [self.count, send_len, recv_len].into_iter().all(whole)
            && lists
                .into_iter()
                .flatten()
                .all(|v| v.iter().all(|&n| whole(n)));
        if !ok {
            return Err(Error::new(
                ErrorClass::Type,
                format!(
                    "{what}: the buffers' data is not a whole number of the reduction's elements ({}, {unit} bytes each)",
                    (reducer.kernel.name)()
                ),
            ));
        }
        self.stage = Some(Rc::new(Stage {
            unit,
            elem,
            send_len,
            recv_len,
        }));
        Ok(())
    }

    /// Bytes of the send buffer a staged reduction copies: as many as the call reads.
    fn staged_send_len(&self) -> usize {
        match (&self.scounts, &self.sdispls) {
            (Some(c), Some(d)) => c
                .iter()
                .zip(d.iter())
                .map(|(c, d)| c + d)
                .max()
                .unwrap_or(0),
            _ => match self.coll {
                Coll::ReduceScatter | Coll::ReduceScatterBlock => match &self.rcounts {
                    Some(c) => c.iter().sum(),
                    None => self.count * self.size as usize,
                },
                _ => self.count,
            },
        }
    }
}

/// The reducer of a reduction's buffers: the send buffer's (the receive buffer's in place),
/// the other's agreeing on the element size.
#[inline(always)]
pub(crate) fn reducer_of(
    what: &str,
    send: Option<&Side>,
    recv: Option<&Side>,
    op: &Op,
) -> Result<Reducer> {
    let mut sides = send.into_iter().chain(recv);
    let Some(first) = sides.next() else {
        return Err(Error::new(
            ErrorClass::Buffer,
            format!("{what}: no buffer to reduce"),
        ));
    };
    let r = first.reducer(op)?;
    if let Some(other) = sides.next().filter(|o| !o.alike(first)) {
        let o = other.reducer(op)?;
        if !std::ptr::eq(o.kernel, r.kernel) && (o.kernel.name)() != (r.kernel.name)() {
            return Err(Error::new(
                ErrorClass::Type,
                format!(
                    "{what}: the send buffer reduces {} and the receive buffer {}; a reduction takes one datatype",
                    (r.kernel.name)(),
                    (o.kernel.name)()
                ),
            ));
        }
    }
    Ok(r)
}

/// The elements `Args` start with: the receive buffer's, else the send buffer's.
#[inline(always)]
pub(crate) fn first_elem(send: &Option<Side>, recv: &Option<Side>) -> Elem {
    recv.as_ref().or(send.as_ref()).map_or_else(
        || Elem::plain(1, crate::datatype::Sig::MIXED),
        |p| p.elem.clone(),
    )
}

/// What identifies a blocking call as a repeat of the previous one (see
/// `Comm::blocking_repeat`): buffers, counts, root, operation, element type. The kept
/// steps are dropped when the communicator's hints change (they may force another
/// algorithm).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Repeat {
    send: Option<(u64, usize)>,
    recv: Option<(u64, usize)>,
    count: usize,
    root: i32,
    op: Option<(usize, usize)>,
    elem: (usize, crate::datatype::Sig),
    selem: (usize, crate::datatype::Sig),
}

impl Repeat {
    /// Regular collectives of gapless element types only: the v, w and neighbour forms
    /// carry arrays, and a padded type's blocks carry its layout.
    fn may_cache(a: &Args) -> bool {
        a.remote.is_none()
            && a.elem.is_gapless()
            && a.selem.is_gapless()
            && a.stage.is_none()
            && a.rcounts.is_none()
            && a.scounts.is_none()
            && a.wblocks.is_none()
            && a.sources.is_none()
            && a.dests.is_none()
    }

    fn key(a: &Args, wire: &Wire, send: &Option<Loan>, recv: &Option<Loan>) -> Repeat {
        Repeat {
            send: send.as_ref().map(|l| (l.addr(), l.len())),
            recv: recv.as_ref().map(|l| (l.addr(), l.len())),
            count: a.count,
            root: a.root,
            op: wire.reducer.as_ref().map(|r| r.identity()),
            elem: (a.elem.size, a.elem.sig),
            selem: (a.selem.size, a.selem.sig),
        }
    }
}

/// Per collective kind on a communicator: the last blocking call seen, and the steps kept
/// for the one that repeated; and the run of the last nonblocking call (see
/// `Comm::started_repeat`).
#[derive(Default)]
pub(crate) struct RepeatSlot {
    seen: Option<Repeat>,
    kept: Option<(Repeat, &'static str, Box<Schedule>)>,
    started: Option<(Repeat, &'static str, SharedRun<Schedule>)>,
    /// The nonblocking call's run through the collective region, kept to start again
    /// (`shm_nonblocking.rs`).
    pub(super) in_region: Option<SharedRun<super::shm_nonblocking::ShmCall>>,
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

/// A collective call, before it runs: its arguments (or the error they gave), for
/// reductions the reducer, and the program's buffers.
pub(crate) struct Call<'b> {
    pub(crate) what: &'static str,
    pub(crate) args: Result<Args>,
    pub(crate) reducer: Option<Reducer>,
    pub(crate) bufs: CallBufs<'b>,
    /// A collective MPI defines on intracommunicators only (scan, exscan, the
    /// neighbourhood ones): on an intercommunicator it is MPI_ERR_COMM on every rank,
    /// whatever its other arguments, before it takes a number.
    pub(crate) intra_only: bool,
}

impl<'b> Call<'b> {
    /// A call whose arguments `fill` completes in place (from those of a call of `coll` by
    /// `rank` of a communicator of `size`, counting in `elem`), lending its buffers and for a reduction setting its
    /// reducer; on an error, the call of that error. Built in place rather than returned
    /// and moved, as these are the hot path of every small collective.
    #[inline(always)]
    pub(crate) fn build(
        what: &'static str,
        (coll, rank, size): (Coll, i32, i32),
        elem: Elem,
        fill: impl FnOnce(&mut Args, &mut CallBufs<'b>, &mut Option<Reducer>) -> Result<()>,
    ) -> Call<'b> {
        let mut call = Call {
            what,
            args: Ok(Args::new(coll, rank, size, elem)),
            reducer: None,
            bufs: CallBufs::default(),
            intra_only: false,
        };
        if let Ok(a) = &mut call.args {
            if let Err(e) = fill(a, &mut call.bufs, &mut call.reducer) {
                call.args = Err(e);
                call.reducer = None;
            }
        }
        call
    }

    /// A call without an operation, from its checked arguments.
    pub(crate) fn plain(what: &'static str, args: Result<Args>, bufs: CallBufs<'b>) -> Call<'b> {
        Call {
            what,
            args,
            reducer: None,
            bufs,
            intra_only: false,
        }
    }

    /// The same call, of a collective defined on intracommunicators only.
    pub(crate) fn intra_only(mut self) -> Call<'b> {
        self.intra_only = true;
        self
    }

    /// A reduction, from its checked arguments and reducer (`None` on a rank that takes no
    /// part: an intercommunicator reduce's rank beside the root).
    pub(crate) fn reduction(
        what: &'static str,
        r: Result<(Args, Option<Reducer>)>,
        bufs: CallBufs<'b>,
    ) -> Call<'b> {
        let (args, reducer) = match r {
            Ok((a, r)) => (Ok(a), r),
            Err(e) => (Err(e), None),
        };
        Call {
            what,
            args,
            reducer,
            bufs,
            intra_only: false,
        }
    }
}

/// The three entry points of a collective (blocking, nonblocking `i*`, persistent `*_init`),
/// from one description: the blocking one's doc, the MPI name (`"Gather"`, `"gather"`), the
/// generic parameters and arguments (buffers borrowed for `'b`), and the method that turns
/// them into a [`Call`].
macro_rules! collective {
    (
        $(#[$doc:meta])*
        $blocking:ident, $nonblocking:ident, $persistent:ident ($mpi:literal, $lower:literal)
        <$($g:ident: $b:path),*> ($($arg:ident: $t:ty),* $(,)?) => $build:ident($($e:expr),* $(,)?)
    ) => {
        $(#[$doc])*
        // `'b` names the buffers' lifetime in the argument types; barrier has none.
        #[allow(clippy::extra_unused_lifetimes)]
        pub fn $blocking<'b, $($g: $b),*>(&self, $($arg: $t),*) -> crate::error::Result<()> {
            self.blocking(self.$build(stringify!($blocking), $($e),*))
        }

        #[doc = concat!("MPI_I", $lower, ": [`", stringify!($blocking), "`](Self::", stringify!($blocking),
            ") started now and completed by wait or test; the buffers are borrowed for the scope `s`.")]
        #[allow(clippy::too_many_arguments)] // MPI's own argument lists
        pub fn $nonblocking<'b, $($g: $b),*>(
            &self,
            s: &'b crate::request::Scope<'b, '_>,
            $($arg: $t),*
        ) -> crate::error::Result<crate::request::Request<'b>> {
            self.started(self.$build(stringify!($nonblocking), $($e),*), s)
        }

        #[doc = concat!("MPI_", $mpi, "_init: a persistent [`", stringify!($blocking), "`](Self::",
            stringify!($blocking), "), started with [`Request::start`](crate::request::Request::start); the ",
            "algorithm and its steps are chosen here, and each start replays them. Between starts ",
            "[`Request::buffer_mut`](crate::request::Request::buffer_mut) (and ",
            "[`Request::send_buffer_mut`](crate::request::Request::send_buffer_mut) for a send buffer lent ",
            "as `&mut`) hands the buffers back.")]
        #[allow(clippy::too_many_arguments)] // MPI's own argument lists
        pub fn $persistent<'b, $($g: $b),*>(
            &self,
            s: &'b crate::request::Scope<'b, '_>,
            $($arg: $t),*
        ) -> crate::error::Result<crate::request::Request<'b>> {
            self.inactive(self.$build(stringify!($persistent), $($e),*), s)
        }
    };
}
pub(crate) use collective;

impl Comm {
    /// The algorithms forced for this communicator.
    /// Whether reductions on this communicator may leave the canonical association (seed
    /// 002's NO_REDUCE_CONSTRAINT).
    #[inline(always)]
    fn unordered(&self) -> bool {
        self.assertions()
            .contains(crate::assertions::Assertions::NO_REDUCE_CONSTRAINT)
    }

    fn forced(&self) -> Rc<Forced> {
        let mut f = self.shared.coll_forced.borrow_mut();
        f.get_or_insert_with(|| Rc::new(Forced::new(&self.shared.info.borrow())))
            .clone()
    }

    /// The checks every collective makes, and the call's wire (its number on this
    /// communicator: every member takes one, whatever happens next).
    ///
    /// On an intercommunicator only the collectives MPI defines there run (their arguments
    /// say so: `Args::remote`); the others are MPI_ERR_COMM. Their steps address the remote
    /// group only, and so do error notices.
    ///
    /// Whether a call takes a number must not depend on this rank's other arguments (the
    /// ranks' numbers would drift apart): an intracommunicator-only collective on an
    /// intercommunicator fails before it, every other call takes one.
    ///
    /// A blocking call makes the communicator's collective region first if it may have one
    /// (`shm.rs`); every call on a communicator with one takes the next number of its lane,
    /// which becomes the call's run if it runs in shared memory ([`settle`]).
    #[inline(always)]
    fn begin(
        &self,
        what: &'static str,
        reducer: Option<Reducer>,
        intra_only: bool,
        blocking: bool,
    ) -> Result<Wire> {
        self.check_live()?;
        let inter = self.is_inter();
        if intra_only {
            self.check_intra(what)?;
        }
        if blocking && !inter {
            self.make_coll_shm();
        }
        let seq = self.next_seq();
        Ok(Wire {
            ctx: self.ctx.internal().raw(),
            tag: coll_tag(seq, 0),
            map: self.map.clone(),
            reducer,
            what,
            notice_tag: coll_tag(seq, 1),
            me: if inter { -1 } else { self.rank },
            size: self.peers(),
            shm: None,
            ticket: if inter {
                None
            } else {
                self.coll_shm().map(|s| {
                    let seq = s.ticket();
                    (s, seq)
                })
            },
        })
    }

    /// A call's arguments and algorithm; on an error this rank takes no part, but says so:
    /// the others' waits end with the error instead of waiting for it.
    fn chosen(&self, args: Result<Args>, wire: &Wire) -> Result<(Args, &'static Algorithm)> {
        let args = args.map(|mut a| {
            a.unordered = self.unordered();
            a
        });
        match args.and_then(|a| registry::choose(&a, &self.forced()).map(|alg| (a, alg))) {
            Ok(x) => Ok(x),
            Err(err) => {
                notify_error(&mut self.eng.borrow_mut(), wire, &err);
                Err(err)
            }
        }
    }

    /// A blocking collective: its buffers lent for the call, its steps run as they come.
    pub(super) fn blocking(&self, mut call: Call<'_>) -> Result<()> {
        let what = call.what;
        let aside = crate::p2p::wait::aside();
        if let Some(pause) = aside {
            // A call that runs straight through the collective region does so here too
            // (its waits pausing), as on the ranks that are not set aside.
            let in_shm = !self.is_inter()
                && self.coll_shm().is_some()
                && matches!(&call.args, Ok(a) if super::shm_blocking::takes_on_region(a, || self.forced()));
            if !in_shm {
                let r = self.blocking_aside(call, pause);
                return self.ret(what, r);
            }
        }
        let r = (|| {
            let mut wire = self.begin(what, call.reducer, call.intra_only, true)?;
            if let Ok(a) = &mut call.args {
                a.unordered = self.unordered();
                a.shm = wire.ticket.is_some();
            }
            let bufs = call.bufs;
            if let Ok(a) = &call.args {
                if super::shm_blocking::takes(a, || self.forced()) {
                    return lending((), |l| {
                        let (send, recv) = bufs.lend(l);
                        self.shm_blocking(a, &mut wire, send, recv, aside)
                    });
                }
                if Repeat::may_cache(a) {
                    return lending((), |l| {
                        let (send, recv) = bufs.lend(l);
                        self.blocking_repeat(a, wire, send, recv)
                    });
                }
            }
            let (args, alg) = self.chosen(call.args, &wire)?;
            settle(&mut wire, alg.name);
            lending((), |l| {
                let (send, recv) = bufs.lend(l);
                self.run_now(&args, alg, &wire, send, recv)
            })
        })();
        self.ret(what, r)
    }

    /// A blocking collective under [`waits_aside`](crate::p2p::wait::waits_aside) (the C
    /// ABI under MPI_THREAD_MULTIPLE, in a call that makes one inside: window creation and
    /// free, say): its nonblocking form, tested with the rank let go between polls (`pause`),
    /// so that the process's other threads go on meanwhile, a collective of their own on
    /// another communicator included (which the other process may have entered first).
    fn blocking_aside(&self, call: Call<'_>, pause: crate::p2p::wait::Pause) -> Result<()> {
        crate::request::scope(|s| {
            let mut req = self.start_steps(call, s)?;
            while req.test_quiet()?.is_none() {
                pause()?;
            }
            Ok(())
        })
    }

    /// A nonblocking collective: its buffers lent for the scope, its steps recorded and
    /// advanced by test and wait.
    pub(super) fn started<'s>(&self, call: Call<'s>, s: &'s Scope<'s, '_>) -> Result<Request<'s>> {
        let what = call.what;
        let r = self.start_steps(call, s);
        self.ret(what, r)
    }

    /// [`started`](Self::started) with its error not yet reported.
    fn start_steps<'s>(&self, mut call: Call<'s>, s: &'s Scope<'s, '_>) -> Result<Request<'s>> {
        let mut wire = self.begin(call.what, call.reducer, call.intra_only, false)?;
        if let Ok(a) = &mut call.args {
            a.unordered = self.unordered();
            a.shm = wire.ticket.is_some();
        }
        if let Ok(a) = &call.args {
            // The blocking call's choice (`shm_nonblocking.rs`).
            if super::shm_blocking::takes(a, || self.forced()) {
                let (send, recv) = call.bufs.lend(s);
                return self.started_in_region(a, wire, send, recv, self.origin());
            }
            if Repeat::may_cache(a) {
                let (send, recv) = call.bufs.lend(s);
                return self.started_repeat(a, wire, send, recv, s);
            }
        }
        let (args, alg) = self.chosen(call.args, &wire)?;
        settle(&mut wire, alg.name);
        let mut rec = Record::new(wire);
        super::algo::run(alg, &args, &mut rec);
        let mut sched = rec.finish(s.inner().id());
        let (send, recv) = call.bufs.lend(s);
        sched.lend(send, recv);
        s.inner().note_engine(&self.eng);
        Ok(Request::steps(&self.eng, self.origin(), sched))
    }

    /// A nonblocking collective that may repeat an earlier one of its kind on this
    /// communicator (same buffers, counts, root, operation and element type): the run of
    /// the last such call is kept, and once its request is gone (completed and dropped) the
    /// next call with the same arguments starts it again, under its own tags and in its own
    /// scope, instead of choosing an algorithm and recording its steps anew (nor allocating
    /// them). A call that finds the kept run still in use, or different arguments, records
    /// its own, which is kept in turn.
    fn started_repeat<'s>(
        &self,
        args: &Args,
        mut wire: Wire,
        send: Option<Loan>,
        recv: Option<Loan>,
        s: &'s Scope<'s, '_>,
    ) -> Result<Request<'s>> {
        let key = Repeat::key(args, &wire, &send, &recv);
        let mut cache = self.shared.coll_repeat.borrow_mut();
        let slot = &mut cache[args.coll.index()].started;
        let idle = match slot {
            Some((k, name, run))
                if *k == key && Rc::strong_count(run) == 1 && run.borrow().steps().at_rest() =>
            {
                registry::note_last(name);
                Some((*name, run.clone()))
            }
            _ => None,
        };
        let run = match idle {
            Some((name, run)) => {
                let mut r = run.borrow_mut();
                let sched = r.steps_mut();
                settle(&mut wire, name);
                sched.reuse_for(&wire);
                sched.set_scope(s.inner().id());
                sched.lend(send, recv);
                drop(r);
                run
            }
            None => {
                let alg = match registry::choose(args, &self.forced()) {
                    Ok(a) => a,
                    Err(err) => {
                        drop(cache);
                        notify_error(&mut self.eng.borrow_mut(), &wire, &err);
                        return Err(err);
                    }
                };
                registry::note_last(alg.name);
                settle(&mut wire, alg.name);
                let mut rec = Record::new(wire);
                super::algo::run(alg, args, &mut rec);
                let mut sched = rec.finish(s.inner().id());
                sched.lend(send, recv);
                let run = Run::new(sched);
                *slot = Some((key, alg.name, run.clone()));
                run
            }
        };
        drop(cache);
        s.inner().note_engine(&self.eng);
        Ok(Request::steps_run(&self.eng, self.origin(), run))
    }

    /// A persistent collective: its buffers lent to the request for the scope, its algorithm
    /// chosen (or tuned) and its steps recorded now, replayed at each start.
    pub(super) fn inactive<'s>(&self, call: Call<'s>, s: &'s Scope<'s, '_>) -> Result<Request<'s>> {
        let what = call.what;
        let mut call = call;
        let r = (|| {
            let mut wire = self.begin(what, call.reducer, call.intra_only, false)?;
            // Every rank takes a lane number at every persistent init (whatever happens
            // next), so that all give the same collective the same lane.
            let shm = self.coll_shm();
            let lane = shm.as_ref().and_then(|s| s.take_lane());
            if let Ok(a) = &mut call.args {
                a.shm = lane.is_some();
            }
            let (args, alg) = self.chosen(call.args, &wire)?;
            // Its runs are on its own lane, numbered by its starts, not on the
            // communicator's.
            settle(&mut wire, "");
            let (send, recv) = call.bufs.lend_persistent(s);
            let recv = recv.unwrap_or(Loan::EMPTY);
            let alg = if self.init_effort_tune() && Tune::safe(&args) {
                let best = self.tune(&args, &wire, alg, &send, &recv)?;
                registry::note_last(best.name);
                best
            } else {
                alg
            };
            let lane = match (alg.name == SHM, shm, lane) {
                (true, Some(shm), Some(lane)) => {
                    if let Err(e) = shm.back_lane(lane) {
                        // The others learn it from the notice when they start it.
                        let err = Error::new(
                            ErrorClass::NoMem,
                            format!("{what}: cannot back the shared memory of a persistent collective: {e}"),
                        );
                        notify_error(&mut self.eng.borrow_mut(), &wire, &err);
                        return Err(err);
                    }
                    Some((shm, lane))
                }
                _ => None,
            };
            let mut rec = Record::new(wire);
            super::algo::run(alg, &args, &mut rec);
            let sched = rec.finish(s.inner().id());
            s.inner().note_engine(&self.eng);
            Ok(Request::ext(
                &self.eng,
                self.origin(),
                Box::new(Persistent::new(sched, send, recv, lane)),
            ))
        })();
        self.ret(what, r)
    }

    /// Run `alg`'s steps for `args` as they come (a blocking call, nothing recorded).
    fn run_now(
        &self,
        args: &Args,
        alg: &Algorithm,
        wire: &Wire,
        send: Option<Loan>,
        recv: Option<Loan>,
    ) -> Result<()> {
        let mut e = self.eng.borrow_mut();
        let bound = Bound {
            send,
            recv,
            scratch: Vec::new(),
            shm: None,
        };
        let mut now = Now::new(&mut e, wire, bound);
        super::algo::run(alg, args, &mut now);
        now.finish()
    }

    /// A blocking call that may repeat the previous one of its kind on this communicator:
    /// when it repeats it for the second time in a row (same algorithm, buffers, counts, root
    /// and operation), its steps are recorded and kept, and from then on each repeat replays
    /// them, with this call's buffers, as a persistent collective's start does, under the new
    /// call's tags. Whether a call is a repeat is local (buffer addresses differ between
    /// ranks), which is harmless: every call takes its sequence number either way, and
    /// replayed steps are the steps.
    fn blocking_repeat(
        &self,
        args: &Args,
        mut wire: Wire,
        send: Option<Loan>,
        recv: Option<Loan>,
    ) -> Result<()> {
        let key = Repeat::key(args, &wire, &send, &recv);
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
        settle(
            &mut wire,
            match (alg, &slot.kept) {
                (Some(a), _) => a.name,
                (None, Some((_, name, _))) => name,
                (None, None) => "",
            },
        );
        if let (Some(alg), true) = (alg, slot.seen.as_ref() != Some(&key)) {
            slot.seen = Some(key);
            drop(cache);
            return self.run_now(args, alg, &wire, send, recv);
        }
        if let Some(alg) = alg {
            let mut rec = Record::new(wire.clone());
            super::algo::run(alg, args, &mut rec);
            slot.kept = Some((key, alg.name, Box::new(rec.finish(0))));
        }
        let (_, name, sched) = slot.kept.as_mut().expect("kept above");
        registry::note_last(name);
        sched.reuse_for(&wire);
        sched.lend(send, recv);
        let mut e = self.eng.borrow_mut();
        let r = match sched.advance(&mut e) {
            Some(r) => r,
            None => {
                let blocked = sched.blocked();
                e.wait_for(blocked, |e| sched.advance(e)).and_then(|r| r)
            }
        };
        sched.unlend();
        if !sched.at_rest() {
            // The wait failed (the job is ending): withdraw what is in flight and forget it.
            sched.abandon(&mut e);
            slot.kept = None;
        }
        r.map(|_| ())
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
        send: &Option<Loan>,
        recv: &Loan,
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
                shm: None,
                ticket: None,
                ..wire.clone()
            };
            let mut rec = Record::new(w);
            super::algo::run(alg, args, &mut rec);
            let mut sched = rec.finish(0);
            let shm = if alg.name == SHM {
                self.coll_shm()
            } else {
                None
            };
            let t0 = std::time::Instant::now();
            for _ in 0..Tune::RUNS {
                sched.rewind();
                // A candidate in shared memory runs on the communicator's lane.
                sched.set_shm(shm.as_ref().map(|s| s.open(0)));
                sched.lend(send.clone(), Some(recv.clone()));
                let mut e = self.eng.borrow_mut();
                let blocked = sched.blocked();
                let r = e.wait_for(blocked, |e| sched.advance(e));
                sched.unlend();
                r??;
            }
            times.push(t0.elapsed().as_secs_f64());
        }
        self.allreduce(IN_PLACE, &mut times, &Op::MAX)?;
        let best = (0..times.len())
            .min_by(|&a, &b| times[a].total_cmp(&times[b]))
            .expect("two candidates at least");
        Ok(candidates[best])
    }

    // ---- barrier ------------------------------------------------------------------------

    fn barrier_call(&self, what: &'static str) -> Call<'static> {
        if self.is_inter() {
            return self.inter_barrier_call(what);
        }
        let args = Elem::of::<u8>().map(|e| Args::new(Coll::Barrier, self.rank, self.size, e));
        Call::plain(what, args, CallBufs::default())
    }

    collective! {
        /// MPI_Barrier: returns once every rank of the communicator has entered it.
        barrier, ibarrier, barrier_init ("Barrier", "barrier") <> () => barrier_call()
    }

    // ---- bcast --------------------------------------------------------------------------

    fn bcast_call<'b>(&self, what: &'static str, mut buf: Dst<'b>, root: i32) -> Call<'b> {
        if self.is_inter() {
            return self.inter_bcast_call(what, buf, root);
        }
        let me = (Coll::Bcast, self.rank, self.size);
        Call::build(what, me, buf.0.elem.clone(), |a, calls, _| {
            self.bcast_args(what, &mut buf.0, root, a, calls)
        })
    }

    /// [`bcast_call`](Self::bcast_call)'s arguments, filled in place (see [`Call::build`]).
    #[inline(always)]
    fn bcast_args<'b>(
        &self,
        what: &'static str,
        buf: &mut Side<'b>,
        root: i32,
        a: &mut Args,
        calls: &mut CallBufs<'b>,
    ) -> Result<()> {
        check_root(what, root, self.size)?;
        // In bytes everywhere, so that every rank cuts the same pieces (see `Args::grain`).
        buf.place(Units::Bytes)?;
        a.count_in(&buf.elem);
        a.root = root;
        a.count = buf.len();
        a.bytes = a.count * buf.elem.packed_size();
        a.lend_recv(calls, buf);
        Ok(())
    }

    collective! {
        /// MPI_Bcast: `buf` of `root` to every rank's `buf` (of the same length everywhere).
        /// Persistent: the root changes the data between starts through
        /// [`Request::buffer_mut`], and the others read what arrived the same way.
        bcast, ibcast, bcast_init ("Bcast", "bcast")
            <> (buf: impl Into<Dst<'b>>, root: i32) => bcast_call(buf.into(), root)
    }

    // ---- reduce, allreduce --------------------------------------------------------------

    /// The arguments of a reduction of `count` elements everywhere (reduce, allreduce, scans).
    pub(crate) fn reduction_call<'b>(
        &self,
        what: &'static str,
        coll: Coll,
        send: Src<'b>,
        recv: Dst<'b>,
        op: &Op,
        root: Option<i32>,
    ) -> Call<'b> {
        if self.is_inter() && matches!(coll, Coll::Reduce | Coll::Allreduce) {
            return self.inter_reduction_call(what, coll, send, recv, op, root);
        }
        let (mut send, mut recv) = (send.0, recv.0);
        let me = (coll, self.rank, self.size);
        let call = Call::build(what, me, recv.elem.clone(), |a, calls, reducer| {
            *reducer =
                Some(self.reduction_args(what, send.as_mut(), &mut recv, op, root, a, calls)?);
            Ok(())
        });
        if matches!(coll, Coll::Scan | Coll::Exscan) {
            call.intra_only()
        } else {
            call
        }
    }

    /// [`reduction_call`](Self::reduction_call)'s arguments, filled in place (see
    /// [`Call::build`]); the reducer.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn reduction_args<'b>(
        &self,
        what: &'static str,
        mut send: Option<&mut Side<'b>>,
        recv: &mut Side<'b>,
        op: &Op,
        root: Option<i32>,
        a: &mut Args,
        calls: &mut CallBufs<'b>,
    ) -> Result<Reducer> {
        let at_root = root.is_none_or(|r| r == self.rank);
        if let Some(r) = root {
            check_root(what, r, self.size)?;
        }
        if send.is_none() && !at_root {
            return Err(crate::error::Error::new(
                crate::error::ErrorClass::Buffer,
                format!("{what}: MPI_IN_PLACE is allowed only at the root"),
            ));
        }
        // A reduce's receive buffer counts at the root only (elsewhere it may be anything).
        let units = place(
            what,
            send.as_deref_mut(),
            if at_root { Some(&mut *recv) } else { None },
        )?;
        let count = match &send {
            Some(s) => {
                if !at_root {
                    a.count_in(&s.elem);
                }
                s.len()
            }
            None => recv.len(),
        };
        if at_root {
            a.count_in(&recv.elem);
        }
        if at_root {
            check_len(what, "the receive buffer", recv.len(), count)?;
        }
        let reducer = reducer_of(what, send.as_deref(), at_root.then_some(&*recv), op)?;
        a.root = root.unwrap_or(0);
        a.count = count;
        a.bytes = count * recv.elem.packed_size();
        a.commutative = op.is_commutative();
        a.lend_send(calls, send);
        if at_root {
            a.lend_recv_first(calls, recv, count);
        }
        a.stage(what, units, &reducer)?;
        Ok(reducer)
    }

    collective! {
        /// MPI_Reduce: combine every rank's `send` with `op` into `recv` at `root` (`recv` may
        /// be empty elsewhere). `send` may be [`IN_PLACE`] at the root.
        reduce, ireduce, reduce_init ("Reduce", "reduce")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>, op: &Op, root: i32)
            => reduction_call(Coll::Reduce, send.into(), recv.into(), op, Some(root))
    }

    collective! {
        /// MPI_Allreduce: combine every rank's `send` with `op` into every rank's `recv`.
        /// `send` may be [`IN_PLACE`].
        allreduce, iallreduce, allreduce_init ("Allreduce", "allreduce")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>, op: &Op)
            => reduction_call(Coll::Allreduce, send.into(), recv.into(), op, None)
    }
}

/// The name of every algorithm that runs in the communicator's collective region.
pub(crate) const SHM: &str = "shm";

/// The call runs `alg` (by name): in shared memory, its number becomes its run of the
/// collective region; else it gives the number up (it has nothing to read there).
fn settle(wire: &mut Wire, alg: &str) {
    if let Some((shm, seq)) = wire.ticket.take() {
        if alg == SHM {
            wire.shm = Some(shm.open_ticket(seq));
        } else {
            shm.give_up(seq);
        }
    }
}
