//! Cartesian topologies (MPI 4.1 §8.5): dims_create, cart_create, the queries on a Cartesian
//! communicator (cart_get, cart_rank, cart_coords, cart_shift, cartdim_get, topo_test),
//! cart_sub and cart_map, and the neighbour lists the neighbourhood collectives use.
//!
//! Ranks are laid out in row-major order (the last dimension varies fastest), as MPI says.
//! The topology is kept on the communicator: every handle (clone) sees it and a dup inherits
//! it.
//!
//! # Reorder
//!
//! `reorder = true` allows MPI to renumber the ranks; earlybird keeps the identity order (rank
//! `r` of the parent is rank `r` of the grid) whatever `reorder` says. On one host every rank
//! is as close to every other as any, so no renumbering would shorten a path. [`cart_map`]
//! answers accordingly.
//!
//! # Errors
//!
//! A wrong number of entries (`periods`, `coords` or `remain_dims` not as long as the grid
//! has dimensions), a negative or zero extent, a direction that is not a dimension, and
//! `dims_create` inputs no grid can satisfy are `MPI_ERR_DIMS`; a grid larger than the
//! communicator and a coordinate outside a non-periodic dimension are `MPI_ERR_ARG` (as
//! MPICH classes them); a rank outside the grid is `MPI_ERR_RANK`; a Cartesian query on a
//! communicator without a Cartesian topology is `MPI_ERR_TOPOLOGY`.
//!
//! [`cart_map`]: Comm::cart_map
#![forbid(unsafe_code)]

use super::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::info::Info;
use crate::p2p::PROC_NULL;
use std::rc::Rc;

/// The kind of topology a communicator carries (MPI_Topo_test).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// No topology (MPI_UNDEFINED).
    None,
    /// A Cartesian grid (MPI_CART).
    Cartesian,
    /// A graph (MPI_GRAPH).
    Graph,
    /// A distributed graph (MPI_DIST_GRAPH).
    DistGraph,
}

/// A Cartesian grid as one rank sees it (what MPI_Cart_get returns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CartTopology {
    /// Number of processes along each dimension.
    pub dims: Vec<i32>,
    /// Whether each dimension wraps around.
    pub periods: Vec<bool>,
    /// This rank's coordinates.
    pub coords: Vec<i32>,
}

/// The topology kept on a communicator.
#[derive(Clone, Debug)]
pub(crate) enum Topo {
    Cart(Rc<CartTopology>),
    Graph(Rc<super::graph::GraphTopo>),
    DistGraph(Rc<super::graph::DistGraphNeighbors>),
}

/// A communicator's neighbours in the order the neighbourhood collectives use them.
///
/// For a Cartesian communicator both lists are the same: for each dimension `d` in order,
/// the rank at displacement -1 along `d`, then the rank at displacement +1 (what
/// `cart_shift(d, 1)` returns as source and destination), with [`PROC_NULL`] off the edge of
/// a non-periodic dimension. A rank may appear more than once (a periodic dimension of
/// extent 1 or 2), as MPI requires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbors {
    /// Ranks data is received from (MPI's in-neighbours, `sources`).
    pub sources: Vec<i32>,
    /// Ranks data is sent to (MPI's out-neighbours, `destinations`).
    pub destinations: Vec<i32>,
}

fn dims_err(detail: String) -> Error {
    Error::new(ErrorClass::Dims, detail)
}

/// Number of processes in a grid of extents `dims` (1 for no dimension), checking each
/// extent is positive; `None` when it does not fit an `i32`.
fn grid_size(what: &str, dims: &[i32]) -> Result<Option<i32>> {
    if let Some((i, d)) = dims.iter().enumerate().find(|(_, &d)| d <= 0) {
        return Err(dims_err(format!(
            "{what}: dims[{i}] = {d}; every dimension needs at least one process"
        )));
    }
    Ok(dims.iter().try_fold(1i32, |p, &d| p.checked_mul(d)))
}

