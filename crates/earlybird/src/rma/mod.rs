//! rma — one-sided communication (MPI 4.1 chapter 12): windows, their operations and their
//! synchronisation, on loads, stores and atomics.
//!
//! # Design
//!
//! Every window has one shared segment (`fabric::window`): one
//! control block per rank and, for `win_allocate` / `win_allocate_shared`, every rank's
//! memory. Rank 0 creates it, every rank maps it. So an origin **does** its operations: a put
//! is a copy into the target's memory, a get a copy out of it, an accumulate a hardware
//! atomic per element (or, where the element cannot be one atomic, a read-modify-write under
//! the target's accumulate lock, a word in its control block). Every operation is complete,
//! locally and at the target, when its call returns, so:
//!
//! - passive target needs nothing from the target: it may compute and never call MPI;
//! - `flush*` have nothing left to wait for: a full memory fence after plain stores (puts),
//!   nothing but a compiler fence after accumulates alone on x86-64, where the locked
//!   instruction of each accumulate orders memory as a fence does; the request of `rput` and
//!   friends is complete when it is returned;
//! - accumulates from one origin reach the target in program order, which is the strictest
//!   `accumulate_ordering` (`rar,raw,war,waw`); `none` is accepted and changes nothing.
//!
//! An accumulate or fetch_and_op of MPI_SUM (and NO_OP, REPLACE for fetch_and_op) on a 4- or
//! 8-byte integer goes straight to one atomic instruction after its checks; every other goes
//! through the element walk of `acc`, which picks the same atomic for the same element, so the
//! two roads stay atomic against each other.
//!
//! Fence is a barrier on the fence words of the control blocks (a store and a load per
//! rank, no messages). A lock is a readers/writer word in the target's control block.
//!
//! **PSCW.** Each control block holds `post[q]` (how many exposure epochs rank `q` has opened
//! to this rank, stored by `q`) and, per origin `q`, two mail boxes (see `fabric::window`). An
//! origin ends an access epoch by storing the epoch's number in its box to each target
//! (alternating boxes); the target's wait polls that word. Puts of the epoch with a contiguous
//! target of up to a mail box's payload (232 bytes, 8 more per put) are not copied into the
//! target's memory but kept by the origin and written into the box with the epoch's number, in
//! one burst at complete; the target applies them when it waits. They need no post, so
//! `win_start` does not wait for the posts (MPI allows either); the first operation that
//! reaches a target's memory itself (a get, an accumulate, a larger or strided-target put)
//! waits for that target's post. A halo exchange with small puts then costs the target one
//! cache-line transfer per epoch and origin, as a fence does, where post-then-complete costs
//! two. Before an origin fills a box it waits until the target has applied the epoch that used
//! it last (two epochs back): the target says so in each box it sends the origin and, for an
//! origin it sends nothing to, in a report line of its own.
//!
//! `win_create` exposes memory the program hands over (a `Vec`, returned by
//! [`Win::free_into`]): ranks that are threads of one process reach it directly; ranks in
//! other processes reach it with `process_vm_readv`/`writev`, and then every accumulate on
//! that memory takes the target's accumulate lock (one rule per target memory, so that
//! accumulates stay atomic against each other), held across all the elements of the call: such
//! an accumulate is atomic as a whole, as MPICH's are (a structure of bytes replaced by one
//! and read back by another, as a linked list's next pointer, is never seen half written).
//! Where hardware atomics serve, an accumulate is atomic per element, which is what MPI
//! promises. Dynamic windows publish their attached
//! regions in an attach table that origins read under a readers/writer word, so that a detach
//! waits for operations in flight.
//!
//! # Safety of the Rust API
//!
//! Peers write a window's memory at any time, so safe code never holds a Rust reference into
//! it: local access goes through [`LocalView`] (element copies in and out) and, for shared
//! windows, through the views [`Win::shared_query`] returns. Memory given to `win_create` or
//! `win_attach` is owned by the window until the collective [`Win::free`] (or
//! [`Win::detach`]); a window dropped without `free` leaks that memory rather than hand it
//! back while a peer might still write it. Lock and PSCW epochs are values
//! ([`Lock`], [`LockAll`], [`AccessEpoch`], [`ExposureEpoch`]) that end when consumed or
//! dropped; fence epochs are opened and closed by [`Win::fence`]. What the types cannot
//! rule out (an operation outside any epoch, nested epochs) is MPI_ERR_RMA_SYNC.
//!
//! # Standard section(s)
//! MPI 4.1 §12 (one-sided communications), §9.3.2 (error handlers for windows).
#![forbid(unsafe_code)]

mod acc;
mod counter;
mod membership;
mod ops;
mod persist;
mod sync;

pub use counter::{SyncCounter, MODE_WIN_ACCUMULATE, MODE_WIN_GET, MODE_WIN_PUT};
pub use ops::At;
pub use sync::{AccessEpoch, ExposureEpoch, Lock, LockAll};

use crate::comm::group::Group;
use crate::comm::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::window::{Mem, WinSegment, WinShape, Word};
use crate::info::Info;
use crate::sys::exposed::ExposedMemory;
use crate::sys::plain::Plain;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// MPI_MODE_NOCHECK: no conflicting lock or matching post needs checking.
pub const MODE_NOCHECK: u32 = 1024;
/// MPI_MODE_NOSTORE: the local window was not updated by stores since the last sync.
pub const MODE_NOSTORE: u32 = 2048;
/// MPI_MODE_NOPUT: the local window will not be updated by put or accumulate until the next
/// sync.
pub const MODE_NOPUT: u32 = 4096;
/// MPI_MODE_NOPRECEDE: the fence completes no RMA calls of this rank.
pub const MODE_NOPRECEDE: u32 = 8192;
/// MPI_MODE_NOSUCCEED: the fence starts no RMA calls of this rank.
pub const MODE_NOSUCCEED: u32 = 16384;

/// How a window's memory was made (MPI_WIN_CREATE_FLAVOR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// MPI_WIN_FLAVOR_CREATE: memory the program handed over.
    Create = 1,
    /// MPI_WIN_FLAVOR_ALLOCATE.
    Allocate = 2,
    /// MPI_WIN_FLAVOR_DYNAMIC: memory attached later.
    Dynamic = 3,
    /// MPI_WIN_FLAVOR_SHARED.
    Shared = 4,
}

