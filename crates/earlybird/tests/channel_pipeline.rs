//! Seed 000's pipeline example (`examples/channel_pipeline.rs`): a K = 5 slack channel over
//! circular buffers of 5 x 1,024 doubles, 100,000 starts from rank 0 to rank 1 with every
//! element of every message checked, in ready and synchronous mode, on the copy path (the
//! circular buffers) and the in-place path (the slots), as thread and process jobs (a third
//! rank, where there is one, stays idle); short and ragged runs; the limits of the copy path
//! that make it run in rounds of K; and the built example under `ebrun -n 2`.

mod common;

#[path = "../examples/channel_pipeline.rs"]
#[allow(dead_code)]
mod pipeline;

use common::JobOutput;
use earlybird::{
    bind_slack_channel, scope, unbind_channel, ErrHandler, ErrorClass, Info, Result, Universe,
};
use pipeline::{Config, Mode, COUNT, K};

scenarios! {
    ready_copy [2];
    ready_in_place [3];
    sync_copy [3];
    sync_in_place [2];
    short_and_ragged [2];
    copy_path_limits [2];
    unbind_right_after_bind [2, 3];
}

/// A channel unbound at once, before any start, 200 times: the receive end must keep the
/// channel's memory reachable until the send end has mapped it, or the sender's bind fails
/// (MPI_ERR_OTHER, "cannot map the channel's memory") when the receiver's unbind wins the
/// race. Ranks 2 and up stay idle.
fn unbind_right_after_bind(u: &Universe) -> Result<()> {
    let w = u.world();
    let rank = w.rank();
    if rank > 1 {
        return Ok(());
    }
    let mut x = [0u64; 4];
    for i in 0..200 {
        scope(|s| -> Result<()> {
            let mut req = if rank == 0 {
                w.ssend_init(s, &mut x, 1, 4)?
            } else {
                w.recv_init(s, &mut x, 0, 4)?
            };
            let mut ch = bind_slack_channel(&mut req, 2, 2, &Info::new())?;
            assert_eq!(ch.partner().source(), 1 - rank, "bind {i}");
            unbind_channel(&mut ch)?;
            assert!(ch.is_null());
            Ok(())
        })?;
    }
    Ok(())
}

/// Run the pipeline; on rank 1, check that every message arrived whole and right.
fn pipe(u: &Universe, mode: Mode, starts: u64, in_place: bool) -> Result<()> {
    let config = Config {
        mode,
        starts,
        in_place,
    };
    let o = pipeline::run(u.world(), config)?;
    assert_eq!(o.is_some(), u.world().rank() == 1);
    if let Some(o) = o {
        assert_eq!(o.first_bad, None, "{}", o.line());
        assert_eq!(o.mismatches, 0, "{}", o.line());
        assert_eq!(o.received, starts, "{}", o.line());
        assert_eq!(o.checked, starts * COUNT as u64, "{}", o.line());
        assert_eq!(o.bytes_per_start, COUNT * 8, "{}", o.line());
        assert!(o.ok() && o.line().starts_with("channel_pipeline: OK: "));
    }
    Ok(())
}

fn ready_copy(u: &Universe) -> Result<()> {
    pipe(u, Mode::Ready, 100_000, false)
}

fn ready_in_place(u: &Universe) -> Result<()> {
    pipe(u, Mode::Ready, 100_000, true)
}

fn sync_copy(u: &Universe) -> Result<()> {
    pipe(u, Mode::Sync, 100_000, false)
}

fn sync_in_place(u: &Universe) -> Result<()> {
    pipe(u, Mode::Sync, 100_000, true)
}

/// Counts below K, at K, and not a multiple of K (the last round is short), each on a
/// freshly bound channel: every mode and path.
fn short_and_ragged(u: &Universe) -> Result<()> {
    for starts in [0, 1, 4, 5, 6, 12, 1003] {
        for mode in [Mode::Ready, Mode::Sync] {
            for in_place in [false, true] {
                pipe(u, mode, starts, in_place)?;
            }
        }
    }
    Ok(())
}

/// The copy path's rules: in ready mode a send started before its receive fails
/// (MPI_ERR_REQUEST) and sends nothing; `buffer_mut` hands the circular buffer out between
/// the channel's calls even with a start outstanding (the next window is free); the message
/// is in window 0 (start 0) and nothing else was written.
fn copy_path_limits(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let rank = w.rank();
    if rank > 1 {
        return Ok(());
    }
    let mut ring = vec![0.0f64; K as usize * COUNT];
    scope(|s| -> Result<()> {
        let mut req = if rank == 0 {
            w.rsend_init(s, &mut ring, 1, 3)?
        } else {
            w.recv_init(s, &mut ring, 0, 3)?
        };
        let mut ch = bind_slack_channel(&mut req, K, COUNT as isize, &Info::new())?;
        if rank == 0 {
            for (k, v) in ch.buffer_mut::<f64>()?[..COUNT].iter_mut().enumerate() {
                *v = pipeline::value(0, k);
            }
            // Rank 1 has not started its receive: nothing goes out.
            let e = ch.start().unwrap_err();
            assert_eq!(e.class(), ErrorClass::Request, "{e}");
            assert!(!ch.is_active());
            w.barrier()?; // rank 1 starts its receive
            w.barrier()?;
            ch.start()?;
            // Window 1 may be written for the next start while start 0 is outstanding.
            ch.buffer_mut::<f64>()?[COUNT] = -1.0;
            ch.wait()?;
            assert_eq!(
                ch.buffer_mut::<f64>()?[COUNT - 1],
                pipeline::value(0, COUNT - 1)
            );
        } else {
            w.barrier()?;
            ch.start()?;
            assert!(ch.buffer_mut::<f64>()?.iter().all(|v| *v == 0.0));
            w.barrier()?;
            ch.wait()?;
            let buf = ch.buffer_mut::<f64>()?;
            for (k, v) in buf[..COUNT].iter().enumerate() {
                assert_eq!(*v, pipeline::value(0, k), "element {k}");
            }
            assert!(buf[COUNT..].iter().all(|v| *v == 0.0));
        }
        unbind_channel(&mut ch)?;
        Ok(())
    })
}

fn run_example(n: u32, args: &[&str]) -> JobOutput {
    common::run_example("channel_pipeline", n, args)
}

/// The example as a user runs it, on both paths: one summary line, from rank 1.
#[test]
fn example_under_ebrun_2() {
    for (args, want) in [
        (
            &["--starts", "20000"][..],
            "channel_pipeline: OK: 20000 starts of 1024 doubles, K = 5, ready mode, copy path: 163840000 bytes in ",
        ),
        (
            &["--mode", "sync", "--in-place", "--starts", "20000"][..],
            "channel_pipeline: OK: 20000 starts of 1024 doubles, K = 5, sync mode, in-place path: 163840000 bytes in ",
        ),
    ] {
        let out = run_example(2, args);
        assert!(out.status.success(), "{}", out.dump());
        assert!(out.stdout.starts_with(want), "{}", out.dump());
        assert!(out.stdout.trim_end().ends_with(" GB/s"), "{}", out.dump());
        assert_eq!(out.stdout.lines().count(), 1, "{}", out.dump());
    }
}

/// A bad argument, or a single rank, is a usage error (exit status 2), not a hang.
#[test]
fn example_rejects_bad_arguments() {
    for (n, args) in [
        (2, &["--mode", "eager"][..]),
        (2, &["--starts"][..]),
        (1, &[][..]),
    ] {
        let out = run_example(n, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", out.dump());
        assert!(
            out.stderr.contains("usage: channel_pipeline"),
            "{}",
            out.dump()
        );
    }
}
