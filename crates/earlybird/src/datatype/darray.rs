//! MPI_Type_create_darray (MPI 4.1 §5.1.4): the part of a global array that one process of
//! a process grid owns, under a block, cyclic or no distribution per dimension.
//!
//! Process `rank` sits at its coordinates in the grid `psizes` taken in row-major order
//! (whatever `order` says of the array, as MPI specifies). Along each dimension the process
//! owns a set of indices; the type's elements are the array elements all of whose indices it
//! owns, in the order the array stores them (`order`), and its extent is the whole array's,
//! so that a file view or a receive of one element covers the global array.
#![forbid(unsafe_code)]

use super::constructors::Order;
use super::decode::{Combiner, Distribution};
use super::Datatype;
use crate::error::{Error, ErrorClass, Result};

const WHAT: &str = "type_create_darray";

fn arg(msg: String) -> Error {
    Error::new(ErrorClass::Arg, format!("{WHAT}: {msg}"))
}

/// The indices a process at coordinate `coord` of `p` owns along a dimension of `g`
/// elements, as runs `(first, length)` in increasing order.
fn owned(
    dim: usize,
    g: usize,
    p: usize,
    coord: usize,
    d: Distribution,
) -> Result<Vec<(usize, usize)>> {
    match d {
        Distribution::Undistributed => {
            if p != 1 {
                return Err(arg(format!(
                    "dimension {dim} is not distributed but has {p} processes (need 1)"
                )));
            }
            Ok(vec![(0, g)])
        }
        Distribution::Block(darg) => {
            let b = match darg {
                Some(0) => return Err(arg(format!("dimension {dim}: block size 0"))),
                Some(b) => b,
                None => g.div_ceil(p),
            };
            if b.saturating_mul(p) < g {
                return Err(arg(format!(
                    "dimension {dim}: blocks of {b} on {p} processes cover {} of its {g} elements",
                    b.saturating_mul(p)
                )));
            }
            let start = coord.saturating_mul(b).min(g);
            let end = start.saturating_add(b).min(g);
            Ok(if end > start {
                vec![(start, end - start)]
            } else {
                vec![]
            })
        }
        Distribution::Cyclic(darg) => {
            let c = match darg {
                Some(0) => return Err(arg(format!("dimension {dim}: cyclic block size 0"))),
                Some(c) => c,
                None => 1,
            };
            // Saturating: a start past the dimension ends the runs.
            let step = p.saturating_mul(c);
            let mut runs = vec![];
            let mut start = coord.saturating_mul(c);
            while start < g {
                runs.push((start, c.min(g - start)));
                start = start.saturating_add(step);
            }
            Ok(runs)
        }
    }
}

impl Datatype {
    /// MPI_Type_create_darray: the elements of a `gsizes` array of `old` (stored in
    /// `order`) that process `rank` of a `psizes` process grid of `size` processes owns
    /// under `distribs`.
    #[allow(clippy::too_many_arguments)]
    pub fn create_darray(
        size: usize,
        rank: usize,
        gsizes: &[usize],
        distribs: &[Distribution],
        psizes: &[usize],
        order: Order,
        old: &Datatype,
    ) -> Result<Datatype> {
        let nd = gsizes.len();
        if nd == 0 || distribs.len() != nd || psizes.len() != nd {
            return Err(arg(format!(
                "{nd} global sizes, {} distributions, {} process counts (need as many of each, at least one)",
                distribs.len(),
                psizes.len()
            )));
        }
        if psizes.iter().try_fold(1usize, |a, &p| a.checked_mul(p)) != Some(size) {
            return Err(arg(format!(
                "process grid {psizes:?} does not hold the {size} processes"
            )));
        }
        if rank >= size {
            return Err(Error::new(
                ErrorClass::Rank,
                format!("{WHAT}: rank {rank} of {size} processes"),
            ));
        }
        if let Some(i) = gsizes.iter().position(|&g| g == 0) {
            return Err(arg(format!("global size 0 in dimension {i}")));
        }
        // Grid coordinates, row-major.
        let mut coords = vec![0; nd];
        let mut r = rank;
        for d in (0..nd).rev() {
            coords[d] = r % psizes[d];
            r /= psizes[d];
        }
        let runs: Vec<Vec<(usize, usize)>> = (0..nd)
            .map(|d| owned(d, gsizes[d], psizes[d], coords[d], distribs[d]))
            .collect::<Result<_>>()?;
        // Dimensions from slowest to fastest in storage, and their element strides.
        let dims: Vec<usize> = match order {
            Order::C => (0..nd).collect(),
            Order::Fortran => (0..nd).rev().collect(),
        };
        let mut stride = vec![1usize; nd];
        for w in (0..nd - 1).rev() {
            stride[dims[w]] = stride[dims[w + 1]]
                .checked_mul(gsizes[dims[w + 1]])
                .ok_or_else(|| arg("the global array's size overflows".into()))?;
        }
        let total = stride[dims[0]]
            .checked_mul(gsizes[dims[0]])
            .ok_or_else(|| arg("the global array's size overflows".into()))?;
        let ext = old.extent();
        let whole = isize::try_from(total)
            .ok()
            .and_then(|t| t.checked_mul(ext))
            .ok_or_else(|| arg("the global array's size in bytes overflows".into()))?;
        let fast = dims[nd - 1];
        let (mut lens, mut disps) = (vec![], vec![]);
        if runs.iter().all(|r| !r.is_empty()) {
            // Odometer over every owned index of the slower dimensions, then the fastest
            // dimension's runs.
            let outer: Vec<Vec<usize>> = dims[..nd - 1]
                .iter()
                .map(|&d| runs[d].iter().flat_map(|&(s, n)| s..s + n).collect())
                .collect();
            let mut at = vec![0usize; outer.len()];
            'all: loop {
                let base: usize = dims[..nd - 1]
                    .iter()
                    .zip(&at)
                    .zip(&outer)
                    .map(|((&d, &k), idx)| idx[k] * stride[d])
                    .sum();
                for &(s, n) in &runs[fast] {
                    lens.push(n);
                    // In range: `base + s` is an element of the array, whose size in bytes
                    // (`total` extents) was checked below to fit.
                    disps.push((base + s) as isize * ext);
                }
                // The next index of the slower dimensions, the last of them fastest.
                let mut w = outer.len();
                loop {
                    if w == 0 {
                        break 'all;
                    }
                    w -= 1;
                    at[w] += 1;
                    if at[w] < outer[w].len() {
                        break;
                    }
                    at[w] = 0;
                }
            }
        }
        let t = Datatype::hindexed(&lens, &disps, old)?;
        let t = Datatype::create_resized(&t, 0, whole)?;
        Ok(t.made_by(Combiner::Darray {
            size,
            rank,
            gsizes: gsizes.to_vec(),
            distribs: distribs.to_vec(),
            psizes: psizes.to_vec(),
            order,
            old: old.clone(),
        }))
    }
}
