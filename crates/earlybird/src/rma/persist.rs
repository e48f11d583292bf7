//! Persistent windows (seed 004) on the window machinery: memory in files, the write
//! bitmap, and the synchronisations that commit (`*_persist`). The files, the checkpoint
//! store and the version numbering are `crate::pmem`'s.
//!
//! A persistent window is an allocate window whose ranks' memory is each rank's data file,
//! mapped by every rank (a peer in another process maps it through `/proc/<pid>/fd/<fd>`
//! of the owner, which holds it open), or, with `pmem_allocate_in_ram`, the window's
//! segment. Every rank's control block carries a bitmap of the blocks written since its
//! last commit (see `fabric::window::Track`).
#![forbid(unsafe_code)]

use super::{err, ExposureEpoch, Flavor, Win, RECORD};
use crate::comm::group::Group;
use crate::comm::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::window::{Mem, WinSegment};
use crate::info::Info;
use crate::pmem::{Hints, Persist, Prepared};
use crate::sys::segment::Segment;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

/// Words of each rank's write bitmap: one bit per block, at most `MAX_BLOCKS` blocks.
pub(crate) const DIRTY_WORDS: usize = crate::pmem::store::MAX_BLOCKS / 64;

/// The creation record word of a persistent rank: this bit, and its data file's descriptor
/// plus one (0: memory in RAM).
const PMEM_BIT: u64 = 1 << 63;

/// What a rank brings to the creation of a persistent window.
pub(crate) enum Local {
    Ready(Prepared),
    /// Its preparation failed: it still takes part, so that no rank waits for it.
    Failed(Error),
}

/// The record word (4th of `RECORD`) of a rank and, if its preparation failed, the error.
pub(crate) fn record_word(l: &Option<Local>) -> (u64, Option<Error>) {
    match l {
        None => (0, None),
        Some(Local::Failed(e)) => (PMEM_BIT, Some(e.clone())),
        Some(Local::Ready(p)) => (
            PMEM_BIT | p.data.as_ref().map_or(0, |f| f.as_raw_fd() as u64 + 1),
            None,
        ),
    }
}

/// Every rank's memory of a persistent window: mapped data files, write bitmaps.
pub(crate) struct Files {
    segs: Vec<Option<Arc<Segment>>>,
    pmem: Vec<bool>,
    shifts: Vec<u32>,
}

impl Files {
    /// Whether rank `r`'s memory is a file (not in the segment).
    pub(crate) fn in_file(&self, r: usize) -> bool {
        self.segs[r].is_some()
    }

    /// Rank `r`'s memory: its file, or `b` bytes at `off` of the segment's data area; with
    /// its write bitmap if it is persistent.
    pub(crate) fn mem(
        &self,
        r: usize,
        seg: &WinSegment,
        off: usize,
        b: usize,
    ) -> std::result::Result<Mem, String> {
        let track = self.pmem[r].then(|| seg.track(r, self.shifts[r]));
        Ok(match &self.segs[r] {
            Some(s) => Mem::mapped(s.clone(), b, track),
            None => match seg.data(off, b)? {
                Mem::Mapped { seg, off, len, .. } => Mem::Mapped {
                    seg,
                    off,
                    len,
                    track,
                },
                m => m,
            },
        })
    }
}

