//! Assertions (seed 002) and MPI 4's communicator assertions: every scenario runs with and
//! without its assertions, as a thread job (`threads::Job::assertions`) and under ebrun
//! (`EARLYBIRD_ASSERTIONS`). A program that keeps its promises gets the same results either
//! way; one that breaks a promise gets MPIX_ERR_ASSERTION naming the assertion and the call
//! when the assertion is in force, and MPI's usual behaviour when it is not.

mod common;
use earlybird::{
    scope, wait_all, Assertions, Comm, Equivalence, ErrHandler, ErrorClass, Info, Op, Result,
    Universe, ANY_SOURCE, ANY_TAG,
};

/// Tests of `$name` with the assertions `$a` and without them, in both modes, on `$n` ranks.
macro_rules! with_and_without {
    ($($name:ident: $a:expr, $n:expr;)*) => {
        $(mod $name {
            use super::*;
            #[test]
            fn threads_with() {
                common::run_threads_asserting($n, $a, common::Scn::Borrowed(super::$name));
            }
            #[test]
            fn threads_without() {
                common::run_threads($n, common::Scn::Borrowed(super::$name));
            }
            #[test]
            fn procs_with() {
                let names = ($a).names();
                common::run_procs_env(stringify!($name), $n, &[("EARLYBIRD_ASSERTIONS", &names)]);
            }
            #[test]
            fn procs_without() {
                common::run_procs(stringify!($name), $n);
            }
        })*
        scenarios! { $(child_only $name;)* }
    };
}

with_and_without! {
    wildcards: Assertions::NO_ANY_SOURCE | Assertions::NO_ANY_TAG, 2;
    tag_keyed_only: Assertions::NO_ANY_TAG, 3;
    info_keys: Assertions::NO_ANY_SOURCE, 2;
    send_cancels: Assertions::NO_SEND_CANCELS, 2;
    exact_length: Assertions::EXACT_LENGTH, 2;
    mixed_waits: Assertions::NO_MIXED_REQUESTS, 2;
    no_rma: Assertions::NO_RMA, 2;
    eager_unthrottled: Assertions::NO_EAGER_THROTTLE, 2;
    persistent_only: Assertions::PERSISTENT_ONLY, 2;
    collective_start_order: Assertions::STRICT_PERSISTENT_COLLECTIVE_ORDERING, 3;
    unordered_reductions: Assertions::NO_REDUCE_CONSTRAINT, 5;
    unordered_reductions_3: Assertions::NO_REDUCE_CONSTRAINT, 3;
    keeps_every_promise: Assertions::all(), 3;
}

/// The world communicator, returning errors instead of ending the job.
fn returning(u: &Universe) -> &Comm {
    u.world().set_errhandler(ErrHandler::Return);
    u.world()
}

/// `r` is MPIX_ERR_ASSERTION naming assertion `a` and call `call`.
#[track_caller]
fn assert_broken<T: std::fmt::Debug>(r: Result<T>, a: Assertions, call: &str) {
    let e = r.expect_err("a broken promise must be an error");
    assert_eq!(e.class(), ErrorClass::Assertion, "{e}");
    let text = e.to_string();
    assert!(text.contains(&a.names()) && text.contains(call), "{text}");
}

