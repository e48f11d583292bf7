//! The job segment: what every rank of a job on one host maps.
//!
//! ```text
//! [JobHeader: 512 B][RankSlot x nranks: 128 B each][doorbells x nranks][pad to 4 KiB][rings]
//! ```
//!
//! There is one `ring` per ordered pair of distinct endpoints; ring (s -> r)
//! is written by s and read by r. A rank's slot carries its pid (for single-copy transfers),
//! its state, and what it is blocked in (for `ebrun --timeout` reports). The header carries
//! the abort flag that ends every wait when the job fails.
//!
//! **Small jobs** (at most [`DOORBELLS_ABOVE`] ranks) reserve every ring at creation and
//! each rank polls all its incoming rings on every progress call. **Large jobs** would need
//! N^2 rings up front (6 GiB at 256 ranks), so their rings are a hole in the segment file
//! until used: a sender backs its ring to a peer when it first sends there, and rings the
//! peer's *doorbell*, one bit per sender in a bitmap of the receiver's, after each frame; a
//! receiver polls only the rings whose bits it finds set (and those it left frames in).
//! Memory then grows with the pairs that talk: a rank that sends to k peers backs k rings
//! (about 96 KiB each), so a ring or a stencil of N ranks costs O(N), an all-to-all O(N^2).
//!
//! All of it is created zero-filled (a hole reads as zeros); a zero sequence word is an
//! empty slot, so no rank has to wait for another before sending.

use super::ring::{RingPtrs, RingShape};
use crate::sys::segment::Segment;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

const MAGIC: u64 = 0x6561_726c_7962_6972; // "earlybir"
const VERSION: u32 = 4;
/// Endpoint communicators' jobs a job's header lists for launcher reports.
const ENDPOINT_JOBS: usize = 8;
/// Jobs of more ranks than this use doorbells and back their rings on first use (see the
/// module's doc); `EARLYBIRD_SHM_DOORBELLS=1` (or `0`) asks for it (or against it) at any size.
pub(crate) const DOORBELLS_ABOVE: u32 = 32;
/// Environment variable that forces doorbells on (`1`) or off (`0`).
pub(crate) const ENV_DOORBELLS: &str = "EARLYBIRD_SHM_DOORBELLS";
/// Header flag: the job uses doorbells and rings backed on first use.
const FLAG_DOORBELLS: u32 = 1;
const HEADER_BYTES: usize = 512;
const FLOOR_LINE_OFFSET: usize = 256;
const RANK_SLOT_BYTES: usize = 128;
/// The peer word of a rank slot when its wait is on no particular peer.
const NO_PEER: i32 = i32::MIN;

#[repr(C, align(128))]
struct JobHeader {
    magic: AtomicU64,
    version: AtomicU32,
    nranks: AtomicU32,
    nslots: AtomicU32,
    /// `FLAG_DOORBELLS` or 0.
    flags: AtomicU32,
    data_bytes: AtomicU64,
    total_bytes: AtomicU64,
    /// 0 while the job runs; once some rank failed or the job was aborted, bit 63 set with
    /// the rank (bits 32..62, as i32 bits) and the code (bits 0..31): one word, so a reader
    /// never sees the flag without the reason.
    aborted: AtomicU64,
    /// Ranks that have entered finalize.
    finalizing: AtomicU32,
    /// pid of the launcher (0 for thread jobs and singletons).
    launcher_pid: AtomicU32,
    /// Jobs of endpoint communicators (seed 003) made within this one, for the launcher's
    /// timeout report: `pid << 32 | fd` of a descriptor of the job's segment that the
    /// process `pid` holds open (0: a free entry).
    endpoint_jobs: [AtomicU64; ENDPOINT_JOBS],
}
const _: () = assert!(std::mem::size_of::<JobHeader>() <= FLOOR_LINE_OFFSET);

/// A rank's lifecycle, as published in its slot.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankState {
    NotStarted = 0,
    Running = 1,
    Finalized = 2,
}

/// What a rank is blocked in (published only once a wait stops being a short spin).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockedIn {
    Nothing = 0,
    Send = 1,
    Recv = 2,
    Wait = 3,
    Probe = 4,
    Finalize = 5,
    BufferDetach = 6,
    /// An RMA synchronisation: fence, PSCW, a window lock, attach or detach.
    Rma = 7,
}

