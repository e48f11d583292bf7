//! Gather, scatter and allgather, regular and v forms, against sequential references: every
//! algorithm forced in turn, every root, counts 0, 1, odd and large, IN_PLACE, blocking,
//! nonblocking and persistent, a padded element type, and misuse as error classes.

mod common;

use common::{assert_err, check_eq, each_algorithm};
use earlybird::{
    scope, Coll, Comm, ErrHandler, ErrorClass, Request, Result, Scope, Universe, ValueIndex,
    IN_PLACE,
};

scenarios! {
    gather_every_root_and_count [1, 2, 3, 4, 8];
    gatherv_every_root [1, 2, 3, 4, 8];
    scatter_every_root_and_count [1, 2, 3, 4, 8];
    scatterv_every_root [1, 2, 3, 4, 8];
    allgather_every_count [1, 2, 3, 4, 8];
    allgatherv_leaves_gaps [1, 2, 3, 4, 8];
    persistent_with_changing_data [1, 2, 3, 4, 8];
    padded_elements [1, 2, 3, 4, 8];
    bad_arguments_are_errors [1, 2, 3];
}

const COUNTS: [usize; 4] = [0, 1, 7, 1000];
const LARGE: usize = 40_000;

fn value(rank: i32, i: usize, round: usize) -> i64 {
    (rank as i64 + 1) * 1_000_003 + (i as i64) * 7 + round as i64 * 13
}

fn block(rank: i32, n: usize, round: usize) -> Vec<i64> {
    (0..n).map(|i| value(rank, i, round)).collect()
}

/// Every rank's block of `n`, in rank order.
fn all_blocks(size: i32, n: usize, round: usize) -> Vec<i64> {
    (0..size).flat_map(|r| block(r, n, round)).collect()
}

/// Start a nonblocking collective in a scope of its own and wait for it.
fn waited<'env>(f: impl for<'s> FnOnce(&'s Scope<'s, 'env>) -> Result<Request<'s>>) -> Result<()> {
    scope(|s| f(s)?.wait().map(drop))
}

/// The last collective ran the forced algorithm `name` (unless it is the default run, or a
/// power-of-two algorithm on other sizes, which falls back).
#[track_caller]
fn ran(c: &Comm, name: &str) {
    let pow2 = c.size().count_ones() == 1;
    if !name.is_empty() && (pow2 || name != "recursive_doubling") {
        assert_eq!(earlybird::coll::last_algorithm(), name);
    }
}

/// The (root, count) pairs a rooted test covers: every root with the small counts, the last
/// root with a large one.
fn cases(c: &Comm) -> Vec<(i32, usize)> {
    let mut v: Vec<(i32, usize)> = (0..c.size())
        .flat_map(|r| COUNTS.iter().map(move |&n| (r, n)))
        .collect();
    v.push((c.size() - 1, LARGE));
    v
}

fn gather_every_root_and_count(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Gather, |c, name| {
        let (me, size) = (c.rank(), c.size());
        for (root, n) in cases(c) {
            let mine = block(me, n, 0);
            let want = all_blocks(size, n, 0);
            let mut recv = if me == root {
                vec![-1i64; n * size as usize]
            } else {
                vec![]
            };
            c.gather(&mine, &mut recv, root)?;
            ran(c, name);
            if me == root {
                check_eq(&format!("gather root {root} n {n}"), &recv, &want);
                // In place: the root's block is already where it belongs.
                let mut inout = vec![-1i64; n * size as usize];
                inout[root as usize * n..][..n].copy_from_slice(&mine);
                c.gather(IN_PLACE, &mut inout, root)?;
                check_eq("in-place gather", &inout, &want);
                // A longer receive buffer keeps its tail.
                let mut long = vec![-2i64; n * size as usize + 3];
                waited(|s| c.igather(s, &mine, &mut long, root))?;
                check_eq("igather", &long[..want.len()], &want);
                assert_eq!(&long[want.len()..], &[-2, -2, -2]);
            } else {
                c.gather(&mine, &mut [0i64; 0], root)?;
                waited(|s| c.igather(s, &mine, &mut [0i64; 0], root))?;
            }
        }
        Ok(())
    })
}

