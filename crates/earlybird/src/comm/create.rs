//! Making and freeing communicators (MPI 4.1 §7.4): dup, dup_with_info, idup, split,
//! split_type, create, create_group, free, compare, names and info hints.
//!
//! # Context ids
//!
//! Every endpoint keeps a bitmap of the context pairs its communicators use (pair `p` is
//! contexts `2p`, point-to-point, and `2p + 1`, the library's own traffic; pair 0 is WORLD).
//! The processes of a new communicator agree on the lowest pair free on all of them (see
//! [`agree`](super::agree)), so a pair is never handed out while any member still holds it,
//! and no lock is shared between endpoints. A pair comes back when its communicator is
//! freed (or its last handle dropped), so dup and free in a loop run in bounded memory.
//!
//! The agreement messages travel on the parent's internal context: tagged with the number
//! of the collective call on the parent (every member makes its collective calls in the same
//! order), or, for MPI_Comm_create_group, which only the group's members call, with the
//! program's tag.
#![forbid(unsafe_code)]

use super::agree::{self, coll_tag, Agreement, Offer, Tags};
use super::attr::Inheritance;
use super::context::Mask;
use super::context::{self, ContextId};
use super::errhandler::{apply, ErrHandler};
use super::group::{Comparison, Group, UNDEFINED};
use super::{Comm, CommShared};
use crate::assertions::Assertions;
use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;
use crate::p2p::engine::Engine;
use crate::p2p::ranks::RankMap;
use crate::p2p::wait::Blocked;
use crate::p2p::{Status, TAG_UB};
use crate::request::steps::Steps;
use crate::request::{EngineRef, Request, Scope};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// The groups of a communicator to be made: its local group and, for an
/// intercommunicator, the remote group (endpoints, in rank order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    pub(super) local: Vec<u32>,
    pub(super) remote: Option<Vec<u32>>,
}

/// A communicator of the endpoint behind `eng` (`e`, borrowed) with groups `shape` on
/// context pair `pair`, which this call claims.
pub(super) fn assemble(
    eng: &EngineRef,
    e: &mut Engine,
    errh: ErrHandler,
    pair: u32,
    shape: Shape,
    info: Info,
) -> Comm {
    context::claim(e, pair);
    let (me, endpoints) = (e.rank(), e.size());
    let rank = shape
        .local
        .iter()
        .position(|&m| m == me)
        .expect("a member makes the communicator") as i32;
    let size = shape.local.len() as i32;
    let (peers, addressed, local) = match shape.remote {
        None => (size, shape.local, None),
        Some(r) => (r.len() as i32, r, Some(Rc::from(shape.local))),
    };
    let asserts = e.assertions() | Assertions::from_info(&info);
    e.set_ctx_assertions(ContextId::of_pair(pair).raw(), asserts);
    Comm::from_shared(Rc::new(CommShared {
        eng: eng.clone(),
        pair,
        rank,
        size,
        peers,
        map: Some(Rc::new(RankMap::new(addressed, endpoints))),
        freed: Cell::new(false),
        released: Cell::new(false),
        holds: Cell::new(0),
        name: RefCell::new(String::new()),
        attrs: Default::default(),
        topo: Default::default(),
        errh: RefCell::new(errh),
        info: RefCell::new(info),
        asserts: Cell::new(asserts),
        seq: Cell::new(0),
        agree_seq: Cell::new(0),
        local,
        coll_forced: Default::default(),
        coll_repeat: Default::default(),
        coll_shm: Default::default(),
    }))
}

