//! The checkpoint store of one rank's part of a persistent window: one file holding every
//! kept version, in which versions share the blocks they have in common.
//!
//! # Format
//!
//! The file is a row of **slots** of the window's block size (4 KiB, or more for windows
//! of more than 4 MiB so that a window has at most 1024 blocks). Slot 0 holds the
//! superblock, twice (at bytes 0 and 2048, each with its own sequence number and checksum,
//! so that rewriting one can never lose both). Every other slot is free, holds one block of
//! window data, or starts a **manifest**: the record of one version.
//!
//! ```text
//! superblock: magic "EBPMEMSB", format, rank, store id, window bytes, block shift,
//!             highest version ever, sequence, crc32c
//! manifest:   magic "EBPMEMVR", store id, version, commit sequence, time (ns), blocks,
//!             flags (KEEPS_BASE), highest version ever, slot, base version,
//!             crc32c of header and entries
//!             entries: per block of the window, (slot holding it, crc32c of its bytes)
//! ```
//!
//! # Commit
//!
//! A commit writes the blocks that changed since the version it follows into free slots
//! (slots no live version refers to), then the new manifest (which refers to those slots for
//! the changed blocks and to the previous version's slots for the others) into a free slot,
//! and syncs the file once (`fdatasync`). The slots are overwritten in place in a file whose
//! space was written when it grew, so the sync carries data only and no file-system
//! metadata (except for a commit that has to grow the file first). Nothing a live version
//! refers to is ever written, so:
//!
//! - a crash at any instant before the sync returns leaves every earlier version as it was;
//!   the new manifest is then absent, damaged (checksum), or present with blocks that are
//!   not all there, which the blocks' checksums show: a version is **complete** only when
//!   its manifest and every block it refers to verify, and only complete versions are
//!   loaded;
//! - once the sync returns the version is durable.
//!
//! Of the versions whose manifests verify, only the newest can be incomplete after a crash
//! (its commit was cut); an incomplete older one is damage, which loading reports.
//!
//! Keeping only the latest version: a manifest flagged KEEPS_BASE declares that, of the
//! versions committed before it (lower commit sequence), only its base (the version it was
//! committed on) is kept. It takes effect when it is complete: a cut commit leaves the
//! versions before it as they were, whose blocks it never touched. The base is released
//! later ([`Store::release_base`]): by a persisting fence once every rank has committed the
//! new version, so that a crash at any instant leaves a version every rank holds. A
//! released manifest's slots are reused only once its erasure is synced.
//!
//! Deleting a version overwrites the start of its manifest with zeros and syncs; a cut
//! deletion leaves the manifest whole (still a version) or damaged (deleted). Blocks are
//! freed by no longer being referred to; no other version is touched.
#![forbid(unsafe_code)]

use crate::sys::pmem_io::{PmemFile, PmemIo};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::sync::Arc;

const SB_MAGIC: &[u8; 8] = b"EBPMEMSB";
const MF_MAGIC: &[u8; 8] = b"EBPMEMVR";
const FORMAT: u32 = 1;
/// Bytes of a superblock copy (its fields and checksum).
const SB_BYTES: usize = 64;
/// Offset of the second superblock copy in slot 0.
const SB_B: u64 = 2048;
/// Bytes of a manifest's header.
const MF_HEAD: usize = 72;
/// A manifest flag: of the versions committed before this one, only its base is kept.
const KEEPS_BASE: u32 = 2;
/// Most blocks a window is cut into (the block size grows beyond 4 KiB to keep to this).
pub(crate) const MAX_BLOCKS: usize = 1024;

/// The block size (as a shift) of a window part of `bytes` bytes.
pub(crate) fn block_shift(bytes: u64) -> u32 {
    let mut s = 12;
    while (bytes >> s) > MAX_BLOCKS as u64 {
        s += 1;
    }
    s
}

/// What the store knows of the window part it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) id: u64,
    pub(crate) rank: u32,
    pub(crate) bytes: u64,
    pub(crate) shift: u32,
}

impl Geometry {
    pub(crate) fn block(&self) -> usize {
        1 << self.shift
    }

