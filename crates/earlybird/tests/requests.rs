//! The request family (MPI 4.1 §3.7.3-3.7.5, §3.9) on mixed arrays of nonblocking and
//! persistent requests: wait_all, wait_any, wait_some, test_all, test_any, test_some,
//! request free and get_status; and a flood of 10,000 eager messages to a rank that is not
//! receiving yet (flow control must make the sender wait, not lose or reorder anything).

mod common;
use common::*;
use earlybird::launch::BlockedIn;
use earlybird::{
    scope, start_all, test_all, test_any, test_some, wait_all, wait_any, wait_some, Begun, Request,
    Result, Status, Tested, Universe, ANY_SOURCE, ANY_TAG, PROC_NULL,
};
use std::time::Duration;

const GO: i32 = 70;

/// Pairs (0,1), (2,3), ...: (partner, is_even).
fn pair(u: &Universe) -> Option<(i32, bool)> {
    let w = u.world();
    let p = w.rank() ^ 1;
    (p < w.size()).then_some((p, w.rank() % 2 == 0))
}

fn is_empty_status(st: &Status) -> bool {
    st.source() == ANY_SOURCE && st.tag() == ANY_TAG && st.bytes() == 0
}

/// wait_all on a mixed array: nonblocking receive and send, started persistent receive and
/// send, a never-started persistent receive (inactive: empty status), a PROC_NULL receive.
/// Nonblocking requests end consumed, persistent ones inactive and startable again.
fn mixed_wait_all(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let e = u.eager_limit_bytes();
    let a = pattern(me as u64, 100);
    let b = pattern(me as u64 + 100, e + 1);
    let (mut ga, mut gb, mut gc, mut gn) = (vec![0u8; 100], vec![0u8; e + 1], [0u8; 4], [3u8; 2]);
    scope(|s| -> Result<()> {
        let mut reqs: Vec<Request> = vec![
            w.irecv(s, &mut ga, left, 1)?,
            w.recv_init(s, &mut gb, left, 2)?,
            w.isend(s, &a, right, 1)?,
            w.send_init(s, &b, right, 2)?,
            w.recv_init(s, &mut gc, left, 3)?, // never started
            w.irecv(s, &mut gn, PROC_NULL, 0)?,
        ];
        reqs[1].start()?;
        reqs[3].start()?;
        let sts = wait_all(&mut reqs)?;
        assert_eq!(
            (sts[0].source(), sts[0].tag(), sts[0].bytes()),
            (left, 1, 100)
        );
        assert_eq!(
            (sts[1].source(), sts[1].tag(), sts[1].bytes()),
            (left, 2, e + 1)
        );
        assert!(
            is_empty_status(&sts[4]),
            "an inactive request gives the empty status: {:?}",
            sts[4]
        );
        assert_eq!(sts[5].source(), PROC_NULL);
        assert!(reqs[0].is_null() && reqs[2].is_null() && reqs[5].is_null());
        assert!(!reqs[1].is_active() && !reqs[3].is_active() && !reqs[1].is_null());
        // The persistent ones go round again.
        reqs[1].start()?;
        reqs[3].start()?;
        let (i, st) = wait_any(&mut reqs[1..4])?.expect("an active request");
        assert!(i == 0 || i == 2, "wait_any returned index {i}");
        if i == 0 {
            assert_eq!(st.bytes(), e + 1);
        }
        wait_all(&mut reqs[1..4])?;
        Ok(())
    })?;
    check_eq("irecv in wait_all", &ga, &pattern(left as u64, 100));
    check_eq(
        "recv_init in wait_all",
        &gb,
        &pattern(left as u64 + 100, e + 1),
    );
    assert_eq!(gn, [3u8; 2]);
    Ok(())
}

