//! Cartesian topologies (MPI 4.1 §8.5): dims_create, cart_create, the queries, cart_shift
//! exchanges, cart_sub, the neighbour lists and misuse; as thread jobs and under ebrun on
//! 1, 2, 3, 4 and 8 ranks.

mod common;
use earlybird::{
    dims_create, CartTopology, Comm, Comparison, ErrHandler, ErrorClass, Neighbors, Result,
    Topology, Universe, PROC_NULL,
};

/// dims_create over a table of cases (a local call: every rank checks the same table).
fn dims_create_table(u: &Universe) -> Result<()> {
    let _ = u;
    let ok: &[(i32, &[i32], &[i32])] = &[
        (1, &[0], &[1]),
        (2, &[0, 0], &[2, 1]),
        (4, &[0, 0], &[2, 2]),
        (6, &[0, 0], &[3, 2]),
        (7, &[0, 0], &[7, 1]),
        (8, &[0, 0, 0], &[2, 2, 2]),
        (12, &[0, 0], &[4, 3]),
        (16, &[0, 0, 0], &[4, 2, 2]),
        (24, &[0, 0, 0], &[4, 3, 2]),
        (30, &[0, 0, 0], &[5, 3, 2]),
        (36, &[0, 0], &[6, 6]),
        (72, &[0, 0, 0], &[6, 4, 3]),
        (6, &[0, 3, 0], &[2, 3, 1]),
        (8, &[2, 0], &[2, 4]),
        (12, &[0, 2, 0], &[3, 2, 2]),
        (9, &[3, 3], &[3, 3]),
        (5, &[0, 0, 0, 0], &[5, 1, 1, 1]),
        (1, &[], &[]),
    ];
    for &(n, dims, want) in ok {
        let mut d = dims.to_vec();
        dims_create(n, &mut d)?;
        assert_eq!(d, want, "dims_create({n}, {dims:?})");
    }
    let bad: &[(i32, &[i32], ErrorClass, &str)] = &[
        (7, &[0, 3, 0], ErrorClass::Dims, "[3]"),
        (6, &[4, 0], ErrorClass::Dims, "[4]"),
        (6, &[2, 2], ErrorClass::Dims, "[2, 2]"),
        (4, &[], ErrorClass::Dims, "4"),
        (6, &[0, -2], ErrorClass::Dims, "-2"),
        (0, &[0, 0], ErrorClass::Arg, "0"),
        (-4, &[0], ErrorClass::Arg, "-4"),
    ];
    for &(n, dims, class, names) in bad {
        let mut d = dims.to_vec();
        common::assert_err(dims_create(n, &mut d), class, names);
        assert_eq!(d, dims, "dims left untouched on error");
    }
    Ok(())
}

/// A balanced 2-D periodic grid of every rank, as dims_create picks it.
fn grid2d(w: &Comm, periods: [bool; 2]) -> Result<(Comm, [i32; 2])> {
    let mut dims = [0, 0];
    dims_create(w.size(), &mut dims)?;
    let c = w
        .cart_create(&dims, &periods, true)?
        .expect("the grid holds every rank");
    Ok((c, dims))
}

