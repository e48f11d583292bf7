//! One-sided communication (MPI 4.1 chapter 12): windows of every flavour, put/get and the
//! accumulates with derived datatypes at both ends, fence, PSCW, locks and flushes, truly
//! passive targets, dynamic windows with a linked list built by compare_and_swap, shared
//! windows read by loads, and the error table. Every check is element by element against a
//! value computed from ranks and indices.

mod common;

use common::{assert_err, check_eq};
use earlybird::{
    At, Datatype, ErrorClass, Flavor, Info, LockType, Model, Op, Result, Typed, Universe, Win,
    WinErrHandler, MODE_NOCHECK, MODE_NOPRECEDE, MODE_NOSTORE, MODE_NOSUCCEED, PROC_NULL,
};
use std::time::{Duration, Instant};

scenarios! {
    put_get_with_fence [1, 2, 3, 4, 8];
    derived_datatypes_both_ends [1, 2, 3];
    accumulates_from_many_origins [1, 2, 3, 4, 8];
    every_operation_element_by_element [1, 2, 3];
    lock_exclusivity [2, 3, 4];
    passive_target_never_calls_mpi [2, 3];
    flush_is_visible_to_a_third_rank [3, 4];
    pscw_ring [1, 2, 3, 4, 8];
    pscw_small_and_large_puts [1, 2, 3, 4, 8];
    pscw_origin_runs_ahead [2, 3];
    dynamic_linked_list [1, 2, 3, 4];
    shared_windows_by_loads [1, 2, 3, 4];
    create_over_user_memory [1, 2, 3];
    zero_size_and_empty_ranks [2, 3];
    request_based_operations [1, 2];
    attributes_info_and_handlers [1, 2];
    the_error_table [2, 3];
}

fn stamp(rank: i32, i: usize) -> i64 {
    (rank as i64 + 1) * 1_000_000 + i as i64
}

/// A bounded wait of a scenario's own (never a hang in the test suite).
fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn ret(w: &Win) {
    w.set_errhandler(WinErrHandler::Return);
}

/// Each rank puts a stamped block into its right neighbour's memory and gets its left
/// neighbour's block back, with fences around; displacements in units of 8 bytes.
fn put_get_with_fence(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let right = (r + 1) % n;
    let left = (r + n - 1) % n;
    const K: usize = 100;
    let win = c.win_allocate(2 * K * 8, 8, &Info::new())?;
    assert_eq!(win.flavor(), Flavor::Allocate);
    assert_eq!(win.disp_unit(), 8);
    assert_eq!(win.size(), 2 * K * 8);
    win.fence(MODE_NOPRECEDE)?;
    let mine: Vec<i64> = (0..K).map(|i| stamp(r, i)).collect();
    // Into the right neighbour's second half (displacement K units).
    win.put(&mine[..], right, K as isize)?;
    win.fence(0)?;
    let local = win.local::<i64>()?;
    let mut got = vec![0i64; K];
    local.read(K, &mut got)?;
    let want: Vec<i64> = (0..K).map(|i| stamp(left, i)).collect();
    check_eq("block put by the left neighbour", &got, &want);
    // Each rank writes its first half locally, then the left neighbour reads it.
    local.write(0, &mine)?;
    win.fence(0)?;
    let mut back = vec![0i64; K];
    win.get(&mut back[..], left, 0)?;
    win.put(&[7i64][..], PROC_NULL, 0)?;
    win.fence(MODE_NOSUCCEED)?;
    let want: Vec<i64> = (0..K).map(|i| stamp(left, i)).collect();
    check_eq("block got from the left neighbour", &back, &want);
    win.free()
}

/// A column of the origin's matrix into a row of the target's, a row into a column, and a
/// strided get back: vector datatypes at the origin, at the target, and at both.
fn derived_datatypes_both_ends(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    const ROWS: usize = 6;
    const COLS: usize = 5;
    const N: usize = ROWS * COLS;
    let f = Datatype::of::<f64>();
    let col = Datatype::vector(ROWS, 1, COLS as isize, &f)?;
    col.commit()?;
    let row = Datatype::contiguous(ROWS, &f)?;
    row.commit()?;
    let matrix = |q: i32| -> Vec<f64> { (0..N).map(|i| q as f64 * 100.0 + i as f64).collect() };
    let mine = matrix(r);
    let win = c.win_allocate(2 * N * 8, 8, &Info::new())?;
    win.fence(0)?;
    // Origin column 2 -> target elements 0..ROWS (through a contiguous target datatype).
    win.put_to(&Typed::at(&mine, 2, 1, &col)?, right, 0, At::new(1, &row))?;
    // Origin elements 0..ROWS -> a column of the target's second matrix.
    win.put_to(&mine[..ROWS], right, (N + 4) as isize, At::new(1, &col))?;
    win.fence(0)?;
    let l = win.local::<f64>()?.to_vec()?;
    let lm = matrix(left);
    for i in 0..ROWS {
        assert_eq!(l[i], lm[i * COLS + 2], "row from a column, element {i}");
        assert_eq!(l[N + 4 + i * COLS], lm[i], "column from a row, row {i}");
    }
    // Strided both ends: the right neighbour's column (which this rank put) into column 0.
    let mut got = vec![0.0f64; N];
    win.get_from(
        &mut earlybird::TypedMut::at(&mut got, 0, 1, &col)?,
        right,
        (N + 4) as isize,
        At::new(1, &col),
    )?;
    win.fence(MODE_NOSUCCEED)?;
    for i in 0..ROWS {
        assert_eq!(got[i * COLS], mine[i], "strided get, row {i}");
        assert_eq!(
            got[i * COLS + 1],
            0.0,
            "strided get leaves other columns, row {i}"
        );
    }
    col.free()?;
    row.free()?;
    win.free()
}

