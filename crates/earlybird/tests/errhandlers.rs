//! Error handlers and error classes (MPI 4.1 §9.3-9.5): user handlers called with the
//! communicator and the error, handler objects (create, set, get, free), MPI_ERRORS_ABORT and
//! MPI_Abort ending a job, error_class / error_string for every class, and classes, codes and
//! strings added by the program; as thread jobs and under ebrun on 1, 2, 3 and 4 ranks.

mod common;
use common::*;
use earlybird::{
    add_error_class, add_error_code, add_error_string, error_class, error_string, last_used_code,
    remove_error_class, remove_error_code, remove_error_string, scope, Comm, ErrHandler, Error,
    ErrorClass, Result, Universe, ANY_SOURCE, ERR_LASTCODE, MAX_ERROR_STRING, PROC_NULL,
};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// What a user handler saw: the communicator's rank and size, the error's class, code and
/// text, and the error string of its code (looked up from inside the handler).
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    rank: i32,
    size: i32,
    class: ErrorClass,
    code: i32,
    text: String,
    string: String,
}

type Log = Rc<RefCell<Vec<Seen>>>;

/// A user handler that records every call in the returned log.
fn recording_handler() -> (ErrHandler, Log) {
    let log: Log = Rc::default();
    let l = log.clone();
    let h = Comm::create_errhandler(move |c, e| {
        l.borrow_mut().push(Seen {
            rank: c.rank(),
            size: c.size(),
            class: e.class(),
            code: e.code(),
            text: e.to_string(),
            string: error_string(e.code()).unwrap_or_else(|x| format!("error_string failed: {x}")),
        })
    });
    (h, log)
}

/// The last call of the handler, which must have happened.
#[track_caller]
fn last(log: &Log) -> Seen {
    log.borrow()
        .last()
        .cloned()
        .expect("the user handler was not called")
}

/// A user handler on WORLD is called with WORLD and the error (class, code, message) and the
/// call then returns that error; a communicator split from it (ranks reversed) inherits it
/// and hands the handler itself, with its own rank; requests use the handler of their
/// communicator, also one set after they were made; calls on the universe use WORLD's.
fn user_handler_sees_class_and_rank(u: &Universe) -> Result<()> {
    let w = u.world();
    let (n, me) = (w.size(), w.rank());
    let (h, log) = recording_handler();
    w.set_errhandler(h.clone());
    assert_eq!(w.errhandler(), h);

    let e = w.send(&[1u8], n + 5, 0).unwrap_err();
    let s = last(&log);
    assert_eq!(
        (s.rank, s.size, s.class, s.code),
        (me, n, ErrorClass::Rank, 6)
    );
    assert!(s.text.contains(&(n + 5).to_string()), "{s:?}");
    assert!(s.string.starts_with("MPI_ERR_RANK"), "{s:?}");
    assert_eq!(
        (e.class(), e.to_string()),
        (ErrorClass::Rank, s.text.clone())
    );

    let rev = w.split(0, -me)?.expect("one color for all");
    assert_eq!(rev.rank(), n - 1 - me);
    assert_eq!(
        rev.errhandler(),
        h,
        "a new communicator inherits the handler"
    );
    let mut b = [0u8; 4];
    let e = rev.recv(&mut b, ANY_SOURCE, -7).unwrap_err();
    let s = last(&log);
    assert_eq!((s.rank, s.size, s.class), (n - 1 - me, n, ErrorClass::Tag));
    assert_eq!(e.class(), ErrorClass::Tag);
    assert_eq!(log.borrow().len(), 2);

    // Requests: the handler of their communicator, whatever it is when the error happens.
    let (h2, log2) = recording_handler();
    let mut nothing = [0u8; 0];
    scope(|s| -> Result<()> {
        let mut p = rev.recv_init(s, &mut b, PROC_NULL, 0)?;
        let mut r = w.irecv(s, &mut nothing, PROC_NULL, 0)?;
        r.wait()?;
        rev.set_errhandler(h2.clone());
        let e = p.cancel().unwrap_err();
        assert_eq!(e.class(), ErrorClass::Request);
        let s2 = last(&log2);
        assert_eq!((s2.rank, s2.class), (n - 1 - me, ErrorClass::Request));
        // A completed request is MPI_REQUEST_NULL; cancelling it is the error.
        r.cancel().unwrap_err();
        assert_eq!(
            (last(&log).rank, last(&log).class),
            (me, ErrorClass::Request)
        );
        Ok(())
    })?;
    assert_eq!((log.borrow().len(), log2.borrow().len()), (3, 1));

    // A universe call (no buffer attached) raises on WORLD.
    let e = u.buffer_detach().unwrap_err();
    assert_eq!(e.class(), ErrorClass::Buffer);
    assert_eq!(
        (last(&log).rank, last(&log).class),
        (me, ErrorClass::Buffer)
    );

    w.set_errhandler(ErrHandler::Fatal);
    rev.free()
}