/// The MPI idiom "wait_any, then wait_all for the rest": entries completed by wait_any are
/// null (consumed) and wait_all / test_all treat them as such (empty status), not as errors.
fn wait_any_then_wait_all(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let mut g = [[0u32; 4]; 3];
    let d = [[w.rank() as u32; 4]; 3];
    scope(|s| -> Result<()> {
        let [g0, g1, g2] = &mut g;
        let mut reqs = vec![
            w.irecv(s, g0, left, 0)?,
            w.irecv(s, g1, left, 1)?,
            w.irecv(s, g2, left, 2)?,
        ];
        w.send(&d[1], right, 1)?;
        let (i, st) = wait_any(&mut reqs)?.expect("one completes");
        assert_eq!((i, st.tag()), (1, 1));
        assert!(reqs[1].is_null());
        assert!(
            test_all(&mut reqs)?.is_none(),
            "two receives are still pending"
        );
        // Only now may the left neighbour send the other two.
        w.send(&[0u8; 0], left, GO)?;
        w.recv(&mut [0u8; 0], right, GO)?;
        w.send(&d[0], right, 0)?;
        w.send(&d[2], right, 2)?;
        let sts = wait_all(&mut reqs)?;
        assert_eq!((sts[0].tag(), sts[2].tag()), (0, 2));
        assert!(
            is_empty_status(&sts[1]),
            "a consumed entry gives the empty status"
        );
        assert_eq!(
            test_all(&mut reqs)?.map(|v| v.len()),
            Some(3),
            "all null: test_all is true"
        );
        assert!(
            wait_any(&mut reqs)?.is_none(),
            "no active request: MPI_UNDEFINED"
        );
        assert!(wait_some(&mut reqs)?.is_empty());
        assert_eq!(
            test_any(&mut reqs)?,
            Tested::NoneActive,
            "no active request: test_any says MPI_UNDEFINED"
        );
        assert_eq!(
            test_some(&mut reqs)?,
            Tested::NoneActive,
            "no active request: test_some says MPI_UNDEFINED"
        );
        Ok(())
    })?;
    assert_eq!(g, [[left as u32; 4]; 3]);
    Ok(())
}

const K: usize = 6;

/// Senders send K messages (tags 0..K) in reverse tag order, mixing sizes, after a GO.
fn send_k_reversed(u: &Universe, peer: i32) -> Result<()> {
    let w = u.world();
    let e = u.eager_limit_bytes();
    w.recv(&mut [0u8; 0], peer, GO)?;
    for t in (0..K).rev() {
        let len = if t % 2 == 0 { 16 } else { e + 1 };
        w.send(&pattern(t as u64, len), peer, t as i32)?;
    }
    Ok(())
}

/// Receivers post K receives in one array: half nonblocking, half persistent (started).
fn post_k<'s>(
    w: &'s earlybird::Comm,
    s: &'s earlybird::Scope<'s, '_>,
    bufs: &'s mut [Vec<u8>],
    peer: i32,
) -> Result<Vec<Request<'s>>> {
    let mut reqs = Vec::new();
    for (t, b) in bufs.iter_mut().enumerate() {
        if t % 3 == 1 {
            let mut r = w.recv_init(s, b, peer, t as i32)?;
            r.start()?;
            reqs.push(r);
        } else {
            reqs.push(w.irecv(s, b, peer, t as i32)?);
        }
    }
    Ok(reqs)
}

fn k_bufs(u: &Universe) -> Vec<Vec<u8>> {
    vec![vec![0u8; u.eager_limit_bytes() + 1]; K]
}

fn check_k(u: &Universe, bufs: &[Vec<u8>]) {
    let e = u.eager_limit_bytes();
    for (t, b) in bufs.iter().enumerate() {
        let len = if t % 2 == 0 { 16 } else { e + 1 };
        check_eq(&format!("tag {t}"), &b[..len], &pattern(t as u64, len));
    }
}

fn check_k_status(u: &Universe, i: usize, st: &Status, peer: i32) {
    let e = u.eager_limit_bytes();
    let len = if i % 2 == 1 { e + 1 } else { 16 };
    assert_eq!(
        (st.source(), st.tag(), st.bytes()),
        (peer, i as i32, len),
        "status of request {i}"
    );
}

