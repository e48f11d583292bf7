//! # earlybird
//!
//! An MPI implementation in Rust, built around early binding: what a persistent operation can
//! decide at init time is decided there, and a start only moves data.
//!
//! ```no_run
//! fn main() -> earlybird::Result<()> {
//!     let universe = earlybird::init()?;          // under `ebrun -n 4`, or alone as rank 0 of 1
//!     let world = universe.world();
//!     let (rank, size) = (world.rank(), world.size());
//!     let mut token = [0u64];
//!     if rank == 0 {
//!         world.send(&[42u64], 1 % size, 0)?;
//!         world.recv(&mut token, size - 1, 0)?;
//!     } else {
//!         world.recv(&mut token, rank - 1, 0)?;
//!         world.send(&token, (rank + 1) % size, 0)?;
//!     }
//!     universe.finalize()
//! }
//! ```
//!
//! Layers, bottom-up (see "Architecture" in the README, and `tests/layers.rs`, which checks
//! them): `sys` → `fabric` → `bootstrap` → [`datatype`] → [`p2p`] → [`request`] → [`comm`]
//! → [`coll`] → [`channel`] and the other extensions → this API. [`error`], [`status`] and
//! [`info`] are base types every layer may use. `unsafe` lives in `sys` and `fabric` only;
//! every other module forbids it.

pub mod assertions;
pub(crate) mod bootstrap;
pub mod channel;
pub mod coll;
pub mod comm;
pub mod datatype;
pub mod error;
pub(crate) mod fabric;
pub mod grequest;
pub mod info;
pub mod p2p;
pub mod pmem;
pub mod request;
pub mod rma;
pub mod shared;
pub mod status;
pub(crate) mod sys;
pub mod threads;

/// What the launcher (`ebrun`) and the benchmark binary need from inside the library:
/// creating a job's segment, watching its ranks, signals and CPU affinity. Not an API for
/// programs.
#[doc(hidden)]
pub mod launch {
    pub use crate::bootstrap::pmi::{
        parse_mapping as parse_pmi_mapping, parse_v1 as parse_pmi1, Reply as Pmi1Message,
    };
    pub use crate::bootstrap::{hex, is_launch_variable, unhex};
    pub use crate::bootstrap::{launched, LaunchedJob, ENV_RANK, ENV_SHM_DIR};
    pub use crate::fabric::job::{BlockedIn, JobSegment, Published, RankState};
    pub use crate::sys::process::{cpus, die_with_spawner, pin_to_cpu, signal};
}

