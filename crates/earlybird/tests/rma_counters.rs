//! Sync counters (seed 001): counters allocated on a window, handed out as MPIX_HANDLE_SYNC,
//! signalled by the completion of sync ops requests and waited on by sync object requests;
//! the `restart` key; bundles and the wait/test family; what may carry a counter; and the
//! misuse table. Every scenario runs as threads and as processes.

mod common;

use common::{assert_err, check_eq};
use earlybird::UNDEFINED;
use earlybird::{
    start_all, test_all, wait_all, wait_any, Bundle, Datatype, Equivalence, ErrorClass, Info, Op,
    Request, Result, SyncCounter, Universe, Win, WinErrHandler, MODE_NOPRECEDE, MODE_NOSUCCEED,
    MODE_WIN_ACCUMULATE, MODE_WIN_GET, MODE_WIN_PUT, PROC_NULL,
};

scenarios! {
    completes_after_exactly_k_signals [2, 3, 4, 8];
    only_calls_of_active_requests_are_permitted [2, 3, 4, 8];
    get_mode_data_is_valid_at_completion [2, 3, 4, 8];
    accumulates_exact_under_many_origins [2, 3, 4, 8];
    restart_ring_10000_iterations [2, 3, 4, 8];
    early_signals_count_towards_the_next_start [2];
    bundles_and_the_wait_family [2, 3, 4, 8];
    handle_sync_travels_and_nothing_else [2, 3, 4, 8];
    the_misuse_table [2];
    signal_variants_carry_data_and_signal [2, 3, 4, 8];
    restarting_requests_in_bundles [2];
    change_comm_keeps_memory_and_counters [2, 3, 4, 8];
    change_comm_refused_everywhere [3, 4];
    counters_inside_derived_structs [2];
}

fn restart() -> Info {
    let mut i = Info::new();
    i.set("restart", "true").expect("a valid key");
    i
}

fn ret(w: &Win) {
    w.set_errhandler(WinErrHandler::Return);
}

/// Rank 0's counter, allocated there and broadcast as MPIX_HANDLE_SYNC.
fn counter_of_rank0(u: &Universe, win: &Win) -> Result<SyncCounter> {
    let c = u.world();
    let mut h = [SyncCounter::NULL];
    if c.rank() == 0 {
        h = [win.alloc_sync_objects(1, &Info::new())?[0]];
    }
    c.bcast(&mut h[..], 0)?;
    assert!(!h[0].is_null());
    assert_eq!(h[0].owner(), 0);
    Ok(h[0])
}

/// Every rank (rank 0 too, signalling itself) puts its stamp into rank 0's memory under a
/// sync ops request and completes it; rank 0's object request waits for all `n`. The last
/// rank withholds its signal until rank 0 has seen the request still incomplete after every
/// other signal arrived.
fn completes_after_exactly_k_signals(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let win = c.win_allocate(8 * n as usize, 8, &Info::new())?;
    let h = counter_of_rank0(u, &win)?;
    let mut ops = win.sync_ops_init(0, MODE_WIN_PUT, h, &Info::new())?;
    if r == 0 {
        let mut obj = win.sync_object_init(h, n as i64, &Info::new())?;
        obj.start()?;
        ops.start()?;
        win.put(&[1000i64][..], 0, 0)?;
        ops.wait()?;
        // Ranks 1 .. n-2 say they have signalled (after their wait).
        for _ in 1..n - 1 {
            c.recv(&mut [0u8; 1][..], earlybird::ANY_SOURCE, 1)?;
        }
        for _ in 0..100 {
            assert!(
                obj.test()?.is_none(),
                "the counter completed before the withheld signal"
            );
            assert!(obj.get_status()?.is_none());
        }
        c.send(&[1u8][..], n - 1, 2)?;
        obj.wait()?;
        let mut got = vec![0i64; n as usize];
        win.local::<i64>()?.read(0, &mut got)?;
        let want: Vec<i64> = (0..n as i64).map(|q| 1000 + q).collect();
        check_eq("stamps put under the counter", &got, &want);
        // Inactive again: a wait returns at once.
        obj.wait()?;
    } else {
        ops.start()?;
        win.put(&[1000 + r as i64][..], 0, r as isize)?;
        if r == n - 1 {
            c.recv(&mut [0u8; 1][..], 0, 2)?;
        }
        ops.wait()?;
        if r != n - 1 {
            c.send(&[1u8][..], 0, 1)?;
        }
    }
    drop(ops);
    c.barrier()?;
    win.free()
}

