//! Single-copy bulk transfer between endpoints of one host: a sender *exposes* a lent buffer
//! (its address, or a table of its segments), the receiver *pulls* from it into its own lent
//! buffer with one copy: `memcpy` when the sender is a thread of this process,
//! `process_vm_readv` when it is another process.
//!
//! # Protocol (what makes the remote read sound)
//!
//! 1. A [`RemoteRef`] is made only by [`expose`], from a live [`Loan`] of the sender, or by
//!    [`Frame::remote`](super::frame::Frame::remote) from a frame a peer's fabric wrote with
//!    one. Nothing else can make one.
//! 2. The sender keeps the exposed buffer lent, unmodified, and (for a segment table) the
//!    table alive until the receiver tells it the pull is over (p2p's FIN, or the
//!    cancellation of the send): its operation holds the loan and the [`Exposed`] until then,
//!    and a request scope does not end while such an operation is in flight.
//! 3. The receiver pulls at most the bytes the sender announced.
//!
//! Between processes the kernel checks every remote address (a wrong one is an error, never
//! a write to our memory). Between threads of one process rule 2 is what keeps the read of the
//! sender's memory sound.

use crate::sys::layout::Segment;
use crate::sys::lend::{Lent, Loan, Unusable};
use std::io;

/// Where a peer's exposed bytes are (see the module doc): one run, or a table of segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RemoteRef {
    addr: u64,
    /// `Some(entries)`: `addr` is a table of `entries` `[address, length]` pairs.
    entries: Option<u64>,
}

impl RemoteRef {
    /// The reference's words, as a frame carries them.
    pub(super) fn words(&self) -> (u64, Option<u64>) {
        (self.addr, self.entries)
    }

    /// A reference read back from a frame a peer's fabric wrote (rule 1).
    pub(super) fn from_words(addr: u64, entries: Option<u64>) -> RemoteRef {
        RemoteRef { addr, entries }
    }
}

/// An exposed buffer: the reference to send, and what must stay alive with it.
#[derive(Debug)]
pub(crate) struct Exposed {
    remote: RemoteRef,
    /// The segment table a non-contiguous buffer is described by, read by the peer out of
    /// this memory: held here, unread, until the pull is over.
    _table: Option<Box<[Segment]>>,
}

impl Exposed {
    /// The reference to send to the peer.
    pub(crate) fn remote(&self) -> RemoteRef {
        self.remote
    }
}

/// Expose the first `n` message bytes of `loan` for a peer to pull (rule 2 is the caller's:
/// keep `loan` and the result until the pull is over).
pub(crate) fn expose(loan: &Loan, n: usize) -> Result<Exposed, Unusable> {
    let raw = loan.raw_to_read()?;
    if raw.is_contiguous() {
        return Ok(Exposed {
            remote: RemoteRef {
                addr: raw.addr(),
                entries: None,
            },
            _table: None,
        });
    }
    let table: Box<[Segment]> = raw.segments(n).into_boxed_slice();
    Ok(Exposed {
        remote: RemoteRef {
            addr: table.as_ptr() as u64,
            entries: Some(table.len() as u64),
        },
        _table: Some(table),
    })
}

/// Fill the first `n` message bytes of `dst` from the peer's exposed bytes `remote`: the peer
/// is a thread of this process when `same_process`, else process `pid`.
pub(crate) fn pull(
    same_process: bool,
    pid: u32,
    remote: &RemoteRef,
    dst: &Loan,
    n: usize,
) -> io::Result<()> {
    let dst = dst
        .raw_to_write()
        .map_err(|u| io::Error::other(u.to_string()))?;
    assert!(n <= dst.packed_len(), "rendezvous pull out of range");
    if n == 0 {
        return Ok(());
    }
    match (remote.entries, dst.is_contiguous()) {
        (None, true) if same_process => {
            // SAFETY: (1) `remote.addr` is a peer's exposed, contiguous buffer of at least the
            // `n` bytes it announced, alive and unmodified until our FIN (module doc, rules
            // 1-3); (2) `dst` is a live, writable loan of ours of at least `n` bytes, which
            // nothing else reads or writes during the call (the `Loan` contract); (3) the two
            // are different buffers (one was lent for reading to a send, the other for
            // writing to a receive, and a write loan's bytes belong to no other loan).
            unsafe { std::ptr::copy_nonoverlapping(remote.addr as *const u8, dst.as_mut_ptr(), n) };
            Ok(())
        }
        (None, true) => {
            // SAFETY: `dst` is a live, writable loan of at least `n` bytes, exclusively ours
            // during the call (the `Loan` contract); the slice does not escape.
            let d = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr(), n) };
            crate::sys::cma::read_remote(pid, remote.addr, d)
        }
        _ => {
            let theirs = match remote.entries {
                None => vec![[remote.addr, n as u64]],
                Some(entries) => read_table(same_process, pid, remote.addr, entries as usize)?,
            };
            copy_segments(same_process, pid, &dst_segments(dst, n), &theirs, n)
        }
    }
}

