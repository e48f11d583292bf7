//! The store against faults, crashes and damage: every I/O call of a commit failing in turn,
//! every state a crash can leave before the commit's sync returns (the ALICE method: any
//! subset of the unsynced writes, each whole or torn), and bit flips.

use super::*;
use crate::sys::pmem_io::OsIo;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A directory removed on drop.
struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "eb-store-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

use std::path::PathBuf;

fn geo(bytes: u64) -> Geometry {
    Geometry {
        id: 0x1234_5678_9abc_def0,
        rank: 3,
        bytes,
        shift: block_shift(bytes),
    }
}

/// Window contents of "iteration" `k`: every block differs between iterations when `all`,
/// else only blocks 1 and 5.
fn image(bytes: usize, k: u8, all: bool) -> Vec<u8> {
    let mut v = vec![0u8; bytes];
    for (i, b) in v.iter_mut().enumerate() {
        let blk = i >> 12;
        *b = if all || blk == 1 || blk == 5 {
            (i as u8).wrapping_mul(7).wrapping_add(k)
        } else {
            (i as u8).wrapping_mul(3)
        };
    }
    v
}

fn all_bits() -> Vec<u64> {
    vec![u64::MAX; 16]
}

fn commit(s: &mut Store, v: u64, base: Option<u64>, img: &[u8], sole: bool) -> io::Result<()> {
    s.commit(v, base, Some(&all_bits()), sole, &mut |off, b| {
        b.copy_from_slice(&img[off..off + b.len()]);
        Ok(())
    })
}

fn load(s: &mut Store, v: u64, bytes: usize) -> Result<Vec<u8>, LoadError> {
    let mut out = vec![0u8; bytes];
    s.load(v, &mut |off, b| {
        out[off..off + b.len()].copy_from_slice(b);
        Ok(())
    })?;
    Ok(out)
}

const BYTES: usize = 10 * 4096 + 100;

