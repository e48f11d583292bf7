//! Bound channels (seed 000, issue 5): the conformance suite.
//!
//! Every scenario runs as a thread job and under ebrun. Pairs are ranks (2i, 2i+1), the even
//! rank the sender unless said otherwise; an odd rank out binds nothing (binding is
//! collective over the pair only) and only joins what is collective over the communicator
//! (dup, split, intercomm_create, persistent collectives). Ready mode is kept by a zero-byte
//! "GO" message on the world communicator from the receiver after it started its receive.

mod common;
use common::check_eq;
use earlybird::{
    bind_channel, bind_channels, bind_slack_channel, ibind_channel, ibind_channels,
    iunbind_channel, scope, start_all, unbind_channel, unbind_channels, wait_all, wait_bindings,
    Bundle, Channel, Comm, ErrHandler, ErrorClass, Info, Op, Result, Universe,
    ADDRESS_BASE_INCREMENT, ANY_SOURCE, ANY_TAG,
};
use std::time::{Duration, Instant};

const GO: i32 = 999;
/// Bound on every polling loop of this file (the harness's job timeout is 60 s).
const POLL_LIMIT: Duration = Duration::from_secs(20);

/// The partner of this rank, or None for the odd rank out.
fn partner(w: &Comm) -> Option<i32> {
    let p = w.rank() ^ 1;
    (p < w.size()).then_some(p)
}

/// The receiver's note that its receive is started.
fn go(w: &Comm, p: i32) -> Result<()> {
    w.send(&[0u8; 0], p, GO)
}

/// The sender's wait for that note.
fn wait_go(w: &Comm, p: i32) -> Result<()> {
    w.recv(&mut [0u8; 0], p, GO).map(|_| ())
}

/// Element `k` of round `round` on channel `ch`.
fn val(ch: i64, round: i64, k: usize) -> i64 {
    ch * 1_000_000 + round * 1000 + k as i64
}

fn payload(ch: i64, round: i64, n: usize) -> Vec<i64> {
    (0..n).map(|k| val(ch, round, k)).collect()
}

