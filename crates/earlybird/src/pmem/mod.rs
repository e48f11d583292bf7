//! pmem — RMA windows kept in files, committed as numbered checkpoint versions at every
//! persisting synchronisation, for a job to restart from (seed 004, "Extension of MPI
//! One-Sided Communication API" for persistent memory).
//!
//! # Use
//!
//! A rank names a directory with [`set_root_path`], then makes a window with
//! [`Comm::win_allocate`](crate::Comm::win_allocate) and the info key `pmem_is_pmem=true`
//! (with `pmem_name` and `pmem_mode`). The `*_persist` synchronisations of [`Win`]
//! ([`Win::fence_persist`], [`Win::post_persist`], [`Win::wait_persist`],
//! [`Win::test_persist`]) commit the window as a new version; every other call behaves as
//! on any window (the seed's `_pmem` forms of the ordinary calls are the ordinary calls:
//! earlybird reads the pmem info keys itself). A restarted job makes the window again with
//! `pmem_mode=checkpoint` and finds its memory as a version left it.
//!
//! # Files
//!
//! Under the root path, a window is a directory of its name, holding per window rank `r`:
//! `rank<r>.data`, the window memory itself (mapped, unless `pmem_allocate_in_ram`),
//! `rank<r>.store`, the checkpoint versions (see `store`), and `rank<r>.lock`, locked while
//! a job has the window open. Ranks may share one root path or each have its own, as the
//! seed's reference implementation has them. Names are file names: no `/`, not `.` or `..`,
//! no leading dot, at most 255 bytes, and a window directory that is a symbolic link is
//! refused.
//!
//! # Durability contract
//!
//! - Once a committing call (`fence_persist`, ...) has returned on a rank, the version it
//!   committed survives a crash of any process or of the machine at any later instant: its
//!   blocks and its manifest were synced (`fdatasync`) before the call returned. With
//!   `fence_persist`, once the call has returned on any rank it has committed on every rank
//!   (the fence that commits is a barrier before and after the commit).
//! - A version is either complete and verified (a checksum per block and one over its
//!   manifest, CRC-32C) or absent: a commit cut by a crash is recognised by its checksums,
//!   ignored and erased at the next open, and the version before it is loaded.
//! - No commit and no deletion ever writes bytes that another kept version refers to:
//!   deleting a version never damages another.
//! - Damage found later (a bit flipped on the disk) is reported, never loaded: loading a
//!   damaged version is MPI_ERR_PMEM_CKPT_VER naming the block; `ebpmem verify` checks
//!   every version. The one damage that cannot be told from a crash is to the newest
//!   version's blocks (a commit is one sync: cut, it looks the same): that version is then
//!   not loaded, the one before it is, and the window's creation says so on stderr.
//! - With a persisting fence, a crash at any instant leaves a version every rank holds
//!   (`pmem_global_checkpoint` finds it): keeping the latest only, a rank keeps the
//!   version before the newest until every rank has committed the newest, and on disk until
//!   its next commit's sync (so a listing may show two).
//!
//! **Versions share unchanged blocks**: a commit writes only the blocks written since the
//! version before it. earlybird knows every write to window memory: peers' puts and
//! accumulates, and the owner's own stores, which safe Rust makes only through
//! [`LocalView`](crate::rma::LocalView) (and the views of `shared_query`); each marks the
//! blocks it touches in a bitmap in the window's control block. A window of which nothing
//! changed since its last version commits nothing: that version already holds the state,
//! and no new number is given (so a fence_persist of an unchanged window costs a fence:
//! whether any rank wrote rides in the fence's own barrier). After a load of a version that
//! is not the newest, the first commit point commits even so. C programs store through
//! the base pointer, which the library cannot see: there each commit point first compares
//! every block's checksum with the last version's ([`Win::pmem_scan_raw_stores`]).
//!
//! # Choices where the seed is open
//!
//! - `pmem_name` and `pmem_mode` are required with `pmem_is_pmem=true` on allocate
//!   (MPI_ERR_PMEM_NAME, MPI_ERR_PMEM_MODE): a forgotten mode must not silently expand
//!   (which deletes every checkpoint).
//! - The first version is 0. Keeping the latest only (the default) means: once version v is
//!   committed by every rank, no other version is kept.
//! - The pmem info keys are the same on every rank (creation and the persisting fence are
//!   collective and take the roads the keys choose). Expand mode replaces a rank's store
//!   only once every rank has made the window: a creation that fails anywhere deletes no
//!   checkpoint.
//! - If a persisting fence fails on some rank, a rank that committed gives its next commit
//!   the same number, replacing that version, so that one number names one fence on every
//!   rank.
//! - The error classes are predefined classes of earlybird (numbers 103 to 110), present
//!   from init as the seed asks, with their strings, rather than numbers a program's own
//!   `add_error_class` calls would interleave with. I/O failures are MPI_ERR_IO and
//!   MPI_ERR_NO_SPACE.
//! - The management calls ([`list`], [`delete`], [`delete_version`]) work on the calling
//!   rank's parts (its rank in MPI_COMM_WORLD) under its root path.
//! - `MPI_Win_allocate_shared` is not persistent, as the seed says.
#![forbid(unsafe_code)]