/// wait_any until MPI_UNDEFINED: every request is returned exactly once, in whatever order.
fn wait_any_loop(u: &Universe) -> Result<()> {
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    if sender {
        return send_k_reversed(u, peer);
    }
    let w = u.world();
    let mut bufs = k_bufs(u);
    scope(|s| -> Result<()> {
        let mut reqs = post_k(w, s, &mut bufs, peer)?;
        w.send(&[0u8; 0], peer, GO)?;
        let mut seen = [false; K];
        while let Some((i, st)) = wait_any(&mut reqs)? {
            assert!(!seen[i], "wait_any returned request {i} twice");
            seen[i] = true;
            check_k_status(u, i, &st, peer);
        }
        assert!(seen.iter().all(|&x| x));
        Ok(())
    })?;
    check_k(u, &bufs);
    Ok(())
}

/// wait_some until empty: every request is returned exactly once.
fn wait_some_loop(u: &Universe) -> Result<()> {
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    if sender {
        return send_k_reversed(u, peer);
    }
    let w = u.world();
    let mut bufs = k_bufs(u);
    scope(|s| -> Result<()> {
        let mut reqs = post_k(w, s, &mut bufs, peer)?;
        assert_eq!(
            test_some(&mut reqs)?,
            Tested::Pending,
            "nothing can have completed before GO"
        );
        w.send(&[0u8; 0], peer, GO)?;
        let mut seen = [false; K];
        loop {
            let done = wait_some(&mut reqs)?;
            if done.is_empty() {
                break;
            }
            for (i, st) in done {
                assert!(!seen[i], "wait_some returned request {i} twice");
                seen[i] = true;
                check_k_status(u, i, &st, peer);
            }
        }
        assert!(seen.iter().all(|&x| x));
        Ok(())
    })?;
    check_k(u, &bufs);
    Ok(())
}

/// test_all is false (and collects nothing) while any request is pending, then true with
/// every status.
fn test_all_loop(u: &Universe) -> Result<()> {
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    if sender {
        return send_k_reversed(u, peer);
    }
    let w = u.world();
    let mut bufs = k_bufs(u);
    scope(|s| -> Result<()> {
        let mut reqs = post_k(w, s, &mut bufs, peer)?;
        assert!(test_all(&mut reqs)?.is_none());
        assert!(
            reqs.iter().all(|r| r.is_active()),
            "a false test_all must not complete anything"
        );
        w.send(&[0u8; 0], peer, GO)?;
        let sts = loop {
            if let Some(sts) = test_all(&mut reqs)? {
                break sts;
            }
            std::thread::yield_now();
        };
        for (i, st) in sts.iter().enumerate() {
            check_k_status(u, i, st, peer);
        }
        assert!(reqs.iter().all(|r| !r.is_active()));
        Ok(())
    })?;
    check_k(u, &bufs);
    Ok(())
}

/// test_any and test_some polled until every request has been returned once.
fn test_any_and_some_loop(u: &Universe) -> Result<()> {
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    if sender {
        send_k_reversed(u, peer)?;
        return send_k_reversed(u, peer);
    }
    let w = u.world();
    for round in 0..2 {
        let mut bufs = k_bufs(u);
        scope(|s| -> Result<()> {
            let mut reqs = post_k(w, s, &mut bufs, peer)?;
            assert_eq!(test_any(&mut reqs)?, Tested::Pending);
            w.send(&[0u8; 0], peer, GO)?;
            let mut seen = [false; K];
            let mut n = 0;
            while n < K {
                let done: Vec<(usize, Status)> = if round == 0 {
                    test_any(&mut reqs)?.completed().into_iter().collect()
                } else {
                    test_some(&mut reqs)?.completed().unwrap_or_default()
                };
                for (i, st) in done {
                    assert!(!seen[i], "request {i} returned twice");
                    seen[i] = true;
                    n += 1;
                    check_k_status(u, i, &st, peer);
                }
                std::thread::yield_now();
            }
            assert_eq!(test_any(&mut reqs)?, Tested::NoneActive);
            assert_eq!(test_some(&mut reqs)?, Tested::NoneActive);
            Ok(())
        })?;
        check_k(u, &bufs);
    }
    Ok(())
}

