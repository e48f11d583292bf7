//! Collectives through the communicator's shared memory (issue 18, item 3): where they run,
//! their results in all three forms, many nonblocking ones in flight (more than the slots),
//! persistent ones started in a different order on each rank, more persistent ones than
//! there are lanes, reproducible bits beside the message-based algorithms, and
//! communicators that get their region later (idup) or never (a split of one rank).

mod common;

use earlybird::coll::last_algorithm;
use earlybird::request::{start_all, wait_all};
use earlybird::{
    scope, Coll, Comm, Datatype, ErrHandler, ErrorClass, Info, Op, Result, TypedMut, Universe,
    IN_PLACE,
};

scenarios! {
    shm_runs_where_it_fits [2, 3, 4, 8];
    many_nonblocking_in_flight [2, 3, 4];
    persistent_in_any_start_order_and_past_the_lanes [2, 3];
    bits_match_the_message_algorithms [2, 3, 4, 8];
    region_comes_with_a_blocking_call [2, 4];
    runs_by_messages_in_between [2, 3, 4];
    blocking_barrier_and_bcast_by_default [2, 3, 4];
    blocking_allreduce_by_default [2, 3, 4, 8];
    nonblocking_through_the_region [2, 3, 4, 8];
}

/// A duplicate of `w` with the shared-memory algorithm forced for `colls`.
fn forced(w: &Comm, colls: &[Coll]) -> Result<Comm> {
    let mut info = Info::new();
    for c in colls {
        info.set(&format!("earlybird_coll_{}", c.name()), "shm")?;
    }
    w.dup_with_info(&info)
}

fn value(rank: i32, i: usize, round: usize) -> i64 {
    (rank as i64 + 1) * 1_000_003 + (i as i64) * 7 + round as i64 * 13
}

/// Default choices on WORLD (its region is made at init), forced ones on a duplicate, and
/// calls too large for a slot, which run by messages; every result checked.
fn shm_runs_where_it_fits(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    w.barrier()?;
    assert_eq!(last_algorithm(), "shm", "barrier on WORLD");
    let mut out = [0i64; 3];
    w.allreduce(&[me as i64; 3], &mut out, &Op::SUM)?;
    let want = (0..n as i64).sum::<i64>();
    assert_eq!(out, [want; 3]);
    // Blocking: straight through the region at any size (`shm_blocking.rs`).
    assert_eq!(
        last_algorithm(),
        "shm",
        "allreduce of 24 bytes on {n} ranks"
    );
    // Nonblocking: straight through the region too (`shm_nonblocking.rs`).
    let three = [me as i64; 3];
    scope(|s| -> Result<()> {
        let mut q = w.iallreduce(s, &three, &mut out, &Op::SUM)?;
        assert_eq!(
            last_algorithm(),
            "shm",
            "iallreduce of 24 bytes on {n} ranks"
        );
        q.wait()?;
        Ok(())
    })?;
    assert_eq!(out, [want; 3]);

    let c = forced(
        w,
        &[Coll::Barrier, Coll::Bcast, Coll::Reduce, Coll::Allreduce],
    )?;
    for round in 0..50 {
        let root = (round % n as usize) as i32;
        // Blocking.
        let mut b = vec![0i64; 1 + round % 100];
        if me == root {
            for (i, x) in b.iter_mut().enumerate() {
                *x = value(root, i, round);
            }
        }
        c.bcast(&mut b, root)?;
        assert_eq!(last_algorithm(), "shm");
        assert!(b
            .iter()
            .enumerate()
            .all(|(i, &x)| x == value(root, i, round)));
        let mine: Vec<i64> = (0..5).map(|i| value(me, i, round)).collect();
        let mut r = vec![0i64; 5];
        c.reduce(&mine, &mut r, &Op::SUM, root)?;
        assert_eq!(last_algorithm(), "shm");
        if me == root {
            for (i, &x) in r.iter().enumerate() {
                assert_eq!(x, (0..n).map(|q| value(q, i, round)).sum::<i64>());
            }
        }
        // In place, at the root and everywhere.
        let mut ip: Vec<i64> = (0..5).map(|i| value(me, i, round)).collect();
        if me == root {
            c.reduce(IN_PLACE, &mut ip, &Op::MAX, root)?;
            for (i, &x) in ip.iter().enumerate() {
                assert_eq!(x, value(n - 1, i, round));
            }
        } else {
            c.reduce(&ip, &mut [] as &mut [i64], &Op::MAX, root)?;
        }
        let mut ip: Vec<i64> = (0..5).map(|i| value(me, i, round)).collect();
        c.allreduce(IN_PLACE, &mut ip, &Op::MIN)?;
        assert_eq!(last_algorithm(), "shm");
        assert!(ip.iter().enumerate().all(|(i, &x)| x == value(0, i, round)));
        c.barrier()?;
        assert_eq!(last_algorithm(), "shm");
    }
    // Nonblocking and persistent.
    let (one, mine) = ([me as i64 + 1, 1], [me as i64]);
    let mut a = [0i64; 2];
    scope(|s| -> Result<()> {
        let mut q = c.iallreduce(s, &one, &mut a, &Op::SUM)?;
        assert_eq!(last_algorithm(), "shm");
        q.wait()?;
        Ok(())
    })?;
    assert_eq!(a, [(1..=n as i64).sum(), n as i64]);
    let mut m = [0i64];
    scope(|s| -> Result<()> {
        let mut p = c.allreduce_init(s, &mine, &mut m, &Op::MAX)?;
        assert_eq!(last_algorithm(), "shm");
        for _ in 0..100 {
            p.start()?;
            p.wait()?;
        }
        Ok(())
    })?;
    assert_eq!(m[0], n as i64 - 1);
    // A contribution larger than a slot: by messages, forced or not.
    let big: Vec<i64> = (0..2000).map(|i| value(me, i, 0)).collect();
    let mut out = vec![0i64; 2000];
    c.allreduce(&big, &mut out, &Op::SUM)?;
    assert_ne!(last_algorithm(), "shm");
    for (i, &x) in out.iter().enumerate() {
        assert_eq!(x, (0..n).map(|q| value(q, i, 0)).sum::<i64>());
    }
    let mut b = vec![me as u8; 4096];
    c.bcast(&mut b, 0)?;
    assert_ne!(last_algorithm(), "shm");
    assert!(b.iter().all(|&x| x == 0));
    c.free()
}