pub(crate) mod store;

pub use crate::sys::pmem_io::{OsIo, PmemFile, PmemIo};

use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use store::{LoadError, Store};

/// Longest root path and window name, in bytes (the seed's reference: 255).
pub const MAX_NAME: usize = 255;

static GLOBAL_ROOT: Mutex<Option<PathBuf>> = Mutex::new(None);
static GLOBAL_IO: Mutex<Option<Arc<dyn PmemIo>>> = Mutex::new(None);

thread_local! {
    static ROOT: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
    static IO: RefCell<Option<Arc<dyn PmemIo>>> = const { RefCell::new(None) };
    static WORLD_RANK: Cell<u32> = const { Cell::new(0) };
}

fn err(class: ErrorClass, msg: impl Into<String>) -> Error {
    Error::new(class, msg)
}

/// An I/O error as an MPI error: MPI_ERR_NO_SPACE, MPI_ERR_ACCESS, MPI_ERR_READ_ONLY or
/// MPI_ERR_IO, with what was being done.
pub(crate) fn io_err(what: &str, e: &std::io::Error) -> Error {
    let class = match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => ErrorClass::NoSpace,
        Some(libc::EACCES) | Some(libc::EPERM) => ErrorClass::Access,
        Some(libc::EROFS) => ErrorClass::ReadOnly,
        _ => ErrorClass::Io,
    };
    err(class, format!("{what}: {e}"))
}

/// Remember this thread's rank in MPI_COMM_WORLD (the management calls work on its parts).
pub(crate) fn bind_rank(rank: u32) {
    WORLD_RANK.with(|r| r.set(rank));
}

fn world_rank() -> u32 {
    WORLD_RANK.with(|r| r.get())
}

/// MPI_Win_pmem_set_root_path: the directory under which this rank's persistent windows
/// live. It must exist and be a directory (MPI_ERR_PMEM_ROOT_PATH otherwise, as for a path
/// longer than [`MAX_NAME`] bytes). Set for the calling thread's rank, and for the
/// process's other threads until they set their own.
pub fn set_root_path(path: impl AsRef<Path>) -> Result<()> {
    let p = path.as_ref();
    let shown = p.display();
    if p.as_os_str().is_empty() {
        return Err(err(ErrorClass::PmemRootPath, "an empty root path"));
    }
    if p.as_os_str().len() > MAX_NAME {
        return Err(err(
            ErrorClass::PmemRootPath,
            format!(
                "root path of {} bytes (at most {MAX_NAME}): {shown}",
                p.as_os_str().len()
            ),
        ));
    }
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(err(
                ErrorClass::PmemRootPath,
                format!("root path {shown} is not a directory"),
            ))
        }
        Err(e) => {
            return Err(err(
                ErrorClass::PmemRootPath,
                format!("root path {shown}: {e}"),
            ))
        }
    }
    let abs = std::fs::canonicalize(p)
        .map_err(|e| err(ErrorClass::PmemRootPath, format!("root path {shown}: {e}")))?;
    ROOT.with(|r| *r.borrow_mut() = Some(abs.clone()));
    *GLOBAL_ROOT.lock().unwrap_or_else(|e| e.into_inner()) = Some(abs);
    Ok(())
}

/// The root path in force for this thread (MPI_ERR_PMEM_ROOT_PATH if none was set).
pub fn root_path() -> Result<PathBuf> {
    ROOT.with(|r| r.borrow().clone())
        .or_else(|| {
            GLOBAL_ROOT
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        })
        .ok_or_else(|| {
            err(
                ErrorClass::PmemRootPath,
                "no root path: call pmem::set_root_path before using persistent windows",
            )
        })
}

/// Put another file system under this thread's persistent windows (and the process's other
/// threads until they set their own): for tests that inject faults. [`OsIo`] by default.
pub fn set_io(io: Arc<dyn PmemIo>) {
    IO.with(|r| *r.borrow_mut() = Some(io.clone()));
    *GLOBAL_IO.lock().unwrap_or_else(|e| e.into_inner()) = Some(io);
}

pub(crate) fn io() -> Arc<dyn PmemIo> {
    IO.with(|r| r.borrow().clone())
        .or_else(|| GLOBAL_IO.lock().unwrap_or_else(|e| e.into_inner()).clone())
        .unwrap_or_else(|| Arc::new(OsIo))
}