/// One round over channels of both directions: start the receives, exchange GO, start the
/// sends, wait for all. Send ends carry `payload(ids[i], round)`, checked at the receive end.
fn exchange(
    chs: &mut [Channel<'_>],
    sends: &[bool],
    ids: &[i64],
    w: &Comm,
    p: i32,
    round: i64,
) -> Result<()> {
    for (c, &snd) in chs.iter_mut().zip(sends) {
        if !snd {
            c.start()?;
        }
    }
    go(w, p)?;
    wait_go(w, p)?;
    for ((c, &snd), &id) in chs.iter_mut().zip(sends).zip(ids) {
        if snd {
            let b = c.buffer_mut::<i64>()?;
            let n = b.len();
            b.copy_from_slice(&payload(id, round, n));
            c.start()?;
        }
    }
    wait_all(chs)?;
    for ((c, &snd), &id) in chs.iter_mut().zip(sends).zip(ids) {
        if !snd {
            let b = c.buffer_mut::<i64>()?;
            let n = b.len();
            check_eq(
                &format!("channel {id} round {round}"),
                b,
                &payload(id, round, n),
            );
        }
    }
    Ok(())
}

// ---- 1. ibind + test/wait + into_channel ----------------------------------------------------

/// ibind_channel, test before the partner offers (None), into_channel before completion
/// (MPI_ERR_REQUEST), then a second ibind completed by test polling on the receive end and by
/// wait on the send end; the statuses name the partner, its tag and its bytes per start.
fn ibind_test_wait(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    const TAG: i32 = 3;
    let mut x = [0i64; 6];
    scope(|s| -> Result<()> {
        let mut ch = if sender {
            let mut req = w.send_init(s, &mut x, p, TAG)?;
            // The receiver has tried its early into_channel before we offer.
            wait_go(w, p)?;
            let mut b = ibind_channel(&mut req, &Info::new())?;
            let st = b.wait()?;
            assert_eq!((st.source(), st.tag(), st.bytes()), (p, TAG, 48));
            let ch = b.into_channel()?;
            ch
        } else {
            let mut req = w.recv_init(s, &mut x, p, TAG)?;
            let mut early = ibind_channel(&mut req, &Info::new())?;
            assert!(early.test()?.is_none(), "bound before the sender offered");
            let e = early.into_channel().unwrap_err();
            assert_eq!(e.class(), ErrorClass::Request, "{e}");
            let mut b = ibind_channel(&mut req, &Info::new())?;
            assert!(b.test()?.is_none());
            go(w, p)?;
            let t0 = Instant::now();
            let st = loop {
                if let Some(st) = b.test()? {
                    break st;
                }
                assert!(t0.elapsed() < POLL_LIMIT, "ibind never completed");
                std::thread::yield_now();
            };
            assert_eq!((st.source(), st.tag(), st.bytes()), (p, TAG, 48));
            // Testing a completed bind again gives the same status.
            assert_eq!(b.test()?.map(|s| s.source()), Some(p));
            let ch = b.into_channel()?;
            ch
        };
        let cs = ch.partner();
        assert_eq!((cs.source(), cs.tag(), cs.bytes()), (p, TAG, 48));
        for round in 0..50 {
            exchange(std::slice::from_mut(&mut ch), &[sender], &[7], w, p, round)?;
        }
        unbind_channel(&mut ch)?;
        assert!(ch.is_null());
        Ok(())
    })
}

// ---- 2. bind_channels in different orders, two communicators --------------------------------

/// Channels of one pair: (id, on the dup?, tag, sent by the even rank?).
const MANY: [(i64, bool, i32, bool); 5] = [
    (0, false, 10, true),
    (1, false, 11, true),
    (2, false, 12, true),
    (3, true, 10, true),
    (4, true, 11, false),
];

/// Bind the channels of `order` (indices into MANY) with bind_channels (or ibind_channels
/// and wait_bindings), run `rounds` exchanges, and unbind them.
fn many_channels(
    w: &Comm,
    d: &Comm,
    p: i32,
    order: &[usize],
    nonblocking: bool,
    rounds: i64,
) -> Result<()> {
    let even = w.rank() % 2 == 0;
    let mut bufs: Vec<Vec<i64>> = order.iter().map(|&i| vec![-1; 4 + i]).collect();
    let ids: Vec<i64> = order.iter().map(|&i| MANY[i].0).collect();
    let sends: Vec<bool> = order.iter().map(|&i| MANY[i].3 == even).collect();
    scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        for (&i, b) in order.iter().zip(bufs.iter_mut()) {
            let (_, dup, tag, even_sends) = MANY[i];
            let c = if dup { d } else { w };
            reqs.push(if even_sends == even {
                c.send_init(s, b.as_mut_slice(), p, tag)?
            } else {
                c.recv_init(s, b.as_mut_slice(), p, tag)?
            });
        }
        let mut chs = if nonblocking {
            let mut binds = ibind_channels(&mut reqs, &[])?;
            let sts = wait_bindings(&mut binds)?;
            for (st, &i) in sts.iter().zip(order) {
                assert_eq!((st.source(), st.tag()), (p, MANY[i].2));
                assert_eq!(st.bytes(), 8 * (4 + i), "the partner's bytes per start");
            }
            binds
                .into_iter()
                .map(|b| b.into_channel())
                .collect::<Result<Vec<_>>>()?
        } else {
            bind_channels(&mut reqs, &[])?
        };
        for (c, &i) in chs.iter().zip(order) {
            let st = c.partner();
            assert_eq!(
                (st.source(), st.tag(), st.bytes()),
                (p, MANY[i].2, 8 * (4 + i))
            );
        }
        for round in 0..rounds {
            exchange(&mut chs, &sends, &ids, w, p, round)?;
        }
        unbind_channels(&mut chs)?;
        Ok(())
    })
}

/// bind_channels with several channels of one pair, both directions, on world and a dup with
/// the same tags, listed in different orders on the two sides: no deadlock, and each
/// channel's payload arrives on its own channel.
fn bind_channels_any_order(u: &Universe) -> Result<()> {
    let w = u.world();
    let d = w.dup()?;
    if let Some(p) = partner(w) {
        let even = w.rank() % 2 == 0;
        let orders: [[usize; 5]; 3] = [[0, 1, 2, 3, 4], [3, 2, 4, 0, 1], [4, 3, 2, 1, 0]];
        for (k, o) in orders.iter().enumerate() {
            // The odd rank lists the channels in another order than the even one.
            let mine = if even { o } else { &orders[(k + 1) % 3] };
            many_channels(w, &d, p, mine, false, 20)?;
            many_channels(w, &d, p, mine, true, 5)?;
        }
    }
    d.free()
}

