//! Send modes (MPI 4.1 §3.4, §3.7): standard, synchronous, ready and buffered sends,
//! blocking and nonblocking, at every size from 0 B through the eager limit to 4 MiB
//! (rendezvous), with the data checked element by element; synchronous sends really wait
//! for the matching receive, buffered sends really complete locally.

mod common;
use common::*;
use earlybird::launch::BlockedIn;
use earlybird::{scope, wait_all, Result, Universe, BSEND_OVERHEAD};
use std::time::Duration;

const TAG: i32 = 7;
const READY: i32 = 8;
const GO: i32 = 9;
/// The receiver's "start the next one" to a sender.
const NEXT: i32 = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Standard,
    Sync,
    Ready,
    Buffered,
}

fn seed(size_idx: usize, rank: i32) -> u64 {
    (size_idx as u64) << 16 | rank as u64
}

/// One ring shift of `len` bytes with blocking calls in `mode`; every rank checks what its
/// left neighbour sent.
fn blocking_ring(u: &Universe, mode: Mode, len: usize, k: usize) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let data = pattern(seed(k, me), len);
    let want = pattern(seed(k, left), len);
    let mut got = vec![0u8; len];
    let what = format!("{mode:?} blocking, {len} bytes, rank {me} from {left}");
    let st = match mode {
        Mode::Standard | Mode::Sync => {
            let send = |w: &earlybird::Comm| {
                if mode == Mode::Sync {
                    w.ssend(&data, right, TAG)
                } else {
                    w.send(&data, right, TAG)
                }
            };
            // Rank 0 sends first, everybody else receives first: no cycle of blocked sends.
            if me == 0 {
                send(w)?;
                w.recv(&mut got, left, TAG)?
            } else {
                let st = w.recv(&mut got, left, TAG)?;
                send(w)?;
                st
            }
        }
        Mode::Ready => scope(|s| -> Result<_> {
            // Post the receive, then tell the sender it may rsend.
            let mut r = w.irecv(s, &mut got, left, TAG)?;
            w.send(&[0u8; 0], left, READY)?;
            w.recv(&mut [0u8; 0], right, READY)?;
            w.rsend(&data, right, TAG)?;
            r.wait()
        })?,
        Mode::Buffered => {
            u.buffer_attach(len + BSEND_OVERHEAD)?;
            // Every rank bsends before receiving: only local completion makes this work for
            // rendezvous sizes.
            w.bsend(&data, right, TAG)?;
            let st = w.recv(&mut got, left, TAG)?;
            assert_eq!(
                u.buffer_detach()?,
                len + BSEND_OVERHEAD,
                "{what}: detach returns the attached size"
            );
            st
        }
    };
    assert_eq!(
        (st.source(), st.tag(), st.bytes()),
        (left, TAG, len),
        "{what}: status"
    );
    assert_eq!(st.count::<u8>(), Some(len), "{what}: count");
    assert!(!st.is_cancelled());
    check_eq(&what, &got, &want);
    Ok(())
}

/// The same with nonblocking calls: irecv and i*send inside one scope, completed together.
fn nonblocking_ring(u: &Universe, mode: Mode, len: usize, k: usize) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let data = pattern(seed(k, me), len);
    let want = pattern(seed(k, left), len);
    let mut got = vec![0u8; len];
    let what = format!("{mode:?} nonblocking, {len} bytes, rank {me} from {left}");
    if mode == Mode::Buffered {
        u.buffer_attach(len + BSEND_OVERHEAD)?;
    }
    let sts = scope(|s| -> Result<_> {
        let rr = w.irecv(s, &mut got, left, TAG)?;
        if mode == Mode::Ready {
            w.send(&[0u8; 0], left, READY)?;
            w.recv(&mut [0u8; 0], right, READY)?;
        }
        let sr = match mode {
            Mode::Standard => w.isend(s, &data, right, TAG)?,
            Mode::Sync => w.issend(s, &data, right, TAG)?,
            Mode::Ready => w.irsend(s, &data, right, TAG)?,
            Mode::Buffered => w.ibsend(s, &data, right, TAG)?,
        };
        let mut reqs = vec![sr, rr];
        let sts = wait_all(&mut reqs)?;
        assert!(
            reqs.iter().all(|r| r.is_null()),
            "{what}: wait_all consumes nonblocking requests"
        );
        Ok(sts)
    })?;
    if mode == Mode::Buffered {
        u.buffer_detach()?;
    }
    let st = sts[1];
    assert_eq!(
        (st.source(), st.tag(), st.bytes()),
        (left, TAG, len),
        "{what}: status"
    );
    assert_eq!(st.count::<u8>(), Some(len), "{what}: count");
    check_eq(&what, &got, &want);
    Ok(())
}

