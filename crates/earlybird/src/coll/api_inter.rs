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

use super::api::{first_elem, reducer_of, Call, CallBufs};
use super::buffers::{place, Dst, DstOrInPlace, Side, Src};
use super::op::Op;
use super::{check_len, Args, Coll, Elem};
use crate::comm::Comm;
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

    /// [`remote_blocks`](Self::remote_blocks) of buffer `buf`, its v counts and
    /// displacements given in its program's elements.
    fn remote_blocks_of(
        &self,
        what: &str,
        which: &str,
        v: Option<(&[usize], &[usize])>,
        buf: &Side,
        written: bool,
    ) -> Result<Blocks> {
        match v {
            Some((c, d)) => {
                let (c, d) = (buf.scaled(c)?, buf.scaled(d)?);
                self.remote_blocks(what, which, Some((&c, &d)), buf.len(), written)
            }
            None => self.remote_blocks(what, which, None, buf.len(), written),
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
    pub(super) fn inter_bcast_call<'b>(
        &self,
        what: &'static str,
        buf: Dst<'b>,
        root: i32,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let role = self.role(what, root)?;
            let mut buf = buf.0;
            buf.place(super::buffers::Units::Bytes)?;
            let mut a = self.inter_args(Coll::Bcast, buf.elem.clone());
            a.root = root;
            if role != Role::Idle {
                a.count = buf.len();
                a.bytes = a.count * buf.elem.packed_size();
                a.lend_recv(calls, &mut buf);
            }
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    /// Reduce (`root`) and allreduce (`None`).
    pub(super) fn inter_reduction_call<'b>(
        &self,
        what: &'static str,
        coll: Coll,
        send: Src<'b>,
        recv: Dst<'b>,
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
            // The send buffer matters except at a reduce's root and beside it; the receive
            // buffer except at a reduce's members.
            let send_counts = root.is_none() || matches!(role, Role::Member(_));
            let recv_counts = root.is_none() || role == Role::Root;
            if send.0.is_none() && send_counts {
                return Err(no_in_place(what));
            }
            let (mut send, mut recv) = (
                send.0.filter(|_| send_counts),
                Some(recv.0).filter(|_| recv_counts),
            );
            let units = place(what, send.as_mut(), recv.as_mut())?;
            let reducer = match (&send, &recv) {
                (None, None) => None,
                _ => Some(reducer_of(what, send.as_ref(), recv.as_ref(), op)?),
            };
            let mut a = self.inter_args(coll, first_elem(&send, &recv));
            a.root = root.unwrap_or(0);
            a.commutative = op.is_commutative();
            match (root.is_some(), role) {
                (_, Role::Idle) => {}
                // A reduce's root contributes nothing: its count is its receive buffer's.
                (true, Role::Root) => {
                    let mut recv = recv.expect("significant");
                    a.count = recv.len();
                    a.lend_recv(calls, &mut recv);
                }
                (true, Role::Member(_)) => {
                    a.count = send.as_ref().map_or(0, |s| s.len());
                    a.lend_send(calls, send.as_mut());
                }
                (false, _) => {
                    let mut recv = recv.expect("significant");
                    let slen = send.as_ref().map_or(0, |s| s.len());
                    a.count = slen;
                    check_len(what, "the receive buffer", recv.len(), slen)?;
                    a.lend_send(calls, send.as_mut());
                    a.lend_recv_first(calls, &mut recv, slen);
                }
            }
            a.bytes = a.count * a.elem.packed_size();
            // A rank beside the root has no buffer and takes no part: it reduces nothing.
            if let Some(r) = &reducer {
                a.stage(what, units, r)?;
            }
            Ok((a, reducer))
        })();
        Call::reduction(what, args, bufs)
    }

    pub(super) fn inter_gather_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        recv: Dst<'b>,
        v: Option<(&[usize], &[usize])>,
        root: i32,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let role = self.role(what, root)?;
            // Only the remote group's send buffers matter, and the root's receive buffer.
            if send.0.is_none() && matches!(role, Role::Member(_)) {
                return Err(no_in_place(what));
            }
            let (mut send, mut recv) = (
                send.0.filter(|_| matches!(role, Role::Member(_))),
                Some(recv.0).filter(|_| role == Role::Root),
            );
            place(what, send.as_mut(), recv.as_mut())?;
            let coll = if v.is_some() {
                Coll::Gatherv
            } else {
                Coll::Gather
            };
            let mut a = self.inter_args(coll, first_elem(&send, &recv));
            a.root = root;
            match role {
                Role::Idle => {}
                Role::Member(_) => {
                    a.count = send.as_ref().map_or(0, |s| s.len());
                    a.lend_send(calls, send.as_mut());
                }
                Role::Root => {
                    let mut recv = recv.expect("significant");
                    let (c, d) = self.remote_blocks_of(what, "receive", v, &recv, true)?;
                    a.count = c.first().copied().unwrap_or(0);
                    a.rcounts = Some(c);
                    a.rdispls = Some(d);
                    a.lend_recv(calls, &mut recv);
                }
            }
            a.bytes = a.count * a.elem.packed_size();
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    pub(super) fn inter_scatter_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        recv: DstOrInPlace<'b>,
        v: Option<(&[usize], &[usize])>,
        root: i32,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            let role = self.role(what, root)?;
            // The root's send buffer and the remote group's receive buffers matter.
            if send.0.is_none() && role == Role::Root {
                return Err(no_in_place(what));
            }
            if recv.0.is_none() && matches!(role, Role::Member(_)) {
                return Err(no_in_place(what));
            }
            let (mut send, mut recv) = (
                send.0.filter(|_| role == Role::Root),
                recv.0.filter(|_| matches!(role, Role::Member(_))),
            );
            place(what, send.as_mut(), recv.as_mut())?;
            let coll = if v.is_some() {
                Coll::Scatterv
            } else {
                Coll::Scatter
            };
            let mut a = self.inter_args(coll, first_elem(&send, &recv));
            a.root = root;
            match role {
                Role::Idle => {}
                Role::Member(_) => {
                    let mut recv = recv.expect("significant");
                    a.count = recv.len();
                    a.lend_recv(calls, &mut recv);
                }
                Role::Root => {
                    let mut send = send.expect("significant");
                    let (c, d) = self.remote_blocks_of(what, "send", v, &send, false)?;
                    a.count = c.first().copied().unwrap_or(0);
                    a.scounts = Some(c);
                    a.sdispls = Some(d);
                    a.lend_send(calls, Some(&mut send));
                }
            }
            a.bytes = a.count * a.elem.packed_size();
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    pub(super) fn inter_allgather_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        recv: Dst<'b>,
        v: Option<(&[usize], &[usize])>,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            if send.0.is_none() {
                return Err(no_in_place(what));
            }
            let (mut send, mut recv) = (send.0, recv.0);
            place(what, send.as_mut(), Some(&mut recv))?;
            let (mut send, mut recv) = (send.expect("given"), recv);
            let coll = if v.is_some() {
                Coll::Allgatherv
            } else {
                Coll::Allgather
            };
            let mut a = self.inter_args(coll, recv.elem.clone());
            let (c, d) = self.remote_blocks_of(what, "receive", v, &recv, true)?;
            a.count = send.len();
            a.bytes = a.count * recv.elem.packed_size();
            a.rcounts = Some(c);
            a.rdispls = Some(d);
            a.lend_send(calls, Some(&mut send));
            a.lend_recv(calls, &mut recv);
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    pub(super) fn inter_alltoall_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        recv: Dst<'b>,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            if send.0.is_none() {
                return Err(no_in_place(what));
            }
            let (mut send, mut recv) = (send.0, recv.0);
            place(what, send.as_mut(), Some(&mut recv))?;
            let (mut send, mut recv) = (send.expect("given"), recv);
            let mut a = self.inter_args(Coll::Alltoall, recv.elem.clone());
            let (sc, sd) = self.remote_blocks_of(what, "send", None, &send, false)?;
            let (rc, rd) = self.remote_blocks_of(what, "receive", None, &recv, true)?;
            a.count = sc.first().copied().unwrap_or(0);
            a.bytes = a.count * recv.elem.packed_size();
            a.scounts = Some(sc);
            a.sdispls = Some(sd);
            a.rcounts = Some(rc);
            a.rdispls = Some(rd);
            a.lend_send(calls, Some(&mut send));
            a.lend_recv(calls, &mut recv);
            Ok(a)
        })();
        Call::plain(what, args, bufs)
    }

    pub(super) fn inter_reduce_scatter_call<'b>(
        &self,
        what: &'static str,
        send: Src<'b>,
        recv: Dst<'b>,
        counts: Option<&[usize]>,
        op: &Op,
    ) -> Call<'b> {
        let mut bufs = CallBufs::default();
        let calls = &mut bufs;
        let args = (move || {
            if send.0.is_none() {
                return Err(no_in_place(what));
            }
            let (mut send, mut recv) = (send.0, recv.0);
            let units = place(what, send.as_mut(), Some(&mut recv))?;
            let (mut send, mut recv) = (send.expect("given"), recv);
            let slen = send.len();
            let m = self.peers();
            let reducer = reducer_of(what, Some(&send), Some(&recv), op)?;
            let coll = match counts {
                Some(_) => Coll::ReduceScatter,
                None => Coll::ReduceScatterBlock,
            };
            let mut a = self.inter_args(coll, recv.elem.clone());
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
                    let c = recv.scaled(c)?;
                    a.count = c[self.rank as usize];
                    let displs: Vec<usize> = c
                        .iter()
                        .scan(0usize, |at, &x| {
                            let d = *at;
                            *at += x;
                            Some(d)
                        })
                        .collect();
                    a.rcounts = Some(c);
                    a.rdispls = Some(Rc::from(displs));
                    a.scounts = Some(vec![slen; m as usize].into());
                    a.sdispls = Some(vec![0; m as usize].into());
                }
                None => {
                    a.count = recv.len();
                    let (sc, sd) = self.remote_blocks_of(what, "send", None, &send, false)?;
                    a.scounts = Some(sc);
                    a.sdispls = Some(sd);
                }
            }
            check_len(what, "the receive buffer", recv.len(), a.count)?;
            a.bytes = a.count * recv.elem.packed_size();
            let mine = a.count;
            a.lend_send(calls, Some(&mut send));
            a.lend_recv_first(calls, &mut recv, mine);
            a.stage(what, units, &reducer)?;
            Ok((a, Some(reducer)))
        })();
        Call::reduction(what, args, bufs)
    }
}