pub use assertions::Assertions;
pub use channel::{
    bind_channel, bind_channels, bind_slack_channel, bind_slack_channels, ibind_channel,
    ibind_channels, ibind_slack_channel, ibind_slack_channels, iunbind_channel, iunbind_channels,
    unbind_channel, unbind_channels, wait_bindings, Binding, Channel, ADDRESS_BASE_INCREMENT,
};
pub use coll::op::{reduce_local, Op, Predefined};
pub use coll::{Coll, Dst, DstOrInPlace, InPlace, Src, WSpec, IN_PLACE};
pub use comm::attr::{comm_dup_fn, comm_null_copy_fn, comm_null_delete_fn, keyval, Keyval};
pub use comm::buffered::BUFFER_AUTOMATIC;
pub use comm::cart::{dims_create, CartTopology, Neighbors, Topology};
pub use comm::endpoints::{Endpoint, EndpointComm, MAX_ENDPOINTS};
pub use comm::errhandler::{ErrHandler, UserErrHandler};
pub use comm::fault_tolerance::Agreed;
pub use comm::graph::DistGraphNeighbors;
pub use comm::group::{Comparison, Group, UNDEFINED};
pub use comm::{Comm, Message, PendingComm, SendBuf, SplitType, PARTITION_UNIT_KEY};
pub use datatype::{
    split_views, BasicType, Buffer, BufferMut, CBool, Combiner, CombinerKind, Complex, Contents,
    Datatype, Distribution, Envelope, Equivalence, LongDouble, Order, Sig, Typed, TypedMut,
    ValueIndex, ViewOf,
};
pub use error::{
    add_error_class, add_error_code, add_error_string, error_class, error_string, last_used_code,
    remove_error_class, remove_error_code, remove_error_string, Error, ErrorClass, ErrorCode,
    Result, UserClass, ERR_LASTCODE, MAX_ERROR_STRING,
};
pub use grequest::GrequestCompleter;
pub use info::Info;
pub use p2p::wait::{waits_aside, Pause};
pub use p2p::{Status, ANY_SOURCE, ANY_TAG, BSEND_OVERHEAD, PROC_NULL, ROOT, TAG_UB};
pub use request::{
    endless_scope, scope, start_all, test_all, test_any, test_some, test_some_into, wait_all,
    wait_all_into, wait_any, wait_some, wait_some_into, Begun, Bundle, Request, Scope, Tested,
};
pub use rma::{
    AccessEpoch, At, Attached, ExposureEpoch, Flavor, LocalView, Lock, LockAll, LockType, Model,
    SyncCounter, Win, WinErrHandler, MODE_NOCHECK, MODE_NOPRECEDE, MODE_NOPUT, MODE_NOSTORE,
    MODE_NOSUCCEED, MODE_WIN_ACCUMULATE, MODE_WIN_GET, MODE_WIN_PUT,
};
pub use shared::{Idle, ShareError, Shared, SharedComm, Watch};
pub use sys::exposed::ExposedMemory;
pub use sys::lend::ScratchBuffer;
pub use sys::plain::Plain;

/// `#[derive(Equivalence)]` for `#[repr(C)]` structs (feature `derive`, on by default).
#[cfg(feature = "derive")]
pub use earlybird_derive::Equivalence;

use p2p::engine::Engine;
use request::EngineRef;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

static PROCESS_INIT: AtomicBool = AtomicBool::new(false);

/// One rank's handle on its job (MPI_Init .. MPI_Finalize). Finalizes when dropped if
/// [`finalize`](Universe::finalize) was not called.
pub struct Universe {
    rank: comm::driven::Driven,
    /// The thread level provided at init.
    level: ThreadLevel,
}

/// The levels of thread support (MPI 4.1 §11.2.4), in increasing order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ThreadLevel {
    /// MPI_THREAD_SINGLE: one thread.
    Single,
    /// MPI_THREAD_FUNNELED: only the thread that initialised MPI calls it.
    Funneled,
    /// MPI_THREAD_SERIALIZED: any thread, one at a time.
    Serialized,
    /// MPI_THREAD_MULTIPLE: any thread, at any time.
    Multiple,
}

impl std::fmt::Debug for Universe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Universe")
            .field("world", self.world())
            .field("processes", &self.is_process_job())
            .finish()
    }
}

/// MPI_Init: join the job this process was started in by `ebrun`, by MPICH's `mpiexec`
/// (Hydra) or `srun --mpi=pmi2` (PMI), or by Open MPI's `mpirun` or `srun --mpi=pmix` (PMIx),
/// or become rank 0 of a job of size 1 when started alone. A launcher earlybird cannot talk
/// to, or a job spanning several hosts, is an error (MPI_ERR_OTHER naming it), never a run
/// as singletons. A process initialises once.
///
/// # Standard section(s)
/// MPI 4.1 §11.2.1.
pub fn init() -> Result<Universe> {
    init_with_assertions(ThreadLevel::Single, Assertions::empty())
}

/// MPI_Init_thread: [`init`], asking for thread level `required`, which is the level
/// provided ([`Universe::query_thread`]). The types hold each level to its promise: a
/// [`Universe`] and its communicators are neither `Send` nor `Sync`, so only the thread
/// that made them calls them (SINGLE, FUNNELED); for SERIALIZED and MULTIPLE,
/// [`Universe::share`] makes a rank whose communicator handles any thread may call at any
/// time (see [`shared`]); endpoints ([`Comm::create_endpoints`]) give each thread a rank of
/// its own instead.
///
/// # Standard section(s)
/// MPI 4.1 §11.2.4.
pub fn init_thread(required: ThreadLevel) -> Result<Universe> {
    init_with_assertions(required, Assertions::empty())
}