/// Three times as many nonblocking collectives in flight as the communicator has slots,
/// completed newest first: a rank may not reuse a slot until every rank has read it.
fn many_nonblocking_in_flight(u: &Universe) -> Result<()> {
    let w = u.world();
    let c = forced(
        w,
        &[Coll::Barrier, Coll::Bcast, Coll::Allreduce, Coll::Reduce],
    )?;
    let (me, n) = (c.rank(), c.size());
    const K: usize = 24;
    for round in 0..20 {
        let mine: Vec<[i64; 2]> = (0..K).map(|k| [value(me, k, round), 1]).collect();
        let mut sums = vec![[0i64; 2]; K];
        let mut bc: Vec<[i64; 4]> = (0..K)
            .map(|k| {
                if me == (k % n as usize) as i32 {
                    [value(me, k, round); 4]
                } else {
                    [0; 4]
                }
            })
            .collect();
        let mut red = vec![[0i64; 2]; K];
        scope(|s| -> Result<()> {
            let mut reqs = Vec::new();
            for (k, ((m, out), (b, r))) in mine
                .iter()
                .zip(sums.iter_mut())
                .zip(bc.iter_mut().zip(red.iter_mut()))
                .enumerate()
            {
                reqs.push(c.iallreduce(s, &m[..], &mut out[..], &Op::SUM)?);
                assert_eq!(last_algorithm(), "shm");
                reqs.push(c.ibcast(s, &mut b[..], (k % n as usize) as i32)?);
                reqs.push(c.ibarrier(s)?);
                reqs.push(c.ireduce(s, &m[..], &mut r[..], &Op::SUM, 0)?);
            }
            // Newest first, and each finished before the next is waited for.
            while let Some(mut r) = reqs.pop() {
                r.wait()?;
            }
            Ok(())
        })?;
        for k in 0..K {
            let want = [(0..n).map(|q| value(q, k, round)).sum::<i64>(), n as i64];
            assert_eq!(sums[k], want, "round {round} call {k}");
            let root = (k % n as usize) as i32;
            assert_eq!(bc[k], [value(root, k, round); 4], "round {round} bcast {k}");
            if me == 0 {
                assert_eq!(red[k], want, "round {round} reduce {k}");
            }
        }
    }
    c.free()
}