/// A put is permitted only while a request of its mode to its target is active: before the
/// start and after the completion it is MPI_ERR_RMA_SYNC, as is a get under a PUT request;
/// several rounds each carry their own data.
fn only_calls_of_active_requests_are_permitted(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let win = c.win_allocate(8, 8, &Info::new())?;
    ret(&win);
    let h = counter_of_rank0(u, &win)?;
    if r == 0 {
        let mut obj = win.sync_object_init(h, n as i64 - 1, &Info::new())?;
        for round in 0..5i64 {
            obj.start()?;
            obj.wait()?;
            let v = win.local::<i64>()?.get(0)?;
            assert!(
                (round * 100..round * 100 + n as i64).contains(&v),
                "round {round}: {v}"
            );
            c.barrier()?;
        }
    } else {
        let mut ops = win.sync_ops_init(0, MODE_WIN_PUT, h, &Info::new())?;
        for round in 0..5i64 {
            assert_err(
                win.put(&[1i64][..], 0, 0),
                ErrorClass::RmaSync,
                "outside any access epoch",
            );
            ops.start()?;
            win.put(&[round * 100 + r as i64][..], 0, 0)?;
            assert_err(win.get(&mut [0i64][..], 0, 0), ErrorClass::RmaSync, "Get");
            ops.wait()?;
            assert_err(win.put(&[1i64][..], 0, 0), ErrorClass::RmaSync, "rank 0");
            c.barrier()?;
        }
    }
    c.barrier()?;
    win.free()
}

/// Rank 0 fills its memory and tells the others; each gets it under a GET request and
/// signals; once rank 0's counter completes it overwrites its memory: what the gets fetched
/// is the old data, whole.
fn get_mode_data_is_valid_at_completion(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    const K: usize = 512;
    let win = c.win_allocate(8 * K, 8, &Info::new())?;
    let h = counter_of_rank0(u, &win)?;
    let old: Vec<i64> = (0..K as i64).map(|i| 7 * i + 3).collect();
    if r == 0 {
        let mut obj = win.sync_object_init(h, n as i64 - 1, &Info::new())?;
        obj.start()?;
        win.local::<i64>()?.write(0, &old)?;
        c.bcast(&mut [1u8][..], 0)?;
        obj.wait()?;
        win.local::<i64>()?.write(0, &vec![-1i64; K])?;
    } else {
        let mut ops = win.sync_ops_init(0, MODE_WIN_GET, h, &Info::new())?;
        c.bcast(&mut [0u8][..], 0)?;
        ops.start()?;
        let mut got = vec![0i64; K];
        win.get(&mut got[..], 0, 0)?;
        ops.wait()?;
        check_eq("data got under a GET request", &got, &old);
    }
    c.barrier()?;
    win.free()
}