/// A user handler may communicate (here a ring exchange on the communicator it is given,
/// which every rank's error triggers) and may replace itself (here with ERRORS_RETURN, so it
/// runs once).
fn handler_may_communicate_and_replace_itself(u: &Universe) -> Result<()> {
    let w = u.world();
    let d = w.dup()?;
    let got: Rc<RefCell<Option<i32>>> = Rc::default();
    let g = got.clone();
    d.set_errhandler(Comm::create_errhandler(move |c, e| {
        let (right, left) = ring(c);
        let mut x = [0i32];
        c.sendrecv(&[c.rank() * 100 + e.code()], right, 9, &mut x, left, 9)
            .expect("the handler's own exchange");
        *g.borrow_mut() = Some(x[0]);
        c.set_errhandler(ErrHandler::Return);
    }));
    let e = d.send(&[0u8], -5, 0).unwrap_err();
    assert_eq!(e.class(), ErrorClass::Rank);
    let (_, left) = ring(&d);
    assert_eq!(got.take(), Some(left * 100 + 6));
    assert_eq!(d.errhandler(), ErrHandler::Return);
    d.send(&[0u8], -5, 0).unwrap_err();
    assert_eq!(got.take(), None, "the handler replaced itself");
    still_works(&d)?;
    d.free()
}

/// A ring exchange on `c` that must still work.
fn still_works(c: &Comm) -> Result<()> {
    let (right, left) = ring(c);
    let mut got = [0i32];
    c.sendrecv(&[c.rank()], right, 1, &mut got, left, 1)?;
    assert_eq!(got[0], left);
    Ok(())
}

/// Handler objects: get returns what was set (clones compare equal, other handlers do not);
/// set through one handle shows through another; a dup inherits the handler and changing
/// the dup's leaves the parent's; a user handler freed while set stays in force; freeing a
/// predefined handler is MPI_ERR_ERRHANDLER naming it.
fn errhandler_objects(u: &Universe) -> Result<()> {
    let w = u.world();
    assert_eq!(
        w.errhandler(),
        ErrHandler::Fatal,
        "errors are fatal by default"
    );
    let other = w.clone();
    other.set_errhandler(ErrHandler::Abort);
    assert_eq!(w.errhandler(), ErrHandler::Abort);
    let (h, log) = recording_handler();
    let (h2, _) = recording_handler();
    assert_ne!(h, h2);
    assert_ne!(h, ErrHandler::Return);
    w.set_errhandler(h.clone());
    let got = other.errhandler();
    assert_eq!(got, h);
    assert!(!got.is_predefined() && ErrHandler::Return.is_predefined());

    let d = w.dup()?;
    assert_eq!(d.errhandler(), h);
    d.set_errhandler(ErrHandler::Return);
    assert_eq!(w.errhandler(), h);

    // MPI_Errhandler_free of user handlers while the communicator still uses them.
    h.free()?;
    got.free()?;
    w.send(&[0u8], w.size(), 0).unwrap_err();
    assert_eq!(
        log.borrow().len(),
        1,
        "a freed handler still set is still called"
    );

    for p in [ErrHandler::Fatal, ErrHandler::Return, ErrHandler::Abort] {
        let name = p.mpi_name();
        let e = p.free().unwrap_err();
        assert_eq!(e.class(), ErrorClass::Errhandler, "{e}");
        assert!(e.to_string().contains(name), "{e}");
    }
    w.set_errhandler(ErrHandler::Fatal);
    d.free()
}

