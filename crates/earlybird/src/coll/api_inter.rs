//! The arguments of collectives on intercommunicators (MPI 4.1 §6.2.2): which buffers are
//! significant where, checked, for the algorithms of `algo/inter_linear.rs`.
//!
//! Rooted collectives: the root passes [`ROOT`](crate::ROOT), the other members of its
//! group [`PROC_NULL`](crate::PROC_NULL) (they take no part), and every member of the other
//! group the root's rank in that group. Buffers are as on an intracommunicator with "the
//! remote group" for "the group": a gather's root receives one block per remote member,
//! an allgather's receive buffer holds the remote group's blocks, an alltoall's send and
//! receive buffers one block per remote member, a reduction's result combines the remote
//! group's inputs. Where the Rust form takes the count from a slice that MPI ignores at a
//! rank, the other slice gives it: a reduce's root takes its count from `recv` (its `send`
//! may be empty), a gather's root the per-member count from `recv` (its length over the
//! remote size), a scatter's root from `send`. MPI_IN_PLACE is not allowed on an
//! intercommunicator in a buffer that counts at that rank (MPI_ERR_BUFFER); where a buffer
//! does not count it is ignored, whatever it is.
#![forbid(unsafe_code)]

use super::api::{Call, CallBufs, Src};
use super::api_gather::Dst;
use super::op::Op;
use super::{check_len, Args, Coll, Elem};
use crate::comm::Comm;
use crate::datatype::Equivalence;
use crate::error::{Error, ErrorClass, Result};
use crate::status::{PROC_NULL, ROOT};
use std::rc::Rc;

/// A member's part in a rooted collective on an intercommunicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// The root (root argument MPI_ROOT).
    Root,
    /// A member of the remote group of the root, whose rank there is this.
    Member(i32),
    /// Another member of the root's group (PROC_NULL): no part.
    Idle,
}

fn no_in_place(what: &str) -> Error {
    Error::new(
        ErrorClass::Buffer,
        format!("{what}: MPI_IN_PLACE is not allowed on an intercommunicator"),
    )
}

/// `n` equal blocks of a buffer of `len` elements, or MPI_ERR_COUNT.
fn blocks_of(what: &str, which: &str, len: usize, n: i32) -> Result<usize> {
    let n = n as usize;
    if !len.is_multiple_of(n) {
        return Err(Error::new(
            ErrorClass::Count,
            format!("{what}: the {which} buffer's {len} elements are not {n} equal blocks (one per remote member)"),
        ));
    }
    Ok(len / n)
}

/// Per-member counts and displacements, as `Args` keeps them.
type Blocks = (Rc<[usize]>, Rc<[usize]>);

/// Counts and displacements of `n` equal blocks of `count`.
fn equal_blocks(count: usize, n: i32) -> Blocks {
    let n = n as usize;
    (
        vec![count; n].into(),
        (0..n).map(|i| i * count).collect::<Vec<_>>().into(),
    )
}

/// Per-member counts and displacements of a v form, one per remote member, inside a
/// buffer of `len` elements.
fn check_remote_v(
    what: &str,
    which: &str,
    (counts, displs): (&[usize], &[usize]),
    n: i32,
    len: usize,
    written: bool,
) -> Result<Blocks> {
    super::api_alltoall::check_blocks(what, which, counts, displs, n as usize, len, written)?;
    Ok((counts.into(), displs.into()))
}

impl Comm {
    /// `Some(remote group size)` on an intercommunicator.
    pub(super) fn remote_if_inter(&self) -> Option<i32> {
        self.is_inter().then(|| self.peers())
    }

    /// MPI_ERR_BUFFER when a call on an intercommunicator is in place.
    pub(super) fn check_inter_in_place(&self, what: &str, in_place: bool) -> Result<()> {
        if in_place && self.is_inter() {
            return Err(no_in_place(what));
        }
        Ok(())
    }

    fn role(&self, what: &str, root: i32) -> Result<Role> {
        match root {
            ROOT => Ok(Role::Root),
            PROC_NULL => Ok(Role::Idle),
            r if (0..self.peers()).contains(&r) => Ok(Role::Member(r)),
            r => Err(Error::new(
                ErrorClass::Root,
                format!(
                    "{what}: root {r} on an intercommunicator: MPI_ROOT at the root, PROC_NULL in its group, else a rank of the remote group of {}",
                    self.peers()
                ),
            )),
        }
    }

    /// One block per remote member in a buffer of `len` elements: the v form's counts and
    /// displacements (`v`), checked, or equal blocks filling it.
    fn remote_blocks(
        &self,
        what: &str,
        which: &str,
        v: Option<(&[usize], &[usize])>,
        len: usize,
        written: bool,
    ) -> Result<Blocks> {
        let m = self.peers();
        match v {
            Some(cd) => check_remote_v(what, which, cd, m, len, written),
            None => Ok(equal_blocks(blocks_of(what, which, len, m)?, m)),
        }
    }

