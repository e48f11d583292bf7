//! comm — communicators. This layer now holds `MPI_COMM_WORLD` and `MPI_COMM_SELF`-like
//! handles over one endpoint; groups, dup/split and topologies come with the communicators
//! issue.
//!
//! Every method checks its arguments (rank, tag) and returns the MPI error class with a
//! message naming the bad value, through the communicator's error handler
//! ([`errhandler`]).
//!
//! # Standard section(s)
//! MPI 4.1 §3 (point-to-point communication), §6.4 (communicators), §9.3 (error handlers).
#![forbid(unsafe_code)]

pub(crate) mod agree;
pub mod attr;
pub mod cart;
mod create;
pub mod errhandler;
pub mod group;
mod intercomm;

pub use create::{PendingComm, SplitType};

use crate::datatype::{Buffer, BufferMut};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::shm::BlockedIn;
use crate::info::Info;
use crate::p2p::engine::{Blocked, Matched, SendMode};
use crate::p2p::matching::Pattern;
use crate::p2p::{Status, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};
use crate::request::{EngineRef, Plan, Request, Scope};
use crate::sys::lend::{Lent, ScratchBuffer};
use errhandler::{apply, ErrHandler};
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
    pub(crate) eng: EngineRef,
    pub(crate) ctx: u32,
    pub(crate) rank: i32,
    pub(crate) size: i32,
    /// Size of the group point-to-point addresses: `size`, or the remote group's size.
    peers: i32,
    /// Rank <-> endpoint translation of the group point-to-point addresses (the remote group
    /// of an intercommunicator); `None` when ranks are the job's (WORLD).
    pub(crate) map: Option<Rc<RankMap>>,
    pub(crate) shared: Rc<CommShared>,
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

    /// The endpoint of communicator rank `r` (in range).
    #[inline(always)]
    pub(crate) fn endpoint(&self, r: i32) -> u32 {
        self.members[r as usize]
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

/// What all handles on one communicator share, and the requests made on it too (so that
/// they apply its error handler, and a user handler can be given the communicator). A
/// [`Comm`] copies the immutable part for quick access.
pub(crate) struct CommShared {
    eng: EngineRef,
    pair: u32,
    rank: i32,
    size: i32,
    /// Size of the group point-to-point addresses (the remote group's for an
    /// intercommunicator).
    peers: i32,
    map: Option<Rc<RankMap>>,
    freed: Cell<bool>,
    /// Whether the context pair has been given back.
    released: Cell<bool>,
    /// Nonblocking operations (a pending idup) still using the internal context: the pair
    /// is given back only after they end, even if the communicator is freed meanwhile.
    holds: Cell<u32>,
    name: RefCell<String>,
    /// Cached attributes (attr.rs).
    attrs: RefCell<attr::Attrs>,
    /// The topology, set once when the communicator is made (cart.rs).
    topo: std::cell::OnceCell<cart::Topo>,
    errh: RefCell<ErrHandler>,
    /// Info hints set on the communicator (MPI_Comm_set_info, dup_with_info).
    pub(crate) info: RefCell<Info>,
    /// Collective calls made on the communicator so far: every member makes them in the
    /// same order, so the count tells one call's internal messages from the next's.
    seq: Cell<u32>,
    /// The local group of an intercommunicator (endpoints, in rank order); `None` for an
    /// intracommunicator.
    local: Option<Rc<[u32]>>,
    /// Collective algorithms forced for this communicator (info hints and the environment),
    /// worked out at the first collective after the hints last changed (coll/registry.rs).
    pub(crate) coll_forced: RefCell<Option<Rc<crate::coll::registry::Forced>>>,
    /// Steps of repeated blocking collectives, by kind (coll/api.rs, `blocking_repeat`).
    pub(crate) coll_repeat: RefCell<[crate::coll::RepeatSlot; crate::coll::Coll::ALL.len()]>,
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

/// A buffer a persistent send may be given: `&B` for constant data, or `&mut B` for data the
/// program changes between starts through [`Request::buffer_mut`], where `B` is a
/// [`Buffer`] (`[T]`, `[T; N]`, `Vec<T>`, a [`Typed`](crate::Typed) view). Sealed.
pub trait SendBuf<'s>: crate::datatype::buffer::Sealed {
    #[doc(hidden)]
    const WRITABLE: bool;
    #[doc(hidden)]
    fn lend(self) -> Result<Lent>;
}

impl<'s, B: Buffer + ?Sized> SendBuf<'s> for &'s B {
    const WRITABLE: bool = false;
    fn lend(self) -> Result<Lent> {
        self.lent()
    }
}

