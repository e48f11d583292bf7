//! Matching (MPI 4.1 §3.5, §3.2.4-3.2.5): ANY_SOURCE and ANY_TAG, posted-receive order,
//! status source / tag / count / elements, zero-length messages, non-overtaking order of
//! mixed-size messages across the eager/rendezvous boundary (and past the flow limit),
//! ERR_TRUNCATE with the status filled, and the tag upper bound.

mod common;
use common::*;
use earlybird::{
    scope, wait_all, ErrHandler, ErrorClass, Result, Universe, ANY_SOURCE, ANY_TAG, TAG_UB,
};

/// Each rank r > 0 sends one message tagged 10*r to rank 0, which receives them with
/// ANY_SOURCE and a specific tag in the reverse order of ranks, so the source is decided by
/// the tag.
fn any_source_specific_tag(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    if me == 0 {
        for r in (1..n).rev() {
            let mut got = [0i32; 4];
            let st = w.recv(&mut got, ANY_SOURCE, 10 * r)?;
            assert_eq!(
                (st.source(), st.tag(), st.count::<i32>()),
                (r, 10 * r, Some(4))
            );
            assert_eq!(got, [r; 4]);
        }
    } else {
        w.send(&[me; 4], 0, 10 * me)?;
    }
    Ok(())
}

/// ANY_TAG with a specific source receives that source's messages in order; ANY_SOURCE with
/// ANY_TAG receives everything exactly once.
fn any_tag_and_both_wildcards(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    if me == 0 {
        for r in 1..n {
            let mut got = [0i32; 2];
            let st = w.recv(&mut got, r, ANY_TAG)?;
            assert_eq!((st.source(), st.tag()), (r, 5), "first message of rank {r}");
            assert_eq!(got, [r, 5]);
            let st = w.recv(&mut got, r, ANY_TAG)?;
            assert_eq!(
                (st.source(), st.tag()),
                (r, 3),
                "second message of rank {r}"
            );
            assert_eq!(got, [r, 3]);
        }
        let mut seen = vec![0; n as usize];
        for _ in 1..n {
            let mut got = [0i32; 2];
            let st = w.recv(&mut got, ANY_SOURCE, ANY_TAG)?;
            assert_eq!(st.tag(), 77);
            assert_eq!(got, [st.source(), 77]);
            seen[st.source() as usize] += 1;
        }
        assert!(
            seen[1..].iter().all(|&c| c == 1),
            "each rank's message once: {seen:?}"
        );
    } else {
        w.send(&[me, 5], 0, 5)?;
        w.send(&[me, 3], 0, 3)?;
        w.send(&[me, 77], 0, 77)?;
    }
    Ok(())
}

/// Posted receives match in the order they were posted: a wildcard receive posted before a
/// specific one takes the first message even though both match it.
fn posted_order(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let (peer, receiver) = match me {
        0 => (1, false),
        1 => (0, true),
        _ => return Ok(()),
    };
    let _ = n;
    if receiver {
        let (mut a, mut b, mut c, mut d) = ([0u8; 1], [0u8; 1], [0u8; 1], [0u8; 1]);
        let sts = scope(|s| -> Result<_> {
            let wild = w.irecv(s, &mut a, ANY_SOURCE, ANY_TAG)?; // posted first: gets msg 1 (tag 5)
            let t5 = w.irecv(s, &mut b, peer, 5)?; // gets msg 3 (tag 5)
            let wild2 = w.irecv(s, &mut c, peer, ANY_TAG)?; // gets msg 2 (tag 6)
            let t6 = w.irecv(s, &mut d, ANY_SOURCE, 6)?; // gets msg 4 (tag 6)
            w.send(&[0u8; 0], peer, 99)?;
            let mut reqs = vec![wild, t5, wild2, t6];
            wait_all(&mut reqs)
        })?;
        assert_eq!([a[0], b[0], c[0], d[0]], [1, 3, 2, 4]);
        assert_eq!(
            [sts[0].tag(), sts[1].tag(), sts[2].tag(), sts[3].tag()],
            [5, 5, 6, 6]
        );
    } else {
        w.recv(&mut [0u8; 0], peer, 99)?;
        w.send(&[1u8], peer, 5)?;
        w.send(&[2u8], peer, 6)?;
        w.send(&[3u8], peer, 5)?;
        w.send(&[4u8], peer, 6)?;
    }
    Ok(())
}