/// The kinds of MPI_Comm_split_type.
///
/// The processes that can share memory are those on the caller's host: as the launcher
/// numbers the hosts when the job spans several (PMI's process mapping, PMIx's node ids),
/// else by host name (`/proc/sys/kernel/hostname`), which tells the jobs of one host apart
/// from those of another when communicators are joined across jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitType {
    /// MPI_UNDEFINED: this process takes no part and gets `None`.
    Undefined,
    /// MPI_COMM_TYPE_SHARED: the processes that can share memory with the caller (those on
    /// its host).
    Shared,
    /// MPI_COMM_TYPE_HW_UNGUIDED: the processes of the largest hardware level that is a
    /// strict subset of the participating ones. The only level earlybird knows is the host:
    /// when every participating process is on one host there is no such level, and every
    /// process gets `None`. The new communicator's info has `mpi_hw_resource_type` = `host`.
    HwUnguided,
    /// MPI_COMM_TYPE_HW_GUIDED: the processes that share the resource named by the info key
    /// `mpi_hw_resource_type`: `mpi_shared_memory` (as [`SplitType::Shared`]) or `host`
    /// (the processes whose host name is the caller's). A process that gives no such key,
    /// or a value earlybird does not know, gets `None` (MPI 4.1 §7.4.2).
    HwGuided,
    /// Seed 003's MPI_COMM_TYPE_ENDPOINTS: the ranks that the caller's process asked for
    /// together (the endpoints one parent rank made with
    /// [`Comm::create_endpoints`](crate::Comm::create_endpoints)); on a communicator without
    /// endpoints, each rank alone.
    Endpoints,
}

/// The info key of [`SplitType::HwGuided`].
pub(super) const HW_RESOURCE_TYPE: &str = "mpi_hw_resource_type";

impl SplitType {
    /// The type whose MPI constant is `v` (MPICH's values: MPI_UNDEFINED,
    /// MPI_COMM_TYPE_SHARED = 1, MPI_COMM_TYPE_HW_UNGUIDED = 2, MPI_COMM_TYPE_HW_GUIDED = 3),
    /// for programs and bindings that carry split types as integers; `MPI_ERR_ARG` naming
    /// the value otherwise. [`SplitType::Endpoints`] is 5 (MPIX_COMM_TYPE_ENDPOINTS).
    pub fn from_raw(v: i32) -> Result<SplitType> {
        Ok(match v {
            UNDEFINED => SplitType::Undefined,
            1 => SplitType::Shared,
            2 => SplitType::HwUnguided,
            3 => SplitType::HwGuided,
            5 => SplitType::Endpoints,
            _ => {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!("comm_split_type: split type {v} is not MPI_UNDEFINED or an MPI_COMM_TYPE_* value (1 shared, 2 hw_unguided, 3 hw_guided, 5 endpoints)"),
                ))
            }
        })
    }

    /// The MPI constant of the type (see [`from_raw`](Self::from_raw)).
    pub fn raw(self) -> i32 {
        match self {
            SplitType::Undefined => UNDEFINED,
            SplitType::Shared => 1,
            SplitType::HwUnguided => 2,
            SplitType::HwGuided => 3,
            SplitType::Endpoints => 5,
        }
    }
}

/// Longest host name (HOST_NAME_MAX).
const HOST_LEN: usize = 64;

/// This process's host: its number in a job across hosts (`job`), else the host's name as
/// the kernel has it; padded to [`HOST_LEN`] bytes.
fn host_name(job: &crate::fabric::job::JobSegment) -> [u8; HOST_LEN] {
    let name = match job.hosts() {
        Some(h) => format!("earlybird node {}", h.node()),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default(),
    };
    let name = name.trim().as_bytes();
    let mut out = [0u8; HOST_LEN];
    let n = name.len().min(HOST_LEN);
    out[..n].copy_from_slice(&name[..n]);
    out
}

/// The communicator an MPI_Comm_idup is making. It can be used once the request the idup
/// returned has completed ([`PendingComm::comm`]); before, using it is an error.
pub struct PendingComm {
    slot: Rc<RefCell<Slot>>,
    /// The parent, whose error handler applies to [`comm`](PendingComm::comm).
    errh: Rc<CommShared>,
}

#[derive(Debug)]
enum Slot {
    Pending,
    Ready(Comm),
    Failed(Error),
}

impl PendingComm {
    /// The new communicator (MPI's `newcomm` of MPI_Comm_idup). `MPI_ERR_COMM` while the
    /// idup's request has not completed (wait or test it first); the request's error if the
    /// idup failed. Each call returns a handle on the same communicator.
    pub fn comm(&self) -> Result<Comm> {
        let r = match &*self.slot.borrow() {
            Slot::Ready(c) => Ok(c.clone()),
            Slot::Failed(e) => Err(e.clone()),
            Slot::Pending => Err(Error::new(
                ErrorClass::Comm,
                "comm_idup: the new communicator is used before the idup's request completed (wait for it or test it first)",
            )),
        };
        apply(&self.errh, "comm_idup", r)
    }