/// Check a window name: a file name under the root, never a path (MPI_ERR_PMEM_NAME).
pub fn check_name(name: &str) -> Result<()> {
    let bad = |why: &str| err(ErrorClass::PmemName, format!("window name {name:?}: {why}"));
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.len() > MAX_NAME {
        return Err(bad(&format!("{} bytes, at most {MAX_NAME}", name.len())));
    }
    if name.contains('/') || name.contains('\0') {
        return Err(bad("a name is a file name, not a path"));
    }
    if name.starts_with('.') {
        return Err(bad("a name may not start with a dot"));
    }
    Ok(())
}

/// The directory of window `name` under `root`, refusing one that is not a plain
/// directory (a symbolic link could lead out of the root).
fn window_dir(root: &Path, name: &str) -> Result<PathBuf> {
    check_name(name)?;
    let d = root.join(name);
    match std::fs::symlink_metadata(&d) {
        Ok(m) if m.file_type().is_symlink() => Err(err(
            ErrorClass::PmemName,
            format!("window {name:?}: {} is a symbolic link", d.display()),
        )),
        Ok(m) if !m.is_dir() => Err(err(
            ErrorClass::PmemName,
            format!("window {name:?}: {} is not a directory", d.display()),
        )),
        _ => Ok(d),
    }
}

/// `pmem_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `expand`: make the window (or grow or shrink it to the new size, keeping its data
    /// file's bytes) and delete every checkpoint.
    Expand,
    /// `checkpoint`: fill the window from a checkpoint version (the size must be the
    /// checkpoint's).
    Checkpoint,
}

/// The pmem info keys of a window, as in force.
#[derive(Clone, Debug)]
pub(crate) struct Hints {
    pub(crate) is_pmem: bool,
    pub(crate) in_ram: bool,
    pub(crate) transactional: bool,
    pub(crate) keep_all: bool,
    pub(crate) name: String,
    pub(crate) mode: Mode,
    pub(crate) version: Option<u64>,
    pub(crate) append: bool,
    pub(crate) global: bool,
    pub(crate) volatile: bool,
    /// Made by allocate (which reads every key), not create or create_dynamic (which read
    /// `pmem_is_pmem` alone).
    pub(crate) allocated: bool,
}

/// A boolean key: true only for the exact string `true`, as the seed's reference reads it.
fn flag(info: &Info, k: &str) -> Result<bool> {
    Ok(info.get(k)? == Some("true"))
}

impl Hints {
    /// The keys of `info` for a window made by allocate (`allocated`) or create.
    pub(crate) fn from_info(info: &Info, allocated: bool) -> Result<Option<Hints>> {
        if !flag(info, "pmem_is_pmem")? {
            return Ok(None);
        }
        let mut h = Hints {
            is_pmem: true,
            in_ram: false,
            transactional: false,
            keep_all: false,
            name: String::new(),
            mode: Mode::Expand,
            version: None,
            append: false,
            global: false,
            volatile: false,
            allocated,
        };
        if !allocated {
            return Ok(Some(h));
        }
        h.in_ram = flag(info, "pmem_allocate_in_ram")?;
        h.transactional = !flag(info, "pmem_dont_use_transactions")?;
        h.keep_all = h.transactional && flag(info, "pmem_keep_all_checkpoints")?;
        h.volatile = flag(info, "pmem_volatile")?;
        h.name = info
            .get("pmem_name")?
            .ok_or_else(|| {
                err(
                    ErrorClass::PmemName,
                    "pmem_is_pmem=true needs the info key pmem_name",
                )
            })?
            .to_string();
        check_name(&h.name)?;
        h.mode = match info.get("pmem_mode")? {
            Some("expand") => Mode::Expand,
            Some("checkpoint") => Mode::Checkpoint,
            Some(v) => {
                return Err(err(
                    ErrorClass::PmemMode,
                    format!("pmem_mode={v:?}: expected expand or checkpoint"),
                ))
            }
            None => {
                return Err(err(
                    ErrorClass::PmemMode,
                    "pmem_is_pmem=true needs the info key pmem_mode (expand or checkpoint)",
                ))
            }
        };
        if h.mode == Mode::Checkpoint {
            h.version = match info.get("pmem_checkpoint_version")? {
                None => None,
                Some(v) => Some(v.trim().parse::<u64>().map_err(|_| {
                    err(
                        ErrorClass::PmemCkptVer,
                        format!("pmem_checkpoint_version={v:?}: not a version number"),
                    )
                })?),
            };
            h.append = flag(info, "pmem_append_checkpoints")?;
            h.global = flag(info, "pmem_global_checkpoint")?;
        }
        Ok(Some(h))
    }

