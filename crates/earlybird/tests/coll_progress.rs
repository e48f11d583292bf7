//! Progress (MPI 4.1 §3.7.4, §6.12): a pending nonblocking or started persistent collective
//! advances while its rank is inside any MPI call that blocks or polls, not only when its own
//! request is waited on. Each scenario starts several operations in the same order on every
//! rank and completes them in a different order on each rank, or leaves one pending while
//! the rank blocks in an unrelated call that a peer can satisfy only once that collective
//! has moved on. Counts are large enough (2,500 and more `i64`) that messages take the
//! rendezvous path. A hang fails the test: thread jobs and ebrun have a bounded wait.

mod common;

use earlybird::{
    scope, test_any, wait_all, wait_any, wait_some, Comm, Op, Request, Result, Scope, Universe,
};

scenarios! {
    nonblocking_waited_in_rotated_order [2, 3, 4, 8];
    persistent_waited_in_rotated_order [2, 3, 4, 8];
    every_pair_in_both_orders [2, 3, 4, 8];
    pending_collective_advances_in_blocking_calls [2, 3, 4, 8];
    random_mix_of_collectives_and_p2p [2, 3, 4, 8];
}

/// Elements of a large message (20,000 bytes: above the eager limit).
const BIG: usize = 2_500;

fn value(rank: i32, i: usize, salt: u64) -> i64 {
    (rank as i64 + 1) * 1_000_003 + (i as i64) * 7 + salt as i64 * 131
}

/// splitmix64: the same sequence on every rank for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// One collective operation of a test, with what it must produce.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Allreduce,
    Bcast { root: i32 },
    Reduce { root: i32 },
    Allgather,
    Alltoall,
    Barrier,
}

impl Kind {
    /// The kind `k` of a menu, roots spread over the ranks.
    fn nth(k: usize, n: i32) -> Kind {
        match k % 6 {
            0 => Kind::Allreduce,
            1 => Kind::Bcast {
                root: (k as i32 / 6 + 1) % n,
            },
            2 => Kind::Reduce {
                root: (n - 1 - k as i32 / 6).rem_euclid(n),
            },
            3 => Kind::Allgather,
            4 => Kind::Alltoall,
            _ => Kind::Barrier,
        }
    }

    /// The input and output buffers of this rank, the output filled with a marker.
    fn buffers(self, c: &Comm, count: usize, salt: u64) -> (Vec<i64>, Vec<i64>) {
        let (me, n) = (c.rank(), c.size() as usize);
        let input: Vec<i64> = match self {
            Kind::Alltoall => (0..count * n).map(|i| value(me, i, salt)).collect(),
            Kind::Bcast { root } if root != me => vec![-1; count],
            Kind::Barrier => vec![],
            _ => (0..count).map(|i| value(me, i, salt)).collect(),
        };
        let out = match self {
            Kind::Allgather | Kind::Alltoall => vec![-1; count * n],
            Kind::Bcast { .. } | Kind::Barrier => vec![],
            Kind::Reduce { root } if root != me => vec![],
            _ => vec![-1; count],
        };
        (input, out)
    }

    /// Start it nonblocking (`persistent`: made with `*_init` and started).
    fn start<'s>(
        self,
        c: &Comm,
        s: &'s Scope<'s, '_>,
        input: &'s mut [i64],
        out: &'s mut [i64],
        persistent: bool,
    ) -> Result<Request<'s>> {
        let mut r = match (self, persistent) {
            (Kind::Allreduce, false) => c.iallreduce(s, &*input, out, &Op::SUM)?,
            (Kind::Allreduce, true) => c.allreduce_init(s, &*input, out, &Op::SUM)?,
            (Kind::Bcast { root }, false) => c.ibcast(s, input, root)?,
            (Kind::Bcast { root }, true) => c.bcast_init(s, input, root)?,
            (Kind::Reduce { root }, false) => c.ireduce(s, &*input, out, &Op::MAX, root)?,
            (Kind::Reduce { root }, true) => c.reduce_init(s, &*input, out, &Op::MAX, root)?,
            (Kind::Allgather, false) => c.iallgather(s, &*input, out)?,
            (Kind::Allgather, true) => c.allgather_init(s, &*input, out)?,
            (Kind::Alltoall, false) => c.ialltoall(s, &*input, out)?,
            (Kind::Alltoall, true) => c.alltoall_init(s, &*input, out)?,
            (Kind::Barrier, false) => c.ibarrier(s)?,
            (Kind::Barrier, true) => c.barrier_init(s)?,
        };
        if persistent {
            r.start()?;
        }
        Ok(r)
    }

    /// Check the buffers after completion.
    fn check(self, c: &Comm, count: usize, salt: u64, input: &[i64], out: &[i64], what: &str) {
        let (me, n) = (c.rank(), c.size());
        let all = |i: usize| (0..n).map(move |r| value(r, i, salt));
        for i in 0..count {
            match self {
                Kind::Allreduce => assert_eq!(out[i], all(i).sum::<i64>(), "{what}: [{i}]"),
                Kind::Bcast { root } => assert_eq!(input[i], value(root, i, salt), "{what}: [{i}]"),
                Kind::Reduce { root } if root == me => {
                    assert_eq!(out[i], all(i).max().unwrap(), "{what}: [{i}]")
                }
                Kind::Allgather => {
                    for r in 0..n {
                        assert_eq!(out[r as usize * count + i], value(r, i, salt), "{what}");
                    }
                }
                Kind::Alltoall => {
                    for r in 0..n {
                        let sent = value(r, me as usize * count + i, salt);
                        assert_eq!(out[r as usize * count + i], sent, "{what}: from {r} [{i}]");
                    }
                }
                _ => {}
            }
        }
    }
}