/// Check that `got` has an entry per dimension.
fn check_len(what: &str, name: &str, got: usize, ndims: usize) -> Result<()> {
    if got == ndims {
        Ok(())
    } else {
        Err(dims_err(format!(
            "{what}: {name} has {got} entries for a grid of {ndims} dimensions"
        )))
    }
}

/// MPI_Dims_create: fill the zero entries of `dims` so that the product of all entries is
/// `nnodes`, the filled extents being as close to each other as possible (the smallest
/// difference between the largest and the smallest filled extent; among equals, the
/// smallest largest extent) and in nonincreasing order. Nonzero entries are kept.
///
/// Errors: `nnodes < 1` is `MPI_ERR_ARG`; a negative entry, or fixed entries whose product
/// does not divide `nnodes` (or, with no zero entry, differs from it), is `MPI_ERR_DIMS`.
/// `dims` is left untouched on error.
pub fn dims_create(nnodes: i32, dims: &mut [i32]) -> Result<()> {
    if nnodes < 1 {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("dims_create: nnodes = {nnodes}; a grid needs at least one process"),
        ));
    }
    if let Some((i, d)) = dims.iter().enumerate().find(|(_, &d)| d < 0) {
        return Err(dims_err(format!(
            "dims_create: dims[{i}] = {d} is negative (0 means \"choose\")"
        )));
    }
    let fixed: i64 = dims
        .iter()
        .filter(|&&d| d > 0)
        .map(|&d| d as i64)
        .try_fold(1i64, |p, d| {
            p.checked_mul(d).filter(|&p| p <= nnodes as i64)
        })
        .unwrap_or(i64::MAX);
    let free = dims.iter().filter(|&&d| d == 0).count();
    let fixed_list = || format!("{:?}", dims.iter().filter(|&&d| d > 0).collect::<Vec<_>>());
    if nnodes as i64 % fixed != 0 || (free == 0 && fixed != nnodes as i64) {
        return Err(dims_err(format!(
            "dims_create: the fixed extents {} cannot make a grid of {nnodes} processes",
            fixed_list()
        )));
    }
    if free == 0 {
        return Ok(());
    }
    let split = balanced_factors((nnodes as i64 / fixed) as u32, free);
    for (slot, f) in dims.iter_mut().filter(|d| **d == 0).zip(split) {
        *slot = f as i32;
    }
    Ok(())
}

/// `k` nonincreasing factors of `m` whose largest and smallest differ the least (ties: the
/// larger factors compared from the smallest up, as MPICH chooses: 5040 in 3-D is
/// 21 x 16 x 15, not 20 x 18 x 14; 5616 in 4-D is 13 x 9 x 8 x 6, not 13 x 12 x 6 x 6). An
/// exhaustive search over nonincreasing factorisations drawn from the divisors of `m` (at
/// most 1,536 below 2^31), pruned by the best spread found so far; grids are small enough
/// that it is instant.
fn balanced_factors(m: u32, k: usize) -> Vec<u32> {
    struct Search {
        divisors: Vec<u32>, // descending
        cur: Vec<u32>,
        best: Option<(u32, Vec<u32>)>,
    }
    impl Search {
        fn go(&mut self, m: u32, k: usize, cap: u32) {
            if k == 0 {
                if m == 1 {
                    let (top, low) = (self.cur[0], self.cur[self.cur.len() - 1]);
                    // Ties in spread: the larger factors from the smallest up.
                    let better = |(s, b): &(u32, Vec<u32>)| {
                        (top - low)
                            .cmp(s)
                            .then_with(|| b.iter().rev().cmp(self.cur.iter().rev()))
                            == std::cmp::Ordering::Less
                    };
                    if self.best.as_ref().is_none_or(better) {
                        self.best = Some((top - low, self.cur.clone()));
                    }
                }
                return;
            }
            for i in 0..self.divisors.len() {
                let f = self.divisors[i];
                if f > cap || !m.is_multiple_of(f) {
                    continue;
                }
                // The later factors are at most f: f^k must reach m.
                if (f as u64)
                    .checked_pow(k as u32)
                    .is_some_and(|p| p < m as u64)
                {
                    break;
                }
                // The spread is at least top - f, and grows as f shrinks.
                let top = self.cur.first().copied().unwrap_or(f);
                if self.best.as_ref().is_some_and(|(s, _)| top - f > *s) {
                    break;
                }
                self.cur.push(f);
                self.go(m / f, k - 1, f);
                self.cur.pop();
            }
        }
    }
    let mut divisors: Vec<u32> = (1..=m.isqrt())
        .filter(|&d| m.is_multiple_of(d))
        .flat_map(|d| [d, m / d])
        .collect();
    divisors.sort_unstable_by(|a, b| b.cmp(a));
    divisors.dedup();
    let mut s = Search {
        divisors,
        cur: Vec::with_capacity(k),
        best: None,
    };
    s.go(m, k, m);
    s.best
        .map(|(_, v)| v)
        .expect("m = m * 1 * ... * 1 is always a factorisation")
}