/// Counts with zeros and odd sizes, blocks placed in reverse rank order with gaps.
fn v_layout(size: i32, scale: usize) -> (Vec<usize>, Vec<usize>, usize) {
    let counts: Vec<usize> = (0..size as usize)
        .map(|i| ((i * 3 + 1) % 5) * scale)
        .collect();
    let mut displs = vec![0; size as usize];
    let mut at = 2;
    for i in (0..size as usize).rev() {
        displs[i] = at;
        at += counts[i] + i % 3;
    }
    (counts, displs, at + 1)
}

/// The receive buffer of a v form: every block at its displacement, `fill` elsewhere.
fn v_expect(counts: &[usize], displs: &[usize], len: usize, fill: i64, round: usize) -> Vec<i64> {
    let mut v = vec![fill; len];
    for (r, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        v[d..d + c].copy_from_slice(&block(r as i32, c, round));
    }
    v
}

fn gatherv_every_root(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Gatherv, |c, _| {
        let (me, size) = (c.rank(), c.size());
        for scale in [1, 301] {
            let (counts, displs, len) = v_layout(size, scale);
            let mine = block(me, counts[me as usize], 0);
            let want = v_expect(&counts, &displs, len, -1, 0);
            for root in 0..size {
                if me != root {
                    // Counts, displacements and receive buffer are not looked at here.
                    c.gatherv(&mine, &mut [0i64; 0], &[], &[], root)?;
                    c.gatherv(&mine, &mut [0i64; 0], &[], &[], root)?;
                    waited(|s| c.igatherv(s, &mine, &mut [0i64; 0], &[], &[], root))?;
                    continue;
                }
                let mut recv = vec![-1i64; len];
                c.gatherv(&mine, &mut recv, &counts, &displs, root)?;
                check_eq(&format!("gatherv root {root}"), &recv, &want);
                let mut inout = vec![-1i64; len];
                let d = displs[me as usize];
                inout[d..d + mine.len()].copy_from_slice(&mine);
                c.gatherv(IN_PLACE, &mut inout, &counts, &displs, root)?;
                check_eq("in-place gatherv", &inout, &want);
                let mut recv2 = vec![-1i64; len];
                waited(|s| c.igatherv(s, &mine, &mut recv2, &counts, &displs, root))?;
                check_eq("igatherv", &recv2, &want);
            }
        }
        Ok(())
    })
}

fn scatter_every_root_and_count(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Scatter, |c, name| {
        let (me, size) = (c.rank(), c.size());
        for (root, n) in cases(c) {
            let all = all_blocks(size, n, 0);
            let send: &[i64] = if me == root { &all } else { &[] };
            let want = block(me, n, 0);
            let mut recv = vec![-1i64; n];
            c.scatter(send, &mut recv, root)?;
            ran(c, name);
            check_eq(&format!("scatter root {root} n {n}"), &recv, &want);
            let mut recv2 = vec![-1i64; n];
            waited(|s| c.iscatter(s, send, &mut recv2, root))?;
            check_eq("iscatter", &recv2, &want);
            // In place at the root: its block stays in the send buffer.
            let mut recv3 = vec![-1i64; n];
            if me == root {
                c.scatter(send, IN_PLACE, root)?;
            } else {
                c.scatter(send, &mut recv3, root)?;
                check_eq("scatter with the root in place", &recv3, &want);
            }
        }
        Ok(())
    })
}

fn scatterv_every_root(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Scatterv, |c, _| {
        let (me, size) = (c.rank(), c.size());
        for scale in [1, 301] {
            let (counts, displs, len) = v_layout(size, scale);
            let send = v_expect(&counts, &displs, len, -7, 0);
            let want = block(me, counts[me as usize], 0);
            for root in 0..size {
                let sb: &[i64] = if me == root { &send } else { &[] };
                let (cs, ds): (&[usize], &[usize]) = if me == root {
                    (&counts, &displs)
                } else {
                    (&[], &[])
                };
                let mut recv = vec![-1i64; want.len()];
                c.scatterv(sb, cs, ds, &mut recv, root)?;
                check_eq(&format!("scatterv root {root}"), &recv, &want);
                let mut recv2 = vec![-1i64; want.len()];
                waited(|s| c.iscatterv(s, sb, cs, ds, &mut recv2, root))?;
                check_eq("iscatterv", &recv2, &want);
                let mut recv3 = vec![-1i64; want.len()];
                if me == root {
                    c.scatterv(sb, cs, ds, IN_PLACE, root)?;
                } else {
                    c.scatterv(sb, cs, ds, &mut recv3, root)?;
                    check_eq("scatterv with the root in place", &recv3, &want);
                }
            }
        }
        // Send blocks may overlap (they are only read): everyone gets the same block.
        let all: Vec<i64> = (0..5).collect();
        let n = size as usize;
        let (counts, displs) = (vec![3; n], vec![1; n]);
        let mut recv = [0i64; 3];
        c.scatterv(&all, &counts, &displs, &mut recv, 0)?;
        assert_eq!(recv, [1, 2, 3]);
        Ok(())
    })
}