/// Every rank adds 1 two hundred times to one slot of rank 0 (accumulate and fetch_and_op
/// alternately) under an ACCUMULATE request; rank 0 waits for n signals (itself included):
/// the total is exact.
fn accumulates_exact_under_many_origins(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let win = c.win_allocate(16, 8, &Info::new())?;
    let h = counter_of_rank0(u, &win)?;
    let mut obj = if r == 0 {
        let mut o = win.sync_object_init(h, n as i64, &Info::new())?;
        o.start()?;
        Some(o)
    } else {
        None
    };
    c.barrier()?;
    let mut ops = win.sync_ops_init(0, MODE_WIN_ACCUMULATE, h, &Info::new())?;
    ops.start()?;
    for i in 0..200 {
        if i % 2 == 0 {
            win.accumulate(&[1i64][..], 0, 0, &Op::SUM)?;
        } else {
            let mut old = [0i64];
            win.fetch_and_op(&[1i64], &mut old, 0, 0, &Op::SUM)?;
        }
    }
    win.accumulate(&[r as i64][..], 0, 1, &Op::MAX)?;
    ops.wait()?;
    if let Some(o) = obj.as_mut() {
        o.wait()?;
        let l = win.local::<i64>()?;
        assert_eq!(l.get(0)?, 200 * n as i64, "the total of the accumulates");
        assert_eq!(l.get(1)?, n as i64 - 1, "the largest rank");
    }
    drop(obj);
    c.barrier()?;
    win.free()
}

/// A ring of 10,000 iterations with counters both ways and `restart` on every request (no
/// start in the loop): each rank puts the iteration into its right neighbour once that slot
/// is free, then reads what its left neighbour put and frees its own slot.
fn restart_ring_10000_iterations(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let right = (r + 1) % n;
    let left = (r + n - 1) % n;
    let win = c.win_allocate(8, 8, &Info::new())?;
    // Mine: [filled, free]; sent to the left (who fills me) and to the right (whom I free).
    let mine = win.alloc_sync_objects(2, &Info::new())?;
    let mut from_right = [SyncCounter::NULL; 2];
    let mut from_left = [SyncCounter::NULL; 2];
    c.sendrecv(&mine[..], left, 0, &mut from_right[..], right, 0)?;
    c.sendrecv(&mine[..], right, 1, &mut from_left[..], left, 1)?;
    let (filled, free) = (mine[0], mine[1]);
    let right_filled = from_right[0];
    let left_free = from_left[1];
    let mut put_req = win.sync_ops_init(right, MODE_WIN_PUT, right_filled, &restart())?;
    let mut ack_req = win.sync_ops_init(left, 0, left_free, &restart())?;
    let mut filled_req = win.sync_object_init(filled, 1, &restart())?;
    let mut free_req = win.sync_object_init(free, 1, &restart())?;
    start_all(&mut [&mut put_req, &mut ack_req, &mut filled_req, &mut free_req])?;
    // My slot is free to begin with.
    ack_req.wait()?;
    let l = win.local::<i64>()?;
    for i in 0..10_000i64 {
        free_req.wait()?;
        win.put(&[i * 10 + r as i64][..], right, 0)?;
        put_req.wait()?;
        filled_req.wait()?;
        assert_eq!(l.get(0)?, i * 10 + left as i64, "iteration {i}");
        ack_req.wait()?;
    }
    // The last free signal of the right neighbour is still to come: take it, then stop.
    free_req.wait()?;
    assert!(
        put_req.is_active() && filled_req.is_active(),
        "restart keeps them running"
    );
    drop((put_req, ack_req, filled_req, free_req));
    c.barrier()?;
    let mut mine = mine;
    win.free_sync_objects(&mut mine)?;
    assert!(mine.iter().all(SyncCounter::is_null));
    c.barrier()?;
    win.free()
}

/// Rank 1 signals once before rank 0 starts its count-1 request: that run completes at once
/// (the early signal counts towards it). Three signals while rank 0 is idle are more than
/// one run ahead: the next start's run fails with MPIX_ERR_WIN_COUNTER, naming the value.
fn early_signals_count_towards_the_next_start(u: &Universe) -> Result<()> {
    let c = u.world();
    let r = c.rank();
    let win = c.win_allocate(8, 8, &Info::new())?;
    ret(&win);
    let h = counter_of_rank0(u, &win)?;
    if r == 0 {
        let mut obj = win.sync_object_init(h, 1, &Info::new())?;
        c.recv(&mut [0u8; 1][..], 1, 0)?;
        obj.start()?;
        assert!(obj.test()?.is_some(), "the early signal counts for the run");
        c.send(&[0u8][..], 1, 1)?;
        c.recv(&mut [0u8; 1][..], 1, 2)?;
        obj.start()?;
        let e = obj.wait().expect_err("a counter driven below zero");
        assert_eq!(e.class(), ErrorClass::WinCounter, "{e}");
        assert!(e.to_string().contains("-2"), "{e}");
        assert!(!obj.is_active());
    } else if r == 1 {
        let mut ops = win.sync_ops_init(0, 0, h, &Info::new())?;
        ops.start()?;
        ops.wait()?;
        c.send(&[0u8][..], 0, 0)?;
        c.recv(&mut [0u8; 1][..], 0, 1)?;
        for _ in 0..3 {
            ops.start()?;
            ops.wait()?;
        }
        c.send(&[0u8][..], 0, 2)?;
    }
    c.barrier()?;
    win.free()
}

