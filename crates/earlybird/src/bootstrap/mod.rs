//! bootstrap — how a job's endpoints find each other.
//!
//! * **Launched by `ebrun`**: the launcher creates the job segment (see
//!   [`fabric::shm`](crate::fabric::shm)), unlinks it at once, and starts each rank with the
//!   descriptor inherited and these variables set: [`ENV_RANK`], [`ENV_SIZE`],
//!   [`ENV_SEGMENT_FD`], [`ENV_LAUNCHER_PID`]. The segment itself is the key-value store:
//!   each rank publishes its pid and state in its slot.
//! * **Launched by Hydra or Slurm** (`mpiexec`, `srun --mpi=pmi2`): the rank speaks PMI to
//!   the launcher ([`pmi`]). The lowest rank of each node (per `PMI_process_mapping`) creates
//!   the node's job segment unlinked and publishes `pid:fd:bytes` of its descriptor in PMI's
//!   key-value space; after a barrier the node's other ranks map it through
//!   `/proc/PID/fd/FD`; it holds the descriptor until finalize, when all have mapped it. The parent of that
//!   rank (Hydra's proxy, Slurm's step daemon) stands for the launcher whose death ends
//!   every wait. `MPI_Abort` and fatal errors go to the launcher as PMI's `abort`, so that it
//!   ends the other ranks and exits with the code.
//! * **Launched by a PMIx launcher** (Open MPI's `mpirun`, `srun --mpi=pmix`): the same,
//!   through the system's `libpmix.so.2` ([`crate::sys::pmix`], loaded only then); the host
//!   count, node ids and local peers come from PMIx's job data.
//! * **Thread jobs**: the ranks are threads of one process sharing an anonymous segment
//!   ([`crate::threads`]).
//! * **Singleton**: a program started without a launcher is rank 0 of a job of size 1. A
//!   launcher that earlybird cannot talk to (`srun` without PMI, Open MPI's variables without
//!   PMIx's, a PMIx launcher when libpmix cannot be loaded) is an error at init, never N
//!   singletons.
#![forbid(unsafe_code)]

pub(crate) mod pmi;

use crate::error::{Error, ErrorClass, Result};
use crate::fabric::hosts::Hosts;
use crate::fabric::job::{JobSegment, JobShape};
use crate::sys::pmix::Pmix;
use crate::sys::segment::{self, Segment};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub const ENV_RANK: &str = "EARLYBIRD_RANK";
pub(crate) const ENV_SIZE: &str = "EARLYBIRD_SIZE";
pub(crate) const ENV_SEGMENT_FD: &str = "EARLYBIRD_SEGMENT_FD";
pub(crate) const ENV_LAUNCHER_PID: &str = "EARLYBIRD_LAUNCHER_PID";
pub use crate::sys::segment::ENV_SHM_DIR;

/// Whether `key` names an environment variable through which a launcher talks to its ranks
/// (earlybird's own, PMI's, PMIx's, Open MPI's, Slurm's): a launcher that passes its
/// environment on must not pass these to the ranks of another job.
pub fn is_launch_variable(key: &[u8]) -> bool {
    const NAMES: [&[u8]; 5] = [
        ENV_RANK.as_bytes(),
        ENV_SIZE.as_bytes(),
        ENV_SEGMENT_FD.as_bytes(),
        ENV_LAUNCHER_PID.as_bytes(),
        b"EARLYBIRD_PMI",
    ];
    const PREFIXES: [&[u8]; 5] = [b"PMI_", b"PMI2_", b"PMIX_", b"OMPI_", b"SLURM_"];
    NAMES.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p))
}

/// Whether a launcher started this process as a rank: ebrun, Hydra or Slurm through PMI, or
/// one that init refuses (PMIx, Open MPI's, srun without PMI).
pub fn launched() -> bool {
    [
        "EARLYBIRD_RANK",
        "PMI_FD",
        "PMI_PORT",
        "PMIX_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "SLURM_PROCID",
    ]
    .iter()
    .any(|k| std::env::var_os(k).is_some())
}

/// How this rank joined its job.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub rank: u32,
    pub job: JobSegment,
    /// True when the ranks are processes (launcher or singleton), false for thread jobs.
    pub processes: bool,
}