/// Status: source, tag, count in several types (MPI_UNDEFINED as None when the bytes are not
/// a whole number of elements), elements, bytes.
fn status_counts(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let mut got = [0u8; 32];
    let st = w.sendrecv(&[me as u8; 12], right, 21, &mut got, left, 21)?;
    assert_eq!(st.source(), left);
    assert_eq!(st.tag(), 21);
    assert_eq!(st.bytes(), 12);
    assert_eq!(st.count::<u8>(), Some(12));
    assert_eq!(st.count::<u32>(), Some(3));
    assert_eq!(st.elements::<u32>(), Some(3));
    assert_eq!(
        st.count::<u64>(),
        None,
        "12 bytes are not a whole number of u64"
    );
    assert_eq!(st.elements::<f64>(), None);
    assert_eq!(st.error(), ErrorClass::Success);
    assert!(!st.is_cancelled());
    let l = left as u8;
    assert_eq!(got[..12], [l; 12]);
    assert_eq!(got[12..], [0u8; 20], "bytes past the message are untouched");
    Ok(())
}

/// Zero-length messages in every mode and from nonblocking calls: status count 0, source and
/// tag right, a non-empty receive buffer untouched; they match and order like any other.
fn zero_length(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let empty: [f64; 0] = [];
    u.buffer_attach(earlybird::BSEND_OVERHEAD)?;
    let mut big = [1.5f64; 4];
    scope(|s| -> Result<()> {
        let mut reqs = vec![
            w.irecv(s, &mut big, left, 1)?,
            w.isend(s, &empty, right, 1)?,
        ];
        let sts = wait_all(&mut reqs)?;
        assert_eq!(
            (sts[0].source(), sts[0].tag(), sts[0].count::<f64>()),
            (left, 1, Some(0))
        );
        Ok(())
    })?;
    assert_eq!(big, [1.5; 4]);
    // Blocking modes, in a ring with rank 0 going first.
    for (tag, mode) in [(2, "send"), (3, "ssend"), (4, "bsend")] {
        let send = || match mode {
            "send" => w.send(&empty, right, tag),
            "ssend" => w.ssend(&empty, right, tag),
            _ => w.bsend(&empty, right, tag),
        };
        let mut e: [f64; 0] = [];
        let st = if w.rank() == 0 {
            send()?;
            w.recv(&mut e, left, tag)?
        } else {
            let st = w.recv(&mut e, left, tag)?;
            send()?;
            st
        };
        assert_eq!(
            (st.source(), st.tag(), st.bytes()),
            (left, tag, 0),
            "{mode}"
        );
    }
    u.buffer_detach()?;
    // Many zero-length messages with distinct tags arrive in order under ANY_TAG.
    for t in 0..50 {
        w.send(&empty, right, 1000 + t)?;
    }
    for t in 0..50 {
        let st = w.recv(&mut big, left, ANY_TAG)?;
        assert_eq!((st.tag(), st.bytes()), (1000 + t, 0));
    }
    Ok(())
}

/// The size of message `i` in the mixed streams below: cycles through sizes on both sides of
/// the eager limit, with runs of eager-limit messages long enough to pass the flow limit.
fn mixed_len(u: &Universe, i: usize) -> usize {
    let e = u.eager_limit_bytes();
    const CYCLE: usize = 12;
    match i % CYCLE {
        0 => 0,
        1 => 8,
        2 => e,
        3 => e + 1,
        4 => 1,
        5 => 200 << 10,
        6 => e.saturating_sub(1),
        7 => 64 << 10,
        8 => 24,
        9 => 25,
        _ => e,
    }
}

/// Payload of message `i` from `src`: its sequence number in the first 8 bytes, then a
/// pattern.
fn mixed_payload(u: &Universe, src: i32, i: usize) -> Vec<u8> {
    let len = mixed_len(u, i);
    let mut v = pattern((src as u64) << 32 | i as u64, len);
    let seq = (i as u64).to_le_bytes();
    let k = len.min(8);
    v[..k].copy_from_slice(&seq[..k]);
    v
}

const STREAM: usize = 60;
const STREAM_TAG: i32 = 31;

/// Non-overtaking: each rank isends STREAM messages of mixed sizes (eager, rendezvous, and
/// eager ones forced to rendezvous by the flow limit) with one tag to its right neighbour,
/// all in flight at once; the neighbour receives them with a specific source and tag, then
/// with wildcards, and they arrive in the order sent.
fn non_overtaking_same_tag(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let msgs: Vec<Vec<u8>> = (0..STREAM).map(|i| mixed_payload(u, me, i)).collect();
    let max = (0..STREAM).map(|i| mixed_len(u, i)).max().unwrap();
    scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        for m in &msgs {
            reqs.push(w.isend(s, m, right, STREAM_TAG)?);
        }
        let mut buf = vec![0u8; max];
        for i in 0..STREAM {
            // First half specific, second half wildcards.
            let (src, tag) = if i < STREAM / 2 {
                (left, STREAM_TAG)
            } else {
                (ANY_SOURCE, ANY_TAG)
            };
            let st = w.recv(&mut buf, src, tag)?;
            assert_eq!((st.source(), st.tag()), (left, STREAM_TAG));
            assert_eq!(
                st.bytes(),
                mixed_len(u, i),
                "message {i} from {left} arrived out of order (wrong size)"
            );
            check_eq(
                &format!("message {i} from {left}"),
                &buf[..st.bytes()],
                &mixed_payload(u, left, i),
            );
        }
        wait_all(&mut reqs)?;
        Ok(())
    })
}