// ---- 3. two communicators and an intercommunicator ---------------------------------------------

/// Channels of one pair on world, on a dup and on an intercommunicator between the even and
/// the odd ranks (rank 2i is rank i of the even half, 2i+1 rank i of the odd one): data and
/// partner ranks (the intercommunicator's remote rank) checked.
fn intercomm_channels(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    let color = me % 2;
    let local = w.split(color, me)?.expect("color");
    let ic = local.intercomm_create(0, w, 1 - color, 77)?;
    let d = w.dup()?;
    if let Some(p) = partner(w) {
        let sender = color == 0;
        let ip = me / 2; // the partner's rank in the remote group
        let (mut a, mut b, mut c) = ([0i64; 5], [0i64; 7], [0i64; 9]);
        scope(|s| -> Result<()> {
            // id 0 world, 1 dup, 2 intercomm: all tag 21. The receiver lists them reversed.
            let mut reqs = if sender {
                vec![
                    w.send_init(s, &mut a, p, 21)?,
                    d.send_init(s, &mut b, p, 21)?,
                    ic.send_init(s, &mut c, ip, 21)?,
                ]
            } else {
                vec![
                    ic.recv_init(s, &mut c, ip, 21)?,
                    d.recv_init(s, &mut b, p, 21)?,
                    w.recv_init(s, &mut a, p, 21)?,
                ]
            };
            let ids: Vec<i64> = if sender { vec![0, 1, 2] } else { vec![2, 1, 0] };
            let mut chs = bind_channels(&mut reqs, &[])?;
            for (ch, &id) in chs.iter().zip(&ids) {
                let st = ch.partner();
                let want = if id == 2 { ip } else { p };
                assert_eq!((st.source(), st.tag()), (want, 21), "channel {id}");
            }
            let sends = vec![sender; 3];
            for round in 0..30 {
                exchange(&mut chs, &sends, &ids, w, p, round)?;
            }
            // A receive's completion status names the remote rank too.
            if !sender {
                chs[0].start()?;
                go(w, p)?;
                let st = chs[0].wait()?;
                assert_eq!((st.source(), st.tag(), st.bytes()), (ip, 21, 72));
            } else {
                wait_go(w, p)?;
                chs[2].start()?;
                chs[2].wait()?;
            }
            // Unbind in another order than the bind.
            chs.reverse();
            unbind_channels(&mut chs)?;
            Ok(())
        })?;
    }
    d.free()?;
    ic.free()?;
    local.free()
}

// ---- 4. wildcard receive binds -----------------------------------------------------------------

/// A receive bound with ANY_SOURCE, ANY_TAG or both binds to the sender; channel_status,
/// the Binding's status and each completion name the partner and its tag.
fn wildcard_bind(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    // (receiver's source, receiver's tag, sender's tag, nonblocking bind)
    let cases = [
        (ANY_SOURCE, 30, 30, false),
        (p, ANY_TAG, 31, false),
        (ANY_SOURCE, ANY_TAG, 32, true),
    ];
    for (i, &(src, rtag, stag, nb)) in cases.iter().enumerate() {
        let mut x = [0i64; 3];
        scope(|s| -> Result<()> {
            let mut req = if sender {
                w.send_init(s, &mut x, p, stag)?
            } else {
                w.recv_init(s, &mut x, src, rtag)?
            };
            let mut ch = if nb {
                let mut b = ibind_channel(&mut req, &Info::new())?;
                let st = b.wait()?;
                assert_eq!(
                    (st.source(), st.tag(), st.bytes()),
                    (p, stag, 24),
                    "case {i}"
                );
                b.into_channel()?
            } else {
                bind_channel(&mut req, &Info::new())?
            };
            let st = ch.partner();
            assert_eq!((st.source(), st.tag()), (p, stag), "case {i}");
            for round in 0..10 {
                if sender {
                    ch.buffer_mut::<i64>()?
                        .copy_from_slice(&payload(i as i64, round, 3));
                    wait_go(w, p)?;
                    ch.start()?;
                    ch.wait()?;
                } else {
                    ch.start()?;
                    go(w, p)?;
                    let st = ch.wait()?;
                    assert_eq!((st.source(), st.tag(), st.bytes()), (p, stag, 24));
                    check_eq(
                        "wildcard",
                        ch.buffer_mut::<i64>()?,
                        &payload(i as i64, round, 3),
                    );
                }
            }
            unbind_channel(&mut ch)?;
            Ok(())
        })?;
    }
    Ok(())
}

