//! Making and freeing communicators (MPI 4.1 §7.4): dup, split, create, free, compare, names.
//!
//! # Context ids
//!
//! Every endpoint keeps a bitmap of the context pairs its communicators use (pair `p` is
//! contexts `2p`, point-to-point, and `2p + 1`, the library's own traffic; pair 0 is WORLD).
//! Making a communicator is collective over its parent: each member sends its free mask, the
//! masks are ANDed, and everyone takes the lowest pair free on all of them. A pair is thus
//! never handed out while any member still holds it, and no lock is shared between
//! endpoints. A pair comes back when its communicator is freed (or its last handle
//! dropped), so dup and free in a loop run in bounded memory.
//!
//! The agreement is a gather to rank 0 and a broadcast back, on the parent's internal
//! context: creation is not on anyone's fast path, and the messages are a few hundred bytes.
#![forbid(unsafe_code)]

use super::group::{Comparison, Group, UNDEFINED};
use super::{Comm, CommShared, RankMap};
use crate::error::{Error, ErrorClass, Result};
use crate::fabric::shm::BlockedIn;
use crate::p2p::engine::{Blocked, SendMode, CTX_WORDS};
use crate::p2p::matching::Pattern;
use crate::sys::lend::Lent;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

const TAG_GATHER: i32 = 1;
const TAG_BCAST: i32 = 2;

impl Comm {
    /// Blocking send of library traffic to communicator rank `to`, on the internal context.
    fn internal_send(&self, to: i32, tag: i32, data: &[u8]) -> Result<()> {
        self.send_and_wait(
            self.ep(to),
            self.ctx + 1,
            tag,
            Lent::of(data),
            SendMode::Standard,
        )
    }

    /// Blocking receive of library traffic from communicator rank `from`.
    fn internal_recv(&self, from: i32, tag: i32, buf: &mut [u8]) -> Result<()> {
        let ctx = self.ctx + 1;
        let src = self.ep(from);
        let mut e = self.eng.borrow_mut();
        let pat = Pattern {
            ctx,
            src: Some(src as u32),
            tag: Some(tag),
        };
        let op = e.recv_start(pat, Lent::of_mut(buf));
        let st = e.wait_blocking(
            op,
            Blocked {
                what: BlockedIn::Recv,
                peer: src,
                tag,
                ctx,
            },
        )?;
        if st.bytes() != buf.len() {
            return Err(Error::new(
                ErrorClass::Intern,
                format!(
                    "communicator creation: {} bytes from rank {from} where {} were expected",
                    st.bytes(),
                    buf.len()
                ),
            ));
        }
        Ok(())
    }

    /// Every rank's `mine` (all the same length), in rank order, on every rank.
    pub(super) fn allgather_fixed(&self, mine: &[u8]) -> Result<Vec<u8>> {
        let n = self.size as usize;
        let len = mine.len();
        let mut all = vec![0u8; n * len];
        if self.rank == 0 {
            all[..len].copy_from_slice(mine);
            for r in 1..n {
                self.internal_recv(r as i32, TAG_GATHER, &mut all[r * len..(r + 1) * len])?;
            }
            for r in 1..n {
                self.internal_send(r as i32, TAG_BCAST, &all)?;
            }
        } else {
            self.internal_send(0, TAG_GATHER, mine)?;
            self.internal_recv(0, TAG_BCAST, &mut all)?;
        }
        Ok(all)
    }

    /// The lowest context pair free on every rank of this communicator (not yet claimed).
    pub(super) fn agree_pair(&self) -> Result<u32> {
        let mask = self.eng.borrow().ctx_free_mask();
        let mine: Vec<u8> = mask.iter().flat_map(|w| w.to_le_bytes()).collect();
        let all = self.allgather_fixed(&mine)?;
        let mut and = [u64::MAX; CTX_WORDS];
        for rank in all.chunks_exact(CTX_WORDS * 8) {
            for (w, b) in and.iter_mut().zip(rank.chunks_exact(8)) {
                *w &= u64::from_le_bytes(b.try_into().expect("8 bytes"));
            }
        }
        and.iter()
            .enumerate()
            .find(|(_, &w)| w != 0)
            .map(|(i, w)| (i * 64) as u32 + w.trailing_zeros())
            .ok_or_else(|| {
                Error::new(
                    ErrorClass::Other,
                    format!("no context id is free on all {} ranks (each endpoint has {} communicators at most)", self.size, CTX_WORDS * 64),
                )
            })
    }

    /// A communicator of this endpoint over `members` (endpoints, in rank order) on context
    /// pair `pair`, which this call claims.
    pub(super) fn make(&self, members: Vec<u32>, pair: u32) -> Comm {
        let (me, endpoints) = {
            let mut e = self.eng.borrow_mut();
            e.ctx_claim(pair);
            (e.rank(), e.size())
        };
        let rank = members
            .iter()
            .position(|&m| m == me)
            .expect("a member makes the communicator") as i32;
        let size = members.len() as i32;
        Comm::from_shared(Rc::new(CommShared {
            eng: self.eng.clone(),
            pair,
            rank,
            size,
            map: Some(Rc::new(RankMap::new(members, endpoints))),
            freed: Cell::new(false),
            name: RefCell::new(String::new()),
            attrs: Default::default(),
            topo: Default::default(),
            // A new communicator inherits its parent's error handler (MPI 4.1 §9.3).
            errh: RefCell::new(self.errhandler()),
        }))
    }