/// Non-overtaking with several senders and wildcards: every rank but 0 sends STREAM mixed
/// messages to rank 0 with blocking sends (each sender waits for rendezvous ones); rank 0
/// receives them all with ANY_SOURCE/ANY_TAG and checks each sender's sequence.
fn non_overtaking_many_senders(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    if me == 0 {
        let max = (0..STREAM).map(|i| mixed_len(u, i)).max().unwrap();
        let mut buf = vec![0u8; max];
        let mut next = vec![0usize; n as usize];
        for _ in 0..STREAM * (n as usize - 1) {
            let st = w.recv(&mut buf, ANY_SOURCE, ANY_TAG)?;
            let src = st.source();
            let i = next[src as usize];
            assert_eq!(st.tag(), STREAM_TAG + (i % 2) as i32);
            assert_eq!(
                st.bytes(),
                mixed_len(u, i),
                "message {i} from {src} out of order (wrong size)"
            );
            check_eq(
                &format!("message {i} from {src}"),
                &buf[..st.bytes()],
                &mixed_payload(u, src, i),
            );
            next[src as usize] += 1;
        }
    } else {
        for i in 0..STREAM {
            // Alternate two tags: order holds per (source, tag) and here also across them,
            // since the receiver matches everything with wildcards.
            w.send(&mixed_payload(u, me, i), 0, STREAM_TAG + (i % 2) as i32)?;
        }
    }
    Ok(())
}

/// Receives posted before the messages arrive (wildcards) are matched in posting order by
/// messages in sending order: the i-th irecv gets the i-th message.
fn non_overtaking_preposted(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let me = w.rank();
    let max = (0..STREAM).map(|i| mixed_len(u, i)).max().unwrap();
    let mut bufs: Vec<Vec<u8>> = (0..STREAM).map(|_| vec![0u8; max]).collect();
    let msgs: Vec<Vec<u8>> = (0..STREAM).map(|i| mixed_payload(u, me, i)).collect();
    let mut ready: [u8; 0] = [];
    let sts = scope(|s| -> Result<_> {
        // The right neighbour's "ready" must not be taken by the wildcards: a receive for it
        // posted before them matches it first.
        let mut ready = w.irecv(s, &mut ready, right, 5)?;
        let mut reqs = Vec::new();
        for b in bufs.iter_mut() {
            reqs.push(w.irecv(s, b, ANY_SOURCE, ANY_TAG)?);
        }
        // Tell the left neighbour our receives are posted, wait for the right one.
        w.send(&[0u8; 0], left, 5)?;
        ready.wait()?;
        for m in &msgs {
            reqs.push(w.isend(s, m, right, STREAM_TAG)?);
        }
        wait_all(&mut reqs)
    })?;
    for i in 0..STREAM {
        assert_eq!((sts[i].source(), sts[i].tag()), (left, STREAM_TAG));
        assert_eq!(
            sts[i].bytes(),
            mixed_len(u, i),
            "preposted receive {i} got the wrong message"
        );
        check_eq(
            &format!("preposted {i}"),
            &bufs[i][..sts[i].bytes()],
            &mixed_payload(u, left, i),
        );
    }
    Ok(())
}

