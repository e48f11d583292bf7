//! Writing to a socket without SIGPIPE: a launcher's server that went away must be an
//! error of the write, not a signal that kills a C program (which does not ignore it, as
//! Rust programs do).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Send all of `buf` on the socket `fd` (`send` with `MSG_NOSIGNAL`).
pub(crate) fn send_all(fd: BorrowedFd<'_>, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: buf is valid for reading buf.len() bytes; fd is open for the borrow.
        let n = unsafe {
            libc::send(
                fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}
