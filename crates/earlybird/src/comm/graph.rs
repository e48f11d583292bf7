//! Graph and distributed-graph topologies (MPI 4.1 §8.5.3, §8.5.4) and their queries; the
//! neighbourhood collectives use their neighbour lists (`cart.rs`, [`Comm::neighbors`]).
//!
//! * A graph topology (MPI_Graph_create) is the whole graph, given identically on every
//!   rank as MPI's `index` and `edges` arrays; a rank's neighbours, both to send to and to
//!   receive from, are its adjacency list in `edges` order.
//! * A distributed graph (MPI_Dist_graph_create_adjacent, MPI_Dist_graph_create) keeps on
//!   each rank only its own in-neighbours (sources) and out-neighbours (destinations), with
//!   optional weights. The adjacent form takes them as given; the general form takes any
//!   edges from any rank, and the ranks exchange them (an alltoall of counts, an alltoallv
//!   of edges), each keeping the edges that end or start at it, ordered by the rank that
//!   gave them and then in the order given.
//!
//! As for Cartesian grids, `reorder` is accepted and the identity order kept: on one host no
//! renumbering would bring neighbours closer. The new communicator has no attributes and the
//! default info (topology constructors are not dups).
//!
//! # Errors
//!
//! Arrays of the wrong length, a negative degree, an `index` that decreases, a neighbour
//! that is not a rank, a graph larger than the communicator, and weights given for some
//! edges only are `MPI_ERR_ARG`; ranks that give different graphs to `graph_create` make it
//! `MPI_ERR_ARG` on every rank; a graph query on a communicator without that topology is
//! `MPI_ERR_TOPOLOGY`.
#![forbid(unsafe_code)]

use super::cart::Topo;
use super::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;
use std::rc::Rc;

/// A graph topology: MPI's `index` (cumulative degrees) and `edges` arrays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GraphTopo {
    pub(crate) index: Vec<i32>,
    pub(crate) edges: Vec<i32>,
}

impl GraphTopo {
    /// Rank `r`'s adjacency list.
    pub(crate) fn neighbors_of(&self, r: i32) -> &[i32] {
        let r = r as usize;
        let lo = if r == 0 {
            0
        } else {
            self.index[r - 1] as usize
        };
        &self.edges[lo..self.index[r] as usize]
    }
}

/// One rank's part of a distributed graph (what MPI_Dist_graph_neighbors returns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistGraphNeighbors {
    /// Ranks with an edge to this one (in-neighbours), and the edges' weights when the graph
    /// is weighted.
    pub sources: Vec<i32>,
    pub source_weights: Option<Vec<i32>>,
    /// Ranks this one has an edge to (out-neighbours), and their weights.
    pub destinations: Vec<i32>,
    pub destination_weights: Option<Vec<i32>>,
}

fn arg(what: &str, detail: String) -> Error {
    Error::new(ErrorClass::Arg, format!("{what}: {detail}"))
}

/// Every entry of `ranks` a rank of a communicator of `n`.
fn check_ranks(what: &str, name: &str, ranks: &[i32], n: i32) -> Result<()> {
    match ranks.iter().position(|r| !(0..n).contains(r)) {
        None => Ok(()),
        Some(i) => Err(arg(
            what,
            format!(
                "{name}[{i}] = {} is not a rank of a communicator of {n}",
                ranks[i]
            ),
        )),
    }
}

/// Weights for `n` edges, if given.
fn check_weights(what: &str, name: &str, w: Option<&[i32]>, n: usize) -> Result<Option<Vec<i32>>> {
    match w {
        None => Ok(None),
        Some(w) if w.len() == n => Ok(Some(w.to_vec())),
        Some(w) => Err(arg(what, format!("{} {name} given for {n} edges", w.len()))),
    }
}