// ---- 5. start_all / wait_all, test polling --------------------------------------------------

/// Several slack-1 channels started with start_all; the sender completes them with
/// wait_all, the receiver by polling test() on each.
fn start_all_wait_all(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    const N: usize = 4;
    let mut bufs = vec![vec![0i64; 16]; N];
    scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        for (i, b) in bufs.iter_mut().enumerate() {
            let tag = 40 + i as i32;
            reqs.push(if sender {
                w.send_init(s, b.as_mut_slice(), p, tag)?
            } else {
                w.recv_init(s, b.as_mut_slice(), p, tag)?
            });
        }
        let mut chs = bind_channels(&mut reqs, &[])?;
        for round in 0..200 {
            if sender {
                for (i, c) in chs.iter_mut().enumerate() {
                    c.buffer_mut::<i64>()?
                        .copy_from_slice(&payload(i as i64, round, 16));
                }
                wait_go(w, p)?;
                start_all(&mut chs)?;
                let sts = wait_all(&mut chs)?;
                assert_eq!(sts.len(), N);
            } else {
                start_all(&mut chs)?;
                assert!(chs.iter().all(|c| c.is_active()));
                go(w, p)?;
                let t0 = Instant::now();
                let mut done = [false; N];
                while !done.iter().all(|&d| d) {
                    for (i, c) in chs.iter_mut().enumerate() {
                        if !done[i] {
                            if let Some(st) = c.test()? {
                                assert_eq!((st.source(), st.tag()), (p, 40 + i as i32));
                                assert!(!c.is_active());
                                done[i] = true;
                            }
                        }
                    }
                    assert!(t0.elapsed() < POLL_LIMIT, "round {round}: {done:?}");
                }
                for (i, c) in chs.iter_mut().enumerate() {
                    check_eq(
                        &format!("channel {i} round {round}"),
                        c.buffer_mut::<i64>()?,
                        &payload(i as i64, round, 16),
                    );
                }
            }
        }
        unbind_channels(&mut chs)?;
        Ok(())
    })
}

// ---- 6. K-slack, increment by info, negative increment -----------------------------------------

/// K = 4 slots of 8 elements. The sender's increment is +8 by the info key
/// `address_base_increment`; the receiver's -8 (by info in the first binding, by the
/// argument in the second): the sender reads windows 0, 1, 2, 3, ..., the receiver fills
/// windows 0, 3, 2, 1, 0, ...
fn slack_increment(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    const K: usize = 4;
    const C: usize = 8;
    let win_s = |j: usize| j % K;
    let win_r = |j: usize| (K - j % K) % K;
    for by_info in [true, false] {
        let mut ring = vec![-1i64; K * C];
        scope(|s| -> Result<()> {
            let mut req = if sender {
                w.send_init(s, ring.as_mut_slice(), p, 50)?
            } else {
                w.recv_init(s, ring.as_mut_slice(), p, 50)?
            };
            let mut info = Info::new();
            let mut inc = 0;
            if sender {
                info.set(ADDRESS_BASE_INCREMENT, &C.to_string())?;
            } else if by_info {
                info.set(ADDRESS_BASE_INCREMENT, &format!("-{C}"))?;
            } else {
                inc = -(C as isize);
                // The argument wins over the key.
                info.set(ADDRESS_BASE_INCREMENT, "5")?;
            }
            let mut ch = bind_slack_channel(&mut req, K as u32, inc, &info)?;
            assert_eq!(ch.partner().bytes(), C * 8);
            // One start at a time for two turns of the ring: after each receive, exactly the
            // windows filled so far hold data.
            for j in 0..2 * K {
                if sender {
                    let r = ch.buffer_mut::<i64>()?;
                    let ws = win_s(j);
                    r[ws * C..(ws + 1) * C].copy_from_slice(&payload(6, j as i64, C));
                    wait_go(w, p)?;
                    ch.start()?;
                    ch.wait()?;
                } else {
                    if j % K == 0 {
                        ch.buffer_mut::<i64>()?.fill(-1);
                    }
                    ch.start()?;
                    go(w, p)?;
                    ch.wait()?;
                    let r = ch.buffer_mut::<i64>()?;
                    for jj in j - j % K..j - j % K + K {
                        let wr = win_r(jj);
                        let got = &r[wr * C..(wr + 1) * C];
                        if jj <= j {
                            check_eq(
                                &format!("start {jj} window {wr}"),
                                got,
                                &payload(6, jj as i64, C),
                            );
                        } else {
                            assert!(
                                got.iter().all(|&v| v == -1),
                                "window {wr} filled before start {jj}"
                            );
                        }
                    }
                }
            }
            // K starts outstanding at a time.
            for round in 0..20 {
                let base = 2 * K + round * K;
                if sender {
                    let r = ch.buffer_mut::<i64>()?;
                    for j in base..base + K {
                        let ws = win_s(j);
                        r[ws * C..(ws + 1) * C].copy_from_slice(&payload(6, j as i64, C));
                    }
                    wait_go(w, p)?;
                    for _ in 0..K {
                        ch.start()?;
                    }
                    for _ in 0..K {
                        ch.wait()?;
                    }
                } else {
                    for _ in 0..K {
                        ch.start()?;
                    }
                    go(w, p)?;
                    for _ in 0..K {
                        ch.wait()?;
                    }
                    let r = ch.buffer_mut::<i64>()?;
                    for j in base..base + K {
                        let wr = win_r(j);
                        check_eq(
                            &format!("start {j} window {wr}"),
                            &r[wr * C..(wr + 1) * C],
                            &payload(6, j as i64, C),
                        );
                    }
                }
            }
            unbind_channel(&mut ch)?;
            Ok(())
        })?;
    }
    Ok(())
}

