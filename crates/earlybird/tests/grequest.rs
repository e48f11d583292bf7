//! Generalized requests (MPI 4.1 §13.2): a kind of request defined outside the request layer,
//! completed by the program (here from another thread), through wait, test, get_status,
//! cancel, free and the wait/test family mixed with point-to-point requests.

mod common;
use earlybird::{scope, wait_all, wait_any, ErrHandler, ErrorClass, Result, Universe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Counts of the callbacks a request ran.
#[derive(Default)]
struct Calls {
    query: AtomicU32,
    free: AtomicU32,
    cancel: AtomicU32,
    /// The `complete` flag the cancel callback saw last (1 complete, 2 not).
    cancel_saw: AtomicU32,
}

fn counted(
    w: &earlybird::Comm,
    calls: &Arc<Calls>,
    elements: usize,
) -> Result<(earlybird::Request<'static>, earlybird::GrequestCompleter)> {
    let (q, f, c) = (calls.clone(), calls.clone(), calls.clone());
    w.grequest_start(
        move |st| {
            q.query.fetch_add(1, Ordering::SeqCst);
            st.set_source(7);
            st.set_tag(11);
            st.set_elements::<f64>(elements);
            st.set_cancelled(c_cancelled(&q));
            Ok(())
        },
        move || {
            f.free.fetch_add(1, Ordering::SeqCst);
            Ok(())
        },
        move |complete| {
            c.cancel.fetch_add(1, Ordering::SeqCst);
            c.cancel_saw
                .store(if complete { 1 } else { 2 }, Ordering::SeqCst);
            Ok(())
        },
    )
}

/// Whether a cancel ran (the query reports it, as a cancellable operation would).
fn c_cancelled(c: &Calls) -> bool {
    c.cancel.load(Ordering::SeqCst) > 0
}

/// Completed from another thread while this one waits: the wait returns the status the
/// query gives, after which query and free have run once each.
fn completed_by_a_thread(u: &Universe) -> Result<()> {
    let w = u.world();
    let calls = Arc::new(Calls::default());
    let (mut req, done) = counted(w, &calls, 3)?;
    assert!(req.is_active() && !req.is_persistent());
    assert_eq!(req.test()?, None, "not complete before grequest_complete");
    assert_eq!(calls.query.load(Ordering::SeqCst), 0);
    let t = std::thread::spawn(move || done.complete());
    let st = req.wait()?;
    t.join().expect("completer thread")?;
    assert_eq!((st.source(), st.tag(), st.bytes()), (7, 11, 24));
    assert!(!st.is_cancelled());
    assert_eq!(calls.query.load(Ordering::SeqCst), 1);
    assert_eq!(calls.free.load(Ordering::SeqCst), 1);
    assert!(req.is_null(), "a completed nonblocking request is consumed");
    Ok(())
}

/// get_status runs the query (not free) once complete; test then collects it; cancel sees
/// whether it is complete; a second complete is MPI_ERR_REQUEST.
fn status_cancel_and_double_complete(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let calls = Arc::new(Calls::default());
    let (mut req, done) = counted(w, &calls, 1)?;
    assert_eq!(req.get_status()?, None);
    req.cancel()?;
    assert_eq!(
        calls.cancel_saw.load(Ordering::SeqCst),
        2,
        "cancel before complete"
    );
    done.complete()?;
    let e = done.complete().unwrap_err();
    assert_eq!(e.class(), ErrorClass::Request, "{e}");
    let st = req.get_status()?.expect("complete");
    assert!(st.is_cancelled());
    assert_eq!(
        (
            calls.query.load(Ordering::SeqCst),
            calls.free.load(Ordering::SeqCst)
        ),
        (1, 0)
    );
    req.cancel()?;
    assert_eq!(
        calls.cancel_saw.load(Ordering::SeqCst),
        1,
        "cancel after complete"
    );
    let st = req.test()?.expect("complete");
    assert_eq!(st.bytes(), 8);
    assert_eq!(
        (
            calls.query.load(Ordering::SeqCst),
            calls.free.load(Ordering::SeqCst)
        ),
        (2, 1)
    );
    Ok(())
}

/// request_free before completion: free runs in grequest_complete; after completion: in
/// request_free itself; never more than once, and the query never runs.
fn free_before_and_after_complete(u: &Universe) -> Result<()> {
    let w = u.world();
    let calls = Arc::new(Calls::default());
    let (req, done) = counted(w, &calls, 1)?;
    req.free()?;
    assert_eq!(calls.free.load(Ordering::SeqCst), 0, "not complete yet");
    std::thread::spawn(move || done.complete())
        .join()
        .expect("completer thread")?;
    assert_eq!(calls.free.load(Ordering::SeqCst), 1, "free ran in complete");
    let calls2 = Arc::new(Calls::default());
    let (req, done) = counted(w, &calls2, 1)?;
    done.complete()?;
    req.free()?;
    assert_eq!(
        calls2.free.load(Ordering::SeqCst),
        1,
        "free ran in request_free"
    );
    assert_eq!(
        calls.query.load(Ordering::SeqCst) + calls2.query.load(Ordering::SeqCst),
        0
    );
    Ok(())
}

/// In one array with point-to-point requests: wait_any returns the generalized request
/// when it completes first (the ring's messages wait for it), and wait_all collects the
/// rest.
fn mixed_with_point_to_point(u: &Universe) -> Result<()> {
    let w = u.world();
    let (n, me) = (w.size(), w.rank());
    let calls = Arc::new(Calls::default());
    let (g, done) = counted(w, &calls, 2)?;
    let mut got = [0i64];
    let out = [me as i64];
    scope(|s| -> Result<()> {
        let mut reqs = vec![g, w.irecv(s, &mut got, (me + n - 1) % n, 5)?];
        done.complete()?;
        let (i, st) = wait_any(&mut reqs)?.expect("an active request");
        assert_eq!(i, 0, "the generalized request completed first");
        assert_eq!(st.bytes(), 16);
        // The message for the receive leaves only now.
        w.send(&out, (me + 1) % n, 5)?;
        let sts = wait_all(&mut reqs)?;
        assert_eq!(sts[1].source(), (me + n - 1) % n);
        Ok(())
    })?;
    assert_eq!(got[0], ((me + n - 1) % n) as i64);
    assert_eq!(calls.free.load(Ordering::SeqCst), 1);
    Ok(())
}

/// A callback's error is the call's: free's error from wait, MPI_ERR_IN_STATUS naming it
/// from wait_all.
fn callback_errors_reach_the_caller(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let failing = |w: &earlybird::Comm| {
        w.grequest_start(
            |_| Ok(()),
            || {
                Err(earlybird::Error::new(
                    ErrorClass::Other,
                    "the program's free callback failed",
                ))
            },
            |_| Ok(()),
        )
    };
    let (mut req, done) = failing(w)?;
    done.complete()?;
    let e = req.wait().unwrap_err();
    assert_eq!(e.class(), ErrorClass::Other);
    assert!(e.to_string().contains("free callback failed"), "{e}");
    let (r1, d1) = failing(w)?;
    let (r2, d2) = w.grequest_start(|_| Ok(()), || Ok(()), |_| Ok(()))?;
    d1.complete()?;
    d2.complete()?;
    let mut reqs = vec![r1, r2];
    let e = wait_all(&mut reqs).unwrap_err();
    assert_eq!(e.class(), ErrorClass::InStatus);
    assert!(e.to_string().contains("request 0"), "{e}");
    Ok(())
}

scenarios! {
    completed_by_a_thread [1, 2];
    status_cancel_and_double_complete [1, 2];
    free_before_and_after_complete [1, 2];
    mixed_with_point_to_point [2, 3, 4];
    callback_errors_reach_the_caller [1, 2];
}
