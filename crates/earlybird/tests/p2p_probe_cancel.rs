//! Probe (MPI 4.1 §3.8.1-3.8.3): probe, iprobe, mprobe/improbe with Message::recv and
//! Message::irecv; cancel (§3.8.4) of pending receives (nonblocking and persistent), of
//! sends not yet matched (rendezvous and synchronous eager), and of sends already matched.

mod common;
use common::*;
use earlybird::{scope, ErrorClass, Result, Universe, ANY_SOURCE, ANY_TAG, PROC_NULL};

const GO: i32 = 90;

/// Pairs (0,1), (2,3), ...: (partner, is_even).
fn pair(u: &Universe) -> Option<(i32, bool)> {
    let w = u.world();
    let p = w.rank() ^ 1;
    (p < w.size()).then_some((p, w.rank() % 2 == 0))
}

/// probe and iprobe report source, tag and length of the next matching message without
/// receiving it; the receive sized from the probe then gets exactly it. iprobe of a message
/// nobody sends is None.
fn probe_then_recv(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let lens = sizes(u);
    if sender {
        w.recv(&mut [0u8; 0], peer, GO)?;
        for (k, &len) in lens.iter().enumerate() {
            w.send(&pattern(k as u64, len), peer, k as i32)?;
        }
    } else {
        assert!(
            w.iprobe(ANY_SOURCE, 12345)?.is_none(),
            "iprobe found a message nobody sent"
        );
        assert!(
            w.iprobe(peer, ANY_TAG)?.is_none(),
            "iprobe found a message before the sender started"
        );
        w.send(&[0u8; 0], peer, GO)?;
        for (k, &len) in lens.iter().enumerate() {
            let st = if k % 2 == 0 {
                w.probe(ANY_SOURCE, ANY_TAG)?
            } else {
                loop {
                    if let Some(st) = w.iprobe(peer, k as i32)? {
                        break st;
                    }
                    std::thread::yield_now();
                }
            };
            assert_eq!(
                (st.source(), st.tag(), st.bytes()),
                (peer, k as i32, len),
                "probe of message {k}"
            );
            // Probing again sees the same message.
            let again = w.probe(peer, k as i32)?;
            assert_eq!(again.bytes(), len);
            let mut buf = vec![0u8; st.count::<u8>().unwrap()];
            let r = w.recv(&mut buf, st.source(), st.tag())?;
            assert_eq!(r.bytes(), len);
            check_eq(
                &format!("probed message {k}"),
                &buf,
                &pattern(k as u64, len),
            );
        }
        assert!(w.iprobe(ANY_SOURCE, ANY_TAG)?.is_none());
    }
    Ok(())
}

/// A probe from PROC_NULL returns at once with the PROC_NULL status.
fn probe_proc_null(u: &Universe) -> Result<()> {
    let w = u.world();
    let st = w.probe(PROC_NULL, 3)?;
    assert_eq!((st.source(), st.tag(), st.bytes()), (PROC_NULL, ANY_TAG, 0));
    let st = w
        .iprobe(PROC_NULL, ANY_TAG)?
        .expect("iprobe of PROC_NULL is always true");
    assert_eq!(st.source(), PROC_NULL);
    let (m, st) = w.mprobe(PROC_NULL, 0)?;
    assert_eq!(st.source(), PROC_NULL);
    let mut b = [7u8; 4];
    let st = m.recv(&mut b)?;
    assert_eq!((st.source(), st.bytes(), b), (PROC_NULL, 0, [7u8; 4]));
    let (m, _) = w
        .improbe(PROC_NULL, ANY_TAG)?
        .expect("improbe of PROC_NULL is always true");
    scope(|s| -> Result<()> {
        let mut r = m.irecv(s, &mut b)?;
        assert_eq!(r.wait()?.source(), PROC_NULL);
        Ok(())
    })?;
    assert_eq!(b, [7u8; 4]);
    Ok(())
}

