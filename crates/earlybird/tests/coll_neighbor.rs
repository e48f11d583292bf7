//! Neighbourhood collectives on Cartesian grids against references computed from the
//! neighbour lists: periodic and non-periodic 1-D and 2-D grids, extents 1 and 2 (where both
//! neighbours are one rank, MPI 4.1 §8.6: what goes towards -1 lands in the +1 block),
//! PROC_NULL blocks left as they were, blocking, nonblocking and persistent, and misuse.

mod common;

use common::{assert_err, check_eq, each_algorithm};
use earlybird::{
    dims_create, scope, Coll, Comm, ErrHandler, ErrorClass, Result, Universe, IN_PLACE, PROC_NULL,
};

scenarios! {
    neighbor_allgather_on_grids [1, 2, 3, 4, 8];
    neighbor_allgatherv_on_grids [1, 2, 3, 4, 8];
    neighbor_alltoall_on_grids [1, 2, 3, 4, 8];
    neighbor_alltoallv_on_grids [1, 2, 3, 4, 8];
    persistent_neighbor_restart [1, 2, 4];
    bad_arguments_are_errors [1, 2, 3];
}

const UNTOUCHED: i64 = -1;

/// What rank `src` sends in its block `k` as element `i`.
fn value(src: i32, k: usize, i: usize, round: usize) -> i64 {
    (src as i64 + 1) * 1_000_003 + k as i64 * 10_007 + i as i64 * 7 + round as i64
}

/// Every grid of `n` ranks the scenarios run on: 1-D and 2-D, periodic, not, and mixed, with
/// dimensions of extent 1 and 2.
fn grids(n: i32) -> Vec<(Vec<i32>, Vec<bool>)> {
    let mut d2 = [0, 0];
    dims_create(n, &mut d2).expect("dims_create");
    let mut v = vec![
        (vec![n], vec![true]),
        (vec![n], vec![false]),
        (d2.to_vec(), vec![true, true]),
        (d2.to_vec(), vec![true, false]),
        (vec![1, n], vec![true, false]),
        (vec![n, 1], vec![false, true]),
        (vec![1, n, 1], vec![true, true, true]),
    ];
    if n % 2 == 0 {
        v.push((vec![2, n / 2], vec![true, true]));
    }
    v
}

/// Run `f` on every grid, with every algorithm.
fn on_grids(u: &Universe, coll: Coll, mut f: impl FnMut(&Comm, &str) -> Result<()>) -> Result<()> {
    let w = u.world();
    for (dims, periods) in grids(w.size()) {
        let g = w
            .cart_create(&dims, &periods, false)?
            .expect("every rank is in the grid");
        each_algorithm(&g, coll, |c, name| {
            f(c, &format!("{dims:?} {periods:?} {name}"))
        })?;
        g.free()?;
    }
    Ok(())
}

fn neighbor_allgather_on_grids(u: &Universe) -> Result<()> {
    on_grids(u, Coll::NeighborAllgather, |c, what| {
        let nb = c.neighbors()?;
        let k = nb.sources.len();
        for count in [0usize, 1, 7, 5000] {
            let send: Vec<i64> = (0..count).map(|i| value(c.rank(), 0, i, 0)).collect();
            let mut want = vec![UNTOUCHED; k * count];
            for (b, &src) in nb.sources.iter().enumerate() {
                if src != PROC_NULL {
                    for i in 0..count {
                        want[b * count + i] = value(src, 0, i, 0);
                    }
                }
            }
            let mut recv = vec![UNTOUCHED; k * count];
            c.neighbor_allgather(&send, &mut recv)?;
            check_eq(
                &format!("neighbor_allgather {what} count {count}"),
                &recv,
                &want,
            );
            let mut r2 = vec![UNTOUCHED; k * count];
            scope(|s| -> Result<()> {
                c.ineighbor_allgather(s, &send, &mut r2)?.wait()?;
                Ok(())
            })?;
            check_eq(
                &format!("ineighbor_allgather {what} count {count}"),
                &r2,
                &want,
            );
        }
        Ok(())
    })
}

/// Rank `r`'s send count in a v form (its block `k`).
fn vcount(r: i32, k: usize, scale: usize) -> usize {
    ((r as usize * 3 + k) % 4) * scale
}

/// Blocks in reverse order with a gap of 1 after each.
fn layout_of(counts: &[usize]) -> (Vec<usize>, usize) {
    let mut d = vec![0; counts.len()];
    let mut at = 0;
    for i in (0..counts.len()).rev() {
        d[i] = at;
        at += counts[i] + 1;
    }
    (d, at)
}