impl<'s, B: BufferMut + ?Sized> SendBuf<'s> for &'s mut B {
    const WRITABLE: bool = true;
    fn lend(self) -> Result<Lent> {
        self.lent_mut()
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
        Comm::from_shared(Rc::new(CommShared {
            eng,
            pair: CTX_WORLD / 2,
            rank,
            size,
            peers: size,
            map: None,
            freed: Cell::new(false),
            released: Cell::new(false),
            holds: Cell::new(0),
            name: RefCell::new("MPI_COMM_WORLD".into()),
            attrs: Default::default(),
            topo: Default::default(),
            errh: RefCell::new(ErrHandler::Fatal),
            info: RefCell::new(Info::new()),
            seq: Cell::new(0),
            local: None,
            coll_forced: Default::default(),
            coll_repeat: Default::default(),
        }))
    }

    /// A handle on the communicator `shared` describes (point-to-point on context `2p` of
    /// its pair `p`).
    pub(crate) fn from_shared(shared: Rc<CommShared>) -> Comm {
        Comm {
            eng: shared.eng.clone(),
            ctx: 2 * shared.pair,
            rank: shared.rank,
            size: shared.size,
            peers: shared.peers,
            map: shared.map.clone(),
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

    /// Pass a call's result through this communicator's error handler (one branch on
    /// success).
    #[inline(always)]
    pub(crate) fn ret<T>(&self, what: &str, r: Result<T>) -> Result<T> {
        apply(&self.shared, what, r)
    }

    #[inline(always)]
    pub(crate) fn check_live(&self) -> Result<()> {
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
        buf: Result<Lent>,
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> Result<()> {
        let r = (|| {
            let plan = self.send_plan(buf?, dest, tag, mode)?;
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
            e.wait_blocking(op, Blocked::send(peer, tag, ctx))?;
        }
        Ok(())
    }

    /// MPI_Send: standard-mode blocking send.
    pub fn send<B: Buffer + ?Sized>(&self, buf: &B, dest: i32, tag: i32) -> Result<()> {
        self.blocking_send("send", buf.lent(), dest, tag, SendMode::Standard)
    }

    /// MPI_Ssend: returns once the matching receive has started.
    pub fn ssend<B: Buffer + ?Sized>(&self, buf: &B, dest: i32, tag: i32) -> Result<()> {
        self.blocking_send("ssend", buf.lent(), dest, tag, SendMode::Synchronous)
    }

    /// MPI_Rsend: the program promises the receive is posted (sent as standard mode).
    pub fn rsend<B: Buffer + ?Sized>(&self, buf: &B, dest: i32, tag: i32) -> Result<()> {
        self.blocking_send("rsend", buf.lent(), dest, tag, SendMode::Ready)
    }

    /// MPI_Bsend: copies into the attached buffer ([`Universe::buffer_attach`](crate::Universe::buffer_attach))
    /// and returns; MPI_ERR_BUFFER when it does not fit.
    pub fn bsend<B: Buffer + ?Sized>(&self, buf: &B, dest: i32, tag: i32) -> Result<()> {
        self.blocking_send("bsend", buf.lent(), dest, tag, SendMode::Buffered)
    }

    /// MPI_Recv: blocking receive into `buf`; `src` may be [`ANY_SOURCE`] or [`PROC_NULL`],
    /// `tag` may be [`ANY_TAG`]. A message longer than `buf` is MPI_ERR_TRUNCATE (the error
    /// carries the filled status).
    pub fn recv<B: BufferMut + ?Sized>(&self, buf: &mut B, src: i32, tag: i32) -> Result<Status> {
        let r = (|| {
            let Some(pat) = self.pattern(src, tag)? else {
                return Ok(Status::proc_null());
            };
            let lent = buf.lent_mut()?;
            let mut e = self.eng.borrow_mut();
            let op = e.recv_start(pat, lent);
            e.wait_blocking(op, Blocked::recv(src, tag, self.ctx))
        })();
        self.ret("recv", fix_status(&self.map, r))
    }

    /// MPI_Sendrecv.
    pub fn sendrecv<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        sbuf: &S,
        dest: i32,
        stag: i32,
        rbuf: &mut R,
        src: i32,
        rtag: i32,
    ) -> Result<Status> {
        let r = sbuf
            .lent()
            .and_then(|sl| rbuf.lent_mut().map(|rl| (sl, rl)))
            .and_then(|(sl, rl)| self.sendrecv_lent(sl, dest, stag, rl, src, rtag));
        self.ret("sendrecv", r)
    }

    /// Start the receive, then the send, and wait for both (buffers are borrowed by the
    /// caller for the whole call).
    fn sendrecv_lent(
        &self,
        sl: Lent,
        dest: i32,
        stag: i32,
        rl: Lent,
        src: i32,
        rtag: i32,
    ) -> Result<Status> {
        crate::scope(|s| -> Result<Status> {
            let pat = self.pattern(src, rtag)?;
            let mut rr =
                Request::nonblocking(&self.eng, &s.ops, Plan::Recv { pat, buf: rl }, &self.shared)?
                    .with_map(&self.map);
            let plan = self.send_plan(sl, dest, stag, SendMode::Standard)?;
            let mut sr = Request::nonblocking(&self.eng, &s.ops, plan, &self.shared)?;
            sr.wait()?;
            rr.wait()
        })
    }

    /// MPI_Sendrecv_replace: send `buf`, then receive into it (the outgoing message is packed
    /// into a temporary first).
    pub fn sendrecv_replace<B: BufferMut + ?Sized>(
        &self,
        buf: &mut B,
        dest: i32,
        stag: i32,
        src: i32,
        rtag: i32,
    ) -> Result<Status> {
        let r = buf.lent_mut().and_then(|rl| {
            let copy = rl.to_packed();
            let sl = Lent::of(&copy).with_sig(rl.sig());
            self.sendrecv_lent(sl, dest, stag, rl, src, rtag)
        });
        self.ret("sendrecv_replace", r)
    }

    // ---- nonblocking --------------------------------------------------------------------

    #[inline(always)]
    fn nb_send<'s, B: Buffer + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        what: &str,
        buf: &'s B,
        dest: i32,
        tag: i32,
        mode: SendMode,
    ) -> Result<Request<'s>> {
        let r = buf
            .lent()
            .and_then(|l| self.send_plan(l, dest, tag, mode))
            .and_then(|p| Request::nonblocking(&self.eng, &s.ops, p, &self.shared))
            .map(|r| r.with_map(&self.map));
        self.ret(what, r)
    }

    /// MPI_Isend.
    pub fn isend<'s, B: Buffer + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s B,
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.nb_send(s, "isend", buf, dest, tag, SendMode::Standard)
    }

    /// MPI_Issend.
    pub fn issend<'s, B: Buffer + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s B,
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.nb_send(s, "issend", buf, dest, tag, SendMode::Synchronous)
    }

    /// MPI_Irsend.
    pub fn irsend<'s, B: Buffer + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s B,
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.nb_send(s, "irsend", buf, dest, tag, SendMode::Ready)
    }

    /// MPI_Ibsend.
    pub fn ibsend<'s, B: Buffer + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s B,
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
        buf: Result<Lent>,
        src: i32,
        tag: i32,
        persistent: bool,
    ) -> Result<Request<'s>> {
        let r = self.pattern(src, tag).and_then(|pat| {
            let plan = Plan::Recv { pat, buf: buf? };
            let req = if persistent {
                Ok(Request::persistent(&self.eng, &s.ops, plan, &self.shared))
            } else {
                Request::nonblocking(&self.eng, &s.ops, plan, &self.shared)
            };
            req.map(|r| r.with_map(&self.map))
        });
        self.ret(what, r)
    }

    /// MPI_Irecv.
    pub fn irecv<'s, B: BufferMut + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut B,
        src: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.recv_request(s, "irecv", buf.lent_mut(), src, tag, false)
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
        self.recv_request(s, "irecv", Ok(buf.lend()), src, tag, false)
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
        let r = buf
            .lend()
            .and_then(|l| self.send_plan(l, dest, tag, mode))
            .map(|p| {
                Request::persistent(&self.eng, &s.ops, p, &self.shared)
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
    pub fn recv_init<'s, B: BufferMut + ?Sized>(
        &self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut B,
        src: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.recv_request(s, "recv_init", buf.lent_mut(), src, tag, true)
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
            let blocked = Blocked::on(BlockedIn::Probe, src, tag, self.ctx);
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
            let blocked = Blocked::on(BlockedIn::Probe, src, tag, self.ctx);
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
    pub fn recv<B: BufferMut + ?Sized>(mut self, buf: &mut B) -> Result<Status> {
        let comm = self.comm.clone();
        let r = match (self.m.take(), buf.lent_mut()) {
            (None, _) => Ok(Status::proc_null()),
            (Some(m), Err(e)) => {
                self.m = Some(m);
                Err(e)
            }
            (Some(m), Ok(lent)) => {
                let env = m.envelope();
                let mut e = comm.eng.borrow_mut();
                let op = e.mrecv_start(m, lent);
                e.wait_blocking(op, Blocked::recv(env.src as i32, env.tag, env.ctx))
            }
        };
        comm.ret("mrecv", fix_status(&comm.map, r))
    }

    /// MPI_Imrecv: the matched message is delivered at once (it has arrived), so the request
    /// is already complete; it exists for programs written against the nonblocking form.
    pub fn irecv<'s, B: BufferMut + ?Sized>(
        mut self,
        s: &'s Scope<'s, '_>,
        buf: &'s mut B,
    ) -> Result<Request<'s>> {
        let lent = match buf.lent_mut() {
            Ok(l) => l,
            Err(e) => return self.comm.clone().ret("imrecv", Err(e)),
        };
        let comm = self.comm.clone();
        match self.m.take() {
            None => Request::nonblocking(
                &comm.eng,
                &s.ops,
                Plan::Recv {
                    pat: None,
                    buf: Lent::EMPTY,
                },
                &comm.shared,
            ),
            Some(m) => {
                let env = m.envelope();
                let blocked = Blocked::recv(env.src as i32, env.tag, env.ctx);
                let op = comm.eng.borrow_mut().mrecv_start(m, lent);
                Ok(
                    Request::from_op(&comm.eng, &s.ops, op, blocked, &comm.shared)
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