/// Every rank hammers the same elements of rank 0 with fetch_and_op, accumulate,
/// get_accumulate and compare_and_swap; the counts come out exact.
fn accumulates_from_many_origins(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    const K: i64 = 300;
    let win = c.win_allocate(8 * 8, 8, &Info::new())?;
    c.barrier()?;
    let all = win.lock_all(0)?;
    let mut seen = Vec::with_capacity(K as usize);
    for _ in 0..K {
        let mut prev = 0i64;
        all.fetch_and_op(&1i64, &mut prev, 0, 0, &Op::SUM)?;
        seen.push(prev);
        all.accumulate(&[2i64, 3][..], 0, 1, &Op::SUM)?;
        let mut old = [0i64];
        all.get_accumulate(&[1i64][..], &mut old[..], 0, 3, &Op::SUM)?;
        // A counter incremented by compare_and_swap retries.
        let mut cur = 0i64;
        all.fetch_and_op(&0i64, &mut cur, 0, 4, &Op::NO_OP)?;
        loop {
            let mut was = 0i64;
            all.compare_and_swap(&(cur + 1), &cur, &mut was, 0, 4)?;
            if was == cur {
                break;
            }
            cur = was;
        }
        // f64 sums go through a compare-and-swap loop: exact on small integers.
        all.accumulate(&[1.0f64][..], 0, 5, &Op::SUM)?;
        all.accumulate(&[r as i64 * 10][..], 0, 6, &Op::MAX)?;
        // One element reached both on the one-integer road and through datatypes.
        all.accumulate(&[1i64][..], 0, 7, &Op::SUM)?;
        let one = [1i64];
        let long = Datatype::of::<i64>();
        all.accumulate_typed(
            Typed::at(&one, 0, 1, &long)?,
            0,
            7,
            At::new(1, &long),
            &Op::SUM,
        )?;
        all.flush(0)?;
    }
    all.unlock_all()?;
    // Every value fetched is distinct: no two fetch_and_op saw the same count.
    let mut gathered = vec![0i64; (K as usize) * n as usize];
    c.allgather(&seen[..], &mut gathered[..])?;
    gathered.sort_unstable();
    for (i, v) in gathered.iter().enumerate() {
        assert_eq!(*v, i as i64, "fetch_and_op results are a permutation");
    }
    c.barrier()?;
    if r == 0 {
        let l = win.local::<i64>()?;
        let total = K * n as i64;
        assert_eq!(l.get(0)?, total, "fetch_and_op count");
        assert_eq!(l.get(1)?, 2 * total, "accumulate count, element 1");
        assert_eq!(l.get(2)?, 3 * total, "accumulate count, element 2");
        assert_eq!(l.get(3)?, total, "get_accumulate count");
        assert_eq!(l.get(4)?, total, "compare_and_swap count");
        assert_eq!(
            f64::from_bits(l.get(5)? as u64),
            total as f64,
            "f64 accumulate"
        );
        assert_eq!(l.get(6)?, (n as i64 - 1) * 10, "MAX");
        assert_eq!(l.get(7)?, 2 * total, "sums on both roads");
    }
    c.barrier()?;
    win.free()
}