/// More persistent collectives than the communicator has lanes for: the first ones run in
/// shared memory, the rest by messages; each rank starts them all together in an order of
/// its own (MPI lets it), repeatedly.
fn persistent_in_any_start_order_and_past_the_lanes(u: &Universe) -> Result<()> {
    let w = u.world();
    let c = forced(w, &[Coll::Allreduce, Coll::Bcast, Coll::Barrier])?;
    let (me, n) = (c.rank(), c.size());
    const P: usize = 20;
    let mine: Vec<[i64; 3]> = (0..P).map(|k| [value(me, k, 0); 3]).collect();
    let mut outs = vec![[0i64; 3]; P];
    let mut bc = [0i64; 2];
    scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        let mut shm = 0;
        for (m, o) in mine.iter().zip(outs.iter_mut()) {
            reqs.push(c.allreduce_init(s, &m[..], &mut o[..], &Op::SUM)?);
            shm += usize::from(last_algorithm() == "shm");
        }
        reqs.push(c.bcast_init(s, &mut bc[..], n - 1)?);
        reqs.push(c.barrier_init(s)?);
        assert_eq!(shm, 16, "the first 16 persistent allreduces have lanes");
        // Rank r rotates the order by r and reverses it on odd ranks.
        let len = reqs.len();
        let mut order: Vec<usize> = (0..len).map(|i| (i + me as usize * 5) % len).collect();
        if me % 2 == 1 {
            order.reverse();
        }
        let mut mine_order: Vec<_> = Vec::new();
        let mut slots: Vec<Option<earlybird::Request>> = reqs.into_iter().map(Some).collect();
        for &i in &order {
            mine_order.push((i, slots[i].take().expect("once")));
        }
        for round in 0..30 {
            if me == n - 1 {
                let (_, b) = mine_order
                    .iter_mut()
                    .find(|(i, _)| *i == P)
                    .expect("the bcast");
                b.buffer_mut::<i64>()?.copy_from_slice(&[round, -round]);
            }
            let mut rs: Vec<&mut earlybird::Request> =
                mine_order.iter_mut().map(|(_, r)| r).collect();
            start_all(&mut rs)?;
            wait_all(&mut rs)?;
            let (_, b) = mine_order
                .iter_mut()
                .find(|(i, _)| *i == P)
                .expect("the bcast");
            assert_eq!(b.buffer_mut::<i64>()?, &[round, -round]);
        }
        Ok(())
    })?;
    for (k, o) in outs.iter().enumerate() {
        assert_eq!(
            *o,
            [(0..n).map(|q| value(q, k, 0)).sum::<i64>(); 3],
            "allreduce {k}"
        );
    }
    c.free()
}

/// Float sums whose bits depend on the association: shared memory gives the bits of the
/// message-based algorithms, on every rank, reduce and allreduce alike.
fn bits_match_the_message_algorithms(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    let mine: Vec<f64> = (0..120)
        .map(|i| {
            let x = ((me as u64 + 1) * 2_654_435_761 + i as u64 * 40_503) % 2001;
            (x as f64 - 1000.0) * 10f64.powi((i % 17) - 8)
        })
        .collect();
    let mut info = Info::new();
    info.set("earlybird_coll_allreduce", "recursive_doubling")?;
    let msgs = w.dup_with_info(&info)?;
    let mut want = vec![0.0f64; mine.len()];
    msgs.allreduce(&mine, &mut want, &Op::SUM)?;
    let c = forced(w, &[Coll::Allreduce, Coll::Reduce])?;
    let mut got = vec![0.0f64; mine.len()];
    c.allreduce(&mine, &mut got, &Op::SUM)?;
    assert_eq!(last_algorithm(), "shm");
    assert!(
        want.iter()
            .zip(&got)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "allreduce bits"
    );
    let root = w.size() - 1;
    let mut r = vec![0.0f64; mine.len()];
    c.reduce(&mine, &mut r, &Op::SUM, root)?;
    if me == root {
        assert!(
            want.iter().zip(&r).all(|(a, b)| a.to_bits() == b.to_bits()),
            "reduce bits"
        );
    }
    msgs.free()?;
    c.free()
}

