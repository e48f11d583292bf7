//! Barrier, bcast, reduce and allreduce against sequential references: every algorithm
//! forced in turn, blocking, nonblocking and persistent, counts 0, 1, odd and large, every
//! root, IN_PLACE, user operations that are not commutative, and reproducible bits.

mod common;

use common::{assert_err, each_algorithm};
use earlybird::launch::BlockedIn;
use earlybird::{scope, Coll, Comm, ErrHandler, ErrorClass, Op, Result, Universe, IN_PLACE};
use std::time::Duration;

scenarios! {
    barrier_orders_phases [1, 2, 3, 4, 8];
    bcast_every_root_and_count [1, 2, 3, 4, 8];
    reduce_every_root_and_op [1, 2, 3, 4, 8];
    allreduce_matches_reference [1, 2, 3, 4, 8];
    noncommutative_ops_see_rank_order [1, 2, 3, 4, 8];
    reductions_are_reproducible [2, 3, 4, 8];
    persistent_started_a_thousand_times [1, 2, 3, 4, 8];
    nonblocking_and_persistent_interleave [2, 3, 4, 8];
    nonblocking_repeats_reuse_their_run [1, 2, 3, 4];
    bad_arguments_are_errors [1, 2, 3];
    one_rank_in_error_hangs_nobody [2, 3, 4];
    init_effort_tune_picks_one_algorithm_everywhere [1, 2, 3, 4, 8];
}

const COUNTS: [usize; 5] = [0, 1, 7, 1000, 40_000];

fn value(rank: i32, i: usize, round: usize) -> i64 {
    (rank as i64 + 1) * 1_000_003 + (i as i64) * 7 + round as i64
}

/// A barrier completes on no rank before every rank has entered it. Each rank in turn is
/// late. Nonblocking and persistent: the others start the barrier, see `test` report it
/// incomplete, and only then tell the late rank to enter. Blocking: the late rank enters only
/// once it has seen every other rank published as blocked in the barrier (a barrier that
/// returns early never publishes that, and the late rank's bounded wait fails).
fn barrier_orders_phases(u: &Universe) -> Result<()> {
    const GO: i32 = 77;
    const READY: i32 = 78;
    let job = u.job_segment();
    let world = u.world().group();
    each_algorithm(u.world(), Coll::Barrier, |c, alg| {
        let (me, n) = (c.rank(), c.size());
        for late in 0..n {
            scope(|s| -> Result<()> {
                let mut p = c.barrier_init(s)?;
                // Round 0 nonblocking, rounds 1 and 2 the persistent barrier.
                for round in 0..3 {
                    if me == late {
                        for r in (0..n).filter(|&r| r != late) {
                            c.recv(&mut [0u8; 0], r, GO)?;
                        }
                    }
                    let mut nb = None;
                    let req = if round == 0 {
                        nb.insert(c.ibarrier(s)?)
                    } else {
                        p.start()?;
                        &mut p
                    };
                    if me != late {
                        for _ in 0..5 {
                            assert!(
                                req.test()?.is_none(),
                                "{alg:?} barrier (round {round}) completed on rank {me} before rank {late} entered it"
                            );
                        }
                        c.send(&[0u8; 0], late, GO)?;
                    }
                    req.wait()?;
                }
                Ok(())
            })?;
            // Blocking. READY says the sender is past its last wait, so the wait published
            // next is its barrier's.
            if me == late {
                for r in (0..n).filter(|&r| r != late) {
                    c.recv(&mut [0u8; 0], r, READY)?;
                    let wr = c.group().translate_ranks(&[r], &world)?[0];
                    job.await_blocked(wr as u32, Duration::from_secs(20), |p| {
                        p.what == BlockedIn::Wait
                    })
                    .unwrap_or_else(|e| {
                        panic!("{alg:?} barrier: rank {r} did not wait for rank {late}: {e}")
                    });
                }
            } else {
                c.send(&[0u8; 0], late, READY)?;
            }
            c.barrier()?;
        }
        Ok(())
    })
}

