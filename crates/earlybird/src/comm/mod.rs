//! comm — communicators. This layer now holds `MPI_COMM_WORLD` and `MPI_COMM_SELF`-like
//! handles over one endpoint; groups, dup/split and topologies come with the communicators
//! issue.
//!
//! Every method checks its arguments (rank, tag) and returns the MPI error class with a
//! message naming the bad value, through the communicator's error handler.
//!
//! # Standard section(s)
//! MPI 4.1 §3 (point-to-point communication), §6.4 (communicators), §9.3 (error handlers).
#![forbid(unsafe_code)]

mod agree;
mod create;
pub mod group;
mod intercomm;

pub use create::{PendingComm, SplitType};

use crate::datatype::{bytes, bytes_mut, Equivalence};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::shm::BlockedIn;
use crate::info::Info;
use crate::p2p::engine::{Blocked, Matched, SendMode};
use crate::p2p::matching::Pattern;
use crate::p2p::{Status, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};
use crate::request::{apply, EngineRef, ErrHandler, ErrSlot, Plan, Request, Scope};
use crate::sys::lend::{Lent, ScratchBuffer};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// A communicator: a group of ranks and a context in which their messages match.
///
/// Clones are handles on the same communicator (they share its name, info, error handler
/// and freed state). Point-to-point traffic uses context `2p` of the communicator's context
/// pair `p`; `2p + 1` carries the library's own messages (communicator creation, later
/// collectives).
///
/// An intercommunicator (see [`Comm::intercomm_create`]) has a local group, to which `rank`
/// and `size` refer, and a remote group, which point-to-point addresses.
#[derive(Clone)]
pub struct Comm {
    eng: EngineRef,
    ctx: u32,
    rank: i32,
    size: i32,
    /// Size of the group point-to-point addresses: `size`, or the remote group's size.
    peers: i32,
    errh: ErrSlot,
    /// Rank <-> endpoint translation of the group point-to-point addresses (the remote group
    /// of an intercommunicator); `None` when ranks are the job's (WORLD).
    map: Option<Rc<RankMap>>,
    shared: Rc<CommShared>,
}

/// Rank translation of a communicator whose ranks are not the job's.
#[derive(Debug)]
pub(crate) struct RankMap {
    /// Communicator rank -> endpoint.
    members: Vec<u32>,
    /// Endpoint -> communicator rank, -1 for endpoints not in the communicator.
    ranks: Vec<i32>,
}

impl RankMap {
    fn new(members: Vec<u32>, endpoints: u32) -> RankMap {
        let mut ranks = vec![-1; endpoints as usize];
        for (r, &e) in members.iter().enumerate() {
            ranks[e as usize] = r as i32;
        }
        RankMap { members, ranks }
    }

    /// The communicator rank of a status's source endpoint (negative values pass through).
    #[inline]
    pub(crate) fn rank_of(&self, source: i32) -> i32 {
        if source < 0 {
            source
        } else {
            self.ranks[source as usize]
        }
    }
}

/// Translate a status's source from endpoint to communicator rank.
#[inline]
pub(crate) fn fix_status(map: &Option<Rc<RankMap>>, r: Result<Status>) -> Result<Status> {
    match map {
        None => r,
        Some(m) => match r {
            Ok(mut st) => {
                st.source = m.rank_of(st.source);
                Ok(st)
            }
            Err(e) => Err(e.map_status(|mut st| {
                st.source = m.rank_of(st.source);
                st
            })),
        },
    }
}

/// What all handles on one communicator share.
struct CommShared {
    eng: EngineRef,
    pair: u32,
    freed: Cell<bool>,
    /// Whether the context pair has been given back.
    released: Cell<bool>,
    /// Nonblocking operations (a pending idup) still using the internal context: the pair
    /// is given back only after they end, even if the communicator is freed meanwhile.
    holds: Cell<u32>,
    name: RefCell<String>,
    /// Info hints set on the communicator (MPI_Comm_set_info, dup_with_info).
    info: RefCell<Info>,
    /// Collective calls made on the communicator so far: every member makes them in the
    /// same order, so the count tells one call's internal messages from the next's.
    seq: Cell<u32>,
    /// The local group of an intercommunicator (endpoints, in rank order); `None` for an
    /// intracommunicator.
    local: Option<Rc<[u32]>>,
}