/// A deep queue of receives for tags in reverse order (each message meets its own), then
/// a receive from ANY_SOURCE and a probe with ANY_TAG, which are errors exactly when
/// asserted away.
fn wildcards(u: &Universe) -> Result<()> {
    let w = returning(u);
    let a = u.assertions();
    assert_eq!(w.assertions(), a);
    const N: i32 = 64;
    if w.rank() == 0 {
        for t in 0..N {
            w.send(&[t as u64 * 3], 1, t)?;
        }
        w.send(&[7u64], 1, 1000)?;
        w.send(&[8u64], 1, 1001)?;
        return w.barrier();
    }
    let mut bufs = vec![[0u64; 1]; N as usize];
    scope(|s| -> Result<()> {
        let mut reqs = vec![];
        for (t, b) in bufs.iter_mut().enumerate().rev() {
            reqs.push(w.irecv(s, b, 0, t as i32)?);
        }
        let st = wait_all(&mut reqs)?;
        for (i, st) in st.iter().enumerate() {
            assert_eq!((st.source(), st.tag()), (0, N - 1 - i as i32));
        }
        Ok(())
    })?;
    for (t, b) in bufs.iter().enumerate() {
        assert_eq!(b[0], t as u64 * 3, "tag {t}");
    }
    let mut x = [0u64];
    let r = w.recv(&mut x, ANY_SOURCE, 1000);
    if a.contains(Assertions::NO_ANY_SOURCE) {
        assert_broken(r, Assertions::NO_ANY_SOURCE, "recv");
        assert!(w.iprobe(0, 1000)?.is_some(), "the message is still there");
        w.recv(&mut x, 0, 1000)?;
    } else {
        assert_eq!(r?.source(), 0);
    }
    assert_eq!(x, [7]);
    let r = w.probe(0, ANY_TAG);
    if a.contains(Assertions::NO_ANY_TAG) {
        assert_broken(r, Assertions::NO_ANY_TAG, "probe");
    } else {
        assert_eq!(r?.tag(), 1001);
    }
    w.recv(&mut x, 0, 1001)?;
    assert_eq!(x, [8]);
    w.barrier()
}

/// NO_ANY_TAG alone keys by tag with ANY_SOURCE still allowed: receives from any source of
/// distinct tags posted in reverse, then the order of one source's messages on one tag.
fn tag_keyed_only(u: &Universe) -> Result<()> {
    let w = returning(u);
    let (rank, size) = (w.rank(), w.size());
    const N: i32 = 16;
    if rank != 0 {
        for t in 0..N {
            w.send(&[rank * 100 + t], 0, t)?;
        }
        for k in 0..4 {
            w.send(&[rank * 1000 + k], 0, N)?;
        }
        return w.barrier();
    }
    for t in (0..N).rev() {
        let mut got = vec![];
        for _ in 1..size {
            let mut x = [0i32];
            let st = w.recv(&mut x, ANY_SOURCE, t)?;
            assert_eq!(x[0], st.source() * 100 + t);
            got.push(st.source());
        }
        got.sort();
        assert_eq!(got, (1..size).collect::<Vec<_>>());
    }
    for src in 1..size {
        for k in 0..4 {
            let mut x = [0i32];
            w.recv(&mut x, src, N)?;
            assert_eq!(
                x[0],
                src * 1000 + k,
                "one source's messages keep their order"
            );
        }
    }
    let r = w.iprobe(ANY_SOURCE, ANY_TAG);
    if u.assertions().contains(Assertions::NO_ANY_TAG) {
        assert_broken(r, Assertions::NO_ANY_TAG, "iprobe");
    } else {
        assert!(r?.is_none());
    }
    w.barrier()
}

