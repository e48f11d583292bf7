//! Errors (MPI 4.1 §9.3-9.4): under errors-return every misuse returns the right
//! `ErrorClass` with a message naming the bad value, and the communicator keeps working;
//! under errors-are-fatal (the default) the job ends with the message: through ebrun for a
//! process job, by unwinding the ranks for a thread job. No hang either way.

mod common;
use common::*;
use earlybird::{
    scope, ErrHandler, ErrorClass, Result, Universe, ANY_SOURCE, ANY_TAG, BSEND_OVERHEAD, PROC_NULL,
};
use std::time::Duration;

/// Assert that `r` failed with `class` and that its message names each of `names`.
#[track_caller]
fn expect_err<T: std::fmt::Debug>(what: &str, r: Result<T>, class: ErrorClass, names: &[&str]) {
    let e = match r {
        Ok(v) => panic!("{what}: expected {class}, got Ok({v:?})"),
        Err(e) => e,
    };
    assert_eq!(e.class(), class, "{what}: wrong class in {e}");
    let text = e.to_string();
    assert!(
        text.contains(class.name()),
        "{what}: the message should start with the class name: {text}"
    );
    for n in names {
        assert!(
            text.contains(n),
            "{what}: the message should name {n:?}: {text}"
        );
    }
}

/// A ring exchange that must still work after the errors.
fn still_works(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let mut got = [0i32; 2];
    let st = w.sendrecv(&[w.rank(), 42], right, 1, &mut got, left, 1)?;
    assert_eq!((st.source(), got), (left, [left, 42]));
    Ok(())
}

/// Invalid ranks (the size, -5, and ANY_SOURCE as a destination) in every call that takes a
/// rank: MPI_ERR_RANK naming the value.
fn invalid_rank(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let n = w.size();
    let ns = n.to_string();
    let d = [1u8; 4];
    let mut b = [0u8; 4];
    u.buffer_attach(1024)?;
    for (bad, name) in [
        (n, ns.as_str()),
        (-5, "-5"),
        (n + 1000, &(n + 1000).to_string()),
    ] {
        let r = ErrorClass::Rank;
        expect_err("send", w.send(&d, bad, 0), r, &[name]);
        expect_err("ssend", w.ssend(&d, bad, 0), r, &[name]);
        expect_err("rsend", w.rsend(&d, bad, 0), r, &[name]);
        expect_err("bsend", w.bsend(&d, bad, 0), r, &[name]);
        expect_err("recv", w.recv(&mut b, bad, 0), r, &[name]);
        expect_err(
            "sendrecv dest",
            w.sendrecv(&d, bad, 0, &mut b, 0, 0),
            r,
            &[name],
        );
        expect_err(
            "sendrecv source",
            w.sendrecv(&d, 0, 0, &mut b, bad, 0),
            r,
            &[name],
        );
        expect_err("probe", w.probe(bad, 0), r, &[name]);
        expect_err("iprobe", w.iprobe(bad, 0), r, &[name]);
        expect_err("mprobe", w.mprobe(bad, ANY_TAG), r, &[name]);
        expect_err("improbe", w.improbe(bad, ANY_TAG), r, &[name]);
        scope(|s| {
            expect_err("isend", w.isend(s, &d, bad, 0), r, &[name]);
            expect_err("issend", w.issend(s, &d, bad, 0), r, &[name]);
            expect_err("irsend", w.irsend(s, &d, bad, 0), r, &[name]);
            expect_err("ibsend", w.ibsend(s, &d, bad, 0), r, &[name]);
            expect_err("send_init", w.send_init(s, &d, bad, 0), r, &[name]);
            expect_err("ssend_init", w.ssend_init(s, &d, bad, 0), r, &[name]);
            expect_err("rsend_init", w.rsend_init(s, &d, bad, 0), r, &[name]);
            expect_err("bsend_init", w.bsend_init(s, &d, bad, 0), r, &[name]);
        });
        scope(|s| expect_err("irecv", w.irecv(s, &mut b, bad, 0), r, &[name]));
        scope(|s| expect_err("recv_init", w.recv_init(s, &mut b, bad, 0), r, &[name]));
    }
    // Wildcards are sources, not destinations.
    expect_err(
        "send to ANY_SOURCE",
        w.send(&d, ANY_SOURCE, 0),
        ErrorClass::Rank,
        &["-1"],
    );
    u.buffer_detach()?;
    w.set_errhandler(ErrHandler::Fatal);
    still_works(u)
}