/// A periodic 2-D grid: queries agree with the row-major layout, and a ring exchange along
/// each dimension through cart_shift delivers the source's rank in both directions.
fn periodic_2d_exchange(u: &Universe) -> Result<()> {
    let w = u.world();
    let (c, dims) = grid2d(w, [true, true])?;
    assert_eq!((c.size(), c.rank()), (w.size(), w.rank()));
    assert_eq!(c.topo_test()?, Topology::Cartesian);
    assert_eq!(w.topo_test()?, Topology::None);
    assert_eq!(c.cartdim_get()?, 2);
    let me = [w.rank() / dims[1], w.rank() % dims[1]];
    assert_eq!(
        c.cart_get()?,
        CartTopology {
            dims: dims.to_vec(),
            periods: vec![true, true],
            coords: me.to_vec()
        }
    );
    for r in 0..c.size() {
        let xy = c.cart_coords(r)?;
        assert_eq!(xy, vec![r / dims[1], r % dims[1]]);
        assert_eq!(c.cart_rank(&xy)?, r);
    }
    // Periodic wrap in cart_rank, any multiple of the extent away.
    assert_eq!(
        c.cart_rank(&[me[0] - 3 * dims[0], me[1] + dims[1]])?,
        c.rank()
    );
    for d in 0..2 {
        let (src, dst) = c.cart_shift(d, 1)?;
        let mut up = me;
        up[d as usize] = (me[d as usize] + 1) % dims[d as usize];
        let mut down = me;
        down[d as usize] = (me[d as usize] + dims[d as usize] - 1) % dims[d as usize];
        assert_eq!((src, dst), (c.cart_rank(&down)?, c.cart_rank(&up)?));
        // Send my rank up; get the one below me. Then the other way with disp -1.
        let mut got = [-1i32];
        c.sendrecv(&[c.rank()], dst, d, &mut got, src, d)?;
        assert_eq!(got[0], src, "shift along {d}");
        let (src2, dst2) = c.cart_shift(d, -1)?;
        assert_eq!((src2, dst2), (dst, src));
        c.sendrecv(&[c.rank()], dst2, 10 + d, &mut got, src2, 10 + d)?;
        assert_eq!(got[0], src2);
        // A shift by the whole extent comes back to me.
        assert_eq!(c.cart_shift(d, dims[d as usize])?, (c.rank(), c.rank()));
    }
    // Neighbour lists: per dimension, -1 then +1.
    let nb = c.neighbors()?;
    let (s0, d0) = c.cart_shift(0, 1)?;
    let (s1, d1) = c.cart_shift(1, 1)?;
    assert_eq!(
        nb,
        Neighbors {
            sources: vec![s0, d0, s1, d1],
            destinations: vec![s0, d0, s1, d1]
        }
    );
    // Clones share the topology; a dup inherits it; a split does not.
    assert_eq!(c.clone().cart_get()?, c.cart_get()?);
    let d = c.dup()?;
    assert_eq!(d.cart_get()?, c.cart_get()?);
    assert_eq!(d.compare(&c), Comparison::Congruent);
    let s = c.split(0, 0)?.expect("a color");
    assert_eq!(s.topo_test()?, Topology::None);
    d.free()?;
    c.free()?;
    Ok(())
}

/// A non-periodic chain: PROC_NULL off both ends, and a shift exchange that uses it; a grid
/// smaller than the communicator leaves the last rank out; a 3-D grid.
fn nonperiodic_and_partial(u: &Universe) -> Result<()> {
    let w = u.world();
    let (n, me) = (w.size(), w.rank());
    let chain = w.cart_create(&[n], &[false], false)?.expect("all in");
    let (src, dst) = chain.cart_shift(0, 1)?;
    assert_eq!(src, if me == 0 { PROC_NULL } else { me - 1 });
    assert_eq!(dst, if me == n - 1 { PROC_NULL } else { me + 1 });
    let mut got = [-7i32];
    let st = chain.sendrecv(&[me * 10], dst, 1, &mut got, src, 1)?;
    if src == PROC_NULL {
        assert_eq!((got[0], st.source()), (-7, PROC_NULL));
    } else {
        assert_eq!(got[0], src * 10);
    }
    assert_eq!(
        chain.cart_shift(0, 2)?,
        (
            if me >= 2 { me - 2 } else { PROC_NULL },
            if me + 2 < n { me + 2 } else { PROC_NULL }
        )
    );
    assert_eq!(chain.neighbors()?.sources, vec![src, dst]);

    // A grid of n - 1 ranks (when n > 1): the last rank gets None.
    let m = (n - 1).max(1);
    let part = w.cart_create(&[m], &[true], false)?;
    assert_eq!(part.is_some(), me < m);
    assert_eq!(w.cart_map(&[m], &[true])?, (me < m).then_some(me));
    if let Some(p) = part {
        assert_eq!((p.size(), p.rank()), (m, me));
        let mut x = [me];
        let (s, d) = p.cart_shift(0, 1)?;
        p.sendrecv_replace(&mut x, d, 2, s, 2)?;
        assert_eq!(x[0], (me + m - 1) % m);
    }

    // 3-D: dims_create splits the ranks over three dimensions.
    let mut dims = [0, 0, 0];
    dims_create(n, &mut dims)?;
    let cube = w
        .cart_create(&dims, &[true, false, true], false)?
        .expect("all in");
    let t = cube.cart_get()?;
    assert_eq!(t.dims, dims.to_vec());
    assert_eq!(
        me,
        (t.coords[0] * dims[1] + t.coords[1]) * dims[2] + t.coords[2]
    );
    let nb = cube.neighbors()?;
    assert_eq!(nb.sources.len(), 6);
    for d in 0..3 {
        let (s, dd) = cube.cart_shift(d, 1)?;
        assert_eq!(
            &nb.destinations[2 * d as usize..2 * d as usize + 2],
            &[s, dd]
        );
    }
    // A zero-dimensional grid is one process.
    let zero = w.cart_create(&[], &[], false)?;
    assert_eq!(zero.as_ref().map(|z| z.size()), (me == 0).then_some(1));
    if let Some(z) = zero {
        assert_eq!(z.cartdim_get()?, 0);
        assert_eq!(z.cart_rank(&[])?, 0);
        assert_eq!(z.neighbors()?.sources, Vec::<i32>::new());
    }
    Ok(())
}