    /// The keys in force, for MPI_Win_get_info.
    pub(crate) fn add_to(&self, i: &mut Info, last: Option<u64>) {
        let b = |v: bool| if v { "true" } else { "false" };
        let _ = i.set("pmem_is_pmem", b(self.is_pmem));
        if !self.allocated {
            return;
        }
        let _ = i.set("pmem_allocate_in_ram", b(self.in_ram));
        let _ = i.set("pmem_dont_use_transactions", b(!self.transactional));
        let _ = i.set("pmem_keep_all_checkpoints", b(self.keep_all));
        let _ = i.set("pmem_name", &self.name);
        let _ = i.set(
            "pmem_mode",
            match self.mode {
                Mode::Expand => "expand",
                Mode::Checkpoint => "checkpoint",
            },
        );
        if self.mode == Mode::Checkpoint {
            if let Some(v) = last {
                let _ = i.set("pmem_checkpoint_version", &v.to_string());
            }
            let _ = i.set("pmem_append_checkpoints", b(self.append));
            let _ = i.set("pmem_global_checkpoint", b(self.global));
        }
        let _ = i.set("pmem_volatile", b(self.volatile));
    }

    /// MPI_Win_set_info: `pmem_dont_use_transactions` and `pmem_keep_all_checkpoints` may
    /// change (on windows made by allocate); every other pmem key keeps its value.
    pub(crate) fn update(&mut self, info: &Info) -> Result<()> {
        if !self.allocated || self.volatile {
            return Ok(());
        }
        if info.get("pmem_dont_use_transactions")?.is_some() {
            self.transactional = !flag(info, "pmem_dont_use_transactions")?;
        }
        if info.get("pmem_keep_all_checkpoints")?.is_some() {
            self.keep_all = flag(info, "pmem_keep_all_checkpoints")?;
        }
        if !self.transactional {
            self.keep_all = false;
        }
        Ok(())
    }
}

/// One rank's persistent state of a window made by allocate with `pmem_is_pmem=true`: its
/// files, its checkpoint store and the version numbering.
pub(crate) struct Persist {
    pub(crate) hints: Hints,
    dir: PathBuf,
    rank: u32,
    store: Option<Store>,
    /// The data file (the window's memory when not in RAM).
    data: Option<PathBuf>,
    /// The version the window's memory was last committed as or loaded from.
    pub(crate) last: Option<u64>,
    /// The number the next commit gets.
    next: u64,
    /// Whether the next commit point must commit even if nothing changed: the memory was
    /// loaded from a version that is not the newest (a restart without a version number
    /// must then find this state, not the newer one).
    owed: bool,
    /// The next commit replaces a version that not every rank has: it keeps every version
    /// until a fence releases them (the failed ranks may hold only older ones).
    retrying: bool,
    /// Expand mode until the window exists everywhere: (the new store's temporary path,
    /// the path it replaces).
    pending: Option<(PathBuf, PathBuf)>,
    _lock: Option<std::fs::File>,
}

impl std::fmt::Debug for Persist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persist")
            .field("dir", &self.dir)
            .field("last", &self.last)
            .field("next", &self.next)
            .finish()
    }
}

impl Drop for Persist {
    /// A creation that failed leaves no temporary store behind.
    fn drop(&mut self) {
        if let Some((tmp, _)) = self.pending.take() {
            let _ = io().remove(&tmp);
        }
    }
}

/// What creation prepared on one rank before the collective part.
pub(crate) struct Prepared {
    pub(crate) persist: Persist,
    /// The open data file to map as the window memory (None: in RAM).
    pub(crate) data: Option<std::fs::File>,
    /// The version to load into the memory once it exists (checkpoint mode), unless the
    /// ranks must agree on one first (`pmem_global_checkpoint`).
    pub(crate) load: Option<u64>,
}