/// Sync requests in a bundle with a persistent receive, and in wait_any / test_all beside
/// point-to-point requests.
fn bundles_and_the_wait_family(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let win = c.win_allocate(8, 8, &Info::new())?;
    let h = counter_of_rank0(u, &win)?;
    if r == 0 {
        let mut data = [0i64; 1];
        let obj = win.sync_object_init(h, n as i64 - 1, &Info::new())?;
        let mut b = Bundle::new(vec![obj])?;
        for _ in 0..3 {
            b.start()?;
            b.wait()?;
            c.barrier()?;
        }
        // wait_any over a counter and a receive: both complete, in some order.
        let mut obj = win.sync_object_init(h, n as i64 - 1, &Info::new())?;
        obj.start()?;
        earlybird::scope(|s| -> Result<()> {
            let recv = c.irecv(s, &mut data[..], 1, 9)?;
            let mut reqs: Vec<Request> = vec![obj, recv];
            let mut seen = [false; 2];
            for _ in 0..2 {
                let (i, _) = wait_any(&mut reqs)?.expect("active requests");
                seen[i] = true;
            }
            assert_eq!(seen, [true, true]);
            Ok(())
        })?;
        assert_eq!(data[0], 99);
    } else {
        let ops = win.sync_ops_init(0, MODE_WIN_PUT, h, &Info::new())?;
        let mut b = Bundle::new(vec![ops])?;
        for round in 0..3i64 {
            b.start()?;
            win.put(&[round][..], 0, 0)?;
            b.wait()?;
            c.barrier()?;
        }
        let mut ops = win.sync_ops_init(0, MODE_WIN_PUT, h, &Info::new())?;
        ops.start()?;
        win.put(&[5i64][..], 0, 0)?;
        let mut reqs = vec![ops];
        let mut spins = 0;
        while test_all(&mut reqs)?.is_none() {
            spins += 1;
            assert!(spins < 1_000_000);
        }
        assert!(!reqs[0].is_active());
        if r == 1 {
            c.send(&[99i64][..], 0, 9)?;
        }
        wait_all(&mut reqs)?;
    }
    c.barrier()?;
    win.free()
}