/// The MPI 4 keys take effect on the communicator they are set on, and only there.
fn info_keys(u: &Universe) -> Result<()> {
    let w = returning(u);
    let init = u.assertions();
    let mut keys = Info::new();
    keys.set("mpi_assert_no_any_source", "true")?;
    keys.set("mpi_assert_exact_length", "true")?;
    let d = w.dup_with_info(&keys)?;
    let promised = init | Assertions::NO_ANY_SOURCE | Assertions::EXACT_LENGTH;
    assert_eq!(d.assertions(), promised);
    assert_eq!(d.get_info()?.get("mpi_assert_no_any_source")?, Some("true"));
    // dup keeps the hints; dup_with_info replaces them; "false" cannot undo init's promise.
    let dd = d.dup()?;
    assert_eq!(dd.assertions(), promised);
    let plain = d.dup_with_info(&Info::new())?;
    assert_eq!(plain.assertions(), init);
    let mut no = Info::new();
    no.set("mpi_assert_no_any_source", "false")?;
    let g = w.dup_with_info(&no)?;
    assert_eq!(g.assertions(), init);
    if w.rank() == 0 {
        // Sent as soon as the dup returns here: they may reach rank 1 before its dup does.
        d.send(&[1u8; 4], 1, 1)?;
        w.send(&[2u8; 4], 1, 1)?;
        d.send(&[3u8; 4], 1, 2)?;
        plain.send(&[4u8; 4], 1, 1)?;
    } else {
        let mut b = [0u8; 4];
        let r = w.recv(&mut b, ANY_SOURCE, 1);
        if init.contains(Assertions::NO_ANY_SOURCE) {
            assert_broken(r, Assertions::NO_ANY_SOURCE, "recv");
            w.recv(&mut b, 0, 1)?;
        } else {
            r?;
        }
        assert_eq!(b, [2; 4]);
        assert_broken(
            d.recv(&mut b, ANY_SOURCE, 1),
            promised & Assertions::NO_ANY_SOURCE,
            "recv",
        );
        d.recv(&mut b, 0, 1)?;
        assert_eq!(b, [1; 4]);
        let mut long = [0u8; 8];
        let e = d
            .recv(&mut long, 0, 2)
            .expect_err("shorter than its buffer");
        assert_eq!(e.class(), ErrorClass::Assertion, "{e}");
        assert_eq!(e.status().map(|s| s.bytes()), Some(4));
        assert_eq!(
            long,
            [3, 3, 3, 3, 0, 0, 0, 0],
            "the message is delivered all the same"
        );
        plain.recv(&mut long, 0, 1)?;
        assert_eq!(&long[..4], &[4; 4]);
    }
    // set_info adds the keys to a communicator from then on.
    plain.set_info(&keys)?;
    assert_eq!(plain.assertions(), promised);
    assert_broken(
        plain.iprobe(ANY_SOURCE, 0),
        Assertions::NO_ANY_SOURCE,
        "iprobe",
    );
    for c in [d, dd, plain, g] {
        c.free()?;
    }
    w.barrier()
}

/// A send cancel is an error under NO_SEND_CANCELS (and the send then completes normally);
/// a receive may still be cancelled.
fn send_cancels(u: &Universe) -> Result<()> {
    let w = returning(u);
    let asserted = u.assertions().contains(Assertions::NO_SEND_CANCELS);
    let big = vec![5u8; 1 << 20];
    let mut b = [0u8; 1];
    if w.rank() == 0 {
        scope(|s| -> Result<()> {
            let mut r = w.isend(s, &big, 1, 5)?;
            let c = r.cancel();
            if asserted {
                assert_broken(c, Assertions::NO_SEND_CANCELS, "cancel");
                assert!(!r.wait()?.is_cancelled());
            } else {
                c?;
                assert!(
                    r.wait()?.is_cancelled(),
                    "an unmatched rendezvous send cancels"
                );
            }
            let mut p = w.send_init(s, &big[..8], 1, 6)?;
            p.start()?;
            let c = p.cancel();
            if asserted {
                assert_broken(c, Assertions::NO_SEND_CANCELS, "cancel");
            } else {
                c?;
            }
            p.wait()?;
            let mut rr = w.irecv(s, &mut b, 1, 99)?;
            rr.cancel()?;
            assert!(rr.wait()?.is_cancelled());
            Ok(())
        })?;
    } else if asserted {
        let mut b = vec![0u8; 1 << 20];
        w.recv(&mut b, 0, 5)?;
        assert!(b.iter().all(|&x| x == 5));
    }
    w.barrier()?;
    // An eager send of 8 bytes completes at its start; its cancel (if it took) was reported
    // by its status. Whatever is left of tag 6 is drained.
    if w.rank() == 1 {
        let mut b = [0u8; 8];
        if w.iprobe(0, 6)?.is_some() {
            w.recv(&mut b, 0, 6)?;
        }
    }
    w.barrier()
}

