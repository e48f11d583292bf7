//! Partitioned communication (MPI 4.1 §4): psend_init / precv_init, pready (one, range,
//! list), parrived, over many rounds; sender and receiver with different partition counts;
//! partitions sent in any order and eager or rendezvous by size; matching in the order of
//! the init calls whatever order the requests start in; a receive through a datatype's view;
//! MPI_PROC_NULL; and the errors (wildcards, partitions out of range or readied twice, an
//! inactive request, a wait that could never end, truncation).

mod common;
use common::*;
use earlybird::{
    scope, start_all, wait_all, Datatype, ErrHandler, ErrorClass, Info, Result, TypedMut, Universe,
    ANY_SOURCE, ANY_TAG, PARTITION_UNIT_KEY, PROC_NULL,
};

const TAG: i32 = 21;

/// The value of element `k` of round `round` from rank `r`.
fn val(round: usize, r: i32, k: usize) -> u64 {
    (round as u64) << 40 ^ (r as u64) << 32 ^ k as u64
}

/// Ring shift over several rounds: each rank sends `n` u64 in `sp` partitions to the right
/// and receives them in `rp` partitions from the left. Partitions are marked ready from the
/// last to the first, one by one, by range or by list; the receiver watches parrived until
/// every partition is there, then waits. Data changes every round.
fn ring_rounds(u: &Universe, sp: usize, rp: usize, n: usize, how: usize, unit: &str) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let mut info = Info::new();
    if !unit.is_empty() {
        info.set(PARTITION_UNIT_KEY, unit)?;
    }
    let mut sbuf = vec![0u64; n];
    let mut rbuf = vec![0u64; n];
    let what = format!("{n} u64, {sp} -> {rp} partitions (unit {unit:?}), rank {me} from {left}");
    scope(|s| -> Result<()> {
        let mut rr = w.precv_init(s, &mut rbuf, rp, left, TAG, &info)?;
        let mut sr = w.psend_init(s, &mut sbuf, sp, right, TAG, &info)?;
        assert!(rr.is_persistent() && !rr.is_active() && !sr.is_active());
        for round in 0..4 {
            for (k, x) in sr.buffer_mut::<u64>()?.iter_mut().enumerate() {
                *x = val(round, me, k);
            }
            rr.start()?;
            sr.start()?;
            assert!(sr.is_active() && rr.is_active());
            match how {
                0 => (0..sp).rev().try_for_each(|p| sr.pready(p))?,
                1 if sp > 0 => {
                    sr.pready_range(sp / 2, sp - 1)?;
                    if sp / 2 > 0 {
                        sr.pready_range(0, sp / 2 - 1)?;
                    }
                }
                _ => {
                    let odd_first: Vec<usize> = (0..sp)
                        .filter(|p| p % 2 == 1)
                        .chain((0..sp).filter(|p| p % 2 == 0))
                        .collect();
                    sr.pready_list(&odd_first)?;
                }
            }
            let mut seen = vec![false; rp];
            let t0 = std::time::Instant::now();
            while seen.iter().any(|s| !s) {
                for (p, s) in seen.iter_mut().enumerate() {
                    *s = *s || rr.parrived(p)?;
                }
                assert!(
                    t0.elapsed().as_secs() < 30,
                    "{what}: round {round}: partitions never arrived"
                );
                // Our own send progresses in our calls: keep it moving.
                let _ = sr.test()?;
            }
            let st = rr.wait()?;
            sr.wait()?;
            assert_eq!(
                (st.source(), st.tag(), st.bytes()),
                (left, TAG, 8 * n),
                "{what}: status of round {round}"
            );
            assert!(!rr.is_active() && !sr.is_active());
            assert!(rr.parrived(0)?, "an inactive request has arrived");
            let want: Vec<u64> = (0..n).map(|k| val(round, left, k)).collect();
            check_eq(
                &format!("{what}, round {round}"),
                rr.buffer_mut::<u64>()?,
                &want,
            );
        }
        Ok(())
    })
}

/// Partition counts alike and different, small (eager) and large (rendezvous) partitions;
/// small partitions sent together (the default transfer unit), alone (unit 0), and in units
/// whose last one is short (5 partitions of 1 KiB in units of 2).
fn partitioned_ring(u: &Universe) -> Result<()> {
    let e = u.eager_limit_bytes() / 8;
    for (i, (sp, rp, n, unit)) in [
        (8, 8, 64, ""),
        (8, 8, 64, "0"),
        (8, 4, 64, "0"),
        (4, 8, 64, ""),
        (3, 1, 3 * 5, "0"),
        (1, 3, 3 * 5, ""),
        (5, 4, 5 * 128, "2048"),
        (5, 2, 5 * 128, "2048"),
        (6, 4, 12 * (e + 3), ""),
        (2, 2, 2 * (128 << 10), ""),
        (1, 1, 0, ""),
    ]
    .into_iter()
    .enumerate()
    {
        ring_rounds(u, sp, rp, n, i % 3, unit)?;
    }
    Ok(())
}