/// An MPI process's name that holds across jobs: the serial of the job that made it (0: the
/// job the program was started in) and its rank there.
pub(crate) type ProcId = (u64, u32);

/// Who the ranks of a job are beyond their numbers, as comparisons of groups and the
/// queries of seed 003 need: a job of endpoints (an endpoint communicator's) holds ranks
/// that are also ranks of the job its processes came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identities {
    /// A number no other job of the run has (0: the job the program was started in).
    pub serial: u64,
    /// Per rank: the MPI process it is. Endpoint 0 of each process of an endpoint
    /// communicator is the parent rank that asked for it (seed 003's group rule); the others
    /// are new processes, named by this job.
    pub id: Vec<ProcId>,
    /// Per rank: the MPI process that asked for it (itself, in the first job), which
    /// MPIX_COMM_TYPE_ENDPOINTS splits by.
    pub host: Vec<ProcId>,
    /// Per rank: its address space; ranks with equal values share memory.
    pub space: Vec<u64>,
}

impl Identities {
    /// The job the program was started in: `n` ranks, threads of one process when
    /// `threads`, else one process each.
    pub(crate) fn first(n: u32, threads: bool) -> Identities {
        let id: Vec<ProcId> = (0..n).map(|r| (0, r)).collect();
        Identities {
            serial: 0,
            host: id.clone(),
            id,
            space: (0..n)
                .map(|r| if threads { 0 } else { u64::from(r) })
                .collect(),
        }
    }
}

/// A job segment made by the launcher, with the descriptor its ranks inherit.
pub struct LaunchedJob {
    pub segment: JobSegment,
    fd: OwnedFd,
}

impl LaunchedJob {
    /// Create the segment of a job of `nranks` ranks in `dir` (default `/dev/shm`, or
    /// `$EARLYBIRD_SHM_DIR`). The file is unlinked before this returns.
    pub fn create(nranks: u32, dir: Option<&Path>) -> Result<LaunchedJob> {
        let (segment, fd) = create_segment(nranks, dir, std::process::id())?;
        segment::set_inheritable(fd.as_fd()).map_err(|e| {
            Error::new(
                ErrorClass::Other,
                format!("cannot pass the segment to ranks: {e}"),
            )
        })?;
        Ok(LaunchedJob { segment, fd })
    }

    /// The environment a rank needs, besides the inherited descriptor.
    pub fn rank_env(&self, rank: u32) -> Vec<(&'static str, String)> {
        vec![
            (ENV_RANK, rank.to_string()),
            (ENV_SIZE, self.segment.nranks().to_string()),
            (ENV_SEGMENT_FD, self.fd.as_raw_fd().to_string()),
            (ENV_LAUNCHER_PID, std::process::id().to_string()),
        ]
    }
}

/// Create the job segment of `nranks` ranks, unlinked, in `dir` (default `/dev/shm`, or
/// `$EARLYBIRD_SHM_DIR`), naming `launcher` as the process whose death ends the job.
fn create_segment(nranks: u32, dir: Option<&Path>, launcher: u32) -> Result<(JobSegment, OwnedFd)> {
    let dir: PathBuf = match dir {
        Some(d) => d.to_path_buf(),
        None => segment::shm_dir(),
    };
    let shape = JobShape::for_ranks(nranks);
    let (bytes, reserved) = (shape.total_bytes(), shape.reserved_bytes());
    let (seg, fd) = Segment::create_unlinked(&dir, bytes, reserved).map_err(|e| {
        Error::new(
            ErrorClass::NoMem,
            format!(
                "cannot reserve {} KiB in {} for the job's shared segment ({} ranks): {e}",
                reserved.div_ceil(1024),
                dir.display(),
                nranks
            ),
        )
    })?;
    let segment = JobSegment::init(seg, shape);
    segment.set_launcher_pid(launcher);
    Ok((segment, fd))
}