/// A message shorter than its receive buffer is an error under EXACT_LENGTH, for eager and
/// rendezvous sizes; the data is delivered either way. Exact and longer ones are as always.
fn exact_length(u: &Universe) -> Result<()> {
    let w = returning(u);
    let asserted = u.assertions().contains(Assertions::EXACT_LENGTH);
    let big: Vec<u32> = (0..16384).collect();
    if w.rank() == 0 {
        w.send(&[1u32; 4], 1, 1)?;
        w.send(&[2u32; 8], 1, 2)?;
        w.send(&big, 1, 3)?;
        w.send(&[4u32; 9], 1, 4)?;
        return library_traffic_is_not_held_to_promises(w);
    }
    let mut b = [0u32; 8];
    let r = w.recv(&mut b, 0, 1);
    if asserted {
        let e = r.expect_err("4 of 8");
        assert_eq!(e.class(), ErrorClass::Assertion, "{e}");
        assert!(e.to_string().contains("EXACT_LENGTH"), "{e}");
        assert_eq!(e.status().map(|s| s.bytes()), Some(16));
    } else {
        assert_eq!(r?.bytes(), 16);
    }
    assert_eq!(&b[..4], &[1; 4]);
    assert_eq!(w.recv(&mut b, 0, 2)?.bytes(), 32);
    let mut bb = vec![0u32; 32768];
    let r = w.recv(&mut bb, 0, 3);
    if asserted {
        assert_eq!(r.expect_err("half").class(), ErrorClass::Assertion);
    } else {
        r?;
    }
    assert_eq!(&bb[..16384], &big[..]);
    assert_eq!(
        w.recv(&mut b, 0, 4).expect_err("longer").class(),
        ErrorClass::Truncate
    );
    library_traffic_is_not_held_to_promises(w)
}

/// The library's own messages (communicator creation, collectives) are not the program's:
/// an intercommunicator is made and used under any init-time assertion (its handshake
/// receives into buffers larger than the messages).
fn library_traffic_is_not_held_to_promises(w: &Comm) -> Result<()> {
    let (rank, size) = (w.rank(), w.size());
    let half = w.split(rank % 2, rank)?.expect("a color");
    let remote_leader = if rank % 2 == 0 { 1 } else { 0 };
    let inter = half.intercomm_create(0, w, remote_leader % size, 77)?;
    let mut sum = [0i32];
    inter.allreduce(&[rank + 1], &mut sum, &Op::SUM)?;
    let other: i32 = (0..size).filter(|r| r % 2 != rank % 2).map(|r| r + 1).sum();
    assert_eq!(
        sum[0], other,
        "an intercommunicator allreduce gets the remote group's sum"
    );
    inter.free()?;
    half.free()?;
    w.barrier()
}

/// A point-to-point request and a collective one in one wait_all: an error under
/// NO_MIXED_REQUESTS, which leaves both to be completed one by one.
fn mixed_waits(u: &Universe) -> Result<()> {
    let w = returning(u);
    let asserted = u.assertions().contains(Assertions::NO_MIXED_REQUESTS);
    let peer = 1 - w.rank();
    let mut b = [0u8; 1];
    let mut c = [0u8; 1];
    scope(|s| -> Result<()> {
        let r1 = w.irecv(s, &mut b, peer, 3)?;
        let r2 = w.ibarrier(s)?;
        w.send(&[9u8], peer, 3)?;
        let mut reqs = [r1, r2];
        let r = wait_all(&mut reqs);
        if asserted {
            assert_broken(r, Assertions::NO_MIXED_REQUESTS, "wait_all");
            for q in reqs.iter_mut() {
                q.wait()?;
            }
        } else {
            r?;
        }
        // One kind only is fine.
        let q1 = w.irecv(s, &mut c, peer, 4)?;
        w.send(&[8u8], peer, 4)?;
        wait_all(&mut [q1])?;
        Ok(())
    })?;
    assert_eq!((b, c), ([9], [8]));
    Ok(())
}

/// Making a window is an error under NO_RMA, on every rank alike (no rank waits).
fn no_rma(u: &Universe) -> Result<()> {
    let w = returning(u);
    library_traffic_is_not_held_to_promises(w)?;
    let r = w.win_allocate(64, 1, &Info::new());
    if u.assertions().contains(Assertions::NO_RMA) {
        assert_broken(r, Assertions::NO_RMA, "win_allocate");
        assert_broken(
            w.win_create(vec![0u8; 8], 1, &Info::new()),
            Assertions::NO_RMA,
            "window creation",
        );
    } else {
        r?.free()?;
    }
    w.barrier()
}

