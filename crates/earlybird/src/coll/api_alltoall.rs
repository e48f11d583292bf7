//! The all-to-all collectives on [`Comm`]: alltoall, alltoallv and alltoallw, each blocking,
//! nonblocking (`i*`) and persistent (`*_init`).
//!
//! Counts and displacements of alltoall and alltoallv are in elements of the slices; those of
//! alltoallw are (count, byte displacement, datatype) per rank, as MPI_Alltoallw takes them.
//! [`IN_PLACE`](super::IN_PLACE) as the send argument takes every outgoing block from the
//! receive buffer (at the receive counts and displacements) and replaces it with what
//! arrives (MPI 4.1 §6.8).
#![forbid(unsafe_code)]

use super::api::{collective, Call, CallBufs, Src};
use super::sched::Block;
use super::{check_len, Args, Coll, Elem};
use crate::comm::Comm;
use crate::datatype::{Datatype, Equivalence};
use crate::error::{Error, ErrorClass, Result};
use crate::sys::layout::Layout;
use crate::sys::overlap::first_overlap;
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

/// The receive blocks of a w form: `n` specs, each a layout inside `recv` (lent here), no
/// two sharing a byte (MPI calls such buffers aliased: MPI_ERR_BUFFER); and the whole
/// receive buffer.
pub(super) fn w_recv_blocks<'b, T: Equivalence>(
    what: &str,
    rspecs: &[WSpec],
    n: usize,
    calls: &mut CallBufs<'b>,
    recv: &'b mut [T],
) -> Result<(Block, Vec<Block>)> {
    wspecs_len(what, "receive", rspecs, n)?;
    let rlen = std::mem::size_of_val(recv);
    let mut layouts = Vec::with_capacity(n);
    for (i, spec) in rspecs.iter().enumerate() {
        layouts.push(wlayout::<T>(what, "receive", i, spec, rlen)?);
    }
    let mut pieces = Vec::new();
    for (i, l) in layouts.iter().enumerate() {
        l.pieces(usize::MAX, |b, _, len| pieces.push((b, b + len, i)));
    }
    if let Some(o) = first_overlap(&mut pieces, &vec![true; n]) {
        return Err(Error::new(
            ErrorClass::Buffer,
            format!(
                "{what}: receive blocks {} and {} overlap at byte {}",
                o.a.min(o.b),
                o.a.max(o.b),
                o.byte
            ),
        ));
    }
    let whole = calls.recv(recv);
    let blocks = layouts
        .into_iter()
        .zip(rspecs)
        .map(|(l, spec)| whole.sub(0, rlen, Some(l)).with_sig(spec.2.sig_code()))
        .collect();
    Ok((whole, blocks))
}

/// The send blocks of a w form: `n` specs, each a layout inside the send buffer `whole` of
/// `slen` bytes.
pub(super) fn w_send_blocks<T: Equivalence>(
    what: &str,
    sspecs: &[WSpec],
    n: usize,
    whole: &Block,
    slen: usize,
) -> Result<Vec<Block>> {
    wspecs_len(what, "send", sspecs, n)?;
    let mut v = Vec::with_capacity(n);
    for (i, spec) in sspecs.iter().enumerate() {
        let l = wlayout::<T>(what, "send", i, spec, slen)?;
        v.push(whole.sub(0, slen, Some(l)).with_sig(spec.2.sig_code()));
    }
    Ok(v)
}

