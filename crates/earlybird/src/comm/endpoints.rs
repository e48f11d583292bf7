//! Endpoint communicators (seed 003): several ranks of one communicator in one process,
//! each driven by its own thread with state of its own.
//!
//! [`Comm::create_endpoints`] is collective over the parent. Every process asks for a
//! number of endpoints (zero allowed); the new communicator's ranks are ordered by parent
//! rank, then by endpoint index. Its ranks form a job of their own: one shared segment with a
//! ring per ordered pair of endpoints, made by the parent's rank 0 and mapped by every
//! process (the same code for threads of one process and for processes), so each endpoint
//! has its own matching queues, requests and rings, and no endpoint ever waits for another's
//! thread (an endpoint is an engine, exactly as a rank of the job the program was started
//! in). The job is linked to the job the process lives in: an abort of either ends the
//! waits of both, and the launcher watched is the same.
//!
//! A handle is an [`Endpoint`]: `Send`, so it moves to the thread that will drive it, which
//! calls [`Endpoint::attach`] and gets an [`EndpointComm`], that thread's rank of the new
//! communicator (a [`Comm`] through `Deref`). From it come `dup`, `split`, `create`,
//! collectives, windows and channels as from any communicator.
//!
//! # The seed's group rules
//!
//! Endpoint 0 of each process is the MPI process of its parent rank; the others are new
//! processes that belong to no other group. So with one endpoint per process, the new
//! communicator's group is IDENT to the parent's ([`Comm::compare`] says CONGRUENT) and
//! `translate_ranks` between them is the identity.
//!
//! # Freeing (left open by the seed)
//!
//! Each thread frees its own handle with [`EndpointComm::free`] (a drop does the same).
//! Freeing is collective over the endpoint communicator, as MPI_Comm_free is: the handle's
//! attributes are deleted (each rank runs its delete callbacks once, for its own copy), then
//! the endpoint keeps serving its peers until every endpoint of the communicator has freed
//! its handle. Communicators derived from an endpoint communicator are its endpoint's: free
//! them first (they report MPI_ERR_COMM once the endpoint is freed). A thread holding several
//! handles frees them together with [`EndpointComm::free_all`] (freeing them one after the
//! other would wait, in the first, for the others).
//!
//! # Error handlers
//!
//! The endpoint communicator starts with the parent's error handler when it is a predefined
//! one (ERRORS_ARE_FATAL, ERRORS_RETURN, ERRORS_ABORT). A handler made by
//! [`Comm::create_errhandler`] is a closure of the parent's thread, which cannot move to the
//! endpoints' threads: the endpoints start with ERRORS_ARE_FATAL, and may set their own.
#![forbid(unsafe_code)]

use super::agree::{self, coll_tag};
use super::errhandler::ErrHandler;
use super::Comm;
use crate::assertions::Assertions;
use crate::bootstrap::{Identities, ProcId};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::job::{JobSegment, JobShape};
use crate::info::Info;
use crate::p2p::engine::Engine;
use crate::request::EngineRef;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// Most endpoints one endpoint communicator may have (its segment holds a ring per ordered
/// pair of them).
pub const MAX_ENDPOINTS: u32 = 256;

/// A predefined error handler, as an endpoint takes it to its thread.
#[derive(Clone, Copy, Debug)]
enum Handler {
    Fatal,
    Return,
    Abort,
}

/// One rank of an endpoint communicator, not yet driven by a thread. `Send`: move it to the
/// thread that will drive it, which calls [`attach`](Endpoint::attach).
#[derive(Debug)]
pub struct Endpoint {
    job: JobSegment,
    rank: u32,
    index: u32,
    count: u32,
    ids: Arc<Identities>,
    threads: bool,
    asserts: Assertions,
    handler: Handler,
    attached: bool,
}

impl Drop for Endpoint {
    /// An endpoint dropped without being attached counts as freed at once, so that the
    /// others' frees do not wait for it (messages sent to it are never received).
    fn drop(&mut self) {
        if !self.attached {
            self.job.enter_finalize();
            self.job.set_finalized(self.rank);
        }
    }
}

impl Endpoint {
    /// This endpoint's rank in the new communicator.
    pub fn rank(&self) -> i32 {
        self.rank as i32
    }

    /// Its index among the endpoints this process asked for (0 for the first).
    pub fn index(&self) -> i32 {
        self.index as i32
    }