/// Every predefined operation on i32 and f64, REPLACE and NO_OP, and MINLOC on pairs, against
/// a sequential reference; get_accumulate returns the values from before, in order.
fn every_operation_element_by_element(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    const K: usize = 16;
    let target = (r + 1) % n;
    let init: Vec<i32> = (0..K as i32).map(|i| i * 3 - 7).collect();
    let ops = [
        Op::SUM,
        Op::PROD,
        Op::MAX,
        Op::MIN,
        Op::LAND,
        Op::LOR,
        Op::LXOR,
        Op::BAND,
        Op::BOR,
        Op::BXOR,
        Op::REPLACE,
        Op::NO_OP,
    ];
    let win = c.win_allocate(K * 4, 4, &Info::new())?;
    for op in &ops {
        win.local::<i32>()?.write(0, &init)?;
        win.fence(0)?;
        let mine: Vec<i32> = (0..K as i32).map(|i| (i % 5) - 2 + r).collect();
        let mut before = vec![0i32; K];
        win.get_accumulate(&mine[..], &mut before[..], target, 0, op)?;
        win.fence(0)?;
        check_eq(&format!("{op:?}: values before"), &before, &init);
        let left = (r + n - 1) % n;
        let theirs: Vec<i32> = (0..K as i32).map(|i| (i % 5) - 2 + left).collect();
        let mut want = init.clone();
        match op.as_predefined() {
            Some(earlybird::Predefined::Replace) => want = theirs.clone(),
            Some(earlybird::Predefined::NoOp) => {}
            _ => earlybird::reduce_local(&theirs, &mut want, op)?,
        }
        let got = win.local::<i32>()?.to_vec()?;
        check_eq(&format!("{op:?}: accumulated"), &got, &want);
        win.fence(0)?;
    }
    win.fence(MODE_NOSUCCEED)?;
    win.free()?;
    // f64 and MINLOC pairs.
    let win = c.win_allocate(K * 8, 8, &Info::new())?;
    for op in [Op::SUM, Op::PROD, Op::MAX, Op::MIN] {
        let init: Vec<f64> = (0..K).map(|i| i as f64 * 0.5 + 1.0).collect();
        win.local::<f64>()?.write(0, &init)?;
        win.fence(0)?;
        let mine: Vec<f64> = (0..K).map(|i| (i as f64) - r as f64).collect();
        win.accumulate(&mine[..], target, 0, &op)?;
        win.fence(0)?;
        let left = (r + n - 1) % n;
        let theirs: Vec<f64> = (0..K).map(|i| (i as f64) - left as f64).collect();
        let mut want = init.clone();
        earlybird::reduce_local(&theirs, &mut want, &op)?;
        check_eq(
            &format!("{op:?} on f64"),
            &win.local::<f64>()?.to_vec()?,
            &want,
        );
        win.fence(0)?;
    }
    type Pair = earlybird::ValueIndex<i32>;
    let init: Vec<Pair> = (0..K as i32).map(|i| Pair::new(i, 100)).collect();
    win.local::<Pair>()?.write(0, &init)?;
    win.fence(0)?;
    let mine: Vec<Pair> = (0..K as i32)
        .map(|i| Pair::new(i - 1 + (i % 2) * 2, r))
        .collect();
    win.accumulate(&mine[..], target, 0, &Op::MINLOC)?;
    win.fence(MODE_NOSUCCEED)?;
    let left = (r + n - 1) % n;
    let theirs: Vec<Pair> = (0..K as i32)
        .map(|i| Pair::new(i - 1 + (i % 2) * 2, left))
        .collect();
    let mut want = init.clone();
    earlybird::reduce_local(&theirs, &mut want, &Op::MINLOC)?;
    check_eq("MINLOC on 2INT", &win.local::<Pair>()?.to_vec()?, &want);
    win.free()
}

/// A non-atomic read-modify-write (get, flush, put) under an exclusive lock on rank 0:
/// exclusive locks exclude each other, so no increment is lost.
fn lock_exclusivity(u: &Universe) -> Result<()> {
    let c = u.world();
    let n = c.size();
    const K: i64 = 100;
    let win = c.win_allocate(8, 8, &Info::new())?;
    c.barrier()?;
    for _ in 0..K {
        let l = win.lock(LockType::Exclusive, 0, 0)?;
        let mut v = [0i64];
        l.get(&mut v[..], 0, 0)?;
        l.flush(0)?;
        l.put(&[v[0] + 1][..], 0, 0)?;
        l.unlock()?;
    }
    c.barrier()?;
    let l = win.lock(LockType::Shared, 0, 0)?;
    let mut v = [0i64];
    l.get(&mut v[..], 0, 0)?;
    drop(l);
    assert_eq!(v[0], K * n as i64, "increments under exclusive locks");
    c.barrier()?;
    win.free()
}

/// Rank 0 computes and never calls MPI while every other rank puts into its memory under
/// locks; it sees every value arrive.
fn passive_target_never_calls_mpi(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let win = c.win_allocate(8 * n as usize, 8, &Info::new())?;
    c.barrier()?;
    if r == 0 {
        let local = win.local::<i64>()?;
        let end = deadline();
        // A compute loop: loads of its own memory only.
        let mut spins = 0u64;
        while (1..n as usize).any(|q| local.get(q).unwrap() != 4242 + q as i64) {
            spins = spins.wrapping_add(1);
            std::hint::black_box(spins);
            assert!(
                Instant::now() < end,
                "values never arrived at a target that does not call MPI"
            );
        }
    } else {
        let l = win.lock(LockType::Shared, 0, 0)?;
        l.put(&[4242 + r as i64][..], 0, r as isize)?;
        l.unlock()?;
    }
    c.barrier()?;
    win.free()
}

