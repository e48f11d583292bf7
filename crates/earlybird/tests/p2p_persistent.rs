//! Persistent requests (MPI 4.1 §3.9): send_init / ssend_init / rsend_init / bsend_init and
//! recv_init, started and completed many times, one by one and with start_all; PROC_NULL
//! persistent requests; wildcard persistent receives.
//!
//! A persistent request holds its buffer for its whole scope. Most scenarios here send the
//! same bytes every iteration (buffers lent as `&[T]`), check each iteration's status and
//! the received bytes once the scope has ended; `persistent_changing_data` changes and checks
//! the data at every iteration through `Request::buffer_mut` of the inactive requests.

mod common;
use common::*;
use earlybird::{
    scope, start_all, wait_all, Result, Universe, ANY_SOURCE, ANY_TAG, BSEND_OVERHEAD, PROC_NULL,
};

const TAG: i32 = 11;
const READY: i32 = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Standard,
    Sync,
    Ready,
    Buffered,
}

fn iterations(len: usize) -> usize {
    if len <= 64 << 10 {
        60
    } else {
        3
    }
}

/// Ring shift with a persistent send to the right and a persistent receive from the left,
/// started and waited `iterations(len)` times.
fn persistent_ring(u: &Universe, mode: Mode) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    for (k, len) in sizes(u).into_iter().enumerate() {
        let data = pattern((k as u64) << 20 | me as u64, len);
        let want = pattern((k as u64) << 20 | left as u64, len);
        let mut got = vec![0u8; len];
        let what = format!("{mode:?} persistent, {len} bytes, rank {me} from {left}");
        if mode == Mode::Buffered {
            // The right neighbour may lag up to size-1 iterations behind this rank.
            u.buffer_attach(w.size() as usize * (len + BSEND_OVERHEAD))?;
        }
        let iters = iterations(len);
        scope(|s| -> Result<()> {
            let mut rr = w.recv_init(s, &mut got, left, TAG)?;
            let mut sr = match mode {
                Mode::Standard => w.send_init(s, &data, right, TAG)?,
                Mode::Sync => w.ssend_init(s, &data, right, TAG)?,
                Mode::Ready => w.rsend_init(s, &data, right, TAG)?,
                Mode::Buffered => w.bsend_init(s, &data, right, TAG)?,
            };
            assert!(rr.is_persistent() && sr.is_persistent());
            assert!(!rr.is_active() && !sr.is_active());
            for i in 0..iters {
                rr.start()?;
                assert!(rr.is_active());
                if mode == Mode::Ready {
                    w.send(&[0u8; 0], left, READY)?;
                    w.recv(&mut [0u8; 0], right, READY)?;
                }
                sr.start()?;
                let st = rr.wait()?;
                sr.wait()?;
                assert!(
                    !rr.is_active() && !sr.is_active() && !rr.is_null(),
                    "{what}: inactive after wait"
                );
                assert_eq!(
                    (st.source(), st.tag(), st.bytes()),
                    (left, TAG, len),
                    "{what}: status of iteration {i}"
                );
            }
            Ok(())
        })?;
        if mode == Mode::Buffered {
            u.buffer_detach()?;
        }
        check_eq(&what, &got, &want);
    }
    Ok(())
}

fn send_init_recv_init(u: &Universe) -> Result<()> {
    persistent_ring(u, Mode::Standard)
}
fn ssend_init_recv_init(u: &Universe) -> Result<()> {
    persistent_ring(u, Mode::Sync)
}
fn rsend_init_recv_init(u: &Universe) -> Result<()> {
    persistent_ring(u, Mode::Ready)
}
fn bsend_init_recv_init(u: &Universe) -> Result<()> {
    persistent_ring(u, Mode::Buffered)
}