    /// Whether the idup's request has completed successfully.
    pub fn is_ready(&self) -> bool {
        matches!(*self.slot.borrow(), Slot::Ready(_))
    }
}

/// The steps of MPI_Comm_idup: a windowed agreement, then the new communicator.
struct IdupSteps {
    agreement: Agreement,
    /// The parent, held (its context pair stays taken) until the agreement ends, since
    /// MPI lets the program free it meanwhile.
    parent: Rc<CommShared>,
    eng: EngineRef,
    errh: ErrHandler,
    shape: Shape,
    info: Info,
    /// The topology and attribute copies, made when the idup was called.
    inheritance: Option<Inheritance>,
    slot: Rc<RefCell<Slot>>,
}

impl std::fmt::Debug for PendingComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PendingComm")
            .field(&*self.slot.borrow())
            .finish()
    }
}

impl std::fmt::Debug for IdupSteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("IdupSteps").field(&self.agreement).finish()
    }
}

impl Steps for IdupSteps {
    fn advance(&mut self, e: &mut Engine) -> Option<Result<Status>> {
        let r = self.agreement.poll(e)?;
        self.parent.unhold(e);
        Some(match r {
            Ok(pair) => {
                if Rc::strong_count(&self.slot) > 1 {
                    let c = assemble(
                        &self.eng,
                        e,
                        self.errh.clone(),
                        pair,
                        self.shape.clone(),
                        std::mem::take(&mut self.info),
                    );
                    if let Some(inh) = self.inheritance.take() {
                        Comm::adopt(&c, inh);
                    }
                    *self.slot.borrow_mut() = Slot::Ready(c);
                } else {
                    // Nobody can reach the communicator any more: it is freed at once.
                    context::release(e, pair);
                }
                Ok(Status::empty())
            }
            Err(err) => {
                *self.slot.borrow_mut() = Slot::Failed(err.clone());
                Err(err)
            }
        })
    }

    fn blocked(&self) -> Blocked {
        self.agreement.blocked()
    }

    fn abandon(&mut self, e: &mut Engine) {
        self.agreement.abandon(e);
        self.parent.unhold(e);
    }
}

impl Comm {
    /// The number of this collective call on the communicator (see [`coll_tag`]).
    pub(crate) fn next_seq(&self) -> u32 {
        let s = self.shared.seq.get();
        self.shared.seq.set(s.wrapping_add(1));
        s
    }

    /// The groups of this communicator.
    pub(super) fn shape(&self) -> Shape {
        Shape {
            local: self.local_members(),
            remote: self
                .shared
                .local
                .as_ref()
                .map(|_| self.map.as_ref().expect("intercomm map").members.clone()),
        }
    }

    /// Every process of the communicator (both groups of an intercommunicator, ordered by
    /// endpoint so that both groups list them alike) and this process's index.
    pub(super) fn parts(&self) -> (Vec<u32>, usize) {
        match self.shape().remote {
            None => (self.local_members(), self.rank as usize),
            Some(mut all) => {
                all.extend(self.local_members());
                all.sort_unstable();
                let me = self.eng.borrow().rank();
                let i = all.binary_search(&me).expect("member");
                (all, i)
            }
        }
    }

    /// This process's host (see [`SplitType`]).
    fn host(&self) -> [u8; HOST_LEN] {
        host_name(self.eng.borrow().job())
    }

    /// The first round of a blocking agreement over every process of the communicator
    /// (both groups of an intercommunicator), each adding `extra` (see
    /// `agree::offers_windowed`): the processes, their offers, and the tags of later rounds
    /// (see [`settle_pair`](Self::settle_pair)).
    pub(super) fn first_round(&self, extra: &[u8]) -> Result<(Vec<u32>, Vec<Offer>, Tags)> {
        let (parts, me) = self.parts();
        let seq = self.next_seq();
        let tag = coll_tag(seq, 0);
        let ctx = self.ctx.internal().raw();
        let offers = agree::offers_windowed(&self.eng, ctx, tag, &parts, me, extra)?;
        Ok((parts, offers, Tags::Call(seq)))
    }