impl Persist {
    /// Prepare rank `rank`'s part of a window of `bytes` bytes named by `hints`: lock it,
    /// open or make its files, and pick the version to load.
    pub(crate) fn prepare(hints: Hints, rank: u32, bytes: usize) -> Result<Prepared> {
        let root = root_path()?;
        let dir = window_dir(&root, &hints.name)?;
        let io = io();
        let name = &hints.name;
        let store_path = dir.join(Store::file_name(rank));
        let data_path = dir.join(format!("rank{rank}.data"));
        let exists = dir.is_dir() && store_path.exists();
        if hints.mode == Mode::Checkpoint && !exists {
            return Err(err(
                ErrorClass::PmemName,
                format!(
                    "pmem_mode=checkpoint: no window {name:?} of rank {rank} under {}",
                    root.display()
                ),
            ));
        }
        if !dir.is_dir() {
            // Ranks sharing a root may race to make it: one of them does.
            match io.create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err(&format!("creating {}", dir.display()), &e)),
            }
            io.sync_dir(&root)
                .map_err(|e| io_err(&format!("syncing {}", root.display()), &e))?;
        }
        let lock = lock_part(&dir, name, rank, "is open in another window or job")?;
        let geo = store::Geometry {
            id: 0,
            rank,
            bytes: bytes.max(1) as u64,
            shift: store::block_shift(bytes.max(1) as u64),
        };
        let mut load = None;
        let mut pending = None;
        let store = if hints.volatile {
            None
        } else if hints.mode == Mode::Expand {
            let (s, tmp) = Self::fresh_store(&io, &dir, geo)?;
            pending = Some((tmp, store_path.clone()));
            Some(s)
        } else {
            let s = Store::open(io.clone(), &store_path, true)
                .map_err(|e| io_err(&format!("opening {}", store_path.display()), &e))?;
            if let Some((v, why)) = &s.cut {
                // A commit cut by a crash looks like this; so does damage to the newest
                // version's blocks. Either way it is not loaded; say so.
                eprintln!(
                    "earlybird: pmem window {name:?} rank {rank}: version {v} is incomplete ({why}): \
                     a commit cut by a crash, or damage; it is not kept"
                );
            }
            if s.geo.bytes != bytes.max(1) as u64 {
                return Err(err(
                    ErrorClass::Size,
                    format!(
                        "pmem_mode=checkpoint: window {name:?} of rank {rank} holds {} bytes, not {bytes}",
                        s.geo.bytes
                    ),
                ));
            }
            if !hints.global || hints.version.is_some() {
                let v = match hints.version {
                    Some(v) if s.has(v) => v,
                    Some(v) => {
                        return Err(err(
                            ErrorClass::PmemCkptVer,
                            format!(
                                "window {name:?} of rank {rank} has no version {v} (it has {:?})",
                                s.versions().iter().map(|x| x.0).collect::<Vec<_>>()
                            ),
                        ))
                    }
                    None => s.newest().ok_or_else(|| {
                        err(
                            ErrorClass::PmemCkptVer,
                            format!("window {name:?} of rank {rank} has no checkpoint version"),
                        )
                    })?,
                };
                load = Some(v);
            }
            Some(s)
        };
        let data = if hints.in_ram {
            None
        } else {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&data_path)
                .map_err(|e| io_err(&format!("opening {}", data_path.display()), &e))?;
            f.set_len(bytes as u64)
                .map_err(|e| io_err(&format!("sizing {}", data_path.display()), &e))?;
            Some(f)
        };
        Ok(Prepared {
            persist: Persist {
                hints,
                dir,
                rank,
                store,
                data: data.is_some().then_some(data_path),
                last: None,
                next: 0,
                owed: false,
                retrying: false,
                pending,
                _lock: Some(lock),
            },
            data,
            load,
        })
    }

    /// The state of a window made by create or create_dynamic with `pmem_is_pmem=true`:
    /// no files of its own; its persisting synchronisations flush its memory.
    pub(crate) fn flush_only(hints: Hints) -> Persist {
        Persist {
            hints,
            dir: PathBuf::new(),
            rank: 0,
            store: None,
            data: None,
            last: None,
            next: 0,
            owed: false,
            retrying: false,
            pending: None,
            _lock: None,
        }
    }

    /// A new, empty store for `path` (expand mode deletes every checkpoint), made and synced
    /// under a temporary name; [`Persist::install`] renames it over the old one once every
    /// rank has made its window, so that a creation that fails anywhere destroys nothing.
    fn fresh_store(
        io: &Arc<dyn PmemIo>,
        dir: &Path,
        mut geo: store::Geometry,
    ) -> Result<(Store, PathBuf)> {
        let tmp = dir.join(format!("rank{}.store.new", geo.rank));
        let _ = io.remove(&tmp);
        geo.id = store_id();
        let s = Store::create(io.clone(), &tmp, geo)
            .map_err(|e| io_err(&format!("creating {}", tmp.display()), &e))?;
        Ok((s, tmp))
    }

    /// Expand mode, once every rank has made the window: the new store replaces the old
    /// one (atomically: a rename, then a sync of the directory).
    pub(crate) fn install(&mut self) -> Result<()> {
        let Some((tmp, path)) = self.pending.take() else {
            return Ok(());
        };
        let io = io();
        io.rename(&tmp, &path)
            .and_then(|()| io.sync_dir(&self.dir))
            .map_err(|e| io_err(&format!("installing {}", path.display()), &e))
    }

    /// This rank's versions, for the global agreement: the live ones.
    pub(crate) fn versions(&self) -> Vec<u64> {
        self.store
            .as_ref()
            .map_or_else(Vec::new, |s| s.versions().iter().map(|v| v.0).collect())
    }

    /// Fill the window from version `v` through `write`, and number what follows.
    pub(crate) fn load(
        &mut self,
        v: u64,
        write: &mut dyn FnMut(usize, &[u8]) -> std::io::Result<()>,
    ) -> Result<()> {
        let name = self.hints.name.clone();
        let rank = self.rank;
        let s = self
            .store
            .as_mut()
            .ok_or_else(|| err(ErrorClass::PmemArg, "a volatile window has no checkpoints"))?;
        match s.load(v, write) {
            Ok(()) => {}
            Err(LoadError::Missing) => {
                return Err(err(
                    ErrorClass::PmemCkptVer,
                    format!("window {name:?} of rank {rank} has no version {v}"),
                ))
            }
            Err(LoadError::Damaged(why)) => {
                return Err(err(
                    ErrorClass::PmemCkptVer,
                    format!("version {v} of window {name:?} (rank {rank}) is damaged: {why}"),
                ))
            }
            Err(LoadError::Io(e)) => return Err(io_err(&format!("reading version {v}"), &e)),
        }
        self.last = Some(v);
        self.owed = s.newest() != Some(v);
        self.next = if self.hints.append && self.hints.version.is_some() {
            s.highest().map_or(0, |h| h + 1)
        } else {
            v + 1
        };
        Ok(())
    }

    /// The blocks of the window (read through `read`) that differ from the last version
    /// (all of them if there is none).
    pub(crate) fn changed_blocks(
        &mut self,
        read: &mut dyn FnMut(usize, &mut [u8]) -> std::io::Result<()>,
    ) -> Result<Vec<usize>> {
        let (Some(s), Some(v)) = (self.store.as_mut(), self.last) else {
            return Ok(Vec::new());
        };
        s.changed_since(v, read)
            .map_err(|e| io_err(&format!("reading version {v} to compare"), &e))
    }

    /// Whether a commit point makes a version here (else it flushes at most).
    pub(crate) fn transactional(&self) -> bool {
        self.hints.transactional && !self.hints.volatile && self.store.is_some()
    }

    /// Whether a commit point has anything to commit: something changed (`dirty`) or no
    /// version exists yet.
    pub(crate) fn wants_commit(&self, dirty: bool) -> bool {
        self.transactional() && (dirty || self.owed || self.last.is_none())
    }

    /// Commit the window as the next version: `bits` marks the blocks written since the
    /// last one, `read` copies window bytes out.
    pub(crate) fn commit(
        &mut self,
        bits: &[u64],
        read: &mut dyn FnMut(usize, &mut [u8]) -> std::io::Result<()>,
    ) -> Result<u64> {
        let v = self.next;
        let keep_latest = !self.hints.keep_all && !self.retrying;
        let base = self.last;
        let s = self
            .store
            .as_mut()
            .ok_or_else(|| err(ErrorClass::PmemArg, "a volatile window has no checkpoints"))?;
        s.commit(v, base, Some(bits), keep_latest, read)
            .map_err(|e| {
                io_err(
                    &format!(
                        "committing version {v} of window {:?} (rank {})",
                        self.hints.name, self.rank
                    ),
                    &e,
                )
            })?;
        self.last = Some(v);
        self.next = v + 1;
        self.owed = false;
        self.retrying = false;
        Ok(v)
    }

    /// A persisting fence failed on another rank after this rank committed: the next
    /// commit gets the number this one had (and replaces it), so that the ranks' numbers
    /// stay in step.
    pub(crate) fn retry_number(&mut self) {
        if let Some(v) = self.last {
            self.next = v;
            self.owed = true;
            self.retrying = true;
        }
    }

    /// Keeping the latest version only: stop keeping the one the last commit followed. A
    /// persisting fence does this once every rank has committed (so that a crash leaves a
    /// version every rank holds); the other commit points at once.
    pub(crate) fn release_base(&mut self) {
        if !self.hints.keep_all {
            if let Some(s) = self.store.as_mut() {
                s.release_base();
            }
        }
    }

    /// At free: a volatile window's files go.
    pub(crate) fn release(&mut self) -> Result<()> {
        if !self.hints.volatile || !self.hints.allocated {
            return Ok(());
        }
        if let Some(d) = &self.data {
            let _ = std::fs::remove_file(d);
        }
        let _ = std::fs::remove_file(self.dir.join(format!("rank{}.lock", self.rank)));
        let _ = std::fs::remove_dir(&self.dir);
        Ok(())
    }
}