/// MPI_WIN_MODEL: earlybird's windows are always unified (a store by the owner and a put by a
/// peer reach the same memory, with no copy to reconcile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// MPI_WIN_SEPARATE (never used here).
    Separate = 1,
    /// MPI_WIN_UNIFIED.
    Unified = 2,
}

/// The lock types of [`Win::lock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockType {
    /// MPI_LOCK_EXCLUSIVE.
    Exclusive = 234,
    /// MPI_LOCK_SHARED.
    Shared = 235,
}

/// The function a user error handler on windows runs (MPI_Win_errhandler_function).
type WinHandlerFn = dyn Fn(&Win, &Error);

/// How errors on a window reach the program (MPI_Errhandler for windows). The default is
/// [`WinErrHandler::Fatal`], as MPI says for windows.
#[derive(Clone, Default)]
pub enum WinErrHandler {
    /// MPI_ERRORS_ARE_FATAL: print the error and end the job.
    #[default]
    Fatal,
    /// MPI_ERRORS_RETURN.
    Return,
    /// MPI_ERRORS_ABORT: end the job with the error's code.
    Abort,
    /// A handler made by [`Win::create_errhandler`].
    User(Rc<WinHandlerFn>),
}

impl std::fmt::Debug for WinErrHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WinErrHandler::Fatal => "MPI_ERRORS_ARE_FATAL",
            WinErrHandler::Return => "MPI_ERRORS_RETURN",
            WinErrHandler::Abort => "MPI_ERRORS_ABORT",
            WinErrHandler::User(_) => "user error handler",
        })
    }
}

/// One rank's part of a window as every rank knows it.
#[derive(Debug, Clone)]
struct Part {
    /// Its memory (`None` for dynamic windows: regions are looked up at each access).
    mem: Option<Mem>,
    size: usize,
    disp_unit: usize,
    pid: u32,
}

/// The info keys a window understands, as in force.
#[derive(Debug, Clone)]
struct Hints {
    no_locks: bool,
    accumulate_ordering: String,
    accumulate_ops: String,
    same_size: bool,
    same_disp_unit: bool,
    alloc_shared_noncontig: bool,
}

impl Hints {
    fn from_info(info: &Info) -> Result<Hints> {
        let flag = |k: &str| -> Result<bool> {
            Ok(match info.get(k)? {
                None => false,
                Some("true") => true,
                Some("false") => false,
                Some(v) => {
                    return Err(Error::new(
                        ErrorClass::InfoValue,
                        format!("window info {k}={v:?}: expected true or false"),
                    ))
                }
            })
        };
        let ordering = info
            .get("accumulate_ordering")?
            .unwrap_or("rar,raw,war,waw")
            .to_string();
        for part in ordering.split(',') {
            if !matches!(part.trim(), "rar" | "raw" | "war" | "waw" | "none") {
                return Err(Error::new(
                    ErrorClass::InfoValue,
                    format!("window info accumulate_ordering={ordering:?}: {part:?} is none of rar, raw, war, waw, none"),
                ));
            }
        }
        let ops = info
            .get("accumulate_ops")?
            .unwrap_or("same_op_no_op")
            .to_string();
        if !matches!(ops.as_str(), "same_op_no_op" | "same_op") {
            return Err(Error::new(
                ErrorClass::InfoValue,
                format!("window info accumulate_ops={ops:?}: expected same_op_no_op or same_op"),
            ));
        }
        Ok(Hints {
            no_locks: flag("no_locks")?,
            accumulate_ordering: ordering,
            accumulate_ops: ops,
            same_size: flag("same_size")?,
            same_disp_unit: flag("same_disp_unit")?,
            alloc_shared_noncontig: flag("alloc_shared_noncontig")?,
        })
    }

    fn to_info(&self) -> Info {
        let mut i = Info::new();
        let b = |v: bool| if v { "true" } else { "false" };
        // Keys and values are short and valid: set cannot fail.
        let _ = i.set("no_locks", b(self.no_locks));
        let _ = i.set("accumulate_ordering", &self.accumulate_ordering);
        let _ = i.set("accumulate_ops", &self.accumulate_ops);
        let _ = i.set("same_size", b(self.same_size));
        let _ = i.set("same_disp_unit", b(self.same_disp_unit));
        let _ = i.set("alloc_shared_noncontig", b(self.alloc_shared_noncontig));
        i
    }
}

/// Memory a window owns on the program's behalf: what `win_create` or `win_attach` was given.
struct Owned {
    value: Box<dyn Any>,
}

/// A region attached to a dynamic window.
struct AttachedRegion {
    addr: u64,
    len: usize,
    owned: Owned,
}

/// Polls of a control word before a wait turns to the progress engine (a few
/// microseconds).
const PRE_SPIN: u32 = 4096;

pub(crate) struct WinInner {
    /// A private duplicate of the creating communicator: the window's group, and the context
    /// of its collectives (creation, free).
    comm: Comm,
    rank: usize,
    size: usize,
    flavor: Flavor,
    seg: WinSegment,
    parts: Vec<Part>,
    /// Per target: the payloads of this rank's two mail boxes in its block (PSCW epochs).
    outbox: Vec<[Mem; 2]>,
    /// Per origin: the payloads of its two mail boxes in this rank's block.
    inbox: Vec<[Mem; 2]>,
    /// Whether every rank reaches every rank's memory with loads and stores (the memory is
    /// in the segment, or every rank is in this process), so that accumulates use hardware
    /// atomics.
    atomics: bool,
    epochs: RefCell<sync::Epochs>,
    /// The window's serial (the same on every rank; see `segment`), which sync counters carry.
    serial: u64,
    /// Per window rank, its member id: the rank it had when the window was made, or, for a
    /// rank that joined with `win_change_comm`, one given then. Sync counters name their
    /// owner by it, so that they outlive a change of communicator.
    ids: Vec<u32>,
    /// The member id the next rank to join will get (ids are never given twice).
    next_id: u32,
    /// This rank's sync counters (seed 001).
    counters: RefCell<counter::Counters>,
    /// This rank's persistent state (seed 004), for windows made with `pmem_is_pmem=true`.
    pmem: RefCell<Option<crate::pmem::Persist>>,
    /// Whether this rank has called an operation that writes a target's memory since its
    /// last persisting fence (which must then commit: see `persist`).
    wrote: Cell<bool>,
    /// Whether this rank has written window memory with plain stores (puts, accumulates
    /// under the lock) since its last full fence (see `flush`).
    stores: Cell<bool>,
    hints: RefCell<Hints>,
    name: RefCell<String>,
    errh: RefCell<WinErrHandler>,
    owned: RefCell<Option<Owned>>,
    attached: RefCell<Vec<AttachedRegion>>,
    freed: Cell<bool>,
}

