//! Collectives on intercommunicators (MPI 4.1 §6.2.2): barrier, bcast, gather(v),
//! scatter(v), allgather(v), alltoall(v/w), reduce, allreduce, reduce_scatter(_block), each
//! blocking, nonblocking and persistent (started twice), between the two halves of the job
//! (even and odd world ranks: unequal groups on odd sizes). Rooted ones with every root in
//! either group: MPI_ROOT at the root, PROC_NULL beside it, the root's rank across. The two
//! groups use different counts where MPI lets them differ. Large counts take the rendezvous
//! path. A non-commutative operation sees the remote group's rank order.

mod common;

use earlybird::{Comm, Datatype, ErrHandler, ErrorClass, Op, Result, Universe, PROC_NULL, ROOT};

scenarios! {
    rooted_collectives [2, 3, 4, 8];
    all_to_all_collectives [2, 3, 4, 8];
    reductions [2, 3, 4, 8];
    misuse [2, 3];
}

/// The halves of the job joined by an intercommunicator; (intercommunicator, my group).
fn halves(u: &Universe) -> Result<(Comm, i32)> {
    let w = u.world();
    let color = w.rank() % 2;
    let local = w.split(color, w.rank())?.expect("color");
    Ok((local.intercomm_create(0, w, 1 - color, 99)?, color))
}

/// An element that says who made it: group, rank in the group, index.
fn val(group: i32, rank: i32, i: usize) -> i64 {
    (group as i64 * 1000 + rank as i64) * 1_000_000 + i as i64
}

/// The root argument of rank `me` of group `g` when the root is rank `root` of group `rg`.
fn root_arg(g: i32, me: i32, rg: i32, root: i32) -> i32 {
    match (g == rg, me == root) {
        (true, true) => ROOT,
        (true, false) => PROC_NULL,
        (false, _) => root,
    }
}

/// bcast, gather, gatherv, scatter, scatterv: every root of either group, every form.
fn rooted_collectives(u: &Universe) -> Result<()> {
    let (ic, g) = halves(u)?;
    let (me, n, m) = (ic.rank(), ic.size(), ic.remote_size()?);
    let size_of = |group: i32| if group == g { n } else { m };
    for form in 0..3 {
        for rg in 0..2 {
            for root in 0..size_of(rg) {
                let ra = root_arg(g, me, rg, root);
                let what = format!("form {form}, root {root} of group {rg}");
                let is_root = ra == ROOT;
                let across = g != rg;
                // bcast: 3,000 elements (rendezvous).
                let mut buf: Vec<i64> = if is_root {
                    (0..3000).map(|i| val(rg, root, i)).collect()
                } else {
                    vec![-1; 3000]
                };
                run_forms!(form, ic, bcast, ibcast, bcast_init(&mut buf, ra));
                if across {
                    assert!(
                        buf.iter().enumerate().all(|(i, &x)| x == val(rg, root, i)),
                        "bcast {what}"
                    );
                } else if !is_root {
                    assert!(
                        buf.iter().all(|&x| x == -1),
                        "bcast {what}: PROC_NULL untouched"
                    );
                }
                // gather: each member of the other group sends 5 + its rank elements (gatherv)
                // or 2,600 (gather).
                let c = 2600;
                let send: Vec<i64> = (0..c).map(|i| val(g, me, i)).collect();
                let mut recv = vec![-1i64; if is_root { c * m as usize } else { 0 }];
                run_forms!(
                    form,
                    ic,
                    gather,
                    igather,
                    gather_init(&send[..], &mut recv, ra)
                );
                if is_root {
                    for q in 0..m {
                        for i in 0..c {
                            assert_eq!(recv[q as usize * c + i], val(1 - g, q, i), "gather {what}");
                        }
                    }
                }
                let counts: Vec<usize> = (0..m as usize).map(|q| 5 + q).collect();
                // Blocks in reverse order, one gap element between them.
                let mut displs = vec![0; m as usize];
                let mut at = 0;
                for q in (0..m as usize).rev() {
                    displs[q] = at;
                    at += counts[q] + 1;
                }
                let mine = (5 + me as usize).min(if across { usize::MAX } else { 0 });
                let send: Vec<i64> = (0..mine).map(|i| val(g, me, i)).collect();
                let mut recv = vec![-1i64; if is_root { at } else { 0 }];
                run_forms!(
                    form,
                    ic,
                    gatherv,
                    igatherv,
                    gatherv_init(&send[..], &mut recv, &counts, &displs, ra)
                );
                if is_root {
                    for q in 0..m as usize {
                        for i in 0..counts[q] {
                            assert_eq!(
                                recv[displs[q] + i],
                                val(1 - g, q as i32, i),
                                "gatherv {what}"
                            );
                        }
                        assert_eq!(recv[displs[q] + counts[q]], -1, "gatherv {what}: the gap");
                    }
                }
                // scatter: block q (2,100 elements) of the root's buffer to remote rank q.
                let c = 2100;
                let send: Vec<i64> = if is_root {
                    (0..c * m as usize).map(|i| val(g, me, i)).collect()
                } else {
                    vec![]
                };
                let mut recv = vec![-1i64; if across { c } else { 0 }];
                run_forms!(
                    form,
                    ic,
                    scatter,
                    iscatter,
                    scatter_init(&send[..], &mut recv[..], ra)
                );
                if across {
                    for (i, &x) in recv.iter().enumerate() {
                        assert_eq!(x, val(rg, root, me as usize * c + i), "scatter {what}");
                    }
                }
                let send: Vec<i64> = if is_root {
                    (0..at).map(|i| val(g, me, i)).collect()
                } else {
                    vec![]
                };
                let mut recv = vec![-1i64; if across { 5 + me as usize } else { 0 }];
                run_forms!(
                    form,
                    ic,
                    scatterv,
                    iscatterv,
                    scatterv_init(&send[..], &counts, &displs, &mut recv[..], ra)
                );
                if across {
                    // The root's counts are for this group: block `me` at displs[me].
                    let d: usize = {
                        let counts: Vec<usize> = (0..n as usize).map(|q| 5 + q).collect();
                        let mut at = 0;
                        let mut d = 0;
                        for q in (0..n as usize).rev() {
                            if q == me as usize {
                                d = at;
                            }
                            at += counts[q] + 1;
                        }
                        d
                    };
                    for (i, &x) in recv.iter().enumerate() {
                        assert_eq!(x, val(rg, root, d + i), "scatterv {what}");
                    }
                }
            }
        }
        ic.barrier()?;
    }
    Ok(())
}