/// 4 MiB of 1 KiB messages to a receiver that has posted nothing: without NO_EAGER_THROTTLE
/// the flow limit (1 MiB) sends the later ones by rendezvous, so they wait for their receive;
/// with it every one goes eager and completes at once. The data is the same.
fn eager_unthrottled(u: &Universe) -> Result<()> {
    let w = returning(u);
    let asserted = u.assertions().contains(Assertions::NO_EAGER_THROTTLE);
    const N: usize = 4096;
    const LEN: usize = 128; // u64s: 1 KiB
    let data: Vec<Vec<u64>> = (0..N).map(|i| vec![i as u64; LEN]).collect();
    if w.rank() == 0 {
        scope(|s| -> Result<()> {
            let mut reqs = vec![];
            for (i, d) in data.iter().enumerate() {
                reqs.push(w.isend(s, &d[..], 1, i as i32)?);
            }
            let mut pending = 0;
            for r in reqs.iter_mut() {
                if r.test()?.is_none() {
                    pending += 1;
                }
            }
            if asserted {
                assert_eq!(
                    pending, 0,
                    "unthrottled eager sends complete at their start"
                );
            } else {
                assert!(pending > 0, "the flow limit holds some sends back");
            }
            w.barrier()?;
            wait_all(&mut reqs)?;
            Ok(())
        })?;
    } else {
        w.barrier()?;
        let mut b = vec![0u64; LEN];
        for (i, d) in data.iter().enumerate() {
            w.recv(&mut b, 0, i as i32)?;
            assert_eq!(&b, d, "message {i}");
        }
    }
    w.barrier()
}

/// Persistent sends met by nonpersistent receives and the reverse, at eager and rendezvous
/// sizes: MPIX_ERR_ASSERTION in the receive's status under PERSISTENT_ONLY (the data is
/// delivered all the same); persistent met by persistent is fine either way.
fn persistent_only(u: &Universe) -> Result<()> {
    let w = returning(u);
    let asserted = u.assertions().contains(Assertions::PERSISTENT_ONLY);
    let small = [7u8; 8];
    let big = vec![9u8; 64 << 10];
    let expect = |r: Result<()>, mixed: bool| {
        if asserted && mixed {
            let e = r.expect_err("a mixed match");
            assert_eq!(e.class(), ErrorClass::Assertion, "{e}");
            assert!(e.to_string().contains("PERSISTENT_ONLY"), "{e}");
        } else {
            r.expect("a match the promise allows");
        }
    };
    if w.rank() == 0 {
        scope(|s| -> Result<()> {
            let mut a = w.send_init(s, &small, 1, 1)?;
            let mut b = w.send_init(s, &big[..], 1, 2)?;
            let mut c = w.send_init(s, &small, 1, 4)?;
            a.start()?;
            b.start()?;
            c.start()?;
            w.send(&small, 1, 3)?;
            w.send(&big[..], 1, 5)?;
            wait_all(&mut [a, b, c])?;
            Ok(())
        })?;
    } else {
        let mut rs = [0u8; 8];
        let mut rb = vec![0u8; 64 << 10];
        expect(w.recv(&mut rs, 0, 1).map(drop), true);
        assert_eq!(rs, small);
        scope(|s| -> Result<()> {
            let mut r = w.recv_init(s, &mut rb[..], 0, 2)?;
            r.start()?;
            expect(r.wait().map(drop), false);
            Ok(())
        })?;
        assert_eq!(rb, big);
        rb.fill(0);
        let mut rs4 = [0u8; 8];
        scope(|s| -> Result<()> {
            let mut r3 = w.recv_init(s, &mut rs, 0, 3)?;
            r3.start()?;
            expect(r3.wait().map(drop), true);
            let mut r4 = w.recv_init(s, &mut rs4, 0, 4)?;
            r4.start()?;
            expect(r4.wait().map(drop), false);
            Ok(())
        })?;
        assert_eq!((rs, rs4), (small, small));
        scope(|s| -> Result<()> {
            let mut r5 = w.recv_init(s, &mut rb[..], 0, 5)?;
            r5.start()?;
            expect(r5.wait().map(drop), true);
            Ok(())
        })?;
        assert_eq!(rb, big);
    }
    w.barrier()
}