/// A number no other store is likely to have: time and process.
fn store_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ (u64::from(std::process::id()) << 40) ^ 0x9e37_79b9_7f4a_7c15
}

// ---- management (seed §7.2) ---------------------------------------------------------------

/// One version of a window part: its number and when it was committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    /// The version number.
    pub number: u64,
    /// Commit time, in nanoseconds since the Unix epoch.
    pub time_ns: u64,
}

impl Version {
    /// Commit time in whole seconds since the epoch (the seed's `time_t`).
    pub fn timestamp(&self) -> i64 {
        (self.time_ns / 1_000_000_000) as i64
    }
}

/// One window under a root path, as one rank holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowPart {
    /// The window's name.
    pub name: String,
    /// The window rank whose part this is.
    pub rank: u32,
    /// Bytes of the part.
    pub size: u64,
    /// Its versions, oldest first.
    pub versions: Vec<Version>,
}

/// MPI_Win_pmem_windows: the windows under the root path (seed §7.2.1). Freed by drop
/// (the seed's `MPI_Win_pmem_free_windows_list`).
#[derive(Clone, Debug, Default)]
pub struct Windows {
    parts: Vec<WindowPart>,
}

/// MPI_Win_pmem_versions: the versions of one window. Freed by drop.
#[derive(Clone, Debug, Default)]
pub struct Versions {
    versions: Vec<Version>,
}