/// get_status says whether a request is complete without completing it; once it is, it
/// reports the operation's real status, and wait still returns that status afterwards.
/// Inactive persistent requests report the empty status.
fn get_status(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let e = u.eager_limit_bytes();
    if sender {
        w.recv(&mut [0u8; 0], peer, GO)?;
        w.send(&pattern(1, 40), peer, 3)?;
        w.send(&pattern(2, e + 1), peer, 4)?;
        return Ok(());
    }
    let mut a = vec![0u8; 40];
    let mut b = vec![0u8; e + 1];
    scope(|s| -> Result<()> {
        let mut ra = w.irecv(s, &mut a, peer, 3)?;
        let mut rb = w.recv_init(s, &mut b, peer, 4)?;
        assert!(is_empty_status(
            &rb.get_status()?.expect("inactive is complete")
        ));
        rb.start()?;
        assert!(ra.get_status()?.is_none());
        assert!(rb.get_status()?.is_none());
        w.send(&[0u8; 0], peer, GO)?;
        for (r, tag, len) in [(&mut ra, 3, 40usize), (&mut rb, 4, e + 1)] {
            let st = loop {
                if let Some(st) = r.get_status()? {
                    break st;
                }
                std::thread::yield_now();
            };
            assert_eq!(
                (st.source(), st.tag(), st.bytes()),
                (peer, tag, len),
                "get_status reports the real status"
            );
            assert!(r.is_active(), "get_status must not complete the request");
            let again = r.get_status()?.expect("still complete");
            assert_eq!(again, st);
            let wst = r.wait()?;
            assert_eq!((wst.source(), wst.tag(), wst.bytes()), (peer, tag, len));
        }
        Ok(())
    })?;
    check_eq("get_status a", &a, &pattern(1, 40));
    check_eq("get_status b", &b, &pattern(2, e + 1));
    Ok(())
}

/// request_free of a started persistent request (MPI 4.1 §3.9): the send goes on and is
/// delivered, the receive goes on and fills its buffer, eager and rendezvous alike. The
/// sender frees its started sends before the receiver has posted anything (GO orders that);
/// the receiver frees its started receives before anything is sent to them, and learns that
/// they were filled from a later message on the same tag (non-overtaking).
fn free_active_persistent(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let e = u.eager_limit_bytes();
    let sizes = [8, e + 1, 1 << 20];
    let data: Vec<Vec<u8>> = sizes.iter().map(|&n| pattern(n as u64, n)).collect();
    if sender {
        scope(|s| -> Result<()> {
            for (k, d) in data.iter().enumerate() {
                let mut p = w.send_init(s, d, peer, 10 + k as i32)?;
                p.start()?;
                p.free()?;
            }
            w.send(&[0u8; 0], peer, GO)?;
            // The peer has started and freed its receives: fill them, then say so on the
            // same tags.
            w.recv(&mut [0u8; 0], peer, GO)?;
            for (k, d) in data.iter().enumerate() {
                w.send(d, peer, 20 + k as i32)?;
                w.send(&[0u8; 0], peer, 20 + k as i32)?;
            }
            Ok(())
        })?;
    } else {
        w.recv(&mut [0u8; 0], peer, GO)?;
        for (k, d) in data.iter().enumerate() {
            let mut got = vec![0u8; d.len()];
            w.recv(&mut got, peer, 10 + k as i32)?;
            check_eq("freed started persistent send", &got, d);
        }
        let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0u8; n]).collect();
        scope(|s| -> Result<()> {
            for (k, b) in bufs.iter_mut().enumerate() {
                let mut r = w.recv_init(s, b, peer, 20 + k as i32)?;
                r.start()?;
                r.free()?;
            }
            w.send(&[0u8; 0], peer, GO)?;
            for k in 0..sizes.len() {
                w.recv(&mut [0u8; 0], peer, 20 + k as i32)?;
            }
            Ok(())
        })?;
        for (b, d) in bufs.iter().zip(&data) {
            check_eq("freed started persistent receive", b, d);
        }
        assert!(w.iprobe(ANY_SOURCE, ANY_TAG)?.is_none());
    }
    Ok(())
}