#[test]
fn versions_share_blocks_and_survive_reopen() {
    let t = Tmp::new("share");
    let io: Arc<dyn PmemIo> = Arc::new(OsIo);
    let path = t.0.join("rank3.store");
    let mut s = Store::create(io.clone(), &path, geo(BYTES as u64)).unwrap();
    let imgs: Vec<Vec<u8>> = (0..4).map(|k| image(BYTES, k, false)).collect();
    commit(&mut s, 0, None, &imgs[0], false).unwrap();
    let len0 = std::fs::metadata(&path).unwrap().len();
    for k in 1..4u64 {
        // Only blocks 1 and 5 change.
        let mut bits = vec![0u64; 16];
        bits[0] = (1 << 1) | (1 << 5);
        let img = &imgs[k as usize];
        s.commit(k, Some(k - 1), Some(&bits), false, &mut |off, b| {
            b.copy_from_slice(&img[off..off + b.len()]);
            Ok(())
        })
        .unwrap();
    }
    // Three versions of two changed blocks (and a manifest each) fit in the room made at
    // creation: the file did not grow by three whole windows.
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len <= len0 + 3 * 3 * 4096, "{len} after {len0}");
    drop(s);
    let mut s = Store::open(io, &path, true).unwrap();
    assert_eq!(
        s.versions().iter().map(|v| v.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    for k in 0..4 {
        assert!(
            load(&mut s, k, BYTES).unwrap() == imgs[k as usize],
            "version {k}"
        );
    }
    assert_eq!(s.newest(), Some(3));
    // Deleting a version that later ones share blocks with leaves them whole.
    assert!(s.delete_version(0).unwrap());
    assert!(s.delete_version(2).unwrap());
    assert!(!s.delete_version(2).unwrap());
    let mut s = Store::open(Arc::new(OsIo), &path, true).unwrap();
    assert_eq!(
        s.versions().iter().map(|v| v.0).collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert!(load(&mut s, 1, BYTES).unwrap() == imgs[1]);
    assert!(load(&mut s, 3, BYTES).unwrap() == imgs[3]);
    // The highest number ever given outlives the deletion of the newest version.
    assert!(s.delete_version(3).unwrap());
    let s = Store::open(Arc::new(OsIo), &path, true).unwrap();
    assert_eq!(s.highest(), Some(3));
}

#[test]
fn keeping_the_latest_only_reuses_space() {
    let t = Tmp::new("sole");
    let path = t.0.join("rank3.store");
    let mut s = Store::create(Arc::new(OsIo), &path, geo(BYTES as u64)).unwrap();
    let len0 = std::fs::metadata(&path).unwrap().len();
    let mut len1 = 0;
    for k in 0..40u64 {
        let img = image(BYTES, k as u8, true);
        commit(&mut s, k, k.checked_sub(1), &img, true).unwrap();
        // Until released, the base is kept too.
        let kept: Vec<u64> = s.versions().iter().map(|v| v.0).collect();
        assert_eq!(kept, (k.saturating_sub(1)..=k).collect::<Vec<_>>());
        s.release_base();
        assert_eq!(
            s.versions().iter().map(|v| v.0).collect::<Vec<_>>(),
            vec![k]
        );
        if k == 5 {
            len1 = std::fs::metadata(&path).unwrap().len();
        }
    }
    // The file stops growing: room for the kept version, a released one whose erasure is
    // not synced yet, and the new one.
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(len, len1, "grew after the first commits");
    assert!(len <= len0 * 2, "{len} after {len0}");
    drop(s);
    // On disk: the newest and, its erasure not synced yet, its base.
    let mut s = Store::open(Arc::new(OsIo), &path, true).unwrap();
    assert_eq!(
        s.versions().iter().map(|v| v.0).collect::<Vec<_>>(),
        vec![38, 39]
    );
    assert!(load(&mut s, 39, BYTES).unwrap() == image(BYTES, 39, true));
}

// ---- faults ---------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Fault {
    Eio,
    Enospc,
    /// Every write from the k-th on writes half of what it is given.
    Short,
}

/// The real file system, with the k-th call (counted over files and directories) failing.
#[derive(Debug)]
struct FaultIo {
    calls: Arc<AtomicUsize>,
    at: usize,
    fault: Fault,
}

struct FaultFile {
    inner: Box<dyn PmemFile>,
    calls: Arc<AtomicUsize>,
    at: usize,
    fault: Fault,
}

fn tick(calls: &AtomicUsize, at: usize, fault: Fault, is_write: bool) -> io::Result<bool> {
    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
    match fault {
        Fault::Short => Ok(is_write && n >= at),
        Fault::Eio if n == at => Err(io::Error::from_raw_os_error(libc::EIO)),
        Fault::Enospc if n == at => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
        _ => Ok(false),
    }
}

impl PmemFile for FaultFile {
    fn write_at(&mut self, off: u64, buf: &[u8]) -> io::Result<usize> {
        if tick(&self.calls, self.at, self.fault, true)? && buf.len() > 1 {
            return self.inner.write_at(off, &buf[..buf.len() / 2]);
        }
        self.inner.write_at(off, buf)
    }
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_at(off, buf)
    }
    fn len(&mut self) -> io::Result<u64> {
        self.inner.len()
    }
    fn sync_data(&mut self) -> io::Result<()> {
        tick(&self.calls, self.at, self.fault, false)?;
        self.inner.sync_data()
    }
}

impl FaultIo {
    fn wrap(&self, f: Box<dyn PmemFile>) -> Box<dyn PmemFile> {
        Box::new(FaultFile {
            inner: f,
            calls: self.calls.clone(),
            at: self.at,
            fault: self.fault,
        })
    }
    fn tick(&self) -> io::Result<()> {
        tick(&self.calls, self.at, self.fault, false).map(drop)
    }
}

impl PmemIo for FaultIo {
    fn create(&self, path: &Path) -> io::Result<Box<dyn PmemFile>> {
        self.tick()?;
        Ok(self.wrap(OsIo.create(path)?))
    }
    fn open(&self, path: &Path, write: bool) -> io::Result<Box<dyn PmemFile>> {
        self.tick()?;
        Ok(self.wrap(OsIo.open(path, write)?))
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.tick()?;
        OsIo.list(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.tick()?;
        OsIo.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.tick()?;
        OsIo.remove(path)
    }
    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        self.tick()?;
        OsIo.create_dir(dir)
    }
    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        self.tick()?;
        OsIo.remove_dir(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.tick()?;
        OsIo.sync_dir(dir)
    }
}

