//! Intercommunicators (MPI 4.1 §7.6): two disjoint groups, a local one (to which rank and
//! size refer) and a remote one (which point-to-point addresses: destinations and sources
//! are remote ranks, and statuses report them).
//!
//! An intercommunicator's handle keeps the remote group's rank map where an
//! intracommunicator keeps its own, so point-to-point, probes, nonblocking and persistent
//! operations work unchanged; the local group lives in the shared part. Its context pair is
//! free on every process of both groups: in MPI_Intercomm_create each group ANDs its free
//! masks, the leaders swap the results through the peer communicator, and each leader passes
//! the other group's mask and members on to its own group.
#![forbid(unsafe_code)]

use super::agree::{self, and_of, coll_tag, lowest_common, no_pair, Tags, MASK_BYTES};
use super::context::Mask;
use super::create::Shape;
use super::group::{Group, UNDEFINED};
use super::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;
use crate::p2p::TAG_UB;

/// A leader's report to its group: the other group's mask and members, or the error that
/// stopped the leader (class and message).
fn encode_report(r: &Result<(Mask, Vec<u32>)>) -> Vec<u8> {
    match r {
        Ok((mask, members)) => {
            let mut b = vec![1u8];
            b.extend(agree::mask_to_bytes(mask));
            b.extend(members.iter().flat_map(|m| m.to_le_bytes()));
            b
        }
        Err(e) => {
            let mut b = vec![0u8];
            b.extend(e.class().code().to_le_bytes());
            let d = e.detail();
            b.extend(&d.as_bytes()[..d.floor_char_boundary(MAX_DETAIL)]);
            b
        }
    }
}

const MAX_DETAIL: usize = 256;

/// The classes a leader's failure can have, from their numbers.
fn class_of(code: i32) -> ErrorClass {
    [
        ErrorClass::Rank,
        ErrorClass::Comm,
        ErrorClass::Arg,
        ErrorClass::Tag,
        ErrorClass::Intern,
        ErrorClass::ProcFailed,
    ]
    .into_iter()
    .find(|c| c.code() == code)
    .unwrap_or(ErrorClass::Other)
}