/// request_free: an inactive persistent request and a completed one are freed at once; an
/// active nonblocking send is freed without waiting for its receive (MPI_Request_free is
/// local) and still delivers; an active nonblocking receive, freed, still receives (the
/// program learns of it from the sender).
fn request_free(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let e = u.eager_limit_bytes();
    let big = pattern(9, 1 << 20);
    let small = pattern(10, 8);
    let last = pattern(11, e + 1);
    if sender {
        scope(|s| -> Result<()> {
            let p = w.send_init(s, &small, peer, 1)?;
            p.free()?;
            let mut p = w.send_init(s, &small, peer, 1)?;
            p.start()?;
            p.wait()?;
            p.free()?;
            let mut r = w.isend(s, &small, peer, 2)?;
            r.wait()?;
            r.free()?;
            // A rendezvous send freed while unmatched: the receiver posts only after GO.
            let r = w.isend(s, &big, peer, 3)?;
            r.free()?;
            w.send(&[0u8; 0], peer, GO)?;
            // The peer has posted and freed a receive for this one.
            w.recv(&mut [0u8; 0], peer, GO)?;
            w.send(&last, peer, 4)?; // rendezvous: returns once the freed receive took it
            w.send(&[0u8; 0], peer, GO + 1)?;
            Ok(())
        })?;
    } else {
        let mut got = vec![0u8; 8];
        w.recv(&mut got, peer, 1)?;
        check_eq("persistent before free", &got, &small);
        w.recv(&mut got, peer, 2)?;
        w.recv(&mut [0u8; 0], peer, GO)?;
        let mut gbig = vec![0u8; big.len()];
        w.recv(&mut gbig, peer, 3)?;
        check_eq("freed send", &gbig, &big);
        let mut g4 = vec![0u8; e + 1];
        scope(|s| -> Result<()> {
            let r = w.irecv(s, &mut g4, peer, 4)?;
            r.free()?;
            w.send(&[0u8; 0], peer, GO)?;
            w.recv(&mut [0u8; 0], peer, GO + 1)?;
            Ok(())
        })?;
        check_eq("freed receive", &g4, &last);
        assert!(w.iprobe(ANY_SOURCE, ANY_TAG)?.is_none());
    }
    Ok(())
}

/// wait and test on inactive persistent requests return the empty status at once; a
/// persistent request can be started, tested to completion and started again.
fn inactive_and_test(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let mut g = [0i16; 5];
    let d = [w.rank() as i16; 5];
    scope(|s| -> Result<()> {
        let mut r = w.recv_init(s, &mut g, left, 6)?;
        let mut sreq = w.send_init(s, &d, right, 6)?;
        assert!(is_empty_status(&r.wait()?));
        assert!(is_empty_status(
            &r.test()?.expect("inactive tests complete")
        ));
        for _ in 0..20 {
            let mut both = [r, sreq];
            start_all(&mut both)?;
            let [r2, s2] = both;
            r = r2;
            sreq = s2;
            let st = loop {
                if let Some(st) = r.test()? {
                    break st;
                }
            };
            assert_eq!((st.source(), st.count::<i16>()), (left, Some(5)));
            while sreq.test()?.is_none() {}
        }
        Ok(())
    })?;
    assert_eq!(g, [left as i16; 5]);
    Ok(())
}

const FLOOD: usize = 10_000;
const FLOOD_LEN: usize = 256;

/// Rank 2k floods rank 2k+1 with 10,000 messages of 256 B (2.5 MB, past the per-pair flow
/// limit) before the receiver posts any receive: the receiver starts receiving only once the
/// sender has published that it is blocked in a send to it (it waits rather than fails), and
/// then gets every message, in order, intact.
fn flood(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    if sender {
        let mut m = [0u8; FLOOD_LEN];
        for i in 0..FLOOD {
            m[..8].copy_from_slice(&(i as u64).to_le_bytes());
            m[8..].fill(i as u8);
            w.send(&m, peer, 5)?;
        }
    } else {
        await_sender_blocked(u, peer, 5);
        let mut m = [0u8; FLOOD_LEN];
        for i in 0..FLOOD {
            let st = w.recv(&mut m, peer, ANY_TAG)?;
            assert_eq!(st.bytes(), FLOOD_LEN);
            let seq = u64::from_le_bytes(m[..8].try_into().unwrap());
            assert_eq!(seq, i as u64, "message {i} out of order");
            assert!(
                m[8..].iter().all(|&x| x == i as u8),
                "message {i} corrupted"
            );
        }
        assert!(w.iprobe(ANY_SOURCE, ANY_TAG)?.is_none());
    }
    Ok(())
}