/// Counters travel by point-to-point, broadcast, gather and allgather and arrive usable; a
/// reduction, a derived datatype and RMA refuse them with MPI_ERR_TYPE.
fn handle_sync_travels_and_nothing_else(u: &Universe) -> Result<()> {
    let c = u.world();
    c.set_errhandler(earlybird::ErrHandler::Return);
    let (r, n) = (c.rank(), c.size());
    let win = c.win_allocate(8 * n as usize, 8, &Info::new())?;
    ret(&win);
    let mine = win.alloc_sync_objects(1, &Info::new())?[0];
    let mut all = vec![SyncCounter::NULL; n as usize];
    c.allgather(&[mine][..], &mut all[..])?;
    assert_eq!(all[r as usize], mine);
    for (q, h) in all.iter().enumerate() {
        assert_eq!(h.owner(), q as i32);
    }
    // Each rank waits for one signal from everyone; everyone signals everyone with the
    // counters that arrived by allgather.
    let mut obj = win.sync_object_init(mine, n as i64, &Info::new())?;
    obj.start()?;
    for (q, h) in all.iter().enumerate() {
        let mut ops = win.sync_ops_init(q as i32, MODE_WIN_PUT, *h, &Info::new())?;
        ops.start()?;
        win.put(&[r as i64][..], q as i32, r as isize)?;
        ops.wait()?;
    }
    obj.wait()?;
    let mut got = vec![0i64; n as usize];
    win.local::<i64>()?.read(0, &mut got)?;
    check_eq(
        "one put from each rank",
        &got,
        &(0..n as i64).collect::<Vec<_>>(),
    );
    // Point-to-point to the right, and gather at 0.
    let right = (r + 1) % n;
    let left = (r + n - 1) % n;
    let mut from_left = [SyncCounter::NULL];
    c.sendrecv(&[mine][..], right, 3, &mut from_left[..], left, 3)?;
    assert_eq!(from_left[0], all[left as usize]);
    let mut g = vec![SyncCounter::NULL; if r == 0 { n as usize } else { 0 }];
    c.gather(&[mine][..], &mut g[..], 0)?;
    if r == 0 {
        assert_eq!(g, all);
    }
    // What may not carry one.
    let mut out = [SyncCounter::NULL];
    assert_err(
        c.allreduce(&[mine][..], &mut out[..], &Op::MAX),
        ErrorClass::Type,
        "MPIX_HANDLE_SYNC",
    );
    assert_err(
        Datatype::contiguous(2, &SyncCounter::datatype()),
        ErrorClass::Type,
        "MPIX_HANDLE_SYNC",
    );
    assert_err(
        Datatype::vector(2, 1, 2, &SyncCounter::datatype()),
        ErrorClass::Type,
        "MPIX_HANDLE_SYNC",
    );
    win.fence(MODE_NOPRECEDE)?;
    assert_err(
        win.put(&[mine][..], right, 0),
        ErrorClass::Type,
        "MPIX_HANDLE_SYNC",
    );
    assert_err(
        win.get(&mut out[..], right, 0),
        ErrorClass::Type,
        "MPIX_HANDLE_SYNC",
    );
    win.fence(MODE_NOSUCCEED)?;
    c.barrier()?;
    win.free()
}