fn allgather_every_count(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Allgather, |c, name| {
        let (me, size) = (c.rank(), c.size());
        for n in COUNTS.into_iter().chain([LARGE]) {
            let mine = block(me, n, 0);
            let want = all_blocks(size, n, 0);
            let mut recv = vec![-1i64; want.len()];
            c.allgather(&mine, &mut recv)?;
            ran(c, name);
            check_eq(&format!("allgather n {n}"), &recv, &want);
            let mut inout = vec![-1i64; want.len()];
            inout[me as usize * n..][..n].copy_from_slice(&mine);
            c.allgather(IN_PLACE, &mut inout)?;
            check_eq("in-place allgather", &inout, &want);
            let mut recv2 = vec![-1i64; want.len()];
            waited(|s| c.iallgather(s, &mine, &mut recv2))?;
            check_eq("iallgather", &recv2, &want);
        }
        Ok(())
    })
}

fn allgatherv_leaves_gaps(u: &Universe) -> Result<()> {
    let w = u.world();
    each_algorithm(w, Coll::Allgatherv, |c, name| {
        let me = c.rank();
        for scale in [0, 1, 301, 4000] {
            let (counts, displs, len) = v_layout(c.size(), scale);
            let mine = block(me, counts[me as usize], 0);
            let want = v_expect(&counts, &displs, len, -1, 0);
            let mut recv = vec![-1i64; len];
            c.allgatherv(&mine, &mut recv, &counts, &displs)?;
            ran(c, name);
            check_eq(&format!("allgatherv scale {scale}"), &recv, &want);
            let mut inout = vec![-1i64; len];
            let d = displs[me as usize];
            inout[d..d + mine.len()].copy_from_slice(&mine);
            c.allgatherv(IN_PLACE, &mut inout, &counts, &displs)?;
            check_eq("in-place allgatherv", &inout, &want);
            let mut recv2 = vec![-1i64; len];
            waited(|s| c.iallgatherv(s, &mine, &mut recv2, &counts, &displs))?;
            check_eq("iallgatherv", &recv2, &want);
        }
        Ok(())
    })
}

/// Persistent forms started many times, the data changed between starts.
fn persistent_with_changing_data(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, size) = (w.rank(), w.size());
    let n = 5;
    let rounds = 30;
    use Coll::{Allgather, Allgatherv, Gather, Gatherv, Scatter, Scatterv};
    for coll in [Gather, Gatherv, Scatter, Scatterv, Allgather, Allgatherv] {
        each_algorithm(w, coll, |c, name| {
            let root = size / 2;
            let at_root = me == root;
            let scatter = matches!(coll, Scatter | Scatterv);
            let slen = match coll {
                _ if !scatter => n,
                _ if at_root => n * size as usize,
                _ => 0,
            };
            let rlen = match coll {
                Gather | Gatherv if !at_root => 0,
                Scatter | Scatterv => n,
                _ => n * size as usize,
            };
            let mut send = vec![0i64; slen];
            let mut recv = vec![0i64; rlen];
            let counts = vec![n; size as usize];
            let displs: Vec<usize> = (0..size as usize).map(|i| i * n).collect();
            let (cs, ds) = (&counts[..], &displs[..]);
            scope(|s| -> Result<()> {
                let mut p = match coll {
                    Gather => c.gather_init(s, &mut send, &mut recv, root)?,
                    Gatherv => c.gatherv_init(s, &mut send, &mut recv, cs, ds, root)?,
                    Scatter => c.scatter_init(s, &mut send, &mut recv, root)?,
                    Scatterv => c.scatterv_init(s, &mut send, cs, ds, &mut recv, root)?,
                    Allgather => c.allgather_init(s, &mut send, &mut recv)?,
                    _ => c.allgatherv_init(s, &mut send, &mut recv, cs, ds)?,
                };
                for round in 0..rounds {
                    let mine = if scatter {
                        all_blocks(size, n, round)
                    } else {
                        block(me, n, round)
                    };
                    if !scatter || at_root {
                        p.send_buffer_mut::<i64>()?.copy_from_slice(&mine);
                    }
                    p.start()?;
                    p.wait()?;
                    let got = p.buffer_mut::<i64>()?;
                    let want = match coll {
                        Gather | Gatherv if !at_root => vec![],
                        Scatter | Scatterv => block(me, n, round),
                        _ => all_blocks(size, n, round),
                    };
                    check_eq(&format!("{coll:?} {name} round {round}"), got, &want);
                }
                Ok(())
            })
        })?;
    }
    // In place: the own block changes in the receive buffer.
    let mut recv = vec![0i64; n * size as usize];
    scope(|s| -> Result<()> {
        let mut p = w.allgather_init(s, IN_PLACE, &mut recv)?;
        for round in 0..rounds {
            p.buffer_mut::<i64>()?[me as usize * n..][..n].copy_from_slice(&block(me, n, round));
            p.start()?;
            p.wait()?;
            check_eq(
                "in-place allgather_init",
                p.buffer_mut::<i64>()?,
                &all_blocks(size, n, round),
            );
        }
        Ok(())
    })
}

