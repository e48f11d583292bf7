//! Graph and distributed-graph topologies (MPI 4.1 §8.5.3, §8.5.4): creation, queries, and
//! the neighbourhood collectives over their neighbour lists; as thread jobs and under ebrun.

mod common;

use earlybird::{scope, ErrHandler, ErrorClass, Info, Result, Topology, Universe};

scenarios! {
    graph_create_and_neighbors [1, 2, 3, 4, 8];
    dist_graph_adjacent_and_neighbors [1, 2, 3, 4, 8];
    dist_graph_from_edges_anywhere [1, 2, 3, 4, 8];
    misuse [1, 2, 3];
}

/// Neighbours per node of [`ring_graph`].
fn degree(k: i32) -> usize {
    if k % 2 == 0 {
        3
    } else {
        2
    }
}

/// A ring over the first `k` ranks, with a chord to the opposite node when `k` is even:
/// rank `r`'s neighbours are `r + 1`, `r - 1` and `r + k / 2` (mod `k`). Symmetric, edge
/// multiplicities included, as the neighbourhood collectives need.
fn ring_graph(k: i32) -> (Vec<i32>, Vec<i32>) {
    let (mut index, mut edges) = (vec![], vec![]);
    for r in 0..k {
        edges.extend([(r + 1) % k, (r + k - 1) % k]);
        if k % 2 == 0 {
            edges.push((r + k / 2) % k);
        }
        index.push(edges.len() as i32);
    }
    (index, edges)
}

/// graph_create over all ranks but the last (when there are several): the last gets none;
/// the others query the graph and run neighbor_allgather (blocking and nonblocking) and
/// neighbor_alltoall over it.
fn graph_create_and_neighbors(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = w.size();
    let k = if n > 1 { n - 1 } else { 1 };
    let (index, edges) = ring_graph(k);
    let Some(g) = w.graph_create(&index, &edges, true)? else {
        assert_eq!(
            w.rank(),
            k,
            "only ranks beyond the graph get no communicator"
        );
        return Ok(());
    };
    let me = g.rank();
    assert_eq!((g.size(), g.topo_test()?), (k, Topology::Graph));
    let d = degree(k);
    assert_eq!(g.graphdims_get()?, (k, d as i32 * k));
    assert_eq!(g.graph_get()?, (index.clone(), edges.clone()));
    for r in 0..k as usize {
        assert_eq!(g.graph_neighbors(r as i32)?, edges[d * r..d * r + d]);
    }
    let nb = g.neighbors()?;
    assert_eq!(nb.sources, g.graph_neighbors(me)?);
    assert_eq!(nb.destinations, nb.sources);
    // neighbor_allgather: block j from neighbour j.
    let send = [me as i64 * 7, me as i64 * 7 + 1];
    let mut recv = vec![-1i64; 2 * d];
    g.neighbor_allgather(&send, &mut recv)?;
    let want: Vec<i64> = nb
        .sources
        .iter()
        .flat_map(|&s| [s as i64 * 7, s as i64 * 7 + 1])
        .collect();
    assert_eq!(recv, want);
    let mut recv2 = vec![-1i64; 2 * d];
    scope(|s| g.ineighbor_allgather(s, &send, &mut recv2)?.wait())?;
    assert_eq!(recv2, want);
    // neighbor_alltoall: block j to neighbour j. Neighbour s sends this rank the block of
    // the position this rank holds in s's list (a graph's lists are symmetric here: the
    // j-th occurrence of s in this list matches the j-th occurrence of this rank in s's).
    let send: Vec<i64> = (0..d as i64).map(|j| me as i64 * 100 + j).collect();
    let mut recv = vec![-1i64; d];
    g.neighbor_alltoall(&send[..], &mut recv)?;
    for (j, &s) in nb.sources.iter().enumerate() {
        let theirs = g.graph_neighbors(s)?;
        let nth = nb.sources[..j].iter().filter(|&&x| x == s).count();
        let pos = theirs
            .iter()
            .enumerate()
            .filter(|(_, &x)| x == me)
            .nth(nth)
            .map(|(p, _)| p)
            .expect("symmetric graph");
        assert_eq!(
            recv[j],
            s as i64 * 100 + pos as i64,
            "from neighbour {s} (slot {j})"
        );
    }
    g.free()
}