/// A communicator from idup has no region until its first blocking collective; a split of
/// one rank never has one. Both give the right results throughout.
fn region_comes_with_a_blocking_call(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = w.size();
    let mut info = Info::new();
    info.set("earlybird_coll_allreduce", "shm")?;
    let c = scope(|s| -> Result<Comm> {
        let (mut r, pending) = w.idup_with_info(s, &info)?;
        r.wait()?;
        pending.comm()
    })?;
    let (one, two) = ([1i32], [2i32]);
    let mut out = [0i32; 1];
    scope(|s| -> Result<()> {
        c.iallreduce(s, &one, &mut out, &Op::SUM)?.wait()?;
        Ok(())
    })?;
    assert_ne!(last_algorithm(), "shm", "no region before a blocking call");
    assert_eq!(out, [n]);
    c.barrier()?;
    scope(|s| -> Result<()> {
        c.iallreduce(s, &two, &mut out, &Op::SUM)?.wait()?;
        Ok(())
    })?;
    assert_eq!(
        last_algorithm(),
        "shm",
        "a region after the first blocking call"
    );
    assert_eq!(out, [2 * n]);
    c.free()?;
    let alone = w.split(w.rank(), 0)?.expect("a color");
    alone.barrier()?;
    assert_ne!(last_algorithm(), "shm");
    let mut o = [0i32];
    alone.allreduce(&[5i32], &mut o, &Op::SUM)?;
    assert_eq!(o, [5]);
    alone.free()
}

/// Calls that run by messages take their numbers on the region's lane but store nothing
/// there: a shared-memory call after more of them than there are slots must still find
/// every rank's slot free (each rank says it is done with the older runs when it opens
/// its next one), blocking and nonblocking.
fn runs_by_messages_in_between(u: &Universe) -> Result<()> {
    let w = u.world();
    let c = forced(w, &[Coll::Barrier, Coll::Allreduce])?;
    let (me, n) = (c.rank(), c.size());
    let mut all = vec![0i32; n as usize];
    for round in 0..5 {
        for _ in 0..(20 + round) {
            c.allgather(&[me], &mut all)?;
            assert_ne!(last_algorithm(), "shm");
        }
        c.barrier()?;
        assert_eq!(last_algorithm(), "shm");
        let one = [1i64];
        let mut out = [0i64];
        let mine = [me];
        let mut many = vec![vec![0i32; n as usize]; 12];
        scope(|s| -> Result<()> {
            let mut reqs = Vec::new();
            for m in many.iter_mut() {
                reqs.push(c.iallgather(s, &mine, &mut m[..])?);
            }
            wait_all(&mut reqs)?;
            Ok(())
        })?;
        assert!(many.iter().all(|m| *m == (0..n).collect::<Vec<_>>()));
        scope(|s| -> Result<()> {
            c.iallreduce(s, &one, &mut out, &Op::SUM)?.wait()?;
            Ok(())
        })?;
        assert_eq!(last_algorithm(), "shm");
        assert_eq!(out, [n as i64]);
    }
    assert_eq!(all, (0..n).collect::<Vec<_>>());
    c.free()
}