/// An RMA window (MPI_Win). Made collectively over a communicator by
/// [`Comm::win_allocate`], [`Comm::win_allocate_shared`], [`Comm::win_create`] or
/// [`Comm::win_create_dynamic`]; freed collectively by [`Win::free`].
pub struct Win {
    pub(crate) inner: Rc<WinInner>,
}

impl std::fmt::Debug for Win {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Win")
            .field("name", &*self.inner.name.borrow())
            .field("flavor", &self.inner.flavor)
            .field("rank", &self.inner.rank)
            .field("size", &self.inner.size)
            .finish()
    }
}

fn err(class: ErrorClass, msg: impl Into<String>) -> Error {
    Error::new(class, msg)
}

/// Each rank's record at creation: bytes, displacement unit, pid, address of its memory.
const RECORD: usize = 4;

impl Comm {
    /// A window made under NO_RMA: MPIX_ERR_ASSERTION (the same on every rank, since the
    /// assertion is made at init: no rank waits for another).
    fn no_rma(&self, call: &str) -> Result<()> {
        let a = crate::assertions::Assertions::NO_RMA;
        if self.eng.borrow().assertions().contains(a) {
            return Err(crate::assertions::broken(call, a, "a window is made"));
        }
        Ok(())
    }

    /// MPI_Win_allocate: a window of `bytes` bytes of memory the library allocates on each
    /// rank (zero-filled), in a segment every rank of the communicator maps. `disp_unit` is
    /// the unit of displacements into this rank's memory (commonly the element size).
    ///
    /// With the info key `pmem_is_pmem=true` the window is persistent (seed 004's
    /// `MPI_Win_allocate_pmem`; see [`crate::pmem`]): its memory is a file under the root
    /// path, and the `*_persist` synchronisations commit it as checkpoint versions.
    pub fn win_allocate(&self, bytes: usize, disp_unit: usize, info: &Info) -> Result<Win> {
        if let Err(e) = self.no_rma("win_allocate") {
            return self.ret("win_allocate", Err(e));
        }
        let r = match crate::pmem::Hints::from_info(info, true) {
            Ok(None) => Win::make(self, Flavor::Allocate, bytes, disp_unit, info, None, None),
            Ok(Some(h)) => Win::make_pmem(self, bytes, disp_unit, info, Ok(h)),
            Err(e) => Win::make_pmem(self, bytes, disp_unit, info, Err(e)),
        };
        self.ret("win_allocate", r)
    }

    /// MPI_Win_allocate_shared: as [`win_allocate`](Self::win_allocate), and every rank may
    /// load and store every other rank's memory directly ([`Win::shared_query`]). The ranks'
    /// memories are contiguous, in rank order, unless the info key `alloc_shared_noncontig`
    /// is `true` (then each starts on a page).
    pub fn win_allocate_shared(&self, bytes: usize, disp_unit: usize, info: &Info) -> Result<Win> {
        let r = Win::make(self, Flavor::Shared, bytes, disp_unit, info, None, None);
        self.ret("win_allocate_shared", r)
    }

    /// MPI_Win_create: a window over `mem`, which the window owns until [`Win::free_into`]
    /// hands it back. `disp_unit` bytes per displacement unit.
    pub fn win_create<T: Plain>(&self, mem: Vec<T>, disp_unit: usize, info: &Info) -> Result<Win> {
        self.win_create_exposed(mem, disp_unit, info)
    }

    /// MPI_Win_create over any [`ExposedMemory`] (the C ABI's: the program's pointer and
    /// size), which the window owns until it is freed ([`Win::free_into`] hands a `Vec` back).
    pub fn win_create_exposed<M: ExposedMemory>(
        &self,
        mem: M,
        disp_unit: usize,
        info: &Info,
    ) -> Result<Win> {
        let bytes = mem.bytes();
        let addr = mem.address();
        let owned = Owned {
            value: Box::new(mem),
        };
        let r = Win::make(
            self,
            Flavor::Create,
            bytes,
            disp_unit,
            info,
            Some((addr, owned)),
            None,
        )
        .and_then(|w| w.flush_only(info));
        self.ret("win_create", r)
    }

    /// MPI_Win_create_dynamic: a window with no memory until ranks [`attach`](Win::attach)
    /// some; displacements are addresses ([`Attached::address`]), the unit 1.
    pub fn win_create_dynamic(&self, info: &Info) -> Result<Win> {
        let r = Win::make(self, Flavor::Dynamic, 0, 1, info, None, None)
            .and_then(|w| w.flush_only(info));
        self.ret("win_create_dynamic", r)
    }
}