/// cart_sub into rows and columns: sizes, ranks, coordinates, and membership checked by a
/// ring that gathers every member's world rank.
fn cart_sub_rows_columns(u: &Universe) -> Result<()> {
    let w = u.world();
    let (c, dims) = grid2d(w, [false, true])?;
    let me = c.cart_get()?.coords;
    for (keep, fixed) in [([false, true], 0usize), ([true, false], 1usize)] {
        let kept = 1 - fixed;
        let sub = c.cart_sub(&keep)?;
        assert_eq!(sub.size(), dims[kept]);
        assert_eq!(sub.rank(), me[kept]);
        let t = sub.cart_get()?;
        assert_eq!(
            t,
            CartTopology {
                dims: vec![dims[kept]],
                periods: vec![kept == 1],
                coords: vec![me[kept]]
            }
        );
        // Pass world ranks around the subgrid's ring: I see exactly my row (or column).
        let (n, r) = (sub.size(), sub.rank());
        let mut seen = vec![w.rank()];
        let mut token = [w.rank()];
        for _ in 1..n {
            sub.sendrecv_replace(&mut token, (r + 1) % n, 3, (r + n - 1) % n, 3)?;
            seen.push(token[0]);
        }
        seen.sort_unstable();
        let want: Vec<i32> = (0..w.size())
            .filter(|&x| c.cart_coords(x).map(|xy| xy[fixed] == me[fixed]).unwrap())
            .collect();
        assert_eq!(seen, want, "members of the subgrid keeping {keep:?}");
        sub.free()?;
    }
    // Keep both: the same grid. Keep none: each rank alone in a 0-dimensional grid.
    let all = c.cart_sub(&[true, true])?;
    assert_eq!(all.compare(&c), Comparison::Congruent);
    assert_eq!(all.cart_get()?, c.cart_get()?);
    let none = c.cart_sub(&[false, false])?;
    assert_eq!((none.size(), none.rank(), none.cartdim_get()?), (1, 0, 0));
    // A sub of a sub.
    if c.size() >= 4 {
        let mut d3 = [0, 0, 0];
        dims_create(c.size(), &mut d3)?;
        let cube = w.cart_create(&d3, &[true; 3], false)?.expect("all in");
        let plane = cube.cart_sub(&[false, true, true])?;
        let line = plane.cart_sub(&[true, false])?;
        assert_eq!(line.size(), d3[1]);
        assert_eq!(line.rank(), cube.cart_get()?.coords[1]);
    }
    Ok(())
}