impl CommShared {
    /// Give the context pair back, once.
    fn release(&self, e: &mut crate::p2p::engine::Engine) {
        if !self.released.replace(true) {
            e.ctx_release(self.pair);
        }
    }

    /// A nonblocking operation that held the communicator (see `holds`) has ended, on the
    /// endpoint `e`, borrowed: give the pair back if the communicator was freed meanwhile or
    /// the caller's handle is the last (its drop could not borrow the endpoint).
    fn unhold(self: &Rc<Self>, e: &mut crate::p2p::engine::Engine) {
        self.holds.set(self.holds.get() - 1);
        if self.holds.get() == 0 && (self.freed.get() || Rc::strong_count(self) == 1) {
            self.release(e);
        }
    }
}

impl Drop for CommShared {
    fn drop(&mut self) {
        // The last handle is gone: give the context pair back (free() already did if called).
        if !self.released.get() {
            if let Ok(mut e) = self.eng.try_borrow_mut() {
                self.release(&mut e);
            }
        }
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("ctx", &self.ctx)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

/// Context ids reserved for the predefined communicators.
pub(crate) const CTX_WORLD: u32 = 0;

/// A buffer a persistent send may be given: `&[T]` (constant data) or `&mut [T]` (data the
/// program changes between starts through [`Request::buffer_mut`]).
pub trait SendBuf<'s> {
    #[doc(hidden)]
    const WRITABLE: bool;
    #[doc(hidden)]
    fn lend(self) -> Lent;
}

impl<'s, T: Equivalence> SendBuf<'s> for &'s [T] {
    const WRITABLE: bool = false;
    fn lend(self) -> Lent {
        Lent::of(bytes(self))
    }
}

impl<'s, T: Equivalence> SendBuf<'s> for &'s mut [T] {
    const WRITABLE: bool = true;
    fn lend(self) -> Lent {
        Lent::of_mut(bytes_mut(self))
    }
}

impl<'s, T: Equivalence, const N: usize> SendBuf<'s> for &'s [T; N] {
    const WRITABLE: bool = false;
    fn lend(self) -> Lent {
        Lent::of(bytes(self))
    }
}

impl<'s, T: Equivalence, const N: usize> SendBuf<'s> for &'s mut [T; N] {
    const WRITABLE: bool = true;
    fn lend(self) -> Lent {
        Lent::of_mut(bytes_mut(self))
    }
}

impl<'s, T: Equivalence> SendBuf<'s> for &'s Vec<T> {
    const WRITABLE: bool = false;
    fn lend(self) -> Lent {
        Lent::of(bytes(self))
    }
}

impl<'s, T: Equivalence> SendBuf<'s> for &'s mut Vec<T> {
    const WRITABLE: bool = true;
    fn lend(self) -> Lent {
        Lent::of_mut(bytes_mut(self))
    }
}

/// A message taken out of matching by [`Comm::mprobe`] (MPI_Message); receive it with
/// [`Message::recv`].
#[derive(Debug)]
#[must_use = "a matched message must be received"]
pub struct Message {
    comm: Comm,
    m: Option<Matched>,
}

impl Comm {
    pub(crate) fn world(eng: EngineRef) -> Comm {
        let (rank, size) = {
            let e = eng.borrow();
            (e.rank() as i32, e.size() as i32)
        };
        let shared = Rc::new(CommShared {
            eng: eng.clone(),
            pair: 0,
            freed: Cell::new(false),
            released: Cell::new(false),
            holds: Cell::new(0),
            name: RefCell::new("MPI_COMM_WORLD".into()),
            info: RefCell::new(Info::new()),
            seq: Cell::new(0),
            local: None,
        });
        Comm {
            eng,
            ctx: CTX_WORLD,
            rank,
            size,
            peers: size,
            errh: Rc::new(Cell::new(ErrHandler::Fatal)),
            map: None,
            shared,
        }
    }

    /// MPI_Comm_group: the group of the communicator's processes, in rank order (the local
    /// group of an intercommunicator).
    pub fn group(&self) -> group::Group {
        let me = self.eng.borrow().rank();
        group::Group::new(self.local_members(), me)
    }

    /// Endpoints of the local group, in rank order.
    fn local_members(&self) -> Vec<u32> {
        if let Some(l) = &self.shared.local {
            return l.to_vec();
        }
        match &self.map {
            None => (0..self.size as u32).collect(),
            Some(m) => m.members.clone(),
        }
    }