impl Win {
    fn make(
        comm: &Comm,
        flavor: Flavor,
        bytes: usize,
        disp_unit: usize,
        info: &Info,
        user: Option<(u64, Owned)>,
        pmem: Option<persist::Local>,
    ) -> Result<Win> {
        comm.check_live()?;
        comm.no_rma("window creation")?;
        if comm.is_inter() {
            return Err(err(
                ErrorClass::Comm,
                "windows are made over an intracommunicator, not an intercommunicator",
            ));
        }
        let hints = Hints::from_info(info)?;
        let comm = comm.dup()?;
        let size = comm.size() as usize;
        let pid = crate::sys::process::pid();
        // A bad local argument still takes part in the exchange (others would wait for this
        // rank), with a zero unit that every rank reads as "failed".
        let (pmem_word, pmem_err) = persist::record_word(&pmem);
        let bad = if let Some(e) = pmem_err {
            Some(e)
        } else if disp_unit == 0 {
            Some(err(
                ErrorClass::Disp,
                "displacement unit 0: it must be a positive number of bytes",
            ))
        } else if bytes > isize::MAX as usize {
            Some(err(ErrorClass::Size, format!("window of {bytes} bytes")))
        } else {
            None
        };
        let addr = user.as_ref().map_or(pmem_word, |u| u.0);
        let mine = [
            bytes as u64,
            if bad.is_some() { 0 } else { disp_unit as u64 },
            pid as u64,
            addr,
        ];
        let mut all = vec![0u64; RECORD * size];
        comm.allgather(&mine[..], &mut all[..])?;
        if let Some(e) = bad {
            return Err(e);
        }
        if let Some(r) = (0..size).find(|&r| all[r * RECORD + 1] == 0) {
            return Err(err(
                ErrorClass::Disp,
                format!("rank {r} could not take part in window creation (a bad size, displacement unit, or persistent window)"),
            ));
        }
        let files = persist::map_files(&comm, flavor, &all, pmem.as_ref())?;
        let w = Self::assemble(comm, flavor, hints, &all, user.map(|u| u.1), None, files)?;
        if let Some(l) = pmem {
            w.install_pmem(l)?;
        }
        Ok(w)
    }

    /// The window over `comm` (its private duplicate) once every rank's record (`RECORD`
    /// words: bytes, displacement unit, pid, address of its memory) is known: the segment,
    /// made here over `comm`, every rank's part, and a fresh state. `kept`, for a window that
    /// changes its communicator: its serial and the ranks' member ids, which stay.
    fn assemble(
        comm: Comm,
        flavor: Flavor,
        hints: Hints,
        all: &[u64],
        owned: Option<Owned>,
        kept: Option<(u64, Vec<u32>, u32)>,
        files: Option<persist::Files>,
    ) -> Result<Win> {
        let (rank, size) = (comm.rank() as usize, comm.size() as usize);
        let pid = crate::sys::process::pid();
        let shape = WinShape {
            nranks: size,
            dynamic: flavor == Flavor::Dynamic,
            dirty_words: if files.is_some() {
                persist::DIRTY_WORDS
            } else {
                0
            },
        };
        // Where each rank's memory starts in the data area.
        let mut offs = Vec::with_capacity(size);
        let mut end = 0usize;
        for r in 0..size {
            // Memory in a file of its own takes no room in the segment.
            let b = if files.as_ref().is_some_and(|f| f.in_file(r)) {
                0
            } else {
                all[r * RECORD] as usize
            };
            let align = match flavor {
                Flavor::Shared if !hints.alloc_shared_noncontig => 1,
                Flavor::Shared => 4096,
                _ => 64,
            };
            let at = end.next_multiple_of(align);
            offs.push(at);
            end = at + b;
        }
        let data = match flavor {
            Flavor::Allocate | Flavor::Shared => end,
            _ => 0,
        };
        let (seg, new_serial) = Self::segment(&comm, shape, shape.data_start() + data)?;
        let (serial, ids, next_id) =
            kept.unwrap_or_else(|| (new_serial, (0..size as u32).collect(), size as u32));
        // The library's segments are mapped by every rank; user memory is loadable by all
        // only when every rank is a thread of this process.
        let atomics = matches!(flavor, Flavor::Allocate | Flavor::Shared)
            || (0..size).all(|r| all[r * RECORD + 2] as u32 == pid);
        let mut parts = Vec::with_capacity(size);
        for r in 0..size {
            let (b, du, rpid, raddr) = (
                all[r * RECORD] as usize,
                all[r * RECORD + 1] as usize,
                all[r * RECORD + 2] as u32,
                all[r * RECORD + 3],
            );
            let mem = match flavor {
                Flavor::Allocate if files.is_some() => Some(
                    files
                        .as_ref()
                        .expect("checked")
                        .mem(r, &seg, offs[r], b)
                        .map_err(|e| err(ErrorClass::Intern, e))?,
                ),
                Flavor::Allocate | Flavor::Shared => Some(
                    seg.data(offs[r], b)
                        .map_err(|e| err(ErrorClass::Intern, e))?,
                ),
                Flavor::Create if rpid == pid => Some(Mem::Local {
                    addr: raddr as usize,
                    len: b,
                }),
                Flavor::Create => Some(Mem::Remote {
                    pid: rpid,
                    addr: raddr,
                    len: b,
                }),
                Flavor::Dynamic => None,
            };
            parts.push(Part {
                mem,
                size: b,
                disp_unit: du,
                pid: rpid,
            });
        }
        let boxes = |t: usize, from: usize| [seg.mail(t, from, 0), seg.mail(t, from, 1)];
        let outbox = (0..size).map(|t| boxes(t, rank)).collect();
        let inbox = (0..size).map(|o| boxes(rank, o)).collect();
        Ok(Win {
            inner: Rc::new(WinInner {
                comm,
                rank,
                size,
                flavor,
                seg,
                parts,
                outbox,
                inbox,
                atomics,
                epochs: RefCell::new(sync::Epochs::new(size)),
                serial,
                ids,
                next_id,
                counters: RefCell::new(counter::Counters::new()),
                pmem: RefCell::new(None),
                wrote: Cell::new(false),
                stores: Cell::new(true),
                hints: RefCell::new(hints),
                name: RefCell::new(String::new()),
                errh: RefCell::new(WinErrHandler::default()),
                owned: RefCell::new(owned),
                attached: RefCell::new(Vec::new()),
                freed: Cell::new(false),
            }),
        })
    }

    /// The window's segment (see [`Comm::shared_region`]), and its serial, which sync
    /// counter references carry.
    fn segment(comm: &Comm, shape: WinShape, bytes: usize) -> Result<(WinSegment, u64)> {
        let r = comm.shared_region(
            bytes,
            bytes,
            "the window's shared memory",
            ErrorClass::NoMem,
            |s, _| WinSegment::new(s, shape),
        )?;
        Ok((r.mapped, r.serial))
    }