/// A mask followed by members, as leaders swap them and report them.
fn decode_group(b: &[u8]) -> Result<(Mask, Vec<u32>)> {
    if b.len() < MASK_BYTES || !(b.len() - MASK_BYTES).is_multiple_of(4) {
        return Err(Error::new(
            ErrorClass::Intern,
            format!(
                "intercomm_create: malformed group description of {} bytes",
                b.len()
            ),
        ));
    }
    let members = b[MASK_BYTES..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    Ok((agree::mask_from_bytes(&b[..MASK_BYTES]), members))
}

fn decode_report(b: &[u8]) -> Result<(Mask, Vec<u32>)> {
    match b.split_first() {
        Some((1, rest)) => decode_group(rest),
        Some((0, rest)) if rest.len() >= 4 => {
            let class = class_of(i32::from_le_bytes(rest[..4].try_into().expect("4 bytes")));
            let detail = String::from_utf8_lossy(&rest[4..]);
            Err(Error::new(
                class,
                format!("intercomm_create failed at the local leader: {detail}"),
            ))
        }
        _ => Err(Error::new(
            ErrorClass::Intern,
            format!(
                "intercomm_create: malformed leader report of {} bytes",
                b.len()
            ),
        )),
    }
}

impl Comm {
    /// MPI_Comm_test_inter: whether this is an intercommunicator.
    pub fn is_inter(&self) -> bool {
        self.shared.local.is_some()
    }

    /// Size of the group point-to-point addresses: the communicator's, or the remote
    /// group's of an intercommunicator.
    pub(crate) fn peers(&self) -> i32 {
        self.peers
    }

    fn check_inter(&self, what: &str) -> Result<()> {
        if !self.is_inter() {
            return Err(Error::new(
                ErrorClass::Comm,
                format!("{what} on an intracommunicator (it needs an intercommunicator)"),
            ));
        }
        Ok(())
    }

    /// MPI_Comm_remote_size: the size of the remote group; `MPI_ERR_COMM` on an
    /// intracommunicator.
    pub fn remote_size(&self) -> Result<i32> {
        let r = self.check_inter("comm_remote_size").map(|()| self.peers);
        self.ret("comm_remote_size", r)
    }

    /// MPI_Comm_remote_group: the remote group, in its rank order; `MPI_ERR_COMM` on an
    /// intracommunicator.
    pub fn remote_group(&self) -> Result<Group> {
        let r = self
            .check_inter("comm_remote_group")
            .map(|()| self.group_of(self.map.as_ref().expect("intercomm map").members.clone()));
        self.ret("comm_remote_group", r)
    }

    /// MPI_Intercomm_create: an intercommunicator between this communicator's group (the
    /// local group) and another, disjoint, group. Collective over this communicator; rank
    /// `local_leader` of it also talks with the other group's leader, rank `remote_leader`
    /// of `peer_comm` (`peer_comm` and `remote_leader` matter at the local leader only),
    /// with `tag` on `peer_comm`'s internal context. A failure at the leader (a bad remote
    /// leader, overlapping groups) is reported on every process of its group.
    pub fn intercomm_create(
        &self,
        local_leader: i32,
        peer_comm: &Comm,
        remote_leader: i32,
        tag: i32,
    ) -> Result<Comm> {
        let r = (|| {
            self.check_live()?;
            self.check_intra("intercomm_create")?;
            if !(0..self.size).contains(&local_leader) {
                return Err(Error::new(
                    ErrorClass::Rank,
                    format!("intercomm_create: local leader {local_leader} is not a rank of the local communicator (size {})", self.size),
                ));
            }
            if !(0..=TAG_UB).contains(&tag) {
                return Err(Error::new(
                    ErrorClass::Tag,
                    format!("intercomm_create: invalid tag {tag} (tags run from 0 to {TAG_UB})"),
                ));
            }
            let local = self.local_members();
            let seq = self.next_seq();
            let (mut salt, mut n) = (0, local.len());
            // Rounds as those of a nonblocking agreement (see `agree`), each one an agreement
            // within the group, a swap between the leaders and the leader's report to its
            // group: both groups see the same masks, so both go on, or neither.
            for round in 0..INTERCOMM_ROUNDS {
                let r = self.intercomm_round(
                    local_leader,
                    peer_comm,
                    remote_leader,
                    tag,
                    seq,
                    round,
                    salt,
                )?;
                if let Ok(made) = r {
                    return Ok(made);
                }
                if round == 0 {
                    // Every process knows both groups now: it draws the later rounds'
                    // windows from them and the tag, as the other group does.
                    let mut all = r.expect_err("no pair");
                    all.sort_unstable();
                    n = all.len();
                    let bytes = all.iter().flat_map(|m| m.to_le_bytes());
                    salt = super::cart::fnv(tag.to_le_bytes().into_iter().chain(bytes));
                }
            }
            Err(no_pair("intercomm_create", n))
        })();
        self.ret("intercomm_create", r)
    }

    /// Round `round` of MPI_Intercomm_create: the new intercommunicator, or, when the two
    /// groups' offers have no pair in common, the members of both groups (for the next
    /// round). An error of the round ends the call on every process.
    #[allow(clippy::too_many_arguments)]
    fn intercomm_round(
        &self,
        local_leader: i32,
        peer_comm: &Comm,
        remote_leader: i32,
        tag: i32,
        seq: u32,
        round: u32,
        salt: u64,
    ) -> Result<std::result::Result<Comm, Vec<u32>>> {
        let local = self.local_members();
        let ctx = self.ctx.internal().raw();
        // What this process offers: aside (see `agree`), a window it reserves until the
        // round ends; else every free pair, the first round's at least.
        let reserved = (crate::p2p::wait::aside().is_some() || round > 0).then(|| {
            let start = agree::window_start(salt, round);
            agree::reserve_window(&mut self.eng.borrow_mut(), start)
        });
        let release = |reserved: Option<(Vec<u32>, Mask)>| {
            if let Some((pairs, _)) = reserved {
                let mut e = self.eng.borrow_mut();
                for p in pairs {
                    super::context::release(&mut e, p);
                }
            }
        };
        let mut mine = match &reserved {
            Some((_, w)) => agree::mask_to_bytes(w),
            None => agree::mask_to_bytes(&super::context::free_mask(&mut self.eng.borrow_mut())),
        };
        mine.extend_from_slice(&local_leader.to_le_bytes());
        let me = self.rank as usize;
        let got = agree::exchange_aside(&self.eng, ctx, coll_tag(seq, 2 * round), &local, me, mine);
        let offers: Vec<Vec<u8>> = match got {
            Ok(o) => o,
            Err(e) => {
                release(reserved);
                return Err(e);
            }
        };
        if let Some(x) = offers
            .iter()
            .find(|x| x[MASK_BYTES..] != local_leader.to_le_bytes())
        {
            release(reserved);
            return Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "intercomm_create: the processes name different local leaders ({local_leader} and {})",
                    i32::from_le_bytes(x[MASK_BYTES..MASK_BYTES + 4].try_into().expect("4 bytes"))
                ),
            ));
        }
        let masks: Vec<Mask> = offers
            .iter()
            .map(|x| agree::mask_from_bytes(&x[..MASK_BYTES]))
            .collect();
        let local_mask = and_of(&masks);
        let report_tag = coll_tag(seq, 2 * round + 1);
        let swapped = if self.rank == local_leader {
            let got = self.leader_swap(&local, &local_mask, peer_comm, remote_leader, tag);
            let report = encode_report(&got);
            let mut sent = Ok(());
            for r in (0..self.size).filter(|&r| r != local_leader) {
                sent = sent.and_then(|()| {
                    agree::send_bytes(&self.eng, ctx, local[r as usize], report_tag, &report)
                });
            }
            sent.and(got)
        } else {
            let cap = 1 + MASK_BYTES + 4 * self.eng.borrow().size() as usize + 4 + MAX_DETAIL;
            let from = local[local_leader as usize];
            agree::swap_bytes(&self.eng, ctx, from, report_tag, None, cap)
                .and_then(|b| decode_report(&b))
        };
        release(reserved);
        let (remote_mask, remote) = swapped?;
        let Some(pair) = lowest_common([&local_mask, &remote_mask]) else {
            return Ok(Err(local.into_iter().chain(remote).collect()));
        };
        let shape = Shape {
            local,
            remote: Some(remote),
        };
        Ok(Ok(self.make(pair, shape, Info::new())))
    }

    /// The leader's part: swap (mask, members) with the remote leader through `peer_comm`.
    fn leader_swap(
        &self,
        local: &[u32],
        local_mask: &Mask,
        peer_comm: &Comm,
        remote_leader: i32,
        tag: i32,
    ) -> Result<(Mask, Vec<u32>)> {
        peer_comm.check_live()?;
        if !(0..peer_comm.peers).contains(&remote_leader) {
            return Err(Error::new(
                ErrorClass::Rank,
                format!(
                    "intercomm_create: remote leader {remote_leader} is not a rank of the peer communicator (size {})",
                    peer_comm.peers
                ),
            ));
        }
        let peer = peer_comm.ep(remote_leader) as u32;
        if local.contains(&peer) {
            return Err(Error::new(
                ErrorClass::Rank,
                format!("intercomm_create: remote leader {remote_leader} of the peer communicator is in the local group (the groups must be disjoint)"),
            ));
        }
        let mut mine = agree::mask_to_bytes(local_mask);
        mine.extend(local.iter().flat_map(|m| m.to_le_bytes()));
        let cap = MASK_BYTES + 4 * self.eng.borrow().size() as usize;
        let got = agree::swap_bytes(
            &self.eng,
            peer_comm.ctx.internal().raw(),
            peer,
            tag,
            Some(&mine),
            cap,
        )?;
        let (mask, remote) = decode_group(&got)?;
        if let Some(m) = remote.iter().find(|m| local.contains(m)) {
            return Err(Error::new(
                ErrorClass::Comm,
                format!(
                    "intercomm_create: process {m} is in both groups (the groups must be disjoint)"
                ),
            ));
        }
        Ok((mask, remote))
    }

    /// MPI_Intercomm_merge: an intracommunicator over both groups of this
    /// intercommunicator. The group whose processes give `high = false` comes first; when
    /// both groups give the same value, the group holding the lowest job rank comes first.
    /// All processes of a group must give the same value (`MPI_ERR_ARG` on every process
    /// otherwise). Collective over both groups.
    pub fn intercomm_merge(&self, high: bool) -> Result<Comm> {
        let r = (|| {
            self.check_live()?;
            self.check_inter("intercomm_merge")?;
            let (parts, offers, tags) = self.first_round(&[high as u8])?;
            let Shape { local, remote } = self.shape();
            let remote = remote.expect("intercomm");
            let high_of = |group: &[u32]| -> Result<bool> {
                let flags: Vec<u8> = group
                    .iter()
                    .map(|m| offers[parts.binary_search(m).expect("member")].1[0])
                    .collect();
                if flags.windows(2).any(|w| w[0] != w[1]) {
                    return Err(Error::new(
                        ErrorClass::Arg,
                        format!("intercomm_merge: the processes of one group gave different values of high ({flags:?} in rank order)"),
                    ));
                }
                Ok(flags[0] != 0)
            };
            let (lh, rh) = (high_of(&local)?, high_of(&remote)?);
            let local_first = if lh != rh {
                !lh
            } else {
                local.iter().min() < remote.iter().min()
            };
            let members = if local_first {
                [local, remote].concat()
            } else {
                [remote, local].concat()
            };
            let masks = offers.iter().map(|(m, _)| m);
            let pair = self.settle_pair("intercomm_merge", &parts, masks, tags)?;
            let shape = Shape {
                local: members,
                remote: None,
            };
            Ok(self.make(pair, shape, Info::new()))
        })();
        self.ret("intercomm_merge", r)
    }

    /// MPI_Comm_split on an intercommunicator: in each group the processes that give the
    /// same `color` (ordered by `key`, then by rank) form the local group of a new
    /// intercommunicator whose remote group is the other group's processes of that color.
    /// A process giving [`UNDEFINED`], or whose color the other group does
    /// not give, gets `None`. Collective over both groups.
    pub(crate) fn inter_split(&self, color: i32, key: i32) -> Result<Option<Comm>> {
        let mut mine = color.to_le_bytes().to_vec();
        mine.extend_from_slice(&key.to_le_bytes());
        let (parts, offers, tags) = self.first_round(&mine)?;
        if color == UNDEFINED {
            return Ok(None);
        }
        let at = |m: &u32| &offers[parts.binary_search(m).expect("member")].1;
        // The members of `group` (in rank order) that gave `color`, ordered by key then rank.
        let pick = |group: &[u32]| -> Vec<u32> {
            let mut v: Vec<(i32, usize, u32)> = group
                .iter()
                .enumerate()
                .filter(|(_, m)| i32_at(at(m), 0) == color)
                .map(|(r, m)| (i32_at(at(m), 4), r, *m))
                .collect();
            v.sort_unstable();
            v.into_iter().map(|(_, _, m)| m).collect()
        };
        let Shape { local, remote } = self.shape();
        self.inter_made(
            "comm_split",
            (&parts, &offers, tags),
            pick(&local),
            pick(&remote.expect("intercomm")),
        )
    }

    /// MPI_Comm_create on an intercommunicator: each group gives a subgroup of itself (the
    /// same on all its processes); the result joins the two subgroups, each in its group's
    /// order. A process outside its group's subgroup, or whose other group gives an empty
    /// one, gets `None`. Collective over both groups.
    pub(crate) fn inter_create(&self, group: &Group) -> Result<Option<Comm>> {
        let Shape { local, remote } = self.shape();
        let members = group.member_list();
        if let Some(m) = members.iter().find(|m| !local.contains(m)) {
            return Err(Error::new(
                ErrorClass::Group,
                format!("comm_create: process {m} of the group is not in the local group of the intercommunicator"),
            ));
        }
        // Each process tells where it stands in its group's subgroup (-1: not in it).
        let me = self.eng.borrow().rank();
        let index = members
            .iter()
            .position(|&m| m == me)
            .map_or(-1, |i| i as i32);
        let (parts, offers, tags) = self.first_round(&index.to_le_bytes())?;
        let at = |m: &u32| i32_at(&offers[parts.binary_search(m).expect("member")].1, 0);
        let pick = |group: &[u32]| -> Vec<u32> {
            let mut v: Vec<(i32, u32)> = group
                .iter()
                .map(|m| (at(m), *m))
                .filter(|(i, _)| *i >= 0)
                .collect();
            v.sort_unstable();
            v.into_iter().map(|(_, m)| m).collect()
        };
        if index < 0 {
            return Ok(None);
        }
        self.inter_made(
            "comm_create",
            (&parts, &offers, tags),
            pick(&local),
            pick(&remote.expect("intercomm")),
        )
    }

    /// The intercommunicator between `local` and `remote` (both non-empty, else `None`), on
    /// the context pair their processes settle on from the first round `(parts, offers,
    /// tags)` (see [`Comm::settle_pair`]).
    fn inter_made(
        &self,
        what: &'static str,
        (parts, offers, tags): (&[u32], &[super::agree::Offer], Tags),
        local: Vec<u32>,
        remote: Vec<u32>,
    ) -> Result<Option<Comm>> {
        if local.is_empty() || remote.is_empty() {
            return Ok(None);
        }
        // Both groups list the members alike: in endpoint order.
        let mut members: Vec<u32> = local.iter().chain(&remote).copied().collect();
        members.sort_unstable();
        let masks = members
            .iter()
            .map(|m| &offers[parts.binary_search(m).expect("member")].0);
        let pair = self.settle_pair(what, &members, masks, tags)?;
        let shape = Shape {
            local,
            remote: Some(remote),
        };
        Ok(Some(self.make(pair, shape, Info::new())))
    }
}

/// Rounds MPI_Intercomm_create makes before it fails: two internal tags per round (the
/// group's agreement and the leader's report), below fault tolerance's agreement's.
const INTERCOMM_ROUNDS: u32 = 15;

/// The little-endian i32 at `at` of `b`.
fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