/// `ValueIndex<f64>` has 4 bytes of padding: blocks move through its datatype.
fn padded_elements(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, size) = (w.rank(), w.size());
    let vi = |r: i32, i: usize| ValueIndex::new(r as f64 + i as f64 / 8.0, r * 100 + i as i32);
    for n in [0usize, 1, 7, 300] {
        let mine: Vec<_> = (0..n).map(|i| vi(me, i)).collect();
        let want: Vec<_> = (0..size)
            .flat_map(|r| (0..n).map(move |i| vi(r, i)))
            .collect();
        for coll in [
            Coll::Gather,
            Coll::Scatter,
            Coll::Allgather,
            Coll::Allgatherv,
        ] {
            each_algorithm(w, coll, |c, name| {
                let root = size - 1;
                let mut recv = vec![ValueIndex::new(-1.0, -1); want.len()];
                match coll {
                    Coll::Gather => {
                        c.gather(&mine, &mut recv, root)?;
                        if me == root {
                            assert_eq!(recv, want, "gather {name} n {n}");
                        }
                    }
                    Coll::Scatter => {
                        let mut one = vec![ValueIndex::new(-1.0, -1); n];
                        c.scatter(&want, &mut one, root)?;
                        assert_eq!(one, mine, "scatter {name} n {n}");
                    }
                    Coll::Allgather => {
                        c.allgather(&mine, &mut recv)?;
                        assert_eq!(recv, want, "allgather {name} n {n}");
                    }
                    _ => {
                        let counts = vec![n; size as usize];
                        let displs: Vec<usize> = (0..size as usize).map(|i| i * n).collect();
                        c.allgatherv(&mine, &mut recv, &counts, &displs)?;
                        assert_eq!(recv, want, "allgatherv {name} n {n}");
                    }
                }
                Ok(())
            })?;
        }
    }
    Ok(())
}