// ---- 7. split and merge --------------------------------------------------------------------

/// A send of 1,024 doubles fills two receives of 512; two sends of 512 fill one receive of
/// 1,024; at slackness 1 and 2. Checked element by element.
fn split_and_merge(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    const BIG: usize = 1024;
    const SMALL: usize = 512;
    let f = |round: usize, k: usize| (round * 100_000 + k) as f64 + 0.5;
    for slack in [1u32, 2] {
        // Split: the sender's 1,024 go to two receives of 512.
        let mut x = vec![0.0f64; if sender { BIG } else { SMALL }];
        scope(|s| -> Result<()> {
            let mut req = if sender {
                w.send_init(s, x.as_mut_slice(), p, 60)?
            } else {
                w.recv_init(s, x.as_mut_slice(), p, 60)?
            };
            let mut ch = bind_slack_channel(&mut req, slack, 0, &Info::new())?;
            let st = ch.partner();
            assert_eq!(st.bytes(), x_len(sender, BIG, SMALL) * 8);
            for round in 0..40 {
                if sender {
                    for (k, v) in ch.buffer_mut::<f64>()?.iter_mut().enumerate() {
                        *v = f(round, k);
                    }
                    wait_go(w, p)?;
                    ch.start()?;
                    ch.wait()?;
                } else {
                    for half in 0..2 {
                        ch.start()?;
                        if half == 0 {
                            go(w, p)?;
                        }
                        let st = ch.wait()?;
                        assert_eq!(st.source(), p);
                        let got = ch.buffer_mut::<f64>()?;
                        let want: Vec<f64> =
                            (0..SMALL).map(|k| f(round, half * SMALL + k)).collect();
                        check_eq(&format!("split round {round} half {half}"), got, &want);
                    }
                }
            }
            unbind_channel(&mut ch)?;
            Ok(())
        })?;
        // Merge: two sends of 512 fill one receive of 1,024.
        let mut y = vec![0.0f64; if sender { SMALL } else { BIG }];
        scope(|s| -> Result<()> {
            let mut req = if sender {
                w.send_init(s, y.as_mut_slice(), p, 61)?
            } else {
                w.recv_init(s, y.as_mut_slice(), p, 61)?
            };
            let mut ch = bind_slack_channel(&mut req, slack, 0, &Info::new())?;
            for round in 0..40 {
                if sender {
                    wait_go(w, p)?;
                    for half in 0..2 {
                        for (k, v) in ch.buffer_mut::<f64>()?.iter_mut().enumerate() {
                            *v = f(round, half * SMALL + k);
                        }
                        ch.start()?;
                        ch.wait()?;
                    }
                } else {
                    ch.buffer_mut::<f64>()?.fill(-1.0);
                    ch.start()?;
                    go(w, p)?;
                    ch.wait()?;
                    let want: Vec<f64> = (0..BIG).map(|k| f(round, k)).collect();
                    check_eq(
                        &format!("merge round {round}"),
                        ch.buffer_mut::<f64>()?,
                        &want,
                    );
                }
            }
            unbind_channel(&mut ch)?;
            Ok(())
        })?;
    }
    Ok(())
}