/// Requests leaked with `mem::forget` are still settled by their scope: a receive nobody
/// matches is cancelled (it must not steal a later message), and a rendezvous send is waited
/// for until its receiver has pulled the data, so the buffer can be reused after the scope.
fn forgotten_requests_are_settled_by_scope(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, even)) = pair(u) else {
        return Ok(());
    };
    let big = u.eager_limit_bytes() * 4 + 3;
    if even {
        let mut data = pattern(7, big);
        let mut never = [0u8; 8];
        scope(|s| -> Result<()> {
            std::mem::forget(w.irecv(s, &mut never, peer, 999)?);
            std::mem::forget(w.isend(s, &data, peer, 5)?);
            Ok(())
        })?;
        // The send completed (the peer has the data) and the receive was withdrawn.
        data.iter_mut().for_each(|b| *b = 0);
        w.send(&[1u8; 8], peer, 999)?;
        let mut ack = [0u8; 1];
        w.recv(&mut ack, peer, 6)?;
        assert_eq!(never, [0u8; 8], "a cancelled receive must not be written");
    } else {
        // Receive only once the peer's scope is waiting for its forgotten send.
        u.job_segment()
            .await_blocked(peer as u32, Duration::from_secs(20), |p| {
                p.what == BlockedIn::Wait
            })
            .unwrap_or_else(|e| panic!("the scope never waited for its forgotten send: {e}"));
        let mut got = vec![0u8; big];
        w.recv(&mut got, peer, 5)?;
        check_eq(
            "rendezvous data of a forgotten send",
            &got,
            &pattern(7, big),
        );
        let mut tail = [0u8; 8];
        let st = w.recv(&mut tail, peer, 999)?;
        assert_eq!((st.bytes(), tail), (8, [1u8; 8]));
        w.send(&[1u8], peer, 6)?;
    }
    Ok(())
}

/// MPI_ERR_IN_STATUS keeps every request's status: a truncated receive reports its class
/// and the bytes it kept, the good one beside it its full status.
fn wait_all_into_fills_statuses_on_error(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(earlybird::ErrHandler::Return);
    let Some((peer, even)) = pair(u) else {
        return Ok(());
    };
    if even {
        w.send(&[7u8; 16], peer, 1)?;
        w.send(&[8u8; 4], peer, 2)?;
    } else {
        let (mut small, mut ok) = ([0u8; 4], [0u8; 4]);
        let mut st = [Status::empty(); 2];
        let r = scope(|s| -> Result<()> {
            let mut reqs = vec![
                w.irecv(s, &mut small, peer, 1)?,
                w.irecv(s, &mut ok, peer, 2)?,
            ];
            earlybird::wait_all_into(&mut reqs, &mut st)
        });
        let e = r.expect_err("one receive truncated");
        assert_eq!(e.class(), earlybird::ErrorClass::InStatus, "{e}");
        assert_eq!(
            (st[0].error(), st[0].bytes()),
            (earlybird::ErrorClass::Truncate, 4)
        );
        assert_eq!(
            (st[1].error(), st[1].bytes(), st[1].tag()),
            (earlybird::ErrorClass::Success, 4, 2)
        );
        assert_eq!((small, ok), ([7u8; 4], [8u8; 4]));
    }
    Ok(())
}

