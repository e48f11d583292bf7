//! Reduce_scatter_block, reduce_scatter, scan and exscan against sequential references:
//! every algorithm forced in turn, blocking, nonblocking and persistent, counts 0, 1, odd and
//! large, IN_PLACE, a non-commutative operation, the bits of float sums in the documented
//! associations, and misuse. Also the large-message bcast default.

mod common;

use common::{assert_err, check_eq, each_algorithm};
use earlybird::{scope, Coll, Comm, ErrHandler, ErrorClass, Op, Result, Universe, IN_PLACE};

scenarios! {
    reduce_scatter_block_matches_reference [1, 2, 3, 4, 8];
    reduce_scatter_any_counts [1, 2, 3, 4, 8];
    scan_and_exscan_match_reference [1, 2, 3, 4, 8];
    persistent_restarts_with_new_data [1, 2, 3, 4, 8];
    noncommutative_ops_see_rank_order [1, 2, 3, 4, 8];
    float_bits_follow_the_association [1, 2, 3, 4, 8];
    large_bcast_default [1, 2, 3, 4, 8];
    bad_arguments_are_errors [1, 2, 3, 4];
}

fn value(rank: i32, i: usize, round: usize) -> i64 {
    (rank as i64 + 1) * 1_000_003 + (i as i64) * 7 + round as i64
}

fn sum_over(ranks: std::ops::Range<i32>, i: usize, round: usize) -> i64 {
    ranks.map(|r| value(r, i, round)).sum()
}

/// Block counts of reduce_scatter for a communicator of `n`: zeros, ones, odd and a large one.
fn varied_counts(n: i32, large: usize) -> Vec<usize> {
    (0..n as usize)
        .map(|i| match i % 4 {
            0 => 7,
            1 => 0,
            2 => large,
            _ => 1,
        })
        .collect()
}

fn reduce_scatter_block_matches_reference(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::ReduceScatterBlock, |c, _| {
        let (r, n) = (c.rank(), c.size());
        for count in [0usize, 1, 7, 1000, 40_000 / n as usize] {
            let mine: Vec<i64> = (0..n as usize * count).map(|i| value(r, i, 0)).collect();
            let want: Vec<i64> = (0..count)
                .map(|i| sum_over(0..n, r as usize * count + i, 0))
                .collect();
            let mut out = vec![-1i64; count];
            c.reduce_scatter_block(&mine, &mut out, &Op::SUM)?;
            check_eq(&format!("reduce_scatter_block count {count}"), &out, &want);
            let mut inout = mine.clone();
            c.reduce_scatter_block(IN_PLACE, &mut inout, &Op::SUM)?;
            check_eq("in-place reduce_scatter_block", &inout[..count], &want);
            let mut out2 = vec![-1i64; count];
            scope(|s| -> Result<()> {
                let mut q = c.ireduce_scatter_block(s, &mine, &mut out2, &Op::SUM)?;
                q.wait().map(|_| ())
            })?;
            check_eq("ireduce_scatter_block", &out2, &want);
            let m: Vec<f64> = (0..n as usize * count)
                .map(|i| (i as i32 - r * 5) as f64)
                .collect();
            let mut mo = vec![0.0; count];
            c.reduce_scatter_block(&m, &mut mo, &Op::MAX)?;
            assert!(mo
                .iter()
                .enumerate()
                .all(|(i, &x)| x == (r as usize * count + i) as f64));
        }
        Ok(())
    })
}

fn reduce_scatter_any_counts(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::ReduceScatter, |c, _| {
        let (r, n) = (c.rank(), c.size());
        for large in [3usize, 1001, 30_000] {
            for counts in [varied_counts(n, large), vec![0; n as usize]] {
                let total: usize = counts.iter().sum();
                let at: usize = counts[..r as usize].iter().sum();
                let me = counts[r as usize];
                let mine: Vec<i64> = (0..total).map(|i| value(r, i, 1)).collect();
                let want: Vec<i64> = (0..me).map(|i| sum_over(0..n, at + i, 1)).collect();
                let mut out = vec![-1i64; me];
                c.reduce_scatter(&mine, &mut out, &counts, &Op::SUM)?;
                check_eq(&format!("reduce_scatter {counts:?}"), &out, &want);
                let mut inout = mine.clone();
                c.reduce_scatter(IN_PLACE, &mut inout, &counts, &Op::SUM)?;
                check_eq("in-place reduce_scatter", &inout[..me], &want);
                let mut out2 = vec![-1i64; me];
                scope(|s| -> Result<()> {
                    let mut q = c.ireduce_scatter(s, &mine, &mut out2, &counts, &Op::SUM)?;
                    q.wait().map(|_| ())
                })?;
                check_eq("ireduce_scatter", &out2, &want);
            }
        }
        Ok(())
    })
}