    pub(crate) fn nblocks(&self) -> usize {
        (self.bytes as usize).div_ceil(self.block())
    }

    /// Bytes of block `b` (the last may be short).
    fn block_len(&self, b: usize) -> usize {
        (self.bytes as usize - b * self.block()).min(self.block())
    }

    /// Slots a manifest takes.
    fn manifest_slots(&self) -> usize {
        // Header, entries and the checksum after them.
        (MF_HEAD + 8 * self.nblocks() + 4).div_ceil(self.block())
    }
}

/// One version's record, as read or written.
#[derive(Clone, Debug)]
pub(crate) struct Manifest {
    pub(crate) version: u64,
    pub(crate) seq: u64,
    pub(crate) time_ns: u64,
    /// The first slot it occupies.
    slot: u64,
    /// Keep only this one's base of the versions before it (`Some(base)`; `Some(None)`:
    /// none), or keep them all (`None`).
    keeps: Option<Option<u64>>,
    highest: u64,
    /// Per block: (slot, crc32c).
    entries: Vec<(u32, u32)>,
}

/// Why a version cannot be read.
#[derive(Debug)]
pub(crate) enum LoadError {
    /// No such version in the store.
    Missing,
    /// The version's data fails its checksums (which block, and what was found).
    Damaged(String),
    /// The file system failed.
    Io(io::Error),
}

impl From<io::Error> for LoadError {
    fn from(e: io::Error) -> Self {
        LoadError::Io(e)
    }
}

/// One rank's checkpoint store (see the module's docs).
pub(crate) struct Store {
    file: Box<dyn PmemFile>,
    pub(crate) geo: Geometry,
    /// Slots in the file (slot 0, the superblock's, included).
    slots: u64,
    /// The highest version number ever committed (None before the first).
    highest: Option<u64>,
    /// The sequence of the superblock copy read or written last.
    sb_seq: u64,
    /// The commit sequence of the newest manifest seen or written.
    seq: u64,
    /// The live versions (complete or not yet checked), by number.
    live: BTreeMap<u64, Manifest>,
    /// Versions found damaged (a block failing its checksum) when loaded or verified.
    damaged: BTreeMap<u64, String>,
    /// A commit cut by a crash, found (and erased) at open: its number and what was wrong.
    pub(crate) cut: Option<(u64, String)>,
    /// Slots that start like a manifest of this store but fail its checksum: a commit cut
    /// before its manifest was whole, or damage.
    pub(crate) bad_manifests: Vec<u64>,
    /// The blocks of a commit on their way to the file.
    stage: Vec<u8>,
    /// Slots of manifests that a durable commit ended, to erase with the next write that
    /// syncs (see `commit`).
    pending_erase: Vec<u64>,
    /// Versions released from keeping (see `release_base`) whose erasure is not synced yet.
    releasing: Vec<Manifest>,
    /// Slots of manifests found ended at open and erased then, unsynced.
    dead_at_open: Vec<u64>,
    /// Slots of manifests a durable commit ended without erasing them (released versions).
    ended_unerased: Vec<u64>,
}

fn crc(b: &[u8]) -> u32 {
    crc32c::crc32c(b)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Write all of `buf` at `off`, looping over short writes.
pub(crate) fn write_all_at(f: &mut dyn PmemFile, mut off: u64, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        let n = f.write_at(off, buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "the file system wrote nothing",
            ));
        }
        off += n as u64;
        buf = &buf[n..];
    }
    Ok(())
}

/// Read all of `buf` from `off`; an error at the end of the file.
pub(crate) fn read_exact_at(
    f: &mut dyn PmemFile,
    mut off: u64,
    mut buf: &mut [u8],
) -> io::Result<()> {
    while !buf.is_empty() {
        let n = f.read_at(off, buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the file ends before byte {off}"),
            ));
        }
        off += n as u64;
        buf = &mut buf[n..];
    }
    Ok(())
}