    /// The endpoint of communicator rank `r` (PROC_NULL and wildcards pass through).
    #[inline(always)]
    fn ep(&self, r: i32) -> i32 {
        match &self.map {
            Some(m) if r >= 0 => m.members[r as usize] as i32,
            _ => r,
        }
    }

    /// This process's rank in the communicator (MPI_Comm_rank).
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// Number of ranks (MPI_Comm_size).
    pub fn size(&self) -> i32 {
        self.size
    }

    /// Choose how errors on this communicator reach the program (MPI_Comm_set_errhandler).
    /// Every handle on the communicator (clones) and every pending request made on it sees
    /// the change.
    pub fn set_errhandler(&self, h: ErrHandler) {
        self.errh.set(h);
    }

    pub fn errhandler(&self) -> ErrHandler {
        self.errh.get()
    }

    #[inline(always)]
    fn ret<T>(&self, what: &str, r: Result<T>) -> Result<T> {
        apply(self.errh.get(), &self.eng, what, r)
    }

    #[inline(always)]
    fn check_live(&self) -> Result<()> {
        if self.shared.freed.get() {
            return Err(Error::new(
                ErrorClass::Comm,
                "communicator used after comm_free",
            ));
        }
        if self.eng.borrow().finalized() {
            return Err(Error::new(
                ErrorClass::Comm,
                "communicator used after finalize",
            ));
        }
        Ok(())
    }

    #[inline(always)]
    fn check_dest(&self, dest: i32) -> Result<()> {
        if dest == PROC_NULL || (0..self.peers).contains(&dest) {
            Ok(())
        } else {
            Err(self.bad_rank("destination", dest))
        }
    }

    #[inline(always)]
    fn check_source(&self, src: i32) -> Result<()> {
        if src == PROC_NULL || src == ANY_SOURCE || (0..self.peers).contains(&src) {
            Ok(())
        } else {
            Err(self.bad_rank("source", src))
        }
    }

    #[cold]
    fn bad_rank(&self, what: &str, r: i32) -> Error {
        let of = if self.shared.local.is_some() {
            format!("remote group of size {}", self.peers)
        } else {
            format!("communicator of size {}", self.size)
        };
        Error::new(ErrorClass::Rank, format!("invalid {what} rank {r} ({of})"))
    }

    #[inline(always)]
    fn check_send_tag(tag: i32) -> Result<()> {
        if (0..=TAG_UB).contains(&tag) {
            Ok(())
        } else {
            Err(Error::new(
                ErrorClass::Tag,
                format!("invalid send tag {tag} (tags run from 0 to {TAG_UB})"),
            ))
        }
    }

    #[inline(always)]
    fn check_recv_tag(tag: i32) -> Result<()> {
        if tag == ANY_TAG || (0..=TAG_UB).contains(&tag) {
            Ok(())
        } else {
            Err(Error::new(
                ErrorClass::Tag,
                format!("invalid receive tag {tag} (tags run from 0 to {TAG_UB}, or ANY_TAG)"),
            ))
        }
    }

    #[inline(always)]
    fn send_plan(&self, buf: Lent, dest: i32, tag: i32, mode: SendMode) -> Result<Plan> {
        self.check_live()?;
        self.check_dest(dest)?;
        Self::check_send_tag(tag)?;
        Ok(Plan::Send {
            peer: self.ep(dest),
            ctx: self.ctx,
            tag,
            buf,
            mode,
        })
    }

    #[inline(always)]
    fn pattern(&self, src: i32, tag: i32) -> Result<Option<Pattern>> {
        self.check_live()?;
        self.check_source(src)?;
        Self::check_recv_tag(tag)?;
        if src == PROC_NULL {
            return Ok(None);
        }
        Ok(Some(Pattern {
            ctx: self.ctx,
            src: (src != ANY_SOURCE).then_some(self.ep(src) as u32),
            tag: (tag != ANY_TAG).then_some(tag),
        }))
    }