fn all_sizes(u: &Universe, f: impl Fn(usize, usize) -> Result<()>) -> Result<()> {
    for (k, len) in sizes(u).into_iter().enumerate() {
        f(len, k)?;
    }
    Ok(())
}

fn standard_blocking(u: &Universe) -> Result<()> {
    all_sizes(u, |len, k| blocking_ring(u, Mode::Standard, len, k))
}
fn ssend_blocking(u: &Universe) -> Result<()> {
    all_sizes(u, |len, k| blocking_ring(u, Mode::Sync, len, k))
}
fn rsend_blocking(u: &Universe) -> Result<()> {
    all_sizes(u, |len, k| blocking_ring(u, Mode::Ready, len, k))
}
fn bsend_blocking(u: &Universe) -> Result<()> {
    all_sizes(u, |len, k| blocking_ring(u, Mode::Buffered, len, k))
}
fn standard_nonblocking(u: &Universe) -> Result<()> {
    all_sizes(u, |len, k| nonblocking_ring(u, Mode::Standard, len, k))
}
fn ssend_nonblocking(u: &Universe) -> Result<()> {
    all_sizes(u, |len, k| nonblocking_ring(u, Mode::Sync, len, k))
}
fn rsend_nonblocking(u: &Universe) -> Result<()> {
    all_sizes(u, |len, k| nonblocking_ring(u, Mode::Ready, len, k))
}
fn bsend_nonblocking(u: &Universe) -> Result<()> {
    all_sizes(u, |len, k| nonblocking_ring(u, Mode::Buffered, len, k))
}

/// Pairs (0,1), (2,3), ...; an odd last rank sits out. Returns (partner, is_sender).
fn pair(u: &Universe) -> Option<(i32, bool)> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let partner = me ^ 1;
    (partner < n).then_some((partner, me % 2 == 0))
}

/// MPI_Ssend returns only once the matching receive has started: the receiver posts its
/// receive only after it has seen the sender publish that it is blocked in a send to it with
/// this tag (the engine's published blocked-in state, as `ebrun --timeout` reports it). An
/// ssend that returned before the receive was posted never publishes that, and the receiver's
/// bounded wait fails. One ssend at a time: the sender starts each only when the receiver says
/// NEXT, and says GO once it returned, so what the receiver sees belongs to this ssend alone.
/// Eager-sized, zero-length and rendezvous-sized messages alike.
fn ssend_waits_for_receive(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let job = u.job_segment();
    for len in [0usize, 8, u.eager_limit_bytes(), 1 << 20] {
        let data = pattern(len as u64, len);
        if sender {
            w.recv(&mut [0u8; 0], peer, NEXT)?;
            w.ssend(&data, peer, TAG)?;
            w.send(&[0u8; 0], peer, GO)?;
        } else {
            let me = w.rank();
            w.send(&[0u8; 0], peer, NEXT)?;
            job.await_blocked(peer as u32, Duration::from_secs(20), |p| {
                p.what == BlockedIn::Send && p.peer == Some(me) && p.tag == TAG
            })
            .unwrap_or_else(|e| panic!("ssend of {len} bytes never waited for its receive: {e}"));
            let mut got = vec![0u8; len];
            let st = w.recv(&mut got, peer, TAG)?;
            assert_eq!(st.bytes(), len);
            check_eq("ssend payload", &got, &data);
            w.recv(&mut [0u8; 0], peer, GO)?;
        }
    }
    Ok(())
}