    /// Drive this endpoint from the calling thread: its rank of the endpoint communicator.
    /// The returned handle stays on this thread (it is neither `Send` nor `Sync`).
    pub fn attach(mut self) -> Result<EndpointComm> {
        self.attached = true;
        let mut e = Engine::new(self.job.clone(), self.rank, self.threads).map_err(|e| {
            Error::new(
                ErrorClass::Endpoints,
                format!(
                    "comm_create_endpoints: endpoint {} cannot start: {}",
                    self.rank,
                    e.detail()
                ),
            )
        })?;
        e.set_assertions(self.asserts);
        e.ids = self.ids.clone();
        let eng: EngineRef = Rc::new(RefCell::new(e));
        let comm = Comm::endpoints_comm(eng.clone());
        comm.set_errhandler(match self.handler {
            Handler::Fatal => ErrHandler::Fatal,
            Handler::Return => ErrHandler::Return,
            Handler::Abort => ErrHandler::Abort,
        });
        let self_comm = Comm::self_comm(eng.clone());
        Ok(EndpointComm {
            rank: super::driven::Driven::new(eng, comm, self_comm),
            index: self.index,
            count: self.count,
        })
    }
}

/// One thread's rank of an endpoint communicator (see [`Endpoint::attach`]); a [`Comm`]
/// through `Deref`. Freed by [`free`](Self::free) or when dropped.
pub struct EndpointComm {
    rank: super::driven::Driven,
    index: u32,
    count: u32,
}

impl std::fmt::Debug for EndpointComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointComm")
            .field("comm", self.comm())
            .field("index", &self.index)
            .field("count", &self.count)
            .finish()
    }
}

impl std::ops::Deref for EndpointComm {
    type Target = Comm;
    fn deref(&self) -> &Comm {
        self.comm()
    }
}

impl EndpointComm {
    /// The endpoint communicator, as this rank sees it.
    pub fn comm(&self) -> &Comm {
        self.rank.world()
    }

    /// MPI_COMM_SELF of this endpoint: a communicator of it alone.
    pub fn comm_self(&self) -> &Comm {
        self.rank.comm_self()
    }

    /// Drive this endpoint's progress once (for threads that poll).
    pub fn progress(&self) {
        self.rank.progress();
    }

    /// MPI_Comm_free of this handle (see the module doc): collective over the endpoint
    /// communicator. Its attributes are deleted first; a delete callback's error is returned
    /// after the rest of the free has run.
    pub fn free(self) -> Result<()> {
        EndpointComm::free_all(vec![self])
    }

    /// Free several handles held by the calling thread together (each as
    /// [`free`](Self::free)); the first error is returned once all are freed.
    pub fn free_all(handles: Vec<EndpointComm>) -> Result<()> {
        let mut ranks: Vec<super::driven::Driven> = handles.into_iter().map(|h| h.rank).collect();
        let mut first = Ok(());
        for r in &mut ranks {
            let attrs = r.delete_world_attrs();
            first = first.and(attrs);
        }
        first.and(super::driven::Driven::finish_all(&mut ranks))
    }
}