    pub(super) fn members(&self) -> Vec<u32> {
        match &self.map {
            None => (0..self.size as u32).collect(),
            Some(m) => m.members.clone(),
        }
    }

    /// MPI_Comm_dup: a new communicator with the same group and a new context; it inherits
    /// the error handler and the topology (not the name), and the attributes whose copy
    /// callbacks say so. Collective over this communicator.
    pub fn dup(&self) -> Result<Comm> {
        let r = self
            .check_live()
            .and_then(|()| self.agree_pair())
            .and_then(|pair| self.inherit(self.make(self.members(), pair)));
        self.ret("comm_dup", r)
    }

    /// MPI_Comm_split: ranks that give the same `color` form a communicator, ordered by
    /// `key` (then by rank here). A rank giving [`UNDEFINED`] gets `None`. Collective.
    pub fn split(&self, color: i32, key: i32) -> Result<Option<Comm>> {
        let r = (|| {
            self.check_live()?;
            if color < 0 && color != UNDEFINED {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!("comm_split: color {color} is negative (use UNDEFINED to opt out)"),
                ));
            }
            let mut mine = color.to_le_bytes().to_vec();
            mine.extend_from_slice(&key.to_le_bytes());
            let all = self.allgather_fixed(&mine)?;
            let pair = self.agree_pair()?;
            if color == UNDEFINED {
                return Ok(None);
            }
            let parent = self.members();
            let mut picked: Vec<(i32, usize)> = all
                .chunks_exact(8)
                .enumerate()
                .filter(|(_, c)| i32::from_le_bytes(c[..4].try_into().expect("4 bytes")) == color)
                .map(|(r, c)| (i32::from_le_bytes(c[4..].try_into().expect("4 bytes")), r))
                .collect();
            picked.sort_unstable();
            Ok(Some(self.make(
                picked.into_iter().map(|(_, r)| parent[r]).collect(),
                pair,
            )))
        })();
        self.ret("comm_split", r)
    }

    /// MPI_Comm_create: a communicator over `group`, a subgroup of this communicator's group
    /// (the same on every rank); ranks outside it get `None`. Collective over this
    /// communicator.
    pub fn create(&self, group: &Group) -> Result<Option<Comm>> {
        let r = (|| {
            self.check_live()?;
            let parent = self.members();
            let members: Vec<u32> = (0..group.size())
                .map(|r| group.member(r as usize))
                .collect();
            if let Some(m) = members.iter().find(|m| !parent.contains(m)) {
                return Err(Error::new(
                    ErrorClass::Group,
                    format!("comm_create: the group holds process {m}, which is not in the communicator"),
                ));
            }
            let pair = self.agree_pair()?;
            let me = self.eng.borrow().rank();
            Ok(members.contains(&me).then(|| self.make(members, pair)))
        })();
        self.ret("comm_create", r)
    }

    /// MPI_Comm_free. Freeing WORLD is `MPI_ERR_COMM`; any later use of this communicator,
    /// through any handle, is `MPI_ERR_COMM`. Operations already started complete. The
    /// attributes' delete callbacks run first, last set first; if one fails, its error is
    /// returned and the communicator stays usable.
    pub fn free(self) -> Result<()> {
        let r = if self.shared.pair == 0 {
            Err(Error::new(
                ErrorClass::Comm,
                "comm_free of MPI_COMM_WORLD, a predefined communicator",
            ))
        } else if self.shared.freed.get() {
            Err(Error::new(
                ErrorClass::Comm,
                "comm_free of a communicator already freed",
            ))
        } else if let Err(e) = self.delete_all_attrs() {
            Err(e)
        } else {
            self.shared.freed.set(true);
            self.eng.borrow_mut().ctx_release(self.shared.pair);
            Ok(())
        };
        self.ret("comm_free", r)
    }

    /// MPI_Comm_compare: `Ident` for handles on one communicator, `Congruent` for the same
    /// group in the same order, `Similar` for the same members, else `Unequal`.
    pub fn compare(&self, other: &Comm) -> Comparison {
        if Rc::ptr_eq(&self.shared, &other.shared) {
            return Comparison::Ident;
        }
        match self.group().compare(&other.group()) {
            Comparison::Ident => Comparison::Congruent,
            c => c,
        }
    }

    /// MPI_Comm_set_name.
    pub fn set_name(&self, name: &str) -> Result<()> {
        const MAX: usize = 127;
        if name.len() > MAX {
            let e = Error::new(ErrorClass::Arg, format!("comm_set_name: name of {} bytes is longer than MPI_MAX_OBJECT_NAME - 1 ({MAX})", name.len()));
            return self.ret("comm_set_name", Err(e));
        }
        *self.shared.name.borrow_mut() = name.to_string();
        Ok(())
    }

    /// MPI_Comm_get_name (empty for a communicator never named).
    pub fn name(&self) -> String {
        self.shared.name.borrow().clone()
    }
}