/// Join the job this process was started in: from ebrun's environment, through PMI or
/// PMIx, or as a singleton when no launcher is there.
pub(crate) fn from_environment() -> Result<Placement> {
    let var = |k: &str| std::env::var(k).ok();
    let Some(rank) = var(ENV_RANK) else {
        let offer = pmi_offer(&var)?;
        let pmix = var("PMIX_RANK").is_some() || var("PMIX_NAMESPACE").is_some();
        if (offer.is_some() || pmix) && PMI_TRIED.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return Err(launch_error(
                "a failed init already used the launcher's connection; a process joins its job once",
            ));
        }
        return match offer {
            None if pmix => from_pmix(),
            Some(offer) => from_pmi(&offer).inspect_err(|_| {
                // The launcher closed the connection: it is ending the job (another rank
                // aborted). Let it end this rank too rather than exit with a code of its own.
                if pmi::SERVER_CLOSED.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(LAUNCHER_END_WAIT);
                }
            }),
            None => {
                refuse_foreign_launchers(&var)?;
                singleton()
            }
        };
    };
    let bad = |what: &str, v: &str| {
        Error::new(
            ErrorClass::Other,
            format!("bad {what} from the launcher: {v:?}"),
        )
    };
    let rank: u32 = rank.parse().map_err(|_| bad(ENV_RANK, &rank))?;
    let size_s = std::env::var(ENV_SIZE).unwrap_or_default();
    let size: u32 = size_s.parse().map_err(|_| bad(ENV_SIZE, &size_s))?;
    let fd_s = std::env::var(ENV_SEGMENT_FD).unwrap_or_default();
    let fd: i32 = fd_s.parse().map_err(|_| bad(ENV_SEGMENT_FD, &fd_s))?;
    if let Ok(lp) = std::env::var(ENV_LAUNCHER_PID) {
        let lp: u32 = lp.parse().map_err(|_| bad(ENV_LAUNCHER_PID, &lp))?;
        // Die with our parent (ebrun, or a wrapper such as `time` or `strace` that ebrun
        // started), and refuse to start if the launcher is no longer among our ancestors.
        crate::sys::process::die_with_parent();
        if !crate::sys::process::has_ancestor(lp) {
            return Err(Error::new(
                ErrorClass::ProcFailed,
                format!("the launcher (ebrun, pid {lp}) is gone"),
            ));
        }
    }
    let owned = segment::adopt_inherited(fd).map_err(|e| {
        Error::new(
            ErrorClass::Other,
            format!("segment descriptor {fd} from the launcher: {e}"),
        )
    })?;
    let len = segment::fd_len(owned.as_fd()).map_err(|e| {
        Error::new(
            ErrorClass::Other,
            format!("segment descriptor {fd} from the launcher: {e}"),
        )
    })?;
    let seg = Segment::map_fd(owned.as_fd(), len).map_err(|e| {
        Error::new(
            ErrorClass::Other,
            format!("cannot map the job segment (fd {fd}): {e}"),
        )
    })?;
    // The mapping keeps the segment; closing the descriptor here also keeps our own
    // children (if the program starts any) from holding the job alive.
    drop(owned);
    let job = JobSegment::attach(seg).map_err(|e| Error::new(ErrorClass::Other, e))?;
    if job.nranks() != size || rank >= size {
        return Err(Error::new(
            ErrorClass::Other,
            format!(
                "launcher says rank {rank} of {size}, segment holds {} ranks",
                job.nranks()
            ),
        ));
    }
    Ok(Placement {
        rank,
        job,
        processes: true,
    })
}

fn launch_error(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorClass::Other, what.to_string())
}