/// error_class and error_string for every predefined class; classes, codes and strings added
/// by the program round-trip through error_class / error_string / Error / a user handler /
/// call_errhandler, are numbered above MPI_ERR_LASTCODE, get the same numbers on every rank
/// that adds them in the same order, and go away when removed.
fn error_classes_and_codes(u: &Universe) -> Result<()> {
    let w = u.world();
    let mut n = 0;
    for c in ErrorClass::predefined() {
        assert_eq!(error_class(c.code())?, c);
        let s = error_string(c.code())?;
        assert!(
            s.starts_with(c.name()) && s.len() > c.name().len() + 2,
            "{s}"
        );
        assert!(c.code() <= ERR_LASTCODE);
        n += 1;
    }
    assert!(n >= 60, "only {n} predefined classes");
    for (c, code) in [
        (ErrorClass::Success, 0),
        (ErrorClass::Tag, 4),
        (ErrorClass::Rank, 6),
        (ErrorClass::Truncate, 14),
        (ErrorClass::Request, 19),
        (ErrorClass::Win, 45),
        (ErrorClass::RmaSync, 50),
    ] {
        assert_eq!(c.code(), code, "{c} is numbered as in MPICH");
    }

    let first = last_used_code();
    assert!(first >= ERR_LASTCODE);
    let cls = add_error_class()?;
    let code = add_error_code(cls)?;
    let rank_code = add_error_code(ErrorClass::Rank)?;
    assert!(cls.code() > first && code.code() > cls.code() && rank_code.code() > code.code());
    assert!(matches!(cls, ErrorClass::User(_)));
    assert_eq!(last_used_code(), rank_code.code());
    assert_eq!((code.class(), rank_code.class()), (cls, ErrorClass::Rank));
    assert_eq!(error_class(cls.code())?, cls);
    assert_eq!(error_class(code.code())?, cls);
    assert_eq!(error_class(rank_code.code())?, ErrorClass::Rank);
    assert_eq!(error_string(cls.code())?, "", "no string added yet");
    add_error_string(cls.code(), "checkpoint failed")?;
    add_error_string(code.code(), "first draft")?;
    add_error_string(code.code(), "checksum mismatch")?;
    assert_eq!(error_string(cls.code())?, "checkpoint failed");
    assert_eq!(error_string(code.code())?, "checksum mismatch", "replaced");

    // Every rank added the same sequence: the same numbers everywhere.
    let (right, left) = ring(w);
    let mut theirs = [0i32; 3];
    w.sendrecv(
        &[cls.code(), code.code(), rank_code.code()],
        right,
        4,
        &mut theirs,
        left,
        4,
    )?;
    assert_eq!(theirs, [cls.code(), code.code(), rank_code.code()]);

    // An error with the code reaches a user handler, Display and the caller intact.
    let (h, log) = recording_handler();
    let d = w.dup()?;
    d.set_errhandler(h);
    let e = d
        .call_errhandler::<()>(Error::with_code(code, "block 17"))
        .unwrap_err();
    let s = last(&log);
    assert_eq!(
        (s.rank, s.class, s.code, s.string.as_str()),
        (d.rank(), cls, code.code(), "checksum mismatch")
    );
    assert_eq!((e.class(), e.code()), (cls, code.code()));
    let text = e.to_string();
    for part in ["checkpoint failed", "checksum mismatch", "block 17"] {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }
    let e = d
        .call_errhandler::<()>(Error::new(cls, "plain"))
        .unwrap_err();
    assert_eq!((e.class(), e.code()), (cls, cls.code()));
    assert_eq!(last(&log).string, "checkpoint failed");

    // Removal, in the order MPI 4.1 asks for: strings of codes, codes, classes.
    remove_error_string(code.code())?;
    assert_eq!(error_string(code.code())?, "");
    remove_error_code(code.code())?;
    remove_error_code(rank_code.code())?;
    // The class keeps its string until that is removed too.
    assert_eq!(
        remove_error_class(cls).unwrap_err().class(),
        ErrorClass::Arg
    );
    remove_error_string(cls.code())?;
    remove_error_class(cls)?;
    for gone in [cls.code(), code.code(), rank_code.code()] {
        assert_eq!(error_class(gone).unwrap_err().class(), ErrorClass::Arg);
        assert_eq!(error_string(gone).unwrap_err().class(), ErrorClass::Arg);
    }
    assert_eq!(
        last_used_code(),
        rank_code.code(),
        "numbers are not reused after removal"
    );
    let again = add_error_class()?;
    assert!(again.code() > rank_code.code());
    remove_error_class(again)?;
    d.free()
}