/// MPI_Waitsome and MPI_Testsome on MPI_ERR_IN_STATUS still say which requests completed:
/// the truncated receive with its class, the good one beside it with its status, and the
/// one still pending not at all.
fn some_into_keeps_completed_on_error(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(earlybird::ErrHandler::Return);
    let Some((peer, even)) = pair(u) else {
        return Ok(());
    };
    for into_test in [false, true] {
        if even {
            w.send(&[8u8; 4], peer, 2)?;
            w.send(&[7u8; 16], peer, 1)?;
            w.send(&[0u8; 1], peer, 5)?;
            w.recv(&mut [0u8; 1], peer, 4)?;
            w.send(&[9u8; 4], peer, 3)?;
            continue;
        }
        let (mut small, mut ok, mut later) = ([0u8; 4], [0u8; 4], [0u8; 4]);
        let mut done = vec![];
        scope(|s| -> Result<()> {
            let mut reqs = vec![
                w.irecv(s, &mut small, peer, 1)?,
                w.irecv(s, &mut ok, peer, 2)?,
                w.irecv(s, &mut later, peer, 3)?,
            ];
            // Messages from one sender arrive in order: once the marker is in, so are the
            // two before it.
            w.recv(&mut [0u8; 1], peer, 5)?;
            let r = if into_test {
                earlybird::test_some_into(&mut reqs, &mut done).map(|_| ())
            } else {
                earlybird::wait_some_into(&mut reqs, &mut done)
            };
            let e = r.expect_err("one receive truncated");
            assert_eq!(e.class(), earlybird::ErrorClass::InStatus, "{e}");
            w.send(&[1u8], peer, 4)?;
            reqs[2].wait()?;
            Ok(())
        })?;
        let got: Vec<(usize, earlybird::ErrorClass, usize)> = done
            .iter()
            .map(|(i, st)| (*i, st.error(), st.bytes()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, earlybird::ErrorClass::Truncate, 4),
                (1, earlybird::ErrorClass::Success, 4)
            ],
            "test {into_test}"
        );
        assert_eq!((small, ok, later), ([7u8; 4], [8u8; 4], [9u8; 4]));
    }
    Ok(())
}

/// `isend_begun` / `irecv_begun` (lightweight completion): a receive that matches a message
/// already there, or from PROC_NULL, is done at its start with the status a wait would give
/// (source in the communicator's ranks: here one whose ranks run backwards); a small send
/// into an empty queue is done at its start; a receive posted before its message, a send
/// above the eager limit and a receive that truncates keep their request, which completes
/// as any other.
fn begun(u: &Universe) -> Result<()> {
    let Some((peer, even)) = pair(u) else {
        return Ok(());
    };
    let w = u.world();
    w.set_errhandler(earlybird::ErrHandler::Return);
    let rev = w.split(0, -w.rank())?.expect("every rank has color 0");
    let n = w.size();
    let rpeer = n - 1 - peer;
    let e = u.eager_limit_bytes();
    let small = pattern(7, 24);
    let big = pattern(8, e + 1);
    let (mut g1, mut g3, mut g4, mut gn) = (vec![0u8; 24], vec![0u8; 24], [0u8; 4], [1u8; 2]);
    scope(|s| -> Result<()> {
        if even {
            // A small message into an empty queue goes out at once.
            if let Begun::Pending(_) = rev.isend_begun(s, &small, rpeer, 1)? {
                panic!("a 24-byte send into an empty queue was not done");
            }
            // Above the eager limit: a request, complete once the peer receives.
            match rev.isend_begun(s, &big, rpeer, 2)? {
                Begun::Pending(mut r) => r.wait()?,
                Begun::Done(_) => panic!("a send of {} bytes completed at its start", e + 1),
            };
            // The peer posts tag 3 first, then says so.
            w.recv(&mut [0u8; 0], peer, GO)?;
            w.send(&small, peer, 3)?;
            // A message to truncate.
            w.send(&small, peer, 4)?;
        } else {
            // Wait for tag 1 to arrive; the receive then matches it at its start.
            rev.probe(rpeer, 1)?;
            match rev.irecv_begun(s, &mut g1, rpeer, 1)? {
                Begun::Done(st) => {
                    assert_eq!((st.source(), st.tag(), st.bytes()), (rpeer, 1, 24));
                }
                Begun::Pending(_) => panic!("a receive of a message already there is pending"),
            }
            let mut gb = vec![0u8; e + 1];
            let st = rev.recv(&mut gb, rpeer, 2)?;
            assert_eq!(st.bytes(), e + 1);
            check_eq("isend_begun above the eager limit", &gb, &big);
            // Posted before its message: pending.
            let mut r = match w.irecv_begun(s, &mut g3, peer, 3)? {
                Begun::Pending(r) => r,
                Begun::Done(st) => panic!("a receive posted before its message is done: {st:?}"),
            };
            w.send(&[0u8; 0], peer, GO)?;
            let st = r.wait()?;
            assert_eq!((st.source(), st.tag(), st.bytes()), (peer, 3, 24));
            // Truncation keeps the request, whose wait reports it.
            w.probe(peer, 4)?;
            match w.irecv_begun(s, &mut g4, peer, 4)? {
                Begun::Pending(mut r) => {
                    let err = r.wait().expect_err("a 24-byte message into 4 bytes");
                    assert_eq!(err.class(), earlybird::ErrorClass::Truncate, "{err}");
                }
                Begun::Done(st) => panic!("a truncating receive is done: {st:?}"),
            }
        }
        // From PROC_NULL: done, with the PROC_NULL status, the buffer untouched.
        match w.irecv_begun(s, &mut gn, PROC_NULL, 0)? {
            Begun::Done(st) => assert_eq!((st.source(), st.bytes()), (PROC_NULL, 0)),
            Begun::Pending(_) => panic!("a receive from PROC_NULL is pending"),
        }
        Ok(())
    })?;
    if !even {
        check_eq("irecv_begun of an arrived message", &g1, &small);
        check_eq("irecv_begun posted first", &g3, &small);
        check_eq("a truncated receive's first bytes", &g4, &small[..4]);
    }
    assert_eq!(gn, [1, 1]);
    Ok(())
}