/// Invalid tags: negative send tags (-3, and ANY_TAG, which only receives may use) and
/// negative receive tags other than ANY_TAG (-7): MPI_ERR_TAG naming the value.
fn invalid_tag(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let (right, _) = ring(w);
    let d = [1u16; 4];
    let mut b = [0u16; 4];
    let t = ErrorClass::Tag;
    for (bad, name) in [(-3, "-3"), (ANY_TAG, "-1"), (i32::MIN, "-2147483648")] {
        expect_err("send", w.send(&d, right, bad), t, &[name]);
        expect_err("ssend", w.ssend(&d, right, bad), t, &[name]);
        expect_err("rsend", w.rsend(&d, right, bad), t, &[name]);
        expect_err("bsend", w.bsend(&d, right, bad), t, &[name]);
        expect_err(
            "sendrecv",
            w.sendrecv(&d, right, bad, &mut b, ANY_SOURCE, 0),
            t,
            &[name],
        );
        scope(|s| {
            expect_err("isend", w.isend(s, &d, right, bad), t, &[name]);
            expect_err("issend", w.issend(s, &d, right, bad), t, &[name]);
            expect_err("send_init", w.send_init(s, &d, right, bad), t, &[name]);
            expect_err("bsend_init", w.bsend_init(s, &d, right, bad), t, &[name]);
        });
    }
    // A send to PROC_NULL is still checked.
    expect_err("send to PROC_NULL", w.send(&d, PROC_NULL, -3), t, &["-3"]);
    for (bad, name) in [(-7, "-7"), (-2, "-2"), (i32::MIN, "-2147483648")] {
        expect_err("recv", w.recv(&mut b, ANY_SOURCE, bad), t, &[name]);
        expect_err("probe", w.probe(ANY_SOURCE, bad), t, &[name]);
        expect_err("iprobe", w.iprobe(0, bad), t, &[name]);
        expect_err("mprobe", w.mprobe(0, bad), t, &[name]);
        expect_err("improbe", w.improbe(ANY_SOURCE, bad), t, &[name]);
        expect_err(
            "sendrecv",
            w.sendrecv(&d, right, 0, &mut b, ANY_SOURCE, bad),
            t,
            &[name],
        );
        scope(|s| expect_err("irecv", w.irecv(s, &mut b, ANY_SOURCE, bad), t, &[name]));
        scope(|s| {
            expect_err(
                "recv_init",
                w.recv_init(s, &mut b, ANY_SOURCE, bad),
                t,
                &[name],
            )
        });
    }
    w.set_errhandler(ErrHandler::Fatal);
    still_works(u)
}

/// Request misuse, each MPI_ERR_REQUEST: cancel and start of a nonblocking request already
/// completed (which behaves as MPI_REQUEST_NULL: wait, test and get_status return the empty
/// status at once); start of an active persistent request and of a nonblocking one; free of
/// the active request of a collective; cancel of an inactive persistent request.
fn request_misuse(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let (right, left) = ring(w);
    let rq = ErrorClass::Request;
    let d = [3u64; 3];
    let mut g = [0u64; 3];
    let mut never = [0u8; 1];
    scope(|s| -> Result<()> {
        let mut rr = w.irecv(s, &mut g, left, 5)?;
        let mut sr = w.isend(s, &d, right, 5)?;
        expect_err(
            "start of a nonblocking request",
            sr.start(),
            rq,
            &["nonpersistent"],
        );
        rr.wait()?;
        sr.wait()?;
        // A completed request is MPI_REQUEST_NULL: the empty status at once.
        let empty = Some(earlybird::Status::empty());
        assert_eq!(Some(rr.wait()?), empty, "second wait: the empty status");
        assert_eq!(Some(sr.wait()?), empty, "wait after wait on a send");
        assert_eq!(rr.test()?, empty, "test after wait");
        assert_eq!(rr.get_status()?, empty, "get_status after wait");
        expect_err("cancel after wait", rr.cancel(), rq, &["already completed"]);
        expect_err(
            "start of a completed nonblocking request",
            rr.start(),
            rq,
            &[],
        );

        let mut p = w.recv_init(s, &mut never, left, 999)?;
        expect_err(
            "cancel of an inactive persistent request",
            p.cancel(),
            rq,
            &["inactive"],
        );
        p.start()?;
        expect_err(
            "start of an active persistent request",
            p.start(),
            rq,
            &["active"],
        );
        assert!(p.is_active(), "a failed start leaves the request as it was");
        // Freeing an active persistent receive is allowed; nobody matches it, so the scope
        // withdraws it at its end.
        p.free()?;
        expect_err(
            "free of the active request of a collective",
            w.ibarrier(s)?.free(),
            rq,
            &["active", "collective"],
        );
        // (The failed free completed the barrier as a drop does.)
        Ok(())
    })?;
    assert_eq!(g, [3u64; 3]);
    w.set_errhandler(ErrHandler::Fatal);
    still_works(u)
}