/// Misuse of the class/code/string calls and of handlers, each `MPI_ERR_ARG` (or
/// `MPI_ERR_ERRHANDLER`) with the bad value in the message.
fn misuse(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let arg = |r: Result<()>, names: &[&str]| {
        let e = r.expect_err("misuse must fail");
        assert_eq!(e.class(), ErrorClass::Arg, "{e}");
        for n in names {
            assert!(e.to_string().contains(n), "{e} should name {n}");
        }
    };
    let cls = add_error_class()?;
    let code = add_error_code(cls)?;
    let c = cls.code().to_string();
    let k = code.code().to_string();
    // Predefined strings cannot change; unknown numbers are errors.
    arg(
        add_error_string(ErrorClass::Rank.code(), "x"),
        &["6", "predefined"],
    );
    arg(add_error_string(ERR_LASTCODE, "x"), &["predefined"]);
    arg(
        add_error_string(last_used_code() + 1000, "x"),
        &["not added"],
    );
    arg(add_error_string(-3, "x"), &["-3"]);
    arg(
        add_error_string(code.code(), &"y".repeat(MAX_ERROR_STRING)),
        &["512", "MPI_MAX_ERROR_STRING"],
    );
    arg(error_class(-3).map(|_| ()), &["-3"]);
    arg(
        error_string(ERR_LASTCODE + 0x100_0000).map(|_| ()),
        &["not an error code"],
    );
    arg(
        add_error_code(ErrorClass::Success).map(|_| ()),
        &["MPI_SUCCESS"],
    );
    // Removal: predefined, unknown, out of order, twice.
    arg(
        remove_error_class(ErrorClass::Rank),
        &["MPI_ERR_RANK", "predefined"],
    );
    arg(remove_error_code(ErrorClass::Rank.code()), &["6"]);
    arg(
        remove_error_string(ErrorClass::Tag.code()),
        &["4", "predefined"],
    );
    arg(remove_error_class(cls), &[&c, "1 error code"]);
    add_error_string(code.code(), "z")?;
    arg(remove_error_code(code.code()), &[&k, "string"]);
    remove_error_string(code.code())?;
    arg(remove_error_string(code.code()), &[&k, "no string"]);
    remove_error_code(code.code())?;
    arg(remove_error_code(code.code()), &[&k]);
    remove_error_class(cls)?;
    arg(remove_error_class(cls), &[&c]);
    arg(add_error_code(cls).map(|_| ()), &[&c]);
    arg(add_error_string(cls.code(), "late"), &[&c]);
    // Freeing a predefined handler.
    let e = ErrHandler::Return.free().unwrap_err();
    assert!(
        e.class() == ErrorClass::Errhandler && e.to_string().contains("MPI_ERRORS_RETURN"),
        "{e}"
    );
    // call_errhandler under ERRORS_RETURN returns the error as given.
    let e = w
        .call_errhandler::<()>(Error::new(ErrorClass::Other, "by hand"))
        .unwrap_err();
    assert_eq!((e.class(), e.detail()), (ErrorClass::Other, "by hand"));
    w.set_errhandler(ErrHandler::Fatal);
    still_works(w)
}