fn encode_sb(geo: &Geometry, highest: Option<u64>, seq: u64) -> [u8; SB_BYTES] {
    let mut b = [0u8; SB_BYTES];
    b[0..8].copy_from_slice(SB_MAGIC);
    b[8..12].copy_from_slice(&FORMAT.to_le_bytes());
    b[12..16].copy_from_slice(&geo.rank.to_le_bytes());
    b[16..24].copy_from_slice(&geo.id.to_le_bytes());
    b[24..32].copy_from_slice(&geo.bytes.to_le_bytes());
    b[32..36].copy_from_slice(&geo.shift.to_le_bytes());
    b[40..48].copy_from_slice(&highest.map_or(u64::MAX, |h| h).to_le_bytes());
    b[48..56].copy_from_slice(&seq.to_le_bytes());
    let c = crc(&b[..60]);
    b[60..64].copy_from_slice(&c.to_le_bytes());
    b
}

/// A superblock copy: geometry, highest version ever, sequence; `None` if it fails.
fn decode_sb(b: &[u8]) -> Option<(Geometry, Option<u64>, u64)> {
    if &b[0..8] != SB_MAGIC || u32_at(b, 8) != FORMAT || crc(&b[..60]) != u32_at(b, 60) {
        return None;
    }
    let geo = Geometry {
        rank: u32_at(b, 12),
        id: u64_at(b, 16),
        bytes: u64_at(b, 24),
        shift: u32_at(b, 32),
    };
    if !(12..=40).contains(&geo.shift) || geo.bytes == 0 {
        return None;
    }
    let h = u64_at(b, 40);
    Some((geo, (h != u64::MAX).then_some(h), u64_at(b, 48)))
}