impl Comm {
    fn alltoall_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        recv: &'b mut [T],
    ) -> Call<'b> {
        if self.is_inter() {
            return self.inter_alltoall_call(what, send, recv);
        }
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let recv = recv;
            let send = send;
            let n = self.size as usize;
            let count = match send.len() {
                Some(l) => per_block(what, "the send buffer", l, n)?,
                None => per_block(what, "the receive buffer", recv.len(), n)?,
            };
            check_len(what, "the receive buffer", recv.len(), n * count)?;
            let mut a = Args::new(Coll::Alltoall, self.rank, self.size, Elem::of::<T>()?);
            a.count = count;
            a.bytes = count * std::mem::size_of::<T>();
            a.send = calls.send(send);
            a.recv = calls.recv(&mut recv[..n * count]);
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    collective! {
        /// MPI_Alltoall: block `j` of every rank's `send` goes to rank `j`, which puts the block
        /// from rank `i` at block `i` of `recv`. `send` holds `size` equal blocks; `recv` as many
        /// of the same length. `send` may be [`IN_PLACE`](super::IN_PLACE).
        alltoall, ialltoall, alltoall_init ("Alltoall", "alltoall")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, recv: &'b mut [T])
            => alltoall_call(send.into(), recv)
    }

    /// The arguments of a v-form exchange with `n` peers (alltoallv, the neighbourhood v
    /// forms): counts and displacements checked and kept. In place, the send side is the
    /// receive side.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn v_args<'b, T: Equivalence>(
        &self,
        what: &'static str,
        coll: Coll,
        n: usize,
        bufs: &mut CallBufs<'b>,
        send: Src<'b, T>,
        sends: Option<(&[usize], &[usize])>,
        recv: &'b mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Args> {
        check_blocks(what, "receive", rcounts, rdispls, n, recv.len(), true)?;
        let mut a = Args::new(coll, self.rank, self.size, Elem::of::<T>()?);
        if coll == Coll::Alltoallv {
            self.check_inter_in_place(what, send.len().is_none())?;
            a.remote = self.remote_if_inter();
        }
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
        a.send = bufs.send(send);
        a.recv = bufs.recv(recv);
        Ok(a)
    }

    #[allow(clippy::too_many_arguments)]
    fn alltoallv_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        scounts: &[usize],
        sdispls: &[usize],
        recv: &'b mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Call<'b> {
        let n = self.peers() as usize;
        let mut bufs = CallBufs::default();
        let r = self.v_args(
            what,
            Coll::Alltoallv,
            n,
            &mut bufs,
            send,
            Some((scounts, sdispls)),
            recv,
            rcounts,
            rdispls,
        );
        Call::plain(what, r, bufs)
    }

    collective! {
        /// MPI_Alltoallv: `scounts[j]` elements at `sdispls[j]` of `send` go to rank `j`, which
        /// puts the `rcounts[i]` elements from rank `i` at `rdispls[i]` of `recv` (counts and
        /// displacements in elements, one entry per rank; receive blocks may not overlap). `send`
        /// may be [`IN_PLACE`](super::IN_PLACE) (then `scounts` and `sdispls` are ignored).
        alltoallv, ialltoallv, alltoallv_init ("Alltoallv", "alltoallv")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, scounts: &[usize], sdispls: &[usize], recv: &'b mut [T], rcounts: &[usize], rdispls: &[usize])
            => alltoallv_call(send.into(), scounts, sdispls, recv, rcounts, rdispls)
    }

    fn alltoallw_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        sspecs: &[WSpec],
        recv: &'b mut [T],
        rspecs: &[WSpec],
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let r = (move || {
            let recv = recv;
            let send = send;
            self.check_inter_in_place(what, send.len().is_none())?;
            let n = self.peers() as usize;
            let (whole_recv, rblocks) = w_recv_blocks(what, rspecs, n, calls, recv)?;
            let whole_send = calls.send(send);
            let sblocks: Vec<Block> = match &whole_send {
                Some(whole) => w_send_blocks::<T>(what, sspecs, n, whole, calls.send_len())?,
                None => rblocks.clone(),
            };
            let mut a = Args::new(Coll::Alltoallw, self.rank, self.size, Elem::of::<T>()?);
            a.remote = self.remote_if_inter();
            a.bytes = rblocks.iter().map(|b| b.packed_len()).sum::<usize>() / n;
            a.wblocks = Some(sblocks.into_iter().zip(rblocks).collect());
            a.send = whole_send;
            a.recv = whole_recv;
            Ok(a)
        })();
        Call::plain(what, r, bufs)
    }

    collective! {
        /// MPI_Alltoallw: per rank `j`, `sspecs[j]` = (count, byte displacement, datatype) of the
        /// block of `send` that goes to rank `j`, and `rspecs[i]` that of the block of `recv` the
        /// data from rank `i` lands in. Every datatype must be committed and its elements lie
        /// within the slice; receive blocks may not overlap. `send` may be
        /// [`IN_PLACE`](super::IN_PLACE) (then `sspecs` is ignored and may be empty).
        alltoallw, ialltoallw, alltoallw_init ("Alltoallw", "alltoallw")
            <T: Equivalence> (send: impl Into<Src<'b, T>>, sspecs: &[WSpec], recv: &'b mut [T], rspecs: &[WSpec])
            => alltoallw_call(send.into(), sspecs, recv, rspecs)
    }
}
