//! Where a job's ranks are when it spans hosts: this process's host, as the launcher numbers
//! them (PMI's process mapping, PMIx's node ids), and the network address of every rank on
//! another host (the others share this host, by the launcher's word: PMI's mapping, PMIx's
//! local peers). Locality comes from here, never from host names.

use crate::sys::ofi::Endpoint;
use std::sync::Mutex;

/// The hosts of a job, as one of its processes sees them.
pub(crate) struct Hosts {
    /// This process's host.
    node: u32,
    /// Per rank: its network address, `None` for the ranks of this process's host.
    cards: Vec<Option<Vec<u8>>>,
    /// This process's endpoint (for its rank), until its fabric takes it.
    endpoint: Mutex<Option<(u32, Endpoint)>>,
}

impl std::fmt::Debug for Hosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hosts")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Hosts {
    /// Rank `me` on host `node`, with its open endpoint `ep` and the addresses of the ranks
    /// on other hosts.
    pub(crate) fn new(node: u32, me: u32, ep: Endpoint, cards: Vec<Option<Vec<u8>>>) -> Hosts {
        Hosts {
            node,
            cards,
            endpoint: Mutex::new(Some((me, ep))),
        }
    }

    /// Rank `r`'s network address, `None` when it shares this host.
    pub(crate) fn card(&self, r: u32) -> Option<&[u8]> {
        self.cards.get(r as usize)?.as_deref()
    }

    /// This process's host, as the launcher numbers them.
    pub(crate) fn node(&self) -> u32 {
        self.node
    }

    /// The endpoint opened for rank `me`, once.
    pub(crate) fn take_endpoint(&self, me: u32) -> Result<Endpoint, String> {
        let mut g = self.endpoint.lock().unwrap_or_else(|p| p.into_inner());
        match g.take() {
            Some((r, ep)) if r == me => Ok(ep),
            other => {
                *g = other;
                Err(format!(
                    "rank {me} has no network endpoint in this process (a job across hosts \
                     runs one rank per process)"
                ))
            }
        }
    }
}