    // ---- errors --------------------------------------------------------------------------

    /// Apply the window's error handler to a call's result.
    #[inline(always)]
    pub(crate) fn ret<T>(&self, what: &str, r: Result<T>) -> Result<T> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => Err(self.raise(what, e)),
        }
    }

    #[cold]
    #[inline(never)]
    fn raise(&self, what: &str, e: Error) -> Error {
        let h = self.inner.errh.borrow().clone();
        let eng = &self.inner.comm.eng;
        match h {
            WinErrHandler::Return => e,
            WinErrHandler::Fatal => {
                let text = |rank| format!("earlybird: rank {rank}: fatal error in {what}: {e}");
                crate::comm::errhandler::end_job(eng, Some(e.class()), &text, e.class().code(), 1)
            }
            WinErrHandler::Abort => {
                let code = e.code();
                let name = self.name();
                let text = |rank| {
                    format!(
                        "earlybird: rank {rank}: error in {what} on window {name:?}: {e}; MPI_ERRORS_ABORT ends the job with code {code}"
                    )
                };
                let status = crate::comm::errhandler::exit_status(code);
                crate::comm::errhandler::end_job(eng, Some(e.class()), &text, code, status)
            }
            WinErrHandler::User(f) => {
                f(self, &e);
                e
            }
        }
    }

    /// MPI_Win_create_errhandler: a handler that calls `f` with the window and the error;
    /// the call then returns the error.
    pub fn create_errhandler(f: impl Fn(&Win, &Error) + 'static) -> WinErrHandler {
        WinErrHandler::User(Rc::new(f))
    }

    /// MPI_Win_set_errhandler.
    pub fn set_errhandler(&self, h: WinErrHandler) {
        *self.inner.errh.borrow_mut() = h;
    }

    /// MPI_Win_get_errhandler.
    pub fn errhandler(&self) -> WinErrHandler {
        self.inner.errh.borrow().clone()
    }

    /// MPI_Win_call_errhandler: run the window's handler on `e` as if a call had raised it;
    /// returns the error when the handler returns.
    pub fn call_errhandler(&self, e: Error) -> Error {
        self.raise("win_call_errhandler", e)
    }

    pub(crate) fn check_live(&self) -> Result<()> {
        if self.inner.freed.get() {
            return Err(err(ErrorClass::Win, "window used after win_free"));
        }
        Ok(())
    }

    // ---- attributes and names ------------------------------------------------------------

    /// This rank in the window's group.
    pub fn rank(&self) -> i32 {
        self.inner.rank as i32
    }

    /// Ranks in the window's group.
    pub fn group_size(&self) -> i32 {
        self.inner.size as i32
    }

    /// MPI_Win_get_group: the group of the communicator the window was made over.
    pub fn group(&self) -> Group {
        self.inner.comm.group()
    }

    /// Seed 003's MPI_Win_has_sharing: whether two ranks of the window share an address
    /// space (threads of one process: a thread job's ranks, or endpoints of one process).
    pub fn has_sharing(&self) -> bool {
        self.inner.comm.has_sharing()
    }

    /// MPI_WIN_BASE: the address of this rank's memory (0 for a dynamic window, or none).
    pub fn base(&self) -> u64 {
        self.part(self.inner.rank).mem.as_ref().map_or(0, |m| {
            if m.len() == 0 {
                0
            } else {
                m.address()
            }
        })
    }

    /// MPI_WIN_SIZE: bytes of this rank's memory (0 for a dynamic window).
    pub fn size(&self) -> usize {
        self.part(self.inner.rank).size
    }

    /// MPI_WIN_DISP_UNIT of this rank.
    pub fn disp_unit(&self) -> usize {
        self.part(self.inner.rank).disp_unit
    }

    /// MPI_WIN_CREATE_FLAVOR.
    pub fn flavor(&self) -> Flavor {
        self.inner.flavor
    }

    /// MPI_WIN_MODEL: always [`Model::Unified`].
    pub fn model(&self) -> Model {
        Model::Unified
    }

    /// MPI_Win_set_name.
    pub fn set_name(&self, name: &str) {
        *self.inner.name.borrow_mut() = name.to_string();
    }

    /// MPI_Win_get_name (empty until set).
    pub fn name(&self) -> String {
        self.inner.name.borrow().clone()
    }

    /// MPI_Win_get_info: the hints in force, with their values (defaults included).
    pub fn info(&self) -> Info {
        let mut i = self.inner.hints.borrow().to_info();
        if let Some(p) = self.inner.pmem.borrow().as_ref() {
            p.hints.add_to(&mut i, p.last);
        }
        i
    }

    /// MPI_Win_set_info: change the hints. `accumulate_ordering` and `accumulate_ops` may
    /// change (they only relax what earlybird already guarantees), and so may the program's
    /// promises `no_locks`, `same_size` and `same_disp_unit` (earlybird relies on none of
    /// them); `alloc_shared_noncontig` says how the memory was laid out at creation and keeps
    /// its value.
    pub fn set_info(&self, info: &Info) -> Result<()> {
        let r = (|| {
            self.check_live()?;
            let mut merged = self.info();
            for (k, v) in info.iter() {
                merged.set(k, v)?;
            }
            let new = Hints::from_info(&merged)?;
            let mut h = self.inner.hints.borrow_mut();
            h.accumulate_ordering = new.accumulate_ordering;
            h.accumulate_ops = new.accumulate_ops;
            h.no_locks = new.no_locks;
            h.same_size = new.same_size;
            h.same_disp_unit = new.same_disp_unit;
            if let Some(p) = self.inner.pmem.borrow_mut().as_mut() {
                p.hints.update(info)?;
            }
            Ok(())
        })();
        self.ret("win_set_info", r)
    }

    fn part(&self, r: usize) -> &Part {
        &self.inner.parts[r]
    }

    // ---- local and shared memory ---------------------------------------------------------

    /// This rank's own window memory, seen as elements of `T` (none for a dynamic window).
    /// See [`LocalView`].
    pub fn local<T: Plain>(&self) -> Result<LocalView<'_, T>> {
        let r = self.check_live().and_then(|()| {
            let p = self.part(self.inner.rank);
            LocalView::new(p.mem.clone(), p.size, self)
        });
        self.ret("win_local", r)
    }

    /// MPI_Win_shared_query: rank `rank`'s memory as this rank loads and stores it, with its
    /// size and displacement unit. Every flavour answers, as MPI 4.1 allows: with the memory
    /// when this rank can reach it with loads and stores (all of `win_allocate`'s, and
    /// `win_create`'s when the ranks are threads of one process), else with an empty view
    /// (size 0, no address). `rank` may be [`PROC_NULL`](crate::status::PROC_NULL): the
    /// lowest rank with memory.
    pub fn shared_query<T: Plain>(&self, rank: i32) -> Result<(LocalView<'_, T>, usize)> {
        let r = (|| {
            self.check_live()?;
            let r = if rank == crate::status::PROC_NULL {
                (0..self.inner.size)
                    .find(|&r| self.part(r).size > 0)
                    .unwrap_or(0)
            } else {
                self.check_rank(rank)?
            };
            let p = self.part(r);
            match &p.mem {
                Some(m) if m.loadable() => {
                    Ok((LocalView::new(Some(m.clone()), p.size, self)?, p.disp_unit))
                }
                // MPI 4.1 lets every flavour be queried: memory this rank cannot load and
                // store is no memory (size 0, no address).
                _ if self.inner.flavor != Flavor::Shared => {
                    Ok((LocalView::new(None, 0, self)?, p.disp_unit))
                }
                _ => Err(err(
                    ErrorClass::RmaShared,
                    format!(
                        "win_shared_query: the memory of rank {r} is not reachable by loads and stores from rank {} ({:?} window{})",
                        self.inner.rank,
                        self.inner.flavor,
                        if p.mem.is_some() { ", another process" } else { "" }
                    ),
                )),
            }
        })();
        self.ret("win_shared_query", r)
    }

    /// A target rank checked against the window's group.
    pub(crate) fn check_rank(&self, rank: i32) -> Result<usize> {
        if rank < 0 || rank as usize >= self.inner.size {
            return Err(err(
                ErrorClass::Rank,
                format!(
                    "rank {rank} is not in the window's group of {} ranks",
                    self.inner.size
                ),
            ));
        }
        Ok(rank as usize)
    }

    // ---- dynamic windows ------------------------------------------------------------------

    /// MPI_Win_attach: expose `mem` through this dynamic window until [`detach`](Self::detach)
    /// (which gives it back). Peers address it by [`Attached::address`] (send it to them).
    /// MPI_ERR_RMA_FLAVOR on another flavour, MPI_ERR_RMA_ATTACH when it would overlap a
    /// region attached already, or more than 256 are attached.
    pub fn attach<T: Plain>(&self, mem: Vec<T>) -> Result<Attached<T>> {
        let r = self.attach_owned(mem).map(|(addr, len)| Attached {
            addr,
            len,
            _t: std::marker::PhantomData,
        });
        self.ret("win_attach", r)
    }

    /// MPI_Win_attach of any [`ExposedMemory`] (the C ABI's: the program's pointer and size);
    /// peers address it by its [`address`](ExposedMemory::address). Ended by
    /// [`detach_address`](Self::detach_address).
    pub fn attach_exposed<M: ExposedMemory>(&self, mem: M) -> Result<()> {
        let r = self.attach_owned(mem).map(drop);
        self.ret("win_attach", r)
    }

    /// The region's address and length.
    fn attach_owned<M: ExposedMemory>(&self, mem: M) -> Result<(u64, usize)> {
        self.check_live()?;
        if self.inner.flavor != Flavor::Dynamic {
            return Err(err(
                ErrorClass::RmaFlavor,
                format!(
                    "win_attach on a {:?} window (only dynamic windows attach)",
                    self.inner.flavor
                ),
            ));
        }
        let len = mem.bytes();
        let addr = mem.address();
        if len == 0 {
            return Err(err(ErrorClass::RmaAttach, "win_attach of 0 bytes"));
        }
        let me = self.inner.rank;
        let table = &self.inner.seg;
        let lock = table.word(me, Word::AttachLock);
        self.wait_rma(me, || sync::try_write_lock(lock))?;
        let r = (|| {
            let count = table
                .word(me, Word::AttachCount)
                .load(std::sync::atomic::Ordering::Relaxed) as usize;
            for i in 0..count {
                let (a, l) = table.attached(me, i);
                let (a, l) = (
                    a.load(std::sync::atomic::Ordering::Relaxed),
                    l.load(std::sync::atomic::Ordering::Relaxed),
                );
                if addr < a + l && a < addr + len as u64 {
                    return Err(err(
                        ErrorClass::RmaAttach,
                        format!("win_attach of {len} bytes at {addr:#x} overlaps the region of {l} bytes at {a:#x} attached already"),
                    ));
                }
            }
            if count == crate::fabric::window::MAX_ATTACH {
                return Err(err(
                    ErrorClass::RmaAttach,
                    format!("win_attach: {count} regions are attached already, the most a rank may attach"),
                ));
            }
            let (a, l) = table.attached(me, count);
            a.store(addr, std::sync::atomic::Ordering::Relaxed);
            l.store(len as u64, std::sync::atomic::Ordering::Relaxed);
            table
                .word(me, Word::AttachCount)
                .store(count as u64 + 1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        })();
        sync::write_unlock(lock);
        r?;
        self.inner.attached.borrow_mut().push(AttachedRegion {
            addr,
            len,
            owned: Owned {
                value: Box::new(mem),
            },
        });
        Ok((addr, len))
    }

    /// MPI_Win_detach: stop exposing a region (after every operation on it in flight) and
    /// give it back.
    pub fn detach<T: Plain>(&self, a: Attached<T>) -> Result<Vec<T>> {
        let r = self.detach_owned(a.addr).and_then(|region| {
            debug_assert_eq!(region.len, a.len);
            region
                .owned
                .value
                .downcast::<Vec<T>>()
                .map(|b| *b)
                .map_err(|_| err(ErrorClass::Intern, "attached region of another type"))
        });
        self.ret("win_detach", r)
    }

    /// MPI_Win_detach of the region attached at `addr` by
    /// [`attach_exposed`](Self::attach_exposed) (or [`attach`](Self::attach)): its owner is
    /// dropped. MPI_ERR_RMA_ATTACH if no region starts there.
    pub fn detach_address(&self, addr: u64) -> Result<()> {
        let r = self.detach_owned(addr).map(drop);
        self.ret("win_detach", r)
    }

    fn detach_owned(&self, addr: u64) -> Result<AttachedRegion> {
        self.check_live()?;
        let me = self.inner.rank;
        let table = &self.inner.seg;
        let lock = table.word(me, Word::AttachLock);
        self.wait_rma(me, || sync::try_write_lock(lock))?;
        let count = table
            .word(me, Word::AttachCount)
            .load(std::sync::atomic::Ordering::Relaxed) as usize;
        let found = (0..count).find(|&i| {
            table
                .attached(me, i)
                .0
                .load(std::sync::atomic::Ordering::Relaxed)
                == addr
        });
        if let Some(i) = found {
            let last = table.attached(me, count - 1);
            let (la, ll) = (
                last.0.load(std::sync::atomic::Ordering::Relaxed),
                last.1.load(std::sync::atomic::Ordering::Relaxed),
            );
            let slot = table.attached(me, i);
            slot.0.store(la, std::sync::atomic::Ordering::Relaxed);
            slot.1.store(ll, std::sync::atomic::Ordering::Relaxed);
            table
                .word(me, Word::AttachCount)
                .store(count as u64 - 1, std::sync::atomic::Ordering::Relaxed);
        }
        sync::write_unlock(lock);
        if found.is_none() {
            return Err(err(
                ErrorClass::RmaAttach,
                format!("win_detach of {addr:#x}, which is not attached"),
            ));
        }
        let mut regions = self.inner.attached.borrow_mut();
        let k = regions
            .iter()
            .position(|r| r.addr == addr)
            .ok_or_else(|| err(ErrorClass::Intern, "attached region not kept"))?;
        Ok(regions.swap_remove(k))
    }

    // ---- free ------------------------------------------------------------------------------

    /// MPI_Win_free: collective; every epoch must be closed (MPI_ERR_RMA_SYNC otherwise, on
    /// every rank, so that none waits for the failed one; the window is then dropped as a
    /// window that was not freed is). Memory given to `win_create` or attached is dropped; use
    /// [`free_into`](Self::free_into) to have it back.
    pub fn free(self) -> Result<()> {
        self.free_owned().map(drop)
    }

    /// MPI_Win_free for a window made by [`Comm::win_create`]: returns the memory it was
    /// given. MPI_ERR_RMA_FLAVOR for another flavour (the window is then freed), and
    /// MPI_ERR_TYPE if `T` is not the type it was given.
    pub fn free_into<T: Plain>(self) -> Result<Vec<T>> {
        let flavor = self.inner.flavor;
        let w = Win {
            inner: self.inner.clone(),
        };
        let owned = self.free_owned()?;
        let r = match owned {
            Some(o) => o.value.downcast::<Vec<T>>().map(|b| *b).map_err(|_| {
                err(
                    ErrorClass::Type,
                    format!(
                        "win_free_into::<{}>: the window was made over another element type",
                        std::any::type_name::<T>()
                    ),
                )
            }),
            None => Err(err(
                ErrorClass::RmaFlavor,
                format!(
                    "win_free_into on a {flavor:?} window, which holds no memory of the program's"
                ),
            )),
        };
        w.ret("win_free", r)
    }

    fn free_owned(self) -> Result<Option<Owned>> {
        let r = (|| {
            self.check_live()?;
            let mine = self.inner.epochs.borrow().check_free().and_then(|()| {
                if self.inner.counters.borrow().any_waited() {
                    return Err(err(
                        ErrorClass::RmaSync,
                        "win_free while a sync object request on one of its counters is active",
                    ));
                }
                Ok(())
            });
            // Every rank stops using the others' memory before any rank gets its back; and
            // every rank learns whether one failed (so that none waits for it).
            self.agree_with_all(mine, || {
                err(
                    ErrorClass::RmaSync,
                    "win_free failed on another rank of the window (an epoch was open there)",
                )
            })?;
            self.inner.freed.set(true);
            if let Some(p) = self.inner.pmem.borrow_mut().as_mut() {
                p.release()?;
            }
            self.inner.attached.borrow_mut().clear();
            Ok(self.inner.owned.borrow_mut().take())
        })();
        self.ret("win_free", r)
    }

    /// Collective over the window's ranks: this rank's error if `mine` is one, else
    /// `others()` if another rank's was, else `Ok`. So no rank goes on waiting for a rank
    /// that failed.
    pub(crate) fn agree_with_all(
        &self,
        mine: Result<()>,
        others: impl FnOnce() -> Error,
    ) -> Result<()> {
        let flag = [u8::from(mine.is_ok())];
        let mut ok = [0u8];
        self.inner
            .comm
            .allreduce(&flag[..], &mut ok[..], &crate::coll::op::Op::MIN)?;
        mine?;
        if ok[0] == 0 {
            return Err(others());
        }
        Ok(())
    }

    /// Wait, with progress and the job's abort checks, until `f` holds. What RMA waits for
    /// is a peer's store to a control word, which needs no progress from this rank: when
    /// every rank has a core, `f` alone is polled for a short while first, so that the
    /// store is seen a cache-line transfer after it is made rather than after a round of
    /// the progress engine. Under [`crate::p2p::wait::waits_aside`] (the C ABI's window
    /// synchronization under MPI_THREAD_MULTIPLE) it polls with the rank let go between
    /// progress calls and calls the layer's pause between polls, so that the process's
    /// other threads (fencing other windows, say) go on meanwhile.
    pub(crate) fn wait_rma(&self, peer: usize, mut f: impl FnMut() -> bool) -> Result<()> {
        if f() {
            return Ok(());
        }
        use crate::fabric::job::BlockedIn;
        use crate::p2p::wait::Blocked;
        if let Some(pause) = crate::p2p::wait::aside() {
            loop {
                self.inner.comm.eng.borrow_mut().progress();
                if f() {
                    return Ok(());
                }
                pause()?;
            }
        }
        let mut e = self.inner.comm.eng.borrow_mut();
        if e.spin_budget() >= PRE_SPIN {
            for _ in 0..PRE_SPIN {
                std::hint::spin_loop();
                if f() {
                    return Ok(());
                }
            }
        }
        e.wait_for(Blocked::on(BlockedIn::Rma, peer as i32, 0, 0), |_| {
            f().then_some(())
        })
    }
}