/// Blocking barriers and small bcasts run through the region by default (without a
/// schedule), from every root in turn and many runs past the lane's depth, with
/// nonblocking barriers in flight between them; their nonblocking form runs there too;
/// forcing another algorithm wins; a bcast whose lengths differ is MPI_ERR_TRUNCATE on the
/// ranks that receive, and the region serves the next calls.
fn blocking_barrier_and_bcast_by_default(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    for round in 0..300 {
        let root = (round % n as usize) as i32;
        let mut b = vec![0i64; 1 + round % 120];
        if me == root {
            for (i, x) in b.iter_mut().enumerate() {
                *x = value(root, i, round);
            }
        }
        w.bcast(&mut b, root)?;
        assert_eq!(last_algorithm(), "shm", "bcast of {} bytes", b.len() * 8);
        assert!(b
            .iter()
            .enumerate()
            .all(|(i, &x)| x == value(root, i, round)));
        if round % 7 == 0 {
            scope(|s| -> Result<()> {
                let mut q = w.ibarrier(s)?;
                w.barrier()?;
                q.wait()?;
                Ok(())
            })?;
        } else {
            w.barrier()?;
        }
        assert_eq!(last_algorithm(), "shm");
    }
    // Larger than a slot: by messages.
    let mut big = vec![me as i64; 200];
    w.bcast(&mut big, 0)?;
    assert_ne!(last_algorithm(), "shm");
    assert!(big.iter().all(|&x| x == 0));
    // The nonblocking form: through the region too.
    let mut b = [me as i64; 2];
    scope(|s| -> Result<()> {
        let mut q = w.ibcast(s, &mut b, 1)?;
        assert_eq!(last_algorithm(), "shm");
        q.wait()?;
        Ok(())
    })?;
    assert_eq!(b, [1, 1]);
    // Forced elsewhere.
    let mut info = Info::new();
    info.set("earlybird_coll_bcast", "binomial")?;
    let c = w.dup_with_info(&info)?;
    let mut b = [me as i64; 3];
    c.bcast(&mut b, n - 1)?;
    assert_eq!(last_algorithm(), "binomial");
    assert_eq!(b, [n as i64 - 1; 3]);
    // Lengths that differ: the root sends 2 elements, the others expect 3.
    w.set_errhandler(ErrHandler::Return);
    let mut b = vec![7i64; if me == 0 { 2 } else { 3 }];
    match w.bcast(&mut b, 0) {
        Ok(()) => assert_eq!(me, 0, "rank {me} received 16 bytes into 24"),
        Err(e) => {
            assert_ne!(me, 0);
            assert_eq!(e.class(), ErrorClass::Truncate, "{e}");
        }
    }
    // The region goes on.
    let mut b = [me as i64 + 10];
    w.bcast(&mut b, 0)?;
    assert_eq!(b, [10]);
    w.barrier()
}