/// Rank 0 puts into rank 1 and flushes, then tells rank 2 with a message; rank 2's get from
/// rank 1 sees the value (remote completion).
fn flush_is_visible_to_a_third_rank(u: &Universe) -> Result<()> {
    let c = u.world();
    let r = c.rank();
    let win = c.win_allocate(64, 8, &Info::new())?;
    let all = win.lock_all(0)?;
    c.barrier()?;
    for round in 0..50i64 {
        if r == 0 {
            all.put(&[round * 7 + 1][..], 1, 3)?;
            all.flush(1)?;
            c.send(&[round][..], 2, 9)?;
        } else if r == 2 {
            let mut m = [0i64];
            c.recv(&mut m[..], 0, 9)?;
            let mut v = [0i64];
            all.get(&mut v[..], 1, 3)?;
            all.flush(1)?;
            assert_eq!(
                v[0],
                round * 7 + 1,
                "round {round}: the flushed put is visible to rank 2"
            );
        }
        c.barrier()?;
    }
    all.unlock_all()?;
    win.free()
}

/// Post/start/put/complete/wait around a ring, many rounds; test() polls to the end.
fn pscw_ring(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let right = (r + 1) % n;
    let left = (r + n - 1) % n;
    let g = c.group();
    let to = g.incl(&[right])?;
    let from = g.incl(&[left])?;
    let win = c.win_allocate(8 * 4, 8, &Info::new())?;
    for round in 0..100i64 {
        let exp = win.post(&from, if round % 2 == 0 { 0 } else { MODE_NOSTORE })?;
        let acc = win.start(&to, 0)?;
        acc.put(&[round, stamp(r, round as usize)][..], right, 1)?;
        acc.accumulate(&[1i64][..], right, 0, &Op::SUM)?;
        acc.complete()?;
        if round % 3 == 0 {
            let mut e = exp;
            let end = deadline();
            loop {
                match e.test()? {
                    Ok(()) => break,
                    Err(still) => e = still,
                }
                assert!(Instant::now() < end, "win_test never saw the epoch end");
            }
        } else {
            exp.wait()?;
        }
        let l = win.local::<i64>()?;
        assert_eq!(l.get(1)?, round, "round {round}: value from the left");
        assert_eq!(
            l.get(2)?,
            stamp(left, round as usize),
            "round {round}: stamp"
        );
        assert_eq!(l.get(0)?, round + 1, "round {round}: accumulated count");
    }
    // NOCHECK on both sides, after a barrier that orders post before start.
    let exp = win.post(&from, MODE_NOCHECK)?;
    c.barrier()?;
    let acc = win.start(&to, MODE_NOCHECK)?;
    acc.put(&[-5i64][..], right, 3)?;
    acc.complete()?;
    exp.wait()?;
    assert_eq!(win.local::<i64>()?.get(3)?, -5);
    // Checked epochs again after the NOCHECK one: a get waits for this epoch's post, which
    // comes after the rank stored its value.
    for round in 0..4i64 {
        win.local::<i64>()?.set(3, round * 100 + r as i64)?;
        let exp = win.post(&from, 0)?;
        let acc = win.start(&to, 0)?;
        let mut got = [0i64];
        acc.get(&mut got[..], right, 3)?;
        acc.complete()?;
        exp.wait()?;
        assert_eq!(
            got[0],
            round * 100 + right as i64,
            "round {round} after NOCHECK"
        );
    }
    win.free()
}

/// The bytes origin `o` puts at offset `at` of piece `what` in round `round`.
fn pattern(o: i32, round: i64, what: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (o as usize * 31 + round as usize * 7 + what as usize * 13 + i) as u8)
        .collect()
}

