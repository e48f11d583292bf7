//! Cross-memory attach: one copy between two processes' address spaces
//! (`process_vm_readv`), used by the rendezvous protocol.

use std::io;

/// Copy `dst.len()` bytes from `remote_addr` in process `pid` into `dst`.
pub fn read_remote(pid: u32, remote_addr: u64, dst: &mut [u8]) -> io::Result<()> {
    let mut done = 0usize;
    while done < dst.len() {
        let local = libc::iovec {
            iov_base: dst[done..].as_mut_ptr().cast(),
            iov_len: dst.len() - done,
        };
        let remote = libc::iovec {
            iov_base: (remote_addr as usize + done) as *mut libc::c_void,
            iov_len: dst.len() - done,
        };
        // SAFETY: (1) the local iovec covers exactly the unfilled tail of `dst`, which we
        // borrow mutably; (2) the remote iovec names memory in another process, which the
        // kernel checks (EFAULT), so no memory of ours other than `dst` is written.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
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
                "process_vm_readv copied nothing",
            ));
        }
        done += n as usize;
    }
    Ok(())
}