fn x_len(sender: bool, big: usize, small: usize) -> usize {
    if sender {
        big
    } else {
        small
    }
}

// ---- 8. errors ---------------------------------------------------------------------------------

/// Both ends of a blocking bind of these buffers fail with `class`.
fn bind_fails<
    S: earlybird::Equivalence + Default + Clone,
    R: earlybird::Equivalence + Default + Clone,
>(
    w: &Comm,
    p: i32,
    (ns, nr): (usize, usize),
    (ks, kr): (u32, u32),
    (ts, tr): (i32, i32),
    class: ErrorClass,
) -> Result<()> {
    let sender = w.rank() % 2 == 0;
    let mut sb = vec![S::default(); ns];
    let mut rb = vec![R::default(); nr];
    scope(|s| -> Result<()> {
        let r = if sender {
            let mut req = w.send_init(s, sb.as_mut_slice(), p, ts)?;
            bind_slack_channel(&mut req, ks, 0, &Info::new())
        } else {
            let mut req = w.recv_init(s, rb.as_mut_slice(), p, tr)?;
            bind_slack_channel(&mut req, kr, 0, &Info::new())
        };
        match r {
            Ok(_) => panic!("bind succeeded, expected {class}"),
            Err(e) => assert_eq!(e.class(), class, "{e}"),
        }
        Ok(())
    })
}

/// Misuse and mismatches: each error on the end(s) that should report it, the communicator
/// usable afterwards.
fn errors(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    // Mismatches at bind, reported on both ends.
    bind_fails::<f64, f64>(w, p, (4, 4), (2, 1), (70, 70), ErrorClass::NotSame)?;
    bind_fails::<f64, f64>(w, p, (3, 5), (1, 1), (71, 71), ErrorClass::Count)?;
    bind_fails::<f64, f64>(w, p, (5, 3), (1, 1), (72, 72), ErrorClass::Truncate)?;
    bind_fails::<f64, i32>(w, p, (2, 4), (1, 1), (73, 73), ErrorClass::Type)?;
    // Two blocking binds that can never match.
    bind_fails::<f64, f64>(w, p, (2, 2), (1, 1), (1, 2), ErrorClass::Request)?;
    // The communicator is still usable, and a good bind still works.
    let mut z = [0i64; 2];
    if sender {
        w.send(&[5i64, 6], p, 74)?;
    } else {
        w.recv(&mut z, p, 74)?;
        assert_eq!(z, [5, 6]);
    }

    let mut x = [0i64; 3];
    scope(|s| -> Result<()> {
        let mut req = if sender {
            w.send_init(s, &mut x, p, 75)?
        } else {
            w.recv_init(s, &mut x, p, 75)?
        };
        let mut ch = bind_slack_channel(&mut req, 2, 0, &Info::new())?;
        // The request bound cannot start while the channel exists.
        assert_eq!(req.start().unwrap_err().class(), ErrorClass::Request);

        // Ready mode: a send before its receive is posted fails and sends nothing.
        if sender {
            ch.buffer_mut::<i64>()?.copy_from_slice(&[-7, -7, -7]);
            let e = ch.start().unwrap_err();
            assert_eq!(e.class(), ErrorClass::Request, "{e}");
            assert!(!ch.is_active());
            go(w, p)?; // "tried"
            ch.buffer_mut::<i64>()?.copy_from_slice(&[1, 2, 3]);
            wait_go(w, p)?;
            ch.start()?;
            ch.wait()?;
        } else {
            wait_go(w, p)?; // the sender has tried
            ch.start()?;
            go(w, p)?;
            ch.wait()?;
            assert_eq!(ch.buffer_mut::<i64>()?, &[1, 2, 3]);
        }

        // More than K = 2 starts outstanding, on both ends.
        if sender {
            wait_go(w, p)?;
            ch.start()?;
            ch.start()?;
            assert_eq!(ch.start().unwrap_err().class(), ErrorClass::Request);
            // Unbind with starts outstanding.
            assert_eq!(
                unbind_channel(&mut ch).unwrap_err().class(),
                ErrorClass::Request
            );
            ch.wait()?;
            ch.wait()?;
            assert!(!ch.is_active());
        } else {
            ch.start()?;
            ch.start()?;
            let e = ch.start().unwrap_err();
            assert_eq!(e.class(), ErrorClass::Request, "{e}");
            go(w, p)?;
            assert_eq!(
                unbind_channel(&mut ch).unwrap_err().class(),
                ErrorClass::Request
            );
            ch.wait()?;
            ch.wait()?;
        }
        unbind_channel(&mut ch)?;

        // request_free on a channel: MPI_ERR_REQUEST (the channel is dropped, not unbound).
        // (The receive end waits until the send end's bind has returned: the send end maps
        // the channel's memory before its bind returns, and a receive end dropped before
        // then takes the memory with it.)
        let ch = bind_channel(&mut req, &Info::new())?;
        if sender {
            go(w, p)?;
        } else {
            wait_go(w, p)?;
        }
        let e = ch.into_request().free().unwrap_err();
        assert_eq!(e.class(), ErrorClass::Request, "{e}");

        // The partner dropping its channel without unbinding: a wait fails, not hangs.
        let mut ch = bind_channel(&mut req, &Info::new())?;
        if sender {
            wait_go(w, p)?;
            drop(ch);
            go(w, p)?;
        } else {
            ch.start()?;
            go(w, p)?;
            wait_go(w, p)?; // the sender's end is gone
            let e = ch.wait().unwrap_err();
            assert_eq!(e.class(), ErrorClass::Request, "{e}");
            assert!(e.detail().contains("without unbinding"), "{e}");
            drop(ch);
        }

        // The request is a plain persistent request again.
        if sender {
            req.buffer_mut::<i64>()?.copy_from_slice(&[9, 8, 7]);
            req.start()?;
            req.wait()?;
        } else {
            req.start()?;
            req.wait()?;
            assert_eq!(req.buffer_mut::<i64>()?, &[9, 8, 7]);
        }
        Ok(())
    })
}