/// PSCW epochs where every rank exposes to and accesses every rank, on windows from
/// `win_allocate` and from `win_create` (user memory): per round each origin puts into its
/// own slot of every target an 8-byte stamp, pieces of 8, 100 and 200 bytes (which fill the
/// small puts' path and spill over it), 1 KiB, and a strided column (a vector datatype at
/// the origin); and gets a value each target stored before it posted. Checked element by
/// element after each wait.
fn pscw_small_and_large_puts(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    const SLOT: usize = 2048;
    const PIECES: [(u8, usize, usize); 4] =
        [(1, 16, 8), (2, 32, 100), (3, 136, 200), (4, 512, 1024)];
    let g = c.group();
    let f = Datatype::of::<i64>();
    let col = Datatype::vector(4, 1, 3, &f)?;
    col.commit()?;
    for create in [false, true] {
        // Slot o of each rank's memory is origin o's; the last 8 bytes hold the value the
        // rank stores before it posts.
        let bytes = SLOT * n as usize + 8;
        let win = if create {
            c.win_create(vec![0u8; bytes], 1, &Info::new())?
        } else {
            c.win_allocate(bytes, 1, &Info::new())?
        };
        for round in 0..20i64 {
            let posted = round * 1000 + r as i64;
            win.local::<u8>()?.write(bytes - 8, &posted.to_le_bytes())?;
            let exp = win.post(&g, 0)?;
            let acc = win.start(&g, 0)?;
            let matrix: Vec<i64> = (0..12).map(|i| stamp(r, i) + round).collect();
            for t in 0..n {
                let base = SLOT * r as usize;
                acc.put(&[stamp(r, round as usize)][..], t, base as isize)?;
                for (what, at, len) in PIECES {
                    acc.put(&pattern(r, round, what, len)[..], t, (base + at) as isize)?;
                }
                acc.put_to(
                    &Typed::at(&matrix, 1, 1, &col)?,
                    t,
                    (base + 1600) as isize,
                    At::new(4, &Datatype::of::<i64>()),
                )?;
                let mut got = [0u8; 8];
                acc.get(&mut got[..], t, (bytes - 8) as isize)?;
                assert_eq!(
                    i64::from_le_bytes(got),
                    round * 1000 + t as i64,
                    "round {round}: get from rank {t} sees what it stored before posting"
                );
            }
            acc.complete()?;
            exp.wait()?;
            let mem = win.local::<u8>()?.to_vec()?;
            for o in 0..n {
                let base = SLOT * o as usize;
                let word = |at: usize| i64::from_le_bytes(mem[at..at + 8].try_into().unwrap());
                assert_eq!(
                    word(base),
                    stamp(o, round as usize),
                    "round {round}: stamp of {o}"
                );
                for (what, at, len) in PIECES {
                    check_eq(
                        &format!("round {round}: piece {what} of rank {o}"),
                        &mem[base + at..base + at + len],
                        &pattern(o, round, what, len),
                    );
                }
                for i in 0..4 {
                    assert_eq!(
                        word(base + 1600 + 8 * i),
                        stamp(o, 1 + 3 * i) + round,
                        "round {round}: strided element {i} of rank {o}"
                    );
                }
            }
        }
        c.barrier()?;
        if create {
            win.free_into::<u8>()?;
        } else {
            win.free()?;
        }
    }
    col.free()
}

/// Rank 0 is a slow target: it posts and waits for each epoch late, while every other rank
/// runs access epochs of small puts back to back (so that they run ahead of rank 0's posts
/// and waits); every epoch's puts land, in order, each at its own place.
fn pscw_origin_runs_ahead(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    const EPOCHS: usize = 12;
    let g = c.group();
    let win = c.win_allocate(8 * EPOCHS * n as usize, 8, &Info::new())?;
    if r == 0 {
        let origins = g.excl(&[0])?;
        for k in 0..EPOCHS {
            std::thread::sleep(Duration::from_millis(5));
            let exp = win.post(&origins, 0)?;
            exp.wait()?;
            let l = win.local::<i64>()?;
            for o in 1..n {
                let at = (o as usize - 1) * EPOCHS + k;
                assert_eq!(l.get(at)?, stamp(o, k), "epoch {k} of rank {o}");
                if k + 1 < EPOCHS {
                    assert_eq!(l.get(at + 1)?, 0, "epoch {} of rank {o} came early", k + 1);
                }
            }
        }
    } else {
        let target = g.incl(&[0])?;
        for k in 0..EPOCHS {
            let acc = win.start(&target, 0)?;
            acc.put(
                &[stamp(r, k)][..],
                0,
                ((r as usize - 1) * EPOCHS + k) as isize,
            )?;
            acc.complete()?;
        }
    }
    c.barrier()?;
    win.free()
}