/// Buffered-mode errors, each MPI_ERR_BUFFER naming the sizes: bsend/ibsend/bsend_init with
/// no buffer attached, a message that does not fit, attaching twice, detaching with nothing
/// attached. Afterwards a buffer that fits works.
fn buffer_errors(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let (right, left) = ring(w);
    let b = ErrorClass::Buffer;
    let d = [7u8; 100];
    expect_err("bsend with no buffer", w.bsend(&d, right, 1), b, &["100"]);
    expect_err("detach with no buffer", u.buffer_detach(), b, &[]);
    scope(|s| -> Result<()> {
        expect_err(
            "ibsend with no buffer",
            w.ibsend(s, &d, right, 1),
            b,
            &["100"],
        );
        let mut p = w.bsend_init(s, &d, right, 1)?;
        expect_err("start of bsend_init with no buffer", p.start(), b, &["100"]);
        assert!(!p.is_active());
        Ok(())
    })?;
    u.buffer_attach(64)?;
    expect_err("attach twice", u.buffer_attach(4096), b, &["64", "4096"]);
    expect_err("bsend too large", w.bsend(&d, right, 1), b, &["100", "64"]);
    // Exactly fitting (len + overhead) is fine after re-attaching a larger buffer.
    assert_eq!(u.buffer_detach()?, 64);
    u.buffer_attach(d.len() + BSEND_OVERHEAD)?;
    w.bsend(&d, right, 2)?;
    let mut g = [0u8; 100];
    w.recv(&mut g, left, 2)?;
    assert_eq!(g, d);
    u.buffer_detach()?;
    w.set_errhandler(ErrHandler::Fatal);
    still_works(u)
}

/// After finalize, communication on a communicator handle is MPI_ERR_COMM (not a hang or a
/// panic); a second init in a process is an error too.
fn use_after_finalize(u: Universe) -> Result<()> {
    let w = u.world().clone();
    w.set_errhandler(ErrHandler::Return);
    let w = w.clone();
    let processes = u.is_process_job();
    u.finalize()?;
    let c = ErrorClass::Comm;
    let mut b = [0u8; 2];
    expect_err(
        "send after finalize",
        w.send(&[1u8; 2], 0, 0),
        c,
        &["finalize"],
    );
    expect_err(
        "recv after finalize",
        w.recv(&mut b, 0, 0),
        c,
        &["finalize"],
    );
    expect_err(
        "iprobe after finalize",
        w.iprobe(ANY_SOURCE, ANY_TAG),
        c,
        &["finalize"],
    );
    expect_err(
        "probe after finalize",
        w.probe(ANY_SOURCE, ANY_TAG),
        c,
        &["finalize"],
    );
    scope(|s| {
        expect_err(
            "irecv after finalize",
            w.irecv(s, &mut b, 0, 0),
            c,
            &["finalize"],
        )
    });
    scope(|s| {
        expect_err(
            "send_init after finalize",
            w.send_init(s, &[1u8], 0, 0),
            c,
            &["finalize"],
        )
    });
    if processes {
        assert!(
            earlybird::init().is_err(),
            "a second init in one process must fail"
        );
    }
    Ok(())
}

/// Child-only scenario: rank 1 sends to rank 99 under the default errors-are-fatal handler
/// while rank 0 waits in a receive from it.
fn fatal_rank_99(u: &Universe) -> Result<()> {
    let w = u.world();
    let mut b = [0u8; 4];
    if w.rank() == 1 {
        w.send(&[1u8; 4], 99, 0)?;
        unreachable!("errors are fatal: the send to rank 99 must end the job");
    } else if w.rank() == 0 {
        w.recv(&mut b, 1, 0)?;
    }
    Ok(())
}

/// The error handler belongs to the communicator: set through a clone, it applies to the
/// original handle and to requests made before the change (a fatal handler would end the job
/// here; in a thread job it panics the rank and the test fails).
fn errhandler_is_shared_by_handles_and_requests(u: &Universe) -> Result<()> {
    let w = u.world().clone();
    let other = u.world();
    assert_eq!(other.errhandler(), earlybird::ErrHandler::Fatal);
    let mut buf = [0u8; 4];
    earlybird::scope(|s| -> Result<()> {
        let mut req = other.irecv(s, &mut buf, earlybird::PROC_NULL, 0)?;
        req.wait()?;
        w.set_errhandler(earlybird::ErrHandler::Return);
        assert_eq!(other.errhandler(), earlybird::ErrHandler::Return);
        let e = req.cancel().expect_err("cancel of a completed request");
        assert_eq!(e.class(), ErrorClass::Request);
        let e = other
            .send(&[1u8], 99, 0)
            .expect_err("rank 99 does not exist");
        assert_eq!(e.class(), ErrorClass::Rank);
        Ok(())
    })
}

