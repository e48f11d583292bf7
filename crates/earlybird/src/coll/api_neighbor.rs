//! The neighbourhood collectives on a Cartesian [`Comm`] (MPI 4.1 §8.6): neighbor_allgather,
//! neighbor_allgatherv, neighbor_alltoall and neighbor_alltoallv, each blocking, nonblocking
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

use super::api::{Call, Src};
use super::api_alltoall::{call_of, per_block};
use super::{check_len, Args, Coll, Elem};
use crate::comm::Comm;
use crate::datatype::Equivalence;
use crate::error::{Error, ErrorClass, Result};
use crate::request::{Request, Scope};
use crate::sys::lend::Lent;
use std::rc::Rc;

/// A Cartesian communicator's source and destination lists, shared by a call's steps.
type Lists = (Rc<[i32]>, Rc<[i32]>);

impl Comm {
    /// The (source, destination) lists of call `what`; the send argument refused in place.
    fn neighbor_args<T: Equivalence>(
        &self,
        what: &'static str,
        send: &Src<'_, T>,
    ) -> Result<Lists> {
        let nb = self.neighbor_lists(what)?;
        if send.len().is_none() {
            return Err(Error::new(
                ErrorClass::Buffer,
                format!("{what}: MPI_IN_PLACE is not allowed in a neighbourhood collective"),
            ));
        }
        Ok((nb.sources.into(), nb.destinations.into()))
    }

    /// neighbor_allgather (`gather`) or neighbor_alltoall: equal blocks.
    fn neighbor_call<T: Equivalence>(
        &self,
        what: &'static str,
        coll: Coll,
        send: Src<'_, T>,
        recv: &mut [T],
    ) -> Call {
        let r = (|| {
            let (sources, dests) = self.neighbor_args(what, &send)?;
            let len = send.len().unwrap_or(0);
            let count = if coll == Coll::NeighborAllgather {
                len
            } else {
                per_block(what, "the send buffer", len, dests.len())?
            };
            let need = count * sources.len();
            check_len(what, "the receive buffer", recv.len(), need)?;
            let mut a = Args::new(coll, self.rank, self.size, Elem::of::<T>()?);
            a.count = count;
            a.bytes = count * std::mem::size_of::<T>();
            a.sources = Some(sources);
            a.dests = Some(dests);
            let (sb, w) = send.lend();
            a.send = sb;
            a.recv = Lent::of_elems_mut(&mut recv[..need]);
            Ok((a, w))
        })();
        call_of(what, r)
    }

    /// neighbor_allgatherv (no send counts) or neighbor_alltoallv.
    #[allow(clippy::too_many_arguments)]
    fn neighbor_v_call<T: Equivalence>(
        &self,
        what: &'static str,
        coll: Coll,
        send: Src<'_, T>,
        sends: Option<(&[usize], &[usize])>,
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Call {
        let r = (|| {
            let (sources, dests) = self.neighbor_args(what, &send)?;
            let (mut a, w) = self.v_args(
                what,
                coll,
                sources.len(),
                send,
                sends,
                recv,
                rcounts,
                rdispls,
            )?;
            a.sources = Some(sources);
            a.dests = Some(dests);
            Ok((a, w))
        })();
        call_of(what, r)
    }

    /// MPI_Neighbor_allgather: `send` to every destination neighbour; block `k` of `recv`
    /// (`send.len()` elements) from source neighbour `k`.
    pub fn neighbor_allgather<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
    ) -> Result<()> {
        self.blocking(self.neighbor_call(
            "neighbor_allgather",
            Coll::NeighborAllgather,
            send.into(),
            recv,
        ))
    }