/// A dynamic window: every rank attaches many regions; a linked list of nodes in them is
/// built at rank 0's head with compare_and_swap; rank 0 walks it with gets.
fn dynamic_linked_list(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    const NODES: usize = 20;
    let win = c.win_create_dynamic(&Info::new())?;
    assert_eq!(win.flavor(), Flavor::Dynamic);
    assert_eq!(win.size(), 0);
    // The head: one u64 at rank 0, a (rank << 48 | address) node pointer, 0 = empty.
    let head = if r == 0 {
        Some(win.attach(vec![0u64; 1])?)
    } else {
        None
    };
    let mut head_addr = [head.as_ref().map_or(0, |h| h.address())];
    c.bcast(&mut head_addr[..], 0)?;
    // Nodes: [value, next], each in a region of its own.
    let mut nodes = Vec::new();
    for k in 0..NODES {
        let a = win.attach(vec![stamp(r, k) as u64, 0u64])?;
        nodes.push(a);
    }
    c.barrier()?;
    let all = win.lock_all(0)?;
    for a in &nodes {
        let me = ((r as u64) << 48) | a.address();
        let mut cur = 0u64;
        all.get(std::slice::from_mut(&mut cur), 0, head_addr[0] as isize)?;
        loop {
            // next = cur, then swing the head from cur to me.
            all.put(&[cur][..], r, (a.address() + 8) as isize)?;
            all.flush(r)?;
            let mut was = 0u64;
            all.compare_and_swap(&me, &cur, &mut was, 0, head_addr[0] as isize)?;
            if was == cur {
                break;
            }
            cur = was;
        }
    }
    all.flush_all()?;
    c.barrier()?;
    if r == 0 {
        let mut p = 0u64;
        all.get(std::slice::from_mut(&mut p), 0, head_addr[0] as isize)?;
        let mut seen = Vec::new();
        while p != 0 {
            let (owner, addr) = ((p >> 48) as i32, p & ((1 << 48) - 1));
            let mut node = [0u64; 2];
            all.get(&mut node[..], owner, addr as isize)?;
            all.flush(owner)?;
            seen.push(node[0] as i64);
            p = node[1];
            assert!(seen.len() <= NODES * n as usize, "the list has a cycle");
        }
        seen.sort_unstable();
        let mut want: Vec<i64> = (0..n)
            .flat_map(|q| (0..NODES).map(move |k| stamp(q, k)))
            .collect();
        want.sort_unstable();
        check_eq("nodes reached from the head", &seen, &want);
        // An address nobody attached.
        ret(&win);
        let mut x = [0u64];
        assert_err(all.get(&mut x[..], 0, 8), ErrorClass::RmaRange, "attached");
    }
    all.unlock_all()?;
    c.barrier()?;
    for (k, a) in nodes.into_iter().enumerate() {
        let v = win.detach(a)?;
        assert_eq!(v[0], stamp(r, k) as u64, "node {k} handed back");
    }
    if let Some(h) = head {
        win.detach(h)?;
    }
    win.free()
}

/// win_allocate_shared: each rank stores into its memory, every rank reads every other's by
/// loads; contiguous by default, page-aligned with alloc_shared_noncontig.
fn shared_windows_by_loads(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    for noncontig in [false, true] {
        let mut info = Info::new();
        if noncontig {
            info.set("alloc_shared_noncontig", "true")?;
        }
        let k = 10 + r as usize;
        let win = c.win_allocate_shared(k * 4, 4, &info)?;
        assert_eq!(win.flavor(), Flavor::Shared);
        let mine: Vec<i32> = (0..k as i32).map(|i| r * 1000 + i).collect();
        win.local::<i32>()?.write(0, &mine)?;
        win.fence(0)?;
        let mut bases = Vec::new();
        for q in 0..n {
            let (view, unit) = win.shared_query::<i32>(q)?;
            assert_eq!(unit, 4);
            let want: Vec<i32> = (0..10 + q).map(|i| q * 1000 + i).collect();
            check_eq(
                &format!("rank {q}'s memory by loads"),
                &view.to_vec()?,
                &want,
            );
            bases.push(view);
        }
        let (first, _) = win.shared_query::<i32>(PROC_NULL)?;
        assert_eq!(first.len(), 10, "PROC_NULL: the lowest rank with memory");
        win.fence(MODE_NOSUCCEED)?;
        drop(bases);
        win.free()?;
    }
    Ok(())
}

/// win_create over memory the program hands over: puts, accumulates, gets; free_into gives
/// the memory back with the data in it.
fn create_over_user_memory(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    const K: usize = 32;
    let mem: Vec<u32> = vec![0; K];
    let win = c.win_create(mem, 4, &Info::new())?;
    assert_eq!(win.flavor(), Flavor::Create);
    assert_eq!(win.size(), K * 4);
    win.fence(0)?;
    let right = (r + 1) % n;
    let vals: Vec<u32> = (0..K as u32).map(|i| i * 10 + r as u32).collect();
    win.put(&vals[..K / 2], right, 0)?;
    win.fence(0)?;
    for q in 0..n {
        win.accumulate(&[1u32; K / 2][..], q, (K / 2) as isize, &Op::SUM)?;
    }
    win.fence(0)?;
    let mut got = [0u32; K];
    win.get(&mut got[..], right, 0)?;
    win.fence(MODE_NOSUCCEED)?;
    let back: Vec<u32> = win.free_into()?;
    let left = (r + n - 1) % n;
    for i in 0..K / 2 {
        assert_eq!(back[i], i as u32 * 10 + left as u32, "put element {i}");
        assert_eq!(
            back[K / 2 + i],
            n as u32,
            "accumulated element {}",
            K / 2 + i
        );
        assert_eq!(got[i], i as u32 * 10 + r as u32, "got element {i}");
    }
    Ok(())
}

