//! bootstrap — how a job's endpoints find each other.
//!
//! * **Launched by `ebrun`**: the launcher creates the job segment (see
//!   [`fabric::shm`](crate::fabric::shm)), unlinks it at once, and starts each rank with the
//!   descriptor inherited and these variables set: [`ENV_RANK`], [`ENV_SIZE`],
//!   [`ENV_SEGMENT_FD`], [`ENV_LAUNCHER_PID`]. The segment itself is the key-value store:
//!   each rank publishes its pid and state in its slot.
//! * **Thread jobs**: the ranks are threads of one process sharing an anonymous segment
//!   ([`crate::threads`]).
//! * **Singleton**: a program started without `ebrun` is rank 0 of a job of size 1.
#![forbid(unsafe_code)]

use crate::error::{Error, ErrorClass, Result};
use crate::fabric::job::{JobSegment, JobShape};
use crate::sys::segment::{self, Segment};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

pub const ENV_RANK: &str = "EARLYBIRD_RANK";
pub(crate) const ENV_SIZE: &str = "EARLYBIRD_SIZE";
pub(crate) const ENV_SEGMENT_FD: &str = "EARLYBIRD_SEGMENT_FD";
pub(crate) const ENV_LAUNCHER_PID: &str = "EARLYBIRD_LAUNCHER_PID";
pub use crate::sys::segment::ENV_SHM_DIR;

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
        let dir: PathBuf = match dir {
            Some(d) => d.to_path_buf(),
            None => segment::shm_dir(),
        };
        let shape = JobShape::for_ranks(nranks);
        let bytes = shape.total_bytes();
        let (seg, fd) = Segment::create_unlinked(&dir, bytes).map_err(|e| {
            Error::new(
                ErrorClass::NoMem,
                format!(
                    "cannot reserve {} KiB in {} for the job's shared segment ({} ranks): {e}",
                    bytes.div_ceil(1024),
                    dir.display(),
                    nranks
                ),
            )
        })?;
        segment::set_inheritable(fd.as_fd()).map_err(|e| {
            Error::new(
                ErrorClass::Other,
                format!("cannot pass the segment to ranks: {e}"),
            )
        })?;
        let segment = JobSegment::init(seg, shape);
        segment.set_launcher_pid(std::process::id());
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

/// Join the job this process was started in: from the launcher's environment, or as a
/// singleton when there is none.
pub(crate) fn from_environment() -> Result<Placement> {
    let Ok(rank) = std::env::var(ENV_RANK) else {
        return singleton();
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

fn singleton() -> Result<Placement> {
    let job = JobSegment::anonymous(1)?;
    Ok(Placement {
        rank: 0,
        job,
        processes: true,
    })
}