/// An issend stays incomplete (test and get_status say so) until the receiver posts the
/// matching receive, which it does only when told to after the sender's tests.
fn issend_incomplete_until_matched(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let e = u.eager_limit_bytes();
    for len in [0usize, 8, e, e + 1, 1 << 20] {
        let data = pattern(len as u64 + 1, len);
        if sender {
            scope(|s| -> Result<()> {
                let mut r = w.issend(s, &data, peer, TAG)?;
                for _ in 0..20 {
                    assert!(
                        r.test()?.is_none(),
                        "issend of {len} bytes completed before the receive was posted"
                    );
                    assert!(r.get_status()?.is_none());
                    std::thread::sleep(Duration::from_millis(1));
                }
                w.send(&[0u8; 0], peer, GO)?;
                r.wait()?;
                Ok(())
            })?;
        } else {
            let mut got = vec![0u8; len];
            w.recv(&mut [0u8; 0], peer, GO)?;
            let st = w.recv(&mut got, peer, TAG)?;
            assert_eq!(st.bytes(), len);
            check_eq("issend payload", &got, &data);
        }
    }
    Ok(())
}

/// A buffered send completes locally even when the receive is posted only after it: the
/// sender bsends (and ibsends and waits) a rendezvous-sized message, then tells the receiver
/// to post its receive.
fn bsend_completes_locally(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let e = u.eager_limit_bytes();
    for len in [0usize, 8, e + 1, 1 << 20] {
        let a = pattern(len as u64 + 2, len);
        let b = pattern(len as u64 + 3, len);
        if sender {
            u.buffer_attach(2 * (len + BSEND_OVERHEAD))?;
            w.bsend(&a, peer, TAG)?;
            scope(|s| -> Result<()> {
                let mut r = w.ibsend(s, &b, peer, TAG + 1)?;
                r.wait()?;
                Ok(())
            })?;
            w.send(&[0u8; 0], peer, GO)?;
            u.buffer_detach()?;
        } else {
            w.recv(&mut [0u8; 0], peer, GO)?;
            let mut got = vec![0u8; len];
            // Receive them in the opposite order (different tags).
            w.recv(&mut got, peer, TAG + 1)?;
            check_eq("ibsend payload", &got, &b);
            w.recv(&mut got, peer, TAG)?;
            check_eq("bsend payload", &got, &a);
        }
    }
    Ok(())
}

/// MPI 4.1's buffers of a communicator: a buffered send on a communicator with a buffer of
/// its own uses that one (a message too large for the process's buffer fits there), the
/// flushes wait until the messages have left (the nonblocking one is incomplete while a
/// rendezvous copy waits for its receive), detach gives the size back, an automatic buffer
/// takes any message, and a freed communicator takes its buffer with it.
fn communicator_buffers(u: &Universe) -> Result<()> {
    let w = u.world();
    let d = w.dup()?;
    let Some((peer, sender)) = pair(u) else {
        // The communicators are made and freed by every rank.
        d.free()?;
        return w.dup()?.free();
    };
    let len = 1 << 20;
    let a = pattern(11, len);
    let b = pattern(12, 4 * len);
    let what = |e: &str| format!("rank {}: {e}", w.rank());
    if sender {
        let class = earlybird::ErrorClass::Buffer;
        d.set_errhandler(earlybird::ErrHandler::Return);
        w.set_errhandler(earlybird::ErrHandler::Return);
        u.buffer_attach(64)?;
        assert_eq!(
            d.buffer_flush().map_err(|e| e.class()),
            Err(class),
            "{}",
            what("flush with no buffer")
        );
        assert_eq!(
            d.buffer_detach().map_err(|e| e.class()),
            Err(class),
            "{}",
            what("detach with no buffer")
        );
        d.buffer_attach(len + BSEND_OVERHEAD)?;
        let twice = d.buffer_attach(8).expect_err("attach twice");
        assert_eq!(twice.class(), class, "{}", what("attach twice"));
        assert!(
            twice
                .to_string()
                .contains(&(len + BSEND_OVERHEAD).to_string()),
            "{twice}"
        );
        let err = w
            .bsend(&a, peer, TAG)
            .expect_err("too large for the process's buffer");
        assert_eq!(err.class(), class, "{}", what(&err.to_string()));
        d.bsend(&a, peer, TAG)?;
        scope(|s| -> Result<()> {
            let mut f = d.ibuffer_flush(s)?;
            std::thread::sleep(Duration::from_millis(20));
            assert!(
                f.test()?.is_none(),
                "{}",
                what("the flush completed before the receive")
            );
            w.send(&[0u8; 0], peer, GO)?;
            f.wait()?;
            Ok(())
        })?;
        d.buffer_flush()?;
        assert_eq!(
            d.buffer_detach()?,
            len + BSEND_OVERHEAD,
            "{}",
            what("detach")
        );
        u.buffer_flush()?;
        scope(|s| -> Result<()> { u.ibuffer_flush(s)?.wait().map(drop) })?;
        assert_eq!(u.buffer_detach()?, 64);
        d.buffer_attach(earlybird::BUFFER_AUTOMATIC)?;
        d.bsend(&b, peer, TAG + 1)?;
        d.bsend(&a, peer, TAG + 2)?;
        assert_eq!(d.buffer_detach()?, earlybird::BUFFER_AUTOMATIC);
        // A communicator freed with its buffer attached takes it with it: the next one
        // (which may reuse its context) has none.
        d.buffer_attach(len + BSEND_OVERHEAD)?;
        d.free()?;
        let e = w.dup()?;
        e.set_errhandler(earlybird::ErrHandler::Return);
        assert_eq!(
            e.buffer_detach().map_err(|e| e.class()),
            Err(class),
            "{}",
            what("a new communicator's buffer")
        );
        e.free()?;
    } else {
        w.recv(&mut [0u8; 0], peer, GO)?;
        let mut got = vec![0u8; len];
        d.recv(&mut got, peer, TAG)?;
        check_eq("bsend on the communicator's buffer", &got, &a);
        let mut big = vec![0u8; 4 * len];
        d.recv(&mut big, peer, TAG + 1)?;
        check_eq("bsend on an automatic buffer", &big, &b);
        d.recv(&mut got, peer, TAG + 2)?;
        check_eq("second bsend on an automatic buffer", &got, &a);
        d.free()?;
        w.dup()?.free()?;
    }
    Ok(())
}

