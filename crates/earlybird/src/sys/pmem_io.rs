//! File I/O of persistent windows (seed 004), behind a small trait so that tests can put a
//! faulty file system or a crash recorder in place of the real one.
//!
//! Everything the checkpoint store does to the disk goes through [`PmemIo`]: creating,
//! writing, reading and syncing files, and the directory operations whose order makes a
//! commit atomic (creation, rename, removal, directory sync). [`OsIo`] is the operating
//! system's: `pwrite`, `pread`, `fdatasync` and `fsync` of the directory, through `std`.
//!
//! Writes may be short (as `pwrite`'s are); the store loops. An error of any call is the
//! caller's to turn into an MPI error class.

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// One open file of the store.
pub trait PmemFile: Send {
    /// Write `buf` at `off`; returns how many bytes were written (possibly fewer).
    fn write_at(&mut self, off: u64, buf: &[u8]) -> io::Result<usize>;
    /// Read into `buf` from `off`; returns how many bytes were read (0 at the end).
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// The file's length.
    fn len(&mut self) -> io::Result<u64>;
    /// Make the file's data (and the metadata needed to read it) durable: `fdatasync`.
    fn sync_data(&mut self) -> io::Result<()>;
}

/// The file system as the checkpoint store uses it.
pub trait PmemIo: Send + Sync + Debug {
    /// Create `path` for writing; it must not exist (`O_CREAT | O_EXCL`).
    fn create(&self, path: &Path) -> io::Result<Box<dyn PmemFile>>;
    /// Open an existing file, for reading and, if `write`, writing.
    fn open(&self, path: &Path, write: bool) -> io::Result<Box<dyn PmemFile>>;
    /// The names of the entries of `dir` (not `.` and `..`).
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Rename `from` to `to` (atomic; replaces `to`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Remove a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Create a directory (its parent must exist).
    fn create_dir(&self, dir: &Path) -> io::Result<()>;
    /// Remove an empty directory.
    fn remove_dir(&self, dir: &Path) -> io::Result<()>;
    /// Make the entries of `dir` durable: `fsync` of the directory.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsIo;

struct OsFile(File);

impl PmemFile for OsFile {
    fn write_at(&mut self, off: u64, buf: &[u8]) -> io::Result<usize> {
        self.0.write_at(buf, off)
    }

    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read_at(buf, off)
    }

    fn len(&mut self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl PmemIo for OsIo {
    fn create(&self, path: &Path) -> io::Result<Box<dyn PmemFile>> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Box::new(OsFile(f)))
    }

    fn open(&self, path: &Path, write: bool) -> io::Result<Box<dyn PmemFile>> {
        let f = OpenOptions::new().read(true).write(write).open(path)?;
        Ok(Box::new(OsFile(f)))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            if let Ok(n) = e.file_name().into_string() {
                v.push(n);
            }
        }
        v.sort();
        Ok(v)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir(dir)
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// An exclusive advisory lock on `path` (created if missing), held while the returned file
/// is open: `flock(LOCK_EX | LOCK_NB)`, which the kernel drops when the holder dies.
/// `Ok(None)` when another open file holds it.
///
/// A lock this process has just let go can still be held for an instant by a child it is
/// starting (between fork and exec the child shares the descriptor, until close-on-exec
/// closes it), so a refusal is retried for up to 500 ms before it is reported.
pub(crate) fn try_lock_file(path: &Path) -> io::Result<Option<File>> {
    use std::os::fd::AsRawFd;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let end = std::time::Instant::now() + std::time::Duration::from_millis(500);
    loop {
        // SAFETY: flock only reads the descriptor number, which `f` keeps open for the call.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(Some(f));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(e);
        }
        if std::time::Instant::now() >= end {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// `msync(MS_SYNC)` of `len` bytes at `addr` (any alignment: the range is widened to whole
/// pages): the flush of memory mapped from a file. Memory not mapped from a file has nothing
/// to write and succeeds.
pub(crate) fn msync(addr: usize, len: usize) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let page = 4096usize;
    let start = addr & !(page - 1);
    let end = (addr + len).next_multiple_of(page);
    // SAFETY: msync changes no memory; the kernel checks that the range is mapped (ENOMEM
    // otherwise, returned as an error).
    let rc = unsafe { libc::msync(start as *mut libc::c_void, end - start, libc::MS_SYNC) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