/// Seed 002's `MPI_Init_thread_xxx`: [`init_thread`], with the program's promises
/// `assertions` (see [`assertions`] for what each allows and how a broken one is reported),
/// to which the names in the environment variable `EARLYBIRD_ASSERTIONS` are added (a
/// comma-separated list such as `no_any_source,no_send_cancels`; an unknown name is
/// MPI_ERR_ARG). Every rank should make the same promises. [`Universe::assertions`] says
/// which are in force.
pub fn init_with_assertions(required: ThreadLevel, assertions: Assertions) -> Result<Universe> {
    let assertions = assertions | Assertions::from_env()?;
    if PROCESS_INIT.swap(true, Ordering::AcqRel) {
        return Err(Error::new(
            ErrorClass::Other,
            "earlybird::init called twice in one process",
        ));
    }
    let placement = bootstrap::from_environment()
        .inspect_err(|_| PROCESS_INIT.store(false, Ordering::Release))?;
    let u = Universe::from_placement(placement, required, assertions).inspect_err(|e| {
        // Joined through Hydra, Slurm or mpirun but cannot go on: end the job there too.
        bootstrap::launcher_abort(1, &format!("earlybird: init failed: {e}"));
    })?;
    // EARLYBIRD_BIND=core: each rank on a core of its own (rank modulo the cores), as
    // mpiexec's `-bind-to core` does; a process job only (thread ranks share a process).
    if u.is_process_job() && std::env::var("EARLYBIRD_BIND").is_ok_and(|b| b == "core") {
        sys::process::pin_to_cpu(u.world().rank() as usize % sys::process::cpus());
    }
    Ok(u)
}

impl Universe {
    pub(crate) fn from_placement(
        p: bootstrap::Placement,
        required: ThreadLevel,
        assertions: Assertions,
    ) -> Result<Universe> {
        pmem::bind_rank(p.rank);
        let mut e = Engine::new(p.job, p.rank, !p.processes)?;
        e.set_assertions(assertions);
        let eng: EngineRef = Rc::new(RefCell::new(e));
        let world = Comm::world(eng.clone());
        // Init is collective: WORLD's collective region (if it may have one) is made now,
        // so that its first nonblocking or persistent collective can use it.
        world.make_coll_shm();
        let self_comm = Comm::self_comm(eng.clone());
        Ok(Universe {
            rank: comm::driven::Driven::new(eng, world, self_comm),
            level: required,
        })
    }

    fn eng(&self) -> &EngineRef {
        self.rank.eng()
    }

    /// See [`Universe::share`].
    pub(crate) fn check_alone(&self) -> Result<()> {
        self.rank.check_alone()
    }

    /// The assertions in force since init (seed 002): those given to
    /// [`init_with_assertions`] (or a thread job's [`threads::Job::assertions`]) and those
    /// of `EARLYBIRD_ASSERTIONS`. A communicator may add its own ([`Comm::assertions`]).
    pub fn assertions(&self) -> Assertions {
        self.eng().borrow().assertions()
    }

    /// MPI_Query_thread: the thread level provided (the one asked for at init).
    pub fn query_thread(&self) -> ThreadLevel {
        self.level
    }

    /// MPI_Is_thread_main: whether the calling thread initialised MPI. Always true in safe
    /// Rust: a [`Universe`] cannot leave the thread that made it.
    pub fn is_thread_main(&self) -> bool {
        true
    }

    /// The job segment this rank is part of: what every rank publishes about itself (see
    /// [`launch::JobSegment::await_blocked`]). For tests and launchers, not programs.
    #[doc(hidden)]
    pub fn job_segment(&self) -> launch::JobSegment {
        self.eng().borrow().job().clone()
    }

