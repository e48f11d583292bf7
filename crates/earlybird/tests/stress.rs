//! Long stress runs, all `#[ignore]`d (run them with
//! `cargo test -p earlybird --test stress -- --ignored`):
//!
//! Each has a `threads` and a `procs` test (e.g. `flood_100k::procs`).
//!
//! * `flood_100k`: 100,000 messages of mixed sizes (eager, flow-limited, rendezvous) to a
//!   rank that starts receiving only once the sender is blocked on flow control, received
//!   alternately by specific and wildcard receives;
//! * `many_senders_long`: every rank streams 3,000 mixed messages to rank 0, which takes
//!   them with ANY_SOURCE/ANY_TAG and checks each sender's order;
//! * `persistent_20k`: 20,000 start_all/wait_all rounds of a persistent ring;
//! * `cancel_race`: 3,000 sends cancelled while the receive is being posted; sender and
//!   receiver must agree on every outcome.

mod common;
use common::*;
use earlybird::{scope, start_all, wait_all, Result, Universe, ANY_SOURCE, ANY_TAG};

fn pair(u: &Universe) -> Option<(i32, bool)> {
    let w = u.world();
    let p = w.rank() ^ 1;
    (p < w.size()).then_some((p, w.rank() % 2 == 0))
}

fn mixed_len(u: &Universe, i: usize) -> usize {
    let e = u.eager_limit_bytes();
    [0, 8, 64, e, e + 1, 1000, 24, 100 << 10][i % 8]
}

fn payload(u: &Universe, src: i32, i: usize) -> Vec<u8> {
    let len = mixed_len(u, i);
    let mut v = vec![(i as u8) ^ (src as u8); len];
    let k = len.min(8);
    v[..k].copy_from_slice(&(i as u64).to_le_bytes()[..k]);
    v
}

fn flood_100k(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    const N: usize = 100_000;
    if sender {
        for i in 0..N {
            w.send(&payload(u, w.rank(), i), peer, 3)?;
        }
    } else {
        await_sender_blocked(u, peer, 3);
        let mut buf = vec![0u8; 100 << 10];
        for i in 0..N {
            let (src, tag) = if i % 2 == 0 {
                (peer, 3)
            } else {
                (ANY_SOURCE, ANY_TAG)
            };
            let st = w.recv(&mut buf, src, tag)?;
            assert_eq!(st.bytes(), mixed_len(u, i), "message {i} out of order");
            check_eq(
                &format!("message {i}"),
                &buf[..st.bytes()],
                &payload(u, peer, i),
            );
        }
    }
    Ok(())
}

fn many_senders_long(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    const N: usize = 3000;
    if me == 0 {
        let mut buf = vec![0u8; 100 << 10];
        let mut next = vec![0usize; n as usize];
        for _ in 0..N * (n as usize - 1) {
            let st = w.recv(&mut buf, ANY_SOURCE, ANY_TAG)?;
            let src = st.source();
            let i = next[src as usize];
            assert_eq!(
                st.bytes(),
                mixed_len(u, i),
                "message {i} from {src} out of order"
            );
            check_eq(
                &format!("message {i} from {src}"),
                &buf[..st.bytes()],
                &payload(u, src, i),
            );
            next[src as usize] += 1;
        }
    } else {
        for i in 0..N {
            w.send(&payload(u, me, i), 0, (i % 5) as i32)?;
        }
    }
    Ok(())
}

fn persistent_20k(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let e = u.eager_limit_bytes();
    let a = vec![w.rank() as u8; 8];
    let b = vec![w.rank() as u8; e + 1];
    let (mut ga, mut gb) = (vec![0u8; 8], vec![0u8; e + 1]);
    scope(|s| -> Result<()> {
        let mut all = vec![
            w.recv_init(s, &mut ga, left, 0)?,
            w.recv_init(s, &mut gb, left, 1)?,
            w.send_init(s, &a, right, 0)?,
            w.ssend_init(s, &b, right, 1)?,
        ];
        for _ in 0..20_000 {
            start_all(&mut all)?;
            wait_all(&mut all)?;
        }
        Ok(())
    })?;
    assert!(ga.iter().chain(&gb).all(|&x| x == left as u8));
    Ok(())
}

fn cancel_race(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some((peer, sender)) = pair(u) else {
        return Ok(());
    };
    let e = u.eager_limit_bytes();
    for i in 0..3000usize {
        let len = [8, e + 1, 64 << 10][i % 3];
        let data = vec![i as u8; len];
        if sender {
            let cancelled = scope(|s| -> Result<bool> {
                let mut r = if i % 2 == 0 {
                    w.issend(s, &data, peer, 1)?
                } else {
                    w.isend(s, &data, peer, 1)?
                };
                r.cancel()?;
                Ok(r.wait()?.is_cancelled())
            })?;
            w.send(&[cancelled as u8], peer, 2)?;
            // Next round only once the receiver has settled its receive (else that receive,
            // still posted, could match the next round's message).
            w.recv(&mut [0u8; 0], peer, 3)?;
        } else {
            let mut buf = vec![0u8; len];
            let mut outcome = [0u8];
            scope(|s| -> Result<()> {
                let mut r = w.irecv(s, &mut buf, peer, 1)?;
                w.recv(&mut outcome, peer, 2)?;
                if outcome[0] == 1 {
                    r.cancel()?;
                    assert!(
                        r.wait()?.is_cancelled(),
                        "iteration {i}: the send was cancelled, yet the receive matched"
                    );
                } else {
                    let st = r.wait()?;
                    assert!(!st.is_cancelled());
                    assert_eq!(st.bytes(), len);
                }
                Ok(())
            })?;
            if outcome[0] == 0 {
                assert!(buf.iter().all(|&x| x == i as u8), "iteration {i}: data");
            }
            w.send(&[0u8; 0], peer, 3)?;
        }
    }
    Ok(())
}

scenarios! {
    child_only flood_100k;
    child_only many_senders_long;
    child_only persistent_20k;
    child_only cancel_race;
}

macro_rules! stress {
    ($($name:ident: $($n:literal),*;)*) => {
        $(mod $name {
            use super::*;
            #[test]
            #[ignore = "stress run (long)"]
            fn threads() {
                for n in [$($n),*] {
                    run_threads(n, Scn::Borrowed(super::$name));
                }
            }
            #[test]
            #[ignore = "stress run (long)"]
            fn procs() {
                for n in [$($n),*] {
                    run_procs(stringify!($name), n);
                }
            }
        })*
    };
}

stress! {
    flood_100k: 2, 8;
    many_senders_long: 3, 8;
    persistent_20k: 2, 8;
    cancel_race: 2, 8;
}