impl Comm {
    /// Seed 003's MPI_Comm_create_endpoints: `my_num_ep` ranks of a new communicator for
    /// this process, in endpoint-index order. Collective over this communicator; every
    /// process may ask a different number, zero included (such a process takes no part in
    /// the new communicator). Ranks are ordered by parent rank, then endpoint index, and the
    /// first endpoint of each process is its parent rank's MPI process (see the module doc).
    ///
    /// Errors, on every process: MPI_ERR_COMM on an intercommunicator, MPI_ERR_ARG for a
    /// negative count (MPIX_ERR_ENDPOINTS on the processes that asked correctly, naming the
    /// rank that did not), MPIX_ERR_ENDPOINTS with the reason when the endpoints cannot be
    /// made (more than [`MAX_ENDPOINTS`] in all, no shared memory for them). `info` is
    /// accepted and holds no hint earlybird reads.
    pub fn create_endpoints(&self, my_num_ep: i32, info: &Info) -> Result<Vec<Endpoint>> {
        let _ = info;
        let r = (|| {
            self.check_live()?;
            if self.is_inter() {
                return Err(Error::new(
                    ErrorClass::Comm,
                    "comm_create_endpoints: the parent is an intercommunicator; endpoints are made from intracommunicators",
                ));
            }
            let ctx = self.ctx.internal().raw();
            let (parts, me) = self.parts();
            // 1. Every process's count.
            let tag = coll_tag(self.next_seq(), 0);
            let all = agree::exchange(
                &self.eng,
                ctx,
                tag,
                &parts,
                me,
                my_num_ep.to_le_bytes().to_vec(),
            )?;
            let counts: Vec<i32> = all
                .iter()
                .map(|b| i32::from_le_bytes(b[..4].try_into().expect("4 bytes")))
                .collect();
            if let Some((r, &c)) = counts.iter().enumerate().find(|(_, c)| **c < 0) {
                return Err(if r == me {
                    Error::new(
                        ErrorClass::Arg,
                        format!("comm_create_endpoints: my_num_ep {c} is negative"),
                    )
                } else {
                    Error::new(
                        ErrorClass::Endpoints,
                        format!(
                            "comm_create_endpoints: rank {r} of the parent asked for {c} endpoints"
                        ),
                    )
                });
            }
            let total: u64 = counts.iter().map(|&c| c as u64).sum();
            if total > u64::from(MAX_ENDPOINTS) {
                return Err(Error::new(
                    ErrorClass::Endpoints,
                    format!("comm_create_endpoints: {total} endpoints asked for in all ({counts:?} per parent rank); an endpoint communicator holds at most {MAX_ENDPOINTS}"),
                ));
            }
            if total == 0 {
                return Ok(Vec::new());
            }
            let total = total as u32;
            // 2. The new job's segment: rank 0 makes it, every process maps it.
            let shape = JobShape::for_ranks(total);
            let region = self
                .shared_region(
                    shape.total_bytes(),
                    shape.reserved_bytes(),
                    &format!("shared memory for {total} endpoints"),
                    ErrorClass::Endpoints,
                    |seg, created| {
                        if created {
                            Ok(JobSegment::init(seg, shape))
                        } else {
                            JobSegment::attach(seg)
                        }
                    },
                )
                .map_err(|e| {
                    Error::new(e.class(), format!("comm_create_endpoints: {}", e.detail()))
                })?;
            let (job, serial, fd) = (region.mapped, region.serial, region.fd);
            // 3. Who the new ranks are.
            let offsets: Vec<u32> = counts
                .iter()
                .scan(0u32, |acc, &c| {
                    let o = *acc;
                    *acc += c as u32;
                    Some(o)
                })
                .collect();
            let (ids, threads, outer_rank, asserts) = {
                let e = self.eng.borrow();
                let mut id: Vec<ProcId> = Vec::with_capacity(total as usize);
                let mut host = Vec::with_capacity(total as usize);
                let mut space = Vec::with_capacity(total as usize);
                for (p, &c) in counts.iter().enumerate() {
                    let jr = parts[p] as usize;
                    for k in 0..c as u32 {
                        let r = offsets[p] + k;
                        id.push(if k == 0 { e.ids.id[jr] } else { (serial, r) });
                        host.push(e.ids.id[jr]);
                        space.push(e.ids.space[jr]);
                    }
                }
                let ids = Identities {
                    serial,
                    id,
                    host,
                    space,
                };
                (
                    Arc::new(ids),
                    e.ranks_are_threads(),
                    e.rank(),
                    e.assertions(),
                )
            };
            let mut job = job.within(self.eng.borrow().job().clone(), outer_rank);
            if let Some(fd) = fd {
                job.list_in_root(fd);
            }
            let pid = crate::sys::process::pid();
            let mine = offsets[me]..offsets[me] + my_num_ep as u32;
            for r in mine.clone() {
                job.set_pid(r, pid);
            }
            // 4. No process goes on before every process has written its endpoints' pids.
            let tag = coll_tag(self.next_seq(), 0);
            agree::exchange(&self.eng, ctx, tag, &parts, me, vec![1])?;
            let handler = match self.errhandler() {
                ErrHandler::Return => Handler::Return,
                ErrHandler::Abort => Handler::Abort,
                _ => Handler::Fatal,
            };
            Ok(mine
                .enumerate()
                .map(|(k, rank)| Endpoint {
                    job: job.clone(),
                    rank,
                    index: k as u32,
                    count: my_num_ep as u32,
                    ids: ids.clone(),
                    threads,
                    asserts,
                    handler,
                    attached: false,
                })
                .collect())
        })();
        self.ret("comm_create_endpoints", r)
    }

    /// Seed 003's MPI_Comm_num_endpoints: how many ranks of this communicator the calling
    /// rank's process asked for together with it (1 on a communicator without endpoints),
    /// and which of them this handle is (its index among them, in rank order).
    pub fn num_endpoints(&self) -> (i32, i32) {
        let e = self.eng.borrow();
        let mine = e.ids.host[e.rank() as usize];
        let members = self.local_members();
        let same: Vec<u32> = members
            .into_iter()
            .filter(|&m| e.ids.host[m as usize] == mine)
            .collect();
        let idx = same.iter().position(|&m| m == e.rank()).unwrap_or(0);
        (same.len() as i32, idx as i32)
    }

    /// Seed 003's MPI_Comm_has_sharing: whether two processes of this communicator (either
    /// group of an intercommunicator) share an address space: ranks of a thread job, or
    /// endpoints of one process.
    pub fn has_sharing(&self) -> bool {
        let mut members = self.local_members();
        if let Some(r) = self.shape().remote {
            members.extend(r);
        }
        self.group_of(members).has_sharing()
    }

    /// The ranks' [`ProcId`]s of the hosts of `members` (what MPIX_COMM_TYPE_ENDPOINTS
    /// splits by).
    pub(super) fn hosts_of(&self, members: &[u32]) -> Vec<ProcId> {
        let e = self.eng.borrow();
        members.iter().map(|&m| e.ids.host[m as usize]).collect()
    }
}