/// Persistent collectives started in a different order on each rank: allowed without
/// `mpi_assert_strict_persistent_collective_ordering`; with it a broken promise that earlybird
/// does not detect and that does no harm (each persistent collective has its own matching
/// space from its init): the results are right either way.
fn collective_start_order(u: &Universe) -> Result<()> {
    let w = returning(u);
    let (rank, size) = (w.rank(), w.size());
    let mine = [rank as f64 + 1.0];
    let (mut sum, mut max) = ([0.0f64], [0.0f64]);
    let mut b = [if rank == 0 { 42i64 } else { 0 }];
    scope(|s| -> Result<()> {
        let mut a = w.allreduce_init(s, &mine, &mut sum, &Op::SUM)?;
        let mut m = w.allreduce_init(s, &mine, &mut max, &Op::MAX)?;
        let mut c = w.bcast_init(s, &mut b, 0)?;
        for it in 0..5 {
            // Rank r starts them rotated by r + it.
            let mut reqs = [&mut a, &mut m, &mut c];
            reqs.rotate_left(((rank + it) % 3) as usize);
            for r in reqs.iter_mut() {
                r.start()?;
            }
            wait_all(&mut reqs)?;
        }
        Ok(())
    })?;
    let n = size as f64;
    assert_eq!((sum[0], max[0], b[0]), (n * (n + 1.0) / 2.0, n, 42));
    w.barrier()
}

/// Allreduce under NO_REDUCE_CONSTRAINT on a number of ranks that is not a power of two
/// folds pairs first (`fold`); without it the canonical association's algorithms run. Either
/// way operands stay in rank order (a product of 2x2 matrices), sums are right, and the same
/// call gives the same bits twice; blocking, nonblocking and persistent alike.
fn unordered_reductions(u: &Universe) -> Result<()> {
    let w = returning(u);
    let (rank, size) = (w.rank(), w.size());
    let asserted = u.assertions().contains(Assertions::NO_REDUCE_CONSTRAINT);
    let matmul = common::matmul_op();
    let (mat, mul) = (common::mat, common::mat_mul);
    let n = 7;
    let mine: Vec<[i64; 4]> = (0..n).map(|i| mat(rank, i)).collect();
    let want: Vec<[i64; 4]> = (0..n)
        .map(|i| (1..size).fold(mat(0, i), |acc, r| mul(acc, mat(r, i))))
        .collect();
    let mut out = vec![[0i64; 4]; n];
    w.allreduce(&mine[..], &mut out[..], &matmul)?;
    assert_eq!(out, want, "rank order kept");
    // By default: fold, or shared memory's one round (canonical, and quicker still).
    let alg = earlybird::coll::last_algorithm();
    assert!(
        if asserted {
            alg == "fold" || alg == "shm"
        } else {
            alg != "fold"
        },
        "{alg} with the constraint {}",
        if asserted { "lifted" } else { "in force" }
    );
    // Asked for by name, fold runs exactly when the constraint is lifted.
    let mut info = earlybird::Info::new();
    info.set("earlybird_coll_allreduce", "fold")?;
    let f = w.dup_with_info(&info)?;
    let mut out = vec![[0i64; 4]; n];
    f.allreduce(&mine[..], &mut out[..], &matmul)?;
    assert_eq!(out, want, "rank order kept");
    let folded = earlybird::coll::last_algorithm() == "fold";
    assert_eq!(
        folded, asserted,
        "fold runs exactly when the constraint is lifted"
    );
    f.free()?;
    let vals: Vec<f64> = (0..1000)
        .map(|i| ((rank * 7919 + i * 104729) % 2001) as f64 * 10f64.powi(i % 13 - 6))
        .collect();
    let mut a = vec![0.0f64; 1000];
    let mut b = vec![0.0f64; 1000];
    w.allreduce(&vals[..], &mut a[..], &Op::SUM)?;
    w.allreduce(&vals[..], &mut b[..], &Op::SUM)?;
    assert!(
        a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
        "same bits twice"
    );
    let ints: Vec<i64> = (0..100).map(|i| (rank as i64 + 1) * i).collect();
    let total: i64 = (1..=size as i64).sum();
    let mut isum = vec![0i64; 100];
    scope(|s| -> Result<()> {
        let mut q = w.iallreduce(s, &ints[..], &mut isum[..], &Op::SUM)?;
        q.wait()?;
        Ok(())
    })?;
    assert!(isum.iter().enumerate().all(|(i, &x)| x == total * i as i64));
    let mut psum = vec![0i64; 100];
    scope(|s| -> Result<()> {
        let mut p = w.allreduce_init(s, &ints[..], &mut psum[..], &Op::SUM)?;
        for _ in 0..3 {
            p.start()?;
            p.wait()?;
        }
        Ok(())
    })?;
    assert_eq!(psum, isum);
    let mut inplace = ints.clone();
    w.allreduce(earlybird::IN_PLACE, &mut inplace[..], &Op::SUM)?;
    assert_eq!(inplace, isum);
    w.barrier()
}