impl Comm {
    /// A communicator over the first `n` ranks of this one (all when `n` is the size),
    /// with `topo`; `None` for ranks beyond. `local` is this rank's verdict on its own
    /// arguments: their digest (which must be the same on every rank: 0 when arguments may
    /// differ), or the error they gave. The ranks exchange verdicts before anything else, so
    /// that one rank's bad arguments fail the call on every rank instead of leaving the
    /// others waiting.
    fn with_topology(
        &self,
        what: &'static str,
        n: i32,
        local: Result<u64>,
        topo: impl FnOnce() -> Topo,
    ) -> Result<Option<Comm>> {
        let mut offer = vec![u8::from(local.is_ok())];
        offer.extend(local.as_ref().map_or(0, |d| *d).to_le_bytes());
        let (parts, offers, tags) = self.first_round(&offer)?;
        local?;
        if let Some(r) = offers.iter().position(|(_, x)| x.first() != Some(&1)) {
            return Err(arg(what, format!("rank {r} gave invalid arguments")));
        }
        if let Some(r) = offers.iter().position(|(_, x)| x[..] != offer[..]) {
            return Err(arg(
                what,
                format!("rank {r} gave another graph than this rank"),
            ));
        }
        if self.rank >= n {
            return Ok(None);
        }
        let picked: Vec<usize> = (0..n as usize).collect();
        let c = self.make_of(what, &parts, &offers, &picked, tags, Info::new())?;
        c.set_topology(topo());
        Ok(Some(c))
    }

    /// MPI_Graph_create: a communicator over the first `index.len()` ranks of this one,
    /// with the graph whose rank `r` has the neighbours `edges[index[r-1]..index[r]]`
    /// (`index[-1]` = 0). Ranks beyond the graph get `None`. Collective; every rank gives the
    /// same graph (checked). `reorder` is accepted and the identity order kept.
    pub fn graph_create(
        &self,
        index: &[i32],
        edges: &[i32],
        reorder: bool,
    ) -> Result<Option<Comm>> {
        let _ = reorder;
        let what = "graph_create";
        let r = (|| {
            self.check_live()?;
            self.check_intra(what)?;
            let n = index.len() as i32;
            let local = (|| {
                if n > self.size {
                    return Err(arg(
                        what,
                        format!(
                            "a graph of {n} nodes is larger than the communicator ({})",
                            self.size
                        ),
                    ));
                }
                let mut prev = 0;
                for (i, &x) in index.iter().enumerate() {
                    if x < prev {
                        return Err(arg(
                            what,
                            format!("index[{i}] = {x} is below index[{}] = {prev}", i.max(1) - 1),
                        ));
                    }
                    prev = x;
                }
                if prev as usize != edges.len() {
                    return Err(arg(
                        what,
                        format!("index ends at {prev} but {} edges are given", edges.len()),
                    ));
                }
                check_ranks(what, "edges", edges, n)?;
                Ok(super::cart::fnv(
                    index
                        .iter()
                        .chain(edges)
                        .flat_map(|x| x.to_le_bytes())
                        .chain((n as u32).to_le_bytes()),
                ))
            })();
            self.with_topology(what, n.min(self.size), local, || {
                Topo::Graph(Rc::new(GraphTopo {
                    index: index.to_vec(),
                    edges: edges.to_vec(),
                }))
            })
        })();
        self.ret(what, r)
    }

    fn graph(&self, what: &str) -> Result<Rc<GraphTopo>> {
        self.check_live()?;
        match self.topology() {
            Some(Topo::Graph(g)) => Ok(g),
            _ => Err(Error::new(
                ErrorClass::Topology,
                format!("{what}: the communicator has no graph topology"),
            )),
        }
    }

    /// MPI_Graphdims_get: (nodes, edges).
    pub fn graphdims_get(&self) -> Result<(i32, i32)> {
        let r = self
            .graph("graphdims_get")
            .map(|g| (g.index.len() as i32, g.edges.len() as i32));
        self.ret("graphdims_get", r)
    }

    /// MPI_Graph_get: the `index` and `edges` arrays.
    pub fn graph_get(&self) -> Result<(Vec<i32>, Vec<i32>)> {
        let r = self
            .graph("graph_get")
            .map(|g| (g.index.clone(), g.edges.clone()));
        self.ret("graph_get", r)
    }