/// Typed buffers: f64, i32 and u16 payloads arrive as values and counts in elements.
fn typed_buffers(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let n = 3000usize;
    let f: Vec<f64> = (0..n).map(|i| me as f64 * 1e6 + i as f64 * 0.5).collect();
    let ints: Vec<i32> = (0..n as i32).map(|i| -i * (me + 1)).collect();
    let shorts: Vec<u16> = (0..n as u16)
        .map(|i| i.wrapping_mul(me as u16 + 7))
        .collect();
    let mut gf = vec![0f64; n];
    let mut gi = vec![0i32; n];
    let mut gs = vec![0u16; n];
    let sts = scope(|s| -> Result<_> {
        let mut reqs = vec![
            w.irecv(s, &mut gf, left, 1)?,
            w.irecv(s, &mut gi, left, 2)?,
            w.irecv(s, &mut gs, left, 3)?,
            w.isend(s, &f, right, 1)?,
            w.isend(s, &ints, right, 2)?,
            w.isend(s, &shorts, right, 3)?,
        ];
        wait_all(&mut reqs)
    })?;
    assert_eq!(sts[0].count::<f64>(), Some(n));
    assert_eq!(sts[1].count::<i32>(), Some(n));
    assert_eq!(sts[2].count::<u16>(), Some(n));
    assert_eq!(sts[2].elements::<u16>(), Some(n));
    let wf: Vec<f64> = (0..n).map(|i| left as f64 * 1e6 + i as f64 * 0.5).collect();
    let wi: Vec<i32> = (0..n as i32).map(|i| -i * (left + 1)).collect();
    let ws: Vec<u16> = (0..n as u16)
        .map(|i| i.wrapping_mul(left as u16 + 7))
        .collect();
    check_eq("f64", &gf, &wf);
    check_eq("i32", &gi, &wi);
    check_eq("u16", &gs, &ws);
    Ok(())
}

scenarios! {
    standard_blocking;
    ssend_blocking;
    rsend_blocking;
    bsend_blocking;
    standard_nonblocking;
    ssend_nonblocking;
    rsend_nonblocking;
    bsend_nonblocking;
    ssend_waits_for_receive;
    issend_incomplete_until_matched;
    bsend_completes_locally;
    communicator_buffers [2, 3];
    typed_buffers;
}