/// For every k, the k-th call of a commit fails (EIO, ENOSPC) or writes short from the k-th
/// write on: the commit reports an error (or, for short writes, succeeds whole), version 0
/// is intact, and version 1 is absent or right.
#[test]
fn every_failing_call_of_a_commit_leaves_the_previous_version() {
    let img0 = image(BYTES, 0, true);
    let img1 = image(BYTES, 1, true);
    for fault in [Fault::Eio, Fault::Enospc, Fault::Short] {
        let mut k = 1;
        let mut failed = 0;
        loop {
            let t = Tmp::new("fault");
            let path = t.0.join("rank3.store");
            let mut s = Store::create(Arc::new(OsIo), &path, geo(BYTES as u64)).unwrap();
            commit(&mut s, 0, None, &img0, false).unwrap();
            drop(s);
            let fio = Arc::new(FaultIo {
                calls: Arc::new(AtomicUsize::new(0)),
                at: k,
                fault,
            });
            let opened = Store::open(fio.clone(), &path, true);
            let result = opened.and_then(|mut s| commit(&mut s, 1, Some(0), &img1, true));
            let calls = fio.calls.load(Ordering::SeqCst);
            let ok = result.is_ok();
            match (&result, fault) {
                (r, Fault::Short) => assert!(r.is_ok(), "short writes at {k}: {r:?}"),
                (Err(e), _) => {
                    failed += 1;
                    assert!(matches!(
                        e.raw_os_error(),
                        Some(libc::EIO) | Some(libc::ENOSPC)
                    ));
                }
                // Only the erasing of ended manifests, after the sync, may fail unreported.
                (Ok(()), _) => {}
            }
            let mut s = Store::open(Arc::new(OsIo), &path, true).unwrap();
            if s.has(0) {
                assert!(load(&mut s, 0, BYTES).unwrap() == img0, "{fault:?} at {k}");
            } else {
                // Version 0 may go only once version 1 is durable (SOLE).
                assert!(ok || s.has(1), "{fault:?} at {k}: version 0 lost");
            }
            if s.has(1) {
                assert!(load(&mut s, 1, BYTES).unwrap() == img1, "{fault:?} at {k}");
            }
            if k > calls {
                break;
            }
            k += 1;
        }
        assert!(k > 3, "{fault:?}: a commit makes more than 3 calls");
        if !matches!(fault, Fault::Short) {
            assert!(
                failed + 2 >= k,
                "{fault:?}: {failed} of {k} failing calls failed the commit"
            );
        }
    }
}

// ---- crash states -------------------------------------------------------------------------

/// One write of a commit, as issued.
#[derive(Clone, Debug)]
struct W {
    off: u64,
    data: Vec<u8>,
}

/// The real file system, recording the writes to files: those a sync made durable, and
/// those issued since the last sync.
#[derive(Debug, Default)]
struct RecordIo {
    /// Writes not yet synced, in order.
    pending: Arc<Mutex<Vec<W>>>,
    /// The writes each sync made durable, in order.
    durable: Arc<Mutex<Vec<Vec<W>>>>,
    /// Syncs.
    synced: Arc<Mutex<usize>>,
}

struct RecordFile {
    inner: Box<dyn PmemFile>,
    pending: Arc<Mutex<Vec<W>>>,
    durable: Arc<Mutex<Vec<Vec<W>>>>,
    synced: Arc<Mutex<usize>>,
}

impl PmemFile for RecordFile {
    fn write_at(&mut self, off: u64, buf: &[u8]) -> io::Result<usize> {
        self.pending.lock().unwrap().push(W {
            off,
            data: buf.to_vec(),
        });
        // The write does not reach the file: the crash states are built from the record.
        Ok(buf.len())
    }
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_at(off, buf)
    }
    fn len(&mut self) -> io::Result<u64> {
        self.inner.len()
    }
    fn sync_data(&mut self) -> io::Result<()> {
        *self.synced.lock().unwrap() += 1;
        let done: Vec<W> = self.pending.lock().unwrap().drain(..).collect();
        self.durable.lock().unwrap().push(done);
        Ok(())
    }
}