    /// MPI_COMM_WORLD.
    pub fn world(&self) -> &Comm {
        self.rank.world()
    }

    /// MPI_COMM_SELF: a communicator of this rank alone (rank 0 of 1). Its attributes are
    /// deleted, newest first, at the start of [`finalize`](Self::finalize) (or of the
    /// finalize a drop does).
    pub fn comm_self(&self) -> &Comm {
        self.rank.comm_self()
    }

    /// Whether the ranks of this job are processes (`ebrun`, singleton) rather than threads.
    pub fn is_process_job(&self) -> bool {
        !self.eng().borrow().ranks_are_threads()
    }

    /// MPI_Buffer_attach: `bytes` of buffer space for buffered sends (each takes its length
    /// plus [`BSEND_OVERHEAD`]). earlybird keeps the copies in its own memory and accounts
    /// them against this capacity, so the program hands over a size, not memory.
    /// [`BUFFER_AUTOMATIC`] (MPI 4.1) lets buffered sends take what they need. A
    /// communicator may have a buffer of its own ([`Comm::buffer_attach`]).
    pub fn buffer_attach(&self, bytes: usize) -> Result<()> {
        let r = self.eng().borrow_mut().buffer_attach(None, bytes);
        self.world().ret("buffer_attach", r)
    }

    /// MPI_Buffer_detach: waits until all buffered messages have left; returns the size.
    pub fn buffer_detach(&self) -> Result<usize> {
        let r = self.eng().borrow_mut().buffer_detach(None);
        self.world().ret("buffer_detach", r)
    }

    /// MPI_Buffer_flush (MPI 4.1): waits until the buffered messages from the process's
    /// buffer have left; it stays attached.
    pub fn buffer_flush(&self) -> Result<()> {
        let r = self.eng().borrow_mut().buffer_flush(None).map(drop);
        self.world().ret("buffer_flush", r)
    }

    /// MPI_Buffer_iflush: [`buffer_flush`](Self::buffer_flush) as a request.
    pub fn ibuffer_flush<'s>(&self, s: &'s Scope<'s, '_>) -> Result<Request<'s>> {
        self.world().flush_request(s, None, "buffer_iflush")
    }

    /// MPI_Finalize: waits for every rank to reach finalize (serving their requests
    /// meanwhile), then marks this rank done for the launcher.
    /// MPI_COMM_SELF's attributes are deleted first; a delete callback's error is returned
    /// after the rest of finalize has run (the other ranks must not wait for this one).
    pub fn finalize(mut self) -> Result<()> {
        let r = self.rank.finish();
        r.and(self.tell_launcher())
    }

    /// A rank started by Hydra or Slurm tells it that it has finalized (PMI); nothing for
    /// other jobs, or the second time.
    fn tell_launcher(&self) -> Result<()> {
        if self.is_process_job() {
            bootstrap::launcher_finalize()
        } else {
            Ok(())
        }
    }

    /// The eager limit in force, in bytes (`EARLYBIRD_EAGER_LIMIT`).
    pub fn eager_limit_bytes(&self) -> usize {
        self.eng().borrow().limits().eager_limit_bytes
    }

    /// Drive progress once (for programs that poll).
    pub fn progress(&self) {
        self.rank.progress();
    }
}

impl Drop for Universe {
    /// A universe dropped without finalize finalizes (see the rank's own drop), and then
    /// tells the launcher as [`finalize`](Universe::finalize) does.
    fn drop(&mut self) {
        self.rank.finish_at_drop();
        if !std::thread::panicking() {
            if let Err(e) = self.tell_launcher() {
                use std::io::Write;
                let line = format!("earlybird: finalize at drop: {e}\n");
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            }
        }
    }
}

/// Seconds since an arbitrary point in the past (MPI_Wtime).
pub fn wtime() -> f64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}