fn neighbor_allgatherv_on_grids(u: &Universe) -> Result<()> {
    on_grids(u, Coll::NeighborAllgatherv, |c, what| {
        let nb = c.neighbors()?;
        for scale in [0usize, 1, 3, 2000] {
            let send: Vec<i64> = (0..vcount(c.rank(), 0, scale))
                .map(|i| value(c.rank(), 0, i, 0))
                .collect();
            // A PROC_NULL block gets a count too: it must stay untouched.
            let rc: Vec<usize> = nb
                .sources
                .iter()
                .map(|&s| {
                    if s == PROC_NULL {
                        2
                    } else {
                        vcount(s, 0, scale)
                    }
                })
                .collect();
            let (rd, len) = layout_of(&rc);
            let mut want = vec![UNTOUCHED; len];
            for (b, &src) in nb.sources.iter().enumerate() {
                if src != PROC_NULL {
                    for i in 0..rc[b] {
                        want[rd[b] + i] = value(src, 0, i, 0);
                    }
                }
            }
            let mut recv = vec![UNTOUCHED; len];
            c.neighbor_allgatherv(&send, &mut recv, &rc, &rd)?;
            check_eq(
                &format!("neighbor_allgatherv {what} scale {scale}"),
                &recv,
                &want,
            );
            let mut r2 = vec![UNTOUCHED; len];
            scope(|s| -> Result<()> {
                c.ineighbor_allgatherv(s, &send, &mut r2, &rc, &rd)?
                    .wait()?;
                Ok(())
            })?;
            check_eq(&format!("ineighbor_allgatherv {what}"), &r2, &want);
        }
        Ok(())
    })
}

/// The block of the source in slot `b` that lands in our slot `b`: the one it sent the other
/// way along the same dimension.
fn their_block(b: usize) -> usize {
    b ^ 1
}

fn neighbor_alltoall_on_grids(u: &Universe) -> Result<()> {
    on_grids(u, Coll::NeighborAlltoall, |c, what| {
        let nb = c.neighbors()?;
        let k = nb.destinations.len();
        for count in [0usize, 1, 7, 5000] {
            let send: Vec<i64> = (0..k * count)
                .map(|x| value(c.rank(), x / count.max(1), x % count.max(1), 0))
                .collect();
            let mut want = vec![UNTOUCHED; k * count];
            for (b, &src) in nb.sources.iter().enumerate() {
                if src != PROC_NULL {
                    for i in 0..count {
                        want[b * count + i] = value(src, their_block(b), i, 0);
                    }
                }
            }
            let mut recv = vec![UNTOUCHED; k * count];
            c.neighbor_alltoall(&send, &mut recv)?;
            check_eq(
                &format!("neighbor_alltoall {what} count {count}"),
                &recv,
                &want,
            );
            let mut r2 = vec![UNTOUCHED; k * count];
            scope(|s| -> Result<()> {
                c.ineighbor_alltoall(s, &send, &mut r2)?.wait()?;
                Ok(())
            })?;
            check_eq(
                &format!("ineighbor_alltoall {what} count {count}"),
                &r2,
                &want,
            );
        }
        Ok(())
    })
}

fn neighbor_alltoallv_on_grids(u: &Universe) -> Result<()> {
    on_grids(u, Coll::NeighborAlltoallv, |c, what| {
        let nb = c.neighbors()?;
        let r = c.rank();
        for scale in [0usize, 1, 3, 2000] {
            let sc: Vec<usize> = (0..nb.destinations.len())
                .map(|b| vcount(r, b, scale))
                .collect();
            let (sd, slen) = layout_of(&sc);
            let mut send = vec![-5i64; slen];
            for b in 0..sc.len() {
                for i in 0..sc[b] {
                    send[sd[b] + i] = value(r, b, i, 0);
                }
            }
            let rc: Vec<usize> = nb
                .sources
                .iter()
                .enumerate()
                .map(|(b, &s)| {
                    if s == PROC_NULL {
                        1
                    } else {
                        vcount(s, their_block(b), scale)
                    }
                })
                .collect();
            let (rd, rlen) = layout_of(&rc);
            let mut want = vec![UNTOUCHED; rlen];
            for (b, &src) in nb.sources.iter().enumerate() {
                if src != PROC_NULL {
                    for i in 0..rc[b] {
                        want[rd[b] + i] = value(src, their_block(b), i, 0);
                    }
                }
            }
            let mut recv = vec![UNTOUCHED; rlen];
            c.neighbor_alltoallv(&send, &sc, &sd, &mut recv, &rc, &rd)?;
            check_eq(
                &format!("neighbor_alltoallv {what} scale {scale}"),
                &recv,
                &want,
            );
            let mut r2 = vec![UNTOUCHED; rlen];
            scope(|s| -> Result<()> {
                c.ineighbor_alltoallv(s, &send, &sc, &sd, &mut r2, &rc, &rd)?
                    .wait()?;
                Ok(())
            })?;
            check_eq(&format!("ineighbor_alltoallv {what}"), &r2, &want);
        }
        Ok(())
    })
}