    fn blocking_send(
        &self,
        what: &str,
        buf: &[u8],
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> Result<()> {
        let r = (|| {
            let plan = self.send_plan(Lent::of(buf), dest, tag, mode)?;
            let Plan::Send {
                peer,
                ctx,
                tag,
                buf,
                mode,
            } = plan
            else {
                unreachable!()
            };
            self.send_and_wait(peer, ctx, tag, buf, mode)
        })();
        self.ret(what, r)
    }

    /// The core of every blocking send: start it on the engine (to endpoint `peer`, in
    /// context `ctx`) and wait until it completes.
    fn send_and_wait(
        &self,
        peer: i32,
        ctx: u32,
        tag: i32,
        buf: Lent,
        mode: SendMode,
    ) -> Result<()> {
        let mut e = self.eng.borrow_mut();
        if let crate::p2p::engine::Started::Op(op) = e.send_start(peer, ctx, tag, buf, mode)? {
            e.wait_blocking(
                op,
                Blocked {
                    what: BlockedIn::Send,
                    peer,
                    tag,
                    ctx,
                },
            )?;
        }
        Ok(())
    }

    /// MPI_Send: standard-mode blocking send.
    pub fn send<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        self.blocking_send("send", bytes(buf), dest, tag, SendMode::Standard)
    }