impl Drop for WinInner {
    /// A window that goes without [`Win::free`] (its last handle and the last request made on
    /// it dropped) is freed locally: memory the library allocated is unmapped here (peers
    /// keep their own mappings), and memory the program gave (`win_create`, `win_attach`) is
    /// leaked, since a peer may still write it.
    fn drop(&mut self) {
        if self.freed.get() {
            return;
        }
        if let Some(o) = self.owned.get_mut().take() {
            std::mem::forget(o.value);
        }
        for r in self.attached.get_mut().drain(..) {
            std::mem::forget(r.owned.value);
        }
    }
}

/// A region attached to a dynamic window ([`Win::attach`]); give it to [`Win::detach`] to
/// have the memory back.
#[derive(Debug)]
#[must_use = "detach the region to have its memory back"]
pub struct Attached<T> {
    addr: u64,
    len: usize,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<T> Attached<T> {
    /// The region's address: the displacement peers give to reach its first byte (MPI's
    /// MPI_Get_address of the attached memory).
    pub fn address(&self) -> u64 {
        self.addr
    }

    /// Bytes attached.
    pub fn bytes(&self) -> usize {
        self.len
    }
}

/// What a [`LocalView`] borrows (the window) and holds (elements of `T`).
type ViewMarker<'w, T> = std::marker::PhantomData<(&'w Win, fn() -> T)>;