/// Coordinates of rank `r` in a row-major grid of extents `dims`.
fn coords_of(dims: &[i32], mut r: i32) -> Vec<i32> {
    let mut c = vec![0; dims.len()];
    for (ci, &d) in c.iter_mut().zip(dims).rev() {
        *ci = r % d;
        r /= d;
    }
    c
}

impl CartTopology {
    /// The rank at `coords`, wrapping periodic dimensions; `None` off a non-periodic edge.
    fn rank_at(&self, coords: impl Iterator<Item = i64>) -> Option<i32> {
        let mut r: i64 = 0;
        for ((c, &d), &p) in coords.zip(&self.dims).zip(&self.periods) {
            let d = d as i64;
            let c = if p {
                c.rem_euclid(d)
            } else if (0..d).contains(&c) {
                c
            } else {
                return None;
            };
            r = r * d + c;
        }
        Some(r as i32)
    }

    /// The ranks at displacement `-disp` and `+disp` along `dir` (source, dest).
    fn shift(&self, dir: usize, disp: i32) -> (i32, i32) {
        let at = |delta: i64| {
            self.rank_at(self.coords.iter().enumerate().map(|(i, &c)| {
                if i == dir {
                    c as i64 + delta
                } else {
                    c as i64
                }
            }))
            .unwrap_or(PROC_NULL)
        };
        (at(-(disp as i64)), at(disp as i64))
    }

    fn size(&self) -> i32 {
        self.dims.iter().product()
    }
}

impl Comm {
    /// The Cartesian topology of this communicator, or `MPI_ERR_TOPOLOGY`.
    fn cart(&self, what: &str) -> Result<Rc<CartTopology>> {
        self.check_live()?;
        match self.shared.topo.get() {
            Some(Topo::Cart(c)) => Ok(c.clone()),
            _ => Err(Error::new(
                ErrorClass::Topology,
                format!("{what}: {} has no Cartesian topology", self.describe()),
            )),
        }
    }

    /// "communicator \"name\"", or "the communicator" when it has no name.
    fn describe(&self) -> String {
        match self.name() {
            n if n.is_empty() => "the communicator".to_string(),
            n => format!("communicator {n:?}"),
        }
    }

    /// Attach `topo` to a communicator just made.
    pub(super) fn set_topology(&self, topo: Topo) {
        let _ = self.shared.topo.set(topo);
    }

    /// The topology a dup inherits.
    pub(super) fn topology(&self) -> Option<Topo> {
        self.shared.topo.get().cloned()
    }