/// Ranks with no memory (every odd rank), and a zero-size window everywhere.
fn zero_size_and_empty_ranks(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let bytes = if r % 2 == 0 { 64 } else { 0 };
    let win = c.win_allocate(bytes, 8, &Info::new())?;
    ret(&win);
    assert_eq!(win.size(), bytes);
    win.fence(0)?;
    for q in (0..n).step_by(2) {
        win.accumulate(&[1i64][..], q, 0, &Op::SUM)?;
    }
    if n > 1 {
        assert_err(
            win.put(&[1i64][..], 1, 0),
            ErrorClass::RmaRange,
            "window memory of 0 bytes",
        );
    }
    win.fence(MODE_NOSUCCEED)?;
    if r % 2 == 0 {
        assert_eq!(win.local::<i64>()?.get(0)?, n as i64);
    } else {
        assert!(win.local::<i64>()?.is_empty());
    }
    win.free()?;
    let empty = c.win_allocate(0, 1, &Info::new())?;
    empty.fence(0)?;
    empty.put(&[0u8; 0][..], (r + 1) % n, 0)?;
    empty.fence(0)?;
    empty.free()
}

/// rput / rget / raccumulate / rget_accumulate requests complete.
fn request_based_operations(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let right = (r + 1) % n;
    let win = c.win_allocate(4 * 8, 8, &Info::new())?;
    c.barrier()?;
    let l = win.lock(LockType::Shared, right, 0)?;
    let mut a = l.rput(&[11i64][..], right, 0)?;
    a.wait()?;
    let mut b = l.raccumulate(&[5i64][..], right, 1, &Op::SUM)?;
    assert!(
        b.test()?.is_some(),
        "an raccumulate is complete when returned"
    );
    let mut old = [0i64];
    let mut d = l.rget_accumulate(&[1i64][..], &mut old[..], right, 1, &Op::SUM)?;
    d.wait()?;
    let mut v = [0i64; 2];
    let mut g = l.rget(&mut v[..], right, 0)?;
    g.wait()?;
    l.unlock()?;
    assert_eq!(old[0], 5);
    assert_eq!(v, [11, 6]);
    c.barrier()?;
    win.free()
}

/// Flavour, model, sizes, names, info, group, error handlers.
fn attributes_info_and_handlers(u: &Universe) -> Result<()> {
    let c = u.world();
    let mut info = Info::new();
    info.set("accumulate_ordering", "none")?;
    info.set("same_size", "true")?;
    let win = c.win_allocate(24, 4, &info)?;
    assert_eq!(win.model(), Model::Unified);
    assert_ne!(win.base(), 0);
    assert_eq!(win.group().size(), c.size());
    assert_eq!(win.name(), "");
    win.set_name("halo");
    assert_eq!(win.name(), "halo");
    let got = win.info();
    assert_eq!(got.get("accumulate_ordering")?, Some("none"));
    assert_eq!(got.get("same_size")?, Some("true"));
    assert_eq!(got.get("no_locks")?, Some("false"));
    let mut again = Info::new();
    again.set("accumulate_ordering", "rar,waw")?;
    win.set_info(&again)?;
    assert_eq!(win.info().get("accumulate_ordering")?, Some("rar,waw"));
    let mut bad = Info::new();
    bad.set("accumulate_ordering", "sideways")?;
    ret(&win);
    assert_err(win.set_info(&bad), ErrorClass::InfoValue, "sideways");
    // A user handler sees the window and the error.
    let seen = std::rc::Rc::new(std::cell::Cell::new(0));
    let s2 = seen.clone();
    win.set_errhandler(Win::create_errhandler(move |w, e| {
        assert_eq!(w.name(), "halo");
        assert_eq!(e.class(), ErrorClass::RmaSync);
        s2.set(s2.get() + 1);
    }));
    assert_err(
        win.put(&[1u8][..], 0, 0),
        ErrorClass::RmaSync,
        "outside any access epoch",
    );
    assert_eq!(seen.get(), 1, "the user handler ran once");
    let e = win.call_errhandler(earlybird::Error::new(ErrorClass::RmaSync, "by hand"));
    assert_eq!(e.class(), ErrorClass::RmaSync);
    assert_eq!(seen.get(), 2);
    ret(&win);
    win.free()
}