impl Windows {
    /// MPI_Win_pmem_get_nwindows.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    fn nth(&self, n: usize) -> Result<&WindowPart> {
        self.parts.get(n).ok_or_else(|| {
            err(
                ErrorClass::PmemArg,
                format!("window {n} of a list of {}", self.parts.len()),
            )
        })
    }

    /// MPI_Win_pmem_get_name.
    pub fn name(&self, n: usize) -> Result<&str> {
        Ok(&self.nth(n)?.name)
    }

    /// MPI_Win_pmem_get_size: bytes of the calling rank's part.
    pub fn size(&self, n: usize) -> Result<u64> {
        Ok(self.nth(n)?.size)
    }

    /// MPI_Win_pmem_get_versions.
    pub fn versions(&self, n: usize) -> Result<Versions> {
        Ok(Versions {
            versions: self.nth(n)?.versions.clone(),
        })
    }

    /// Every part listed.
    pub fn parts(&self) -> &[WindowPart] {
        &self.parts
    }
}

impl Versions {
    /// MPI_Win_pmem_get_nversions.
    pub fn len(&self) -> usize {
        self.versions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }

    fn nth(&self, n: usize) -> Result<&Version> {
        self.versions.get(n).ok_or_else(|| {
            err(
                ErrorClass::PmemArg,
                format!("version {n} of a list of {}", self.versions.len()),
            )
        })
    }

    /// MPI_Win_pmem_get_version: the number of the `n`th version.
    pub fn version(&self, n: usize) -> Result<u64> {
        Ok(self.nth(n)?.number)
    }

    /// MPI_Win_pmem_get_version_timestamp: seconds since the epoch.
    pub fn timestamp(&self, n: usize) -> Result<i64> {
        Ok(self.nth(n)?.timestamp())
    }

    /// Every version, oldest first.
    pub fn all(&self) -> &[Version] {
        &self.versions
    }
}

/// Every part's store under `root`: (window name, rank, path of its store), by name then
/// file name.
fn stores_under(root: &Path) -> Result<Vec<(String, u32, PathBuf)>> {
    let io = io();
    let names = io
        .list(root)
        .map_err(|e| io_err(&format!("listing {}", root.display()), &e))?;
    let mut out = Vec::new();
    for name in names {
        let Ok(dir) = window_dir(root, &name) else {
            continue;
        };
        let Ok(files) = io.list(&dir) else { continue };
        for f in files {
            if let Some(r) = f
                .strip_prefix("rank")
                .and_then(|x| x.strip_suffix(".store"))
                .and_then(|x| x.parse::<u32>().ok())
            {
                out.push((name.clone(), r, dir.join(&f)));
            }
        }
    }
    Ok(out)
}

/// Every window part under `root` (all ranks, or only `rank`), by name then rank.
pub fn scan_root(root: &Path, rank: Option<u32>) -> Result<Vec<WindowPart>> {
    let io = io();
    let mut out = Vec::new();
    for (name, r, path) in stores_under(root)? {
        if rank.is_some_and(|want| want != r) {
            continue;
        }
        let Ok(s) = Store::open(io.clone(), &path, false) else {
            continue;
        };
        out.push(WindowPart {
            name,
            rank: r,
            size: s.geo.bytes,
            versions: s
                .versions()
                .into_iter()
                .map(|(number, time_ns, _)| Version { number, time_ns })
                .collect(),
        });
    }
    Ok(out)
}

/// MPI_Win_pmem_list: the windows under the root path of which the calling rank holds a
/// part.
pub fn list() -> Result<Windows> {
    let root = root_path()?;
    Ok(Windows {
        parts: scan_root(&root, Some(world_rank()))?,
    })
}