/// Several persistent sends and receives in one array (mixed order, mixed sizes across the
/// eager limit), started together with start_all and completed with wait_all, many times.
fn start_all_mixed(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let e = u.eager_limit_bytes();
    let lens = [0usize, 8, e, e + 1, 64 << 10];
    let datas: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(t, &l)| pattern((t as u64) << 8 | me as u64, l))
        .collect();
    let mut gots: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0u8; l]).collect();
    scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        let mut sends = Vec::new();
        for (t, got) in gots.iter_mut().enumerate() {
            reqs.push(w.recv_init(s, got, left, t as i32)?);
        }
        for (t, d) in datas.iter().enumerate() {
            let r = if t % 2 == 0 {
                w.send_init(s, d, right, t as i32)?
            } else {
                w.ssend_init(s, d, right, t as i32)?
            };
            sends.push(r);
        }
        // Interleave: recv0, send0, recv1, send1, ...
        let mut all = Vec::new();
        for (r, s) in reqs.into_iter().zip(sends) {
            all.push(r);
            all.push(s);
        }
        for i in 0..100 {
            start_all(&mut all)?;
            assert!(all.iter().all(|r| r.is_active()));
            let sts = wait_all(&mut all)?;
            assert!(all.iter().all(|r| !r.is_active() && !r.is_null()));
            for (t, &l) in lens.iter().enumerate() {
                let st = sts[2 * t];
                assert_eq!(
                    (st.source(), st.tag(), st.bytes()),
                    (left, t as i32, l),
                    "iteration {i}, tag {t}"
                );
            }
        }
        Ok(())
    })?;
    for (t, &l) in lens.iter().enumerate() {
        check_eq(
            &format!("start_all tag {t}"),
            &gots[t],
            &pattern((t as u64) << 8 | left as u64, l),
        );
    }
    Ok(())
}

/// Persistent operations on PROC_NULL complete at once with the PROC_NULL status
/// (source PROC_NULL, tag ANY_TAG, count 0), in every mode, and leave the buffer alone.
fn persistent_proc_null(u: &Universe) -> Result<()> {
    let w = u.world();
    let data = [5u32; 16];
    let mut got = [9u32; 16];
    scope(|s| -> Result<()> {
        let mut all = vec![
            w.recv_init(s, &mut got, PROC_NULL, TAG)?,
            w.send_init(s, &data, PROC_NULL, TAG)?,
            w.ssend_init(s, &data, PROC_NULL, TAG)?,
            w.rsend_init(s, &data, PROC_NULL, TAG)?,
            // No buffer attached: a buffered send to PROC_NULL needs none.
            w.bsend_init(s, &data, PROC_NULL, TAG)?,
        ];
        for _ in 0..50 {
            for r in all.iter_mut() {
                r.start()?;
                let st = r.wait()?;
                assert_eq!(st.count::<u32>(), Some(0));
            }
            start_all(&mut all)?;
            let sts = wait_all(&mut all)?;
            assert_eq!(sts[0].source(), PROC_NULL);
            assert_eq!(sts[0].tag(), ANY_TAG);
            assert_eq!(sts[0].bytes(), 0);
        }
        Ok(())
    })?;
    assert_eq!(
        got, [9u32; 16],
        "a receive from PROC_NULL must not touch the buffer"
    );
    // Blocking and nonblocking PROC_NULL too.
    w.send(&data, PROC_NULL, 0)?;
    w.ssend(&data, PROC_NULL, 0)?;
    w.rsend(&data, PROC_NULL, 0)?;
    w.bsend(&data, PROC_NULL, 0)?;
    let st = w.recv(&mut got, PROC_NULL, ANY_TAG)?;
    assert_eq!((st.source(), st.tag(), st.bytes()), (PROC_NULL, ANY_TAG, 0));
    scope(|s| -> Result<()> {
        let mut r = w.irecv(s, &mut got, PROC_NULL, 3)?;
        let st = r.wait()?;
        assert_eq!(st.source(), PROC_NULL);
        let mut r = w.isend(s, &data, PROC_NULL, 3)?;
        r.wait()?;
        Ok(())
    })?;
    assert_eq!(got, [9u32; 16]);
    Ok(())
}