/// mprobe/improbe take the message out of matching: a later receive with the same pattern
/// gets the *next* message, and Message::recv / Message::irecv get the probed one. Eager and
/// rendezvous sizes.
fn mprobe_takes_message(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let e = u.eager_limit_bytes();
    let lens = [0usize, 8, e, e + 1, 1 << 20];
    if sender {
        for (k, &len) in lens.iter().enumerate() {
            // Two messages with one tag; nonblocking so rendezvous ones can be taken out of
            // order by the receiver.
            let a = pattern(2 * k as u64, len);
            let b = pattern(2 * k as u64 + 1, len);
            scope(|s| -> Result<()> {
                let mut reqs = vec![w.isend(s, &a, peer, 4)?, w.isend(s, &b, peer, 4)?];
                earlybird::wait_all(&mut reqs)?;
                Ok(())
            })?;
        }
    } else {
        for (k, &len) in lens.iter().enumerate() {
            let a = pattern(2 * k as u64, len);
            let b = pattern(2 * k as u64 + 1, len);
            let (m, st) = if k % 2 == 0 {
                w.mprobe(ANY_SOURCE, 4)?
            } else {
                loop {
                    if let Some(x) = w.improbe(peer, ANY_TAG)? {
                        break x;
                    }
                    std::thread::yield_now();
                }
            };
            assert_eq!((st.source(), st.tag(), st.bytes()), (peer, 4, len));
            // The probed message (a) is no longer matchable: this receive gets b.
            let mut gb = vec![0u8; len];
            let st_b = w.recv(&mut gb, peer, 4)?;
            assert_eq!(st_b.bytes(), len);
            check_eq(&format!("message after mprobe, {len} bytes"), &gb, &b);
            let mut ga = vec![0u8; len];
            let st_a = if k % 2 == 0 {
                m.recv(&mut ga)?
            } else {
                scope(|s| -> Result<_> {
                    let mut r = m.irecv(s, &mut ga)?;
                    r.wait()
                })?
            };
            assert_eq!((st_a.source(), st_a.tag(), st_a.bytes()), (peer, 4, len));
            check_eq(&format!("mprobed message, {len} bytes"), &ga, &a);
        }
        assert!(w.iprobe(ANY_SOURCE, ANY_TAG)?.is_none());
    }
    Ok(())
}

/// Probes with several senders: rank 0 probes with ANY_SOURCE, receives from the source
/// the probe named, and gets every rank's message once.
fn probe_many_senders(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    if me == 0 {
        let mut seen = vec![false; n as usize];
        for _ in 1..n {
            let (m, st) = w.mprobe(ANY_SOURCE, 6)?;
            let src = st.source();
            assert!(!seen[src as usize]);
            seen[src as usize] = true;
            let mut buf = vec![0i32; st.count::<i32>().unwrap()];
            m.recv(&mut buf)?;
            assert_eq!(buf, vec![src; src as usize * 100]);
        }
        for _ in 1..n {
            let st = w.probe(ANY_SOURCE, 7)?;
            let mut buf = vec![0i32; st.count::<i32>().unwrap()];
            let r = w.recv(&mut buf, st.source(), 7)?;
            assert_eq!(r.source(), st.source());
            assert_eq!(buf, vec![-st.source(); st.source() as usize]);
        }
    } else {
        w.send(&vec![me; me as usize * 100], 0, 6)?;
        w.send(&vec![-me; me as usize], 0, 7)?;
    }
    Ok(())
}

/// Cancel a receive nobody will match: the wait completes with is_cancelled, and the buffer
/// is untouched; the same for a started persistent receive, which can then be started again
/// and receive a real message.
fn cancel_pending_receive(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let mut buf = [1u64; 8];
    scope(|s| -> Result<()> {
        let mut r = w.irecv(s, &mut buf, left, 555)?;
        assert!(r.test()?.is_none());
        r.cancel()?;
        let st = r.wait()?;
        assert!(st.is_cancelled(), "a pending receive must be cancellable");
        Ok(())
    })?;
    assert_eq!(buf, [1u64; 8]);
    scope(|s| -> Result<()> {
        // A wildcard source (a wildcard tag would match the next section's message).
        let mut r = w.irecv(s, &mut buf, ANY_SOURCE, 557)?;
        r.cancel()?;
        let st = loop {
            if let Some(st) = r.test()? {
                break st;
            }
        };
        assert!(st.is_cancelled());
        Ok(())
    })?;
    scope(|s| -> Result<()> {
        let mut p = w.recv_init(s, &mut buf, left, 556)?;
        p.start()?;
        p.cancel()?;
        assert!(p.wait()?.is_cancelled());
        assert!(!p.is_active());
        // Started again, it receives a real message: the left neighbour sends it only once
        // told that the cancel is done (else the first start could have matched it).
        w.send(&[0u8; 0], left, 560)?;
        p.start()?;
        w.recv(&mut [0u8; 0], right, 560)?;
        w.send(&[w.rank() as u64; 8], right, 556)?;
        let st = p.wait()?;
        assert!(!st.is_cancelled());
        assert_eq!((st.source(), st.count::<u64>()), (left, Some(8)));
        Ok(())
    })?;
    assert_eq!(buf, [left as u64; 8]);
    Ok(())
}