// ---- 9. unbinding ------------------------------------------------------------------------------

/// unbind_channels in an order other than the bind's and the partner's; iunbind_channel
/// then wait; the requests bound work as ordinary persistent requests afterwards.
fn unbind_orders(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    let mut bufs = [[0i64; 4]; 4];
    scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        for (i, b) in bufs.iter_mut().enumerate() {
            let tag = 80 + i as i32;
            reqs.push(if sender {
                w.send_init(s, b, p, tag)?
            } else {
                w.recv_init(s, b, p, tag)?
            });
        }
        let ids = [0i64, 1, 2, 3];
        for _pass in 0..3 {
            let mut chs = bind_channels(&mut reqs, &[])?;
            for round in 0..5 {
                exchange(&mut chs, &[sender; 4], &ids, w, p, round)?;
            }
            let mut last = chs.pop().expect("4 channels");
            // Channels 0..3: the sender unbinds [2, 0, 1], the receiver [1, 2, 0].
            if sender {
                chs.rotate_left(2);
            } else {
                chs.rotate_left(1);
            }
            unbind_channels(&mut chs)?;
            assert!(chs.iter().all(|c| c.is_null()));
            // Channel 3: iunbind, then wait.
            let mut r = iunbind_channel(&mut last)?;
            assert!(last.is_null());
            assert_eq!(last.start().unwrap_err().class(), ErrorClass::Request);
            r.wait()?;
            // Every request is an ordinary persistent one again.
            for round in 0..3 {
                if sender {
                    wait_go(w, p)?;
                    for (i, q) in reqs.iter_mut().enumerate() {
                        q.buffer_mut::<i64>()?
                            .copy_from_slice(&payload(i as i64, 100 + round, 4));
                    }
                    start_all(&mut reqs)?;
                    wait_all(&mut reqs)?;
                } else {
                    start_all(&mut reqs)?;
                    go(w, p)?;
                    wait_all(&mut reqs)?;
                    for (i, q) in reqs.iter_mut().enumerate() {
                        check_eq(
                            "plain after unbind",
                            q.buffer_mut::<i64>()?,
                            &payload(i as i64, 100 + round, 4),
                        );
                    }
                }
            }
        }
        Ok(())
    })
}

