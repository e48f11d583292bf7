//! The neighbourhood collectives on a [`Comm`] with a topology (MPI 4.1 §8.6), Cartesian,
//! graph or distributed graph: neighbor_allgather,
//! neighbor_allgatherv, neighbor_alltoall, neighbor_alltoallv and neighbor_alltoallw, each blocking, nonblocking
//! (`i*`) and persistent (`*_init`).
//!
//! Block `k` of the send buffer goes to destination `k` and block `k` of the receive buffer
//! comes from source `k`, the lists being those of [`Comm::neighbors`]: per dimension the
//! rank at -1, then the rank at +1. A [`PROC_NULL`](crate::PROC_NULL) neighbour (off the
//! edge of a non-periodic dimension) sends and receives nothing and its receive block is
//! left as it was. In a periodic dimension of extent 1 or 2 both neighbours are the same
//! rank (this one, for extent 1); as MPI 4.1 requires (§8.6, the errata of MPI-4.0 Annex
//! B.1.1), what a rank sends towards -1 lands in the +1 block of the receiver and the other
//! way round, as in a halo exchange. On a communicator without a Cartesian topology every
//! call is `MPI_ERR_TOPOLOGY`. MPI does not allow MPI_IN_PLACE here (`MPI_ERR_BUFFER`).
#![forbid(unsafe_code)]

use super::api::{collective, Call, CallBufs};
use super::api_alltoall::{per_block, w_recv_blocks, w_send_blocks, WSpec};
use super::buffers::{place, Dst, Src};
use super::{check_len, Args, Coll, Elem};
use crate::comm::Comm;
use crate::error::{Error, ErrorClass, Result};
use std::rc::Rc;

/// A communicator's source and destination lists, shared by a call's steps, and whether
/// they are a Cartesian grid's (-1, +1) pairs.
type Lists = (Rc<[i32]>, Rc<[i32]>, bool);