/// allgather(v), alltoall(v/w), barrier: the groups send different counts.
fn all_to_all_collectives(u: &Universe) -> Result<()> {
    let (ic, g) = halves(u)?;
    let (me, m) = (ic.rank(), ic.remote_size()?);
    let count = |group: i32| 2000 + 700 * group as usize;
    let (mine, theirs) = (count(g), count(1 - g));
    for form in 0..3 {
        run_forms!(form, ic, barrier, ibarrier, barrier_init());
        let send: Vec<i64> = (0..mine).map(|i| val(g, me, i)).collect();
        let mut recv = vec![-1i64; theirs * m as usize];
        run_forms!(
            form,
            ic,
            allgather,
            iallgather,
            allgather_init(&send[..], &mut recv)
        );
        for q in 0..m as usize {
            for i in 0..theirs {
                assert_eq!(
                    recv[q * theirs + i],
                    val(1 - g, q as i32, i),
                    "allgather form {form}"
                );
            }
        }
        // allgatherv: remote member q sent q + 1 + its group elements; stored in reverse.
        let vcount = |group: i32, q: i32| (q + 1 + group) as usize;
        let send: Vec<i64> = (0..vcount(g, me)).map(|i| val(g, me, i)).collect();
        let counts: Vec<usize> = (0..m).map(|q| vcount(1 - g, q)).collect();
        let total: usize = counts.iter().sum();
        let mut displs = vec![0; m as usize];
        let mut at = 0;
        for q in (0..m as usize).rev() {
            displs[q] = at;
            at += counts[q];
        }
        let mut recv = vec![-1i64; total];
        run_forms!(
            form,
            ic,
            allgatherv,
            iallgatherv,
            allgatherv_init(&send[..], &mut recv, &counts, &displs)
        );
        for q in 0..m as usize {
            for i in 0..counts[q] {
                assert_eq!(
                    recv[displs[q] + i],
                    val(1 - g, q as i32, i),
                    "allgatherv form {form}"
                );
            }
        }
        // alltoall: block q of `mine` elements to remote rank q.
        let send: Vec<i64> = (0..mine * m as usize).map(|i| val(g, me, i)).collect();
        let mut recv = vec![-1i64; theirs * m as usize];
        run_forms!(
            form,
            ic,
            alltoall,
            ialltoall,
            alltoall_init(&send[..], &mut recv)
        );
        for q in 0..m as usize {
            for i in 0..theirs {
                let sent = val(1 - g, q as i32, me as usize * theirs + i);
                assert_eq!(recv[q * theirs + i], sent, "alltoall form {form}");
            }
        }
        // alltoallv: to remote rank q, q + 2 elements from offset 10 q; from q, me + 2.
        let scounts: Vec<usize> = (0..m as usize).map(|q| q + 2).collect();
        let sdispls: Vec<usize> = (0..m as usize).map(|q| 10 * q).collect();
        let send: Vec<i64> = (0..10 * m as usize).map(|i| val(g, me, i)).collect();
        let rcounts = vec![me as usize + 2; m as usize];
        let rdispls: Vec<usize> = (0..m as usize).map(|q| q * (me as usize + 2)).collect();
        let mut recv = vec![-1i64; m as usize * (me as usize + 2)];
        run_forms!(
            form,
            ic,
            alltoallv,
            ialltoallv,
            alltoallv_init(&send[..], &scounts, &sdispls, &mut recv, &rcounts, &rdispls)
        );
        for q in 0..m as usize {
            for i in 0..me as usize + 2 {
                let sent = val(1 - g, q as i32, 10 * me as usize + i);
                assert_eq!(recv[rdispls[q] + i], sent, "alltoallv form {form}");
            }
        }
        // alltoallw: every block 3 i64 through the i64 datatype, at byte displacements.
        let t = Datatype::of::<i64>();
        let sspecs: Vec<(usize, usize, &Datatype)> =
            (0..m as usize).map(|q| (3, 24 * q, &t)).collect();
        let rspecs = sspecs.clone();
        let send: Vec<i64> = (0..3 * m as usize).map(|i| val(g, me, i)).collect();
        let mut recv = vec![-1i64; 3 * m as usize];
        run_forms!(
            form,
            ic,
            alltoallw,
            ialltoallw,
            alltoallw_init(&send[..], &sspecs, &mut recv, &rspecs)
        );
        for q in 0..m as usize {
            for i in 0..3 {
                assert_eq!(
                    recv[3 * q + i],
                    val(1 - g, q as i32, 3 * me as usize + i),
                    "alltoallw form {form}"
                );
            }
        }
    }
    Ok(())
}