/// dist_graph_create_adjacent: rank r receives from r-1 and r-2 and sends to r+1 and r+2
/// (mod n), weighted; the queries return what was given; neighbor_alltoall delivers block k
/// of source s to slot k.
fn dist_graph_adjacent_and_neighbors(u: &Universe) -> Result<()> {
    let w = u.world();
    let (r, n) = (w.rank(), w.size());
    let sources = [(r + n - 1) % n, (r + 2 * n - 2) % n];
    let dests = [(r + 1) % n, (r + 2) % n];
    let g = w.dist_graph_create_adjacent(
        &sources,
        Some(&[3, 4]),
        &dests,
        Some(&[5, 6]),
        &Info::new(),
        false,
    )?;
    assert_eq!(g.topo_test()?, Topology::DistGraph);
    assert_eq!(g.dist_graph_neighbors_count()?, (2, 2, true));
    let nb = g.dist_graph_neighbors()?;
    assert_eq!(nb.sources, sources);
    assert_eq!(nb.destinations, dests);
    assert_eq!(
        (nb.source_weights, nb.destination_weights),
        (Some(vec![3, 4]), Some(vec![5, 6]))
    );
    let send = [r as i64 * 100, r as i64 * 100 + 1];
    for form in 0..3 {
        let mut recv = [-1i64; 2];
        match form {
            0 => g.neighbor_alltoall(&send[..], &mut recv)?,
            1 => scope(|s| {
                g.ineighbor_alltoall(s, &send[..], &mut recv)?
                    .wait()
                    .map(|_| ())
            })?,
            _ => scope(|s| -> Result<()> {
                let mut p = g.neighbor_alltoall_init(s, &send[..], &mut recv)?;
                p.start()?;
                p.wait()?;
                Ok(())
            })?,
        }
        assert_eq!(
            recv,
            [sources[0] as i64 * 100, sources[1] as i64 * 100 + 1],
            "form {form}"
        );
    }
    // neighbor_alltoallw: to destination k the element at byte 8 (1 - k) (the blocks in
    // reverse), from source k into byte 8 k, through the i64 datatype.
    let t = earlybird::Datatype::of::<i64>();
    let sspecs = [(1, 8, &t), (1, 0, &t)];
    let rspecs = [(1, 0, &t), (1, 8, &t)];
    for form in 0..3 {
        let mut recv = [-1i64; 2];
        match form {
            0 => g.neighbor_alltoallw(&send[..], &sspecs, &mut recv, &rspecs)?,
            1 => scope(|s| {
                g.ineighbor_alltoallw(s, &send[..], &sspecs, &mut recv, &rspecs)?
                    .wait()
                    .map(|_| ())
            })?,
            _ => scope(|s| -> Result<()> {
                let mut p = g.neighbor_alltoallw_init(s, &send[..], &sspecs, &mut recv, &rspecs)?;
                for _ in 0..2 {
                    p.start()?;
                    p.wait()?;
                }
                Ok(())
            })?,
        }
        // Source k sent this rank (its destination k) its element 1 - k.
        assert_eq!(
            recv,
            [sources[0] as i64 * 100 + 1, sources[1] as i64 * 100],
            "neighbor_alltoallw form {form}"
        );
    }
    // Unweighted.
    let g2 = w.dist_graph_create_adjacent(&sources, None, &dests, None, &Info::new(), true)?;
    assert_eq!(g2.dist_graph_neighbors_count()?, (2, 2, false));
    g2.free()?;
    g.free()
}

/// dist_graph_create with every edge of a ring given by rank 0 (the others give none):
/// each rank learns its in-edge from r-1 and its out-edge to r+1 with their weights; then
/// the same with each rank giving the edge into it.
fn dist_graph_from_edges_anywhere(u: &Universe) -> Result<()> {
    let w = u.world();
    let (r, n) = (w.rank(), w.size());
    let (src, deg, dst, wt): (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>) = if r == 0 {
        (
            (0..n).collect(),
            vec![1; n as usize],
            (0..n).map(|s| (s + 1) % n).collect(),
            (0..n).map(|s| s * 10).collect(),
        )
    } else {
        (vec![], vec![], vec![], vec![])
    };
    let g = w.dist_graph_create(&src, &deg, &dst, Some(&wt), &Info::new(), false)?;
    let nb = g.dist_graph_neighbors()?;
    let left = (r + n - 1) % n;
    assert_eq!(
        (nb.sources.clone(), nb.destinations.clone()),
        (vec![left], vec![(r + 1) % n])
    );
    assert_eq!(
        (nb.source_weights, nb.destination_weights),
        (Some(vec![left * 10]), Some(vec![r * 10]))
    );
    let mut recv = [-1i64; 3];
    g.neighbor_allgather(&[r as i64, 1, 2][..], &mut recv)?;
    assert_eq!(recv, [left as i64, 1, 2]);
    g.free()?;
    // Each rank gives the edge into itself, unweighted.
    let g = w.dist_graph_create(&[left], &[1], &[r], None, &Info::new(), false)?;
    assert_eq!(g.dist_graph_neighbors_count()?, (1, 1, false));
    let nb = g.dist_graph_neighbors()?;
    assert_eq!(
        (nb.sources, nb.destinations),
        (vec![left], vec![(r + 1) % n])
    );
    g.free()
}

/// Graph queries without a graph are MPI_ERR_TOPOLOGY; malformed graphs MPI_ERR_ARG, on every
/// rank also when only one rank's arguments are bad.
fn misuse(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let n = w.size();
    assert_eq!(w.graph_get().unwrap_err().class(), ErrorClass::Topology);
    assert_eq!(
        w.dist_graph_neighbors().unwrap_err().class(),
        ErrorClass::Topology
    );
    let e = w.graph_create(&[2, 1], &[0], false).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
    let e = w.graph_create(&[1], &[n + 5], false).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
    let e = w
        .dist_graph_create(&[0], &[2], &[0], None, &Info::new(), false)
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
    let e = w
        .dist_graph_create_adjacent(&[n], None, &[], None, &Info::new(), false)
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
    // One rank's bad arguments fail the call on every rank (none is left waiting).
    let me = w.rank();
    let e = if me == 0 {
        w.graph_create(&[1, 0], &[0], false)
    } else {
        w.graph_create(&[0], &[], false)
    }
    .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
    let e = if me == 0 {
        w.dist_graph_create(&[0], &[3], &[0], None, &Info::new(), false)
    } else {
        w.dist_graph_create(&[], &[], &[], None, &Info::new(), false)
    }
    .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
    let bad = if me == 0 { n } else { me };
    let e = w
        .dist_graph_create_adjacent(&[bad], None, &[me], None, &Info::new(), false)
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Arg, "{e}");
    w.set_errhandler(ErrHandler::Fatal);
    // And the communicator still works.
    w.barrier()
}