/// The PMI server the environment offers (`PMI_FD` or `PMI_PORT`), `None` when it offers
/// none. Half an offer (`PMI_RANK` without a connection, a number that does not parse) is
/// an error: a job must never run as singletons because a variable was missed.
fn pmi_offer(var: &impl Fn(&str) -> Option<String>) -> Result<Option<pmi::Offer>> {
    fn num<T: std::str::FromStr>(k: &str, v: Option<String>) -> Result<Option<T>> {
        v.map(|s| {
            s.trim()
                .parse()
                .map_err(|_| launch_error(format!("bad {k}={s:?} from the launcher")))
        })
        .transpose()
    }
    let fd: Option<i32> = num("PMI_FD", var("PMI_FD"))?;
    let port = match var("PMI_PORT") {
        Some(p) => {
            let id: Option<u32> = num("PMI_ID", var("PMI_ID"))?;
            let id =
                id.ok_or_else(|| launch_error(format!("PMI_PORT={p:?} is set but PMI_ID is not")))?;
            Some((p, id))
        }
        None => None,
    };
    let rank: Option<u32> = num("PMI_RANK", var("PMI_RANK"))?;
    let size: Option<u32> = num("PMI_SIZE", var("PMI_SIZE"))?;
    let wire = match var("EARLYBIRD_PMI").as_deref().filter(|w| !w.is_empty()) {
        Some("1") => Some(pmi::Wire::V1),
        Some("2") => Some(pmi::Wire::V2),
        Some(other) => {
            return Err(launch_error(format!(
                "EARLYBIRD_PMI={other:?}: the PMI wires are 1 and 2"
            )))
        }
        // Slurm's mpi/pmi2 plugin names its job and socket; its native wire is PMI-2.
        None if var("PMI_JOBID").is_some() || var("PMI2_SUN_PATH").is_some() => Some(pmi::Wire::V2),
        None => None,
    };
    if fd.is_none() && port.is_none() {
        if rank.is_some() || size.is_some() {
            return Err(launch_error(
                "PMI_RANK or PMI_SIZE is set but neither PMI_FD nor PMI_PORT: \
                 the launcher offers no PMI connection",
            ));
        }
        return Ok(None);
    }
    if fd.is_some() && wire != Some(pmi::Wire::V2) && (rank.is_none() || size.is_none()) {
        return Err(launch_error("PMI_FD is set without PMI_RANK and PMI_SIZE"));
    }
    Ok(Some(pmi::Offer {
        fd,
        port,
        rank,
        size,
        wire,
        jobid: var("PMI_JOBID"),
    }))
}

/// Init fails, rather than run as one of N singletons, under a launcher earlybird does not
/// speak to.
fn refuse_foreign_launchers(var: &impl Fn(&str) -> Option<String>) -> Result<()> {
    if var("OMPI_COMM_WORLD_SIZE").is_some() {
        return Err(launch_error(
            "started by Open MPI's mpirun (OMPI_COMM_WORLD_SIZE is set) without PMIx \
             (PMIX_RANK): start the job with ebrun, MPICH's mpiexec (Hydra) or a PMIx launcher",
        ));
    }
    let tasks = var("SLURM_STEP_NUM_TASKS").and_then(|n| n.parse::<u32>().ok());
    if var("SLURM_PROCID").is_some() && tasks.is_some_and(|n| n > 1) {
        return Err(launch_error(
            "started by srun without PMI (SLURM_PROCID is set, no PMI_FD): use srun \
             --mpi=pmi2 or --mpi=pmix",
        ));
    }
    Ok(())
}

/// A rank started by Hydra or Slurm: its PMI connection, kept for abort and finalize, and
/// (the lowest rank of a node) the descriptor of the node's segment that the others open,
/// held until finalize, when every rank of the node has mapped it.
struct Launcher {
    client: Conn,
    segment_fd: Option<OwnedFd>,
}

/// A connection to the launcher's process-management server.
enum Conn {
    /// PMI-1 or PMI-2 (Hydra, Slurm's `--mpi=pmi2`).
    Pmi(pmi::Client),
    /// PMIx through the system's libpmix (Open MPI's `mpirun`, Slurm's `--mpi=pmix`).
    Pmix(Pmix),
}

/// Where a rank stands among the job's hosts.
struct Whereabouts {
    /// Hosts the job spans.
    hosts: usize,
    /// This rank's host, as the launcher numbers them.
    node: u32,
    /// The lowest rank on this host.
    leader: u32,
    /// Per rank: whether it shares this rank's host.
    local: Vec<bool>,
}

impl Conn {
    fn rank(&self) -> u32 {
        match self {
            Conn::Pmi(c) => c.rank,
            Conn::Pmix(p) => p.rank,
        }
    }

    fn size(&self) -> Result<u32> {
        match self {
            Conn::Pmi(c) => Ok(c.size),
            Conn::Pmix(p) => p.get_u32(None, "pmix.job.size").map_err(launch_error),
        }
    }