    /// The pair of a new communicator over `members` (endpoints, the same list in the same
    /// order on each of them, this process among them) whose first-round offers are
    /// `masks`: their lowest common pair, or the one later rounds among them, on this
    /// communicator's internal context, agree on (`agree::settle`).
    pub(super) fn settle_pair<'a>(
        &self,
        what: &'static str,
        members: &[u32],
        masks: impl IntoIterator<Item = &'a Mask>,
        tags: Tags,
    ) -> Result<u32> {
        let mine = self.eng.borrow().rank();
        let me = members
            .iter()
            .position(|&m| m == mine)
            .expect("this process is a member");
        let ctx = self.ctx.internal().raw();
        agree::settle(&self.eng, what, ctx, tags, members, me, masks)
    }

    /// Claim `pair` and make the communicator of `shape` on it, with its collective region
    /// if it may have one (every member makes it here, in a blocking call).
    pub(super) fn make(&self, pair: u32, shape: Shape, info: Info) -> Comm {
        let c = {
            let mut e = self.eng.borrow_mut();
            assemble(&self.eng, &mut e, self.errhandler(), pair, shape, info)
        };
        c.make_coll_shm();
        c
    }

    /// `MPI_ERR_COMM` on an intercommunicator for calls earlybird makes on
    /// intracommunicators only.
    pub(crate) fn check_intra(&self, what: &str) -> Result<()> {
        if self.shared.local.is_some() {
            return Err(Error::new(
                ErrorClass::Comm,
                format!(
                    "{what} on an intercommunicator (earlybird supports it on intracommunicators)"
                ),
            ));
        }
        Ok(())
    }

    fn dup_inner(&self, info: Info) -> Result<Comm> {
        self.check_live()?;
        let (parts, offers, tags) = self.first_round(&[])?;
        let pair = self.settle_pair("comm_dup", &parts, offers.iter().map(|(m, _)| m), tags)?;
        self.inherit(self.make(pair, self.shape(), info))
    }

    /// MPI_Comm_dup: a new communicator with the same group(s) and a new context; it
    /// inherits the error handler and the info hints (not the name). Collective over this
    /// communicator (over both groups of an intercommunicator).
    pub fn dup(&self) -> Result<Comm> {
        let r = self.dup_inner(self.shared.info.borrow().clone());
        self.ret("comm_dup", r)
    }

    /// MPI_Comm_dup_with_info: as [`dup`](Self::dup), with the hints of `info` instead of
    /// this communicator's.
    pub fn dup_with_info(&self, info: &Info) -> Result<Comm> {
        let r = self.dup_inner(info.clone());
        self.ret("comm_dup_with_info", r)
    }

    /// MPI_Comm_idup: start a dup. The request completes when the processes have agreed on
    /// the new context; then [`PendingComm::comm`] gives the communicator (before, using it
    /// is `MPI_ERR_COMM`). Every process must complete its request (wait or test until
    /// done). While the idup is pending this process holds a window of up to 256 context
    /// ids for it, which other communicators made meanwhile do not use.
    pub fn idup<'s>(&self, s: &'s Scope<'s, '_>) -> Result<(Request<'s>, PendingComm)> {
        let r = self.idup_inner(s, self.shared.info.borrow().clone());
        self.ret("comm_idup", r)
    }

    /// MPI_Comm_idup_with_info: as [`idup`](Self::idup), with the hints of `info`.
    pub fn idup_with_info<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        info: &Info,
    ) -> Result<(Request<'s>, PendingComm)> {
        let r = self.idup_inner(s, info.clone());
        self.ret("comm_idup_with_info", r)
    }

    fn idup_inner<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        info: Info,
    ) -> Result<(Request<'s>, PendingComm)> {
        self.check_live()?;
        let inheritance = self.inheritance("comm_idup")?;
        let (parts, me) = self.parts();
        let slot = Rc::new(RefCell::new(Slot::Pending));
        self.shared.holds.set(self.shared.holds.get() + 1);
        let steps = IdupSteps {
            parent: self.shared.clone(),
            agreement: Agreement::new(
                "comm_idup",
                self.ctx.internal().raw(),
                Tags::Call(self.next_seq()),
                parts,
                me,
            ),
            eng: self.eng.clone(),
            errh: self.errhandler(),
            shape: self.shape(),
            info,
            inheritance: Some(inheritance),
            slot: slot.clone(),
        };
        s.inner().note_engine(&self.eng);
        let req = Request::steps(&self.eng, self.origin(), steps);
        let pending = PendingComm {
            slot,
            errh: self.shared.clone(),
        };
        Ok((req, pending))
    }

    /// The communicator over `picked` (indices into the first round's `parts`, in new-rank
    /// order; this process among them) on the pair [`settle_pair`](Self::settle_pair)
    /// gives.
    pub(super) fn make_of(
        &self,
        what: &'static str,
        parts: &[u32],
        offers: &[Offer],
        picked: &[usize],
        tags: Tags,
        info: Info,
    ) -> Result<Comm> {
        let group: Vec<u32> = picked.iter().map(|&i| parts[i]).collect();
        let masks = picked.iter().map(|&i| &offers[i].0);
        let pair = self.settle_pair(what, &group, masks, tags)?;
        let shape = Shape {
            local: group,
            remote: None,
        };
        Ok(self.make(pair, shape, info))
    }

    /// The parent indices whose `(class, key)` has class `mine`, ordered by key, then rank.
    fn members_by_key(all: &[(i64, i32)], mine: i64) -> Vec<usize> {
        let mut picked: Vec<(i32, usize)> = all
            .iter()
            .enumerate()
            .filter(|(_, &(c, _))| c == mine)
            .map(|(i, &(_, k))| (k, i))
            .collect();
        picked.sort_unstable();
        picked.into_iter().map(|(_, i)| i).collect()
    }

    /// MPI_Comm_split: ranks that give the same `color` form a communicator, ordered by
    /// `key` (then by rank here). A rank giving [`UNDEFINED`] gets `None`. Collective; the
    /// context is agreed among the processes of each color only. On an intercommunicator
    /// the result is an intercommunicator per color between the two groups' processes of
    /// that color (`None` where the other group has none).
    pub fn split(&self, color: i32, key: i32) -> Result<Option<Comm>> {
        let r = (|| {
            self.check_live()?;

            if color < 0 && color != UNDEFINED {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!("comm_split: color {color} is negative (use UNDEFINED to opt out)"),
                ));
            }
            if self.is_inter() {
                return self.inter_split(color, key);
            }
            let mut mine = color.to_le_bytes().to_vec();
            mine.extend_from_slice(&key.to_le_bytes());
            let (parts, offers, tags) = self.first_round(&mine)?;
            if color == UNDEFINED {
                return Ok(None);
            }
            let all: Vec<(i64, i32)> = offers
                .iter()
                .map(|(_, x)| (i32_at(x, 0) as i64, i32_at(x, 4)))
                .collect();
            let picked = Self::members_by_key(&all, color as i64);
            self.make_of("comm_split", &parts, &offers, &picked, tags, Info::new())
                .map(Some)
        })();
        self.ret("comm_split", r)
    }

    /// MPI_Comm_split_type: the processes that share a resource of kind `split_type` (see
    /// [`SplitType`]) form a communicator, ordered by `key` (then by rank). Every process
    /// must give the same type, or [`SplitType::Undefined`] to take no part (it gets
    /// `None`); different types are `MPI_ERR_ARG` on every process. The new communicator
    /// gets the hints of `info` (with `mpi_hw_resource_type` naming the resource for the
    /// hardware types). Collective.
    ///
    /// On an intercommunicator (MPI 4.1) the result is an intercommunicator between the
    /// processes of each group that share the resource, as [`split`](Self::split) with the
    /// resource as the color: the host, whose name's 31-bit hash is the color (distinct
    /// hosts whose names hash alike would be taken for one). `HwUnguided` is
    /// `MPI_ERR_COMM` there.
    pub fn split_type(&self, split_type: SplitType, key: i32, info: &Info) -> Result<Option<Comm>> {
        if self.is_inter() {
            return self.split_type_inter(split_type, key, info);
        }
        let r = (|| {
            self.check_live()?;
            self.check_intra("comm_split_type")?;
            // What this process asks for: (type, resource) with resource 0 = opt out,
            // 1 = shared memory, 2 = host, 3 = the process that asked for the endpoints.
            let resource: u8 = match split_type {
                SplitType::Undefined => 0,
                SplitType::Shared | SplitType::HwUnguided => 1,
                SplitType::Endpoints => 3,
                SplitType::HwGuided => match info.get(HW_RESOURCE_TYPE)? {
                    Some("mpi_shared_memory") => 1,
                    Some("host") => 2,
                    _ => 0,
                },
            };
            let kind = if resource == 0 {
                0
            } else {
                split_type.raw() as u8
            };
            let mut mine = vec![kind, resource];
            mine.extend_from_slice(&key.to_le_bytes());
            mine.extend_from_slice(&self.host());
            let (parts, offers, tags) = self.first_round(&mine)?;
            let asked: Vec<&[u8]> = offers.iter().map(|(_, x)| &x[..2]).collect();
            if let Some(w) = asked
                .windows(2)
                .find(|w| w[0][0] != 0 && w[1][0] != 0 && w[0] != w[1])
            {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!(
                        "comm_split_type: the processes asked for different splits (type {} resource {} and type {} resource {}); all must give the same type and resource, or MPI_UNDEFINED",
                        w[0][0], w[0][1], w[1][0], w[1][1]
                    ),
                ));
            }
            if resource == 0 {
                return Ok(None);
            }
            // Every other resource earlybird knows is the host: class = index of the first
            // participant with the same host name (or, for endpoints, the same process
            // that asked for them).
            let askers: Vec<[u8; 12]> = self
                .hosts_of(&parts)
                .iter()
                .map(|&(s, r)| {
                    let mut b = [0u8; 12];
                    b[..8].copy_from_slice(&s.to_le_bytes());
                    b[8..].copy_from_slice(&r.to_le_bytes());
                    b
                })
                .collect();
            let hosts: Vec<&[u8]> = if resource == 3 {
                askers.iter().map(|a| &a[..]).collect()
            } else {
                offers.iter().map(|(_, x)| &x[6..6 + HOST_LEN]).collect()
            };
            let all: Vec<(i64, i32)> = offers
                .iter()
                .zip(&hosts)
                .map(|((_, x), h)| {
                    let class = if x[0] == 0 {
                        -1
                    } else {
                        hosts.iter().position(|o| o == h).expect("own host") as i64
                    };
                    (class, i32_at(x, 2))
                })
                .collect();
            let me = all[self.rank as usize].0;
            let picked = Self::members_by_key(&all, me);
            let mut info = info.clone();
            if split_type == SplitType::HwUnguided {
                let participants = all.iter().filter(|(c, _)| *c >= 0).count();
                if picked.len() == participants {
                    return Ok(None);
                }
                info.set(HW_RESOURCE_TYPE, "host")?;
            }
            self.make_of("comm_split_type", &parts, &offers, &picked, tags, info)
                .map(Some)
        })();
        self.ret("comm_split_type", r)
    }

    /// [`split_type`](Self::split_type) on an intercommunicator.
    fn split_type_inter(
        &self,
        split_type: SplitType,
        key: i32,
        info: &Info,
    ) -> Result<Option<Comm>> {
        let host = match split_type {
            SplitType::Undefined => false,
            SplitType::Shared => true,
            SplitType::HwGuided => matches!(
                info.get(HW_RESOURCE_TYPE),
                Ok(Some("mpi_shared_memory" | "host"))
            ),
            SplitType::HwUnguided | SplitType::Endpoints => {
                let e = Error::new(
                    ErrorClass::Comm,
                    format!("comm_split_type: {split_type:?} on an intercommunicator (earlybird splits intracommunicators only by it)"),
                );
                return self.ret("comm_split_type", Err(e));
            }
        };
        let color = if host {
            // FNV-1a of the host name, in 31 bits.
            let h = self.host().iter().fold(0x811c_9dc5u32, |h, &b| {
                (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
            });
            (h & 0x7fff_ffff) as i32
        } else {
            UNDEFINED
        };
        self.split(color, key)
    }

    /// The endpoints of `group`, checked to be processes of this communicator.
    fn subgroup(&self, what: &str, group: &Group) -> Result<Vec<u32>> {
        if group.serial() != self.eng.borrow().ids.serial {
            return Err(Error::new(
                ErrorClass::Group,
                format!("{what}: the group comes from another job (an endpoint communicator's or its parent's) than the communicator"),
            ));
        }
        let parent = self.local_members();
        let members: Vec<u32> = (0..group.size())
            .map(|r| group.member(r as usize))
            .collect();
        if let Some(m) = members.iter().find(|m| !parent.contains(m)) {
            return Err(Error::new(
                ErrorClass::Group,
                format!("{what}: the group holds process {m}, which is not in the communicator"),
            ));
        }
        Ok(members)
    }

    /// MPI_Comm_create: a communicator over `group`, a subgroup of this communicator's group
    /// (the same on every rank); ranks outside it get `None`. Collective over this
    /// communicator.
    pub fn create(&self, group: &Group) -> Result<Option<Comm>> {
        let r = (|| {
            self.check_live()?;
            if self.is_inter() {
                return self.inter_create(group);
            }
            let members = self.subgroup("comm_create", group)?;
            let (parts, offers, tags) = self.first_round(&[])?;
            let Some(_) = group.rank() else {
                return Ok(None);
            };
            let picked: Vec<usize> = members
                .iter()
                .map(|m| parts.iter().position(|p| p == m).expect("checked member"))
                .collect();
            self.make_of("comm_create", &parts, &offers, &picked, tags, Info::new())
                .map(Some)
        })();
        self.ret("comm_create", r)
    }

    /// MPI_Comm_create_group: a communicator over `group`, a subgroup of this
    /// communicator's group, made by the group's processes only (the others need not take
    /// part); `tag` (0..=TAG_UB) tells apart calls that may run at the same time on one
    /// parent. A process outside the group gets `None` at once.
    pub fn create_group(&self, group: &Group, tag: i32) -> Result<Option<Comm>> {
        let r = (|| {
            self.check_live()?;
            self.check_intra("comm_create_group")?;
            if !(0..=TAG_UB).contains(&tag) {
                return Err(Error::new(
                    ErrorClass::Tag,
                    format!("comm_create_group: invalid tag {tag} (tags run from 0 to {TAG_UB})"),
                ));
            }
            let members = self.subgroup("comm_create_group", group)?;
            let Some(me) = group.rank() else {
                return Ok(None);
            };
            let me = me as usize;
            let ctx = self.ctx.internal().raw();
            let offers = agree::offers_windowed(&self.eng, ctx, tag, &members, me, &[])?;
            let all: Vec<usize> = (0..members.len()).collect();
            let tags = Tags::Fixed(tag);
            self.make_of(
                "comm_create_group",
                &members,
                &offers,
                &all,
                tags,
                Info::new(),
            )
            .map(Some)
        })();
        self.ret("comm_create_group", r)
    }

    /// MPI_Comm_free. Freeing WORLD is `MPI_ERR_COMM`; any later use of this communicator,
    /// through any handle, is `MPI_ERR_COMM`. Operations already started complete. The
    /// attributes' delete callbacks run first, last set first; if one fails, its error is
    /// returned and the communicator stays usable.
    pub fn free(self) -> Result<()> {
        let r = if self.is_predefined()
            && self.eng.borrow().ids.serial != 0
            && self.ctx == ContextId::WORLD
        {
            Err(Error::new(
                ErrorClass::Comm,
                "comm_free of an endpoint communicator's handle: free it with EndpointComm::free",
            ))
        } else if self.is_predefined() {
            Err(Error::new(
                ErrorClass::Comm,
                format!(
                    "comm_free of {}, a predefined communicator",
                    self.shared.name.borrow()
                ),
            ))
        } else if self.shared.freed.get() {
            Err(Error::new(
                ErrorClass::Comm,
                "comm_free of a communicator already freed",
            ))
        } else if let Err(e) = self.delete_all_attrs() {
            Err(e)
        } else {
            self.shared.freed.set(true);
            if self.shared.holds.get() == 0 {
                self.shared.release(&mut self.eng.borrow_mut());
            }
            Ok(())
        };
        self.ret("comm_free", r)
    }

    /// MPI_Comm_compare: `Ident` for handles on one communicator, `Congruent` for the same
    /// group(s) in the same order, `Similar` for the same members, else `Unequal`. An
    /// intercommunicator compares both groups, and is `Unequal` to any intracommunicator.
    pub fn compare(&self, other: &Comm) -> Comparison {
        if Rc::ptr_eq(&self.shared, &other.shared) {
            return Comparison::Ident;
        }
        if self.ctx == other.ctx && !Rc::ptr_eq(&self.eng, &other.eng) {
            let same_job = {
                let (a, b) = (self.eng.borrow(), other.eng.borrow());
                a.ids.serial != 0 && a.job().same(b.job())
            };
            // Two endpoints of one endpoint communicator's job, on one context, with one
            // group: one communicator (its members agreed on a context none of them used).
            if same_job
                && self.shape() == other.shape()
                && self.group().compare(&other.group()) == Comparison::Ident
            {
                return Comparison::Aliased;
            }
        }
        let local = self.group().compare(&other.group());
        let both = match (self.shape().remote, other.shape().remote) {
            (None, None) => local,
            (Some(a), Some(b)) => match (local, self.group_of(a).compare(&other.group_of(b))) {
                (Comparison::Unequal, _) | (_, Comparison::Unequal) => Comparison::Unequal,
                (Comparison::Ident, Comparison::Ident) => Comparison::Ident,
                _ => Comparison::Similar,
            },
            _ => Comparison::Unequal,
        };
        match both {
            Comparison::Ident => Comparison::Congruent,
            c => c,
        }
    }

    /// MPI_Comm_set_name.
    pub fn set_name(&self, name: &str) -> Result<()> {
        const MAX: usize = 127;
        if name.len() > MAX {
            let e = Error::new(ErrorClass::Arg, format!("comm_set_name: name of {} bytes is longer than MPI_MAX_OBJECT_NAME - 1 ({MAX})", name.len()));
            return self.ret("comm_set_name", Err(e));
        }
        *self.shared.name.borrow_mut() = name.to_string();
        Ok(())
    }

    /// MPI_Comm_get_name (empty for a communicator never named).
    pub fn name(&self) -> String {
        self.shared.name.borrow().clone()
    }

    /// MPI_Comm_set_info: add the hints of `info` to the communicator's (a key set again
    /// takes the new value; keys `info` does not name keep theirs). Every handle on the
    /// communicator sees them; communicators duplicated earlier do not.
    ///
    /// The `mpi_assert_*` keys take effect on this communicator from this call on (see
    /// [`crate::assertions`]); a key set to `"false"` withdraws the communicator's own promise
    /// (not one made at init).
    pub fn set_info(&self, info: &Info) -> Result<()> {
        let r = self.check_live().and_then(|()| {
            {
                let mut mine = self.shared.info.borrow_mut();
                self.shared.coll_forced.replace(None);
                *self.shared.coll_repeat.borrow_mut() = Default::default();
                info.iter().try_for_each(|(k, v)| mine.set(k, v))?;
            }
            self.refresh_assertions(&mut self.eng.borrow_mut());
            Ok(())
        });
        self.ret("comm_set_info", r)
    }

    /// MPI_Comm_get_info: a new info object with the communicator's hints: every hint set
    /// (through set_info, dup_with_info, idup_with_info, split_type, or inherited through
    /// dup), so a program reads back what it set. earlybird acts on the `mpi_assert_*` keys
    /// (see [`crate::assertions`]) and on the collective algorithm keys.
    pub fn get_info(&self) -> Result<Info> {
        let r = self
            .check_live()
            .map(|()| self.shared.info.borrow().clone());
        self.ret("comm_get_info", r)
    }
}

/// The little-endian i32 at `at` of `b`.
fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