/// Start `kinds` (in this order on every rank) and complete them with `finish`, which gets
/// the requests in start order; then check every result.
fn run_set(
    c: &Comm,
    kinds: &[Kind],
    count: usize,
    persistent: bool,
    what: &str,
    finish: impl FnOnce(&mut [Request<'_>]) -> Result<()>,
) -> Result<()> {
    let mut bufs: Vec<(Vec<i64>, Vec<i64>)> = kinds
        .iter()
        .enumerate()
        .map(|(k, kind)| kind.buffers(c, count, k as u64))
        .collect();
    scope(|s| -> Result<()> {
        let mut reqs = vec![];
        for (kind, (input, out)) in kinds.iter().zip(bufs.iter_mut()) {
            reqs.push(kind.start(c, s, input, out, persistent)?);
        }
        finish(&mut reqs)
    })?;
    for (k, (kind, (input, out))) in kinds.iter().zip(&bufs).enumerate() {
        kind.check(
            c,
            count,
            k as u64,
            input,
            out,
            &format!("{what}: {kind:?} (#{k})"),
        );
    }
    Ok(())
}

/// Rank r waits request (j + r) mod k for j = 0, 1, ...: one at a time, or by `wait_all` on
/// the requests in that order.
fn waited_in_rotated_order(u: &Universe, persistent: bool) -> Result<()> {
    let c = u.world();
    let (me, n) = (c.rank() as usize, c.size());
    let three = [Kind::Allreduce; 3];
    let mixed: Vec<Kind> = (0..6).map(|k| Kind::nth(k, n)).collect();
    for kinds in [&three[..], &mixed[..]] {
        let k = kinds.len();
        run_set(c, kinds, BIG, persistent, "one at a time", |reqs| {
            for j in 0..k {
                reqs[(j + me) % k].wait()?;
            }
            Ok(())
        })?;
        run_set(c, kinds, BIG, persistent, "wait_all", |reqs| {
            let mut order: Vec<&mut Request<'_>> = reqs.iter_mut().collect();
            order.rotate_left(me % k);
            wait_all(&mut order)?;
            Ok(())
        })?;
    }
    Ok(())
}

fn nonblocking_waited_in_rotated_order(u: &Universe) -> Result<()> {
    waited_in_rotated_order(u, false)
}

fn persistent_waited_in_rotated_order(u: &Universe) -> Result<()> {
    waited_in_rotated_order(u, true)
}

/// Every pair of kinds, nonblocking and persistent, started in the same order everywhere:
/// even ranks complete the first one first, odd ranks the second one first.
fn every_pair_in_both_orders(u: &Universe) -> Result<()> {
    let c = u.world();
    let (me, n) = (c.rank(), c.size());
    for persistent in [false, true] {
        for a in 0..6 {
            for b in 0..6 {
                let kinds = [Kind::nth(a, n), Kind::nth(b, n)];
                let what = format!("{kinds:?}, persistent {persistent}");
                run_set(c, &kinds, BIG, persistent, &what, |reqs| {
                    let first = (me % 2) as usize;
                    reqs[first].wait()?;
                    reqs[1 - first].wait()?;
                    Ok(())
                })?;
            }
        }
    }
    Ok(())
}

/// Rank 0 starts a collective (nonblocking or persistent), then blocks in a call that a
/// peer satisfies only after that peer has completed the collective, which needs rank 0's
/// part to move on: a receive, a probe, a synchronous send, a wait_any on an unrelated
/// receive, a blocking collective on another communicator.
fn pending_collective_advances_in_blocking_calls(u: &Universe) -> Result<()> {
    const TAG: i32 = 5;
    let c = u.world();
    let other = c.dup()?;
    let (me, n) = (c.rank(), c.size());
    let last = n - 1;
    for persistent in [false, true] {
        for kind in (0..6).map(|k| Kind::nth(k, n)) {
            for blocker in ["recv", "probe", "ssend", "wait_any", "barrier"] {
                let what = format!("{kind:?} pending in {blocker}, persistent {persistent}");
                run_set(c, &[kind], BIG, persistent, &what, |reqs| {
                    let mut token = [0u64; 1];
                    if me == 0 {
                        match blocker {
                            "recv" => {
                                c.recv(&mut token, last, TAG)?;
                            }
                            "probe" => {
                                c.probe(last, TAG)?;
                                c.recv(&mut token, last, TAG)?;
                            }
                            "ssend" => c.ssend(&[7u64], last, TAG)?,
                            "wait_any" => scope(|t| -> Result<()> {
                                let mut r = [c.irecv(t, &mut token, last, TAG)?];
                                wait_any(&mut r)?;
                                Ok(())
                            })?,
                            _ => other.barrier()?,
                        }
                        reqs[0].wait()?;
                    } else {
                        reqs[0].wait()?;
                        if me == last {
                            match blocker {
                                "ssend" => {
                                    c.recv(&mut token, 0, TAG)?;
                                }
                                "barrier" => {}
                                _ => c.send(&[7u64], 0, TAG)?,
                            }
                        }
                        if blocker == "barrier" {
                            other.barrier()?;
                        }
                    }
                    // Rank 0 receives the token, or with ssend the last rank does.
                    let receives = if blocker == "ssend" {
                        me == last
                    } else {
                        me == 0
                    };
                    if blocker != "barrier" {
                        assert_eq!(token[0], if receives { 7 } else { 0 }, "{what}: token");
                    }
                    Ok(())
                })?;
            }
        }
    }
    other.free()?;
    Ok(())
}

/// A seeded random mix: collectives of random kinds, counts and forms, and ring exchanges
/// (nonblocking send right, receive left), started in the same order everywhere and
/// completed in a random order of each rank's own, by wait, wait_all, wait_any, wait_some or
/// a test_any loop.
fn random_mix_of_collectives_and_p2p(u: &Universe) -> Result<()> {
    let c = u.world();
    let (me, n) = (c.rank(), c.size());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let seeds: u64 = if n >= 8 { 12 } else { 30 };
    for seed in 0..seeds {
        let mut rng = Rng(seed);
        let ops = 2 + rng.below(6);
        // Per operation: Some(kind, count, persistent) or None for a ring exchange.
        let plan: Vec<(Option<Kind>, usize, bool)> = (0..ops)
            .map(|_| {
                let count = [1, 300, BIG, 3 * BIG][rng.below(4)];
                if rng.below(4) == 0 {
                    (None, count, false)
                } else {
                    (Some(Kind::nth(rng.below(18), n)), count, rng.below(3) == 0)
                }
            })
            .collect();
        let mut mine = Rng(seed * 1_000 + me as u64 + 1);
        let how = mine.below(5);
        let mut bufs: Vec<(Vec<i64>, Vec<i64>)> = plan
            .iter()
            .enumerate()
            .map(|(k, (kind, count, _))| match kind {
                Some(kind) => kind.buffers(c, *count, seed * 100 + k as u64),
                None => (
                    (0..*count)
                        .map(|i| value(me, i, seed * 100 + k as u64))
                        .collect(),
                    vec![-1; *count],
                ),
            })
            .collect();
        scope(|s| -> Result<()> {
            let mut reqs: Vec<Request<'_>> = vec![];
            for ((kind, _, persistent), (input, out)) in plan.iter().zip(bufs.iter_mut()) {
                match kind {
                    Some(kind) => reqs.push(kind.start(c, s, input, out, *persistent)?),
                    None => {
                        reqs.push(c.irecv(s, out, left, 9)?);
                        reqs.push(c.isend(s, &*input, right, 9)?);
                    }
                }
            }
            let mut order: Vec<usize> = (0..reqs.len()).collect();
            mine.shuffle(&mut order);
            let mut shuffled: Vec<&mut Request<'_>> = {
                let mut slots: Vec<Option<&mut Request<'_>>> = reqs.iter_mut().map(Some).collect();
                order.iter().map(|&i| slots[i].take().unwrap()).collect()
            };
            match how {
                0 => {
                    for r in shuffled.iter_mut() {
                        r.wait()?;
                    }
                }
                1 => {
                    wait_all(&mut shuffled)?;
                }
                2 => while wait_any(&mut shuffled)?.is_some() {},
                3 => while !wait_some(&mut shuffled)?.is_empty() {},
                _ => while !test_any(&mut shuffled)?.is_none_active() {},
            }
            Ok(())
        })?;
        for (k, ((kind, count, _), (input, out))) in plan.iter().zip(&bufs).enumerate() {
            let salt = seed * 100 + k as u64;
            let what =
                format!("seed {seed}, operation {k} ({kind:?}, {count}), completed by way {how}");
            match kind {
                Some(kind) => kind.check(c, *count, salt, input, out, &what),
                None => {
                    for (i, x) in out.iter().enumerate() {
                        assert_eq!(*x, value(left, i, salt), "{what}: [{i}]");
                    }
                }
            }
        }
    }
    Ok(())
}
