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

use super::api::{Call, InPlace, Src};
use super::{check_len, check_root, Args, Coll, Elem};
use crate::comm::Comm;
use crate::datatype::Equivalence;
use crate::error::{Error, ErrorClass, Result};
use crate::request::{Request, Scope};
use crate::sys::lend::Lent;
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
    fn gather_call<T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'_, T>,
        recv: &mut [T],
        v: V<'_>,
        root: i32,
    ) -> Call {
        let mut writable = false;
        let args = (|| {
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
                    a.recv = Lent::of_elems_mut(recv);
                }
                (true, None) => {
                    a.count = match send.len() {
                        Some(n) => n,
                        None => per_rank(what, "receive", recv.len(), self.size)?,
                    };
                    let need = total(what, a.count, self.size)?;
                    check_len(what, "the receive buffer", recv.len(), need)?;
                    a.recv = Lent::of_elems_mut(&mut recv[..need]);
                }
            }
            a.bytes = a.count * std::mem::size_of::<T>();
            let (sb, w) = send.lend();
            writable = w;
            a.send = sb;
            Ok(a)
        })();
        Call::plain(what, args, writable)
    }

    /// MPI_Gather: every rank's `send` to block `i` (of `send.len()` elements) of `recv` at
    /// `root`; `recv` may be empty elsewhere. `send` may be [`IN_PLACE`](super::IN_PLACE) at
    /// the root, whose block is then already in `recv` (and `recv.len()` must be a multiple of
    /// the size).
    pub fn gather<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
        root: i32,
    ) -> Result<()> {
        self.blocking(self.gather_call("gather", send.into(), recv, None, root))
    }

    /// MPI_Igather.
    pub fn igather<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        root: i32,
    ) -> Result<Request<'s>> {
        self.started(
            self.gather_call("igather", send.into(), recv, None, root),
            s,
        )
    }

    /// MPI_Gather_init.
    pub fn gather_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        root: i32,
    ) -> Result<Request<'s>> {
        self.inactive(
            self.gather_call("gather_init", send.into(), recv, None, root),
            s,
        )
    }

    /// MPI_Gatherv: rank `i`'s `send` to `recv[displs[i]..][..counts[i]]` at `root` (counts,
    /// displacements and `recv` matter only at the root; the blocks must not overlap). `send`
    /// may be [`IN_PLACE`](super::IN_PLACE) at the root.
    pub fn gatherv<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
        root: i32,
    ) -> Result<()> {
        self.blocking(self.gather_call("gatherv", send.into(), recv, Some((counts, displs)), root))
    }

    /// MPI_Igatherv.
    pub fn igatherv<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        counts: &[usize],
        displs: &[usize],
        root: i32,
    ) -> Result<Request<'s>> {
        self.started(
            self.gather_call("igatherv", send.into(), recv, Some((counts, displs)), root),
            s,
        )
    }

    /// MPI_Gatherv_init.
    pub fn gatherv_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        counts: &[usize],
        displs: &[usize],
        root: i32,
    ) -> Result<Request<'s>> {
        self.inactive(
            self.gather_call(
                "gatherv_init",
                send.into(),
                recv,
                Some((counts, displs)),
                root,
            ),
            s,
        )
    }

    /// Scatter and scatterv (`v`: the root's counts and displacements). At the root an empty
    /// receive buffer in `Args` means in place (with a count of 0 there is nothing to copy
    /// either way).
    fn scatter_call<T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'_, T>,
        recv: Dst<'_, T>,
        v: V<'_>,
        root: i32,
    ) -> Call {
        let mut writable = false;
        let args = (|| {
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
                a.recv = Lent::of_elems_mut(r);
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
                a.recv = Lent::of_elems_mut(&mut r[..a.count]);
            }
            a.bytes = a.count * std::mem::size_of::<T>();
            let (sb, w) = send.lend();
            writable = w;
            a.send = sb;
            Ok(a)
        })();
        Call::plain(what, args, writable)
    }

    /// MPI_Scatter: block `i` (of `recv.len()` elements) of `send` at `root` to rank `i`'s
    /// `recv`; `send` may be empty off the root. At the root `recv` may be
    /// [`IN_PLACE`](super::IN_PLACE): its block stays in `send` (whose length must then be a
    /// multiple of the size).
    pub fn scatter<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: impl Into<Dst<'a, T>>,
        root: i32,
    ) -> Result<()> {
        self.blocking(self.scatter_call("scatter", send.into(), recv.into(), None, root))
    }

    /// MPI_Iscatter.
    pub fn iscatter<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: impl Into<Dst<'s, T>>,
        root: i32,
    ) -> Result<Request<'s>> {
        self.started(
            self.scatter_call("iscatter", send.into(), recv.into(), None, root),
            s,
        )
    }

    /// MPI_Scatter_init. The root lends `send` as `&mut` to change it between starts
    /// ([`Request::send_buffer_mut`]).
    pub fn scatter_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: impl Into<Dst<'s, T>>,
        root: i32,
    ) -> Result<Request<'s>> {
        self.inactive(
            self.scatter_call("scatter_init", send.into(), recv.into(), None, root),
            s,
        )
    }

    /// MPI_Scatterv: `send[displs[i]..][..counts[i]]` at `root` to rank `i`'s `recv` (counts,
    /// displacements and `send` matter only at the root; blocks may overlap, as they are only
    /// read). At the root `recv` may be [`IN_PLACE`](super::IN_PLACE).
    pub fn scatterv<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        counts: &[usize],
        displs: &[usize],
        recv: impl Into<Dst<'a, T>>,
        root: i32,
    ) -> Result<()> {
        self.blocking(self.scatter_call(
            "scatterv",
            send.into(),
            recv.into(),
            Some((counts, displs)),
            root,
        ))
    }

    /// MPI_Iscatterv.
    pub fn iscatterv<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        counts: &[usize],
        displs: &[usize],
        recv: impl Into<Dst<'s, T>>,
        root: i32,
    ) -> Result<Request<'s>> {
        self.started(
            self.scatter_call(
                "iscatterv",
                send.into(),
                recv.into(),
                Some((counts, displs)),
                root,
            ),
            s,
        )
    }

    /// MPI_Scatterv_init.
    pub fn scatterv_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        counts: &[usize],
        displs: &[usize],
        recv: impl Into<Dst<'s, T>>,
        root: i32,
    ) -> Result<Request<'s>> {
        self.inactive(
            self.scatter_call(
                "scatterv_init",
                send.into(),
                recv.into(),
                Some((counts, displs)),
                root,
            ),
            s,
        )
    }

    /// Allgather and allgatherv (`v`: every rank's counts and displacements).
    fn allgather_call<T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'_, T>,
        recv: &mut [T],
        v: V<'_>,
    ) -> Call {
        let mut writable = false;
        let args = (|| {
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
                    a.recv = Lent::of_elems_mut(recv);
                }
                None => {
                    a.count = match send.len() {
                        Some(n) => n,
                        None => per_rank(what, "receive", recv.len(), self.size)?,
                    };
                    let need = total(what, a.count, self.size)?;
                    check_len(what, "the receive buffer", recv.len(), need)?;
                    a.bytes = a.count * std::mem::size_of::<T>();
                    a.recv = Lent::of_elems_mut(&mut recv[..need]);
                }
            }
            let (sb, w) = send.lend();
            writable = w;
            a.send = sb;
            Ok(a)
        })();
        Call::plain(what, args, writable)
    }

    /// MPI_Allgather: every rank's `send` to block `i` (of `send.len()` elements) of every
    /// rank's `recv`. `send` may be [`IN_PLACE`](super::IN_PLACE): each rank's block is
    /// already in its `recv` (whose length must then be a multiple of the size).
    pub fn allgather<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
    ) -> Result<()> {
        self.blocking(self.allgather_call("allgather", send.into(), recv, None))
    }

    /// MPI_Iallgather.
    pub fn iallgather<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
    ) -> Result<Request<'s>> {
        self.started(
            self.allgather_call("iallgather", send.into(), recv, None),
            s,
        )
    }

    /// MPI_Allgather_init.
    pub fn allgather_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
    ) -> Result<Request<'s>> {
        self.inactive(
            self.allgather_call("allgather_init", send.into(), recv, None),
            s,
        )
    }

    /// MPI_Allgatherv: rank `i`'s `send` (of `counts[i]` elements) to
    /// `recv[displs[i]..][..counts[i]]` on every rank (the blocks must not overlap). `send`
    /// may be [`IN_PLACE`](super::IN_PLACE): each rank's block is already in place in `recv`.
    pub fn allgatherv<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        self.blocking(self.allgather_call("allgatherv", send.into(), recv, Some((counts, displs))))
    }

    /// MPI_Iallgatherv.
    pub fn iallgatherv<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<Request<'s>> {
        self.started(
            self.allgather_call("iallgatherv", send.into(), recv, Some((counts, displs))),
            s,
        )
    }

    /// MPI_Allgatherv_init.
    pub fn allgatherv_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<Request<'s>> {
        self.inactive(
            self.allgather_call("allgatherv_init", send.into(), recv, Some((counts, displs))),
            s,
        )
    }
}