    /// From PMI's `PMI_process_mapping`, or PMIx's node count, node ids and local peers.
    fn whereabouts(&mut self, size: u32) -> Result<Whereabouts> {
        let rank = self.rank();
        match self {
            Conn::Pmi(c) => {
                let nodes = c.process_mapping()?.ok_or_else(|| {
                    launch_error(
                        "the launcher gives no PMI_process_mapping, so ranks cannot tell which share a host",
                    )
                })?;
                let node = nodes[rank as usize];
                let mut all = nodes.clone();
                all.sort_unstable();
                all.dedup();
                Ok(Whereabouts {
                    hosts: all.len(),
                    node,
                    leader: nodes.iter().position(|&n| n == node).unwrap_or(0) as u32,
                    local: nodes.iter().map(|&n| n == node).collect(),
                })
            }
            Conn::Pmix(p) => {
                let hosts = p.get_u32(None, "pmix.num.nodes").map_err(launch_error)? as usize;
                let node = p.get_u32(Some(rank), "pmix.nodeid").map_err(launch_error)?;
                let peers = p.get_text(None, "pmix.lpeers").map_err(launch_error)?;
                let peers = peers
                    .split(',')
                    .map(|r| r.trim().parse::<u32>())
                    .collect::<std::result::Result<Vec<u32>, _>>()
                    .ok()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| {
                        launch_error(format!("PMIx's local peers {peers:?} do not parse"))
                    })?;
                Ok(Whereabouts {
                    hosts,
                    node,
                    leader: peers.iter().copied().min().unwrap_or(0),
                    local: (0..size).map(|r| peers.contains(&r)).collect(),
                })
            }
        }
    }

    fn put(&mut self, key: &str, value: &str) -> Result<()> {
        match self {
            Conn::Pmi(c) => c.put(key, value),
            Conn::Pmix(p) => p.put(key, value).map_err(launch_error),
        }
    }

    fn barrier(&mut self) -> Result<()> {
        match self {
            Conn::Pmi(c) => c.barrier(),
            Conn::Pmix(p) => p.fence().map_err(launch_error),
        }
    }

    /// What rank `from` put under `key` before the last barrier.
    fn get(&mut self, from: u32, key: &str) -> Result<String> {
        match self {
            // Hydra's PMI-2 fence is not a barrier: the value may come a little later.
            Conn::Pmi(c) => c.get_within(key, CARD_WAIT),
            Conn::Pmix(p) => p.get_text(Some(from), key).map_err(launch_error),
        }
    }

    fn abort(&mut self, code: i32, why: &str) {
        // Give the launcher a moment to forward what this rank just wrote: once it has the
        // abort it kills the ranks, and Hydra's proxy drops output not yet forwarded.
        std::thread::sleep(std::time::Duration::from_millis(50));
        match self {
            Conn::Pmi(c) => c.abort(code, why),
            Conn::Pmix(p) => p.abort(code, why),
        }
    }

    fn finalize(&mut self) -> Result<()> {
        match self {
            Conn::Pmi(c) => c.finalize(),
            Conn::Pmix(p) => p.finalize().map_err(launch_error),
        }
    }
}

static LAUNCHER: Mutex<Option<Launcher>> = Mutex::new(None);

