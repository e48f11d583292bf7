//! The all-to-all collectives on [`Comm`]: alltoall, alltoallv and alltoallw, each blocking,
//! nonblocking (`i*`) and persistent (`*_init`).
//!
//! Counts and displacements of alltoall and alltoallv are in elements of the slices; those of
//! alltoallw are (count, byte displacement, datatype) per rank, as MPI_Alltoallw takes them.
//! [`IN_PLACE`](super::IN_PLACE) as the send argument takes every outgoing block from the
//! receive buffer (at the receive counts and displacements) and replaces it with what
//! arrives (MPI 4.1 §6.8).
#![forbid(unsafe_code)]

use super::api::{collective, Call, CallBufs};
use super::buffers::{place, Dst, Side, Src, Units};
use super::sched::Block;
use super::{check_len, Args, Coll, Elem};
use crate::comm::Comm;
use crate::datatype::Datatype;
use crate::error::{Error, ErrorClass, Result};
use crate::sys::layout::Layout;
use crate::sys::overlap::first_overlap;

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
/// of `len` bytes: the datatype committed, the block inside the buffer, and for a slice of a
/// type with padding (`own`, its datatype) that datatype only; errors name the block.
fn wlayout(
    what: &str,
    which: &str,
    i: usize,
    spec: &WSpec,
    len: usize,
    own: Option<&Datatype>,
) -> Result<Layout> {
    let (count, disp, dt) = *spec;
    let name = format!("{what}: {which} block {i}");
    dt.check_committed(&name)?;
    if let Some(own) = own {
        if !dt.same_map(own) {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("{name}: the slice's type has padding; only its own datatype may view it"),
            ));
        }
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
pub(super) fn w_recv_blocks<'b>(
    what: &str,
    rspecs: &[WSpec],
    n: usize,
    calls: &mut CallBufs<'b>,
    recv: Dst<'b>,
) -> Result<(Block, Vec<Block>)> {
    wspecs_len(what, "receive", rspecs, n)?;
    let mut recv = recv.0;
    recv.place(Units::Elements)?;
    let own = recv.w_slice(what)?;
    let rlen = recv.view.len();
    let mut layouts = Vec::with_capacity(n);
    for (i, spec) in rspecs.iter().enumerate() {
        layouts.push(wlayout(what, "receive", i, spec, rlen, own.as_ref())?);
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
    let whole = calls.recv(&mut recv);
    let blocks = layouts
        .into_iter()
        .zip(rspecs)
        .map(|(l, spec)| whole.sub(0, rlen, Some(l)).with_sig(spec.2.sig_code()))
        .collect();
    Ok((whole, blocks))
}

/// The send blocks of a w form: `n` specs, each a layout inside the send buffer, lent here
/// (with the buffer, whole).
pub(super) fn w_send_blocks<'b>(
    what: &str,
    sspecs: &[WSpec],
    n: usize,
    calls: &mut CallBufs<'b>,
    send: Side<'b>,
) -> Result<(Block, Vec<Block>)> {
    wspecs_len(what, "send", sspecs, n)?;
    let mut send = send;
    send.place(Units::Elements)?;
    let own = send.w_slice(what)?;
    let slen = send.view.len();
    let mut layouts = Vec::with_capacity(n);
    for (i, spec) in sspecs.iter().enumerate() {
        layouts.push(wlayout(what, "send", i, spec, slen, own.as_ref())?);
    }
    let whole = calls.send(&mut send);
    let v = layouts
        .into_iter()
        .zip(sspecs)
        .map(|(l, spec)| whole.sub(0, slen, Some(l)).with_sig(spec.2.sig_code()))
        .collect();
    Ok((whole, v))
}