/// A persistent wildcard receive on rank 0 collects every other rank's messages; per source
/// they arrive in order.
fn persistent_any_source(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let per = 20u64;
    if me == 0 {
        let mut got = [0u64; 2];
        let mut next = vec![0u64; n as usize];
        scope(|s| -> Result<()> {
            let mut r = w.recv_init(s, &mut got, ANY_SOURCE, ANY_TAG)?;
            for _ in 0..per * (n as u64 - 1) {
                r.start()?;
                let st = r.wait()?;
                let src = st.source();
                assert!((1..n).contains(&src));
                assert_eq!(st.tag(), src * 100);
                assert_eq!(st.count::<u64>(), Some(2));
                // The buffer is lent to the request; order is checked through the tag only here
                // and through the data below.
                next[src as usize] += 1;
            }
            Ok(())
        })?;
        assert!(next[1..].iter().all(|&c| c == per));
        // Phase two only once phase one is done (its wildcard receive would take them).
        for r in 1..n {
            w.send(&[0u8; 0], r, 2)?;
        }
        // Order per source, with the data visible: plain receives from a persistent sender.
        for _ in 0..per * (n as u64 - 1) {
            let st = w.recv(&mut got, ANY_SOURCE, 1)?;
            let src = st.source() as u64;
            assert_eq!(got[0], src);
            assert_eq!(
                got[1], next[src as usize],
                "messages from rank {src} overtook each other"
            );
            next[src as usize] += 1;
        }
    } else {
        let data = [me as u64, 0];
        scope(|s| -> Result<()> {
            let mut r = w.send_init(s, &data, 0, me * 100)?;
            for _ in 0..per {
                r.start()?;
                r.wait()?;
            }
            Ok(())
        })?;
        w.recv(&mut [0u8; 0], 0, 2)?;
        for i in 0..per {
            w.send(&[me as u64, per + i], 0, 1)?;
        }
    }
    Ok(())
}

/// Data that changes between starts, through `Request::buffer_mut` of inactive requests:
/// the sender writes iteration i's data before each start, the receiver reads it after each
/// wait. All four send modes; element counts on both sides of the eager limit.
fn persistent_changing_data(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let e = u.eager_limit_bytes();
    let val = |i: usize, r: i32, k: usize| (i as u32) << 20 ^ (r as u32) << 12 ^ k as u32;
    for mode in [Mode::Standard, Mode::Sync, Mode::Ready, Mode::Buffered] {
        for n in [0usize, 2, e / 4 + 1, 64 << 10] {
            let mut sbuf = vec![0u32; n];
            let mut rbuf = vec![0u32; n];
            if mode == Mode::Buffered {
                u.buffer_attach(w.size() as usize * (4 * n + BSEND_OVERHEAD))?;
            }
            scope(|s| -> Result<()> {
                let mut rr = w.recv_init(s, &mut rbuf, left, TAG)?;
                let mut sr = match mode {
                    Mode::Standard => w.send_init(s, &mut sbuf, right, TAG)?,
                    Mode::Sync => w.ssend_init(s, &mut sbuf, right, TAG)?,
                    Mode::Ready => w.rsend_init(s, &mut sbuf, right, TAG)?,
                    Mode::Buffered => w.bsend_init(s, &mut sbuf, right, TAG)?,
                };
                for i in 0..20 {
                    for (k, x) in sr.buffer_mut::<u32>()?.iter_mut().enumerate() {
                        *x = val(i, me, k);
                    }
                    rr.start()?;
                    if mode == Mode::Ready {
                        w.send(&[0u8; 0], left, READY)?;
                        w.recv(&mut [0u8; 0], right, READY)?;
                    }
                    sr.start()?;
                    assert!(
                        sr.buffer_mut::<u32>().is_err(),
                        "the buffer of an active request is not available"
                    );
                    let st = rr.wait()?;
                    sr.wait()?;
                    assert_eq!(st.count::<u32>(), Some(n));
                    let got = rr.buffer_mut::<u32>()?;
                    let want: Vec<u32> = (0..n).map(|k| val(i, left, k)).collect();
                    check_eq(&format!("{mode:?} iteration {i}, {n} u32"), got, &want);
                }
                Ok(())
            })?;
            if mode == Mode::Buffered {
                u.buffer_detach()?;
            }
        }
    }
    Ok(())
}

scenarios! {
    persistent_changing_data;
    send_init_recv_init;
    ssend_init_recv_init;
    rsend_init_recv_init;
    bsend_init_recv_init;
    start_all_mixed;
    persistent_proc_null;
    persistent_any_source;
}