scenarios! {
    errhandler_is_shared_by_handles_and_requests;
    invalid_rank;
    invalid_tag;
    request_misuse [2, 3, 4, 8];
    buffer_errors;
    owned use_after_finalize [1, 2, 3];
    child_only fatal_rank_99;
}

/// Errors-are-fatal in a process job: the job ends through ebrun, non-zero, quickly, with
/// the class and the bad rank in its stderr; rank 0, blocked in a receive, is ended too.
#[test]
fn errors_are_fatal_under_ebrun() {
    let out = ebrun_scenario("fatal_rank_99", 2, &[]);
    assert!(!out.status.success(), "the job must fail\n{}", out.dump());
    assert!(
        out.stderr.contains("MPI_ERR_RANK") && out.stderr.contains("99"),
        "stderr must name the error\n{}",
        out.dump()
    );
    // Ended by the failing rank, not by ebrun's --timeout: rank 0's wait was released.
    assert!(
        out.stderr.contains("ebrun: rank 1 (pid") && !out.stderr.contains("ebrun: timeout"),
        "the job must end because rank 1 failed\n{}",
        out.dump()
    );
}

/// Errors-are-fatal in a thread job ends the job, not the process hosting it: Job::run
/// re-raises the failing rank's panic (with the class and the bad rank) first; the other
/// rank, blocked in a receive, was released by that abort (not by the job's timeout).
#[test]
fn errors_are_fatal_in_thread_job() {
    let r = std::panic::catch_unwind(|| {
        earlybird::threads::Job::new(2)
            .timeout(Duration::from_secs(60))
            .run(|u| fatal_rank_99(&u).map(|_| ()))
    });
    let p = r.expect_err("the thread job must fail");
    let text = panic_text(&p);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("rank 1: ") && first.contains("MPI_ERR_RANK") && first.contains("99"),
        "panic should carry the error: {text:?}"
    );
    assert!(
        text.lines()
            .skip(1)
            .all(|l| l.contains("aborted by rank 1")),
        "rank 0 must be released by rank 1's failure: {text:?}"
    );
}

/// A rank that panics ends its thread job (its peers blocked on it are released by that
/// abort, not by the job's timeout), and Job::run re-raises that panic and no other.
#[test]
fn panicking_rank_ends_thread_job() {
    let r = std::panic::catch_unwind(|| {
        earlybird::threads::Job::new(3)
            .timeout(Duration::from_secs(60))
            .run(|u| {
                let w = u.world();
                if w.rank() == 2 {
                    panic!("deliberate failure in rank 2");
                }
                let mut b = [0u8; 1];
                w.set_errhandler(ErrHandler::Return);
                let e = w.recv(&mut b, 2, 0).expect_err("the peer died");
                assert_eq!(e.class(), ErrorClass::ProcFailed);
                assert!(e.to_string().contains("aborted by rank 2"), "{e}");
                let e = u.finalize().expect_err("finalize of an aborted job");
                assert_eq!(e.class(), ErrorClass::ProcFailed);
            })
    });
    let p = r.expect_err("the thread job must fail");
    assert_eq!(panic_text(&p), "rank 2: deliberate failure in rank 2");
}

/// Job::run reports the panic of every rank, not only the first: the rank that aborted the
/// job first, then the others in rank order.
#[test]
fn every_rank_panic_is_reported() {
    let r = std::panic::catch_unwind(|| {
        earlybird::threads::Job::new(3)
            .timeout(Duration::from_secs(60))
            .run(|u| {
                let w = u.world();
                w.set_errhandler(ErrHandler::Return);
                if w.rank() == 2 {
                    panic!("first failure");
                }
                let mut b = [0u8; 1];
                let _ = w.recv(&mut b, 2, 0);
                panic!("second failure, on rank {}", w.rank());
            })
    });
    let p = r.expect_err("the thread job must fail");
    assert_eq!(
        panic_text(&p),
        "rank 2: first failure\nrank 0: second failure, on rank 0\nrank 1: second failure, on rank 1"
    );
}
