//! The translation between a communicator's ranks and the job's endpoints: messages carry
//! endpoints, programs see ranks.
#![forbid(unsafe_code)]

use crate::error::Result;
use crate::status::Status;
use std::rc::Rc;

/// Rank translation of a communicator whose ranks are not the job's.
#[derive(Debug)]
pub(crate) struct RankMap {
    /// Communicator rank -> endpoint.
    pub(crate) members: Vec<u32>,
    /// Endpoint -> communicator rank, -1 for endpoints not in the communicator.
    ranks: Vec<i32>,
}

impl RankMap {
    pub(crate) fn new(members: Vec<u32>, endpoints: u32) -> RankMap {
        let mut ranks = vec![-1; endpoints as usize];
        for (r, &e) in members.iter().enumerate() {
            ranks[e as usize] = r as i32;
        }
        RankMap { members, ranks }
    }

    /// The endpoint of communicator rank `r` (in range).
    #[inline(always)]
    pub(crate) fn endpoint(&self, r: i32) -> u32 {
        self.members[r as usize]
    }

    /// The communicator rank of a status's source endpoint (negative values pass through).
    #[inline]
    pub(crate) fn rank_of(&self, source: i32) -> i32 {
        if source < 0 {
            source
        } else {
            self.ranks[source as usize]
        }
    }
}

/// Translate a status's source from endpoint to communicator rank.
#[inline]
pub(crate) fn to_comm_ranks(map: &Option<Rc<RankMap>>, r: Result<Status>) -> Result<Status> {
    match map {
        None => r,
        Some(m) => match r {
            Ok(mut st) => {
                st.source = m.rank_of(st.source);
                Ok(st)
            }
            Err(e) => Err(e.map_status(|mut st| {
                st.source = m.rank_of(st.source);
                st
            })),
        },
    }
}
