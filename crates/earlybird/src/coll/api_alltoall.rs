//! The all-to-all collectives on [`Comm`]: alltoall, alltoallv and alltoallw, each blocking,
//! nonblocking (`i*`) and persistent (`*_init`).
//!
//! Counts and displacements of alltoall and alltoallv are in elements of the slices; those of
//! alltoallw are (count, byte displacement, datatype) per rank, as MPI_Alltoallw takes them.
//! [`IN_PLACE`](super::IN_PLACE) as the send argument takes every outgoing block from the
//! receive buffer (at the receive counts and displacements) and replaces it with what
//! arrives (MPI 4.1 §6.8).
#![forbid(unsafe_code)]

use super::api::{Call, Src};
use super::{check_len, Args, Coll, Elem};
use crate::comm::Comm;
use crate::datatype::{Datatype, Equivalence};
use crate::error::{Error, ErrorClass, Result};
use crate::request::{Request, Scope};
use crate::sys::layout::Layout;
use crate::sys::lend::{Lent, Part};
use std::rc::Rc;

/// One rank's block of an alltoallw buffer: `(count, byte displacement, datatype)`, the
/// datatype's displacement 0 at that byte of the slice.
pub type WSpec<'d> = (usize, usize, &'d Datatype);

/// The counts and displacements of a v-form buffer: `n` entries each, every block within the
/// buffer of `len` elements (`MPI_ERR_ARG` for a wrong number of entries, `MPI_ERR_COUNT`
/// naming the block that leaves the buffer). Receive blocks (`written`) may not overlap
/// (`MPI_ERR_BUFFER` naming the two). Returns the elements the blocks reach.
pub(super) fn check_blocks(
    what: &str,
    which: &str,
    counts: &[usize],
    displs: &[usize],
    n: usize,
    len: usize,
    written: bool,
) -> Result<()> {
    for (name, v) in [("counts", counts), ("displacements", displs)] {
        if v.len() != n {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("{what}: {which} {name} has {} entries, {n} needed", v.len()),
            ));
        }
    }
    let mut spans = Vec::with_capacity(n);
    for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        match d.checked_add(c) {
            Some(end) if end <= len => {
                if c > 0 {
                    spans.push((d, end, i));
                }
            }
            _ => {
                return Err(Error::new(
                    ErrorClass::Count,
                    format!(
                        "{what}: {which} block {i} ({c} elements at displacement {d}) leaves the {which} buffer of {len} elements"
                    ),
                ))
            }
        }
    }
    if written {
        spans.sort_unstable();
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 {
                return Err(Error::new(
                    ErrorClass::Buffer,
                    format!(
                        "{what}: {which} blocks {} and {} overlap at element {}",
                        w[0].2.min(w[1].2),
                        w[0].2.max(w[1].2),
                        w[1].0
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `MPI_ERR_COUNT` unless a buffer of `len` elements holds `n` equal blocks.
pub(super) fn per_block(what: &str, which: &str, len: usize, n: usize) -> Result<usize> {
    if n == 0 {
        return Ok(0);
    }
    if !len.is_multiple_of(n) {
        return Err(Error::new(
            ErrorClass::Count,
            format!("{what}: {which} holds {len} elements, not a multiple of the {n} blocks"),
        ));
    }
    Ok(len / n)
}

/// The layout of alltoallw block `i` (`count` elements of `dt` at byte `disp`) over a buffer
/// of `len` bytes of `T`: the datatype committed, the block inside the buffer, and for a
/// type with padding its own datatype; errors name the block.
fn wlayout<T: Equivalence>(
    what: &str,
    which: &str,
    i: usize,
    spec: &WSpec,
    len: usize,
) -> Result<Layout> {
    let (count, disp, dt) = *spec;
    let name = format!("{what}: {which} block {i}");
    dt.check_committed(&name)?;
    if !T::GAPLESS && !dt.same_map(&T::datatype()) {
        return Err(Error::new(
            ErrorClass::Buffer,
            format!(
                "{name}: {} has padding; only its own datatype may view it",
                std::any::type_name::<T>()
            ),
        ));
    }
    dt.layout(count, disp, len)
        .map_err(|e| Error::new(e.class(), format!("{name}: {}", e.detail())))
}

fn wspecs_len(what: &str, which: &str, specs: &[WSpec], n: usize) -> Result<()> {
    if specs.len() == n {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::Arg,
        format!(
            "{what}: {} {which} blocks given, {n} needed (one per rank)",
            specs.len()
        ),
    ))
}

impl Comm {
    fn alltoall_call<T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'_, T>,
        recv: &mut [T],
    ) -> Call {
        let mut writable = false;
        let args = (|| {
            let n = self.size as usize;
            let count = match send.len() {
                Some(l) => per_block(what, "the send buffer", l, n)?,
                None => per_block(what, "the receive buffer", recv.len(), n)?,
            };
            check_len(what, "the receive buffer", recv.len(), n * count)?;
            let mut a = Args::new(Coll::Alltoall, self.rank, self.size, Elem::of::<T>()?);
            a.count = count;
            a.bytes = count * std::mem::size_of::<T>();
            let (sb, w) = send.lend();
            writable = w;
            a.send = sb;
            a.recv = Lent::of_elems_mut(&mut recv[..n * count]);
            Ok(a)
        })();
        Call::plain(what, args, writable)
    }

    /// MPI_Alltoall: block `j` of every rank's `send` goes to rank `j`, which puts the block
    /// from rank `i` at block `i` of `recv`. `send` holds `size` equal blocks; `recv` as many
    /// of the same length. `send` may be [`IN_PLACE`](super::IN_PLACE).
    pub fn alltoall<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
    ) -> Result<()> {
        self.blocking(self.alltoall_call("alltoall", send.into(), recv))
    }

    /// MPI_Ialltoall.
    pub fn ialltoall<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
    ) -> Result<Request<'s>> {
        self.started(self.alltoall_call("ialltoall", send.into(), recv), s)
    }

    /// MPI_Alltoall_init.
    pub fn alltoall_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
    ) -> Result<Request<'s>> {
        self.inactive(self.alltoall_call("alltoall_init", send.into(), recv), s)
    }

    /// The arguments of a v-form exchange with `n` peers (alltoallv, the neighbourhood v
    /// forms): counts and displacements checked and kept. In place, the send side is the
    /// receive side.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn v_args<T: Equivalence>(
        &self,
        what: &'static str,
        coll: Coll,
        n: usize,
        send: Src<'_, T>,
        sends: Option<(&[usize], &[usize])>,
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<(Args, bool)> {
        check_blocks(what, "receive", rcounts, rdispls, n, recv.len(), true)?;
        let mut a = Args::new(coll, self.rank, self.size, Elem::of::<T>()?);
        a.rcounts = Some(Rc::from(rcounts));
        a.rdispls = Some(Rc::from(rdispls));
        match (send.len(), sends) {
            (Some(len), Some((sc, sd))) => {
                check_blocks(what, "send", sc, sd, n, len, false)?;
                a.scounts = Some(Rc::from(sc));
                a.sdispls = Some(Rc::from(sd));
            }
            (Some(len), None) => a.count = len,
            (None, _) => {
                a.scounts = a.rcounts.clone();
                a.sdispls = a.rdispls.clone();
            }
        }
        let total: usize = rcounts.iter().sum();
        a.bytes = total * std::mem::size_of::<T>() / n.max(1);
        let (sb, w) = send.lend();
        a.send = sb;
        a.recv = Lent::of_elems_mut(recv);
        Ok((a, w))
    }

    #[allow(clippy::too_many_arguments)]
    fn alltoallv_call<T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'_, T>,
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Call {
        let n = self.size as usize;
        let r = self.v_args(
            what,
            Coll::Alltoallv,
            n,
            send,
            Some((scounts, sdispls)),
            recv,
            rcounts,
            rdispls,
        );
        call_of(what, r)
    }

    /// MPI_Alltoallv: `scounts[j]` elements at `sdispls[j]` of `send` go to rank `j`, which
    /// puts the `rcounts[i]` elements from rank `i` at `rdispls[i]` of `recv` (counts and
    /// displacements in elements, one entry per rank; receive blocks may not overlap). `send`
    /// may be [`IN_PLACE`](super::IN_PLACE) (then `scounts` and `sdispls` are ignored).
    pub fn alltoallv<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<()> {
        self.blocking(self.alltoallv_call(
            "alltoallv",
            send.into(),
            scounts,
            sdispls,
            recv,
            rcounts,
            rdispls,
        ))
    }

    /// MPI_Ialltoallv.
    #[allow(clippy::too_many_arguments)]
    pub fn ialltoallv<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        scounts: &[usize],
        sdispls: &[usize],
        recv: &'s mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Request<'s>> {
        self.started(
            self.alltoallv_call(
                "ialltoallv",
                send.into(),
                scounts,
                sdispls,
                recv,
                rcounts,
                rdispls,
            ),
            s,
        )
    }

    /// MPI_Alltoallv_init.
    #[allow(clippy::too_many_arguments)]
    pub fn alltoallv_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        scounts: &[usize],
        sdispls: &[usize],
        recv: &'s mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Request<'s>> {
        self.inactive(
            self.alltoallv_call(
                "alltoallv_init",
                send.into(),
                scounts,
                sdispls,
                recv,
                rcounts,
                rdispls,
            ),
            s,
        )
    }

    fn alltoallw_call<T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'_, T>,
        sspecs: &[WSpec],
        recv: &mut [T],
        rspecs: &[WSpec],
    ) -> Call {
        let r = (|| {
            let n = self.size as usize;
            wspecs_len(what, "receive", rspecs, n)?;
            let rlen = std::mem::size_of_val(recv);
            let mut parts = Vec::with_capacity(n);
            for (i, spec) in rspecs.iter().enumerate() {
                parts.push((
                    Part::Laid(wlayout::<T>(what, "receive", i, spec, rlen)?),
                    true,
                ));
            }
            let rblocks: Vec<Lent> = Lent::split(recv, parts)
                .map_err(|o| {
                    Error::new(
                        ErrorClass::Buffer,
                        format!(
                            "{what}: receive blocks {} and {} overlap at byte {}",
                            o.a.min(o.b),
                            o.a.max(o.b),
                            o.byte
                        ),
                    )
                })?
                .into_iter()
                .zip(rspecs)
                .map(|(l, spec)| l.with_sig(spec.2.sig_code()))
                .collect();
            let (sb, w) = send.lend();
            let sblocks: Vec<Lent> = match &sb {
                Some(whole) => {
                    wspecs_len(what, "send", sspecs, n)?;
                    let mut v = Vec::with_capacity(n);
                    for (i, spec) in sspecs.iter().enumerate() {
                        let l = wlayout::<T>(what, "send", i, spec, whole.len())?;
                        let b = whole.sub(0, whole.len(), Some(l)).map_err(|e| {
                            Error::new(ErrorClass::Buffer, format!("{what}: send block {i}: {e}"))
                        })?;
                        v.push(b.with_sig(spec.2.sig_code()));
                    }
                    v
                }
                None => rblocks.clone(),
            };
            let mut a = Args::new(Coll::Alltoallw, self.rank, self.size, Elem::of::<T>()?);
            a.bytes = rblocks.iter().map(|b| b.packed_len()).sum::<usize>() / n;
            a.wblocks = Some(sblocks.into_iter().zip(rblocks).collect());
            a.send = sb;
            a.recv = Lent::of_elems_mut(recv);
            Ok((a, w))
        })();
        call_of(what, r)
    }

    /// MPI_Alltoallw: per rank `j`, `sspecs[j]` = (count, byte displacement, datatype) of the
    /// block of `send` that goes to rank `j`, and `rspecs[i]` that of the block of `recv` the
    /// data from rank `i` lands in. Every datatype must be committed and its elements lie
    /// within the slice; receive blocks may not overlap. `send` may be
    /// [`IN_PLACE`](super::IN_PLACE) (then `sspecs` is ignored and may be empty).
    pub fn alltoallw<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        sspecs: &[WSpec],
        recv: &mut [T],
        rspecs: &[WSpec],
    ) -> Result<()> {
        self.blocking(self.alltoallw_call("alltoallw", send.into(), sspecs, recv, rspecs))
    }

    /// MPI_Ialltoallw.
    pub fn ialltoallw<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        sspecs: &[WSpec],
        recv: &'s mut [T],
        rspecs: &[WSpec],
    ) -> Result<Request<'s>> {
        self.started(
            self.alltoallw_call("ialltoallw", send.into(), sspecs, recv, rspecs),
            s,
        )
    }

    /// MPI_Alltoallw_init.
    pub fn alltoallw_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        sspecs: &[WSpec],
        recv: &'s mut [T],
        rspecs: &[WSpec],
    ) -> Result<Request<'s>> {
        self.inactive(
            self.alltoallw_call("alltoallw_init", send.into(), sspecs, recv, rspecs),
            s,
        )
    }
}

/// A [`Call`] from checked arguments and whether the send buffer was lent writable.
pub(super) fn call_of(what: &'static str, r: Result<(Args, bool)>) -> Call {
    match r {
        Ok((a, w)) => Call::plain(what, Ok(a), w),
        Err(e) => Call::plain(what, Err(e), false),
    }
}