/// reduce (every root), allreduce, reduce_scatter_block, reduce_scatter: sums of the remote
/// group's inputs; and an allreduce by a non-commutative operation, which must combine the
/// remote group in its rank order.
fn reductions(u: &Universe) -> Result<()> {
    let (ic, g) = halves(u)?;
    let (me, n, m) = (ic.rank(), ic.size(), ic.remote_size()?);
    let size_of = |group: i32| if group == g { n } else { m };
    let sum_of = |group: i32, size: i32, i: usize| (0..size).map(|q| val(group, q, i)).sum::<i64>();
    let c = 2500;
    for form in 0..3 {
        for rg in 0..2 {
            for root in 0..size_of(rg) {
                let ra = root_arg(g, me, rg, root);
                let send: Vec<i64> = (0..c).map(|i| val(g, me, i)).collect();
                let mut recv = vec![-1i64; if ra == ROOT { c } else { 0 }];
                let send_arg: &[i64] = if ra == ROOT { &[] } else { &send };
                run_forms!(
                    form,
                    ic,
                    reduce,
                    ireduce,
                    reduce_init(send_arg, &mut recv, &Op::SUM, ra)
                );
                if ra == ROOT {
                    for (i, &x) in recv.iter().enumerate() {
                        assert_eq!(
                            x,
                            sum_of(1 - g, m, i),
                            "reduce form {form} root {root} of {rg}"
                        );
                    }
                }
            }
        }
        let send: Vec<i64> = (0..c).map(|i| val(g, me, i)).collect();
        let mut recv = vec![-1i64; c];
        run_forms!(
            form,
            ic,
            allreduce,
            iallreduce,
            allreduce_init(&send[..], &mut recv, &Op::SUM)
        );
        for (i, &x) in recv.iter().enumerate() {
            assert_eq!(x, sum_of(1 - g, m, i), "allreduce form {form}");
        }
        // Non-commutative: "keep the left operand's digits, append the right's", on small
        // numbers: the result lists the remote ranks in order.
        let concat = Op::user::<i64>(false, |a, b| {
            for (x, y) in a.iter().zip(b.iter_mut()) {
                let digits = if *y == 0 {
                    1
                } else {
                    (*y as f64).log10().floor() as u32 + 1
                };
                *y += *x * 10i64.pow(digits);
            }
        });
        let send = [me as i64 + 1];
        let mut recv = [0i64];
        run_forms!(
            form,
            ic,
            allreduce,
            iallreduce,
            allreduce_init(&send[..], &mut recv, &concat)
        );
        let want: i64 = (0..m).fold(0, |acc, q| acc * 10 + q as i64 + 1);
        assert_eq!(
            recv[0], want,
            "non-commutative allreduce form {form}: remote rank order"
        );
        // reduce_scatter_block: this group's members get `rc` each of the remote group's
        // vectors; the remote group sends `m'` blocks of its own members' counts.
        let rc = |group: i32| 1500 + 300 * group as usize;
        let send: Vec<i64> = (0..rc(1 - g) * m as usize).map(|i| val(g, me, i)).collect();
        let mut recv = vec![-1i64; rc(g)];
        run_forms!(
            form,
            ic,
            reduce_scatter_block,
            ireduce_scatter_block,
            reduce_scatter_block_init(&send[..], &mut recv, &Op::SUM)
        );
        for (i, &x) in recv.iter().enumerate() {
            assert_eq!(
                x,
                sum_of(1 - g, m, me as usize * rc(g) + i),
                "reduce_scatter_block form {form}"
            );
        }
        // reduce_scatter: counts r + 1 per member of each group.
        let counts = |size: i32| (0..size as usize).map(|r| r + 1).collect::<Vec<_>>();
        let (mine, theirs) = (counts(n), counts(m));
        let send: Vec<i64> = (0..theirs.iter().sum::<usize>())
            .map(|i| val(g, me, i))
            .collect();
        let mut recv = vec![-1i64; mine[me as usize]];
        run_forms!(
            form,
            ic,
            reduce_scatter,
            ireduce_scatter,
            reduce_scatter_init(&send[..], &mut recv, &mine, &Op::SUM)
        );
        let off: usize = mine[..me as usize].iter().sum();
        for (i, &x) in recv.iter().enumerate() {
            assert_eq!(x, sum_of(1 - g, m, off + i), "reduce_scatter form {form}");
        }
    }
    Ok(())
}