scenarios! {
    begun [2, 4];
    some_into_keeps_completed_on_error;
    wait_all_into_fills_statuses_on_error;
    forgotten_requests_are_settled_by_scope;
    mixed_wait_all;
    wait_any_then_wait_all [2, 3, 4, 8];
    wait_any_loop;
    wait_some_loop;
    test_all_loop;
    test_any_and_some_loop [2, 3, 4, 8];
    get_status [2, 3, 4, 8];
    request_free;
    free_active_persistent [2, 3, 4, 8];
    inactive_and_test [2, 3, 4, 8];
    flood;
}

/// A wait that fails before its operation completes (the job was aborted: here rank 1
/// panics) leaves the request active and owning its buffer: `buffer_mut` refuses to hand the
/// buffer out, and dropping the request withdraws the receive. Thread job only: a panicking
/// rank is how a thread job aborts.
#[test]
fn failed_wait_keeps_persistent_request_active() {
    let r = std::panic::catch_unwind(|| {
        earlybird::threads::Job::new(2)
            .timeout(Duration::from_secs(30))
            .run(|u| {
                let w = u.world();
                w.set_errhandler(earlybird::ErrHandler::Return);
                if w.rank() == 1 {
                    // Fail only once rank 0 is inside its wait.
                    u.job_segment()
                        .await_blocked(0, Duration::from_secs(20), |p| p.what != BlockedIn::Nothing)
                        .expect("rank 0 blocks in its wait");
                    panic!("rank 1 fails on purpose");
                }
                let mut buf = [0u64; 4];
                scope(|s| {
                    let mut r = w.recv_init(s, &mut buf, 1, 0).unwrap();
                    r.start().unwrap();
                    let e = r.wait().expect_err("the job was aborted");
                    assert_eq!(e.class(), earlybird::ErrorClass::ProcFailed, "{e}");
                    assert!(r.is_active(), "the receive never completed: still active");
                    let b = r.buffer_mut::<u64>().expect_err("buffer still lent");
                    assert_eq!(b.class(), earlybird::ErrorClass::Request);
                });
            })
    });
    let p = r.expect_err("rank 1's panic is re-raised by Job::run");
    // Only rank 1 panicked: rank 0's assertions held.
    let text = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned());
    assert_eq!(text.as_deref(), Some("rank 1: rank 1 fails on purpose"));
}