/// The segments of our own buffer to fill.
fn dst_segments(dst: &Lent, n: usize) -> Vec<Segment> {
    dst.segments(n)
}

/// A peer's segment table, read out of its memory.
fn read_table(
    same_process: bool,
    pid: u32,
    table: u64,
    entries: usize,
) -> io::Result<Vec<Segment>> {
    let mut v: Vec<Segment> = vec![[0; 2]; entries];
    if same_process {
        // SAFETY: `table` is the peer's segment table of `entries` `[u64; 2]` (its frame says
        // so, rule 1), alive until our FIN (rule 2); `v` has room for exactly that.
        unsafe { std::ptr::copy_nonoverlapping(table as *const Segment, v.as_mut_ptr(), entries) };
    } else {
        let raw: &mut [u8] = bytemuck::cast_slice_mut(&mut v);
        crate::sys::cma::read_remote(pid, table, raw)?;
    }
    Ok(v)
}

/// Copy the first `n` bytes the peer's segments `theirs` describe into ours, `mine`.
fn copy_segments(
    same_process: bool,
    pid: u32,
    mine: &[Segment],
    theirs: &[Segment],
    n: usize,
) -> io::Result<()> {
    if !same_process {
        // SAFETY: `mine` are the segments of a live, writable loan of ours that nothing else
        // accesses during the call (the `Loan` contract), within its buffer (layouts are
        // checked when placed).
        return unsafe { crate::sys::cma::read_remote_segments(pid, mine, theirs, n) };
    }
    let (mut di, mut doff, mut si, mut soff, mut left) = (0, 0u64, 0, 0u64, n as u64);
    while left > 0 && di < mine.len() && si < theirs.len() {
        let [da, dl] = mine[di];
        let [sa, sl] = theirs[si];
        let k = (dl - doff).min(sl - soff).min(left);
        // SAFETY: `mine` are pieces of our live, writable loan (as above); `theirs` are pieces
        // of the peer's exposed buffer, alive and unmodified until our FIN (rules 1-3); both
        // lie within their buffers, which are different buffers.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (sa + soff) as *const u8,
                (da + doff) as *mut u8,
                k as usize,
            )
        };
        left -= k;
        doff += k;
        soff += k;
        if doff == dl {
            di += 1;
            doff = 0;
        }
        if soff == sl {
            si += 1;
            soff = 0;
        }
    }
    Ok(())
}

/// This endpoint's own exposed bytes `remote` (its [`expose`]), the first `n` of them, as one
/// packed copy: what a peer on another host pulls when they are not one run.
pub(super) fn gather_own(remote: &RemoteRef, n: usize) -> io::Result<Vec<u8>> {
    let theirs = match remote.entries {
        None => vec![[remote.addr, n as u64]],
        Some(entries) => read_table(true, 0, remote.addr, entries as usize)?,
    };
    let mut out = vec![0u8; n];
    copy_segments(true, 0, &[[out.as_mut_ptr() as u64, n as u64]], &theirs, n)?;
    Ok(out)
}

/// Unpack `n` packed bytes `from` into the non-contiguous buffer `dst`.
pub(super) fn scatter_own(dst: &Lent, from: &[u8], n: usize) -> io::Result<()> {
    let n = n.min(from.len());
    copy_segments(
        true,
        0,
        &dst_segments(dst, n),
        &[[from.as_ptr() as u64, n as u64]],
        n,
    )
}