    /// MPI_Graph_neighbors: rank `rank`'s neighbours (MPI_Graph_neighbors_count is their
    /// number).
    pub fn graph_neighbors(&self, rank: i32) -> Result<Vec<i32>> {
        let r = self.graph("graph_neighbors").and_then(|g| {
            if !(0..g.index.len() as i32).contains(&rank) {
                return Err(Error::new(
                    ErrorClass::Rank,
                    format!("graph_neighbors: rank {rank} is not a node of the graph"),
                ));
            }
            Ok(g.neighbors_of(rank).to_vec())
        });
        self.ret("graph_neighbors", r)
    }

    /// MPI_Graph_map: this process's rank in a graph of `index.len()` nodes made from this
    /// communicator, `None` (MPI_UNDEFINED) beyond it. Local.
    pub fn graph_map(&self, index: &[i32], edges: &[i32]) -> Result<Option<i32>> {
        let _ = edges;
        let r = self
            .check_live()
            .map(|()| (self.rank < index.len() as i32).then_some(self.rank));
        self.ret("graph_map", r)
    }

    /// MPI_Dist_graph_create_adjacent: a communicator over all ranks of this one where this
    /// rank receives from `sources` and sends to `destinations` (weights: `None` for
    /// MPI_UNWEIGHTED). Collective (it makes a communicator); each rank gives only its own
    /// neighbours, which must agree with the other ranks' (MPI leaves a mismatch erroneous).
    pub fn dist_graph_create_adjacent(
        &self,
        sources: &[i32],
        source_weights: Option<&[i32]>,
        destinations: &[i32],
        destination_weights: Option<&[i32]>,
        info: &Info,
        reorder: bool,
    ) -> Result<Comm> {
        let _ = (info, reorder);
        let what = "dist_graph_create_adjacent";
        let r = (|| {
            self.check_live()?;
            self.check_intra(what)?;
            let local = (|| {
                check_ranks(what, "sources", sources, self.size)?;
                check_ranks(what, "destinations", destinations, self.size)?;
                let sw = check_weights(what, "source weights", source_weights, sources.len())?;
                let dw = check_weights(
                    what,
                    "destination weights",
                    destination_weights,
                    destinations.len(),
                )?;
                Ok((sw, dw))
            })();
            let weights = local.as_ref().ok().cloned();
            let made = self.with_topology(what, self.size, local.map(|_| 0), move || {
                let (sw, dw) = weights.expect("valid arguments");
                Topo::DistGraph(Rc::new(DistGraphNeighbors {
                    sources: sources.to_vec(),
                    source_weights: sw,
                    destinations: destinations.to_vec(),
                    destination_weights: dw,
                }))
            })?;
            Ok(made.expect("every rank is in it"))
        })();
        self.ret(what, r)
    }