/// Early-bird transfer: a partition marked ready arrives while the sender still holds the
/// others (the receiver sees it, then tells the sender to go on), both for small partitions
/// sent alone (transfer unit 0) and for partitions above the default unit.
fn partitioned_early_bird(u: &Universe) -> Result<()> {
    let w = u.world();
    if w.rank() > 1 {
        return Ok(());
    }
    let peer = 1 - w.rank();
    for (n, unit) in [(16usize, "0"), (4 * 1024, "")] {
        let mut info = Info::new();
        if !unit.is_empty() {
            info.set(PARTITION_UNIT_KEY, unit)?;
        }
        let data: Vec<u64> = (0..4 * n as u64).collect();
        let mut got = vec![0u64; 4 * n];
        scope(|s| -> Result<()> {
            if w.rank() == 0 {
                let mut sr = w.psend_init(s, &data, 4, peer, TAG, &info)?;
                sr.start()?;
                sr.pready(2)?;
                w.recv(&mut [0u8; 0], peer, TAG + 9)?; // partition 2 has arrived
                sr.pready_list(&[0, 1, 3])?;
                sr.wait()?;
            } else {
                let mut rr = w.precv_init(s, &mut got, 4, peer, TAG, &info)?;
                rr.start()?;
                let t0 = std::time::Instant::now();
                while !rr.parrived(2)? {
                    assert!(
                        t0.elapsed().as_secs() < 30,
                        "partition 2 of {n} u64 never arrived alone"
                    );
                }
                assert!(
                    !rr.parrived(0)? && !rr.parrived(3)?,
                    "partitions not yet marked ready have arrived"
                );
                w.send(&[0u8; 0], peer, TAG + 9)?;
                rr.wait()?;
            }
            Ok(())
        })?;
        if w.rank() == 1 {
            check_eq(&format!("early bird, {n} u64 per partition"), &got, &data);
        }
    }
    Ok(())
}

/// Two sends to the same rank and tag match the receives in the order of the init calls,
/// though they start (and are readied) in the other order; a third on another tag between
/// them changes nothing.
fn partitioned_init_order(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let info = Info::new();
    let a = [val(1, me, 0); 16];
    let b = [val(2, me, 0); 16];
    let c = [val(3, me, 0); 4];
    let (mut ra, mut rb, mut rc) = ([0u64; 16], [0u64; 16], [0u64; 4]);
    scope(|s| -> Result<()> {
        let mut sa = w.psend_init(s, &a, 4, right, TAG, &info)?;
        let mut sc = w.psend_init(s, &c, 1, right, TAG + 1, &info)?;
        let mut sb = w.psend_init(s, &b, 2, right, TAG, &info)?;
        let mut qc = w.precv_init(s, &mut rc, 2, left, TAG + 1, &info)?;
        let mut qa = w.precv_init(s, &mut ra, 2, left, TAG, &info)?;
        let mut qb = w.precv_init(s, &mut rb, 8, left, TAG, &info)?;
        // Started and readied in reverse order of their inits.
        start_all(&mut [&mut qb, &mut qa, &mut qc])?;
        sb.start()?;
        sb.pready_list(&[1, 0])?;
        sc.start()?;
        sc.pready(0)?;
        sa.start()?;
        sa.pready_range(0, 3)?;
        wait_all(&mut [&mut sa, &mut sb, &mut sc, &mut qa, &mut qb, &mut qc])?;
        Ok(())
    })?;
    assert_eq!(
        (ra, rb, rc),
        (
            [val(1, left, 0); 16],
            [val(2, left, 0); 16],
            [val(3, left, 0); 4]
        )
    );
    Ok(())
}

/// A receive through a strided datatype (every other u32 of a buffer twice as long): the
/// partitions land in the right places, the gaps stay untouched.
fn partitioned_typed_recv(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank() as u32;
    let info = Info::new();
    let n = 48;
    let data: Vec<u32> = (0..n as u32).map(|k| me << 16 | k).collect();
    let mut got = vec![u32::MAX; 2 * n];
    let every_other = Datatype::vector(n, 1, 2, &Datatype::of::<u32>())?;
    every_other.commit()?;
    // The whole buffer is one element of the vector type: one receive partition of n u32;
    // the sender splits its n u32 in 6.
    let mut view = TypedMut::new(&mut got, 1, &every_other)?;
    scope(|s| -> Result<()> {
        let mut rr = w.precv_init(s, &mut view, 1, left, TAG, &info)?;
        let mut sr = w.psend_init(s, &data, 6, right, TAG, &info)?;
        rr.start()?;
        sr.start()?;
        sr.pready_range(0, 5)?;
        let st = rr.wait()?;
        sr.wait()?;
        assert_eq!(st.bytes(), 4 * n);
        Ok(())
    })?;
    drop(view);
    for (i, x) in got.iter().enumerate() {
        let want = if i % 2 == 0 {
            (left as u32) << 16 | (i / 2) as u32
        } else {
            u32::MAX
        };
        assert_eq!(*x, want, "element {i} of the strided receive");
    }
    Ok(())
}