fn bad_arguments_are_errors(u: &Universe) -> Result<()> {
    let w: &Comm = u.world();
    w.set_errhandler(ErrHandler::Return);
    let (me, size) = (w.rank(), w.size());
    let n = size as usize;
    let mut recv = vec![0i32; 2 * n];
    assert_err(w.gather(&[1i32], &mut recv, size), ErrorClass::Root, "root");
    assert_err(
        w.scatter(&[1i32], &mut [0], -1),
        ErrorClass::Root,
        "root -1",
    );
    assert_err(
        w.gatherv(&[1i32], &mut recv, &[1], &[0], size + 2),
        ErrorClass::Root,
        "root",
    );
    // Receive buffer too short at the root (the others are not looked at): the root
    // reports it, and the others' calls end normally or with the root's error.
    let r = w.gather(&[1i32, 2, 3], &mut recv, 0);
    if me == 0 {
        assert_err(
            r,
            ErrorClass::Count,
            &format!("{} elements, {} needed", 2 * n, 3 * n),
        );
    } else {
        ok_or_class(r, ErrorClass::Count);
    }
    let r = if me == 0 {
        w.scatter(&recv[..n], &mut [0i32; 2], 0)
    } else {
        w.scatter(&[] as &[i32], &mut [0i32; 2], 0)
    };
    if me == 0 {
        assert_err(
            r,
            ErrorClass::Count,
            &format!("{n} elements, {} needed", 2 * n),
        );
    } else {
        ok_or_class(r, ErrorClass::Count);
    }
    if size > 1 {
        let r = if me == 0 {
            w.gather(IN_PLACE, &mut vec![0i32; 2 * n + 1], 0)
        } else {
            w.gather(&[1i32, 2], &mut [0i32; 0], 0)
        };
        if me == 0 {
            assert_err(
                r,
                ErrorClass::Count,
                &format!("{} elements must split", 2 * n + 1),
            );
        } else {
            ok_or_class(r, ErrorClass::Count);
        }
    }
    assert_err(
        w.allgather(&[1i32, 2, 3], &mut recv),
        ErrorClass::Count,
        &format!("{} elements, {} needed", 2 * n, 3 * n),
    );
    // IN_PLACE where MPI does not allow it.
    if size > 1 {
        let r = if me == 1 {
            w.gather(IN_PLACE, &mut recv, 0)
        } else {
            w.gather(&[1i32, 2], &mut recv, 0)
        };
        if me == 1 {
            assert_err(r, ErrorClass::Buffer, "only at the root");
        } else {
            ok_or_class(r, ErrorClass::Buffer);
        }
        let r = if me == 1 {
            w.scatter(&[] as &[i32], IN_PLACE, 0)
        } else {
            w.scatter(&recv, &mut [0i32; 2], 0)
        };
        if me == 1 {
            assert_err(r, ErrorClass::Buffer, "only at the root");
        } else {
            ok_or_class(r, ErrorClass::Buffer);
        }
    }
    assert_err(
        w.scatter(IN_PLACE, &mut recv, 0),
        ErrorClass::Buffer,
        "receive argument",
    );
    // v forms: one count and displacement per rank, blocks inside the buffer, no overlap.
    let ones = vec![1usize; n];
    let steps: Vec<usize> = (0..n).collect();
    assert_err(
        w.allgatherv(&[1i32], &mut recv, &ones[1..], &steps),
        ErrorClass::Arg,
        &format!("counts has {} entries, {size} needed", n - 1),
    );
    assert_err(
        w.allgatherv(&[1i32], &mut recv, &ones, &steps[1..]),
        ErrorClass::Arg,
        &format!("displacements has {} entries", n - 1),
    );
    let mut far = steps.clone();
    far[n - 1] = 2 * n;
    assert_err(
        w.allgatherv(&[1i32], &mut recv, &ones, &far),
        ErrorClass::Buffer,
        &format!("rank {}'s block (displacement {}, count 1)", n - 1, 2 * n),
    );
    assert_err(
        w.allgatherv(&[1i32, 2], &mut recv, &ones, &steps),
        ErrorClass::Count,
        "holds 2 elements but the counts give rank",
    );
    if size > 1 {
        let twos = vec![2usize; n];
        assert_err(
            w.allgatherv(&[1i32, 2], &mut recv, &twos, &steps),
            ErrorClass::Arg,
            "overlap",
        );
        let r = w.gatherv(&[1i32, 2], &mut recv, &twos, &steps, 0);
        if me == 0 {
            assert_err(r, ErrorClass::Arg, "overlap");
        } else {
            ok_or_class(r, ErrorClass::Arg);
        }
        let r = if me == 0 {
            w.scatterv(&recv[..1], &ones, &steps, &mut [0i32], 0)
        } else {
            w.scatterv(&[] as &[i32], &[], &[], &mut [0i32], 0)
        };
        if me == 0 {
            assert_err(
                r,
                ErrorClass::Buffer,
                "does not fit in the send buffer of 1 elements",
            );
        } else {
            ok_or_class(r, ErrorClass::Buffer);
        }
    }
    // Everyone still agrees on what comes next.
    let mut all = vec![0i32; n];
    w.allgather(&[me], &mut all)?;
    assert_eq!(all, (0..size).collect::<Vec<_>>());
    Ok(())
}

/// A rank whose part did not depend on the rank in error may finish normally; one that did
/// gets that rank's error class through its error notice.
fn ok_or_class(r: Result<()>, class: ErrorClass) {
    if let Err(e) = r {
        assert_eq!(e.class(), class, "{e}");
        assert!(
            e.to_string()
                .contains("returned an error instead of taking part"),
            "{e}"
        );
    }
}