fn scan_and_exscan_match_reference(u: &Universe) -> Result<()> {
    let w = u.world();
    for coll in [Coll::Scan, Coll::Exscan] {
        each_algorithm(w, coll, |c, _| {
            let r = c.rank();
            let upto = if coll == Coll::Scan { r + 1 } else { r };
            for count in [0usize, 1, 7, 1000, 40_000] {
                let mine: Vec<i64> = (0..count).map(|i| value(r, i, 2)).collect();
                let want: Vec<i64> = (0..count).map(|i| sum_over(0..upto, i, 2)).collect();
                let keep = vec![-5i64; count];
                let mut out = keep.clone();
                let mut out2 = keep.clone();
                let mut inout = mine.clone();
                if coll == Coll::Scan {
                    c.scan(&mine, &mut out, &Op::SUM)?;
                    c.scan(IN_PLACE, &mut inout, &Op::SUM)?;
                    scope(|s| -> Result<()> {
                        c.iscan(s, &mine, &mut out2, &Op::SUM)?.wait().map(|_| ())
                    })?;
                } else {
                    c.exscan(&mine, &mut out, &Op::SUM)?;
                    c.exscan(IN_PLACE, &mut inout, &Op::SUM)?;
                    scope(|s| -> Result<()> {
                        c.iexscan(s, &mine, &mut out2, &Op::SUM)?.wait().map(|_| ())
                    })?;
                }
                if coll == Coll::Exscan && r == 0 {
                    // Undefined by MPI; earlybird leaves the buffer alone.
                    assert_eq!(out, keep);
                    assert_eq!(inout, mine);
                    assert_eq!(out2, keep);
                } else {
                    check_eq(&format!("{coll:?} count {count}"), &out, &want);
                    check_eq("in place", &inout, &want);
                    check_eq("nonblocking", &out2, &want);
                }
                let mx: Vec<i32> = (0..count).map(|i| (i as i32 * 3 + 7 * r) % 11).collect();
                let mut mo = vec![0i32; count];
                if coll == Coll::Scan {
                    c.scan(&mx, &mut mo, &Op::MAX)?;
                    let wm: Vec<i32> = (0..count)
                        .map(|i| (0..=r).map(|q| (i as i32 * 3 + 7 * q) % 11).max().unwrap())
                        .collect();
                    check_eq("scan max", &mo, &wm);
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

fn persistent_restarts_with_new_data(u: &Universe) -> Result<()> {
    let w = u.world();
    let (r, n) = (w.rank(), w.size());
    let k = 5usize;
    let counts: Vec<usize> = (0..n as usize).map(|i| i % 3).collect();
    let total: usize = counts.iter().sum();
    let at: usize = counts[..r as usize].iter().sum();
    let me = counts[r as usize];
    let mut sb = vec![0i64; n as usize * k];
    let mut rb = vec![0i64; k];
    let mut sv = vec![0i64; total];
    let mut rv = vec![0i64; me];
    let mut ss = vec![0i64; k];
    let mut rs = vec![0i64; k];
    let mut se = vec![0i64; k];
    let mut re = vec![0i64; k];
    scope(|s| -> Result<()> {
        let mut pb = w.reduce_scatter_block_init(s, &mut sb, &mut rb, &Op::SUM)?;
        let mut pv = w.reduce_scatter_init(s, &mut sv, &mut rv, &counts, &Op::SUM)?;
        let mut ps = w.scan_init(s, &mut ss, &mut rs, &Op::SUM)?;
        let mut pe = w.exscan_init(s, &mut se, &mut re, &Op::SUM)?;
        for round in 0..200 {
            for (i, x) in pb.send_buffer_mut::<i64>()?.iter_mut().enumerate() {
                *x = value(r, i, round);
            }
            for (i, x) in pv.send_buffer_mut::<i64>()?.iter_mut().enumerate() {
                *x = value(r, i, round);
            }
            for p in [&mut ps, &mut pe] {
                for (i, x) in p.send_buffer_mut::<i64>()?.iter_mut().enumerate() {
                    *x = value(r, i, round);
                }
            }
            pb.start()?;
            pv.start()?;
            ps.start()?;
            pe.start()?;
            pe.wait()?;
            ps.wait()?;
            pv.wait()?;
            pb.wait()?;
            let want: Vec<i64> = (0..k)
                .map(|i| sum_over(0..n, r as usize * k + i, round))
                .collect();
            check_eq(
                "persistent reduce_scatter_block",
                pb.buffer_mut::<i64>()?,
                &want,
            );
            let want: Vec<i64> = (0..me).map(|i| sum_over(0..n, at + i, round)).collect();
            check_eq("persistent reduce_scatter", pv.buffer_mut::<i64>()?, &want);
            let want: Vec<i64> = (0..k).map(|i| sum_over(0..r + 1, i, round)).collect();
            check_eq("persistent scan", ps.buffer_mut::<i64>()?, &want);
            if r > 0 {
                let want: Vec<i64> = (0..k).map(|i| sum_over(0..r, i, round)).collect();
                check_eq("persistent exscan", pe.buffer_mut::<i64>()?, &want);
            }
        }
        Ok(())
    })
}

type M = [i64; 4];

fn mul(x: M, y: M) -> M {
    [
        x[0] * y[0] + x[1] * y[2],
        x[0] * y[1] + x[1] * y[3],
        x[2] * y[0] + x[3] * y[2],
        x[2] * y[1] + x[3] * y[3],
    ]
}

fn mat(r: i32, i: usize) -> M {
    [1, r as i64 + 1, i as i64 % 3, 1]
}

/// 2x2 integer matrix products: block results must be M_0 M_1 ... in rank order.
fn noncommutative_ops_see_rank_order(u: &Universe) -> Result<()> {
    let w = u.world();
    let matmul = Op::user(false, |a: &[M], b: &mut [M]| {
        for (x, y) in a.iter().zip(b.iter_mut()) {
            *y = mul(*x, *y);
        }
    });
    let prod = |ranks: std::ops::Range<i32>, i: usize| -> M {
        ranks.fold([1, 0, 0, 1], |acc, q| mul(acc, mat(q, i)))
    };
    let (r, n) = (w.rank(), w.size());
    each_algorithm(w, Coll::ReduceScatterBlock, |c, _| {
        for k in [1usize, 5] {
            let mine: Vec<M> = (0..n as usize * k).map(|i| mat(r, i)).collect();
            let mut out = vec![[0; 4]; k];
            c.reduce_scatter_block(&mine, &mut out, &matmul)?;
            let want: Vec<M> = (0..k).map(|i| prod(0..n, r as usize * k + i)).collect();
            assert_eq!(out, want, "reduce_scatter_block k {k}");
        }
        Ok(())
    })?;
    each_algorithm(w, Coll::ReduceScatter, |c, _| {
        let counts = varied_counts(n, 4);
        let total: usize = counts.iter().sum();
        let at: usize = counts[..r as usize].iter().sum();
        let mine: Vec<M> = (0..total).map(|i| mat(r, i)).collect();
        let mut inout = mine.clone();
        c.reduce_scatter(IN_PLACE, &mut inout, &counts, &matmul)?;
        let want: Vec<M> = (0..counts[r as usize])
            .map(|i| prod(0..n, at + i))
            .collect();
        assert_eq!(&inout[..want.len()], &want[..], "reduce_scatter");
        Ok(())
    })?;
    for coll in [Coll::Scan, Coll::Exscan] {
        each_algorithm(w, coll, |c, _| {
            let mine: Vec<M> = (0..5).map(|i| mat(r, i)).collect();
            let mut out = vec![[0; 4]; 5];
            if coll == Coll::Scan {
                c.scan(&mine, &mut out, &matmul)?;
                let want: Vec<M> = (0..5).map(|i| prod(0..r + 1, i)).collect();
                assert_eq!(out, want, "scan");
            } else {
                c.exscan(&mine, &mut out, &matmul)?;
                if r > 0 {
                    let want: Vec<M> = (0..5).map(|i| prod(0..r, i)).collect();
                    assert_eq!(out, want, "exscan");
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

fn hash(r: i32, i: usize) -> u64 {
    let mut x = (r as u64) << 32 | i as u64;
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 29)
}

fn fval(r: i32, i: usize) -> f64 {
    ((hash(r, i) % 2001) as f64 - 1000.0) * 10f64.powi((i % 17) as i32 - 8)
}

/// The canonical association over ranks `[lo, lo + span)` clipped to `n` (`span` a power of
/// two, `lo` a multiple of it).
fn canonical(lo: i32, span: i32, n: i32, i: usize) -> f64 {
    if span == 1 {
        return fval(lo, i);
    }
    let half = span / 2;
    if lo + half >= n {
        return canonical(lo, half, n, i);
    }
    canonical(lo, half, n, i) + canonical(lo + half, half, n, i)
}

fn whole(n: i32, i: usize) -> f64 {
    canonical(0, (n as u32).next_power_of_two() as i32, n, i)
}

/// The scans' association (see earlybird's `scan_recursive_doubling`): blocks of the set bits
/// of r, highest first, nested to the right, the rank's own value innermost.
fn scan_ref(r: i32, i: usize, inclusive: bool) -> Option<f64> {
    let mut blocks = vec![];
    let mut lo = 0;
    for b in (0..31).rev() {
        if r & (1 << b) != 0 {
            blocks.push(canonical(lo, 1 << b, i32::MAX, i));
            lo += 1 << b;
        }
    }
    let mut acc = if inclusive { Some(fval(r, i)) } else { None };
    for t in blocks.into_iter().rev() {
        acc = Some(match acc {
            Some(a) => t + a,
            None => t,
        });
    }
    acc
}

fn same_bits(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got
        .iter()
        .zip(want)
        .position(|(a, b)| a.to_bits() != b.to_bits())
    {
        panic!(
            "{what}: element {i} is {:e}, expected {:e}",
            got[i], want[i]
        );
    }
}

/// Float sums whose value depends on the association: every algorithm gives the bits of the
/// documented association (the canonical one for reduce-scatters).
fn float_bits_follow_the_association(u: &Universe) -> Result<()> {
    let w = u.world();
    let (r, n) = (w.rank(), w.size());
    let k = 700usize;
    let mine: Vec<f64> = (0..n as usize * k).map(|i| fval(r, i)).collect();
    each_algorithm(w, Coll::ReduceScatterBlock, |c, _| {
        let mut out = vec![0.0; k];
        c.reduce_scatter_block(&mine, &mut out, &Op::SUM)?;
        let want: Vec<f64> = (0..k).map(|i| whole(n, r as usize * k + i)).collect();
        same_bits("reduce_scatter_block", &out, &want);
        Ok(())
    })?;
    each_algorithm(w, Coll::ReduceScatter, |c, _| {
        let counts = varied_counts(n, 2000);
        let total: usize = counts.iter().sum();
        let at: usize = counts[..r as usize].iter().sum();
        let mine: Vec<f64> = (0..total).map(|i| fval(r, i)).collect();
        let mut out = vec![0.0; counts[r as usize]];
        c.reduce_scatter(&mine, &mut out, &counts, &Op::SUM)?;
        let want: Vec<f64> = (0..out.len()).map(|i| whole(n, at + i)).collect();
        same_bits("reduce_scatter", &out, &want);
        Ok(())
    })?;
    // Large enough for the Rabenseifner algorithms to be the default on powers of two.
    let big = 10_000usize;
    let mine: Vec<f64> = (0..big).map(|i| fval(r, i)).collect();
    let want: Vec<f64> = (0..big).map(|i| whole(n, i)).collect();
    each_algorithm(w, Coll::Allreduce, |c, _| {
        let mut out = vec![0.0; big];
        c.allreduce(&mine, &mut out, &Op::SUM)?;
        same_bits("allreduce", &out, &want);
        Ok(())
    })?;
    each_algorithm(w, Coll::Reduce, |c, _| {
        let root = n - 1;
        let mut out = vec![0.0; if r == root { big } else { 0 }];
        c.reduce(&mine, &mut out, &Op::SUM, root)?;
        if r == root {
            same_bits("reduce", &out, &want);
        }
        Ok(())
    })?;
    for coll in [Coll::Scan, Coll::Exscan] {
        each_algorithm(w, coll, |c, _| {
            let k = 3000;
            let mine: Vec<f64> = (0..k).map(|i| fval(r, i)).collect();
            let mut out = vec![0.0; k];
            let inclusive = coll == Coll::Scan;
            if inclusive {
                c.scan(&mine, &mut out, &Op::SUM)?;
            } else {
                c.exscan(&mine, &mut out, &Op::SUM)?;
            }
            if let Some(want) = (0..k)
                .map(|i| scan_ref(r, i, inclusive))
                .collect::<Option<Vec<f64>>>()
            {
                same_bits(&format!("{coll:?}"), &out, &want);
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// A broadcast of a few MiB with the default choice (pipelined over more than two ranks),
/// a few roots, and one of a few hundred KiB (scatter then allgather); both by the binomial
/// tree when the ranks outnumber the host's cores.
fn large_bcast_default(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = w.size();
    let crowded = n as usize > common::host_cpus();
    for (len, alg) in [
        (3 << 20, "pipeline"),
        ((300 << 10) + 3, "scatter_allgather"),
    ] {
        let mut roots = vec![0, n / 2, n - 1];
        roots.dedup();
        for root in roots {
            let want: Vec<u8> = (0..len).map(|i| (i * 31 + root as usize) as u8).collect();
            let mut buf = if w.rank() == root {
                want.clone()
            } else {
                vec![0u8; len]
            };
            w.bcast(&mut buf, root)?;
            if n > 2 {
                let want = if crowded { "binomial" } else { alg };
                assert_eq!(earlybird::coll::last_algorithm(), want, "{n} ranks");
            }
            assert!(buf == want, "bcast of {len} bytes from {root}");
        }
    }
    Ok(())
}

fn bad_arguments_are_errors(u: &Universe) -> Result<()> {
    let w: &Comm = u.world();
    w.set_errhandler(ErrHandler::Return);
    let n = w.size() as usize;
    assert_err(
        w.reduce_scatter_block(&vec![1i32; 2 * n - 1], &mut [0; 2], &Op::SUM),
        ErrorClass::Count,
        "send buffer holds",
    );
    assert_err(
        w.reduce_scatter_block(&vec![1.0f32; n], &mut [0.0f32], &Op::BAND),
        ErrorClass::Op,
        "MPI_BAND",
    );
    if n > 1 {
        assert_err(
            w.reduce_scatter_block(IN_PLACE, &mut vec![0i32; n + 1], &Op::SUM),
            ErrorClass::Count,
            &format!("{} elements", n + 1),
        );
    }
    assert_err(
        w.reduce_scatter(&[1i32; 4], &mut [0; 4], &vec![1; n + 1], &Op::SUM),
        ErrorClass::Count,
        &format!("{} receive counts", n + 1),
    );
    assert_err(
        w.reduce_scatter(&vec![1i32; 2 * n], &mut [0; 1], &vec![2; n], &Op::SUM),
        ErrorClass::Count,
        "receive buffer holds 1",
    );
    assert_err(
        w.reduce_scatter(IN_PLACE, &mut vec![0i32; 2 * n - 1], &vec![2; n], &Op::SUM),
        ErrorClass::Count,
        "in place",
    );
    assert_err(
        w.scan(&[1i32, 2], &mut [0], &Op::SUM),
        ErrorClass::Count,
        "receive buffer",
    );
    assert_err(
        w.exscan(&[1.0f64], &mut [0.0], &Op::BOR),
        ErrorClass::Op,
        "MPI_BOR",
    );
    let mut one = [0i32];
    scope(|s| -> Result<()> {
        assert_err(
            w.iscan(s, &[1i32, 2], &mut one, &Op::SUM),
            ErrorClass::Count,
            "receive buffer",
        );
        Ok(())
    })?;
    // Everyone still agrees on what comes next.
    let mut x = vec![w.rank(); n];
    w.reduce_scatter_block(IN_PLACE, &mut x, &Op::SUM)?;
    assert_eq!(x[0], (0..w.size()).sum::<i32>());
    Ok(())
}
