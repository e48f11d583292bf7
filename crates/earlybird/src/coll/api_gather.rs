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

use super::api::{collective, first_elem, Call, CallBufs};
use super::buffers::{place, Dst, DstOrInPlace, Side, Src};
use super::{check_len, check_root, Args, Coll};
use crate::comm::Comm;
use crate::error::{Error, ErrorClass, Result};
use std::rc::Rc;

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

/// A v form's counts and displacements, given in elements of `buf`, as the call counts.
pub(super) fn scaled_v(buf: &Side, (c, d): (&[usize], &[usize])) -> Result<Blocks> {
    Ok((buf.scaled(c)?, buf.scaled(d)?))
}

impl Comm {
    /// Gather and gatherv (`v`: the root's counts and displacements).
    fn gather_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        recv: Dst<'b>,
        v: V<'_>,
        root: i32,
    ) -> Call<'b> {
        if self.is_inter() {
            return self.inter_gather_call(what, send, recv, v, root);
        }
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            check_root(what, root, self.size)?;
            let at_root = self.rank == root;
            let (mut send, mut recv) = (send.0, at_root.then_some(recv.0));
            place(what, send.as_mut(), recv.as_mut())?;
            let coll = if v.is_some() {
                Coll::Gatherv
            } else {
                Coll::Gather
            };
            let mut a = Args::new(coll, self.rank, self.size, first_elem(&send, &recv));
            a.root = root;
            if send.is_none() && !at_root {
                return Err(in_place_only_at_root(what));
            }
            let slen = send.as_ref().map(|s| s.len());
            match (recv.as_mut(), v) {
                (None, _) => a.count = slen.unwrap_or(0),
                (Some(recv), Some(cd)) => {
                    let (c, d) = scaled_v(recv, cd)?;
                    let (c, d) = check_v(what, "receive", (&c, &d), self.size, recv.len(), false)?;
                    a.count = c[root as usize];
                    if let Some(n) = slen {
                        check_own(what, n, root, a.count)?;
                    }
                    a.rcounts = Some(c);
                    a.rdispls = Some(d);
                    a.lend_recv(calls, recv);
                }
                (Some(recv), None) => {
                    a.count = match slen {
                        Some(n) => n,
                        None => per_rank(what, "receive", recv.len(), self.size)?,
                    };
                    recv.check_whole(what, "receive", a.count)?;
                    let need = total(what, a.count, self.size)?;
                    check_len(what, "the receive buffer", recv.len(), need)?;
                    a.lend_recv_first(calls, recv, need);
                }
            }
            a.bytes = a.count * a.elem.packed_size();
            a.lend_send(calls, send.as_mut());
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    collective! {
        /// MPI_Gather: every rank's `send` to block `i` (of `send.len()` elements) of `recv` at
        /// `root`; `recv` may be empty elsewhere. `send` may be [`IN_PLACE`](super::IN_PLACE) at
        /// the root, whose block is then already in `recv` (and `recv.len()` must be a multiple of
        /// the size). Either may be a typed view (see [`Typed`](crate::Typed)); the two may then
        /// differ in datatype with the same type signature.
        gather, igather, gather_init ("Gather", "gather")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>, root: i32)
            => gather_call(send.into(), recv.into(), None, root)
    }

    collective! {
        /// MPI_Gatherv: rank `i`'s `send` to `recv[displs[i]..][..counts[i]]` at `root` (counts,
        /// displacements and `recv` matter only at the root; the blocks must not overlap). `send`
        /// may be [`IN_PLACE`](super::IN_PLACE) at the root.
        gatherv, igatherv, gatherv_init ("Gatherv", "gatherv")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>, counts: &[usize], displs: &[usize], root: i32)
            => gather_call(send.into(), recv.into(), Some((counts, displs)), root)
    }

    /// Scatter and scatterv (`v`: the root's counts and displacements). At the root an empty
    /// receive buffer in `Args` means in place (with a count of 0 there is nothing to copy
    /// either way).
    fn scatter_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        recv: DstOrInPlace<'b>,
        v: V<'_>,
        root: i32,
    ) -> Call<'b> {
        if self.is_inter() {
            return self.inter_scatter_call(what, send, recv, v, root);
        }
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            check_root(what, root, self.size)?;
            let at_root = self.rank == root;
            let Some(send) = send.0 else {
                return Err(Error::new(
                    ErrorClass::Buffer,
                    format!("{what}: MPI_IN_PLACE goes in the root's receive argument, not the send argument"),
                ));
            };
            if recv.0.is_none() && !at_root {
                return Err(in_place_only_at_root(what));
            }
            let (mut send, mut recv) = (at_root.then_some(send), recv.0);
            place(what, send.as_mut(), recv.as_mut())?;
            let coll = if v.is_some() {
                Coll::Scatterv
            } else {
                Coll::Scatter
            };
            let mut a = Args::new(coll, self.rank, self.size, first_elem(&send, &recv));
            a.root = root;
            let Some(mut send) = send else {
                let mut r = recv.expect("a receive buffer off the root");
                a.count = r.len();
                a.bytes = a.count * r.elem.packed_size();
                a.lend_recv(calls, &mut r);
                return Ok(a);
            };
            let slen = send.len();
            match v {
                Some(cd) => {
                    let (c, d) = scaled_v(&send, cd)?;
                    let (c, d) = check_v(what, "send", (&c, &d), self.size, slen, true)?;
                    a.count = c[root as usize];
                    a.scounts = Some(c);
                    a.sdispls = Some(d);
                }
                None => {
                    a.count = match &recv {
                        Some(r) => r.len(),
                        None => per_rank(what, "send", slen, self.size)?,
                    };
                    send.check_whole(what, "send", a.count)?;
                    check_len(
                        what,
                        "the send buffer",
                        slen,
                        total(what, a.count, self.size)?,
                    )?;
                }
            }
            a.bytes = a.count * send.elem.packed_size();
            a.lend_send(calls, Some(&mut send));
            if let Some(mut r) = recv {
                check_len(what, "the receive buffer", r.len(), a.count)?;
                a.lend_recv_first(calls, &mut r, a.count);
            }
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
            <> (send: impl Into<Src<'b>>, recv: impl Into<DstOrInPlace<'b>>, root: i32)
            => scatter_call(send.into(), recv.into(), None, root)
    }

    collective! {
        /// MPI_Scatterv: `send[displs[i]..][..counts[i]]` at `root` to rank `i`'s `recv` (counts,
        /// displacements and `send` matter only at the root; blocks may overlap, as they are only
        /// read). At the root `recv` may be [`IN_PLACE`](super::IN_PLACE).
        scatterv, iscatterv, scatterv_init ("Scatterv", "scatterv")
            <> (send: impl Into<Src<'b>>, counts: &[usize], displs: &[usize], recv: impl Into<DstOrInPlace<'b>>, root: i32)
            => scatter_call(send.into(), recv.into(), Some((counts, displs)), root)
    }

    /// Allgather and allgatherv (`v`: every rank's counts and displacements).
    fn allgather_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        recv: Dst<'b>,
        v: V<'_>,
    ) -> Call<'b> {
        if self.is_inter() {
            return self.inter_allgather_call(what, send, recv, v);
        }
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let (mut send, mut recv) = (send.0, recv.0);
            place(what, send.as_mut(), Some(&mut recv))?;
            let coll = if v.is_some() {
                Coll::Allgatherv
            } else {
                Coll::Allgather
            };
            let mut a = Args::new(coll, self.rank, self.size, recv.elem.clone());
            let slen = send.as_ref().map(|s| s.len());
            let psize = recv.elem.packed_size();
            match v {
                Some(cd) => {
                    let (c, d) = scaled_v(&recv, cd)?;
                    let (c, d) = check_v(what, "receive", (&c, &d), self.size, recv.len(), false)?;
                    a.count = c[self.rank as usize];
                    if let Some(n) = slen {
                        check_own(what, n, self.rank, a.count)?;
                    }
                    // The same on every rank, so every rank makes the same choice.
                    a.bytes = c.iter().sum::<usize>() / self.size as usize * psize;
                    a.rcounts = Some(c);
                    a.rdispls = Some(d);
                    a.lend_recv(calls, &mut recv);
                }
                None => {
                    a.count = match slen {
                        Some(n) => n,
                        None => per_rank(what, "receive", recv.len(), self.size)?,
                    };
                    recv.check_whole(what, "receive", a.count)?;
                    let need = total(what, a.count, self.size)?;
                    check_len(what, "the receive buffer", recv.len(), need)?;
                    a.bytes = a.count * psize;
                    a.lend_recv_first(calls, &mut recv, need);
                }
            }
            a.lend_send(calls, send.as_mut());
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    collective! {
        /// MPI_Allgather: every rank's `send` to block `i` (of `send.len()` elements) of every
        /// rank's `recv`. `send` may be [`IN_PLACE`](super::IN_PLACE): each rank's block is
        /// already in its `recv` (whose length must then be a multiple of the size).
        allgather, iallgather, allgather_init ("Allgather", "allgather")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>)
            => allgather_call(send.into(), recv.into(), None)
    }

    collective! {
        /// MPI_Allgatherv: rank `i`'s `send` (of `counts[i]` elements) to
        /// `recv[displs[i]..][..counts[i]]` on every rank (the blocks must not overlap). `send`
        /// may be [`IN_PLACE`](super::IN_PLACE): each rank's block is already in place in `recv`.
        allgatherv, iallgatherv, allgatherv_init ("Allgatherv", "allgatherv")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>, counts: &[usize], displs: &[usize])
            => allgather_call(send.into(), recv.into(), Some((counts, displs)))
    }
}
