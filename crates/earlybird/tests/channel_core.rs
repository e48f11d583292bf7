//! Bound channels (seed 000, proposal 1 and 3): binding, slack-1 lock step, K-slack circular
//! buffers, in-place slots, unbinding.
//!
//! Pairs are ranks (2i, 2i+1); an odd rank out does nothing (binding is collective over the
//! pair only). Ready mode is kept by a zero-byte "posted" message from the receiver on the
//! communicator after it started its receive.

mod common;
use earlybird::{
    bind_channel, bind_slack_channel, scope, unbind_channel, ErrHandler, ErrorClass, Info, Result,
    Universe,
};

const TAG: i32 = 5;
const GO: i32 = 6;

/// The partner of this rank, or None for the odd rank out.
fn partner(w: &earlybird::Comm) -> Option<i32> {
    let p = w.rank() ^ 1;
    (p < w.size()).then_some(p)
}

/// Slack-1 lock step: the sender waits for the receiver's "posted" note before each start.
fn slack1_lock_step(u: &Universe) -> Result<()> {
    let w = u.world();
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    let mut x = [0u64; 3];
    scope(|s| -> Result<()> {
        let mut req = if sender {
            w.send_init(s, &mut x, p, TAG)?
        } else {
            w.recv_init(s, &mut x, p, TAG)?
        };
        let mut ch = bind_channel(&mut req, &Info::new())?;
        let st = ch.partner();
        assert_eq!(st.source(), p);
        assert_eq!(st.tag(), TAG);
        for i in 0..2000u64 {
            if sender {
                ch.buffer_mut::<u64>()?.copy_from_slice(&[i, i * 3, !i]);
                w.recv(&mut [0u8; 0], p, GO)?;
                ch.start()?;
                ch.wait()?;
            } else {
                ch.start()?;
                w.send(&[0u8; 0], p, GO)?;
                let st = ch.wait()?;
                assert_eq!(st.source(), p);
                assert_eq!(st.bytes(), 24);
                assert_eq!(ch.buffer_mut::<u64>()?, &[i, i * 3, !i]);
            }
        }
        unbind_channel(&mut ch)?;
        assert!(ch.is_null());
        // The request it came from is usable again.
        if sender {
            w.recv(&mut [0u8; 0], p, GO)?;
            req.start()?;
        } else {
            req.start()?;
            w.send(&[0u8; 0], p, GO)?;
        }
        req.wait()?;
        Ok(())
    })
}

/// K-slack circular buffer (the seed's 5 slots of 1,024 doubles) in place on both ends.
fn circular_in_place(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    const K: u32 = 5;
    const N: usize = 1024;
    let mut ring = vec![0.0f64; K as usize * N];
    scope(|s| -> Result<()> {
        let mut req = if sender {
            w.ssend_init(s, &mut ring, p, TAG)?
        } else {
            w.recv_init(s, &mut ring, p, TAG)?
        };
        let mut ch = bind_slack_channel(&mut req, K, N as isize, &Info::new())?;
        let starts = 500u64;
        if sender {
            for i in 0..starts {
                if ch.is_active() && i >= K as u64 {
                    ch.wait()?;
                }
                loop {
                    match ch.next_slot_mut::<f64>() {
                        Ok(slot) => {
                            for (k, v) in slot.iter_mut().enumerate() {
                                *v = (i * N as u64 + k as u64) as f64;
                            }
                            break;
                        }
                        Err(e) if e.class() == ErrorClass::Request => std::thread::yield_now(),
                        Err(e) => return Err(e),
                    }
                }
                ch.start_filled()?;
            }
            while ch.is_active() {
                ch.wait()?;
            }
        } else {
            for _ in 0..K {
                ch.start()?;
            }
            for i in 0..starts {
                ch.wait_in_place()?;
                let got = ch.arrived::<f64>()?;
                for (k, v) in got.iter().enumerate() {
                    assert_eq!(
                        *v,
                        (i * N as u64 + k as u64) as f64,
                        "start {i} element {k}"
                    );
                }
                if i + (K as u64) < starts {
                    ch.start()?;
                }
            }
        }
        unbind_channel(&mut ch)?;
        Ok(())
    })
}

/// Misuse: a request bound twice, a start of a request bound to a channel, more than K
/// starts, free of a channel. (Unbinding a plain request does not compile: `unbind_channel`
/// takes a `Channel`.)
fn misuse(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let Some(p) = partner(w) else { return Ok(()) };
    let sender = w.rank() % 2 == 0;
    let mut x = [0u32; 2];
    scope(|s| -> Result<()> {
        let mut req = if sender {
            w.ssend_init(s, &mut x, p, TAG)?
        } else {
            w.recv_init(s, &mut x, p, TAG)?
        };
        let mut ch = bind_channel(&mut req, &Info::new())?;
        let e = req.start().unwrap_err();
        assert_eq!(e.class(), ErrorClass::Request, "{e}");
        let e = bind_channel(&mut req, &Info::new()).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Request, "{e}");
        assert!(e.to_string().contains("bound to a channel already"), "{e}");
        ch.start()?;
        let e = ch.start().unwrap_err();
        assert_eq!(e.class(), ErrorClass::Request, "{e}");
        ch.wait()?;
        let e = ch.into_request().free().unwrap_err();
        assert_eq!(e.class(), ErrorClass::Request, "{e}");
        Ok(())
    })
}

scenarios! {
    slack1_lock_step [2, 3];
    circular_in_place [2, 4];
    misuse [2];
}