fn bcast_every_root_and_count(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Bcast, |c, _| {
        for root in 0..c.size() {
            for &n in &COUNTS {
                let want: Vec<i64> = (0..n).map(|i| value(root, i, 0)).collect();
                let mut buf: Vec<i64> = if c.rank() == root {
                    want.clone()
                } else {
                    vec![-1; n]
                };
                c.bcast(&mut buf, root)?;
                assert_eq!(buf, want, "bcast root {root} n {n}");
                let mut buf2: Vec<f32> = if c.rank() == root {
                    (0..n).map(|i| i as f32).collect()
                } else {
                    vec![0.0; n]
                };
                scope(|s| -> Result<()> {
                    let mut r = c.ibcast(s, &mut buf2, root)?;
                    r.wait()?;
                    Ok(())
                })?;
                assert!(
                    buf2.iter().enumerate().all(|(i, &x)| x == i as f32),
                    "ibcast root {root} n {n}"
                );
            }
        }
        Ok(())
    })
}

fn reference(size: i32, n: usize, op: &str) -> Vec<i64> {
    (0..n)
        .map(|i| {
            let vals = (0..size).map(|r| value(r, i, 0));
            match op {
                "sum" => vals.sum(),
                "max" => vals.max().unwrap(),
                "min" => vals.min().unwrap(),
                "bxor" => vals.fold(0, |a, b| a ^ b),
                _ => unreachable!(),
            }
        })
        .collect()
}

fn reduce_every_root_and_op(u: &Universe) -> Result<()> {
    let w = u.world();
    let ops = [
        ("sum", Op::SUM),
        ("max", Op::MAX),
        ("min", Op::MIN),
        ("bxor", Op::BXOR),
    ];
    each_algorithm(w, Coll::Reduce, |c, _| {
        for root in 0..c.size() {
            for &n in &COUNTS[..4] {
                for (name, op) in &ops {
                    let mine: Vec<i64> = (0..n).map(|i| value(c.rank(), i, 0)).collect();
                    let mut out = if c.rank() == root {
                        vec![0i64; n]
                    } else {
                        vec![]
                    };
                    c.reduce(&mine, &mut out, op, root)?;
                    if c.rank() == root {
                        assert_eq!(
                            out,
                            reference(c.size(), n, name),
                            "reduce {name} root {root} n {n}"
                        );
                        // In place at the root.
                        let mut inout = mine.clone();
                        c.reduce(IN_PLACE, &mut inout, op, root)?;
                        assert_eq!(inout, out, "in-place reduce {name} root {root}");
                    } else {
                        c.reduce(&mine, &mut [0i64; 0], op, root)?;
                    }
                }
            }
        }
        Ok(())
    })
}

fn allreduce_matches_reference(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Allreduce, |c, _| {
        for &n in &COUNTS {
            let mine: Vec<i64> = (0..n).map(|i| value(c.rank(), i, 0)).collect();
            let mut out = vec![0i64; n];
            c.allreduce(&mine, &mut out, &Op::SUM)?;
            assert_eq!(out, reference(c.size(), n, "sum"), "allreduce n {n}");
            let mut inout = mine.clone();
            c.allreduce(IN_PLACE, &mut inout, &Op::SUM)?;
            assert_eq!(inout, out, "in-place allreduce n {n}");
            let f: Vec<f64> = (0..n).map(|i| (c.rank() * 3 + i as i32) as f64).collect();
            let mut fo = vec![0.0; n];
            c.allreduce(&f, &mut fo, &Op::MAX)?;
            assert!(fo
                .iter()
                .enumerate()
                .all(|(i, &x)| x == ((c.size() - 1) * 3 + i as i32) as f64));
            let mut out2 = vec![0i64; n];
            scope(|s| -> Result<()> {
                let mut r = c.iallreduce(s, &mine, &mut out2, &Op::SUM)?;
                r.wait()?;
                Ok(())
            })?;
            assert_eq!(out2, out, "iallreduce n {n}");
        }
        Ok(())
    })
}