/// A receive buffer too small: MPI_ERR_TRUNCATE, the error carries the filled status
/// (source, tag, error class) and its message names the sizes; the bytes that fit arrive; the
/// sender completes normally; later messages are unaffected. Blocking, nonblocking,
/// wait_all (MPI_ERR_IN_STATUS) and matched-probe receives; eager and rendezvous.
fn truncate(u: &Universe) -> Result<()> {
    let w = u.world();
    let me = w.rank();
    let partner = me ^ 1;
    if partner >= w.size() {
        return Ok(());
    }
    let e = u.eager_limit_bytes();
    let lens = [100usize, (e + 1).max(11), 1 << 20];
    if me % 2 == 0 {
        for (k, &len) in lens.iter().enumerate() {
            let m = pattern(k as u64, len);
            // Tags in the order the receiver takes them (rendezvous sends block until then).
            for t in [0, 1, 2] {
                w.send(&m, partner, t)?;
            }
            w.send(&[k as u8; 3], partner, 9)?;
            w.send(&m, partner, 3)?;
        }
    } else {
        w.set_errhandler(ErrHandler::Return);
        for (k, &len) in lens.iter().enumerate() {
            let m = pattern(k as u64, len);
            let check = |err: earlybird::Error, small: &[u8], tag: i32, how: &str| {
                assert_eq!(err.class(), ErrorClass::Truncate, "{how}: {err}");
                let st = err
                    .status()
                    .unwrap_or_else(|| panic!("{how}: truncation error without a status"));
                assert_eq!((st.source(), st.tag()), (partner, tag), "{how}: status");
                assert_eq!(st.error(), ErrorClass::Truncate);
                assert!(st.bytes() <= small.len());
                assert!(
                    err.to_string().contains(&len.to_string()),
                    "{how}: message should name the length {len}: {err}"
                );
                check_eq(how, small, &m[..small.len()]);
            };
            let mut small = [0u8; 10];
            let err = w
                .recv(&mut small, partner, 0)
                .expect_err("blocking recv must truncate");
            check(err, &small, 0, "blocking recv");
            let mut small = [0u8; 10];
            let err = scope(|s| -> Result<()> {
                let mut r = w.irecv(s, &mut small, partner, 1)?;
                r.wait()?;
                Ok(())
            })
            .expect_err("irecv must truncate");
            check(err, &small, 1, "irecv");
            let mut small = [0u8; 10];
            let mut fine = [0u8; 4];
            let err = scope(|s| -> Result<Vec<earlybird::Status>> {
                let mut reqs = vec![
                    w.irecv(s, &mut small, partner, 2)?,
                    w.irecv(s, &mut fine, partner, 9)?,
                ];
                wait_all(&mut reqs)
            })
            .expect_err("wait_all must report the truncation");
            assert_eq!(err.class(), ErrorClass::InStatus, "{err}");
            assert!(
                err.to_string().contains("request 0")
                    && err.to_string().contains("MPI_ERR_TRUNCATE"),
                "{err}"
            );
            assert_eq!(fine, [k as u8, k as u8, k as u8, 0]);
            check_eq("wait_all truncated", &small, &m[..10]);
            let (msg, st) = w.mprobe(partner, 3)?;
            assert_eq!(st.bytes(), len, "mprobe reports the full length");
            let mut small = [0u8; 10];
            let err = msg.recv(&mut small).expect_err("mrecv must truncate");
            check(err, &small, 3, "mrecv");
        }
        w.set_errhandler(ErrHandler::Fatal);
    }
    Ok(())
}

/// TAG_UB is at least 2^30 - 1 and a message tagged TAG_UB travels (specific and ANY_TAG
/// receives); tag 0 too.
fn tag_upper_bound(u: &Universe) -> Result<()> {
    let w = u.world();
    // (black_box: TAG_UB is a constant today, but the requirement is what is tested.)
    let ub = std::hint::black_box(TAG_UB);
    assert!(ub >= (1 << 30) - 1, "TAG_UB {ub} is below 2^30-1");
    let (right, left) = ring(w);
    let mut got = [0u16; 3];
    let st = w.sendrecv(&[1u16, 2, 3], right, TAG_UB, &mut got, left, TAG_UB)?;
    assert_eq!((st.tag(), got), (TAG_UB, [1, 2, 3]));
    let st = w.sendrecv(&[4u16, 5, 6], right, TAG_UB, &mut got, left, ANY_TAG)?;
    assert_eq!((st.tag(), got), (TAG_UB, [4, 5, 6]));
    let st = w.sendrecv(&[7u16, 8, 9], right, 0, &mut got, left, ANY_TAG)?;
    assert_eq!((st.tag(), got), (0, [7, 8, 9]));
    // A rendezvous-sized one with the largest tag as well.
    let big = pattern(3, u.eager_limit_bytes() * 2);
    let mut gbig = vec![0u8; big.len()];
    let st = w.sendrecv(&big, right, TAG_UB - 1, &mut gbig, ANY_SOURCE, TAG_UB - 1)?;
    assert_eq!((st.source(), st.tag()), (left, TAG_UB - 1));
    check_eq("TAG_UB-1 rendezvous", &gbig, &big);
    Ok(())
}

scenarios! {
    any_source_specific_tag;
    any_tag_and_both_wildcards;
    posted_order [2, 3];
    status_counts;
    zero_length;
    non_overtaking_same_tag;
    non_overtaking_many_senders;
    non_overtaking_preposted;
    truncate;
    tag_upper_bound;
}