/// Each misuse of the seed's calls: an error class and a message naming the value.
fn the_misuse_table(u: &Universe) -> Result<()> {
    let c = u.world();
    let r = c.rank();
    let win = c.win_allocate(8, 8, &Info::new())?;
    let other = c.win_allocate(8, 8, &Info::new())?;
    ret(&win);
    ret(&other);
    let h = counter_of_rank0(u, &win)?;
    let foreign = other.alloc_sync_objects(1, &Info::new())?[0];
    let mine = win.alloc_sync_objects(1, &Info::new())?[0];
    let none = Info::new();
    assert_err(
        win.sync_ops_init(r, MODE_WIN_PUT, foreign, &none),
        ErrorClass::Arg,
        "another window",
    );
    assert_err(
        win.sync_ops_init(1 - r, MODE_WIN_PUT, mine, &none),
        ErrorClass::Arg,
        "this rank's own",
    );
    assert_err(
        win.sync_ops_init(0, 8, h, &none),
        ErrorClass::Arg,
        "mode 0x8",
    );
    assert_err(
        win.sync_ops_init(0, MODE_WIN_PUT, SyncCounter::NULL, &none),
        ErrorClass::Arg,
        "MPI_SYNC_NULL",
    );
    assert_err(
        win.sync_ops_init(2, MODE_WIN_PUT, h, &none),
        ErrorClass::Rank,
        "2",
    );
    assert_err(
        win.sync_object_init(mine, -3, &none),
        ErrorClass::Count,
        "count -3",
    );
    let mut bad = Info::new();
    bad.set("restart", "sometimes")?;
    assert_err(
        win.sync_object_init(mine, 1, &bad),
        ErrorClass::InfoValue,
        "sometimes",
    );
    assert_err(
        win.free_sync_objects(&mut [foreign]),
        ErrorClass::Arg,
        "another window",
    );
    // A PROC_NULL target: completes at once, signals nothing.
    let mut nothing = win.sync_ops_init(PROC_NULL, MODE_WIN_PUT, SyncCounter::NULL, &none)?;
    nothing.start()?;
    nothing.wait()?;
    if r == 1 {
        assert_err(
            win.sync_object_init(h, 1, &none),
            ErrorClass::Arg,
            "belongs to rank 0",
        );
    }
    // Running requests: no second start, no cancel, no free of the counter, no win_free.
    let mut obj = win.sync_object_init(mine, 1, &none)?;
    obj.start()?;
    assert_err(obj.start(), ErrorClass::Request, "already active");
    assert_err(obj.cancel(), ErrorClass::Request, "cannot be cancelled");
    let mut twin = win.sync_object_init(mine, 1, &none)?;
    assert_err(
        twin.start(),
        ErrorClass::Request,
        "another request on counter",
    );
    assert_err(
        win.free_sync_objects(&mut [mine]),
        ErrorClass::RmaSync,
        "active sync object request",
    );
    // Self signal completes it.
    let mut me = win.sync_ops_init(r, MODE_WIN_PUT, mine, &none)?;
    me.start()?;
    me.wait()?;
    obj.wait()?;
    let mut freed = [mine];
    win.free_sync_objects(&mut freed)?;
    assert!(freed[0].is_null());
    assert_err(obj.start(), ErrorClass::Arg, "has been freed");
    assert_err(me.start(), ErrorClass::Arg, "has been freed");
    assert_err(
        win.sync_object_init(mine, 1, &none),
        ErrorClass::Arg,
        "has been freed",
    );
    // A window with an active sync ops request cannot be freed (every rank fails alike; the
    // window is then dropped unfreed).
    let third = c.win_allocate(8, 8, &Info::new())?;
    ret(&third);
    let k = third.alloc_sync_objects(1, &none)?[0];
    let mut active = third.sync_ops_init(r, 0, k, &none)?;
    active.start()?;
    let e = third.free().expect_err("win_free with an active request");
    assert_eq!(e.class(), ErrorClass::RmaSync, "{e}");
    assert!(e.to_string().contains("sync ops request"), "{e}");
    active.wait()?;
    drop((obj, twin, me, nothing, active));
    c.barrier()?;
    other.free()?;
    win.free()
}

/// put_signal, accumulate_signal and get_signal (beyond the seed): each call carries its
/// data and its signal, with no epoch; the owner that sees the signals sees the data.
fn signal_variants_carry_data_and_signal(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let win = c.win_allocate(8 * (n as usize + 1), 8, &Info::new())?;
    ret(&win);
    let h = counter_of_rank0(u, &win)?;
    if r == 0 {
        let mut obj = win.sync_object_init(h, 2 * (n as i64 - 1), &Info::new())?;
        obj.start()?;
        c.barrier()?;
        obj.wait()?;
        let l = win.local::<i64>()?;
        let mut got = vec![0i64; n as usize];
        l.read(1, &mut got)?;
        let want: Vec<i64> = (0..n as i64)
            .map(|q| if q == 0 { 0 } else { 100 + q })
            .collect();
        check_eq("put_signal stamps", &got, &want);
        assert_eq!(
            l.get(0)?,
            (1..n as i64).sum::<i64>(),
            "accumulate_signal total"
        );
        // The others read the reply, then rank 0 may overwrite it.
        let mut obj = win.sync_object_init(h, n as i64 - 1, &Info::new())?;
        obj.start()?;
        l.write(0, &[4242i64])?;
        c.barrier()?;
        obj.wait()?;
        l.write(0, &[-1i64])?;
    } else {
        assert_err(
            win.put(&[1i64][..], 0, 1),
            ErrorClass::RmaSync,
            "outside any access epoch",
        );
        c.barrier()?;
        win.put_signal(&[100 + r as i64][..], 0, 1 + r as isize, h)?;
        win.accumulate_signal(&[r as i64][..], 0, 0, &Op::SUM, h)?;
        c.barrier()?;
        let mut reply = [0i64];
        win.get_signal(&mut reply[..], 0, 0, h)?;
        assert_eq!(reply[0], 4242);
        assert_err(
            win.put_signal(&[1i64][..], r, 0, h),
            ErrorClass::Arg,
            "not on the target",
        );
    }
    c.barrier()?;
    win.free()
}

