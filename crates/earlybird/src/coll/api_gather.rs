//! Gather, scatter and allgather, regular and v forms, on [`Comm`]: each blocking,
//! nonblocking (`i*`) and persistent (`*_init`).
//!
//! Counts come from the slices: a gather's count is the send slice's length, a scatter's the
//! receive slice's; the v forms take per-rank counts and displacements in elements. A buffer
//! significant only at the root may be empty elsewhere (and is ignored there).
//!
//! MPI_IN_PLACE: gather and gatherv take [`IN_PLACE`](super::IN_PLACE) as the root's send
//! argument (the root's block is already in its receive buffer); scatter and scatterv take it
//! as the root's *receive* argument (a [`Dst`]: the root's block stays in its send buffer);
//! allgather and allgatherv take it as the send argument everywhere (each rank's own block is
//! already in place in its receive buffer).
//!
//! # Standard section(s)
//! MPI 4.1 §6.5 (gather), §6.6 (scatter), §6.7 (gather-to-all), §6.12, §6.13.
#![forbid(unsafe_code)]

use super::api::{collective, Call, CallBufs, InPlace, Src};
use super::{check_len, check_root, Args, Coll, Elem};
use crate::comm::Comm;
use crate::datatype::Equivalence;
use crate::error::{Error, ErrorClass, Result};
use std::rc::Rc;

/// A scatter's receive argument: a slice, or [`IN_PLACE`](super::IN_PLACE) at the root
/// (MPI_IN_PLACE as the root's recvbuf: its own block stays where it is in the send buffer).
#[derive(Debug)]
pub enum Dst<'a, T> {
    Slice(&'a mut [T]),
    InPlace,
}

impl<'a, T> From<&'a mut [T]> for Dst<'a, T> {
    fn from(s: &'a mut [T]) -> Self {
        Dst::Slice(s)
    }
}
impl<'a, T, const N: usize> From<&'a mut [T; N]> for Dst<'a, T> {
    fn from(s: &'a mut [T; N]) -> Self {
        Dst::Slice(s)
    }
}
impl<'a, T> From<&'a mut Vec<T>> for Dst<'a, T> {
    fn from(s: &'a mut Vec<T>) -> Self {
        Dst::Slice(s)
    }
}
impl<T> From<InPlace> for Dst<'_, T> {
    fn from(_: InPlace) -> Self {
        Dst::InPlace
    }
}

/// Per-rank counts and displacements of a v form.
type V<'c> = Option<(&'c [usize], &'c [usize])>;

/// A v form's counts and displacements, as `Args` keeps them.
type Blocks = (Rc<[usize]>, Rc<[usize]>);

/// Check the counts and displacements of a v form against a buffer of `len` elements: one of
/// each per rank (MPI_ERR_ARG), every block inside the buffer (MPI_ERR_BUFFER), and unless
/// `may_overlap` no two non-empty blocks sharing an element (MPI_ERR_ARG).
fn check_v(
    what: &str,
    which: &str,
    (counts, displs): (&[usize], &[usize]),
    size: i32,
    len: usize,
    may_overlap: bool,
) -> Result<Blocks> {
    for (name, v) in [("counts", counts), ("displacements", displs)] {
        if v.len() != size as usize {
            return Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "{what}: {which} {name} has {} entries, {size} needed (one per rank)",
                    v.len()
                ),
            ));
        }
    }
    for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        if d.checked_add(c).is_none_or(|end| end > len) {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!(
                    "{what}: rank {i}'s block (displacement {d}, count {c}) does not fit in the {which} buffer of {len} elements"
                ),
            ));
        }
    }
    if !may_overlap {
        let mut order: Vec<usize> = (0..counts.len()).filter(|&i| counts[i] > 0).collect();
        order.sort_unstable_by_key(|&i| displs[i]);
        for w in order.windows(2) {
            let (i, j) = (w[0], w[1]);
            if displs[j] < displs[i] + counts[i] {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!(
                        "{what}: the {which} blocks of ranks {i} (displacement {}, count {}) and {j} (displacement {}, count {}) overlap",
                        displs[i], counts[i], displs[j], counts[j]
                    ),
                ));
            }
        }
    }
    Ok((counts.into(), displs.into()))
}

/// The count of an in-place call with a buffer of `len` elements holding `size` blocks.
fn per_rank(what: &str, which: &str, len: usize, size: i32) -> Result<usize> {
    let n = size as usize;
    if !len.is_multiple_of(n) {
        return Err(Error::new(
            ErrorClass::Count,
            format!(
                "{what}: with MPI_IN_PLACE the {which} buffer's {len} elements must split into {size} equal blocks"
            ),
        ));
    }
    Ok(len / n)
}