    /// MPI_Dist_graph_create: a communicator over all ranks of this one with the edges every
    /// rank gives: for each `i`, edges from `sources[i]` to the next `degrees[i]` entries of
    /// `destinations` (with as many `weights`, or `None` for MPI_UNWEIGHTED). Collective;
    /// each rank then knows the edges that end or start at it.
    pub fn dist_graph_create(
        &self,
        sources: &[i32],
        degrees: &[i32],
        destinations: &[i32],
        weights: Option<&[i32]>,
        info: &Info,
        reorder: bool,
    ) -> Result<Comm> {
        let _ = (info, reorder);
        let what = "dist_graph_create";
        let r = (|| {
            self.check_live()?;
            self.check_intra(what)?;
            let n = self.size as usize;
            let local = (|| {
                if degrees.len() != sources.len() {
                    return Err(arg(
                        what,
                        format!("{} degrees for {} sources", degrees.len(), sources.len()),
                    ));
                }
                if let Some(i) = degrees.iter().position(|&d| d < 0) {
                    return Err(arg(
                        what,
                        format!("degrees[{i}] = {} is negative", degrees[i]),
                    ));
                }
                let total: usize = degrees.iter().map(|&d| d as usize).sum();
                if total != destinations.len() {
                    return Err(arg(
                        what,
                        format!(
                            "the degrees add up to {total} but {} destinations are given",
                            destinations.len()
                        ),
                    ));
                }
                check_ranks(what, "sources", sources, self.size)?;
                check_ranks(what, "destinations", destinations, self.size)?;
                let w = check_weights(what, "weights", weights, total)?;
                // Each edge (source, destination, weight) goes to both its ends (once when they
                // are the same rank).
                let mut out: Vec<Vec<i32>> = vec![vec![]; n];
                let mut k = 0;
                for (&s, &d) in sources.iter().zip(degrees) {
                    for _ in 0..d {
                        let (t, wt) = (destinations[k], w.as_ref().map_or(1, |w| w[k]));
                        out[s as usize].extend([s, t, wt]);
                        if t != s {
                            out[t as usize].extend([s, t, wt]);
                        }
                        k += 1;
                    }
                }
                Ok((out, w.is_some()))
            })();
            // Every rank learns whether any rank's edges were invalid (and whether any gave
            // weights: MPI requires all or none alike) before the edges travel.
            let mut flags = [
                i32::from(local.is_err()),
                local.as_ref().map_or(0, |l| i32::from(l.1)),
            ];
            self.allreduce(crate::coll::IN_PLACE, &mut flags, &crate::coll::op::Op::MAX)?;
            let (out, _) = local?;
            if flags[0] != 0 {
                return Err(arg(what, "another rank gave invalid edges".into()));
            }
            let counts: Vec<i32> = out.iter().map(|v| v.len() as i32).collect();
            let mut got = vec![0i32; n];
            self.alltoall(&counts[..], &mut got)?;
            let scounts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
            let rcounts: Vec<usize> = got.iter().map(|&c| c as usize).collect();
            let displs = |c: &[usize]| {
                c.iter()
                    .scan(0, |at, &x| {
                        let d = *at;
                        *at += x;
                        Some(d)
                    })
                    .collect::<Vec<usize>>()
            };
            let send: Vec<i32> = out.concat();
            let mut recv = vec![0i32; rcounts.iter().sum()];
            self.alltoallv(
                &send[..],
                &scounts,
                &displs(&scounts),
                &mut recv,
                &rcounts,
                &displs(&rcounts),
            )?;
            let weighted = flags[1] != 0;
            let me = self.rank;
            let mut nb = DistGraphNeighbors {
                sources: vec![],
                source_weights: weighted.then(Vec::new),
                destinations: vec![],
                destination_weights: weighted.then(Vec::new),
            };
            for e in recv.chunks_exact(3) {
                let (s, t, wt) = (e[0], e[1], e[2]);
                if t == me {
                    nb.sources.push(s);
                    if let Some(v) = nb.source_weights.as_mut() {
                        v.push(wt);
                    }
                }
                if s == me {
                    nb.destinations.push(t);
                    if let Some(v) = nb.destination_weights.as_mut() {
                        v.push(wt);
                    }
                }
            }
            let made =
                self.with_topology(what, self.size, Ok(0), move || Topo::DistGraph(Rc::new(nb)))?;
            Ok(made.expect("every rank is in it"))
        })();
        self.ret(what, r)
    }

    fn dist_graph(&self, what: &str) -> Result<Rc<DistGraphNeighbors>> {
        self.check_live()?;
        match self.topology() {
            Some(Topo::DistGraph(g)) => Ok(g),
            _ => Err(Error::new(
                ErrorClass::Topology,
                format!("{what}: the communicator has no distributed graph topology"),
            )),
        }
    }

    /// MPI_Dist_graph_neighbors_count: (in-degree, out-degree, weighted).
    pub fn dist_graph_neighbors_count(&self) -> Result<(i32, i32, bool)> {
        let r = self.dist_graph("dist_graph_neighbors_count").map(|g| {
            (
                g.sources.len() as i32,
                g.destinations.len() as i32,
                g.source_weights.is_some(),
            )
        });
        self.ret("dist_graph_neighbors_count", r)
    }

    /// MPI_Dist_graph_neighbors: this rank's in- and out-neighbours and their weights.
    pub fn dist_graph_neighbors(&self) -> Result<DistGraphNeighbors> {
        let r = self
            .dist_graph("dist_graph_neighbors")
            .map(|g| (*g).clone());
        self.ret("dist_graph_neighbors", r)
    }
}