impl PmemIo for RecordIo {
    fn create(&self, _: &Path) -> io::Result<Box<dyn PmemFile>> {
        Err(io::Error::other("not recorded"))
    }
    fn open(&self, path: &Path, write: bool) -> io::Result<Box<dyn PmemFile>> {
        Ok(Box::new(RecordFile {
            inner: OsIo.open(path, write)?,
            pending: self.pending.clone(),
            durable: self.durable.clone(),
            synced: self.synced.clone(),
        }))
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        OsIo.list(dir)
    }
    fn rename(&self, _: &Path, _: &Path) -> io::Result<()> {
        Err(io::Error::other("not recorded"))
    }
    fn remove(&self, _: &Path) -> io::Result<()> {
        Err(io::Error::other("not recorded"))
    }
    fn create_dir(&self, _: &Path) -> io::Result<()> {
        Err(io::Error::other("not recorded"))
    }
    fn remove_dir(&self, _: &Path) -> io::Result<()> {
        Err(io::Error::other("not recorded"))
    }
    fn sync_dir(&self, _: &Path) -> io::Result<()> {
        Ok(())
    }
}

/// Apply `w` to the file at `path`, whole or (torn) only its first `keep` bytes.
fn apply(path: &Path, w: &W, keep: usize) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&w.data[..keep.min(w.data.len())], w.off)
        .unwrap();
}

/// Run `op` on a store holding `setup`'s versions with its writes recorded, then check every
/// state a crash during `op` can leave: for each sync `op` made, the writes it made durable
/// applied and any subset of the writes after it (each whole, or torn at a 512-byte sector
/// with the rest applied or not); and the state after `op`'s last sync, with any subset of
/// what followed. `check` sees the reopened store.
fn crash_states(
    tag: &str,
    setup: &dyn Fn(&mut Store),
    op: &dyn Fn(&mut Store),
    check: &dyn Fn(&mut Store, &str),
) -> usize {
    let t = Tmp::new(tag);
    let path = t.0.join("rank3.store");
    let mut s = Store::create(Arc::new(OsIo), &path, geo(BYTES as u64)).unwrap();
    setup(&mut s);
    drop(s);
    let base = std::fs::read(&path).unwrap();
    let rec = Arc::new(RecordIo::default());
    let mut s = Store::open(rec.clone(), &path, true).unwrap();
    op(&mut s);
    drop(s);
    let durable = rec.durable.lock().unwrap().clone();
    let after = rec.pending.lock().unwrap().clone();
    assert!(*rec.synced.lock().unwrap() >= 1, "the operation syncs");
    // A crash before sync i returns: the batches before it durable, any subset of its own;
    // or after the last sync, any subset of what followed.
    let mut phases = Vec::new();
    for i in 0..=durable.len() {
        let done: Vec<W> = durable[..i].iter().flatten().cloned().collect();
        let open = durable.get(i).cloned().unwrap_or_else(|| after.clone());
        phases.push((done, open));
    }
    let state = t.0.join("state.store");
    let mut states = 0;
    for (done, writes) in &phases {
        assert!(
            writes.len() <= 12,
            "{} writes: too many subsets",
            writes.len()
        );
        let mut run = |apply_ws: &dyn Fn(&Path), what: String| {
            std::fs::write(&state, &base).unwrap();
            for w in done {
                apply(&state, w, w.data.len());
            }
            apply_ws(&state);
            let mut s = Store::open(Arc::new(OsIo), &state, true)
                .unwrap_or_else(|e| panic!("{what}: the store does not open: {e}"));
            check(&mut s, &what);
            states += 1;
        };
        for mask in 0u32..(1 << writes.len()) {
            run(
                &|p| {
                    for (i, w) in writes.iter().enumerate() {
                        if mask >> i & 1 == 1 {
                            apply(p, w, w.data.len());
                        }
                    }
                },
                format!(
                    "{} synced, writes {mask:#b} of {}",
                    done.len(),
                    writes.len()
                ),
            );
        }
        for (i, w) in writes.iter().enumerate() {
            for cut in [512, w.data.len() / 2, w.data.len().saturating_sub(512)] {
                if cut == 0 || cut >= w.data.len() {
                    continue;
                }
                for others in [false, true] {
                    run(
                        &|p| {
                            for (j, x) in writes.iter().enumerate() {
                                if j == i {
                                    apply(p, x, cut);
                                } else if others {
                                    apply(p, x, x.data.len());
                                }
                            }
                        },
                        format!("write {i} torn at {cut}, the others {others}"),
                    );
                }
            }
        }
    }
    states
}