/// Cancel a send the receiver never matches: a rendezvous-sized isend, an issend of an
/// eager-sized message (both wait for their match) and a persistent rendezvous send. After
/// cancel + wait the status says cancelled, and the receiver (told afterwards) finds nothing
/// to probe. A standard eager send may complete before the cancel: then it is not cancelled
/// and the receiver must get it; either way the two sides agree.
fn cancel_unmatched_send(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let e = u.eager_limit_bytes();
    let big = pattern(1, 4 << 20);
    let mid = pattern(2, e + 1);
    let small = pattern(3, 8);
    if sender {
        let mut outcome = [0u8; 4];
        scope(|s| -> Result<()> {
            let mut r1 = w.isend(s, &big, peer, 1)?;
            let mut r2 = w.issend(s, &small, peer, 2)?;
            let mut r3 = w.send_init(s, &mid, peer, 3)?;
            let mut r4 = w.isend(s, &small, peer, 4)?;
            r3.start()?;
            for r in [&mut r1, &mut r2, &mut r3, &mut r4] {
                r.cancel()?;
            }
            assert!(
                r1.wait()?.is_cancelled(),
                "unmatched rendezvous send must be cancellable"
            );
            assert!(
                r2.wait()?.is_cancelled(),
                "unmatched synchronous send must be cancellable"
            );
            assert!(
                r3.wait()?.is_cancelled(),
                "unmatched persistent send must be cancellable"
            );
            assert!(!r3.is_active());
            outcome[3] = r4.wait()?.is_cancelled() as u8;
            Ok(())
        })?;
        w.send(&outcome, peer, GO)?;
        // And a cancelled persistent send can be started again and delivered.
        scope(|s| -> Result<()> {
            let mut r = w.send_init(s, &mid, peer, 5)?;
            r.start()?;
            r.cancel()?;
            assert!(r.wait()?.is_cancelled());
            w.send(&[0u8; 0], peer, GO + 1)?;
            r.start()?;
            assert!(!r.wait()?.is_cancelled());
            Ok(())
        })?;
    } else {
        let mut outcome = [0u8; 4];
        w.recv(&mut outcome, peer, GO)?;
        for t in 1..=3 {
            assert!(
                w.iprobe(peer, t)?.is_none(),
                "the cancelled send (tag {t}) is still visible to the receiver"
            );
        }
        let eager_visible = w.iprobe(peer, 4)?.is_some();
        assert_eq!(
            eager_visible,
            outcome[3] == 0,
            "sender and receiver disagree on whether the send was cancelled"
        );
        if eager_visible {
            let mut b = [0u8; 8];
            w.recv(&mut b, peer, 4)?;
            check_eq("uncancelled eager send", &b, &small);
        }
        let mut got = vec![0u8; mid.len()];
        // Only once the sender's first start has been cancelled (else it could match).
        w.recv(&mut [0u8; 0], peer, GO + 1)?;
        let st = w.recv(&mut got, peer, 5)?;
        assert_eq!(st.bytes(), mid.len());
        check_eq("restarted persistent send", &got, &mid);
        assert!(w.iprobe(ANY_SOURCE, ANY_TAG)?.is_none());
    }
    Ok(())
}

/// Cancel a send that has already been matched (the receive was posted before it): the
/// cancel has no effect, the status is not cancelled and the receiver gets the data.
fn cancel_matched_send(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let e = u.eager_limit_bytes();
    for len in [8usize, e + 1, 1 << 20] {
        let data = pattern(len as u64, len);
        if sender {
            w.recv(&mut [0u8; 0], peer, GO)?;
            w.set_errhandler(earlybird::ErrHandler::Return);
            scope(|s| -> Result<()> {
                let mut r = w.isend(s, &data, peer, 8)?;
                r.cancel()?;
                let st = r.wait()?;
                assert!(
                    !st.is_cancelled(),
                    "a send matched by a posted receive must not be cancelled ({len} bytes)"
                );
                // Cancel of a request already completed and collected is an error.
                let err = r
                    .cancel()
                    .expect_err("cancel of a completed nonblocking request");
                assert_eq!(err.class(), ErrorClass::Request);
                Ok(())
            })?;
            w.set_errhandler(earlybird::ErrHandler::Fatal);
            // A completed (received) issend: cancel then wait gives not cancelled.
            scope(|s| -> Result<()> {
                let mut r = w.issend(s, &data, peer, 9)?;
                w.recv(&mut [0u8; 0], peer, GO)?; // the receiver has received it
                r.cancel()?;
                assert!(!r.wait()?.is_cancelled());
                Ok(())
            })?;
        } else {
            let mut got = vec![0u8; len];
            scope(|s| -> Result<()> {
                let mut r = w.irecv(s, &mut got, peer, 8)?;
                w.send(&[0u8; 0], peer, GO)?;
                let st = r.wait()?;
                assert!(!st.is_cancelled());
                assert_eq!(st.bytes(), len);
                Ok(())
            })?;
            check_eq("matched send", &got, &data);
            let mut got = vec![0u8; len];
            w.recv(&mut got, peer, 9)?;
            w.send(&[0u8; 0], peer, GO)?;
            check_eq("matched issend", &got, &data);
        }
    }
    Ok(())
}

scenarios! {
    probe_then_recv;
    probe_proc_null;
    mprobe_takes_message;
    probe_many_senders;
    cancel_pending_receive;
    cancel_unmatched_send;
    cancel_matched_send;
}