/// Set once this process joined through PMI or PMIx: its waits watch the other ranks'
/// processes, since those launchers do not mark the job when a rank dies.
static WATCH_PEERS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process's long waits must check that the other ranks are alive.
pub(crate) fn watch_peers() -> bool {
    WATCH_PEERS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Set once a launcher's server was tried: its descriptor is closed (or owned) since, and a
/// second init must not adopt the number again.
static PMI_TRIED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How long a rank gives the launcher to end it once the job is ending.
const LAUNCHER_END_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a rank waits for its node's segment card after the barrier.
const CARD_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Join a job through the PMI server `offer` names (see the module's doc).
fn from_pmi(offer: &pmi::Offer) -> Result<Placement> {
    let stream = match (offer.fd, &offer.port) {
        (Some(fd), _) => {
            let owned = segment::adopt_inherited(fd)
                .map_err(|e| launch_error(format!("PMI_FD={fd}: {e}")))?;
            // Programs this rank starts must not speak PMI as this rank.
            let _ = segment::set_close_on_exec(owned.as_fd());
            pmi::Stream::Unix(std::os::unix::net::UnixStream::from(owned))
        }
        (None, Some((addr, _))) => pmi::Stream::Tcp(
            std::net::TcpStream::connect(addr.as_str())
                .map_err(|e| launch_error(format!("PMI_PORT={addr:?}: cannot connect: {e}")))?,
        ),
        (None, None) => unreachable!("an offer has a descriptor or a port"),
    };
    join(Conn::Pmi(pmi::Client::start(stream, offer)?))
}

/// Join a job started by a PMIx launcher, through the system's libpmix.
fn from_pmix() -> Result<Placement> {
    // Before PMIx starts its thread: the job may span hosts, and libfabric's settings are
    // environment variables (see `sys::ofi`).
    crate::sys::ofi::tune_rxm();
    let p = Pmix::init().map_err(|e| {
        launch_error(format!(
            "started by a PMIx launcher (PMIX_RANK or PMIX_NAMESPACE is set: Open MPI's mpirun, srun --mpi=pmix): {e}"
        ))
    })?;
    join(Conn::Pmix(p))
}

/// Join through the launcher's server `c`, keeping it for abort and finalize.
fn join(mut c: Conn) -> Result<Placement> {
    match join_node(&mut c) {
        Ok((job, held)) => {
            let rank = c.rank();
            WATCH_PEERS.store(true, std::sync::atomic::Ordering::Relaxed);
            *LAUNCHER.lock().unwrap_or_else(|p| p.into_inner()) = Some(Launcher {
                client: c,
                segment_fd: held,
            });
            Ok(Placement {
                rank,
                job,
                processes: true,
            })
        }
        Err(e) if pmi::SERVER_CLOSED.load(std::sync::atomic::Ordering::Relaxed) => Err(e),
        Err(e) => {
            // Every rank fails alike; say why before the launcher ends the job (it may kill
            // this rank before the program prints the error), and end it with status 1.
            let line = format!("earlybird: rank {}: cannot join the job: {e}", c.rank());
            use std::io::Write;
            let _ = std::io::stderr()
                .lock()
                .write_all(format!("{line}\n").as_bytes());
            c.abort(1, &line);
            Err(e)
        }
    }
}

/// Map this node's job segment (see the module's doc); the lowest rank of the node also
/// returns the descriptor the others open.
fn join_node(c: &mut Conn) -> Result<(JobSegment, Option<OwnedFd>)> {
    let (rank, size) = (c.rank(), c.size()?);
    let Whereabouts {
        hosts,
        node,
        leader,
        local,
    } = c.whereabouts(size)?;
    // A job across hosts: this rank's network endpoint, its address published with the
    // segment's card.
    let endpoint = if hosts > 1 {
        let source = match c {
            Conn::Pmi(_) => "PMI_process_mapping",
            Conn::Pmix(_) => "PMIx",
        };
        let ep = crate::sys::ofi::Endpoint::open().map_err(|e| {
            launch_error(format!(
                "this job of {size} ranks spans {hosts} hosts ({source}), and the network \
                 between them cannot be opened: {e}"
            ))
        })?;
        c.put(&ofi_key(rank), &hex(ep.name()))?;
        Some(ep)
    } else {
        None
    };
    let key = format!("earlybird-segment-{node}");
    crate::sys::process::die_with_parent();
    let (job, held) = if rank == leader {
        // Its parent stands for the launcher; 0 (a parent outside this PID namespace) would
        // read as "a thread job" to the fabric.
        let parent = crate::sys::process::parent();
        if parent == 0 {
            return Err(launch_error(
                "this rank's parent is outside its PID namespace, so it cannot watch the launcher",
            ));
        }
        let (job, fd) = create_segment(size, None, parent)?;
        let card = format!(
            "{}:{}:{}",
            std::process::id(),
            fd.as_raw_fd(),
            job.shape().total_bytes()
        );
        c.put(&key, &card)?;
        c.barrier()?;
        (job, Some(fd))
    } else {
        c.barrier()?;
        let card = c.get(leader, &key)?;
        let bad = || {
            launch_error(format!(
                "rank {leader}'s segment card {card:?} does not parse"
            ))
        };
        let f: Vec<&str> = card.split(':').collect();
        let [pid, fd, bytes] = f[..] else {
            return Err(bad());
        };
        let (pid, fd, bytes) = (
            pid.parse::<u32>().map_err(|_| bad())?,
            fd.parse::<i32>().map_err(|_| bad())?,
            bytes.parse::<usize>().map_err(|_| bad())?,
        );
        let seg = Segment::map_held(pid, fd, bytes).map_err(|e| {
            launch_error(format!(
                "cannot map rank {leader}'s job segment (pid {pid}, descriptor {fd}): {e}"
            ))
        })?;
        (JobSegment::attach(seg).map_err(launch_error)?, None)
    };
    if job.nranks() != size {
        return Err(launch_error(format!(
            "the launcher says {size} ranks, rank {leader}'s segment holds {}",
            job.nranks()
        )));
    }
    let job = match endpoint {
        None => job,
        Some(ep) => {
            let mut cards = Vec::with_capacity(size as usize);
            for r in 0..size {
                cards.push(if local[r as usize] {
                    None
                } else {
                    let v = c.get(r, &ofi_key(r))?;
                    Some(unhex(&v).ok_or_else(|| {
                        launch_error(format!("rank {r}'s network address {v:?} does not parse"))
                    })?)
                });
            }
            job.across(Hosts::new(node, rank, ep, cards))
        }
    };
    Ok((job, held))
}

/// The key under which rank `r` publishes its network address.
fn ofi_key(r: u32) -> String {
    format!("earlybird-ofi-{r}")
}

/// `b` in lower-case hex (addresses and cards in a launcher's key-value space).
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes [`hex`] wrote; `None` for anything that is not pairs of hex digits.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) || !b.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    b.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// Ask the launcher (Hydra, Slurm) to end the job with exit code `code`; nothing when the
/// job was not started through PMI (ebrun watches the job segment instead).
pub(crate) fn launcher_abort(code: i32, why: &str) {
    if let Some(l) = LAUNCHER.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        l.client.abort(code, why);
    }
}