impl Comm {
    fn alltoall_call<'b>(&self, what: &'static str, send: Src<'b>, recv: Dst<'b>) -> Call<'b> {
        if self.is_inter() {
            return self.inter_alltoall_call(what, send, recv);
        }
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let (mut send, mut recv) = (send.0, recv.0);
            place(what, send.as_mut(), Some(&mut recv))?;
            let n = self.size as usize;
            let count = match &send {
                Some(s) => per_block(what, "the send buffer", s.len(), n)?,
                None => per_block(what, "the receive buffer", recv.len(), n)?,
            };
            check_len(what, "the receive buffer", recv.len(), n * count)?;
            recv.check_whole(what, "receive", count)?;
            if let Some(s) = &send {
                s.check_whole(what, "send", count)?;
            }
            let mut a = Args::new(Coll::Alltoall, self.rank, self.size, recv.elem.clone());
            a.count = count;
            a.bytes = count * recv.elem.packed_size();
            a.lend_send(calls, send.as_mut());
            a.lend_recv_first(calls, &mut recv, n * count);
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    collective! {
        /// MPI_Alltoall: block `j` of every rank's `send` goes to rank `j`, which puts the block
        /// from rank `i` at block `i` of `recv`. `send` holds `size` equal blocks; `recv` as many
        /// of the same length. `send` may be [`IN_PLACE`](super::IN_PLACE).
        alltoall, ialltoall, alltoall_init ("Alltoall", "alltoall")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>)
            => alltoall_call(send.into(), recv.into())
    }

    /// The arguments of a v-form exchange with `n` peers (alltoallv, the neighbourhood v
    /// forms): counts and displacements checked and kept. In place, the send side is the
    /// receive side.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn v_args<'b>(
        &self,
        what: &'static str,
        coll: Coll,
        n: usize,
        bufs: &mut CallBufs<'b>,
        send: Src<'b>,
        sends: Option<(&[usize], &[usize])>,
        recv: Dst<'b>,
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Args> {
        if coll == Coll::Alltoallv {
            self.check_inter_in_place(what, send.0.is_none())?;
        }
        let (mut send, mut recv) = (send.0, recv.0);
        place(what, send.as_mut(), Some(&mut recv))?;
        let (rc, rd) = (recv.scaled(rcounts)?, recv.scaled(rdispls)?);
        check_blocks(what, "receive", &rc, &rd, n, recv.len(), true)?;
        let mut a = Args::new(coll, self.rank, self.size, recv.elem.clone());
        if coll == Coll::Alltoallv {
            a.remote = self.remote_if_inter();
        }
        match (&send, sends) {
            (Some(s), Some((sc, sd))) => {
                let (sc, sd) = (s.scaled(sc)?, s.scaled(sd)?);
                check_blocks(what, "send", &sc, &sd, n, s.len(), false)?;
                a.scounts = Some(sc);
                a.sdispls = Some(sd);
            }
            (Some(s), None) => a.count = s.len(),
            (None, _) => {
                a.scounts = Some(rc.clone());
                a.sdispls = Some(rd.clone());
            }
        }
        let total: usize = rc.iter().sum();
        a.bytes = total * recv.elem.packed_size() / n.max(1);
        a.rcounts = Some(rc);
        a.rdispls = Some(rd);
        a.lend_send(bufs, send.as_mut());
        a.lend_recv(bufs, &mut recv);
        Ok(a)
    }

    #[allow(clippy::too_many_arguments)]
    fn alltoallv_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        scounts: &[usize],
        sdispls: &[usize],
        recv: Dst<'b>,
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
            <> (send: impl Into<Src<'b>>, scounts: &[usize], sdispls: &[usize], recv: impl Into<Dst<'b>>, rcounts: &[usize], rdispls: &[usize])
            => alltoallv_call(send.into(), scounts, sdispls, recv.into(), rcounts, rdispls)
    }

    fn alltoallw_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        sspecs: &[WSpec],
        recv: Dst<'b>,
        rspecs: &[WSpec],
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let r = (move || {
            self.check_inter_in_place(what, send.0.is_none())?;
            let n = self.peers() as usize;
            let (whole_recv, rblocks) = w_recv_blocks(what, rspecs, n, calls, recv)?;
            let (whole_send, sblocks) = match send.0 {
                Some(s) => {
                    let (w, b) = w_send_blocks(what, sspecs, n, calls, s)?;
                    (Some(w), b)
                }
                None => (None, rblocks.clone()),
            };
            let mut a = Args::new(Coll::Alltoallw, self.rank, self.size, Elem::of::<u8>()?);
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
        /// [`IN_PLACE`](super::IN_PLACE) (then `sspecs` is ignored and may be empty). The
        /// buffers are slices (their datatypes are in the specs).
        alltoallw, ialltoallw, alltoallw_init ("Alltoallw", "alltoallw")
            <> (send: impl Into<Src<'b>>, sspecs: &[WSpec], recv: impl Into<Dst<'b>>, rspecs: &[WSpec])
            => alltoallw_call(send.into(), sspecs, recv.into(), rspecs)
    }
}