fn persistent_neighbor_restart(u: &Universe) -> Result<()> {
    let w = u.world();
    for (dims, periods) in grids(w.size()) {
        let g = w.cart_create(&dims, &periods, false)?.expect("in the grid");
        let nb = g.neighbors()?;
        let k = nb.sources.len();
        let count = 4;
        let r = g.rank();
        let mut send = vec![0i64; k * count];
        let mut recv = vec![UNTOUCHED; k * count];
        let mut gsend = vec![0i64; count];
        let mut grecv = vec![UNTOUCHED; k * count];
        scope(|s| -> Result<()> {
            let mut a = g.neighbor_alltoall_init(s, &mut send, &mut recv)?;
            let mut b = g.neighbor_allgather_init(s, &mut gsend, &mut grecv)?;
            for round in 0..50 {
                for (x, e) in a.send_buffer_mut::<i64>()?.iter_mut().enumerate() {
                    *e = value(r, x / count, x % count, round);
                }
                for (i, e) in b.send_buffer_mut::<i64>()?.iter_mut().enumerate() {
                    *e = value(r, 0, i, round);
                }
                b.start()?;
                a.start()?;
                a.wait()?;
                b.wait()?;
                let got = a.buffer_mut::<i64>()?;
                for (bk, &src) in nb.sources.iter().enumerate() {
                    for i in 0..count {
                        let want = if src == PROC_NULL {
                            UNTOUCHED
                        } else {
                            value(src, their_block(bk), i, round)
                        };
                        assert_eq!(
                            got[bk * count + i],
                            want,
                            "{dims:?} {periods:?} round {round}"
                        );
                    }
                }
                let got = b.buffer_mut::<i64>()?;
                for (bk, &src) in nb.sources.iter().enumerate() {
                    for i in 0..count {
                        let want = if src == PROC_NULL {
                            UNTOUCHED
                        } else {
                            value(src, 0, i, round)
                        };
                        assert_eq!(
                            got[bk * count + i],
                            want,
                            "allgather {dims:?} round {round}"
                        );
                    }
                }
            }
            Ok(())
        })?;
        g.free()?;
    }
    Ok(())
}

fn bad_arguments_are_errors(u: &Universe) -> Result<()> {
    let w: &Comm = u.world();
    w.set_errhandler(ErrHandler::Return);
    let mut recv = vec![0i32; 8];
    assert_err(
        w.neighbor_alltoall(&[1i32, 2], &mut recv),
        ErrorClass::Topology,
        "neighbor_alltoall",
    );
    assert_err(
        w.neighbor_allgatherv(&[1i32], &mut recv, &[1], &[0]),
        ErrorClass::Topology,
        "Cartesian",
    );
    let g = w
        .cart_create(&[w.size()], &[true], false)?
        .expect("in the grid");
    g.set_errhandler(ErrHandler::Return);
    assert_err(
        g.neighbor_alltoall(&[1i32, 2, 3], &mut recv),
        ErrorClass::Count,
        "3 elements",
    );
    assert_err(
        g.neighbor_allgather(&[1i32, 2, 3], &mut recv[..5]),
        ErrorClass::Count,
        "receive buffer",
    );
    assert_err(
        g.neighbor_alltoall(IN_PLACE, &mut recv),
        ErrorClass::Buffer,
        "MPI_IN_PLACE",
    );
    assert_err(
        g.neighbor_alltoallv(&[1i32], &[1, 0, 0], &[0, 0, 0], &mut recv, &[1, 1], &[0, 1]),
        ErrorClass::Arg,
        "3 entries",
    );
    assert_err(
        g.neighbor_allgatherv(&[1i32], &mut recv, &[1, 1], &[0, 0]),
        ErrorClass::Buffer,
        "overlap",
    );
    assert_err(
        g.neighbor_allgatherv(&[1i32], &mut recv, &[1, 1], &[0, 99]),
        ErrorClass::Count,
        "displacement 99",
    );
    // Everyone still agrees on what comes next.
    let mut out = [0i32; 2];
    g.neighbor_allgather(&[g.rank()], &mut out)?;
    let nb = g.neighbors()?;
    assert_eq!(out.to_vec(), nb.sources);
    g.free()?;
    Ok(())
}