impl BlockedIn {
    fn from_u32(v: u32) -> BlockedIn {
        match v {
            1 => BlockedIn::Send,
            2 => BlockedIn::Recv,
            3 => BlockedIn::Wait,
            4 => BlockedIn::Probe,
            5 => BlockedIn::Finalize,
            6 => BlockedIn::BufferDetach,
            7 => BlockedIn::Rma,
            _ => BlockedIn::Nothing,
        }
    }
}

/// A rank's published wait, as another rank or the launcher reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Published {
    pub what: BlockedIn,
    /// The peer it waits on (world rank, or -1 for ANY_SOURCE); `None`: no particular one.
    pub peer: Option<i32>,
    pub tag: i32,
    pub ctx: u32,
}

#[repr(C, align(128))]
struct RankSlot {
    pid: AtomicU32,
    state: AtomicU32,
    blocked: AtomicU32,
    peer: AtomicI32,
    tag: AtomicI32,
    ctx: AtomicU32,
}
const _: () = assert!(std::mem::size_of::<RankSlot>() == RANK_SLOT_BYTES);

/// Sizes of a job's segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobShape {
    pub nranks: u32,
    pub(crate) ring: RingShape,
    /// Doorbells, and rings backed on first use (see the module's doc).
    pub(crate) doorbells: bool,
}

impl JobShape {
    /// The default shape for `nranks`: 256 slots per ring and a data area that shrinks as
    /// the number of rings grows (256 KiB per ring up to 8 ranks, never under 64 KiB).
    /// `EARLYBIRD_RING_DATA_BYTES` overrides the data area (rounded to 4 KiB).
    pub fn for_ranks(nranks: u32) -> JobShape {
        let rings = (nranks as usize) * (nranks as usize).saturating_sub(1);
        let mut data = (64usize << 20).checked_div(rings).unwrap_or(0);
        data = data.clamp(64 << 10, 256 << 10);
        if let Some(v) = std::env::var("EARLYBIRD_RING_DATA_BYTES")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
        {
            data = v.clamp(4096, 64 << 20);
        }
        data = data / 4096 * 4096;
        let doorbells = match std::env::var(ENV_DOORBELLS).ok().as_deref() {
            Some("1") => true,
            Some("0") => false,
            _ => nranks > DOORBELLS_ABOVE,
        };
        JobShape {
            nranks,
            ring: RingShape {
                nslots: 256,
                data_bytes: data,
            },
            doorbells,
        }
    }

    /// Words of one rank's doorbell bitmap: a bit per rank, in whole 128-byte lines.
    fn bell_words(&self) -> usize {
        (self.nranks as usize).div_ceil(64).div_ceil(16) * 16
    }

    fn bells_offset(&self) -> usize {
        HEADER_BYTES + self.nranks as usize * RANK_SLOT_BYTES
    }

    fn rings_offset(&self) -> usize {
        (self.bells_offset() + self.nranks as usize * self.bell_words() * 8).div_ceil(4096) * 4096
    }

    /// Bytes to back at creation: all of the segment, or (doorbells) all but the rings.
    pub fn reserved_bytes(&self) -> usize {
        if self.doorbells {
            self.rings_offset()
        } else {
            self.total_bytes()
        }
    }

    /// Total bytes of the segment.
    pub fn total_bytes(&self) -> usize {
        let n = self.nranks as usize;
        self.rings_offset() + n * n.saturating_sub(1) * self.ring.bytes()
    }

    fn ring_offset(&self, from: u32, to: u32) -> usize {
        let n = self.nranks as usize;
        let (s, r) = (from as usize, to as usize);
        let idx = s * (n - 1) + if r < s { r } else { r - 1 };
        self.rings_offset() + idx * self.ring.bytes()
    }
}

/// A mapped job segment. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct JobSegment {
    seg: Arc<Segment>,
    shape: JobShape,
    /// For the job of an endpoint communicator (seed 003): the job this process was started
    /// in, and its rank there. Failure travels both ways: an abort of either ends waits in
    /// both.
    outer: Option<Arc<(JobSegment, u32)>>,
    /// The entry listing this job in its outermost job's header, while this process holds it.
    listed: Option<Arc<Listing>>,
    /// Where the ranks are, when the job spans hosts (this segment then holds this host's
    /// ranks).
    hosts: Option<Arc<super::hosts::Hosts>>,
}