    /// MPI_Ssend: returns once the matching receive has started.
    pub fn ssend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        self.blocking_send("ssend", bytes(buf), dest, tag, SendMode::Synchronous)
    }

    /// MPI_Rsend: the program promises the receive is posted (sent as standard mode).
    pub fn rsend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        self.blocking_send("rsend", bytes(buf), dest, tag, SendMode::Ready)
    }

    /// MPI_Bsend: copies into the attached buffer ([`Universe::buffer_attach`](crate::Universe::buffer_attach))
    /// and returns; MPI_ERR_BUFFER when it does not fit.
    pub fn bsend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        self.blocking_send("bsend", bytes(buf), dest, tag, SendMode::Buffered)
    }

    /// MPI_Recv: blocking receive into `buf`; `src` may be [`ANY_SOURCE`] or [`PROC_NULL`],
    /// `tag` may be [`ANY_TAG`]. A message longer than `buf` is MPI_ERR_TRUNCATE (the error
    /// carries the filled status).
    pub fn recv<T: Equivalence>(&self, buf: &mut [T], src: i32, tag: i32) -> Result<Status> {
        let r = (|| {
            let Some(pat) = self.pattern(src, tag)? else {
                return Ok(Status::proc_null());
            };
            let mut e = self.eng.borrow_mut();
            let op = e.recv_start(pat, Lent::of_mut(bytes_mut(buf)));
            e.wait_blocking(
                op,
                Blocked {
                    what: BlockedIn::Recv,
                    peer: src,
                    tag,
                    ctx: self.ctx,
                },
            )
        })();
        self.ret("recv", fix_status(&self.map, r))
    }

    /// MPI_Sendrecv.
    pub fn sendrecv<S: Equivalence, R: Equivalence>(
        &self,
        sbuf: &[S],
        dest: i32,
        stag: i32,
        rbuf: &mut [R],
        src: i32,
        rtag: i32,
    ) -> Result<Status> {
        let r = crate::scope(|s| -> Result<Status> {
            let mut rr = self.irecv(s, rbuf, src, rtag)?;
            let mut sr = self.isend(s, sbuf, dest, stag)?;
            sr.wait()?;
            rr.wait()
        });
        self.ret("sendrecv", r)
    }

    /// MPI_Sendrecv_replace: send `buf`, then receive into it.
    pub fn sendrecv_replace<T: Equivalence>(
        &self,
        buf: &mut [T],
        dest: i32,
        stag: i32,
        src: i32,
        rtag: i32,
    ) -> Result<Status> {
        let copy = buf.to_vec();
        self.sendrecv(&copy, dest, stag, buf, src, rtag)
    }

    // ---- nonblocking --------------------------------------------------------------------

    #[inline(always)]
    fn nb_send<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        what: &str,
        buf: &'s [T],
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> Result<Request<'s>> {
        let r = self
            .send_plan(Lent::of(bytes(buf)), dest, tag, mode)
            .and_then(|p| Request::nonblocking(&self.eng, &s.ops, p, &self.errh))
            .map(|r| r.with_map(&self.map));
        self.ret(what, r)
    }

    /// MPI_Isend.
    pub fn isend<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.nb_send(s, "isend", buf, dest, tag, SendMode::Standard)
    }

    /// MPI_Issend.
    pub fn issend<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.nb_send(s, "issend", buf, dest, tag, SendMode::Synchronous)
    }

    /// MPI_Irsend.
    pub fn irsend<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.nb_send(s, "irsend", buf, dest, tag, SendMode::Ready)
    }

    /// MPI_Ibsend.
    pub fn ibsend<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.nb_send(s, "ibsend", buf, dest, tag, SendMode::Buffered)
    }

    /// A receive request on `buf` (nonblocking and started, or persistent and inactive),
    /// reporting statuses in this communicator's ranks.
    fn recv_request<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        what: &str,
        buf: Lent,
        src: i32,
        tag: i32,
        persistent: bool,
    ) -> Result<Request<'s>> {
        let r = self.pattern(src, tag).and_then(|pat| {
            let plan = Plan::Recv { pat, buf };
            let req = if persistent {
                Ok(Request::persistent(&self.eng, &s.ops, plan, &self.errh))
            } else {
                Request::nonblocking(&self.eng, &s.ops, plan, &self.errh)
            };
            req.map(|r| r.with_map(&self.map))
        });
        self.ret(what, r)
    }

    /// MPI_Irecv.
    pub fn irecv<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut [T],
        src: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.recv_request(s, "irecv", Lent::of_mut(bytes_mut(buf)), src, tag, false)
    }

    /// MPI_Irecv into a [`ScratchBuffer`] that other pending receives may share (the
    /// pattern of OSU-style bandwidth benchmarks).
    pub fn irecv_scratch<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s ScratchBuffer,
        src: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.recv_request(s, "irecv", buf.lend(), src, tag, false)
    }

    /// The job's floor probe (see [`JobSegment::floor_pingpong`](crate::fabric::shm::JobSegment::floor_pingpong)):
    /// ranks 0 and 1 of the job hand one cache line back and forth; seconds taken here.
    pub fn floor_pingpong(&self, round: u64, iters: u64) -> f64 {
        let e = self.eng.borrow();
        e.job().floor_pingpong(e.rank(), round, iters)
    }

    // ---- persistent ---------------------------------------------------------------------

    fn p_send<'s, B: SendBuf<'s>>(
        &self,
        s: &'s Scope<'s, '_>,
        what: &str,
        buf: B,
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> Result<Request<'s>> {
        let r = self.send_plan(buf.lend(), dest, tag, mode).map(|p| {
            Request::persistent(&self.eng, &s.ops, p, &self.errh)
                .writable(B::WRITABLE)
                .with_map(&self.map)
        });
        self.ret(what, r)
    }

    /// MPI_Send_init: a persistent standard-mode send of `buf`, started with
    /// [`Request::start`]. The buffer is read at each start. Lend it as `&mut [T]` to change
    /// it between starts through [`Request::buffer_mut`], or as `&[T]` for constant data.
    pub fn send_init<'s, B: SendBuf<'s>>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: B,
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.p_send(s, "send_init", buf, dest, tag, SendMode::Standard)
    }

    /// MPI_Ssend_init.
    pub fn ssend_init<'s, B: SendBuf<'s>>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: B,
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.p_send(s, "ssend_init", buf, dest, tag, SendMode::Synchronous)
    }

    /// MPI_Rsend_init.
    pub fn rsend_init<'s, B: SendBuf<'s>>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: B,
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.p_send(s, "rsend_init", buf, dest, tag, SendMode::Ready)
    }

    /// MPI_Bsend_init.
    pub fn bsend_init<'s, B: SendBuf<'s>>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: B,
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.p_send(s, "bsend_init", buf, dest, tag, SendMode::Buffered)
    }

    /// MPI_Recv_init: a persistent receive into `buf`.
    pub fn recv_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut [T],
        src: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.recv_request(s, "recv_init", Lent::of_mut(bytes_mut(buf)), src, tag, true)
    }

    // ---- probe ----------------------------------------------------------------------------

    fn probe_status(&self, env: crate::p2p::matching::Envelope, len: usize) -> Status {
        Status {
            source: self
                .map
                .as_ref()
                .map_or(env.src as i32, |m| m.rank_of(env.src as i32)),
            tag: env.tag,
            bytes: len,
            cancelled: false,
            error: ErrorClass::Success,
        }
    }

    /// MPI_Iprobe: the status of a message that a receive with `src`/`tag` would match now.
    pub fn iprobe(&self, src: i32, tag: i32) -> Result<Option<Status>> {
        let r = (|| {
            let Some(pat) = self.pattern(src, tag)? else {
                return Ok(Some(Status::proc_null()));
            };
            Ok(self
                .eng
                .borrow_mut()
                .iprobe(&pat)
                .map(|(e, l)| self.probe_status(e, l)))
        })();
        self.ret("iprobe", r)
    }

    /// MPI_Probe: block until such a message is there.
    pub fn probe(&self, src: i32, tag: i32) -> Result<Status> {
        let r = (|| {
            let Some(pat) = self.pattern(src, tag)? else {
                return Ok(Status::proc_null());
            };
            let blocked = Blocked {
                what: BlockedIn::Probe,
                peer: src,
                tag,
                ctx: self.ctx,
            };
            self.eng
                .borrow_mut()
                .wait_for(blocked, |e| e.iprobe(&pat))
                .map(|(e, l)| self.probe_status(e, l))
        })();
        self.ret("probe", r)
    }

    /// MPI_Improbe: take the message out of matching, so that only [`Message::recv`] gets it.
    pub fn improbe(&self, src: i32, tag: i32) -> Result<Option<(Message, Status)>> {
        let r = (|| {
            let Some(pat) = self.pattern(src, tag)? else {
                return Ok(Some((
                    Message {
                        comm: self.clone(),
                        m: None,
                    },
                    Status::proc_null(),
                )));
            };
            Ok(self.eng.borrow_mut().improbe(&pat).map(|m| {
                let st = self.probe_status(m.envelope(), m.len());
                (
                    Message {
                        comm: self.clone(),
                        m: Some(m),
                    },
                    st,
                )
            }))
        })();
        self.ret("improbe", r)
    }

    /// MPI_Mprobe: block until a message matches, and take it out of matching.
    pub fn mprobe(&self, src: i32, tag: i32) -> Result<(Message, Status)> {
        let r = (|| {
            let Some(pat) = self.pattern(src, tag)? else {
                return Ok((
                    Message {
                        comm: self.clone(),
                        m: None,
                    },
                    Status::proc_null(),
                ));
            };
            let blocked = Blocked {
                what: BlockedIn::Probe,
                peer: src,
                tag,
                ctx: self.ctx,
            };
            let m = self
                .eng
                .borrow_mut()
                .wait_for(blocked, |e| e.improbe(&pat))?;
            let st = self.probe_status(m.envelope(), m.len());
            Ok((
                Message {
                    comm: self.clone(),
                    m: Some(m),
                },
                st,
            ))
        })();
        self.ret("mprobe", r)
    }
}