/// Map every rank's data file (collective over `comm` when some rank is persistent; every
/// rank learns whether all mapped).
pub(crate) fn map_files(
    comm: &Comm,
    flavor: Flavor,
    all: &[u64],
    local: Option<&Local>,
) -> Result<Option<Files>> {
    let size = comm.size() as usize;
    if flavor != Flavor::Allocate || !(0..size).any(|r| all[r * RECORD + 3] & PMEM_BIT != 0) {
        return Ok(None);
    }
    let me = comm.rank() as usize;
    let mut failure = None;
    let mut segs = Vec::with_capacity(size);
    for r in 0..size {
        let (bytes, pid, word) = (
            all[r * RECORD] as usize,
            all[r * RECORD + 2],
            all[r * RECORD + 3],
        );
        let fd = word & !PMEM_BIT;
        if word & PMEM_BIT == 0 || fd == 0 || bytes == 0 {
            segs.push(None);
            continue;
        }
        let mapped = if r == me {
            match local {
                Some(Local::Ready(p)) => match &p.data {
                    Some(f) => Segment::map_fd(f.as_fd(), bytes),
                    None => Err(std::io::Error::other("no data file")),
                },
                _ => Err(std::io::Error::other("no data file")),
            }
        } else {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(format!("/proc/{pid}/fd/{}", fd - 1))
                .and_then(|f| Segment::map_fd(f.as_fd(), bytes))
        };
        match mapped {
            Ok(s) => segs.push(Some(Arc::new(s))),
            Err(e) => {
                failure.get_or_insert(format!("mapping rank {r}'s window file: {e}"));
                segs.push(None);
            }
        }
    }
    let flag = [u8::from(failure.is_none())];
    let mut ok = [0u8];
    comm.allreduce(&flag[..], &mut ok[..], &crate::coll::op::Op::MIN)?;
    if let Some(f) = failure {
        return Err(err(ErrorClass::PmemNoMem, f));
    }
    if ok[0] == 0 {
        return Err(err(
            ErrorClass::PmemNoMem,
            "another rank could not map the persistent window's files",
        ));
    }
    let shifts = (0..size)
        .map(|r| crate::pmem::store::block_shift(all[r * RECORD].max(1)))
        .collect();
    let pmem = (0..size)
        .map(|r| all[r * RECORD + 3] & PMEM_BIT != 0)
        .collect();
    Ok(Some(Files { segs, pmem, shifts }))
}

impl Win {
    /// MPI_Win_allocate with `pmem_is_pmem=true`: prepare this rank's files, then make the
    /// window with every rank, then load a checkpoint into it (checkpoint mode).
    pub(super) fn make_pmem(
        comm: &Comm,
        bytes: usize,
        disp_unit: usize,
        info: &Info,
        hints: Result<Hints>,
    ) -> Result<Win> {
        let local = match hints.and_then(|h| Persist::prepare(h, comm.rank() as u32, bytes)) {
            Ok(p) => Local::Ready(p),
            // A rank whose info or files are wrong still takes part, and fails.
            Err(e) => Local::Failed(e),
        };
        Self::make(
            comm,
            Flavor::Allocate,
            bytes,
            disp_unit,
            info,
            None,
            Some(local),
        )
    }

    /// Once the window exists: keep this rank's persistent state and fill its memory from
    /// the version chosen (agreed by every rank with `pmem_global_checkpoint`). Collective
    /// (every rank learns whether every rank succeeded).
    pub(super) fn install_pmem(&self, local: Local) -> Result<()> {
        let Local::Ready(prep) = local else {
            unreachable!("a failed preparation fails the creation's exchange")
        };
        let Prepared {
            mut persist, load, ..
        } = prep;
        let mine = (|| {
            persist.install()?;
            let v = if persist.hints.mode == crate::pmem::Mode::Checkpoint && load.is_none() {
                Some(self.agree_version(&persist)?)
            } else {
                load
            };
            if let Some(v) = v {
                let mem = self.my_mem()?;
                let empty = mem.len() == 0;
                persist.load(v, &mut |off, b| {
                    if empty {
                        Ok(())
                    } else {
                        mem.write(off, b)
                    }
                })?;
                // The memory now is version v: nothing is written since.
                if let Some(t) = mem.track() {
                    t.take();
                }
            }
            Ok(())
        })();
        *self.inner.pmem.borrow_mut() = Some(persist);
        self.agree("window creation", mine)
    }

    /// The newest version every rank holds (`pmem_global_checkpoint`); collective.
    fn agree_version(&self, p: &Persist) -> Result<u64> {
        let have = p.versions();
        let mut bound = i64::MAX;
        loop {
            let mine = have
                .iter()
                .rev()
                .map(|&v| v as i64)
                .find(|&v| v <= bound)
                .unwrap_or(-1);
            let mut c = [0i64];
            self.inner
                .comm
                .allreduce(&[mine][..], &mut c[..], &crate::coll::op::Op::MIN)?;
            if c[0] < 0 {
                return Err(err(
                    ErrorClass::PmemCkptVer,
                    format!(
                        "pmem_global_checkpoint: no version of window {:?} is held by every rank",
                        p.hints.name
                    ),
                ));
            }
            let held = [u8::from(have.contains(&(c[0] as u64)))];
            let mut all = [0u8];
            self.inner
                .comm
                .allreduce(&held[..], &mut all[..], &crate::coll::op::Op::MIN)?;
            if all[0] == 1 {
                return Ok(c[0] as u64);
            }
            bound = c[0] - 1;
        }
    }