impl Comm {
    /// The (source, destination) lists of call `what`; the send argument refused in place.
    fn neighbor_args(&self, what: &'static str, send: &Src<'_>) -> Result<Lists> {
        let nb = self.neighbor_lists(what)?;
        if send.0.is_none() {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("{what}: MPI_IN_PLACE is not allowed in a neighbourhood collective"),
            ));
        }
        Ok((
            nb.sources.into(),
            nb.destinations.into(),
            self.is_cartesian(),
        ))
    }

    /// neighbor_allgather (`gather`) or neighbor_alltoall: equal blocks.
    fn neighbor_call<'b>(
        &self,
        what: &'static str,
        coll: Coll,
        send: Src<'b>,
        recv: Dst<'b>,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let r = (move || {
            let (sources, dests, cart_pairs) = self.neighbor_args(what, &send)?;
            let (mut send, mut recv) = (send.0, recv.0);
            place(what, send.as_mut(), Some(&mut recv))?;
            let len = send.as_ref().map_or(0, |s| s.len());
            let count = if coll == Coll::NeighborAllgather {
                len
            } else {
                per_block(what, "the send buffer", len, dests.len())?
            };
            recv.check_whole(what, "receive", count)?;
            let need = count * sources.len();
            check_len(what, "the receive buffer", recv.len(), need)?;
            let mut a = Args::new(coll, self.rank, self.size, recv.elem.clone());
            a.count = count;
            a.bytes = count * recv.elem.packed_size();
            a.sources = Some(sources);
            a.dests = Some(dests);
            a.cart_pairs = cart_pairs;
            a.lend_send(calls, send.as_mut());
            a.lend_recv_first(calls, &mut recv, need);
            Ok(a)
        })();
        Call::plain(what, r, bufs).intra_only()
    }

    /// neighbor_allgatherv (no send counts) or neighbor_alltoallv.
    #[allow(clippy::too_many_arguments)]
    fn neighbor_v_call<'b>(
        &self,
        what: &'static str,
        coll: Coll,
        send: Src<'b>,
        sends: Option<(&[usize], &[usize])>,
        recv: Dst<'b>,
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let r = (move || {
            let recv = recv;
            let send = send;
            let (sources, dests, cart_pairs) = self.neighbor_args(what, &send)?;
            let mut a = self.v_args(
                what,
                coll,
                sources.len(),
                &mut *calls,
                send,
                sends,
                recv,
                rcounts,
                rdispls,
            )?;
            a.sources = Some(sources);
            a.dests = Some(dests);
            a.cart_pairs = cart_pairs;
            Ok(a)
        })();
        Call::plain(what, r, bufs).intra_only()
    }

    collective! {
        /// MPI_Neighbor_allgather: `send` to every destination neighbour; block `k` of `recv`
        /// (`send.len()` elements) from source neighbour `k`.
        neighbor_allgather, ineighbor_allgather, neighbor_allgather_init ("Neighbor_allgather", "neighbor_allgather")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>)
            => neighbor_call(Coll::NeighborAllgather, send.into(), recv.into())
    }

    collective! {
        /// MPI_Neighbor_allgatherv: `send` to every destination neighbour; the data of source
        /// neighbour `k` (`rcounts[k]` elements) at `rdispls[k]` of `recv`.
        neighbor_allgatherv, ineighbor_allgatherv, neighbor_allgatherv_init ("Neighbor_allgatherv", "neighbor_allgatherv")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>, rcounts: &[usize], rdispls: &[usize])
            => neighbor_v_call(Coll::NeighborAllgatherv, send.into(), None, recv.into(), rcounts, rdispls)
    }

    collective! {
        /// MPI_Neighbor_alltoall: block `k` of `send` to destination neighbour `k`; block `k` of
        /// `recv` from source neighbour `k` (`send` holds one equal block per destination).
        neighbor_alltoall, ineighbor_alltoall, neighbor_alltoall_init ("Neighbor_alltoall", "neighbor_alltoall")
            <> (send: impl Into<Src<'b>>, recv: impl Into<Dst<'b>>)
            => neighbor_call(Coll::NeighborAlltoall, send.into(), recv.into())
    }

    collective! {
        /// MPI_Neighbor_alltoallv: `scounts[k]` elements at `sdispls[k]` of `send` to destination
        /// neighbour `k`; `rcounts[k]` elements from source neighbour `k` at `rdispls[k]` of
        /// `recv`.
        neighbor_alltoallv, ineighbor_alltoallv, neighbor_alltoallv_init ("Neighbor_alltoallv", "neighbor_alltoallv")
            <> (send: impl Into<Src<'b>>, scounts: &[usize], sdispls: &[usize], recv: impl Into<Dst<'b>>, rcounts: &[usize], rdispls: &[usize])
            => neighbor_v_call(Coll::NeighborAlltoallv, send.into(), Some((scounts, sdispls)), recv.into(), rcounts, rdispls)
    }

    /// neighbor_alltoallw: per destination and per source its own (count, byte
    /// displacement, datatype).
    fn neighbor_w_call<'b>(
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
            let recv = recv;
            let send = send;
            let (sources, dests, cart_pairs) = self.neighbor_args(what, &send)?;
            let (whole_recv, from_each) = w_recv_blocks(what, rspecs, sources.len(), calls, recv)?;
            let send = send.0.expect("not in place (checked)");
            let (whole_send, to_each) = w_send_blocks(what, sspecs, dests.len(), calls, send)?;
            let mut a = Args::new(
                Coll::NeighborAlltoallw,
                self.rank,
                self.size,
                Elem::of::<u8>()?,
            );
            a.bytes =
                from_each.iter().map(|b| b.packed_len()).sum::<usize>() / sources.len().max(1);
            a.nwblocks = Some((to_each.into(), from_each.into()));
            a.sources = Some(sources);
            a.dests = Some(dests);
            a.cart_pairs = cart_pairs;
            a.send = Some(whole_send);
            a.recv = whole_recv;
            Ok(a)
        })();
        Call::plain(what, r, bufs).intra_only()
    }

    collective! {
        /// MPI_Neighbor_alltoallw: to destination neighbour `k` the block `sspecs[k]` =
        /// (count, byte displacement, datatype) of `send`; from source neighbour `k` into
        /// block `rspecs[k]` of `recv` (receive blocks may not overlap). Every datatype must
        /// be committed.
        neighbor_alltoallw, ineighbor_alltoallw, neighbor_alltoallw_init ("Neighbor_alltoallw", "neighbor_alltoallw")
            <> (send: impl Into<Src<'b>>, sspecs: &[WSpec], recv: impl Into<Dst<'b>>, rspecs: &[WSpec])
            => neighbor_w_call(send.into(), sspecs, recv.into(), rspecs)
    }
}
