//! Shared segments: one mapping of memory that every rank of a job sees.
//!
//! Process jobs: `ebrun` creates a file in a tmpfs directory (`/dev/shm` unless
//! `EARLYBIRD_SHM_DIR` says otherwise), **unlinks it at once**, reserves its space with
//! `fallocate` (a full tmpfs is an error here, never a SIGBUS later) and hands the open file
//! descriptor to its children. Nothing of the job is ever left in the directory after that
//! first instant, whatever kills whom. Thread jobs and singletons map anonymous shared memory.
//!
//! A large job's segment reserves only its first part at creation (header, rank slots); the
//! rest stays a hole until [`Segment::populate`] allocates a range of it, again with an
//! error rather than a SIGBUS when the directory is full.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

/// Directory in which segments are created (and at once unlinked); `/dev/shm` by default.
pub const ENV_SHM_DIR: &str = "EARLYBIRD_SHM_DIR";

/// The directory segments go in: `$EARLYBIRD_SHM_DIR`, else `/dev/shm`.
pub(crate) fn shm_dir() -> PathBuf {
    std::env::var_os(ENV_SHM_DIR)
        .map(PathBuf::from)
        .unwrap_or_else(|| "/dev/shm".into())
}

/// A mapping of shared memory, zero-filled when created. Unmapped on drop.
#[derive(Debug)]
pub struct Segment {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a Segment is a plain mapping; concurrent access to its bytes is governed by the
// atomics of the structures placed in it (rings, rank slots), never by the Segment itself.
unsafe impl Send for Segment {}
// SAFETY: as above; `&Segment` hands out only the base address and length.
unsafe impl Sync for Segment {}

impl Segment {
    /// Anonymous shared memory for a job whose ranks are threads of this process.
    pub fn anonymous(len: usize) -> io::Result<Segment> {
        let len = len.max(1);
        // SAFETY: (1) a null hint and MAP_ANONYMOUS ask the kernel for fresh memory, so no
        // existing mapping is touched; (2) the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Segment {
            base: NonNull::new(p.cast()).expect("mmap returned null"),
            len,
        })
    }

    /// Create an unlinked file of `len` bytes in `dir`, its first `reserved` bytes (all of it
    /// when `reserved >= len`) backed at once, and map it. The rest is a hole that costs no
    /// memory until [`populate`](Self::populate)d. Returns the mapping and the descriptor to
    /// hand to the job's processes.
    pub fn create_unlinked(
        dir: &Path,
        len: usize,
        reserved: usize,
    ) -> io::Result<(Segment, OwnedFd)> {
        let fd = match open_tmpfile(dir)? {
            Some(fd) => fd,
            None => create_then_unlink(dir)?,
        };
        if reserved < len {
            set_len(fd.as_fd(), len)?;
        }
        reserve(fd.as_fd(), reserved.min(len).max(1))?;
        let seg = Segment::map_fd(fd.as_fd(), len)?;
        Ok((seg, fd))
    }

    /// Back `len` bytes from `offset` with memory now (they read as zeros until written, as
    /// before): `Err` when the filesystem or the memory is full, where a first touch of
    /// those pages would have raised SIGBUS. Kernels before Linux 5.14 lack
    /// `MADV_POPULATE_WRITE`: there the pages are left to fault in when first touched (as
    /// any page of a sparse file), with the SIGBUS risk of a full filesystem.
    pub fn populate(&self, offset: usize, len: usize) -> io::Result<()> {
        const PAGE: usize = 4096;
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "range outside the segment")
            })?;
        let start = offset / PAGE * PAGE;
        // SAFETY: [start, end) lies inside this mapping (checked above; the base is page
        // aligned); MADV_POPULATE_WRITE only faults pages in as a write would, without
        // changing their contents.
        let rc = unsafe {
            libc::madvise(
                self.base.as_ptr().add(start).cast(),
                end - start,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) {
                // An unknown advice (the range was checked above): an older kernel.
                return Ok(());
            }
            return Err(e);
        }
        Ok(())
    }

    /// Map `len` bytes of a segment's descriptor.
    pub fn map_fd(fd: BorrowedFd<'_>, len: usize) -> io::Result<Segment> {
        // SAFETY: (1) null hint, so no existing mapping is replaced; (2) the kernel checks
        // that fd is a mappable file; (3) the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Segment {
            base: NonNull::new(p.cast()).expect("mmap returned null"),
            len,
        })
    }

    /// Map the first `len` bytes of a segment that process `pid` holds open as its
    /// descriptor `fd` (through `/proc/PID/fd/FD`, which asks for the same user): how a
    /// rank maps what another created unlinked. `Err` if the file is shorter than `len`.
    pub fn map_held(pid: u32, fd: i32, len: usize) -> io::Result<Segment> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/fd/{fd}"))?;
        let have = fd_len(file.as_fd())?;
        if have < len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("segment of {have} bytes, {len} expected"),
            ));
        }
        Segment::map_fd(file.as_fd(), len)
    }

    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: base/len describe exactly the mapping made in the constructor; every
        // structure placed in it borrows the Segment (through an Arc), so none outlives it.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// An anonymous file in `dir` that never has a name (O_TMPFILE), so no crash at any instant
