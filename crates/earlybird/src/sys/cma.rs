//! Cross-memory attach: one copy between two processes' address spaces
//! (`process_vm_readv`), used by the rendezvous protocol.

use super::layout::Segment;
use std::io;

/// Copy `dst.len()` bytes from `remote_addr` in process `pid` into `dst`.
pub(crate) fn read_remote(pid: u32, remote_addr: u64, dst: &mut [u8]) -> io::Result<()> {
    // SAFETY: `dst` is borrowed exclusively for the call, so the kernel may write all of it.
    unsafe { copy_remote(pid, remote_addr, dst.as_mut_ptr(), dst.len(), false) }
}

/// Copy `src` to `remote_addr` in process `pid` (`process_vm_writev`): one-sided puts into a
/// window of user memory in another process.
pub(crate) fn write_remote(pid: u32, remote_addr: u64, src: &[u8]) -> io::Result<()> {
    // SAFETY: `src` is borrowed for the call, and the kernel only reads it when writing.
    unsafe { copy_remote(pid, remote_addr, src.as_ptr() as *mut u8, src.len(), true) }
}

/// One copy of `len` bytes between `local` and `remote_addr` in process `pid`: out of the
/// other process (`process_vm_readv`) or, with `write`, into it (`process_vm_writev`).
///
/// # Safety
/// `local..local + len` is memory of this process that the call may read (and, unless
/// `write`, write), not otherwise accessed during the call.
unsafe fn copy_remote(
    pid: u32,
    remote_addr: u64,
    local: *mut u8,
    len: usize,
    write: bool,
) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let liov = libc::iovec {
            iov_base: local.wrapping_add(done).cast(),
            iov_len: len - done,
        };
        let riov = libc::iovec {
            iov_base: (remote_addr as usize + done) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: (1) the local iovec covers exactly the tail of the caller's range not yet
        // copied, which the contract above lets the kernel read or write; (2) the remote
        // iovec names memory in another process, which the kernel checks (EFAULT), so no
        // other memory of this process is touched.
        let n = unsafe {
            if write {
                libc::process_vm_writev(pid as libc::pid_t, &liov, 1, &riov, 1, 0)
            } else {
                libc::process_vm_readv(pid as libc::pid_t, &liov, 1, &riov, 1, 0)
            }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "a cross-memory copy copied nothing",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

/// Most iovecs one `process_vm_readv` takes on each side (the kernel's UIO_MAXIOV).
const IOV_MAX: usize = 1024;

/// Copy the first `n` bytes of the `remote` segments (`(address, length)` in process `pid`)
/// into the `local` segments, in order, batching up to [`IOV_MAX`] segments a side per call.
///
/// # Safety
/// Every `local` segment must be memory of this process that the caller may write (a piece
/// of a buffer lent for writing to the receive), and no other reference may observe it during
/// the call.
pub(crate) unsafe fn read_remote_segments(
    pid: u32,
    local: &[Segment],
    remote: &[Segment],
    n: usize,
) -> io::Result<()> {
    // Cursors: segment index and offset within it, on each side.
    let (mut li, mut loff, mut ri, mut roff) = (0usize, 0u64, 0usize, 0u64);
    let mut left = n as u64;
    let mut liov = Vec::with_capacity(IOV_MAX.min(local.len()));
    let mut riov = Vec::with_capacity(IOV_MAX.min(remote.len()));
    while left > 0 {
        liov.clear();
        riov.clear();
        // Up to IOV_MAX segments a side, and the same byte count on both.
        let (mut lbytes, mut i, mut off) = (0u64, li, loff);
        while i < local.len() && liov.len() < IOV_MAX && lbytes < left {
            let take = (local[i][1] - off).min(left - lbytes);
            liov.push(libc::iovec {
                iov_base: (local[i][0] + off) as *mut libc::c_void,
                iov_len: take as usize,
            });
            lbytes += take;
            i += 1;
            off = 0;
        }
        let (mut rbytes, mut j, mut roff2) = (0u64, ri, roff);
        while j < remote.len() && riov.len() < IOV_MAX && rbytes < lbytes {
            let take = (remote[j][1] - roff2).min(lbytes - rbytes);
            riov.push(libc::iovec {
                iov_base: (remote[j][0] + roff2) as *mut libc::c_void,
                iov_len: take as usize,
            });
            rbytes += take;
            j += 1;
            roff2 = 0;
        }
        if rbytes == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "rendezvous segments describe fewer bytes than announced",
            ));
        }
        // SAFETY: (1) each local iovec is a piece of a buffer this process lent for writing to
        // the receive, within its bounds (this function's safety contract); (2) the remote iovecs name
        // memory of another process, which the kernel checks (EFAULT); (3) the kernel copies
        // at most the smaller of the two totals.
        let r = unsafe {
            libc::process_vm_readv(
                pid as libc::pid_t,
                liov.as_ptr(),
                liov.len() as libc::c_ulong,
                riov.as_ptr(),
                riov.len() as libc::c_ulong,
                0,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "process_vm_readv copied nothing",
            ));
        }
        // Advance both cursors by the bytes copied.
        let mut k = r as u64;
        left -= k;
        while k > 0 {
            let t = (local[li][1] - loff).min(k);
            loff += t;
            k -= t;
            if loff == local[li][1] {
                li += 1;
                loff = 0;
            }
        }
        let mut k = r as u64;
        while k > 0 {
            let t = (remote[ri][1] - roff).min(k);
            roff += t;
            k -= t;
            if roff == remote[ri][1] {
                ri += 1;
                roff = 0;
            }
        }
    }
    Ok(())
}