/// A blocking allreduce that fits a slot runs straight through the region by default
/// (`shm_blocking.rs`), at any number of ranks: sums of every length up to a slot, in place
/// and not, with nonblocking ones (by messages or by the region's lanes) in flight; a
/// non-commutative operation in rank order; the same bits as by messages; contributions of
/// different lengths an error on every rank; forcing another algorithm; a larger one by
/// messages.
fn blocking_allreduce_by_default(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    for round in 0..300 {
        let len = 1 + round % 126;
        let mine: Vec<i64> = (0..len).map(|i| value(me, i, round)).collect();
        let want: Vec<i64> = (0..len)
            .map(|i| (0..n).map(|r| value(r, i, round)).sum())
            .collect();
        let mut out = vec![0i64; len];
        if round % 3 == 0 {
            out.copy_from_slice(&mine);
            w.allreduce(IN_PLACE, &mut out, &Op::SUM)?;
        } else if round % 5 == 0 {
            let mut early = vec![0i64; len];
            scope(|s| -> Result<()> {
                let mut q = w.iallreduce(s, &mine, &mut early, &Op::SUM)?;
                w.allreduce(&mine, &mut out, &Op::SUM)?;
                q.wait()?;
                Ok(())
            })?;
            assert_eq!(
                early, want,
                "iallreduce beside a blocking one, round {round}"
            );
        } else {
            w.allreduce(&mine, &mut out, &Op::SUM)?;
        }
        assert_eq!(out, want, "allreduce of {len} elements, round {round}");
    }
    let mut one = [0i64];
    w.allreduce(&[me as i64], &mut one, &Op::SUM)?;
    assert_eq!(last_algorithm(), "shm");
    // Matrix products: M_0 M_1 ... M_{n-1}, whatever the ranks' order of arrival.
    let (mat, mul) = (common::mat, common::mat_mul);
    let mine: Vec<[i64; 4]> = (0..5).map(|i| mat(me, i)).collect();
    let mut out = vec![[0i64; 4]; 5];
    w.allreduce(&mine, &mut out, &common::matmul_op())?;
    assert_eq!(last_algorithm(), "shm");
    let want: Vec<[i64; 4]> = (0..5)
        .map(|i| (1..n).fold(mat(0, i), |acc, r| mul(acc, mat(r, i))))
        .collect();
    assert_eq!(out, want);
    // Float sums whose bits depend on the association: as by messages.
    let f: Vec<f64> = (0..120)
        .map(|i: usize| ((me as f64 + 1.0) * 1e-3 + i as f64) * 10f64.powi((i % 13) as i32 - 6))
        .collect();
    let mut here = vec![0.0f64; f.len()];
    w.allreduce(&f, &mut here, &Op::SUM)?;
    let mut info = Info::new();
    info.set("earlybird_coll_allreduce", "reduce_bcast")?;
    let c = w.dup_with_info(&info)?;
    let mut there = vec![0.0f64; f.len()];
    c.allreduce(&f, &mut there, &Op::SUM)?;
    assert_eq!(last_algorithm(), "reduce_bcast");
    assert!(here
        .iter()
        .zip(&there)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    // Larger than a slot: by messages.
    let mut big = vec![0i64; 200];
    w.allreduce(&vec![1i64; 200], &mut big, &Op::SUM)?;
    assert_ne!(last_algorithm(), "shm");
    assert!(big.iter().all(|&x| x == n as i64));
    // Lengths that differ: rank 0 gives 2 elements, the others 3; each rank sees a length
    // that is not its own.
    w.set_errhandler(ErrHandler::Return);
    let k = if me == 0 { 2 } else { 3 };
    let mut out = vec![0i64; k];
    let e = w
        .allreduce(&vec![1i64; k], &mut out, &Op::SUM)
        .expect_err("contributions of different lengths");
    assert_eq!(e.class(), ErrorClass::Truncate, "{e}");
    // The region goes on.
    let mut out = [0i64; 2];
    w.allreduce(&[me as i64 + 10; 2], &mut out, &Op::SUM)?;
    assert_eq!(out, [(0..n as i64).map(|r| r + 10).sum::<i64>(); 2]);
    w.barrier()
}

/// Nonblocking barriers, bcasts and allreduces run straight through the region by default
/// (`shm_nonblocking.rs`), at any number of ranks: every length up to a slot, from every root,
/// in place, through a datatype with gaps, completed in either order or left to the scope's
/// end; a rank that holds an ibcast open while the root runs three lanes' worth of blocking
/// bcasts (its waits read it meanwhile, else the root could not reuse the slot); lengths
/// that differ (MPI_ERR_TRUNCATE, the region going on); a rank whose call is wrong (the
/// others' waits end with its error); forcing messages.
fn nonblocking_through_the_region(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    for round in 0..300 {
        let root = (round % n as usize) as i32;
        let len = 1 + round % 126;
        let mut b = vec![0i64; len];
        if me == root {
            for (i, x) in b.iter_mut().enumerate() {
                *x = value(root, i, round);
            }
        }
        let mine: Vec<i64> = (0..len).map(|i| value(me, i, round)).collect();
        let mut sum = vec![0i64; len];
        let mut ip = mine.clone();
        scope(|s| -> Result<()> {
            let mut reqs = vec![w.ibcast(s, &mut b, root)?];
            assert_eq!(
                last_algorithm(),
                "shm",
                "ibcast of {} bytes on {n}",
                len * 8
            );
            reqs.push(w.iallreduce(s, &mine, &mut sum, &Op::SUM)?);
            assert_eq!(
                last_algorithm(),
                "shm",
                "iallreduce of {} bytes on {n}",
                len * 8
            );
            reqs.push(w.iallreduce(s, IN_PLACE, &mut ip, &Op::MAX)?);
            reqs.push(w.ibarrier(s)?);
            assert_eq!(last_algorithm(), "shm");
            match round % 3 {
                0 => {
                    wait_all(&mut reqs)?;
                }
                1 => {
                    while let Some(mut r) = reqs.pop() {
                        r.wait()?;
                    }
                }
                // Left to the scope's end.
                _ => {}
            }
            Ok(())
        })?;
        assert!(
            b.iter()
                .enumerate()
                .all(|(i, &x)| x == value(root, i, round)),
            "round {round}: ibcast from {root}"
        );
        for i in 0..len {
            assert_eq!(
                sum[i],
                (0..n).map(|q| value(q, i, round)).sum::<i64>(),
                "round {round}"
            );
            assert_eq!(ip[i], value(n - 1, i, round), "round {round}");
        }
    }
    // One column of a 4 x 3 matrix: a datatype with gaps.
    let col = Datatype::vector(4, 1, 3, &Datatype::of::<i64>())?;
    col.commit()?;
    let mut m: Vec<i64> = (0..12).map(|i| if me == 0 { i } else { -1 }).collect();
    scope(|s| -> Result<()> {
        w.ibcast(s, TypedMut::new(&mut m, 1, &col)?, 0)?.wait()?;
        assert_eq!(last_algorithm(), "shm");
        Ok(())
    })?;
    let want: Vec<i64> = (0..12)
        .map(|i| if me == 0 || i % 3 == 0 { i } else { -1 })
        .collect();
    assert_eq!(m, want);
    // An ibcast held open on the other ranks while the root runs three lanes' worth of
    // blocking bcasts, which they take part in.
    let mut held = [me as i64; 4];
    scope(|s| -> Result<()> {
        // The root starts its ibcast only once every other rank has started its own, so
        // that theirs is not done at its start.
        let mut q = if me == 0 {
            for from in 1..n {
                w.recv(&mut [0u8; 0][..], from, 5)?;
            }
            w.ibcast(s, &mut held, 0)?
        } else {
            let q = w.ibcast(s, &mut held, 0)?;
            w.send(&[0u8; 0][..], 0, 5)?;
            q
        };
        if me == 0 {
            q.wait()?;
        }
        for k in 0..3 * 64 {
            let mut x = [if me == 0 { k } else { -1 }];
            w.bcast(&mut x, 0)?;
            assert_eq!(x, [k]);
        }
        q.wait()?;
        Ok(())
    })?;
    assert_eq!(held, [0; 4]);
    // Lengths that differ: the root sends 2 elements, the others expect 3.
    w.set_errhandler(ErrHandler::Return);
    let mut b = vec![7i64; if me == 0 { 2 } else { 3 }];
    let r = scope(|s| -> Result<()> { w.ibcast(s, &mut b, 0)?.wait().map(drop) });
    match r {
        Ok(()) => assert_eq!(me, 0, "rank {me} received 16 bytes into 24"),
        Err(e) => {
            assert_ne!(me, 0);
            assert_eq!(e.class(), ErrorClass::Truncate, "{e}");
        }
    }
    let mut b = [me as i64 + 10];
    scope(|s| -> Result<()> { w.ibcast(s, &mut b, 0)?.wait().map(drop) })?;
    assert_eq!(b, [10]);
    // The last rank's allreduce is wrong (a receive buffer shorter than its send buffer):
    // it returns its error, and the others' waits end with it instead of waiting.
    let bad = me == n - 1;
    let (two, mut out) = ([1i64, 2], vec![0i64; if bad { 1 } else { 2 }]);
    let r =
        scope(|s| -> Result<()> { w.iallreduce(s, &two, &mut out, &Op::SUM)?.wait().map(drop) });
    let e = r.expect_err("an allreduce with one rank's buffers wrong");
    assert_eq!(e.class(), ErrorClass::Count, "{e}");
    if !bad {
        assert!(
            e.to_string()
                .contains(&format!("rank {} returned an error", n - 1)),
            "{e}"
        );
    }
    // The region goes on.
    let (ten, mut out) = ([me as i64 + 10; 2], [0i64; 2]);
    scope(|s| -> Result<()> { w.iallreduce(s, &ten, &mut out, &Op::SUM)?.wait().map(drop) })?;
    assert_eq!(out, [(0..n as i64).map(|r| r + 10).sum::<i64>(); 2]);
    // Forced elsewhere: messages.
    let mut info = Info::new();
    info.set("earlybird_coll_bcast", "binomial")?;
    let c = w.dup_with_info(&info)?;
    let mut b = [me as i64; 3];
    scope(|s| -> Result<()> {
        let mut q = c.ibcast(s, &mut b, n - 1)?;
        assert_eq!(last_algorithm(), "binomial");
        q.wait().map(drop)
    })?;
    assert_eq!(b, [n as i64 - 1; 3]);
    c.free()?;
    w.barrier()
}