/// Under Hydra or Slurm, when another rank has ended the job: give the launcher time to end
/// this rank itself, so that the job's exit code is the one the aborting rank sent and not
/// this rank's. Returns after 10 s if it has not (or at once without a PMI launcher).
pub(crate) fn await_launcher_end() {
    let pmi = LAUNCHER.lock().unwrap_or_else(|p| p.into_inner()).is_some();
    if pmi {
        std::thread::sleep(LAUNCHER_END_WAIT);
    }
}

/// Tell the launcher this rank has finalized (PMI's `finalize`); nothing when the job was
/// not started through PMI.
pub(crate) fn launcher_finalize() -> Result<()> {
    // Out of the lock first: an abort from another thread must not wait for this round trip.
    let launcher = LAUNCHER.lock().unwrap_or_else(|p| p.into_inner()).take();
    match launcher {
        Some(mut l) => {
            drop(l.segment_fd.take());
            l.client.finalize()
        }
        None => Ok(()),
    }
}

fn singleton() -> Result<Placement> {
    let job = JobSegment::anonymous(1)?;
    Ok(Placement {
        rank: 0,
        job,
        processes: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let b = [0u8, 1, 0x7f, 0xff, 0xa5];
        assert_eq!(hex(&b), "00017fffa5");
        assert_eq!(unhex(&hex(&b)).as_deref(), Some(&b[..]));
        assert_eq!(unhex("ABcd"), Some(vec![0xab, 0xcd]));
        for bad in ["0", "+f", "-1", "zz", "0g", " 1"] {
            assert_eq!(unhex(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn launch_variables() {
        for k in [
            "EARLYBIRD_RANK",
            "EARLYBIRD_PMI",
            "PMI_PORT",
            "PMI2_SUN_PATH",
            "PMIX_RANK",
        ] {
            assert!(is_launch_variable(k.as_bytes()), "{k}");
        }
        for k in ["EARLYBIRD_FAR_EAGER_LIMIT", "PATH", "PMIXER", "FI_PROVIDER"] {
            assert!(!is_launch_variable(k.as_bytes()), "{k}");
        }
    }
}