/// Errors: a root that is neither MPI_ROOT, PROC_NULL nor a remote rank (MPI_ERR_ROOT);
/// MPI_IN_PLACE (MPI_ERR_BUFFER); scan on an intercommunicator (MPI_ERR_COMM). Each rank
/// fails locally, before any message.
fn misuse(u: &Universe) -> Result<()> {
    let (ic, _) = halves(u)?;
    let m = ic.remote_size()?;
    ic.set_errhandler(ErrHandler::Return);
    let mut buf = [0i64; 4];
    let e = ic.bcast(&mut buf, m).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Root, "{e}");
    let e = ic.bcast(&mut buf, -7).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Root, "{e}");
    let e = ic
        .allreduce(earlybird::IN_PLACE, &mut buf, &Op::SUM)
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Buffer, "{e}");
    let e = ic.scan(&[1i64][..], &mut buf[..1], &Op::SUM).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Comm, "{e}");
    // Whatever one rank's other arguments: still MPI_ERR_COMM, and no rank takes a
    // collective number the others do not (the barrier below would hang).
    let short = if ic.rank() == 0 { 0 } else { 1 };
    let e = ic
        .scan(&[1i64][..], &mut buf[..short], &Op::SUM)
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Comm, "{e}");
    // MPI_IN_PLACE where a buffer does not count at that rank is ignored: a scatter from
    // rank 0 of group 0 with IN_PLACE as every insignificant argument.
    let (me, g) = (ic.rank(), u.world().rank() % 2);
    let ra = root_arg(g, me, 0, 0);
    let data: Vec<i64> = (0..2 * m as i64).collect();
    let mut got = [-1i64; 2];
    match (g, ra) {
        (0, ROOT) => ic.scatter(&data[..], earlybird::IN_PLACE, ra)?,
        (0, _) => ic.scatter(earlybird::IN_PLACE, earlybird::IN_PLACE, ra)?,
        _ => ic.scatter(earlybird::IN_PLACE, &mut got[..], ra)?,
    }
    if g == 1 {
        assert_eq!(got, [2 * me as i64, 2 * me as i64 + 1]);
    }
    ic.set_errhandler(ErrHandler::Fatal);
    ic.barrier()
}