/// Window memory seen as elements of `T`: every access is a copy in or out, since peers may
/// write the memory at any time (no Rust reference into it is ever handed out). MPI's rules
/// say when such accesses are well defined (after a fence, within an exclusive lock on
/// oneself, after `win_sync`, ...); outside them a read may see any mix of old and new bytes,
/// never undefined behaviour.
pub struct LocalView<'w, T> {
    mem: Option<Mem>,
    len: usize,
    _w: ViewMarker<'w, T>,
}

impl<T> std::fmt::Debug for LocalView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LocalView({} elements)", self.len)
    }
}

impl<'w, T: Plain> LocalView<'w, T> {
    /// The address of the memory seen (0 for none): for bindings that hand it out, as the C
    /// ABI's MPI_Win_shared_query does.
    pub fn address(&self) -> u64 {
        self.mem
            .as_ref()
            .map_or(0, |m| if m.len() == 0 { 0 } else { m.address() })
    }

    fn new(mem: Option<Mem>, bytes: usize, _w: &'w Win) -> Result<LocalView<'w, T>> {
        if !T::GAPLESS {
            return Err(err(
                ErrorClass::Type,
                format!(
                    "window memory seen as {}, a type with padding",
                    std::any::type_name::<T>()
                ),
            ));
        }
        let size = std::mem::size_of::<T>().max(1);
        Ok(LocalView {
            mem,
            len: bytes / size,
            _w: std::marker::PhantomData,
        })
    }

    /// Whole elements in the memory.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, at: usize, n: usize) -> Result<&Mem> {
        match &self.mem {
            Some(m) if at.checked_add(n).is_some_and(|e| e <= self.len) => Ok(m),
            _ => Err(err(
                ErrorClass::RmaRange,
                format!(
                    "elements {at}..{} of window memory of {} elements",
                    at.saturating_add(n),
                    self.len
                ),
            )),
        }
    }