    /// This rank's memory (none for a dynamic window).
    fn my_mem(&self) -> Result<Mem> {
        self.part(self.inner.rank).mem.clone().ok_or_else(|| {
            err(
                ErrorClass::RmaFlavor,
                "a dynamic window has no memory of its own",
            )
        })
    }

    /// A result every rank of the window learns: this rank's error, or the news that another
    /// rank failed `what`.
    fn agree(&self, what: &str, mine: Result<()>) -> Result<()> {
        self.agree_with_all(mine, || {
            err(
                ErrorClass::Io,
                format!("{what} failed on another rank of the persistent window"),
            )
        })
    }

    /// For win_create and win_create_dynamic: `pmem_is_pmem=true` makes the persisting
    /// synchronisations flush the window's memory (`msync`), as the seed says of memory the
    /// program mapped from persistent memory itself.
    pub(super) fn flush_only(self, info: &Info) -> Result<Win> {
        if let Some(h) = Hints::from_info(info, false)? {
            *self.inner.pmem.borrow_mut() = Some(Persist::flush_only(h));
        }
        Ok(self)
    }

    /// Whether this rank's memory was written since its last version.
    fn dirty(&self) -> bool {
        self.part(self.inner.rank)
            .mem
            .as_ref()
            .and_then(|m| m.track())
            .is_some_and(|t| t.any())
    }

    /// This rank's part of a commit point: commit a version if transactional (always when
    /// `force`, else only if something changed or none exists), or flush the memory. Unless
    /// `force` (a fence, which releases after every rank committed), the version the commit
    /// followed is released at once when only the latest is kept.
    fn commit_local(&self, force: bool) -> Result<()> {
        let mut pm = self.inner.pmem.borrow_mut();
        let Some(p) = pm.as_mut() else {
            return Ok(());
        };
        if !p.transactional() {
            return self.flush_memory(p);
        }
        if !force && !p.wants_commit(self.dirty()) {
            return Ok(());
        }
        let mem = self.my_mem()?;
        let Some(t) = mem.track() else {
            return Ok(());
        };
        let bits = t.take();
        let empty = mem.len() == 0;
        match p.commit(&bits, &mut |off, b| {
            if empty {
                b.fill(0);
                Ok(())
            } else {
                mem.read(off, b)
            }
        }) {
            Ok(_) => {
                if !force {
                    p.release_base();
                }
                Ok(())
            }
            Err(e) => {
                t.restore(&bits);
                Err(e)
            }
        }
    }

    /// Flush this rank's memory to its file (`msync`); nothing for memory in RAM or a
    /// volatile window.
    fn flush_memory(&self, p: &Persist) -> Result<()> {
        if p.hints.volatile || p.hints.in_ram {
            return Ok(());
        }
        let mut ranges = Vec::new();
        if let Some(m) = &self.part(self.inner.rank).mem {
            if m.len() > 0 && m.loadable() {
                ranges.push((m.address() as usize, m.len()));
            }
        }
        for a in self.inner.attached.borrow().iter() {
            ranges.push((a.addr as usize, a.len));
        }
        for (a, n) in ranges {
            crate::sys::pmem_io::msync(a, n).map_err(|e| {
                crate::pmem::io_err(&format!("flushing window memory at {a:#x}+{n}"), &e)
            })?;
        }
        Ok(())
    }

    /// MPI_Win_fence_pmem_persist: a fence, then a commit of every rank's memory as a new
    /// version (if any rank's memory changed since the last, or there is none), then a
    /// barrier: when it returns on any rank, the version is durable on every rank. Without
    /// transactions it flushes. On a window that is not persistent, a fence.
    pub fn fence_persist(&self, assert: u32) -> Result<()> {
        let r = (|| {
            // Whether to commit is agreed in the fence's own barrier: each rank says whether
            // its memory changed before the fence (its own stores, or a commit still owed)
            // or it called an operation that writes a peer's memory since the last
            // persisting fence; a peer's write to this rank's memory is its to say, since
            // when this rank enters the fence the peer may not have made it yet. A rank
            // without transactions always asks (it flushes, and every rank learns whether
            // that failed). Every rank sees the same answer, so every rank takes the same
            // road after it.
            let wrote = self.inner.wrote.replace(false);
            let wants = match self.inner.pmem.borrow().as_ref() {
                Some(p) if !p.transactional() => true,
                Some(p) => p.wants_commit(self.dirty() || wrote),
                None => wrote,
            };
            let (any, wrong) = self.fence_core(assert, Some(wants))?;
            if !any {
                return wrong.map_or(Ok(()), Err);
            }
            let mine = match wrong {
                Some(e) => Err(e),
                None => self.commit_local(true),
            };
            let committed = mine.is_ok();
            let agreed = self.agree("win_fence_persist", mine);
            if let Some(p) = self.inner.pmem.borrow_mut().as_mut() {
                match &agreed {
                    // Every rank holds the new version: the one before it may go.
                    Ok(()) => p.release_base(),
                    // Some rank has no new version: a rank that has gives the next commit
                    // the same number (replacing it), so that one number names one fence
                    // everywhere.
                    Err(_) if committed => p.retry_number(),
                    Err(_) => {}
                }
            }
            agreed
        })();
        self.ret("win_fence_persist", r)
    }