fn encode_manifest(geo: &Geometry, m: &Manifest) -> Vec<u8> {
    let mut b = vec![0u8; MF_HEAD + 8 * m.entries.len()];
    b[0..8].copy_from_slice(MF_MAGIC);
    b[8..16].copy_from_slice(&geo.id.to_le_bytes());
    b[16..24].copy_from_slice(&m.version.to_le_bytes());
    b[24..32].copy_from_slice(&m.seq.to_le_bytes());
    b[32..40].copy_from_slice(&m.time_ns.to_le_bytes());
    b[40..44].copy_from_slice(&(m.entries.len() as u32).to_le_bytes());
    b[44..48].copy_from_slice(&(if m.keeps.is_some() { KEEPS_BASE } else { 0 }).to_le_bytes());
    b[48..56].copy_from_slice(&m.highest.to_le_bytes());
    b[56..64].copy_from_slice(&m.slot.to_le_bytes());
    b[64..72].copy_from_slice(&m.keeps.flatten().unwrap_or(u64::MAX).to_le_bytes());
    for (i, &(s, c)) in m.entries.iter().enumerate() {
        b[MF_HEAD + 8 * i..][..4].copy_from_slice(&s.to_le_bytes());
        b[MF_HEAD + 8 * i + 4..][..4].copy_from_slice(&c.to_le_bytes());
    }
    // The checksum of header and entries follows them.
    let c = crc(&b);
    let mut out = b;
    out.extend_from_slice(&c.to_le_bytes());
    out
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Store {
    /// A store over `file` as its superblock says, with nothing known of its versions yet.
    fn new(
        file: Box<dyn PmemFile>,
        geo: Geometry,
        slots: u64,
        highest: Option<u64>,
        sb_seq: u64,
    ) -> Store {
        Store {
            file,
            geo,
            slots,
            highest,
            sb_seq,
            seq: 0,
            live: BTreeMap::new(),
            damaged: BTreeMap::new(),
            cut: None,
            bad_manifests: Vec::new(),
            stage: Vec::new(),
            pending_erase: Vec::new(),
            releasing: Vec::new(),
            dead_at_open: Vec::new(),
            ended_unerased: Vec::new(),
        }
    }

    /// The store's file name in a window's directory, for `rank`.
    pub(crate) fn file_name(rank: u32) -> String {
        format!("rank{rank}.store")
    }

    /// Make a new, empty store for `geo` at `path` (which must not exist), with room for
    /// two versions of every block, durable (file and directory entry) when this returns.
    pub(crate) fn create(io: Arc<dyn PmemIo>, path: &Path, geo: Geometry) -> io::Result<Store> {
        let mut file = io.create(path)?;
        let sb = encode_sb(&geo, None, 1);
        let mut slot0 = vec![0u8; geo.block()];
        slot0[..SB_BYTES].copy_from_slice(&sb);
        slot0[SB_B as usize..SB_B as usize + SB_BYTES].copy_from_slice(&sb);
        write_all_at(&mut *file, 0, &slot0)?;
        let mut s = Store::new(file, geo, 1, None, 1);
        s.grow(2 * (geo.nblocks() + geo.manifest_slots()) as u64)?;
        s.file.sync_data()?;
        if let Some(dir) = path.parent() {
            io.sync_dir(dir)?;
        }
        Ok(s)
    }

    /// Open the store at `path`: read its superblock and every manifest, and work out which
    /// versions are live and whether the newest is complete.
    pub(crate) fn open(io: Arc<dyn PmemIo>, path: &Path, write: bool) -> io::Result<Store> {
        let bad = |what: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {what}", path.display()),
            )
        };
        let mut file = io.open(path, write)?;
        let len = file.len()?;
        let mut head = [0u8; SB_B as usize + SB_BYTES];
        if len < head.len() as u64 {
            return Err(bad(format!(
                "{len} bytes, too short for a store's superblock"
            )));
        }
        read_exact_at(&mut *file, 0, &mut head)?;
        let a = decode_sb(&head[..SB_BYTES]);
        let b = decode_sb(&head[SB_B as usize..]);
        let (geo, highest, sb_seq) = match (a, b) {
            (Some(x), Some(y)) => {
                if x.0 != y.0 {
                    return Err(bad("its two superblocks disagree on the geometry".into()));
                }
                if x.2 >= y.2 {
                    x
                } else {
                    y
                }
            }
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => return Err(bad("no valid superblock (bad magic or checksum)".into())),
        };
        let slots = len >> geo.shift;
        let mut s = Store::new(file, geo, slots, highest, sb_seq);
        let mut found = s.scan()?;
        // The newest sequence of any manifest, a cut commit's too (new commits go above it).
        s.seq = found.iter().map(|m| m.seq).max().unwrap_or(0);
        // Newest commit first: of two manifests with one number the newer counts; after a
        // complete KEEPS_BASE manifest only its base is kept. Only the newest manifest can be
        // a cut commit: it does not count (nor does its flag), and it is erased so that it
        // never comes back as a damaged version.
        found.sort_by(|x, y| y.seq.cmp(&x.seq));
        let mut cut = None;
        let mut dead = Vec::new();
        let mut only: Option<Option<u64>> = None;
        for (i, m) in found.into_iter().enumerate() {
            let wanted = match only {
                Some(base) => base == Some(m.version),
                None => true,
            };
            if !wanted || s.live.contains_key(&m.version) {
                dead.push(m.slot);
                continue;
            }
            if i == 0 {
                if let Err(why) = s.check_blocks(&m)? {
                    cut = Some((m, why));
                    continue;
                }
            }
            if only.is_some() {
                // The base: nothing older is kept.
                only = Some(None);
            } else if let Some(k) = m.keeps {
                only = Some(k);
            }
            s.live.insert(m.version, m);
        }
        // Manifests no longer kept are erased (unsynced: until a sync carries the zeros, the
        // manifest that ended them is durable and still ends them), so that deleting that one
        // later cannot bring them back.
        if write {
            for &slot in &dead {
                s.erase_manifest(slot);
            }
            s.dead_at_open = dead;
        }
        if let Some(h) = s.live.values().map(|m| m.highest).max() {
            s.highest = Some(s.highest.map_or(h, |x| x.max(h)));
        }
        if let (Some((m, _)), true) = (&cut, write) {
            write_all_at(&mut *s.file, m.slot << s.geo.shift, &[0u8; MF_HEAD])?;
            s.file.sync_data()?;
        }
        s.cut = cut.map(|(m, why)| (m.version, why));
        Ok(s)
    }

    /// Every manifest in the file whose header and entries verify.
    fn scan(&mut self) -> io::Result<Vec<Manifest>> {
        let mut out = Vec::new();
        let n = self.geo.nblocks();
        let span = self.geo.manifest_slots() as u64;
        let mut head = [0u8; MF_HEAD];
        let mut slot = 1;
        while slot < self.slots {
            read_exact_at(&mut *self.file, slot << self.geo.shift, &mut head)?;
            if &head[0..8] != MF_MAGIC
                || u64_at(&head, 8) != self.geo.id
                || u32_at(&head, 40) as usize != n
                || u64_at(&head, 56) != slot
                || slot + span > self.slots
            {
                slot += 1;
                continue;
            }
            let mut b = vec![0u8; MF_HEAD + 8 * n + 4];
            read_exact_at(&mut *self.file, slot << self.geo.shift, &mut b)?;
            let body = MF_HEAD + 8 * n;
            if crc(&b[..body]) != u32_at(&b, body) {
                self.bad_manifests.push(slot);
                slot += 1;
                continue;
            }
            let entries: Vec<(u32, u32)> = (0..n)
                .map(|i| (u32_at(&b, MF_HEAD + 8 * i), u32_at(&b, MF_HEAD + 8 * i + 4)))
                .collect();
            if entries
                .iter()
                .any(|&(s, _)| s == 0 || u64::from(s) >= self.slots)
            {
                self.bad_manifests.push(slot);
                slot += 1;
                continue;
            }
            out.push(Manifest {
                version: u64_at(&b, 16),
                seq: u64_at(&b, 24),
                time_ns: u64_at(&b, 32),
                slot,
                keeps: (u32_at(&b, 44) & KEEPS_BASE != 0).then(|| {
                    let base = u64_at(&b, 64);
                    (base != u64::MAX).then_some(base)
                }),
                highest: u64_at(&b, 48),
                entries,
            });
            slot += span;
        }
        Ok(out)
    }

    /// Whether every block of `m` verifies (`Err` names the first that does not).
    fn check_blocks(&mut self, m: &Manifest) -> io::Result<Result<(), String>> {
        self.read_verified(m, &mut |_, _| Ok(()))
    }

    /// Read the blocks of `m` in order, each checked against its checksum and then handed to
    /// `each(offset in the window, bytes)`; the first that fails ends the walk, `Err` naming
    /// it.
    fn read_verified(
        &mut self,
        m: &Manifest,
        each: &mut dyn FnMut(usize, &[u8]) -> io::Result<()>,
    ) -> io::Result<Result<(), String>> {
        let mut buf = vec![0u8; self.geo.block()];
        for (b, &(slot, c)) in m.entries.iter().enumerate() {
            let len = self.geo.block_len(b);
            read_exact_at(
                &mut *self.file,
                u64::from(slot) << self.geo.shift,
                &mut buf[..len],
            )?;
            if crc(&buf[..len]) != c {
                return Ok(Err(format!("block {b} (slot {slot}) fails its checksum")));
            }
            each(b * self.geo.block(), &buf[..len])?;
        }
        Ok(Ok(()))
    }

    /// Append `n` zero-filled slots (written, so that later commits overwrite allocated
    /// space). Not synced here: the commit that needs them syncs.
    fn grow(&mut self, n: u64) -> io::Result<()> {
        let zeros = vec![0u8; self.geo.block().max(1 << 20)];
        let mut left = n << self.geo.shift;
        let mut at = self.slots << self.geo.shift;
        while left > 0 {
            let k = left.min(zeros.len() as u64) as usize;
            write_all_at(&mut *self.file, at, &zeros[..k])?;
            at += k as u64;
            left -= k as u64;
        }
        self.slots += n;
        Ok(())
    }

    /// Stop keeping every version but the newest (`keep_latest` commits keep their base
    /// until this): they are erased with the next write that syncs, and their slots reused
    /// only after it.
    pub(crate) fn release_base(&mut self) {
        let Some(&newest) = self.live.keys().next_back() else {
            return;
        };
        let old: Vec<u64> = self.live.keys().copied().filter(|&v| v != newest).collect();
        for v in old {
            if let Some(m) = self.live.remove(&v) {
                self.damaged.remove(&v);
                self.releasing.push(m);
            }
        }
    }

    /// The slots no live or releasing version refers to, lowest first.
    fn free_slots(&self) -> Vec<u64> {
        let mut used = BTreeSet::new();
        let span = self.geo.manifest_slots() as u64;
        for m in self.live.values().chain(self.releasing.iter()) {
            for k in 0..span {
                used.insert(m.slot + k);
            }
            for &(s, _) in &m.entries {
                used.insert(u64::from(s));
            }
        }
        (1..self.slots).filter(|s| !used.contains(s)).collect()
    }

    /// The live versions, oldest first: (number, time in ns since the epoch, whether it is
    /// not known to be damaged: only loading and `verify` check an older version's blocks).
    pub(crate) fn versions(&self) -> Vec<(u64, u64, bool)> {
        self.live
            .values()
            .map(|m| (m.version, m.time_ns, !self.damaged.contains_key(&m.version)))
            .collect()
    }

    /// The newest live version that is not known to be damaged.
    pub(crate) fn newest(&self) -> Option<u64> {
        self.live
            .keys()
            .rev()
            .find(|v| !self.damaged.contains_key(v))
            .copied()
    }

    /// The highest version number ever committed.
    pub(crate) fn highest(&self) -> Option<u64> {
        self.highest
    }

    pub(crate) fn has(&self, v: u64) -> bool {
        self.live.contains_key(&v) && !self.damaged.contains_key(&v)
    }

    /// Commit version `version`: the window's bytes come from `read(offset, buf)`; the
    /// blocks that changed since `base` (a live version) are those with a bit in `dirty`
    /// (`None`, or no `base`: every block). `keep_latest`: of the earlier versions only
    /// `base` is kept once this one is durable, until [`Store::release_base`]; else all are.
    /// is durable. Durable when this returns `Ok`; on error every live version is intact and
    /// this one may or may not exist after a restart.
    pub(crate) fn commit(
        &mut self,
        version: u64,
        base: Option<u64>,
        dirty: Option<&[u64]>,
        keep_latest: bool,
        read: &mut dyn FnMut(usize, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let n = self.geo.nblocks();
        let base_version = base.filter(|b| self.live.contains_key(b));
        let base = base.and_then(|b| self.live.get(&b)).cloned();
        let changed: Vec<usize> = match (&base, dirty) {
            (Some(_), Some(bits)) => (0..n)
                .filter(|&b| bits.get(b / 64).is_some_and(|w| w >> (b % 64) & 1 == 1))
                .collect(),
            _ => (0..n).collect(),
        };
        let span = self.geo.manifest_slots();
        let mut free = self.free_slots();
        let need = changed.len() + span;
        if free.len() < need {
            // Room for this and one more commit of every block.
            let more = (need - free.len() + n + span) as u64;
            let from = self.slots;
            self.grow(more)?;
            free.extend(from..self.slots);
        }
        // The manifest goes in the first run of `span` consecutive free slots.
        let run = |free: &[u64]| {
            (0..=free.len() - span).find(|&i| free[i + span - 1] == free[i] + span as u64 - 1)
        };
        let mpos = match run(&free) {
            Some(i) => i,
            None => {
                // Free slots scattered (a manifest of several slots): a run at the end.
                let from = self.slots;
                self.grow(span as u64)?;
                free.extend(from..self.slots);
                free.len() - span
            }
        };
        let mslot = free[mpos];
        let data_slots: Vec<u64> = free
            .iter()
            .enumerate()
            .filter(|&(i, _)| i < mpos || i >= mpos + span)
            .map(|(_, &s)| s)
            .take(changed.len())
            .collect();
        // Stage the manifest (first `span` slots' worth) and the changed blocks, then write
        // them in runs of consecutive slots: with the manifest just before the blocks (the
        // usual case) a whole commit is one write.
        let block = self.geo.block();
        let mut entries = base
            .as_ref()
            .map_or_else(|| vec![(0u32, 0u32); n], |b| b.entries.clone());
        // The staging buffer is kept from commit to commit (no allocation, no zeroing).
        let mut buf = std::mem::take(&mut self.stage);
        let total = (span + changed.len()) * block;
        if buf.len() < total {
            buf.resize(total, 0);
        }
        let mut result = Ok(());
        for (j, &b) in changed.iter().enumerate() {
            let len = self.geo.block_len(b);
            let at = (span + j) * block;
            if let Err(e) = read(b * block, &mut buf[at..at + len]) {
                result = Err(e);
                break;
            }
            // The tail of a short last block is written as zeros.
            buf[at + len..at + block].fill(0);
            entries[b] = (data_slots[j] as u32, crc(&buf[at..at + len]));
        }
        let highest = self.highest.map_or(version, |h| h.max(version));
        let m = Manifest {
            version,
            // A commit's sequence is never given twice, even if it fails after its manifest
            // was written (a stale manifest must never tie with a later one).
            seq: {
                self.seq += 1;
                self.seq
            },
            time_ns: now_ns(),
            slot: mslot,
            keeps: keep_latest.then_some(base_version),
            highest,
            entries,
        };
        if result.is_ok() {
            let bytes = encode_manifest(&self.geo, &m);
            buf[..bytes.len()].copy_from_slice(&bytes);
            buf[bytes.len()..span * block].fill(0);
            // (slot, offset in the buffer) of every staged slot, in slot order.
            let mut items: Vec<(u64, usize)> = (0..span)
                .map(|k| (mslot + k as u64, k * block))
                .chain(
                    data_slots
                        .iter()
                        .enumerate()
                        .map(|(j, &sl)| (sl, (span + j) * block)),
                )
                .collect();
            items.sort_unstable();
            let mut i = 0;
            while i < items.len() && result.is_ok() {
                let mut j = i + 1;
                while j < items.len()
                    && items[j].0 == items[j - 1].0 + 1
                    && items[j].1 == items[j - 1].1 + block
                {
                    j += 1;
                }
                let (slot, at) = items[i];
                result = write_all_at(
                    &mut *self.file,
                    slot << self.geo.shift,
                    &buf[at..at + (j - i) * block],
                );
                i = j;
            }
            // Manifests ended by earlier commits, whose slots this one does not overwrite, and
            // released ones (whose slots it may not overwrite) unless this commit ends them
            // itself (keeping only its base, which they are not).
            let written: BTreeSet<u64> = items.iter().map(|x| x.0).collect();
            let released = self
                .releasing
                .iter()
                .filter(|_| !keep_latest)
                .map(|m| m.slot);
            let erase: Vec<u64> = self
                .pending_erase
                .iter()
                .copied()
                .filter(|s| !written.contains(s))
                .chain(released)
                .collect();
            for slot in erase {
                if result.is_ok() {
                    result = write_all_at(&mut *self.file, slot << self.geo.shift, &[0u8; MF_HEAD]);
                }
            }
        }
        self.stage = buf;
        result?;
        self.file.sync_data()?;
        self.highest = Some(highest);
        self.pending_erase.clear();
        // Released versions are now ended by this commit (or erased by it): their slots are
        // free. Their manifests may still be on the disk; deleting this commit's version
        // erases them first (see `delete_version`).
        let released: Vec<u64> = self.releasing.drain(..).map(|m| m.slot).collect();
        if keep_latest {
            self.ended_unerased.extend(released);
        }
        // The manifests this one ends (all but its base when keeping the latest, else one
        // of the same number) are erased with the next write that syncs, unless a commit
        // overwrites them first: until then the durable manifest that ended them ends them
        // again at every open.
        let ended: Vec<Manifest> = self
            .live
            .values()
            .filter(|o| o.version == version || (keep_latest && Some(o.version) != base_version))
            .cloned()
            .collect();
        for o in ended {
            self.live.remove(&o.version);
            self.damaged.remove(&o.version);
            self.pending_erase.push(o.slot);
        }
        self.damaged.remove(&version);
        self.live.insert(version, m);
        Ok(())
    }

    /// The blocks whose bytes (read through `read`) differ from version `base`'s, by their
    /// checksums: for memory the library cannot watch (stores through a raw pointer). All
    /// blocks if `base` is not live.
    pub(crate) fn changed_since(
        &mut self,
        base: u64,
        read: &mut dyn FnMut(usize, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<Vec<usize>> {
        let n = self.geo.nblocks();
        let Some(m) = self.live.get(&base) else {
            return Ok((0..n).collect());
        };
        let block = self.geo.block();
        let mut buf = vec![0u8; block];
        let mut out = Vec::new();
        for (b, &(_, c)) in m.entries.iter().enumerate() {
            let len = self.geo.block_len(b);
            read(b * block, &mut buf[..len])?;
            if crc(&buf[..len]) != c {
                out.push(b);
            }
        }
        Ok(out)
    }

    /// Copy version `version` into the window through `write(offset, bytes)`, checking every
    /// block.
    pub(crate) fn load(
        &mut self,
        version: u64,
        write: &mut dyn FnMut(usize, &[u8]) -> io::Result<()>,
    ) -> Result<(), LoadError> {
        let m = self.live.get(&version).cloned().ok_or(LoadError::Missing)?;
        if let Some(why) = self.damaged.get(&version) {
            return Err(LoadError::Damaged(why.clone()));
        }
        if let Err(why) = self.read_verified(&m, write)? {
            self.damaged.insert(version, why.clone());
            return Err(LoadError::Damaged(why));
        }
        Ok(())
    }

    /// Check every block of every live version: (version, first problem).
    pub(crate) fn verify(&mut self) -> io::Result<Vec<(u64, Result<(), String>)>> {
        let ms: Vec<Manifest> = self.live.values().cloned().collect();
        let mut out = Vec::new();
        for m in ms {
            let r = self.check_blocks(&m)?;
            if let Err(why) = &r {
                self.damaged.insert(m.version, why.clone());
            }
            out.push((m.version, r));
        }
        Ok(out)
    }

    /// Delete version `v` (durable when this returns). `Ok(false)` if it is not live.
    pub(crate) fn delete_version(&mut self, v: u64) -> io::Result<bool> {
        let Some(m) = self.live.get(&v).cloned() else {
            return Ok(false);
        };
        // The highest number ever given must outlive the manifest that carried it.
        if self.highest == Some(v) && self.live.keys().next_back() == Some(&v) {
            self.write_superblock()?;
        }
        // The manifests this one (or another) ended are erased durably first: erasing the
        // one that ended them must not bring them back, whatever a crash keeps. Only slots
        // that no kept version uses now (a slot may have been reused since).
        let releasing: Vec<Manifest> = std::mem::take(&mut self.releasing);
        let span = self.geo.manifest_slots() as u64;
        let used: BTreeSet<u64> = self
            .live
            .values()
            .flat_map(|k| {
                (0..span)
                    .map(move |i| k.slot + i)
                    .chain(k.entries.iter().map(|&(s, _)| u64::from(s)))
            })
            .collect();
        let ended: BTreeSet<u64> = std::mem::take(&mut self.pending_erase)
            .into_iter()
            .chain(releasing.iter().map(|m| m.slot))
            .chain(std::mem::take(&mut self.dead_at_open))
            .chain(std::mem::take(&mut self.ended_unerased))
            .filter(|s| !used.contains(s))
            .collect();
        if !ended.is_empty() {
            for &slot in &ended {
                write_all_at(&mut *self.file, slot << self.geo.shift, &[0u8; MF_HEAD])?;
            }
            self.file.sync_data()?;
        }
        write_all_at(&mut *self.file, m.slot << self.geo.shift, &[0u8; MF_HEAD])?;
        self.file.sync_data()?;
        self.live.remove(&v);
        self.damaged.remove(&v);
        Ok(true)
    }

    /// Overwrite the start of the manifest at `slot` with zeros, unsynced. A failure leaves a
    /// manifest that a later version ends anyway, so it is not an error.
    fn erase_manifest(&mut self, slot: u64) {
        let _ = write_all_at(&mut *self.file, slot << self.geo.shift, &[0u8; MF_HEAD]);
    }

    /// Rewrite the older superblock copy with the current highest version.
    fn write_superblock(&mut self) -> io::Result<()> {
        self.sb_seq += 1;
        let sb = encode_sb(&self.geo, self.highest, self.sb_seq);
        let at = if self.sb_seq % 2 == 0 { SB_B } else { 0 };
        write_all_at(&mut *self.file, at, &sb)?;
        self.file.sync_data()
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