fn unordered_reductions_3(u: &Universe) -> Result<()> {
    unordered_reductions(u)
}

/// A gap-free struct, for the datatype part of the program below.
#[derive(Clone, Copy, Debug, PartialEq, Equivalence)]
#[repr(C)]
struct Cellv {
    id: i32,
    v: f32,
}

/// A program that keeps every promise (a ring of persistent sends and receives, a
/// persistent allreduce, structs exchanged, specific sources and tags, exact lengths):
/// the same results with every assertion in force as with none.
fn keeps_every_promise(u: &Universe) -> Result<()> {
    let w = returning(u);
    library_traffic_is_not_held_to_promises(w)?;
    let (rank, size) = (w.rank(), w.size());
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    let mut out = [Cellv { id: 0, v: 0.0 }; 8];
    let mut got = [Cellv { id: 0, v: 0.0 }; 8];
    let mut mine = [0f64; 4];
    let mut sum = [0f64; 4];
    for it in 0..10 {
        for (i, c) in out.iter_mut().enumerate() {
            *c = Cellv {
                id: rank * 1000 + it * 10 + i as i32,
                v: rank as f32 + 0.25 * i as f32,
            };
        }
        for (i, m) in mine.iter_mut().enumerate() {
            *m = (rank + 1) as f64 * (it as f64 + 0.5) * (i + 1) as f64;
        }
        scope(|s| -> Result<()> {
            let mut r = w.recv_init(s, &mut got, prev, 7)?;
            let mut p = w.send_init(s, &out, next, 7)?;
            r.start()?;
            p.start()?;
            wait_all(&mut [r, p])?;
            let mut ar = w.allreduce_init(s, &mine, &mut sum, &Op::SUM)?;
            ar.start()?;
            ar.wait()?;
            Ok(())
        })?;
        for (i, c) in got.iter().enumerate() {
            assert_eq!(c.id, prev * 1000 + it * 10 + i as i32);
            assert_eq!(c.v, prev as f32 + 0.25 * i as f32);
        }
        let ranks: f64 = (1..=size).map(f64::from).sum();
        for (i, s) in sum.iter().enumerate() {
            assert_eq!(*s, ranks * (it as f64 + 0.5) * (i + 1) as f64);
        }
    }
    w.barrier()
}

/// An unknown name in EARLYBIRD_ASSERTIONS fails init, naming it.
#[test]
fn an_unknown_assertion_name_fails_init() {
    let out = common::ebrun_scenario(
        "keeps_every_promise",
        2,
        &[("EARLYBIRD_ASSERTIONS", "no_any_source,no_such_promise")],
    );
    assert!(!out.status.success(), "{}", out.dump());
    assert!(
        out.stderr.contains("no_such_promise") || out.stdout.contains("no_such_promise"),
        "{}",
        out.dump()
    );
}