/// Misuse: each the right class, the message naming the value.
fn cart_misuse(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let n = w.size();
    let check = common::assert_err::<()>;
    check(
        w.cart_create(&[n], &[true, false], false).map(drop),
        ErrorClass::Dims,
        "periods has 2 entries",
    );
    check(
        w.cart_create(&[n + 1], &[true], false).map(drop),
        ErrorClass::Arg,
        &format!("[{}]", n + 1),
    );
    check(
        w.cart_create(&[i32::MAX, 4], &[true, true], false)
            .map(drop),
        ErrorClass::Arg,
        "larger than the communicator",
    );
    check(
        w.cart_create(&[n, -1], &[true, true], false).map(drop),
        ErrorClass::Dims,
        "-1",
    );
    check(
        w.cart_create(&[0], &[true], false).map(drop),
        ErrorClass::Dims,
        "dims[0] = 0",
    );
    check(
        w.cart_map(&[n + 1], &[false]).map(drop),
        ErrorClass::Arg,
        "larger",
    );
    // Cartesian queries on WORLD, which has no topology.
    check(
        w.cart_get().map(drop),
        ErrorClass::Topology,
        "MPI_COMM_WORLD",
    );
    check(
        w.cart_shift(0, 1).map(drop),
        ErrorClass::Topology,
        "cart_shift",
    );
    check(
        w.cart_rank(&[0]).map(drop),
        ErrorClass::Topology,
        "cart_rank",
    );
    check(
        w.cart_coords(0).map(drop),
        ErrorClass::Topology,
        "cart_coords",
    );
    check(
        w.cartdim_get().map(drop),
        ErrorClass::Topology,
        "cartdim_get",
    );
    check(
        w.cart_sub(&[true]).map(drop),
        ErrorClass::Topology,
        "cart_sub",
    );
    check(w.neighbors().map(drop), ErrorClass::Topology, "neighbors");
    let c = w
        .cart_create(&[n, 1], &[false, true], false)?
        .expect("all in");
    // The error handler is inherited.
    assert_eq!(c.errhandler(), ErrHandler::Return);
    check(
        c.cart_shift(2, 1).map(drop),
        ErrorClass::Dims,
        "direction 2",
    );
    check(
        c.cart_shift(-1, 1).map(drop),
        ErrorClass::Dims,
        "direction -1",
    );
    check(
        c.cart_rank(&[0]).map(drop),
        ErrorClass::Dims,
        "coords has 1 entries",
    );
    check(
        c.cart_rank(&[n, 0]).map(drop),
        ErrorClass::Arg,
        &format!("coords[0] = {n}"),
    );
    check(
        c.cart_rank(&[-1, 0]).map(drop),
        ErrorClass::Arg,
        "coords[0] = -1",
    );
    assert_eq!(c.cart_rank(&[0, 5])?, 0, "dimension 1 is periodic");
    check(
        c.cart_coords(n).map(drop),
        ErrorClass::Rank,
        &format!("rank {n}"),
    );
    check(c.cart_coords(-1).map(drop), ErrorClass::Rank, "rank -1");
    check(
        c.cart_sub(&[true]).map(drop),
        ErrorClass::Dims,
        "remain_dims has 1",
    );
    let gone = c.clone();
    c.free()?;
    check(gone.cart_get().map(drop), ErrorClass::Comm, "comm_free");
    check(gone.topo_test().map(drop), ErrorClass::Comm, "comm_free");
    Ok(())
}

/// Ranks that disagree on the grid: every rank gets MPI_ERR_ARG naming the first that
/// differs (rank 1 asks for a transposed grid).
fn cart_create_disagreement(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let dims = if w.rank() == 1 { [1, 2] } else { [2, 1] };
    common::assert_err(
        w.cart_create(&dims, &[false, false], false),
        ErrorClass::Arg,
        if w.rank() == 1 { "rank 0" } else { "rank 1" },
    );
    // Nothing was claimed: the next creation works.
    let c = w.cart_create(&[2, 1], &[false, false], false)?;
    assert_eq!(c.map(|c| c.size()), (w.rank() < 2).then_some(2));
    Ok(())
}

scenarios! {
    dims_create_table [1];
    periodic_2d_exchange [1, 2, 3, 4, 8];
    nonperiodic_and_partial [1, 2, 3, 4, 8];
    cart_sub_rows_columns [1, 2, 3, 4, 8];
    cart_misuse [1, 2, 3];
    cart_create_disagreement [2, 3];
}