    /// MPI_Ineighbor_allgather.
    pub fn ineighbor_allgather<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
    ) -> Result<Request<'s>> {
        self.started(
            self.neighbor_call(
                "ineighbor_allgather",
                Coll::NeighborAllgather,
                send.into(),
                recv,
            ),
            s,
        )
    }

    /// MPI_Neighbor_allgather_init.
    pub fn neighbor_allgather_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
    ) -> Result<Request<'s>> {
        self.inactive(
            self.neighbor_call(
                "neighbor_allgather_init",
                Coll::NeighborAllgather,
                send.into(),
                recv,
            ),
            s,
        )
    }

    /// MPI_Neighbor_allgatherv: `send` to every destination neighbour; the data of source
    /// neighbour `k` (`rcounts[k]` elements) at `rdispls[k]` of `recv`.
    pub fn neighbor_allgatherv<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<()> {
        self.blocking(self.neighbor_v_call(
            "neighbor_allgatherv",
            Coll::NeighborAllgatherv,
            send.into(),
            None,
            recv,
            rcounts,
            rdispls,
        ))
    }

    /// MPI_Ineighbor_allgatherv.
    pub fn ineighbor_allgatherv<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Request<'s>> {
        self.started(
            self.neighbor_v_call(
                "ineighbor_allgatherv",
                Coll::NeighborAllgatherv,
                send.into(),
                None,
                recv,
                rcounts,
                rdispls,
            ),
            s,
        )
    }

    /// MPI_Neighbor_allgatherv_init.
    pub fn neighbor_allgatherv_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Request<'s>> {
        self.inactive(
            self.neighbor_v_call(
                "neighbor_allgatherv_init",
                Coll::NeighborAllgatherv,
                send.into(),
                None,
                recv,
                rcounts,
                rdispls,
            ),
            s,
        )
    }

    /// MPI_Neighbor_alltoall: block `k` of `send` to destination neighbour `k`; block `k` of
    /// `recv` from source neighbour `k` (`send` holds one equal block per destination).
    pub fn neighbor_alltoall<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        recv: &mut [T],
    ) -> Result<()> {
        self.blocking(self.neighbor_call(
            "neighbor_alltoall",
            Coll::NeighborAlltoall,
            send.into(),
            recv,
        ))
    }

    /// MPI_Ineighbor_alltoall.
    pub fn ineighbor_alltoall<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
    ) -> Result<Request<'s>> {
        self.started(
            self.neighbor_call(
                "ineighbor_alltoall",
                Coll::NeighborAlltoall,
                send.into(),
                recv,
            ),
            s,
        )
    }

    /// MPI_Neighbor_alltoall_init.
    pub fn neighbor_alltoall_init<'s, T: Equivalence>(
        &self,
        s: &'s Scope<'s, '_>,
        send: impl Into<Src<'s, T>>,
        recv: &'s mut [T],
    ) -> Result<Request<'s>> {
        self.inactive(
            self.neighbor_call(
                "neighbor_alltoall_init",
                Coll::NeighborAlltoall,
                send.into(),
                recv,
            ),
            s,
        )
    }

    /// MPI_Neighbor_alltoallv: `scounts[k]` elements at `sdispls[k]` of `send` to destination
    /// neighbour `k`; `rcounts[k]` elements from source neighbour `k` at `rdispls[k]` of
    /// `recv`.
    pub fn neighbor_alltoallv<'a, T: Equivalence>(
        &self,
        send: impl Into<Src<'a, T>>,
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<()> {
        self.blocking(self.neighbor_v_call(
            "neighbor_alltoallv",
            Coll::NeighborAlltoallv,
            send.into(),
            Some((scounts, sdispls)),
            recv,
            rcounts,
            rdispls,
        ))
    }

    /// MPI_Ineighbor_alltoallv.
    #[allow(clippy::too_many_arguments)]
    pub fn ineighbor_alltoallv<'s, T: Equivalence>(
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
            self.neighbor_v_call(
                "ineighbor_alltoallv",
                Coll::NeighborAlltoallv,
                send.into(),
                Some((scounts, sdispls)),
                recv,
                rcounts,
                rdispls,
            ),
            s,
        )
    }

    /// MPI_Neighbor_alltoallv_init.
    #[allow(clippy::too_many_arguments)]
    pub fn neighbor_alltoallv_init<'s, T: Equivalence>(
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
            self.neighbor_v_call(
                "neighbor_alltoallv_init",
                Coll::NeighborAlltoallv,
                send.into(),
                Some((scounts, sdispls)),
                recv,
                rcounts,
                rdispls,
            ),
            s,
        )
    }
}