/// `count` elements per rank for `size` ranks, or MPI_ERR_COUNT if that overflows.
fn total(what: &str, count: usize, size: i32) -> Result<usize> {
    count.checked_mul(size as usize).ok_or_else(|| {
        Error::new(
            ErrorClass::Count,
            format!("{what}: {count} elements from each of {size} ranks overflow"),
        )
    })
}

/// A send slice's length must be the count the v arguments give this rank.
fn check_own(what: &str, have: usize, rank: i32, want: usize) -> Result<()> {
    if have == want {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::Count,
        format!(
            "{what}: the send buffer holds {have} elements but the counts give rank {rank} {want}"
        ),
    ))
}

fn in_place_only_at_root(what: &str) -> Error {
    Error::new(
        ErrorClass::Buffer,
        format!("{what}: MPI_IN_PLACE is allowed only at the root"),
    )
}

impl Comm {
    /// Gather and gatherv (`v`: the root's counts and displacements).
    fn gather_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        recv: &'b mut [T],
        v: V<'_>,
        root: i32,
    ) -> Call<'b> {
        if self.is_inter() {
            return self.inter_gather_call(what, send, recv, v, root);
        }
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let recv = recv;
            let send = send;
            check_root(what, root, self.size)?;
            let at_root = self.rank == root;
            let mut a = Args::new(
                if v.is_some() {
                    Coll::Gatherv
                } else {
                    Coll::Gather
                },
                self.rank,
                self.size,
                Elem::of::<T>()?,
            );
            a.root = root;
            if send.len().is_none() && !at_root {
                return Err(in_place_only_at_root(what));
            }
            match (at_root, v) {
                (false, _) => a.count = send.len().unwrap_or(0),
                (true, Some(cd)) => {
                    let (c, d) = check_v(what, "receive", cd, self.size, recv.len(), false)?;
                    a.count = c[root as usize];
                    if let Some(n) = send.len() {
                        check_own(what, n, root, a.count)?;
                    }
                    a.rcounts = Some(c);
                    a.rdispls = Some(d);
                    a.recv = calls.recv(recv);
                }
                (true, None) => {
                    a.count = match send.len() {
                        Some(n) => n,
                        None => per_rank(what, "receive", recv.len(), self.size)?,
                    };
                    let need = total(what, a.count, self.size)?;
                    check_len(what, "the receive buffer", recv.len(), need)?;
                    a.recv = calls.recv(&mut recv[..need]);
                }
            }
            a.bytes = a.count * std::mem::size_of::<T>();
            a.send = calls.send(send);
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    collective! {
        /// MPI_Gather: every rank's `send` to block `i` (of `send.len()` elements) of `recv` at
        /// `root`; `recv` may be empty elsewhere. `send` may be [`IN_PLACE`](super::IN_PLACE) at
        /// the root, whose block is then already in `recv` (and `recv.len()` must be a multiple of
        /// the size).
        gather, igather, gather_init ("Gather", "gather")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, recv: &'b mut [T], root: i32)
            => gather_call(send.into(), recv, None, root)
    }

    collective! {
        /// MPI_Gatherv: rank `i`'s `send` to `recv[displs[i]..][..counts[i]]` at `root` (counts,
        /// displacements and `recv` matter only at the root; the blocks must not overlap). `send`
        /// may be [`IN_PLACE`](super::IN_PLACE) at the root.
        gatherv, igatherv, gatherv_init ("Gatherv", "gatherv")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, recv: &'b mut [T], counts: &[usize], displs: &[usize], root: i32)
            => gather_call(send.into(), recv, Some((counts, displs)), root)
    }

    /// Scatter and scatterv (`v`: the root's counts and displacements). At the root an empty
    /// receive buffer in `Args` means in place (with a count of 0 there is nothing to copy
    /// either way).
    fn scatter_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        recv: Dst<'b, T>,
        v: V<'_>,
        root: i32,
    ) -> Call<'b> {
        if self.is_inter() {
            return self.inter_scatter_call(what, send, recv, v, root);
        }
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let recv = recv;
            let send = send;
            check_root(what, root, self.size)?;
            let at_root = self.rank == root;
            let mut a = Args::new(
                if v.is_some() {
                    Coll::Scatterv
                } else {
                    Coll::Scatter
                },
                self.rank,
                self.size,
                Elem::of::<T>()?,
            );
            a.root = root;
            let Some(slen) = send.len() else {
                return Err(Error::new(
                    ErrorClass::Buffer,
                    format!("{what}: MPI_IN_PLACE goes in the root's receive argument, not the send argument"),
                ));
            };
            let recv = match recv {
                Dst::Slice(r) => Some(r),
                Dst::InPlace if at_root => None,
                Dst::InPlace => return Err(in_place_only_at_root(what)),
            };
            if !at_root {
                let r = recv.expect("a receive slice off the root");
                a.count = r.len();
                a.recv = calls.recv(r);
                a.bytes = a.count * std::mem::size_of::<T>();
                return Ok(a);
            }
            match v {
                Some(cd) => {
                    let (c, d) = check_v(what, "send", cd, self.size, slen, true)?;
                    a.count = c[root as usize];
                    a.scounts = Some(c);
                    a.sdispls = Some(d);
                }
                None => {
                    a.count = match &recv {
                        Some(r) => r.len(),
                        None => per_rank(what, "send", slen, self.size)?,
                    };
                    check_len(
                        what,
                        "the send buffer",
                        slen,
                        total(what, a.count, self.size)?,
                    )?;
                }
            }
            if let Some(r) = recv {
                check_len(what, "the receive buffer", r.len(), a.count)?;
                a.recv = calls.recv(&mut r[..a.count]);
            }
            a.bytes = a.count * std::mem::size_of::<T>();
            a.send = calls.send(send);
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    collective! {
        /// MPI_Scatter: block `i` (of `recv.len()` elements) of `send` at `root` to rank `i`'s
        /// `recv`; `send` may be empty off the root. At the root `recv` may be
        /// [`IN_PLACE`](super::IN_PLACE): its block stays in `send` (whose length must then be a
        /// multiple of the size).
        scatter, iscatter, scatter_init ("Scatter", "scatter")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, recv: impl Into<Dst<'b, T>>, root: i32)
            => scatter_call(send.into(), recv.into(), None, root)
    }

    collective! {
        /// MPI_Scatterv: `send[displs[i]..][..counts[i]]` at `root` to rank `i`'s `recv` (counts,
        /// displacements and `send` matter only at the root; blocks may overlap, as they are only
        /// read). At the root `recv` may be [`IN_PLACE`](super::IN_PLACE).
        scatterv, iscatterv, scatterv_init ("Scatterv", "scatterv")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, counts: &[usize], displs: &[usize], recv: impl Into<Dst<'b, T>>, root: i32)
            => scatter_call(send.into(), recv.into(), Some((counts, displs)), root)
    }

    /// Allgather and allgatherv (`v`: every rank's counts and displacements).
    fn allgather_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        recv: &'b mut [T],
        v: V<'_>,
    ) -> Call<'b> {
        if self.is_inter() {
            return self.inter_allgather_call(what, send, recv, v);
        }
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let recv = recv;
            let send = send;
            let mut a = Args::new(
                if v.is_some() {
                    Coll::Allgatherv
                } else {
                    Coll::Allgather
                },
                self.rank,
                self.size,
                Elem::of::<T>()?,
            );
            match v {
                Some(cd) => {
                    let (c, d) = check_v(what, "receive", cd, self.size, recv.len(), false)?;
                    a.count = c[self.rank as usize];
                    if let Some(n) = send.len() {
                        check_own(what, n, self.rank, a.count)?;
                    }
                    // The same on every rank, so every rank makes the same choice.
                    a.bytes =
                        c.iter().sum::<usize>() / self.size as usize * std::mem::size_of::<T>();
                    a.rcounts = Some(c);
                    a.rdispls = Some(d);
                    a.recv = calls.recv(recv);
                }
                None => {
                    a.count = match send.len() {
                        Some(n) => n,
                        None => per_rank(what, "receive", recv.len(), self.size)?,
                    };
                    let need = total(what, a.count, self.size)?;
                    check_len(what, "the receive buffer", recv.len(), need)?;
                    a.bytes = a.count * std::mem::size_of::<T>();
                    a.recv = calls.recv(&mut recv[..need]);
                }
            }
            a.send = calls.send(send);
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    collective! {
        /// MPI_Allgather: every rank's `send` to block `i` (of `send.len()` elements) of every
        /// rank's `recv`. `send` may be [`IN_PLACE`](super::IN_PLACE): each rank's block is
        /// already in its `recv` (whose length must then be a multiple of the size).
        allgather, iallgather, allgather_init ("Allgather", "allgather")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, recv: &'b mut [T])
            => allgather_call(send.into(), recv, None)
    }

    collective! {
        /// MPI_Allgatherv: rank `i`'s `send` (of `counts[i]` elements) to
        /// `recv[displs[i]..][..counts[i]]` on every rank (the blocks must not overlap). `send`
        /// may be [`IN_PLACE`](super::IN_PLACE): each rank's block is already in place in `recv`.
        allgatherv, iallgatherv, allgatherv_init ("Allgatherv", "allgatherv")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, recv: &'b mut [T], counts: &[usize], displs: &[usize])
            => allgather_call(send.into(), recv, Some((counts, displs)))
    }
}