/// Unbinding at once after a blocking bind, on both ends, many times: the receive end's
/// unbind must not close the channel's memory before the send end has mapped it (the send
/// end's bind completes only when it has).
fn unbind_right_after_bind(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    let mut x = [0i64; 2];
    scope(|s| -> Result<()> {
        let mut req = if sender {
            w.send_init(s, &mut x, p, 85)?
        } else {
            w.recv_init(s, &mut x, p, 85)?
        };
        for _ in 0..300 {
            let mut ch = bind_channel(&mut req, &Info::new())?;
            unbind_channel(&mut ch)?;
        }
        Ok(())
    })
}

// ---- 10. bundles -------------------------------------------------------------------------------

/// A bundle of a bound channel, a persistent send/receive of the partner on another tag (the
/// other direction), a persistent allreduce and a persistent barrier on world, started and
/// waited 100 times as one; the data changed between starts through member_mut.
fn bundle_of_all(u: &Universe) -> Result<()> {
    let w = u.world();
    let n = w.size() as i64;
    let me = w.rank() as i64;
    let pair = partner(w);
    let sender = me % 2 == 0;
    let mut cbuf = [0i64; 8];
    let mut pbuf = [0i64; 5];
    let mut asend = [0i64; 3];
    let mut arecv = [0i64; 3];
    scope(|s| -> Result<()> {
        let mut members = Vec::new();
        if let Some(p) = pair {
            let (mut req, back) = if sender {
                (
                    w.send_init(s, &mut cbuf, p, 90)?,
                    w.recv_init(s, &mut pbuf, p, 91)?,
                )
            } else {
                (
                    w.recv_init(s, &mut cbuf, p, 90)?,
                    w.send_init(s, &mut pbuf, p, 91)?,
                )
            };
            let ch = bind_channel(&mut req, &Info::new())?;
            members.push(ch.into());
            members.push(back);
        }
        let coll0 = members.len();
        members.push(w.allreduce_init(s, &mut asend, &mut arecv, &Op::SUM)?);
        members.push(w.barrier_init(s)?);
        let mut b = Bundle::new(members)?;
        for round in 0..100i64 {
            b.member_mut(coll0)?
                .send_buffer_mut::<i64>()?
                .copy_from_slice(&[me + round, 1, -round]);
            match pair {
                Some(p) if sender => {
                    b.member_mut(0)?
                        .buffer_mut::<i64>()?
                        .copy_from_slice(&payload(1, round, 8));
                    wait_go(w, p)?;
                    b.start()?;
                }
                Some(p) => {
                    b.member_mut(1)?
                        .buffer_mut::<i64>()?
                        .copy_from_slice(&payload(2, round, 5));
                    b.start()?;
                    go(w, p)?;
                }
                None => b.start()?,
            }
            assert!(b.is_active());
            b.wait()?;
            assert!(!b.is_active());
            if pair.is_some() {
                if sender {
                    check_eq(
                        "bundle back",
                        b.member_mut(1)?.buffer_mut::<i64>()?,
                        &payload(2, round, 5),
                    );
                } else {
                    check_eq(
                        "bundle channel",
                        b.member_mut(0)?.buffer_mut::<i64>()?,
                        &payload(1, round, 8),
                    );
                }
            }
            let sum: i64 = (0..n).map(|r| r + round).sum();
            assert_eq!(
                b.member_mut(coll0)?.buffer_mut::<i64>()?,
                &[sum, n, -round * n]
            );
        }
        let mut members = b.into_members()?.into_iter();
        if pair.is_some() {
            let mut ch = Channel::try_from(members.next().expect("the channel member"))
                .expect("member 0 is the channel");
            unbind_channel(&mut ch)?;
        }
        Ok(())
    })
}

scenarios! {
    ibind_test_wait [2, 3, 4];
    bind_channels_any_order [2, 3, 4];
    intercomm_channels [2, 3, 4];
    wildcard_bind [2, 3, 4];
    start_all_wait_all [2, 3, 4];
    slack_increment [2, 3, 4];
    split_and_merge [2, 3, 4];
    errors [2, 3, 4];
    unbind_orders [2, 3, 4];
    unbind_right_after_bind [2, 3, 4];
    bundle_of_all [2, 3, 4];
}