    /// MPI_Cart_create: a communicator over the first `dims.iter().product()` ranks of this
    /// one, arranged as a grid of extents `dims`, periodic along the dimensions where
    /// `periods` is true. Ranks beyond the grid get `None`. `reorder` is accepted and the
    /// identity order kept (see the module notes). Collective over this communicator; every
    /// rank must give the same `dims` and `periods` (checked: a rank that differs makes the
    /// call `MPI_ERR_ARG` on every rank).
    pub fn cart_create(
        &self,
        dims: &[i32],
        periods: &[bool],
        reorder: bool,
    ) -> Result<Option<Comm>> {
        let _ = reorder;
        let r = (|| {
            self.check_live()?;
            self.check_intra("cart_create")?;
            let what = "cart_create";
            check_len(what, "periods", periods.len(), dims.len())?;
            let n = self.checked_grid(what, dims)?;
            // Agree that every rank asked for the same grid (a digest of the arguments).
            let mut digest = fnv(dims.iter().flat_map(|d| d.to_le_bytes()));
            digest ^= fnv(periods.iter().map(|&p| p as u8)).rotate_left(1);
            let (parts, offers, tags) = self.first_round(&digest.to_le_bytes())?;
            if let Some(r) = offers
                .iter()
                .position(|(_, x)| x[..] != digest.to_le_bytes())
            {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!(
                        "{what}: rank {r} gave other dims or periods than {dims:?}, {periods:?}"
                    ),
                ));
            }
            if self.rank >= n {
                return Ok(None);
            }
            let picked: Vec<usize> = (0..n as usize).collect();
            let c = self.make_of(what, &parts, &offers, &picked, tags, Info::new())?;
            c.set_topology(Topo::Cart(Rc::new(CartTopology {
                dims: dims.to_vec(),
                periods: periods.to_vec(),
                coords: coords_of(dims, c.rank),
            })));
            Ok(Some(c))
        })();
        self.ret("cart_create", r)
    }

    /// The size of a grid of extents `dims`, which must fit in this communicator.
    fn checked_grid(&self, what: &str, dims: &[i32]) -> Result<i32> {
        match grid_size(what, dims)? {
            Some(n) if n <= self.size => Ok(n),
            n => Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "{what}: a grid of {dims:?} ({} processes) is larger than the communicator ({} processes)",
                    n.map_or_else(|| "more than 2^31".to_string(), |n| n.to_string()),
                    self.size
                ),
            )),
        }
    }

    /// MPI_Cart_map: the rank this process would have in a grid of `dims` made from this
    /// communicator, `None` (MPI_UNDEFINED) if it would be outside the grid. Local. Since
    /// [`cart_create`](Comm::cart_create) keeps the identity order, this is the rank itself
    /// when it is below the grid's size.
    pub fn cart_map(&self, dims: &[i32], periods: &[bool]) -> Result<Option<i32>> {
        let r = (|| {
            self.check_live()?;
            check_len("cart_map", "periods", periods.len(), dims.len())?;
            let n = self.checked_grid("cart_map", dims)?;
            Ok((self.rank < n).then_some(self.rank))
        })();
        self.ret("cart_map", r)
    }

    /// MPI_Topo_test: the kind of topology this communicator carries.
    pub fn topo_test(&self) -> Result<Topology> {
        let r = self.check_live().map(|()| match self.shared.topo.get() {
            Some(Topo::Cart(_)) => Topology::Cartesian,
            Some(Topo::Graph(_)) => Topology::Graph,
            Some(Topo::DistGraph(_)) => Topology::DistGraph,
            None => Topology::None,
        });
        self.ret("topo_test", r)
    }

    /// MPI_Cartdim_get: the number of dimensions of the grid.
    pub fn cartdim_get(&self) -> Result<i32> {
        let r = self.cart("cartdim_get").map(|c| c.dims.len() as i32);
        self.ret("cartdim_get", r)
    }

    /// MPI_Cart_get: the grid's extents and periodicity, and this rank's coordinates.
    pub fn cart_get(&self) -> Result<CartTopology> {
        let r = self.cart("cart_get").map(|c| (*c).clone());
        self.ret("cart_get", r)
    }

    /// MPI_Cart_rank: the rank at `coords`. Along a periodic dimension any coordinate is
    /// taken modulo the extent; along a non-periodic one a coordinate outside
    /// `0..extent` is `MPI_ERR_ARG`.
    pub fn cart_rank(&self, coords: &[i32]) -> Result<i32> {
        let r = self.cart("cart_rank").and_then(|c| {
            check_len("cart_rank", "coords", coords.len(), c.dims.len())?;
            c.rank_at(coords.iter().map(|&x| x as i64)).ok_or_else(|| {
                let i = (0..coords.len())
                    .find(|&i| !c.periods[i] && !(0..c.dims[i]).contains(&coords[i]))
                    .expect("a coordinate is out of range");
                Error::new(
                    ErrorClass::Arg,
                    format!(
                        "cart_rank: coords[{i}] = {} is outside 0..{} of a non-periodic dimension",
                        coords[i], c.dims[i]
                    ),
                )
            })
        });
        self.ret("cart_rank", r)
    }

    /// MPI_Cart_coords: the coordinates of `rank`.
    pub fn cart_coords(&self, rank: i32) -> Result<Vec<i32>> {
        let r = self.cart("cart_coords").and_then(|c| {
            if (0..c.size()).contains(&rank) {
                Ok(coords_of(&c.dims, rank))
            } else {
                Err(Error::new(
                    ErrorClass::Rank,
                    format!(
                        "cart_coords: rank {rank} is not in the grid of {} processes",
                        c.size()
                    ),
                ))
            }
        });
        self.ret("cart_coords", r)
    }

    /// MPI_Cart_shift: `(source, dest)`, the ranks at displacement `-disp` and `+disp` from
    /// this rank along dimension `direction`, wrapping if it is periodic, [`PROC_NULL`] off
    /// the edge if not. A direction that is not a dimension is `MPI_ERR_DIMS`.
    pub fn cart_shift(&self, direction: i32, disp: i32) -> Result<(i32, i32)> {
        let r = self.cart("cart_shift").and_then(|c| {
            if !(0..c.dims.len() as i32).contains(&direction) {
                return Err(dims_err(format!(
                    "cart_shift: direction {direction} is not a dimension of a {}-dimensional grid",
                    c.dims.len()
                )));
            }
            Ok(c.shift(direction as usize, disp))
        });
        self.ret("cart_shift", r)
    }

    /// The neighbour lists of this communicator's topology, in the order the neighbourhood
    /// collectives use (see [`Neighbors`]). `MPI_ERR_TOPOLOGY` without a topology.
    pub fn neighbors(&self) -> Result<Neighbors> {
        let r = self.neighbor_lists("neighbors");
        self.ret("neighbors", r)
    }

    /// Whether this communicator has a Cartesian topology.
    pub(crate) fn is_cartesian(&self) -> bool {
        matches!(self.topology(), Some(Topo::Cart(_)))
    }

    /// The neighbour lists for call `what`, the error not yet reported (the neighbourhood
    /// collectives report it as their own).
    pub(crate) fn neighbor_lists(&self, what: &str) -> Result<Neighbors> {
        match self.topology() {
            Some(Topo::Graph(g)) => {
                let list = g.neighbors_of(self.rank).to_vec();
                return Ok(Neighbors {
                    sources: list.clone(),
                    destinations: list,
                });
            }
            Some(Topo::DistGraph(g)) => {
                return Ok(Neighbors {
                    sources: g.sources.clone(),
                    destinations: g.destinations.clone(),
                })
            }
            None => {
                self.check_live()?;
                return Err(Error::new(
                    ErrorClass::Topology,
                    format!(
                        "{what}: {} has no topology (Cartesian, graph or distributed graph)",
                        self.describe()
                    ),
                ));
            }
            Some(Topo::Cart(_)) => {}
        }
        self.cart(what).map(|c| {
            let list: Vec<i32> = (0..c.dims.len())
                .flat_map(|d| {
                    let (lo, hi) = c.shift(d, 1);
                    [lo, hi]
                })
                .collect();
            Neighbors {
                sources: list.clone(),
                destinations: list,
            }
        })
    }

    /// MPI_Cart_sub: split the grid into subgrids that keep the dimensions where
    /// `remain_dims` is true; this rank gets the Cartesian communicator of its subgrid
    /// (ranks in row-major order of the kept coordinates). With no dimension kept, each rank
    /// gets a 0-dimensional grid of itself. Collective over this communicator.
    pub fn cart_sub(&self, remain_dims: &[bool]) -> Result<Comm> {
        let r = (|| {
            let c = self.cart("cart_sub")?;
            check_len("cart_sub", "remain_dims", remain_dims.len(), c.dims.len())?;
            let pick = |keep: bool| -> Vec<usize> {
                (0..c.dims.len())
                    .filter(|&i| remain_dims[i] == keep)
                    .collect()
            };
            let (kept, dropped) = (pick(true), pick(false));
            let linear = |idx: &[usize]| idx.iter().fold(0, |r, &i| r * c.dims[i] + c.coords[i]);
            let sub = self
                .split(linear(&dropped), linear(&kept))?
                .expect("every rank gives a color");
            sub.set_topology(Topo::Cart(Rc::new(CartTopology {
                dims: kept.iter().map(|&i| c.dims[i]).collect(),
                periods: kept.iter().map(|&i| c.periods[i]).collect(),
                coords: kept.iter().map(|&i| c.coords[i]).collect(),
            })));
            Ok(sub)
        })();
        self.ret("cart_sub", r)
    }
}