    /// Copy elements `at..at + out.len()` into `out`.
    pub fn read(&self, at: usize, out: &mut [T]) -> Result<()> {
        let m = self.check(at, out.len())?;
        let size = std::mem::size_of::<T>();
        let bytes = crate::sys::plain::as_bytes_mut(out)
            .ok_or_else(|| err(ErrorClass::Type, "padded type"))?;
        m.read(at * size, bytes)
            .map_err(|e| err(ErrorClass::Other, e.to_string()))
    }

    /// Copy `vals` into elements `at..`.
    pub fn write(&self, at: usize, vals: &[T]) -> Result<()> {
        let m = self.check(at, vals.len())?;
        let size = std::mem::size_of::<T>();
        let bytes = crate::sys::plain::as_bytes(vals)
            .ok_or_else(|| err(ErrorClass::Type, "padded type"))?;
        m.write(at * size, bytes)
            .map_err(|e| err(ErrorClass::Other, e.to_string()))
    }

    /// Element `i` (MPI_ERR_RMA_RANGE past the end).
    pub fn get(&self, i: usize) -> Result<T> {
        let m = self.check(i, 1)?;
        let size = std::mem::size_of::<T>();
        let mut b = [0u8; 64];
        if size <= 64 {
            m.read(i * size, &mut b[..size])
                .map_err(|e| err(ErrorClass::Other, e.to_string()))?;
            let v = crate::sys::plain::read_value::<T>(&b[..size]);
            return v.ok_or_else(|| err(ErrorClass::Type, "padded type"));
        }
        let mut v = vec![0u8; size];
        m.read(i * size, &mut v)
            .map_err(|e| err(ErrorClass::Other, e.to_string()))?;
        crate::sys::plain::read_value::<T>(&v).ok_or_else(|| err(ErrorClass::Type, "padded type"))
    }

    /// Set element `i`.
    pub fn set(&self, i: usize, v: T) -> Result<()> {
        self.write(i, std::slice::from_ref(&v))
    }

    /// Every element, copied out.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = Vec::with_capacity(self.len);
        for i in 0..self.len {
            v.push(self.get(i)?);
        }
        Ok(v)
    }
}