/// Item 4 of the issue: each misuse with its class and a message naming the value; none
/// hangs a peer.
fn the_error_table(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    c.set_errhandler(earlybird::ErrHandler::Return);
    assert_err(
        c.win_allocate(8, 0, &Info::new()),
        ErrorClass::Disp,
        "displacement unit 0",
    );
    let win = c.win_allocate(64, 8, &Info::new())?;
    ret(&win);
    // Outside any epoch.
    assert_err(
        win.put(&[1i64][..], 0, 0),
        ErrorClass::RmaSync,
        "outside any access epoch",
    );
    assert_err(win.flush(0), ErrorClass::RmaSync, "passive-target epoch");
    // Bad rank, bad assertion.
    assert_err(
        win.lock(LockType::Shared, n, 0),
        ErrorClass::Rank,
        &format!("rank {n}"),
    );
    assert_err(win.fence(1), ErrorClass::Assert, "0x1");
    assert_err(
        win.lock(LockType::Shared, 0, MODE_NOSTORE),
        ErrorClass::Assert,
        "win_lock",
    );
    // Nested and conflicting epochs.
    {
        let l = win.lock(LockType::Shared, 0, 0)?;
        assert_err(
            win.lock(LockType::Shared, 0, 0),
            ErrorClass::RmaSync,
            "locked already",
        );
        assert_err(win.lock_all(0), ErrorClass::RmaSync, "lock_all");
        // A wrong fence still takes part in the barrier (no peer hangs).
        assert_err(win.fence(0), ErrorClass::RmaSync, "win_fence while");
        // Range.
        assert_err(
            l.put(&[1i64; 2][..], 0, 7),
            ErrorClass::RmaRange,
            "bytes 56..72",
        );
        assert_err(
            l.get(&mut [0i64][..], 0, -1),
            ErrorClass::RmaRange,
            "displacement -1",
        );
        // compare_and_swap on a float.
        let mut o = 0.0f64;
        assert_err(
            l.compare_and_swap(&1.0f64, &0.0f64, &mut o, 0, 0),
            ErrorClass::Type,
            "MPI_DOUBLE",
        );
        // A user op, and an op that does not apply.
        let user = Op::user(true, |a: &[i64], b: &mut [i64]| b[0] += a[0]);
        assert_err(
            l.accumulate(&[1i64][..], 0, 0, &user),
            ErrorClass::Op,
            "predefined",
        );
        assert_err(
            l.accumulate(&[1.0f64][..], 0, 0, &Op::BAND),
            ErrorClass::Op,
            "MPI_BAND",
        );
        l.unlock()?;
    }
    // A derived target type reaching past the end.
    let t = Datatype::vector(3, 1, 4, &Datatype::of::<i64>())?;
    t.commit()?;
    win.fence(0)?;
    assert_err(
        win.put_to(&[1i64; 3][..], 0, 0, At::new(1, &t)),
        ErrorClass::RmaRange,
        "target of rank 0",
    );
    // Signature: 2 elements into a 3-element target type.
    let three = Datatype::contiguous(3, &Datatype::of::<i64>())?;
    assert_err(
        win.put_to(&[1i64; 2][..], 0, 0, At::new(1, &three)),
        ErrorClass::Type,
        "before commit",
    );
    three.commit()?;
    assert_err(
        win.put_to(&[1i64; 2][..], 0, 0, At::new(1, &three)),
        ErrorClass::Type,
        "16 bytes",
    );
    win.fence(MODE_NOSUCCEED)?;
    // PSCW misuse.
    let g = c.group();
    let e = win.post(&g, 0)?;
    assert_err(
        win.post(&g, 0),
        ErrorClass::RmaSync,
        "exposure epoch is open already",
    );
    let a = win.start(&g, 0)?;
    assert_err(win.start(&g, 0), ErrorClass::RmaSync, "access epoch");
    a.complete()?;
    e.wait()?;
    // Attach on a window that is not dynamic; overlapping attaches.
    assert_err(
        win.attach(vec![0u8; 8]).map(|_| ()),
        ErrorClass::RmaFlavor,
        "Allocate",
    );
    let dynw = c.win_create_dynamic(&Info::new())?;
    ret(&dynw);
    let a1 = dynw.attach(vec![1u64; 4])?;
    let back = dynw.detach(a1)?;
    assert_eq!(back, vec![1u64; 4]);
    dynw.free()?;
    // shared_query where memory is another process's (process jobs only): no memory, as
    // MPI 4.1 says for a window of another flavour than shared.
    let cw = c.win_create(vec![0u8; 16], 1, &Info::new())?;
    ret(&cw);
    let (v, du) = cw.shared_query::<u8>((r + 1) % n)?;
    let want = if !u.is_process_job() || n == 1 { 16 } else { 0 };
    assert_eq!((v.len(), du), (want, 1), "shared_query of a created window");
    drop(v);
    cw.free()?;
    // Free during a fence epoch with operations: every rank gets the error, none hangs.
    win.fence(0)?;
    win.put(&[1i64][..], (r + 1) % n, 0)?;
    let e = win.free();
    assert!(
        matches!(e, Err(ref x) if x.class() == ErrorClass::RmaSync),
        "free in an epoch: {e:?}"
    );
    t.free()?;
    Ok(())
}