/// Child-only: the last rank raises MPI_ERR_RANK on a dup of WORLD that has
/// MPI_ERRORS_ABORT, while the others wait for a message from it on WORLD.
fn abort_on_error(u: &Universe) -> Result<()> {
    let w = u.world();
    let d = w.dup()?;
    d.set_errhandler(ErrHandler::Abort);
    let last = w.size() - 1;
    if w.rank() == last {
        d.send(&[1u8], 99, 0)?;
        unreachable!("MPI_ERRORS_ABORT must end the job");
    }
    let mut b = [0u8];
    w.recv(&mut b, last, 0)?;
    Ok(())
}

/// Child-only: the last rank calls MPI_Abort with code 42 on a communicator named "solver"
/// while the others wait for it.
fn abort_call(u: &Universe) -> Result<()> {
    let w = u.world();
    let d = w.dup()?;
    d.set_name("solver")?;
    let last = w.size() - 1;
    if w.rank() == last {
        d.abort(42);
    }
    let mut b = [0u8];
    w.recv(&mut b, last, 0)?;
    Ok(())
}

scenarios! {
    user_handler_sees_class_and_rank [1, 2, 3, 4];
    handler_may_communicate_and_replace_itself [1, 2, 3, 4];
    errhandler_objects [1, 2, 3, 4];
    error_classes_and_codes [1, 2, 3, 4];
    misuse [1, 2, 3, 4];
    child_only abort_on_error;
    child_only abort_call;
}

/// Under ebrun, the job of `scenario` on n ranks ends quickly with status `status`, naming
/// the aborting (last) rank, with each of `texts` on stderr.
fn process_job_ends(scenario: &str, n: u32, status: i32, texts: &[&str]) {
    let out = ebrun_scenario(scenario, n, &[]);
    assert_eq!(out.status.code(), Some(status), "{}", out.dump());
    for t in texts {
        assert!(out.stderr.contains(t), "stderr lacks {t:?}\n{}", out.dump());
    }
    let launcher = format!("ebrun: rank {} (pid", n - 1);
    assert!(out.stderr.contains(&launcher), "{}", out.dump());
    assert!(
        !out.stderr.contains("ebrun: timeout"),
        "the job must end by the abort, not the timeout\n{}",
        out.dump()
    );
}

/// MPI_ERRORS_ABORT in a process job: the job ends with the error's code (MPI_ERR_RANK, 6)
/// as its status and the handler's line on stderr.
#[test]
fn errors_abort_ends_process_job() {
    for n in 1..=4 {
        process_job_ends(
            "abort_on_error",
            n,
            6,
            &["MPI_ERRORS_ABORT", "MPI_ERR_RANK", "99", "with code 6"],
        );
    }
}

/// MPI_Abort in a process job: status 42, the communicator named.
#[test]
fn abort_ends_process_job() {
    for n in 1..=4 {
        process_job_ends(
            "abort_call",
            n,
            42,
            &["MPI_Abort", "\"solver\"", "error code 42"],
        );
    }
}

/// In a thread job the aborting rank unwinds and Job::run re-raises its panic first; the others
/// were released by that abort.
fn thread_job_ends(n: u32, f: fn(&Universe) -> Result<()>, texts: &[&str]) {
    let r = std::panic::catch_unwind(|| {
        earlybird::threads::Job::new(n)
            .timeout(Duration::from_secs(60))
            .run(|u| f(&u).map(|_| ()))
    });
    let text = panic_text(&r.expect_err("the thread job must fail"));
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("rank {}: ", n - 1)),
        "the last rank aborts first: {text:?}"
    );
    for s in texts {
        assert!(
            first.contains(s),
            "panic of {n} ranks lacks {s:?}: {text:?}"
        );
    }
    // The others were released by that abort, not by the job's timeout.
    assert!(
        !text.contains("aborted by the launcher"),
        "{n} ranks: {text:?}"
    );
}

#[test]
fn errors_abort_ends_thread_job() {
    for n in 1..=4 {
        thread_job_ends(
            n,
            abort_on_error,
            &[
                "MPI_ERRORS_ABORT",
                "MPI_ERR_RANK",
                &format!("rank {}:", n - 1),
            ],
        );
    }
}

#[test]
fn abort_ends_thread_job() {
    for n in 1..=4 {
        thread_job_ends(n, abort_call, &["MPI_Abort", "error code 42"]);
    }
}