impl Message {
    /// MPI_Mrecv: receive the matched message into `buf`.
    pub fn recv<T: Equivalence>(mut self, buf: &mut [T]) -> Result<Status> {
        let comm = self.comm.clone();
        let r = match self.m.take() {
            None => Ok(Status::proc_null()),
            Some(m) => {
                let mut e = comm.eng.borrow_mut();
                let op = e.mrecv_start(m, Lent::of_mut(bytes_mut(buf)));
                e.wait_blocking(
                    op,
                    Blocked {
                        what: BlockedIn::Recv,
                        peer: -3,
                        tag: 0,
                        ctx: comm.ctx,
                    },
                )
            }
        };
        comm.ret("mrecv", fix_status(&comm.map, r))
    }

    /// MPI_Imrecv: the matched message is delivered at once (it has arrived), so the request
    /// is already complete; it exists for programs written against the nonblocking form.
    pub fn irecv<'s, T: Equivalence>(
        mut self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut [T],
    ) -> Result<Request<'s>> {
        let comm = self.comm.clone();
        let blocked = Blocked {
            what: BlockedIn::Recv,
            peer: -3,
            tag: 0,
            ctx: comm.ctx,
        };
        match self.m.take() {
            None => Request::nonblocking(
                &comm.eng,
                &s.ops,
                Plan::Recv {
                    pat: None,
                    buf: Lent::EMPTY,
                },
                &comm.errh,
            ),
            Some(m) => {
                let op = comm
                    .eng
                    .borrow_mut()
                    .mrecv_start(m, Lent::of_mut(bytes_mut(buf)));
                Ok(
                    Request::from_op(&comm.eng, &s.ops, op, blocked, &comm.errh)
                        .with_map(&comm.map),
                )
            }
        }
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        // Receive it into nothing so that a rendezvous sender is released; the data is
        // discarded (MPI leaves a matched message that is never received undefined).
        if let Some(m) = self.m.take() {
            if let Ok(mut e) = self.comm.eng.try_borrow_mut() {
                let op = e.mrecv_start(m, Lent::EMPTY);
                let _ = e.take(op);
            }
        }
    }
}