#[test]
fn a_crash_during_a_commit_recovers_the_previous_or_the_new_version() {
    let img = |k| image(BYTES, k, false);
    for (sole, tag) in [(true, "latest"), (false, "all")] {
        let n = crash_states(
            tag,
            &|s| {
                commit(s, 0, None, &img(0), sole).unwrap();
                if sole {
                    s.release_base();
                }
                let mut bits = vec![0u64; 16];
                bits[0] = (1 << 1) | (1 << 5);
                let i1 = img(1);
                s.commit(1, Some(0), Some(&bits), sole, &mut |off, b| {
                    b.copy_from_slice(&i1[off..off + b.len()]);
                    Ok(())
                })
                .unwrap();
                if sole {
                    s.release_base();
                }
            },
            &|s| {
                let i2 = image(BYTES, 2, true);
                s.commit(2, Some(1), Some(&all_bits()), sole, &mut |off, b| {
                    b.copy_from_slice(&i2[off..off + b.len()]);
                    Ok(())
                })
                .unwrap();
            },
            &|s, what| {
                let newest = s.newest().unwrap_or_else(|| panic!("{what}: no version"));
                assert!(newest == 1 || newest == 2, "{what}: newest {newest}");
                let want = if newest == 2 {
                    image(BYTES, 2, true)
                } else {
                    img(1)
                };
                let got = load(s, newest, BYTES).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                assert!(got == want, "{what}: version {newest} has other bytes");
                if !sole {
                    assert!(load(s, 0, BYTES).unwrap() == img(0), "{what}: version 0");
                    assert!(load(s, 1, BYTES).unwrap() == img(1), "{what}: version 1");
                }
            },
        );
        assert!(n > 16, "{tag}: {n} crash states");
    }
}

#[test]
fn a_crash_during_a_deletion_leaves_the_others_whole() {
    let img = |k| image(BYTES, k, true);
    crash_states(
        "delete",
        &|s| {
            for k in 0..3u64 {
                commit(s, k, k.checked_sub(1), &img(k as u8), false).unwrap();
            }
        },
        &|s| assert!(s.delete_version(2).unwrap()),
        &|s, what| {
            assert!(load(s, 0, BYTES).unwrap() == img(0), "{what}");
            assert!(load(s, 1, BYTES).unwrap() == img(1), "{what}");
            if s.has(2) {
                assert!(load(s, 2, BYTES).unwrap() == img(2), "{what}");
            }
        },
    );
}

// ---- damage -------------------------------------------------------------------------------

/// A bit flipped anywhere in a version's blocks or in its manifest after the magic is found:
/// loading that version fails or verify names it (or the manifest is reported unreadable);
/// no load ever returns bytes other than the committed ones.
#[test]
fn flipped_bits_are_detected_never_loaded() {
    let t = Tmp::new("flip");
    let path = t.0.join("rank3.store");
    let imgs: Vec<Vec<u8>> = (0..3).map(|k| image(BYTES, k, true)).collect();
    let mut s = Store::create(Arc::new(OsIo), &path, geo(BYTES as u64)).unwrap();
    for k in 0..3u64 {
        commit(&mut s, k, k.checked_sub(1), &imgs[k as usize], false).unwrap();
    }
    drop(s);
    let clean = std::fs::read(&path).unwrap();
    // The bytes in use: every live block and manifest.
    let s = Store::open(Arc::new(OsIo), &path, false).unwrap();
    let block = s.geo.block();
    let mut used: Vec<(usize, usize)> = Vec::new();
    for m in s.live.values() {
        used.push((
            m.slot as usize * block + 8,
            MF_HEAD - 8 + 8 * m.entries.len() + 4,
        ));
        for (b, &(slot, _)) in m.entries.iter().enumerate() {
            used.push((slot as usize * block, s.geo.block_len(b)));
        }
    }
    drop(s);
    let flip = t.0.join("flip.store");
    let mut tried = 0;
    for &(start, len) in &used {
        for at in (start..start + len).step_by(len / 7 + 1) {
            let mut bytes = clean.clone();
            bytes[at] ^= 1 << (at % 8);
            std::fs::write(&flip, &bytes).unwrap();
            let mut s = Store::open(Arc::new(OsIo), &flip, false).unwrap();
            let bad_manifest = !s.bad_manifests.is_empty();
            let report = s.verify().unwrap();
            let flagged = report.iter().any(|(_, r)| r.is_err());
            assert!(
                bad_manifest || flagged || s.live.len() < 3,
                "a flip at byte {at} went unnoticed"
            );
            for v in 0..3u64 {
                if let Ok(got) = load(&mut s, v, BYTES) {
                    assert!(
                        got == imgs[v as usize],
                        "flip at {at}: version {v} loaded wrong"
                    );
                }
            }
            tried += 1;
        }
    }
    // No false alarm on the clean file.
    let mut s = Store::open(Arc::new(OsIo), &path, false).unwrap();
    assert!(s.bad_manifests.is_empty());
    assert!(s.verify().unwrap().iter().all(|(_, r)| r.is_ok()));
    assert!(tried > 100);
}