/// 2x2 integer matrix products: the result must be M_0 M_1 ... M_{n-1}.
fn noncommutative_ops_see_rank_order(u: &Universe) -> Result<()> {
    let w = u.world();
    let matmul = common::matmul_op();
    let (mat, mul) = (common::mat, common::mat_mul);
    for coll in [Coll::Allreduce, Coll::Reduce] {
        each_algorithm(w, coll, |c, _| {
            for n in [1usize, 5] {
                let mine: Vec<[i64; 4]> = (0..n).map(|i| mat(c.rank(), i)).collect();
                let want: Vec<[i64; 4]> = (0..n)
                    .map(|i| (1..c.size()).fold(mat(0, i), |acc, r| mul(acc, mat(r, i))))
                    .collect();
                let mut out = vec![[0i64; 4]; n];
                if coll == Coll::Allreduce {
                    c.allreduce(&mine, &mut out, &matmul)?;
                    assert_eq!(out, want);
                } else {
                    let root = c.size() - 1;
                    c.reduce(&mine, &mut out, &matmul, root)?;
                    if c.rank() == root {
                        assert_eq!(out, want);
                    }
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Float sums whose result depends on association: every algorithm, every call, every rank
/// gets the same bits.
fn reductions_are_reproducible(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = 3000;
    let mine: Vec<f64> = (0..n)
        .map(|i| ((c_hash(w.rank(), i) % 2001) as f64 - 1000.0) * 10f64.powi((i % 17) as i32 - 8))
        .collect();
    let mut first: Option<Vec<f64>> = None;
    each_algorithm(w, Coll::Allreduce, |c, _| {
        let mut out = vec![0.0; n];
        c.allreduce(&mine, &mut out, &Op::SUM)?;
        match &first {
            None => first = Some(out),
            Some(f) => assert!(
                f.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits()),
                "bits differ between algorithms"
            ),
        }
        Ok(())
    })?;
    let first = first.unwrap();
    each_algorithm(w, Coll::Reduce, |c, _| {
        let mut out = vec![0.0f64; n];
        let root = c.size() / 2;
        c.reduce(&mine, &mut out, &Op::SUM, root)?;
        if c.rank() == root {
            assert!(
                first
                    .iter()
                    .zip(&out)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "reduce bits differ from allreduce"
            );
        }
        Ok(())
    })
}

fn c_hash(r: i32, i: usize) -> u64 {
    let mut x = (r as u64) << 32 | i as u64;
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 29)
}

fn persistent_started_a_thousand_times(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = 5;
    let mut send = vec![0i64; n];
    let mut recv = vec![0i64; n];
    let mut bc = vec![0i64; 3];
    scope(|s| -> Result<()> {
        let mut ar = w.allreduce_init(s, &mut send, &mut recv, &Op::SUM)?;
        let mut b = w.bcast_init(s, &mut bc, 0)?;
        for round in 0..1000 {
            for (i, x) in ar.send_buffer_mut::<i64>()?.iter_mut().enumerate() {
                *x = value(w.rank(), i, round);
            }
            ar.start()?;
            ar.wait()?;
            let got = ar.buffer_mut::<i64>()?;
            for (i, &g) in got.iter().enumerate() {
                let want: i64 = (0..w.size()).map(|r| value(r, i, round)).sum();
                assert_eq!(g, want, "round {round} element {i}");
            }
            if w.rank() == 0 {
                b.buffer_mut::<i64>()?
                    .copy_from_slice(&[round as i64, 2, 3]);
            }
            b.start()?;
            b.wait()?;
            assert_eq!(b.buffer_mut::<i64>()?, &[round as i64, 2, 3]);
        }
        Ok(())
    })
}

/// Nonblocking and persistent collectives in flight together, completed in another order.
fn nonblocking_and_persistent_interleave(u: &Universe) -> Result<()> {
    let w = u.world();
    let mine = [w.rank() as i64 + 1; 4];
    let mut a = [0i64; 4];
    let mut b = [0i64; 4];
    let mut d = [0i64; 4];
    let total: i64 = (1..=w.size() as i64).sum();
    scope(|s| -> Result<()> {
        let mut p = w.allreduce_init(s, &mine, &mut a, &Op::SUM)?;
        for _ in 0..20 {
            p.start()?;
            scope(|t| -> Result<()> {
                let mut q = w.iallreduce(t, &mine, &mut b, &Op::MAX)?;
                let mut bar = w.ibarrier(t)?;
                let mut r = w.ireduce(t, &mine, &mut d, &Op::SUM, 0)?;
                r.wait()?;
                bar.wait()?;
                q.wait()?;
                Ok(())
            })?;
            p.wait()?;
        }
        Ok(())
    })?;
    assert_eq!(a, [total; 4]);
    assert_eq!(b, [w.size() as i64; 4]);
    if w.rank() == 0 {
        assert_eq!(d, [total; 4]);
    }
    Ok(())
}

fn bad_arguments_are_errors(u: &Universe) -> Result<()> {
    let w: &Comm = u.world();
    w.set_errhandler(ErrHandler::Return);
    let mut buf = [0i32; 2];
    assert_err(w.bcast(&mut buf, w.size()), ErrorClass::Root, "root");
    assert_err(
        w.reduce(&[1.0f32], &mut [0.0f32], &Op::BAND, 0),
        ErrorClass::Op,
        "MPI_BAND",
    );
    assert_err(
        w.allreduce(&[1i32, 2], &mut [0], &Op::SUM),
        ErrorClass::Count,
        "receive buffer",
    );
    // Everyone still agrees on what comes next.
    let mut x = [w.rank()];
    w.allreduce(IN_PLACE, &mut x, &Op::SUM)?;
    assert_eq!(x[0], (0..w.size()).sum::<i32>());
    Ok(())
}

/// One rank's call fails its argument checks: it takes no part, and the others' calls end
/// with an error naming it instead of waiting for it, in every mode. Afterwards the
/// communicator still works.
fn one_rank_in_error_hangs_nobody(u: &Universe) -> Result<()> {
    let w: &Comm = u.world();
    w.set_errhandler(ErrHandler::Return);
    let bad = w.size() - 1;
    let mut buf = [7i64; 3];
    let root = if w.rank() == bad { w.size() + 5 } else { 0 };
    let r = w.bcast(&mut buf, root);
    if w.rank() == bad {
        assert_err(r, ErrorClass::Root, "root");
    } else if let Err(e) = r {
        // Ranks whose part did not involve the bad rank may have finished normally.
        assert_eq!(e.class(), ErrorClass::Root, "{e}");
        assert!(e.to_string().contains(&format!("rank {bad}")), "{e}");
    }
    // A reduction whose operation does not apply on one rank.
    let r = if w.rank() == bad {
        w.allreduce(&[1.5f64], &mut [0.0], &Op::BXOR)
    } else {
        w.allreduce(&[1.5f64], &mut [0.0], &Op::SUM)
    };
    let e = r.expect_err("allreduce needs every rank");
    assert_eq!(e.class(), ErrorClass::Op, "{e}");
    // Nonblocking: the request completes with the error.
    let mut out = [0i32; 1];
    scope(|s| -> Result<()> {
        let req = if w.rank() == bad {
            w.iallreduce(s, &[1i32, 2], &mut out, &Op::SUM)
        } else {
            w.iallreduce(s, &[1i32], &mut out, &Op::SUM)
        };
        match req {
            Err(e) => assert_eq!(e.class(), ErrorClass::Count, "{e}"),
            Ok(mut q) => assert_eq!(q.wait().unwrap_err().class(), ErrorClass::Count),
        }
        Ok(())
    })?;
    w.barrier()?;
    let mut x = [1i32];
    w.allreduce(IN_PLACE, &mut x, &Op::SUM)?;
    assert_eq!(x[0], w.size());
    Ok(())
}

/// With `earlybird_coll_init_effort = tune`, a persistent allreduce times every algorithm
/// that fits at init and keeps the fastest: every rank keeps the same one (the results
/// agree start after start), and an in-place call is not tuned (its input would be folded
/// into itself) yet still correct.
fn init_effort_tune_picks_one_algorithm_everywhere(u: &Universe) -> Result<()> {
    let w = u.world();
    let mut info = earlybird::Info::new();
    info.set(earlybird::coll::INIT_EFFORT, "tune")?;
    let c = w.dup_with_info(&info)?;
    let n = 5000;
    let mine: Vec<f64> = (0..n).map(|i| (c.rank() as f64 + 1.0) * i as f64).collect();
    let mut out = vec![0.0; n];
    let mut inplace = mine.clone();
    let mut chosen = [0u64; 1];
    scope(|s| -> Result<()> {
        let mut p = c.allreduce_init(s, &mine, &mut out, &Op::SUM)?;
        let name = earlybird::coll::last_algorithm();
        let pos = earlybird::coll::algorithms()
            .iter()
            .position(|a| a.coll == Coll::Allreduce && a.name == name)
            .expect("a registered algorithm") as u64;
        chosen[0] = pos;
        for _ in 0..10 {
            p.start()?;
            p.wait()?;
        }
        let got = p.buffer_mut::<f64>()?;
        let total: f64 = (1..=c.size()).map(|r| r as f64).sum();
        assert!(got.iter().enumerate().all(|(i, &x)| x == total * i as f64));
        let mut q = c.allreduce_init(s, IN_PLACE, &mut inplace, &Op::SUM)?;
        q.start()?;
        q.wait()?;
        let got = q.buffer_mut::<f64>()?;
        assert!(got.iter().enumerate().all(|(i, &x)| x == total * i as f64));
        Ok(())
    })?;
    let mut lo = chosen;
    let mut hi = chosen;
    c.allreduce(IN_PLACE, &mut lo, &Op::MIN)?;
    c.allreduce(IN_PLACE, &mut hi, &Op::MAX)?;
    assert_eq!(lo, hi, "ranks kept different algorithms");
    c.free()
}

/// Nonblocking collectives that repeat (same buffers, counts, root and operation) start the
/// kept run of the previous one: each round, in a scope of its own, gives that round's
/// results; two outstanding calls with the same arguments (barriers) each get a run; a call
/// whose root changes, or whose operation does, gets the right result too; and every
/// algorithm, forced, repeats correctly.
fn nonblocking_repeats_reuse_their_run(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    for alg in [None, Some("recursive_doubling"), Some("reduce_bcast")] {
        let c = w.dup()?;
        if let Some(a) = alg {
            let mut info = earlybird::Info::new();
            info.set("earlybird_coll_allreduce", a)?;
            c.set_info(&info)?;
        }
        let mut send = [0i64; 5];
        let mut got = [0i64; 5];
        for round in 0..40usize {
            for (i, x) in send.iter_mut().enumerate() {
                *x = value(me, i, round);
            }
            let op = if round % 10 == 9 { &Op::MAX } else { &Op::SUM };
            scope(|s| -> Result<()> {
                let mut r = c.iallreduce(s, &send, &mut got, op)?;
                r.wait()?;
                Ok(())
            })?;
            for (i, g) in got.iter().enumerate() {
                let want = if round % 10 == 9 {
                    value(n - 1, i, round)
                } else {
                    (0..n).map(|r| value(r, i, round)).sum()
                };
                assert_eq!(*g, want, "iallreduce round {round} element {i} ({alg:?})");
            }
        }
    }
    let mut b = [0u32; 3];
    for round in 0..30u32 {
        let root = (round / 10) as i32 % n;
        if me == root {
            b = [round, round * 2, round * 3];
        }
        scope(|s| -> Result<()> { w.ibcast(s, &mut b, root)?.wait().map(drop) })?;
        assert_eq!(b, [round, round * 2, round * 3], "ibcast round {round}");
    }
    for _ in 0..5 {
        scope(|s| -> Result<()> {
            let mut a = w.ibarrier(s)?;
            let mut b = w.ibarrier(s)?;
            b.wait()?;
            a.wait()?;
            Ok(())
        })?;
    }
    Ok(())
}
