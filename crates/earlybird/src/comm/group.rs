//! Process groups (MPI 4.1 §7.3): ordered sets of processes, local objects with no
//! communication.
//!
//! A group lists the job-wide ranks (endpoint indices) of its members in group-rank order,
//! and remembers which job rank the calling process has, so that [`Group::rank`] can say
//! where the caller stands. Groups are immutable and cheap to clone (a shared slice).
//!
//! A group also knows who its job's ranks are (the job's [`Identities`]), so that groups of
//! an endpoint communicator (seed 003) and of its parent compare and translate by the MPI
//! processes they hold: endpoint 0 of each process is the parent rank that asked for it. Set
//! operations (union, intersection, difference) need both groups from one job.
//!
//! Errors: group calls are local and have no communicator whose handler could apply, so
//! they return their errors (MPI 4.1 raises such errors on MPI_COMM_SELF, whose handler is
//! "return" unless changed). A bad rank is `MPI_ERR_RANK`, a bad range `MPI_ERR_ARG`, each
//! with a message naming the value.
#![forbid(unsafe_code)]

use crate::bootstrap::{Identities, ProcId};
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::PROC_NULL;
use std::rc::Rc;
use std::sync::Arc;

/// MPI_UNDEFINED: a rank that is not in the group.
pub const UNDEFINED: i32 = -32766;

/// The result of comparing two groups or communicators (MPI_IDENT, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// Same members in the same order (for communicators: the same communicator).
    Ident,
    /// Communicators only: same group, different contexts.
    Congruent,
    /// Communicators only (seed 003's MPI_ALIASED): two handles on one communicator that
    /// are different ranks of it, endpoints of one process.
    Aliased,
    /// Same members, different order.
    Similar,
    /// Different members.
    Unequal,
}

/// An MPI group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    members: Rc<[u32]>,
    me: u32,
    ids: Arc<Identities>,
}

impl Group {
    pub(crate) fn new(members: Vec<u32>, me: u32, ids: Arc<Identities>) -> Group {
        Group {
            members: members.into(),
            me,
            ids,
        }
    }

    /// A group of the same job as this one.
    fn with(&self, members: Vec<u32>) -> Group {
        Group::new(members, self.me, self.ids.clone())
    }

    /// The serial of the job whose ranks the members are.
    pub(crate) fn serial(&self) -> u64 {
        self.ids.serial
    }