/// MPI_PROC_NULL: both requests complete at once, readying and arrival work, the receive's
/// status names MPI_PROC_NULL.
fn partitioned_proc_null(u: &Universe) -> Result<()> {
    let w = u.world();
    let info = Info::new();
    let d = [1u8; 8];
    let mut g = [7u8; 8];
    scope(|s| -> Result<()> {
        let mut sr = w.psend_init(s, &d, 2, PROC_NULL, TAG, &info)?;
        let mut rr = w.precv_init(s, &mut g, 2, PROC_NULL, TAG, &info)?;
        for _ in 0..2 {
            start_all(&mut [&mut sr, &mut rr])?;
            sr.pready(1)?;
            sr.pready(0)?;
            assert!(rr.parrived(1)?);
            assert_eq!(rr.wait()?.source(), PROC_NULL);
            sr.wait()?;
        }
        Ok(())
    })?;
    assert_eq!(
        g, [7u8; 8],
        "nothing written by a receive from MPI_PROC_NULL"
    );
    Ok(())
}

fn expect_err<T: std::fmt::Debug>(what: &str, r: Result<T>, class: ErrorClass, names: &[&str]) {
    let e = match r {
        Ok(v) => panic!("{what}: expected {class}, got Ok({v:?})"),
        Err(e) => e,
    };
    assert_eq!(e.class(), class, "{what}: wrong class in {e}");
    for n in names {
        assert!(
            e.to_string().contains(n),
            "{what}: the message should name {n:?}: {e}"
        );
    }
}