/// can leave it behind; `None` where the filesystem does not support it.
fn open_tmpfile(dir: &Path) -> io::Result<Option<OwnedFd>> {
    let cdir = CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in shm path"))?;
    // SAFETY: cdir is a valid NUL-terminated path; O_TMPFILE creates an unnamed inode.
    let fd = unsafe {
        libc::open(
            cdir.as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: fd was just opened by us and is owned by nobody else.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Fallback: create a uniquely named file and unlink it at once.
fn create_then_unlink(dir: &Path) -> io::Result<OwnedFd> {
    let name = dir.join(format!(
        "earlybird-{}-{:x}",
        std::process::id(),
        crate::sys::process::nonce()
    ));
    let cname = CString::new(name.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in shm path"))?;
    // SAFETY: cname is a valid NUL-terminated path; O_EXCL makes the file ours alone.
    let fd = unsafe {
        libc::open(
            cname.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened by us and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: cname is valid; unlinking a file we created does not affect our open fd.
    unsafe { libc::unlink(cname.as_ptr()) };
    Ok(fd)
}

/// Make the file `len` bytes long without allocating anything (a hole).
fn set_len(fd: BorrowedFd<'_>, len: usize) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor that is open for the borrow's duration.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reserve `len` bytes of backing store so that later page faults cannot SIGBUS.
fn reserve(fd: BorrowedFd<'_>, len: usize) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor that is open for the borrow's duration.
    let rc = unsafe { libc::fallocate(fd.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc != 0 {
        // fallocate returns the error number directly on some libcs, -1 + errno on glibc.
        let e = io::Error::last_os_error();
        return Err(e);
    }
    Ok(())
}

/// File size of a segment's descriptor.
pub(crate) fn fd_len(fd: BorrowedFd<'_>) -> io::Result<usize> {
    // SAFETY: stat is plain data; fstat fills it or fails.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out-pointer for the duration of the call; fd is open for the
    // borrow's duration.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.st_size as usize)
}

/// Clear FD_CLOEXEC so that children started by `Command` inherit the descriptor.
pub(crate) fn set_inheritable(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_cloexec_flag(fd, false)
}

/// Set FD_CLOEXEC, so that programs the process starts do not inherit the descriptor.
pub(crate) fn set_close_on_exec(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_cloexec_flag(fd, true)
}

fn set_cloexec_flag(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl F_GETFD on a descriptor open for the borrow's duration reads its flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::FD_CLOEXEC
    } else {
        flags & !libc::FD_CLOEXEC
    };
    // SAFETY: as above; F_SETFD writes the descriptor flags back.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Take ownership of the descriptor number `fd` that the launcher passed to this process
/// (its number comes from the environment). `Err` if no such descriptor is open.
///
/// It must be called once per inherited descriptor: nothing else in the process owns it
/// (earlybird's launcher hands each rank exactly one, named in its environment, and
/// `init` runs once per process).
pub(crate) fn adopt_inherited(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_GETFD only asks whether the number names an open descriptor.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("descriptor {fd} is not open in this process"),
        ));
    }
    // SAFETY: the descriptor is open (checked) and was handed to this process by its
    // launcher for this purpose alone, so no other owner exists (see the doc above).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlinked_segment_leaves_nothing_in_dir() {
        let dir = std::env::temp_dir().join(format!("eb-seg-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (seg, fd) = Segment::create_unlinked(&dir, 1 << 16, 1 << 16).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        assert_eq!(fd_len(fd.as_fd()).unwrap(), 1 << 16);
        let again = Segment::map_fd(fd.as_fd(), 1 << 16).unwrap();
        // SAFETY: both mappings are 64 KiB of the same file; offset 100 is inside.
        unsafe {
            *seg.base().add(100) = 42;
            assert_eq!(*again.base().add(100), 42);
        }
        std::fs::remove_dir(&dir).unwrap();
    }

    /// Only the reserved prefix costs memory at creation; a populated range is backed then.
    #[test]
    fn a_sparse_segment_is_backed_where_populated() {
        use std::os::unix::fs::MetadataExt;
        let (len, reserved) = (64 << 20, 8192);
        let (seg, fd) = Segment::create_unlinked(&shm_dir(), len, reserved).unwrap();
        let file = std::fs::File::from(fd);
        let backed = |f: &std::fs::File| f.metadata().unwrap().blocks() * 512;
        assert_eq!(file.metadata().unwrap().len(), len as u64);
        assert!(backed(&file) < 1 << 20, "{} bytes backed", backed(&file));
        seg.populate(16 << 20, 4 << 20).unwrap();
        assert!(backed(&file) >= 4 << 20, "{} bytes backed", backed(&file));
        // SAFETY: offset 17 MiB is inside the 64 MiB mapping, populated above.
        unsafe {
            assert_eq!(*seg.base().add(17 << 20), 0);
            *seg.base().add(17 << 20) = 7;
        }
        assert!(seg.populate(len - 4096, 8192).is_err(), "past the end");
        assert!(seg.populate(usize::MAX, 2).is_err(), "overflow");
    }
}