    /// The MPI processes of the members, in group order.
    fn procs(&self) -> impl Iterator<Item = ProcId> + '_ {
        self.members.iter().map(|&m| self.ids.id[m as usize])
    }

    /// Seed 003's MPI_Group_has_sharing: whether two members share an address space (threads
    /// of one process: ranks of a thread job, or endpoints of one process).
    pub fn has_sharing(&self) -> bool {
        let mut spaces: Vec<u64> = self
            .members
            .iter()
            .map(|&m| self.ids.space[m as usize])
            .collect();
        spaces.sort_unstable();
        spaces.windows(2).any(|w| w[0] == w[1])
    }

    /// Whether `other` is this very group (a clone of the same value), which then has the
    /// same members for as long as either lives.
    pub(crate) fn is(&self, other: &Group) -> bool {
        Rc::ptr_eq(&self.members, &other.members)
    }

    /// This process's view of the empty group (MPI_GROUP_EMPTY).
    pub fn empty_like(&self) -> Group {
        self.with(Vec::new())
    }

    /// The members' job ranks, in group order.
    pub(crate) fn member_list(&self) -> &[u32] {
        &self.members
    }

    /// MPI_Group_size.
    pub fn size(&self) -> i32 {
        self.members.len() as i32
    }

    /// MPI_Group_rank: the caller's rank in the group, `None` (MPI_UNDEFINED) if it is not a
    /// member.
    pub fn rank(&self) -> Option<i32> {
        self.members
            .iter()
            .position(|&m| m == self.me)
            .map(|r| r as i32)
    }

    /// The endpoint (job rank) of group rank `r`.
    pub(crate) fn member(&self, r: usize) -> u32 {
        self.members[r]
    }

    fn check_rank(&self, r: i32, what: &str) -> Result<usize> {
        if (0..self.size()).contains(&r) {
            Ok(r as usize)
        } else {
            Err(Error::new(
                ErrorClass::Rank,
                format!(
                    "{what}: rank {r} is not in the group (size {})",
                    self.size()
                ),
            ))
        }
    }

    /// Members at `ranks`, each checked and required distinct.
    fn pick(&self, ranks: impl IntoIterator<Item = i32>, what: &str) -> Result<Vec<u32>> {
        let mut seen = vec![false; self.members.len()];
        let mut out = Vec::new();
        for r in ranks {
            let i = self.check_rank(r, what)?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(Error::new(
                    ErrorClass::Rank,
                    format!("{what}: rank {r} is listed twice"),
                ));
            }
            out.push(self.members[i]);
        }
        Ok(out)
    }

    /// MPI_Group_incl: the members at `ranks`, in that order.
    pub fn incl(&self, ranks: &[i32]) -> Result<Group> {
        Ok(self.with(self.pick(ranks.iter().copied(), "group_incl")?))
    }

    /// MPI_Group_excl: the members not at `ranks`, in group order.
    pub fn excl(&self, ranks: &[i32]) -> Result<Group> {
        let drop = self.pick(ranks.iter().copied(), "group_excl")?;
        let keep = self
            .members
            .iter()
            .copied()
            .filter(|m| !drop.contains(m))
            .collect();
        Ok(self.with(keep))
    }

    /// The ranks a list of (first, last, stride) triplets names, in order.
    fn expand(&self, ranges: &[(i32, i32, i32)], what: &str) -> Result<Vec<i32>> {
        let mut out = Vec::new();
        for &(first, last, stride) in ranges {
            if stride == 0 {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!("{what}: range ({first}, {last}, {stride}) has stride 0"),
                ));
            }
            // Both ends must be ranks of the group: then every rank between them is too, and
            // the expansion is at most the group's size (no overflow, no huge allocation).
            for end in [first, last] {
                self.check_rank(end, &format!("{what}: range ({first}, {last}, {stride})"))?;
            }
            let span = last - first;
            if span != 0 && span.signum() != stride.signum() {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!("{what}: range ({first}, {last}, {stride}) never reaches {last} with stride {stride}"),
                ));
            }
            let n = span / stride + 1;
            out.extend((0..n).map(|k| first + k * stride));
        }
        Ok(out)
    }

    /// MPI_Group_range_incl: the members named by (first, last, stride) triplets, in order.
    pub fn range_incl(&self, ranges: &[(i32, i32, i32)]) -> Result<Group> {
        let ranks = self.expand(ranges, "group_range_incl")?;
        self.incl(&ranks).map_err(|e| {
            Error::new(
                e.class(),
                e.detail().replace("group_incl", "group_range_incl"),
            )
        })
    }

    /// MPI_Group_range_excl: the members not named by the triplets, in group order.
    pub fn range_excl(&self, ranges: &[(i32, i32, i32)]) -> Result<Group> {
        let ranks = self.expand(ranges, "group_range_excl")?;
        self.excl(&ranks).map_err(|e| {
            Error::new(
                e.class(),
                e.detail().replace("group_excl", "group_range_excl"),
            )
        })
    }

    fn check_same_job(&self, other: &Group, what: &str) -> Result<()> {
        if self.ids.serial != other.ids.serial {
            return Err(Error::new(
                ErrorClass::Group,
                format!("{what}: the groups come from different jobs (an endpoint communicator's and another's); combine groups of one communicator's job"),
            ));
        }
        if self.me != other.me {
            return Err(Error::new(
                ErrorClass::Group,
                format!("{what}: the groups belong to different processes"),
            ));
        }
        Ok(())
    }

    /// MPI_Group_union: all members of `self`, then those of `other` not in `self`.
    pub fn union(&self, other: &Group) -> Result<Group> {
        self.check_same_job(other, "group_union")?;
        let mut m: Vec<u32> = self.members.to_vec();
        m.extend(
            other
                .members
                .iter()
                .copied()
                .filter(|x| !self.members.contains(x)),
        );
        Ok(self.with(m))
    }

    /// MPI_Group_intersection: the members of `self` that are in `other`, in `self`'s order.
    pub fn intersection(&self, other: &Group) -> Result<Group> {
        self.check_same_job(other, "group_intersection")?;
        let m = self
            .members
            .iter()
            .copied()
            .filter(|x| other.members.contains(x))
            .collect();
        Ok(self.with(m))
    }

    /// MPI_Group_difference: the members of `self` that are not in `other`, in order.
    pub fn difference(&self, other: &Group) -> Result<Group> {
        self.check_same_job(other, "group_difference")?;
        let m = self
            .members
            .iter()
            .copied()
            .filter(|x| !other.members.contains(x))
            .collect();
        Ok(self.with(m))
    }

    /// MPI_Group_translate_ranks: the ranks in `other` of the processes at `ranks` in `self`;
    /// [`UNDEFINED`] for those not in `other`, PROC_NULL stays PROC_NULL.
    /// Groups of different jobs (an endpoint communicator's and its parent's) translate by
    /// the MPI processes they hold.
    pub fn translate_ranks(&self, ranks: &[i32], other: &Group) -> Result<Vec<i32>> {
        ranks
            .iter()
            .map(|&r| {
                if r == PROC_NULL {
                    return Ok(PROC_NULL);
                }
                let m = self.ids.id
                    [self.members[self.check_rank(r, "group_translate_ranks")?] as usize];
                Ok(other
                    .procs()
                    .position(|x| x == m)
                    .map_or(UNDEFINED, |p| p as i32))
            })
            .collect()
    }

    /// MPI_Group_compare, by the MPI processes the groups hold (so a group of an endpoint
    /// communicator with one endpoint per process is IDENT with its parent's).
    pub fn compare(&self, other: &Group) -> Comparison {
        let a: Vec<ProcId> = self.procs().collect();
        let b: Vec<ProcId> = other.procs().collect();
        if a == b {
            Comparison::Ident
        } else if a.len() == b.len() && a.iter().all(|m| b.contains(m)) {
            Comparison::Similar
        } else {
            Comparison::Unequal
        }
    }

    /// MPI_Group_free. Dropping the group does the same; this form exists for programs
    /// written against MPI's names. (There is no predefined handle to free by mistake in the
    /// Rust API: [`Group::empty_like`] returns an owned value.)
    pub fn free(self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(m: &[u32]) -> Group {
        Group::new(m.to_vec(), 2, Arc::new(Identities::first(8, false)))
    }

    #[test]
    fn incl_excl_ranges_and_set_algebra() {
        let w = g(&[0, 1, 2, 3, 4, 5]);
        assert_eq!(w.rank(), Some(2));
        let a = w.incl(&[4, 2, 0]).unwrap();
        assert_eq!(&*a.members, &[4, 2, 0]);
        assert_eq!(a.rank(), Some(1));
        assert_eq!(&*w.excl(&[0, 5]).unwrap().members, &[1, 2, 3, 4]);
        assert_eq!(
            &*w.range_incl(&[(5, 1, -2), (0, 0, 1)]).unwrap().members,
            &[5, 3, 1, 0]
        );
        assert_eq!(&*w.range_excl(&[(0, 4, 2)]).unwrap().members, &[1, 3, 5]);
        let b = w.incl(&[1, 2, 3]).unwrap();
        assert_eq!(&*a.union(&b).unwrap().members, &[4, 2, 0, 1, 3]);
        assert_eq!(&*a.intersection(&b).unwrap().members, &[2]);
        assert_eq!(&*a.difference(&b).unwrap().members, &[4, 0]);
        assert_eq!(
            a.translate_ranks(&[0, 1, 2, PROC_NULL], &b).unwrap(),
            vec![UNDEFINED, 1, UNDEFINED, PROC_NULL]
        );
        assert_eq!(w.incl(&[3]).unwrap().rank(), None);
        assert_eq!(a.compare(&w.incl(&[4, 2, 0]).unwrap()), Comparison::Ident);
        assert_eq!(a.compare(&w.incl(&[0, 2, 4]).unwrap()), Comparison::Similar);
        assert_eq!(a.compare(&b), Comparison::Unequal);
        assert_eq!(a.empty_like().size(), 0);
    }

    #[test]
    fn bad_input_names_the_value() {
        let w = g(&[0, 1, 2, 3]);
        let e = w.incl(&[1, 7]).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Rank);
        assert!(e.detail().contains("rank 7"), "{e}");
        let e = w.excl(&[2, 2]).unwrap_err();
        assert!(
            e.class() == ErrorClass::Rank && e.detail().contains("twice"),
            "{e}"
        );
        let e = w.range_incl(&[(0, 3, 0)]).unwrap_err();
        assert!(
            e.class() == ErrorClass::Arg && e.detail().contains("stride 0"),
            "{e}"
        );
        let e = w.range_incl(&[(3, 0, 1)]).unwrap_err();
        assert!(
            e.class() == ErrorClass::Arg && e.detail().contains("(3, 0, 1)"),
            "{e}"
        );
        let e = w.range_incl(&[(0, 6, 2)]).unwrap_err();
        assert!(
            e.class() == ErrorClass::Rank
                && e.detail().contains("group_range_incl")
                && e.detail().contains("rank 6"),
            "{e}"
        );
        let e = w.range_incl(&[(0, i32::MAX, 1)]).unwrap_err();
        assert!(
            e.class() == ErrorClass::Rank && e.detail().contains(&i32::MAX.to_string()),
            "{e}"
        );
        let e = w.range_excl(&[(i32::MIN, 3, 1)]).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Rank);
        let e = w.translate_ranks(&[-4], &w).unwrap_err();
        assert!(
            e.class() == ErrorClass::Rank && e.detail().contains("-4"),
            "{e}"
        );
        let other = Group::new(vec![0, 1], 1, w.ids.clone());
        assert_eq!(w.union(&other).unwrap_err().class(), ErrorClass::Group);
        let mut ep = Identities::first(8, false);
        ep.serial = 7;
        let other_job = Group::new(vec![0, 1], 2, Arc::new(ep));
        let e = w.union(&other_job).unwrap_err();
        assert!(
            e.class() == ErrorClass::Group && e.detail().contains("different jobs"),
            "{e}"
        );
    }
}