/// Restarting requests may sit in a bundle: a start of the bundle starts them the first time
/// and does nothing to them later (they restart by themselves), and each wait of the bundle
/// completes one run.
fn restarting_requests_in_bundles(u: &Universe) -> Result<()> {
    let c = u.world();
    let r = c.rank();
    let win = c.win_allocate(8, 8, &Info::new())?;
    let h = counter_of_rank0(u, &win)?;
    if r == 0 {
        let obj = win.sync_object_init(h, 1, &restart())?;
        let mut b = Bundle::new(vec![obj])?;
        for round in 0..20i64 {
            b.start()?;
            b.wait()?;
            assert_eq!(win.local::<i64>()?.get(0)?, round, "round {round}");
            c.send(&[0u8][..], 1, 0)?;
        }
    } else if r == 1 {
        let ops = win.sync_ops_init(0, MODE_WIN_PUT, h, &restart())?;
        let mut b = Bundle::new(vec![ops])?;
        for round in 0..20i64 {
            b.start()?;
            win.put(&[round][..], 0, 0)?;
            b.wait()?;
            c.recv(&mut [0u8; 1][..], 0, 0)?;
        }
    }
    c.barrier()?;
    win.free()
}

/// win_change_comm (seed 001 section 1.2.6): a window of every rank but the last grows to
/// the world (the last joins) and shrinks again (rank 1 leaves). The members' memory, rank
/// 0's counter and the reference to it that every rank received before either change stay
/// valid; requests made before a change fail; the joiner exposes no memory.
fn change_comm_keeps_memory_and_counters(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let none = Info::new();
    let last = n - 1;
    let first = c.split(if r < last { 0 } else { UNDEFINED }, r)?;
    let win = match &first {
        Some(a) => Some(a.win_allocate(8 * 16, 8, &none)?),
        None => None,
    };
    let mut h = [SyncCounter::NULL];
    let mut old_ops = None;
    if let Some(w) = &win {
        ret(w);
        w.local::<i64>()?.write(0, &[1000 + r as i64])?;
        if r == 0 {
            h = [w.alloc_sync_objects(1, &none)?[0]];
        }
    }
    c.bcast(&mut h[..], 0)?;
    if let Some(w) = &win {
        old_ops = Some(w.sync_ops_init(0, MODE_WIN_PUT, h[0], &none)?);
    }
    // Larger: the world; rank 0 (a member) tells the joiner what the window is.
    let mut win = match win {
        Some(mut w) => {
            w.change_comm(Some(c), 0)?;
            w
        }
        None => c.win_join(0)?,
    };
    ret(&win);
    assert_eq!(win.group_size(), n);
    assert_eq!(win.rank(), r);
    if r < last {
        assert_eq!(win.local::<i64>()?.get(0)?, 1000 + r as i64, "memory kept");
        let e = old_ops
            .take()
            .expect("made before")
            .start()
            .expect_err("an old request");
        assert_eq!(e.class(), ErrorClass::Win, "{e}");
    } else {
        assert_eq!(win.size(), 0, "a joiner exposes no memory");
    }
    // Every member, the joiner too, signals rank 0's counter through the old reference,
    // after a put of `tag` plus its window rank; rank 0 checks them all.
    let signal_round = |win: &Win, comm: &earlybird::Comm, tag: i64| -> Result<()> {
        let (wr, members) = (win.rank(), win.group_size());
        let mut obj = if wr == 0 {
            let mut o = win.sync_object_init(h[0], members as i64, &none)?;
            o.start()?;
            Some(o)
        } else {
            None
        };
        comm.barrier()?;
        let mut ops = win.sync_ops_init(0, MODE_WIN_PUT, h[0], &none)?;
        ops.start()?;
        win.put(&[tag + wr as i64][..], 0, 1 + wr as isize)?;
        ops.wait()?;
        if let Some(o) = obj.as_mut() {
            o.wait()?;
            let l = win.local::<i64>()?;
            assert_eq!(l.get(0)?, 1000, "rank 0's own memory kept");
            for q in 0..members {
                assert_eq!(l.get(1 + q as usize)?, tag + q as i64, "put of rank {q}");
            }
        }
        comm.barrier()
    };
    signal_round(&win, c, 100)?;
    // Smaller: rank 1 leaves.
    let stay = r != 1;
    let second = c.split(if stay { 0 } else { UNDEFINED }, r)?;
    if stay {
        let s = second
            .as_ref()
            .expect("a stayer is in the new communicator");
        win.change_comm(Some(s), 0)?;
        assert_eq!(win.group_size(), n - 1);
        if r < last {
            assert_eq!(
                win.local::<i64>()?.get(0)?,
                1000 + r as i64,
                "memory kept again"
            );
        }
        signal_round(&win, s, 200)?;
        win.free()?;
    } else {
        win.change_comm(None, 0)?;
        assert_err(win.put(&[1i64][..], 0, 0), ErrorClass::Win, "win_free");
    }
    c.barrier()?;
    Ok(())
}