/// Lock rank `rank`'s part of window `name` in `dir` (held while the file lives);
/// MPI_ERR_PMEM_NAME, saying the part `busy`, if another open file holds it.
fn lock_part(dir: &Path, name: &str, rank: u32, busy: &str) -> Result<std::fs::File> {
    let path = dir.join(format!("rank{rank}.lock"));
    crate::sys::pmem_io::try_lock_file(&path)
        .map_err(|e| io_err(&format!("locking {}", path.display()), &e))?
        .ok_or_else(|| {
            err(
                ErrorClass::PmemName,
                format!("window {name:?} (rank {rank}) {busy}"),
            )
        })
}

/// Rank `rank`'s part of window `name` under `root`, which no job has open, locked: its
/// directory, its store's path and the lock (MPI_ERR_PMEM_NAME if there is no such part
/// or a job has it open).
fn closed_part(root: &Path, name: &str, rank: u32) -> Result<(PathBuf, PathBuf, std::fs::File)> {
    let dir = window_dir(root, name)?;
    let store = dir.join(Store::file_name(rank));
    if !store.exists() {
        return Err(err(
            ErrorClass::PmemName,
            format!("no window {name:?} of rank {rank} under {}", root.display()),
        ));
    }
    let lock = lock_part(&dir, name, rank, "is open in a job: free it first")?;
    Ok((dir, store, lock))
}

/// MPI_Win_pmem_delete: delete the calling rank's part of window `name`: its versions, data
/// and lock file, and the window's directory once no rank has a part left.
/// MPI_ERR_PMEM_NAME if it has none (deleting twice is an error, as the name is gone).
pub fn delete(name: &str) -> Result<()> {
    delete_part(&root_path()?, name, world_rank())
}

/// Delete rank `rank`'s part of window `name` under `root` (see [`delete`]).
pub fn delete_part(root: &Path, name: &str, rank: u32) -> Result<()> {
    let (dir, store, _lock) = closed_part(root, name, rank)?;
    let io = io();
    // The store goes first (after this the part is gone, whatever else a crash leaves).
    io.remove(&store)
        .and_then(|()| io.sync_dir(&dir))
        .map_err(|e| io_err(&format!("removing {}", store.display()), &e))?;
    let _ = io.remove(&dir.join(format!("rank{rank}.data")));
    let _ = io.remove(&dir.join(format!("rank{rank}.lock")));
    if io.remove_dir(&dir).is_ok() {
        let _ = io.sync_dir(root);
    }
    Ok(())
}

/// MPI_Win_pmem_delete_version: delete version `version` of the calling rank's part of
/// window `name`. MPI_ERR_PMEM_NAME if there is no such window, MPI_ERR_PMEM_CKPT_VER if it
/// has no such version.
pub fn delete_version(name: &str, version: u64) -> Result<()> {
    delete_part_version(&root_path()?, name, world_rank(), version)
}

/// Delete version `version` of rank `rank`'s part of window `name` under `root`.
pub fn delete_part_version(root: &Path, name: &str, rank: u32, version: u64) -> Result<()> {
    let (_, path, _lock) = closed_part(root, name, rank)?;
    let mut s = Store::open(io(), &path, true)
        .map_err(|e| io_err(&format!("opening {}", path.display()), &e))?;
    let done = s
        .delete_version(version)
        .map_err(|e| io_err(&format!("deleting version {version} of {name:?}"), &e))?;
    if !done {
        return Err(err(
            ErrorClass::PmemCkptVer,
            format!("window {name:?} of rank {rank} has no version {version}"),
        ));
    }
    Ok(())
}

/// The result of checking one part's versions ([`verify_root`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    pub name: String,
    pub rank: u32,
    /// Per version: its number and, if damaged, what is wrong.
    pub versions: Vec<(u64, Option<String>)>,
    /// A problem with the part as a whole (its store cannot be read), if any.
    pub error: Option<String>,
    /// A commit cut by a crash, found when the store was opened.
    pub cut: Option<(u64, String)>,
}

/// Check every checksum of every version of every part under `root` (read only: a cut
/// commit is reported, not erased).
pub fn verify_root(root: &Path) -> Result<Vec<Checked>> {
    let io = io();
    let mut out = Vec::new();
    for (name, rank, path) in stores_under(root)? {
        let mut c = Checked {
            name,
            rank,
            versions: Vec::new(),
            error: None,
            cut: None,
        };
        match Store::open(io.clone(), &path, false) {
            Err(e) => c.error = Some(e.to_string()),
            Ok(mut s) => {
                c.cut = s.cut.clone();
                if let Some(&slot) = s.bad_manifests.first() {
                    c.error = Some(format!(
                        "{} manifest(s) failing their checksum (slot {slot}): damage, or a commit cut by a crash",
                        s.bad_manifests.len()
                    ));
                }
                match s.verify() {
                    Ok(v) => c.versions = v.into_iter().map(|(n, r)| (n, r.err())).collect(),
                    Err(e) => c.error = Some(e.to_string()),
                }
            }
        }
        out.push(c);
    }
    Ok(out)
}