    /// MPI_Win_post_pmem_persist: commit this rank's memory (if it changed), then post.
    pub fn post_persist(&self, group: &Group, assert: u32) -> Result<ExposureEpoch<'_>> {
        let r = self.commit_local(false);
        self.ret("win_post_persist", r)?;
        self.post(group, assert)
    }

    /// MPI_Win_wait_pmem_persist, for an epoch opened by [`Win::post`] and kept open
    /// ([`ExposureEpoch::keep_open`]): wait, then commit.
    pub fn wait_persist(&self) -> Result<()> {
        let r = self
            .exposure_done(true)
            .and_then(|_| self.commit_local(false));
        self.ret("win_wait_persist", r)
    }

    /// MPI_Win_test_pmem_persist: as [`Win::test_exposure`]; when the epoch has ended, commit.
    pub fn test_persist(&self) -> Result<bool> {
        let r = self.exposure_done(false).and_then(|done| {
            if done {
                self.commit_local(false)?;
            }
            Ok(done)
        });
        self.ret("win_test_persist", r)
    }

    /// Find the blocks of this rank's memory that stores through a raw pointer (C's base
    /// pointer, which the library cannot watch) changed since the last version, by
    /// comparing their checksums with that version's, and count them as written. Bindings
    /// call it before each persisting call; it costs a read of the rank's memory. Nothing
    /// for windows that are not persistent or have no transactions.
    pub fn pmem_scan_raw_stores(&self) -> Result<()> {
        let mut pm = self.inner.pmem.borrow_mut();
        let Some(p) = pm.as_mut().filter(|p| p.transactional()) else {
            return Ok(());
        };
        let Some(m) = self.part(self.inner.rank).mem.clone() else {
            return Ok(());
        };
        let Some(t) = m.track() else {
            return Ok(());
        };
        if p.last.is_none() || m.len() == 0 {
            return Ok(());
        }
        let shift = crate::pmem::store::block_shift(m.len() as u64);
        let changed = p.changed_blocks(&mut |off, b| m.read(off, b))?;
        for b in changed {
            let off = b << shift;
            t.mark(off, (1usize << shift).min(m.len() - off));
        }
        Ok(())
    }

    /// MPI_Win_pmem_persist (the reference implementation's): flush this rank's memory to
    /// its file (`msync`), without a new version. Nothing for windows that are not
    /// persistent, in RAM or volatile.
    pub fn pmem_flush(&self) -> Result<()> {
        let r = match self.inner.pmem.borrow().as_ref() {
            Some(p) => self.flush_memory(p),
            None => Ok(()),
        };
        self.ret("win_pmem_persist", r)
    }

    /// The version this rank's memory was last committed as or loaded from (persistent
    /// windows), as `pmem_checkpoint_version` of [`Win::info`] says.
    pub fn pmem_version(&self) -> Option<u64> {
        self.inner.pmem.borrow().as_ref().and_then(|p| p.last)
    }
}

impl<'w> ExposureEpoch<'w> {
    /// MPI_Win_wait_pmem_persist: wait for the epoch's origins, then commit.
    pub fn wait_persist(self) -> Result<()> {
        let w: &Win = self.win;
        self.wait()?;
        let r = w.commit_local(false);
        w.ret("win_wait_persist", r)
    }

    /// MPI_Win_test_pmem_persist: `Err(epoch)` while an origin has not completed; when the
    /// epoch has ended, commit.
    pub fn test_persist(self) -> Result<std::result::Result<(), ExposureEpoch<'w>>> {
        let w: &Win = self.win;
        match self.test()? {
            Ok(()) => {
                let r = w.commit_local(false);
                w.ret("win_test_persist", r).map(Ok)
            }
            Err(e) => Ok(Err(e)),
        }
    }
}