/// A bad peer_rank seen by the members that stay fails the call on every member, the one
/// that leaves included, and the window stays whole and usable.
fn change_comm_refused_everywhere(u: &Universe) -> Result<()> {
    let c = u.world();
    let (r, n) = (c.rank(), c.size());
    let mut win = c.win_allocate(8, 8, &Info::new())?;
    ret(&win);
    let leaver = n - 1;
    let stay = c.split(if r != leaver { 0 } else { UNDEFINED }, r)?;
    // peer_rank n - 1 is no rank of the new communicator (n - 1 ranks).
    let e = win
        .change_comm(stay.as_ref(), n - 1)
        .expect_err("a bad peer_rank fails everywhere");
    if r == leaver {
        assert_eq!(e.class(), ErrorClass::RmaSync, "{e}");
    } else {
        assert_eq!(e.class(), ErrorClass::Rank, "{e}");
    }
    // Still the old window, whole.
    assert_eq!(win.group_size(), n);
    win.fence(MODE_NOPRECEDE)?;
    win.put(&[r as i64][..], (r + 1) % n, 0)?;
    win.fence(MODE_NOSUCCEED)?;
    assert_eq!(win.local::<i64>()?.get(0)?, ((r + n - 1) % n) as i64);
    c.barrier()?;
    win.free()
}

#[repr(C)]
#[derive(earlybird::Equivalence, Clone, Copy, Debug, PartialEq)]
struct Tagged {
    counter: SyncCounter,
    tag: u64,
}

/// A Rust struct may carry a sync counter (the derive's datatype allows it, where a struct
/// datatype the program builds may not): it travels by point-to-point and arrives usable.
fn counters_inside_derived_structs(u: &Universe) -> Result<()> {
    let c = u.world();
    let r = c.rank();
    let win = c.win_allocate(8, 8, &Info::new())?;
    if r == 0 {
        let h = win.alloc_sync_objects(1, &Info::new())?[0];
        let mut obj = win.sync_object_init(h, 1, &Info::new())?;
        obj.start()?;
        c.send(&[Tagged { counter: h, tag: 7 }][..], 1, 0)?;
        obj.wait()?;
        assert_eq!(win.local::<i64>()?.get(0)?, 77);
    } else if r == 1 {
        let mut got = [Tagged {
            counter: SyncCounter::NULL,
            tag: 0,
        }];
        c.recv(&mut got[..], 0, 0)?;
        assert_eq!(got[0].tag, 7);
        win.put_signal(&[77i64][..], 0, 0, got[0].counter)?;
    }
    c.barrier()?;
    win.free()
}