/// Misuse returns the error class with a message naming the bad value, and leaves the
/// requests usable: wildcards, a buffer that does not split, partitions out of range or
/// readied twice, an inactive request, a receive readied, a send asked about arrival, a wait
/// that could never end, freeing or cancelling an active request; and truncation, which
/// delivers the bytes that fit.
fn partitioned_errors(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let (right, left) = ring(w);
    let me = w.rank();
    let info = Info::new();
    let d: Vec<u64> = (0..8).map(|k| val(0, me, k)).collect();
    let mut g = [0u64; 8];
    let mut short = [0u64; 6];
    let (mut bad1, mut bad2) = ([0u64; 8], [0u64; 8]);
    scope(|s| -> Result<()> {
        expect_err(
            "any source",
            w.precv_init(s, &mut bad1, 2, ANY_SOURCE, TAG, &info),
            ErrorClass::Rank,
            &["MPI_ANY_SOURCE"],
        );
        expect_err(
            "any tag",
            w.precv_init(s, &mut bad2, 2, left, ANY_TAG, &info),
            ErrorClass::Tag,
            &["MPI_ANY_TAG"],
        );
        expect_err(
            "bad rank",
            w.psend_init(s, &d, 2, w.size(), TAG, &info),
            ErrorClass::Rank,
            &[&w.size().to_string()],
        );
        expect_err(
            "uneven",
            w.psend_init(s, &d, 3, right, TAG, &info),
            ErrorClass::Count,
            &["3 equal partitions"],
        );
        expect_err(
            "zero partitions",
            w.psend_init(s, &d, 0, right, TAG, &info),
            ErrorClass::Arg,
            &["0 partitions"],
        );
        let mut bad_unit = Info::new();
        bad_unit.set(PARTITION_UNIT_KEY, "lots")?;
        expect_err(
            "bad unit",
            w.psend_init(s, &d, 2, right, TAG, &bad_unit),
            ErrorClass::Info,
            &["\"lots\""],
        );
        let mut sr = w.psend_init(s, &d, 4, right, TAG, &info)?;
        expect_err(
            "pready inactive",
            sr.pready(0),
            ErrorClass::Request,
            &["inactive"],
        );
        expect_err(
            "parrived on a send",
            sr.parrived(0),
            ErrorClass::Request,
            &["not a partitioned receive"],
        );
        sr.start()?;
        expect_err("start active", sr.start(), ErrorClass::Request, &["active"]);
        expect_err(
            "pready out of range",
            sr.pready(4),
            ErrorClass::Arg,
            &["partition 4", "4 partitions"],
        );
        sr.pready(1)?;
        expect_err(
            "pready twice",
            sr.pready(1),
            ErrorClass::Arg,
            &["partition 1", "already"],
        );
        expect_err(
            "range twice",
            sr.pready_range(0, 2),
            ErrorClass::Arg,
            &["partition 1"],
        );
        expect_err(
            "list repeats",
            sr.pready_list(&[0, 0]),
            ErrorClass::Arg,
            &["partition 0"],
        );
        expect_err(
            "range backwards",
            sr.pready_range(3, 2),
            ErrorClass::Arg,
            &["3 to 2"],
        );
        expect_err(
            "wait unready",
            sr.wait(),
            ErrorClass::Request,
            &["partition 0"],
        );
        assert!(
            sr.test()?.is_none(),
            "a test of an unready send says not yet"
        );
        expect_err(
            "cancel active",
            sr.cancel(),
            ErrorClass::Request,
            &["erroneous"],
        );
        // Nothing of the failed calls was marked: the rest can still be readied.
        sr.pready_list(&[3, 0, 2])?;
        // The receive: partitions out of range, readied by mistake.
        let mut rr = w.precv_init(s, &mut g, 2, left, TAG, &info)?;
        assert!(rr.parrived(1)?, "an inactive receive has arrived");
        rr.start()?;
        expect_err(
            "pready on a receive",
            rr.pready(0),
            ErrorClass::Request,
            &["not a partitioned send"],
        );
        expect_err(
            "parrived out of range",
            rr.parrived(2),
            ErrorClass::Arg,
            &["partition 2", "2 partitions"],
        );
        sr.wait()?;
        rr.wait()?;
        // Truncation: 8 u64 sent into 6; the 6 that fit arrive. (A new pair: a partitioned
        // send matches one receive, once, at init.)
        let mut sr = w.psend_init(s, &d, 4, right, TAG, &info)?;
        let mut tr = w.precv_init(s, &mut short, 3, left, TAG, &info)?;
        tr.start()?;
        sr.start()?;
        sr.pready_range(0, 3)?;
        let e = tr.wait().expect_err("a truncated partitioned receive");
        assert_eq!(e.class(), ErrorClass::Truncate, "{e}");
        assert_eq!(e.status().map(|st| st.bytes()), Some(48), "{e}");
        sr.wait()?;
        Ok(())
    })?;
    let want: Vec<u64> = (0..8).map(|k| val(0, left, k)).collect();
    assert_eq!(&g[..], &want[..]);
    assert_eq!(&short[..], &want[..6]);
    w.set_errhandler(ErrHandler::Fatal);
    Ok(())
}

/// Dropping requests settles them without waiting for what can never come: an active send
/// with a partition not marked ready (nothing sent: its one transfer unit is incomplete), an
/// active receive (its posted receive withdrawn), a pair never started; nothing lands in the
/// receive buffers. Then a new pair (on another tag: a dropped receive may leave its hello
/// unmatched) runs a round, and freeing its inactive requests is fine.
fn partitioned_drop(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let info = Info::new();
    let d = [val(5, me, 1); 4];
    let (mut g, mut idle, mut h) = ([0u64; 4], [0u64; 4], [0u64; 4]);
    scope(|s| -> Result<()> {
        let mut sr = w.psend_init(s, &d, 2, right, TAG, &info)?;
        let mut rr = w.precv_init(s, &mut g, 2, left, TAG, &info)?;
        let never_s = w.psend_init(s, &d, 2, right, TAG + 2, &info)?;
        let never_r = w.precv_init(s, &mut idle, 2, left, TAG + 2, &info)?;
        rr.start()?;
        sr.start()?;
        sr.pready(0)?;
        assert!(rr.is_active() && sr.is_active() && !never_r.is_active());
        drop((rr, sr, never_r, never_s));
        Ok(())
    })?;
    assert_eq!((g, idle), ([0u64; 4], [0u64; 4]), "nothing was sent");
    scope(|s| -> Result<()> {
        let mut sr = w.psend_init(s, &d, 2, right, TAG + 1, &info)?;
        let mut rr = w.precv_init(s, &mut h, 2, left, TAG + 1, &info)?;
        sr.start()?;
        sr.pready_range(0, 1)?;
        rr.start()?;
        rr.wait()?;
        sr.wait()?;
        sr.free()?;
        rr.free()?;
        Ok(())
    })?;
    assert_eq!(h, [val(5, left, 1); 4]);
    Ok(())
}

scenarios! {
    partitioned_ring;
    partitioned_init_order;
    partitioned_early_bird [2, 3];
    partitioned_typed_recv;
    partitioned_proc_null [1, 2];
    partitioned_errors [2, 3];
    partitioned_drop [2];
}