#[test]
fn truncated_and_malformed_files_are_errors() {
    let t = Tmp::new("trunc");
    let path = t.0.join("rank3.store");
    let img = image(BYTES, 0, true);
    let mut s = Store::create(Arc::new(OsIo), &path, geo(BYTES as u64)).unwrap();
    commit(&mut s, 0, None, &img, true).unwrap();
    drop(s);
    let clean = std::fs::read(&path).unwrap();
    let bad = t.0.join("bad.store");
    for cut in [
        0,
        10,
        100,
        2000,
        4096,
        4096 * 3,
        clean.len() - 4096,
        clean.len() - 1,
    ] {
        std::fs::write(&bad, &clean[..cut]).unwrap();
        match Store::open(Arc::new(OsIo), &bad, false) {
            Err(_) => {}
            Ok(mut s) => {
                if let Ok(got) = load(&mut s, 0, BYTES) {
                    assert!(got == img, "truncated at {cut}: wrong bytes");
                }
            }
        }
    }
    std::fs::write(&bad, b"not a store at all, just some text").unwrap();
    assert!(Store::open(Arc::new(OsIo), &bad, false).is_err());
}

/// Windows whose manifest fills its slots to the last byte, or takes several slots.
#[test]
fn manifests_of_every_span_fit() {
    for blocks in [503usize, 504, 1015, 1024] {
        let t = Tmp::new("span");
        let path = t.0.join("rank3.store");
        let bytes = blocks * 4096;
        let g = geo(bytes as u64);
        assert_eq!(g.nblocks(), blocks);
        let mut s = Store::create(Arc::new(OsIo), &path, g).unwrap();
        let img0 = vec![5u8; bytes];
        let mut img1 = img0.clone();
        img1[4096 * 7] = 9;
        commit(&mut s, 0, None, &img0, false).unwrap();
        let mut bits = vec![0u64; 16];
        bits[0] = 1 << 7;
        s.commit(1, Some(0), Some(&bits), true, &mut |off, b| {
            b.copy_from_slice(&img1[off..off + b.len()]);
            Ok(())
        })
        .unwrap();
        s.release_base();
        for k in 2..6u64 {
            commit(&mut s, k, Some(k - 1), &img1, true).unwrap();
            s.release_base();
        }
        drop(s);
        let mut s = Store::open(Arc::new(OsIo), &path, true).unwrap();
        assert_eq!(s.newest(), Some(5), "{blocks} blocks");
        assert!(load(&mut s, 5, bytes).unwrap() == img1, "{blocks} blocks");
    }
}

/// Keeping the latest only, the versions before the newest are ended but may still be on
/// the disk: deleting the newest must never bring them back, whatever a crash keeps.
#[test]
fn deleting_the_newest_never_revives_ended_versions() {
    let img = |k| image(BYTES, k, true);
    crash_states(
        "revive",
        &|s| {
            for k in 0..4u64 {
                commit(s, k, k.checked_sub(1), &img(k as u8), true).unwrap();
                s.release_base();
            }
        },
        &|s| assert!(s.delete_version(3).unwrap()),
        &|s, what| {
            let v: Vec<u64> = s.versions().iter().map(|x| x.0).collect();
            assert!(v.iter().all(|&x| x >= 2), "{what}: {v:?} came back");
            for x in v {
                assert!(
                    load(s, x, BYTES).unwrap() == img(x as u8),
                    "{what}: version {x}"
                );
            }
        },
    );
}