    fn inter_args(&self, coll: Coll, elem: Elem) -> Args {
        let mut a = Args::new(coll, self.rank, self.size, elem);
        a.remote = Some(self.peers());
        a
    }

    /// Barrier: no buffers.
    pub(super) fn inter_barrier_call(&self, what: &'static str) -> Call<'static> {
        let args = Elem::of::<u8>().map(|e| self.inter_args(Coll::Barrier, e));
        Call::plain(what, args, CallBufs::default())
    }

    /// Bcast: the root sends `buf`, the remote group receives into it.
    pub(super) fn inter_bcast_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        buf: &'b mut [T],
        root: i32,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let buf = buf;
            let role = self.role(what, root)?;
            let mut a = self.inter_args(Coll::Bcast, Elem::of::<T>()?);
            a.root = root;
            if role != Role::Idle {
                a.count = buf.len();
                a.bytes = std::mem::size_of_val(buf);
                a.recv = calls.recv(buf);
            }
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    /// Reduce (`root`) and allreduce (`None`).
    pub(super) fn inter_reduction_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        coll: Coll,
        send: Src<'b, T>,
        recv: &'b mut [T],
        op: &Op,
        root: Option<i32>,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let role = match root {
                Some(r) => self.role(what, r)?,
                None => Role::Root,
            };
            // The send buffer matters except at a reduce's root and beside it.
            let send_counts = root.is_none() || matches!(role, Role::Member(_));
            let slen = match send.len() {
                Some(n) => n,
                None if send_counts => return Err(no_in_place(what)),
                None => 0,
            };
            let reducer = super::reducer::<T>(op)?;
            let mut a = self.inter_args(coll, Elem::of::<T>()?);
            a.root = root.unwrap_or(0);
            a.commutative = op.is_commutative();
            match (root.is_some(), role) {
                (_, Role::Idle) => {}
                // A reduce's root contributes nothing: its count is its receive buffer's.
                (true, Role::Root) => {
                    a.count = recv.len();
                    a.recv = calls.recv(recv);
                }
                (true, Role::Member(_)) => {
                    a.count = slen;
                    a.send = calls.send(send);
                }
                (false, _) => {
                    a.count = slen;
                    check_len(what, "the receive buffer", recv.len(), slen)?;
                    a.send = calls.send(send);
                    a.recv = calls.recv(&mut recv[..slen]);
                }
            }
            a.bytes = a.count * std::mem::size_of::<T>();
            Ok((a, reducer))
        })();
        Call::reduction(what, args, bufs)
    }

    /// Gather and gatherv (`v`: the root's counts and displacements, one per remote member).
    pub(super) fn inter_gather_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        recv: &'b mut [T],
        v: Option<(&[usize], &[usize])>,
        root: i32,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let role = self.role(what, root)?;
            // Only the remote group's send buffers matter.
            let slen = match (send.len(), role) {
                (Some(n), _) => n,
                (None, Role::Member(_)) => return Err(no_in_place(what)),
                (None, _) => 0,
            };
            let coll = if v.is_some() {
                Coll::Gatherv
            } else {
                Coll::Gather
            };
            let mut a = self.inter_args(coll, Elem::of::<T>()?);
            a.root = root;
            match role {
                Role::Idle => {}
                Role::Member(_) => {
                    a.count = slen;
                    a.send = calls.send(send);
                }
                Role::Root => {
                    let (c, d) = self.remote_blocks(what, "receive", v, recv.len(), true)?;
                    a.count = c.first().copied().unwrap_or(0);
                    a.rcounts = Some(c);
                    a.rdispls = Some(d);
                    a.recv = calls.recv(recv);
                }
            }
            a.bytes = a.count * std::mem::size_of::<T>();
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    /// Scatter and scatterv (`v`: the root's counts and displacements, one per remote
    /// member).
    pub(super) fn inter_scatter_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        recv: Dst<'b, T>,
        v: Option<(&[usize], &[usize])>,
        root: i32,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let role = self.role(what, root)?;
            // The root's send buffer and the remote group's receive buffers matter.
            let slen = match (send.len(), role) {
                (Some(n), _) => n,
                (None, Role::Root) => return Err(no_in_place(what)),
                (None, _) => 0,
            };
            let recv: &mut [T] = match (recv, role) {
                (Dst::Slice(r), _) => r,
                (Dst::InPlace, Role::Member(_)) => return Err(no_in_place(what)),
                (Dst::InPlace, _) => &mut [],
            };
            let coll = if v.is_some() {
                Coll::Scatterv
            } else {
                Coll::Scatter
            };
            let mut a = self.inter_args(coll, Elem::of::<T>()?);
            a.root = root;
            match role {
                Role::Idle => {}
                Role::Member(_) => {
                    a.count = recv.len();
                    a.recv = calls.recv(recv);
                }
                Role::Root => {
                    let (c, d) = self.remote_blocks(what, "send", v, slen, false)?;
                    a.count = c.first().copied().unwrap_or(0);
                    a.scounts = Some(c);
                    a.sdispls = Some(d);
                    a.send = calls.send(send);
                }
            }
            a.bytes = a.count * std::mem::size_of::<T>();
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    /// Allgather and allgatherv (`v`: counts and displacements of the remote members'
    /// blocks in `recv`).
    pub(super) fn inter_allgather_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        recv: &'b mut [T],
        v: Option<(&[usize], &[usize])>,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let Some(slen) = send.len() else {
                return Err(no_in_place(what));
            };
            let coll = if v.is_some() {
                Coll::Allgatherv
            } else {
                Coll::Allgather
            };
            let mut a = self.inter_args(coll, Elem::of::<T>()?);
            let (c, d) = self.remote_blocks(what, "receive", v, recv.len(), true)?;
            a.count = slen;
            a.bytes = slen * std::mem::size_of::<T>();
            a.rcounts = Some(c);
            a.rdispls = Some(d);
            a.send = calls.send(send);
            a.recv = calls.recv(recv);
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    /// Alltoall: one block per remote member on each side (the two sides' block sizes may
    /// differ: they are the two groups' counts).
    pub(super) fn inter_alltoall_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        recv: &'b mut [T],
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let Some(slen) = send.len() else {
                return Err(no_in_place(what));
            };
            let mut a = self.inter_args(Coll::Alltoall, Elem::of::<T>()?);
            let (sc, sd) = self.remote_blocks(what, "send", None, slen, false)?;
            let (rc, rd) = self.remote_blocks(what, "receive", None, recv.len(), true)?;
            a.count = sc.first().copied().unwrap_or(0);
            a.bytes = a.count * std::mem::size_of::<T>();
            a.scounts = Some(sc);
            a.sdispls = Some(sd);
            a.rcounts = Some(rc);
            a.rdispls = Some(rd);
            a.send = calls.send(send);
            a.recv = calls.recv(recv);
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    /// Reduce-scatter (`counts`: this group's receive counts) and reduce-scatter-block
    /// (`None`: `recv.len()` each). `send` is the vector scattered over the remote group:
    /// for the block form `remote size` equal blocks, for the v form the sum of the remote
    /// group's counts (sent whole: see `algo/inter_linear.rs`).
    pub(super) fn inter_reduce_scatter_call<'b, T: Equivalence>(
        &self,
        what: &'static str,
        send: Src<'b, T>,
        recv: &'b mut [T],
        counts: Option<&[usize]>,
        op: &Op,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let Some(slen) = send.len() else {
                return Err(no_in_place(what));
            };
            let m = self.peers();
            let reducer = super::reducer::<T>(op)?;
            let coll = match counts {
                Some(_) => Coll::ReduceScatter,
                None => Coll::ReduceScatterBlock,
            };
            let mut a = self.inter_args(coll, Elem::of::<T>()?);
            a.commutative = op.is_commutative();
            match counts {
                Some(c) => {
                    if c.len() != self.size as usize {
                        return Err(Error::new(
                            ErrorClass::Count,
                            format!(
                                "{what}: {} receive counts given for a local group of {}",
                                c.len(),
                                self.size
                            ),
                        ));
                    }
                    a.count = c[self.rank as usize];
                    let displs: Vec<usize> = c
                        .iter()
                        .scan(0usize, |at, &x| {
                            let d = *at;
                            *at += x;
                            Some(d)
                        })
                        .collect();
                    a.rcounts = Some(Rc::from(c));
                    a.rdispls = Some(Rc::from(displs));
                    a.scounts = Some(vec![slen; m as usize].into());
                    a.sdispls = Some(vec![0; m as usize].into());
                }
                None => {
                    a.count = recv.len();
                    let (sc, sd) = self.remote_blocks(what, "send", None, slen, false)?;
                    a.scounts = Some(sc);
                    a.sdispls = Some(sd);
                }
            }
            check_len(what, "the receive buffer", recv.len(), a.count)?;
            a.bytes = a.count * std::mem::size_of::<T>();
            a.send = calls.send(send);
            a.recv = calls.recv(&mut recv[..a.count]);
            Ok((a, reducer))
        })();
        Call::reduction(what, args, bufs)
    }
}