/// FNV-1a over bytes (a digest for argument agreement, not a security hash).
pub(super) fn fnv(bytes: impl Iterator<Item = u8>) -> u64 {
    bytes.fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dc(n: i32, d: &[i32]) -> Result<Vec<i32>> {
        let mut v = d.to_vec();
        dims_create(n, &mut v).map(|()| v)
    }

    #[test]
    fn dims_create_cases() {
        let ok = [
            (6, vec![0, 0], vec![3, 2]),
            (7, vec![0, 0], vec![7, 1]),
            (6, vec![0, 3, 0], vec![2, 3, 1]),
            (16, vec![0, 0, 0], vec![4, 2, 2]),
            (24, vec![0, 0, 0], vec![4, 3, 2]),
            (100, vec![0, 0, 0], vec![5, 5, 4]),
            (64, vec![0, 0, 0], vec![4, 4, 4]),
            // Ties in spread go to the larger factors from the smallest up, as MPICH.
            (5040, vec![0, 0, 0], vec![21, 16, 15]),
            (5616, vec![0, 0, 0, 0], vec![13, 9, 8, 6]),
            (1, vec![0, 0], vec![1, 1]),
            (12, vec![0], vec![12]),
            (8, vec![2, 0], vec![2, 4]),
            (1, vec![], vec![]),
            (9, vec![3, 3], vec![3, 3]),
            (1 << 20, vec![0; 4], vec![32, 32, 32, 32]),
        ];
        for (n, d, want) in ok {
            assert_eq!(dc(n, &d).unwrap(), want, "dims_create({n}, {d:?})");
        }
        for (n, d, class) in [
            (7, vec![0, 3, 0], ErrorClass::Dims),
            (4, vec![], ErrorClass::Dims),
            (6, vec![2, 2], ErrorClass::Dims),
            (6, vec![-1, 0], ErrorClass::Dims),
            (0, vec![0], ErrorClass::Arg),
            (-3, vec![0], ErrorClass::Arg),
            (i32::MAX, vec![i32::MAX, 2, 0], ErrorClass::Dims),
        ] {
            assert_eq!(
                dc(n, &d).unwrap_err().class(),
                class,
                "dims_create({n}, {d:?})"
            );
        }
    }

    #[test]
    fn row_major_coords_and_shift() {
        let t = CartTopology {
            dims: vec![2, 3],
            periods: vec![true, false],
            coords: coords_of(&[2, 3], 5),
        };
        assert_eq!(t.coords, vec![1, 2]);
        assert_eq!(t.rank_at([1i64, 2].into_iter()), Some(5));
        assert_eq!(t.rank_at([-1i64, 0].into_iter()), Some(3));
        assert_eq!(t.rank_at([0i64, 3].into_iter()), None);
        assert_eq!(t.shift(0, 1), (2, 2));
        assert_eq!(t.shift(1, 1), (4, PROC_NULL));
        assert_eq!(t.shift(1, -2), (PROC_NULL, 3));
    }
}