/// A job's entry in its outermost job's list of endpoint jobs: the descriptor it names is
/// held open, and the entry cleared, for as long as this lives.
struct Listing {
    root: JobSegment,
    entry: usize,
    _fd: std::os::fd::OwnedFd,
}

impl Drop for Listing {
    fn drop(&mut self) {
        self.root.header().endpoint_jobs[self.entry].store(0, Ordering::Release);
    }
}

impl std::fmt::Debug for JobSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobSegment")
            .field("shape", &self.shape)
            .finish()
    }
}

impl JobSegment {
    /// A zero-filled job segment for `nranks` endpoints in this process (a thread job, a
    /// singleton, a test).
    pub(crate) fn anonymous(nranks: u32) -> crate::error::Result<JobSegment> {
        use crate::error::{Error, ErrorClass};
        let shape = JobShape::for_ranks(nranks);
        let seg = Segment::anonymous(shape.total_bytes()).map_err(|e| {
            Error::new(
                ErrorClass::NoMem,
                format!(
                    "cannot map {} bytes for a job of {nranks} ranks: {e}",
                    shape.total_bytes()
                ),
            )
        })?;
        Ok(JobSegment::init(seg, shape))
    }

    /// Write the header of a freshly created, zero-filled segment.
    pub fn init(seg: Segment, shape: JobShape) -> JobSegment {
        assert!(
            seg.len() >= shape.total_bytes(),
            "segment too small for its shape"
        );
        let js = JobSegment {
            seg: Arc::new(seg),
            shape,
            outer: None,
            listed: None,
            hosts: None,
        };
        let h = js.header();
        h.version.store(VERSION, Ordering::Relaxed);
        h.nranks.store(shape.nranks, Ordering::Relaxed);
        h.nslots.store(shape.ring.nslots as u32, Ordering::Relaxed);
        let flags = if shape.doorbells { FLAG_DOORBELLS } else { 0 };
        h.flags.store(flags, Ordering::Relaxed);
        h.data_bytes
            .store(shape.ring.data_bytes as u64, Ordering::Relaxed);
        h.total_bytes
            .store(shape.total_bytes() as u64, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
        js
    }

    /// Adopt a segment created (and initialised) by the launcher; checks its header.
    pub fn attach(seg: Segment) -> Result<JobSegment, String> {
        if seg.len() < HEADER_BYTES {
            return Err(format!("job segment of {} bytes is too small", seg.len()));
        }
        // SAFETY: the segment is at least HEADER_BYTES long and page aligned; JobHeader is
        // made of atomics, valid for any bit pattern.
        let h = unsafe { &*(seg.base() as *const JobHeader) };
        if h.magic.load(Ordering::Acquire) != MAGIC || h.version.load(Ordering::Relaxed) != VERSION
        {
            return Err("job segment has a bad magic number or version (launcher and program built from different earlybird versions?)".into());
        }
        let shape = JobShape {
            nranks: h.nranks.load(Ordering::Relaxed),
            ring: RingShape {
                nslots: h.nslots.load(Ordering::Relaxed) as usize,
                data_bytes: h.data_bytes.load(Ordering::Relaxed) as usize,
            },
            doorbells: h.flags.load(Ordering::Relaxed) & FLAG_DOORBELLS != 0,
        };
        if seg.len() < shape.total_bytes() {
            return Err(format!(
                "job segment of {} bytes is smaller than its shape needs ({})",
                seg.len(),
                shape.total_bytes()
            ));
        }
        Ok(JobSegment {
            seg: Arc::new(seg),
            shape,
            outer: None,
            listed: None,
            hosts: None,
        })
    }

    /// This segment, as this host's part of a job across `hosts`.
    pub(crate) fn across(mut self, hosts: super::hosts::Hosts) -> JobSegment {
        self.hosts = Some(Arc::new(hosts));
        self
    }

    /// Where the ranks are, when the job spans hosts.
    pub(crate) fn hosts(&self) -> Option<&super::hosts::Hosts> {
        self.hosts.as_deref()
    }

    /// This segment, as the job of endpoints that the process of rank `rank` of `outer`
    /// hosts: an abort of `outer` ends this job's waits, an abort here aborts `outer` too
    /// (naming `rank`), and the launcher watched is `outer`'s.
    pub(crate) fn within(mut self, outer: JobSegment, rank: u32) -> JobSegment {
        self.set_launcher_pid(outer.launcher_pid());
        self.outer = Some(Arc::new((outer, rank)));
        self
    }

    /// List this job (an endpoint communicator's, made by this process, whose segment `fd`
    /// holds) in its outermost job's header, so that the launcher's timeout report can say
    /// what its ranks were doing; the entry lasts while this process holds the job. Nothing
    /// happens when the list is full (the job then goes unreported).
    pub(crate) fn list_in_root(&mut self, fd: std::os::fd::OwnedFd) {
        let mut root = self.clone();
        while let Some((o, _)) = root.outer() {
            root = o.clone();
        }
        let word = (u64::from(crate::sys::process::pid()) << 32)
            | u64::from(std::os::fd::AsRawFd::as_raw_fd(&fd) as u32);
        let free = root.header().endpoint_jobs.iter().position(|e| {
            e.compare_exchange(0, word, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        });
        if let Some(entry) = free {
            self.listed = Some(Arc::new(Listing {
                root,
                entry,
                _fd: fd,
            }));
        }
    }

    /// For a launcher's report: a line per rank of every endpoint communicator's job listed
    /// in this job (see [`list_in_root`](Self::list_in_root)) saying what it is doing, with
    /// the rank of this job whose process hosts it where the pid says so.
    pub fn endpoint_reports(&self) -> Vec<String> {
        let mut out = Vec::new();
        for e in &self.header().endpoint_jobs {
            let w = e.load(Ordering::Acquire);
            if w == 0 {
                continue;
            }
            let (pid, fd) = ((w >> 32) as u32, w as u32 as i32);
            let job = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(format!("/proc/{pid}/fd/{fd}"))
                .map_err(|e| e.to_string())
                .and_then(|f| {
                    use std::os::fd::AsFd;
                    let len = crate::sys::segment::fd_len(f.as_fd()).map_err(|e| e.to_string())?;
                    Segment::map_fd(f.as_fd(), len).map_err(|e| e.to_string())
                })
                .and_then(JobSegment::attach);
            let job = match job {
                Ok(j) => j,
                Err(err) => {
                    out.push(format!(
                        "an endpoint communicator made by pid {pid} could not be read: {err}"
                    ));
                    continue;
                }
            };
            let n = job.nranks();
            for r in 0..n {
                let p = job.pid(r);
                let hosts: Vec<u32> = (0..self.nranks()).filter(|&h| self.pid(h) == p).collect();
                let host = match hosts[..] {
                    [h] => format!(", in the process of rank {h}"),
                    _ => String::new(),
                };
                let what = match job.state(r) {
                    RankState::NotStarted => "was never attached by a thread".to_string(),
                    _ => job.describe(r),
                };
                out.push(format!(
                    "endpoint rank {r} of {n} (an endpoint communicator made by pid {pid}{host}): {what}"
                ));
            }
        }
        out
    }

    /// The job this one lies within (an endpoint communicator's), with this process's rank
    /// there.
    pub(crate) fn outer(&self) -> Option<(&JobSegment, u32)> {
        self.outer.as_deref().map(|(j, r)| (j, *r))
    }

    /// Whether `other` maps the same segment (in this process).
    pub(crate) fn same(&self, other: &JobSegment) -> bool {
        self.seg.base() == other.seg.base()
    }

    pub fn shape(&self) -> JobShape {
        self.shape
    }

    pub fn nranks(&self) -> u32 {
        self.shape.nranks
    }

    fn header(&self) -> &JobHeader {
        // SAFETY: offset 0 of a segment at least total_bytes long (checked at init/attach),
        // page aligned; atomics only.
        unsafe { &*(self.seg.base() as *const JobHeader) }
    }

    fn slot(&self, rank: u32) -> &RankSlot {
        assert!(rank < self.shape.nranks);
        // SAFETY: the slot array follows the header inside the segment; 128-aligned; atomics.
        unsafe {
            &*(self
                .seg
                .base()
                .add(HEADER_BYTES + rank as usize * RANK_SLOT_BYTES)
                as *const RankSlot)
        }
    }

    /// The ring that `from` writes and `to` reads. Its ends must not outlive this segment
    /// (hold a clone of it).
    pub(crate) fn ring(&self, from: u32, to: u32) -> RingPtrs {
        assert!(from != to && from < self.shape.nranks && to < self.shape.nranks);
        let off = self.shape.ring_offset(from, to);
        // SAFETY: rings are laid out one after another from a 4 KiB boundary, each
        // `ring.bytes()` long (a multiple of 128), all inside the segment (total_bytes checks
        // at init/attach), which was created zero-filled and stays mapped while a clone of
        // this JobSegment lives; the ring shape comes from `JobShape::for_ranks` (256 slots,
        // data a multiple of 4 KiB) or a header checked at attach; only ring ends touch
        // ring memory.
        unsafe { RingPtrs::at(self.seg.base().wrapping_add(off), self.shape.ring) }
    }

    /// Back ring (`from` -> `to`) with memory (see [`Segment::populate`]): its sender does
    /// so before its first frame when the job has doorbells.
    pub(crate) fn populate_ring(&self, from: u32, to: u32) -> std::io::Result<()> {
        assert!(from != to && from < self.shape.nranks && to < self.shape.nranks);
        self.seg
            .populate(self.shape.ring_offset(from, to), self.shape.ring.bytes())
    }

    /// Word `word` of rank `rank`'s doorbell bitmap (bit `s % 64` of word `s / 64`: sender
    /// `s` has published frames since `rank` last looked).
    #[inline(always)]
    pub(crate) fn bell(&self, rank: u32, word: usize) -> &AtomicU64 {
        assert!(rank < self.shape.nranks && word < self.shape.bell_words());
        let off = self.shape.bells_offset() + (rank as usize * self.shape.bell_words() + word) * 8;
        // SAFETY: the bitmaps lie between the rank slots and the rings, inside the segment's
        // reserved part (bounds checked above), 8-aligned (the slots end on a 128-byte
        // boundary); accessed only as atomics.
        unsafe { &*(self.seg.base().add(off) as *const AtomicU64) }
    }

    /// Words in a rank's doorbell bitmap.
    pub(crate) fn bell_words(&self) -> usize {
        self.shape.bell_words()
    }

    // ---- rank slots -------------------------------------------------------------------

    /// Take endpoint `rank` of the job for process `pid`: its state goes from not started to
    /// running, once. `Err` if it was taken already (by this process or another), so each
    /// ring of the job gets one producer and one consumer.
    pub fn claim(&self, rank: u32, pid: u32) -> Result<(), String> {
        let s = self.slot(rank);
        s.pid.store(pid, Ordering::Relaxed);
        s.state
            .compare_exchange(
                RankState::NotStarted as u32,
                RankState::Running as u32,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map(|_| ())
            .map_err(|_| format!("rank {rank} of this job has already started"))
    }

    pub fn set_finalized(&self, rank: u32) {
        self.slot(rank)
            .state
            .store(RankState::Finalized as u32, Ordering::Release);
    }

    pub fn state(&self, rank: u32) -> RankState {
        match self.slot(rank).state.load(Ordering::Acquire) {
            1 => RankState::Running,
            2 => RankState::Finalized,
            _ => RankState::NotStarted,
        }
    }

    /// Record in advance that `rank` will run in process `pid` (endpoints not yet attached).
    pub(crate) fn set_pid(&self, rank: u32, pid: u32) {
        self.slot(rank).pid.store(pid, Ordering::Release);
    }

    pub fn pid(&self, rank: u32) -> u32 {
        self.slot(rank).pid.load(Ordering::Acquire)
    }

    /// Publish what `rank` is blocked in (Nothing clears it), and on which peer (`None`:
    /// no particular one).
    pub fn set_blocked(&self, rank: u32, what: BlockedIn, peer: Option<i32>, tag: i32, ctx: u32) {
        let s = self.slot(rank);
        s.peer.store(peer.unwrap_or(NO_PEER), Ordering::Relaxed);
        s.tag.store(tag, Ordering::Relaxed);
        s.ctx.store(ctx, Ordering::Relaxed);
        s.blocked.store(what as u32, Ordering::Release);
    }

    /// What `rank` has published that it is blocked in (`what` is `Nothing` while it runs
    /// outside a long wait).
    pub fn blocked_in(&self, rank: u32) -> Published {
        let s = self.slot(rank);
        let what = BlockedIn::from_u32(s.blocked.load(Ordering::Acquire));
        let peer = s.peer.load(Ordering::Relaxed);
        Published {
            what,
            peer: (peer != NO_PEER).then_some(peer),
            tag: s.tag.load(Ordering::Relaxed),
            ctx: s.ctx.load(Ordering::Relaxed),
        }
    }

    /// Wait (polling every millisecond, at most `limit`) until `rank` publishes a wait that
    /// `pred` accepts; the observer's way to know a peer is inside a blocking call (tests
    /// synchronise on this rather than on sleeps). `Err` names what `rank` was doing when
    /// `limit` ran out, or that the job was aborted.
    pub fn await_blocked(
        &self,
        rank: u32,
        limit: std::time::Duration,
        pred: impl Fn(&Published) -> bool,
    ) -> Result<Published, String> {
        let end = std::time::Instant::now() + limit;
        loop {
            let p = self.blocked_in(rank);
            if self.state(rank) == RankState::Running && pred(&p) {
                return Ok(p);
            }
            if let Some((who, code)) = self.aborted() {
                return Err(format!(
                    "the job was aborted by {who} (code {code}) while waiting for rank {rank} to block"
                ));
            }
            if std::time::Instant::now() >= end {
                return Err(format!(
                    "rank {rank} did not block as expected within {limit:?}: it {}",
                    self.describe(rank)
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// A sentence saying what `rank` is doing, for launcher reports.
    pub fn describe(&self, rank: u32) -> String {
        let state = self.state(rank);
        let Published {
            what,
            peer,
            tag,
            ctx,
        } = self.blocked_in(rank);
        let peer_s = match peer {
            Some(-1) => "ANY_SOURCE".to_string(),
            None => "-".to_string(),
            Some(p) => p.to_string(),
        };
        let tag_s = if tag == -1 {
            "ANY_TAG".to_string()
        } else {
            tag.to_string()
        };
        match (state, what) {
            (RankState::NotStarted, _) => "had not initialised earlybird".into(),
            (RankState::Finalized, _) => "had finalized".into(),
            (_, BlockedIn::Nothing) => "was computing (not blocked in earlybird)".into(),
            (_, BlockedIn::Send) => {
                format!("was blocked in send to rank {peer_s} (tag {tag_s}, context {ctx})")
            }
            (_, BlockedIn::Recv) => {
                format!("was blocked in recv from rank {peer_s} (tag {tag_s}, context {ctx})")
            }
            (_, BlockedIn::Wait) => {
                format!("was blocked in wait (peer {peer_s}, tag {tag_s}, context {ctx})")
            }
            (_, BlockedIn::Probe) => {
                format!("was blocked in probe (source {peer_s}, tag {tag_s}, context {ctx})")
            }
            (_, BlockedIn::Finalize) => "was blocked in finalize, waiting for other ranks".into(),
            (_, BlockedIn::BufferDetach) => "was blocked in buffer_detach".into(),
            (_, BlockedIn::Rma) => {
                format!("was blocked in an RMA synchronization of a window (rank {peer_s})")
            }
        }
    }

    // ---- job-wide flags ----------------------------------------------------------------

    /// Mark the job failed because of `rank` (or -1 for the launcher) with `code`.
    /// The first caller wins; later calls leave the first reason in place.
    pub fn abort(&self, rank: i32, code: i32) {
        let word = (1u64 << 63) | (((rank as u32 as u64) & 0x7fff_ffff) << 32) | code as u32 as u64;
        let _ =
            self.header()
                .aborted
                .compare_exchange(0, word, Ordering::AcqRel, Ordering::Acquire);
        if let Some((outer, me)) = self.outer() {
            outer.abort(if rank < 0 { rank } else { me as i32 }, code);
        }
    }

    /// `Some((rank, code))` once the job has been aborted (rank -1: the launcher).
    #[inline]
    pub fn aborted(&self) -> Option<(i32, i32)> {
        let w = self.header().aborted.load(Ordering::Acquire);
        if w == 0 {
            return self.outer().and_then(|(o, _)| o.aborted());
        }
        // Sign-extend the 31-bit rank field (the launcher records -1).
        let rank = (((w >> 32) as u32) << 1) as i32 >> 1;
        Some((rank, w as u32 as i32))
    }

    /// Count this rank into finalize; returns how many ranks have entered it so far.
    pub fn enter_finalize(&self) -> u32 {
        self.header().finalizing.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Record the launcher's pid (ranks check it is alive during long waits).
    pub fn set_launcher_pid(&self, pid: u32) {
        self.header().launcher_pid.store(pid, Ordering::Release);
    }

    /// The launcher's pid, 0 when there is none.
    #[inline]
    pub fn launcher_pid(&self) -> u32 {
        self.header().launcher_pid.load(Ordering::Relaxed)
    }

    pub fn finalizing(&self) -> u32 {
        self.header().finalizing.load(Ordering::Acquire)
    }

    /// The physical floor: ranks 0 and 1 hand one 8-byte atomic on one cache line back and
    /// forth `iters` times (rank 0 waits for even values, rank 1 for odd ones, each stores the
    /// next), as `bench-ref/floor/cacheline.c one` does. `round` must grow by one per call on
    /// both ranks. Returns the seconds the loop took on this rank.
    pub fn floor_pingpong(&self, rank: u32, round: u64, iters: u64) -> f64 {
        // SAFETY: the floor line lies inside the header area of a segment at least
        // total_bytes long; it is 128-aligned and only accessed as an atomic.
        let x = unsafe { &*(self.seg.base().add(FLOOR_LINE_OFFSET) as *const AtomicU64) };
        let base = round * 2 * iters;
        let who = (rank & 1) as u64;
        let t0 = std::time::Instant::now();
        for i in 0..iters {
            let want = base + 2 * i + who;
            while x.load(Ordering::Acquire) != want {
                std::hint::spin_loop();
            }
            x.store(want + 1, Ordering::Release);
        }
        t0.elapsed().as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_do_not_overlap_and_fit() {
        for n in [1u32, 2, 3, 8, 17] {
            let shape = JobShape::for_ranks(n);
            let seg = Segment::anonymous(shape.total_bytes()).unwrap();
            let base = seg.base() as usize;
            let js = JobSegment::init(seg, shape);
            let mut starts = vec![];
            for s in 0..n {
                for r in 0..n {
                    if s != r {
                        let p = js.ring(s, r);
                        starts.push(p.base() as usize - base);
                    }
                }
            }
            starts.sort();
            for w in starts.windows(2) {
                assert!(w[1] - w[0] >= shape.ring.bytes());
            }
            if let Some(last) = starts.last() {
                assert!(last + shape.ring.bytes() <= shape.total_bytes());
            }
        }
    }

    /// The doorbell bitmaps lie between the rank slots and the first ring, a bit for every
    /// rank, inside the part a job with doorbells backs at creation.
    #[test]
    fn doorbells_sit_before_the_rings() {
        for n in [2u32, 33, 64, 65, 1024] {
            let mut shape = JobShape::for_ranks(n);
            shape.doorbells = true;
            assert!(shape.bell_words() * 64 >= n as usize);
            let bells_end = shape.bells_offset() + n as usize * shape.bell_words() * 8;
            assert!(shape.bells_offset() >= HEADER_BYTES + n as usize * RANK_SLOT_BYTES);
            assert!(bells_end <= shape.rings_offset());
            assert_eq!(shape.reserved_bytes(), shape.rings_offset());
            assert!(shape.ring_offset(0, 1) >= shape.reserved_bytes());
            shape.doorbells = false;
            assert_eq!(shape.reserved_bytes(), shape.total_bytes());
        }
        assert!(
            !JobShape::for_ranks(DOORBELLS_ABOVE).doorbells || std::env::var(ENV_DOORBELLS).is_ok()
        );
        assert!(
            JobShape::for_ranks(DOORBELLS_ABOVE + 1).doorbells
                || std::env::var(ENV_DOORBELLS).is_ok()
        );
    }

    #[test]
    fn abort_keeps_first_reason() {
        let shape = JobShape::for_ranks(2);
        let js = JobSegment::init(Segment::anonymous(shape.total_bytes()).unwrap(), shape);
        assert_eq!(js.aborted(), None);
        js.abort(1, 9);
        js.abort(0, 3);
        assert_eq!(js.aborted(), Some((1, 9)));
        let js2 = JobSegment::init(Segment::anonymous(shape.total_bytes()).unwrap(), shape);
        js2.abort(-1, -1);
        assert_eq!(js2.aborted(), Some((-1, -1)));
    }
}
