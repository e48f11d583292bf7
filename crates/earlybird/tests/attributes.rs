//! Attributes with keyvals (MPI 4.1 §7.7) and the predefined attributes: set / get /
//! delete, copy callbacks on dup, delete callbacks on free (last set first), errors from
//! callbacks, and misuse; as thread jobs and under ebrun on 1, 2, 3, 4 and 8 ranks.

mod common;
use earlybird::{
    comm_dup_fn, comm_null_copy_fn, comm_null_delete_fn, keyval, Comm, ErrHandler, Error,
    ErrorClass, Keyval, Result, Universe, ANY_SOURCE, PROC_NULL, TAG_UB,
};
use std::cell::RefCell;
use std::rc::Rc;

/// The predefined attributes, on WORLD and on a dup; changing them is MPI_ERR_KEYVAL.
fn predefined(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let d = w.dup()?;
    for c in [w, &d] {
        assert_eq!(c.get_attr(&keyval::TAG_UB)?, Some(TAG_UB));
        assert_eq!(c.get_attr(&keyval::TAG_UB)?, Some(i32::MAX));
        assert_eq!(c.get_attr(&keyval::HOST)?, Some(PROC_NULL));
        assert_eq!(c.get_attr(&keyval::IO)?, Some(ANY_SOURCE));
        assert_eq!(c.get_attr(&keyval::UNIVERSE_SIZE)?, Some(w.size()));
        assert_eq!(c.get_attr(&keyval::APPNUM)?, Some(0));
        // Threads of one process share wtime's origin; ebrun's processes do not.
        assert_eq!(
            c.get_attr(&keyval::WTIME_IS_GLOBAL)?,
            Some(w.size() == 1 || !u.is_process_job())
        );
    }
    common::assert_err(
        w.set_attr(&keyval::TAG_UB, 5),
        ErrorClass::Keyval,
        "MPI_TAG_UB",
    );
    common::assert_err(d.delete_attr(&keyval::HOST), ErrorClass::Keyval, "MPI_HOST");
    common::assert_err(keyval::IO.free(), ErrorClass::Keyval, "MPI_IO");
    assert_eq!(w.get_attr(&keyval::TAG_UB)?, Some(TAG_UB), "still there");
    d.free()?;
    Ok(())
}

/// Set, get, replace (the old value's delete callback runs) and delete, with values of
/// several types; clones of a communicator see the same attributes.
fn set_get_delete(u: &Universe) -> Result<()> {
    let w = u.world();
    let log: Rc<RefCell<Vec<String>>> = Rc::default();
    let l = log.clone();
    let names: Keyval<String> = Keyval::new(comm_dup_fn, move |_c: &Comm, v: &String| {
        l.borrow_mut().push(format!("delete {v}"));
        Ok(())
    });
    let nums: Keyval<Vec<i64>> = Keyval::new(comm_null_copy_fn, comm_null_delete_fn);
    let c = w.dup()?;
    assert_eq!(c.get_attr(&names)?, None);
    c.set_attr(&names, format!("rank {}", w.rank()))?;
    c.set_attr(&nums, vec![1, 2, w.rank() as i64])?;
    assert_eq!(
        c.clone().get_attr(&names)?,
        Some(format!("rank {}", w.rank()))
    );
    assert_eq!(c.get_attr(&nums)?, Some(vec![1, 2, w.rank() as i64]));
    assert_eq!(
        w.get_attr(&names)?,
        None,
        "attributes belong to one communicator"
    );
    c.set_attr(&names, "second".to_string())?;
    assert_eq!(*log.borrow(), vec![format!("delete rank {}", w.rank())]);
    assert_eq!(c.get_attr(&names)?.as_deref(), Some("second"));
    c.delete_attr(&names)?;
    assert_eq!(c.get_attr(&names)?, None);
    c.delete_attr(&names)?; // not set: nothing to do
    assert_eq!(log.borrow().len(), 2);
    // The same keyval on another communicator is independent.
    w.set_attr(&names, "on world".to_string())?;
    assert_eq!(w.get_attr(&names)?.as_deref(), Some("on world"));
    w.delete_attr(&names)?;
    c.free()?;
    assert_eq!(log.borrow().len(), 3);
    names.free()?;
    nums.free()?;
    Ok(())
}

/// A dup runs each copy callback (null copy, dup, a transforming copy, a conditional one),
/// in the order set; free runs delete callbacks last set first, and the dup's attributes are
/// deleted with the dup.
fn dup_copies_free_deletes(u: &Universe) -> Result<()> {
    let w = u.world();
    let log: Rc<RefCell<Vec<String>>> = Rc::default();
    let deleter = |name: &'static str| {
        let l = log.clone();
        move |_c: &Comm, v: &i32| {
            l.borrow_mut().push(format!("{name}={v}"));
            Ok(())
        }
    };
    let none: Keyval<i32> = Keyval::new(comm_null_copy_fn, deleter("none"));
    let same: Keyval<i32> = Keyval::new(comm_dup_fn, deleter("same"));
    let l = log.clone();
    let plus: Keyval<i32> = Keyval::new(
        move |old: &Comm, v: &i32| {
            l.borrow_mut()
                .push(format!("copy plus from size {}", old.size()));
            Ok(Some(v + 100))
        },
        deleter("plus"),
    );
    let even: Keyval<i32> = Keyval::new(
        |_: &Comm, v: &i32| Ok((v % 2 == 0).then_some(*v)),
        deleter("even"),
    );
    let c = w.dup()?;
    let me = w.rank();
    c.set_attr(&same, me)?;
    c.set_attr(&none, 1)?;
    c.set_attr(&plus, 2)?;
    c.set_attr(&even, me)?;
    let d = c.dup()?;
    assert_eq!(
        *log.borrow(),
        vec![format!("copy plus from size {}", w.size())]
    );
    assert_eq!(d.get_attr(&same)?, Some(me));
    assert_eq!(d.get_attr(&none)?, None);
    assert_eq!(d.get_attr(&plus)?, Some(102));
    assert_eq!(d.get_attr(&even)?, (me % 2 == 0).then_some(me));
    // The originals are untouched.
    assert_eq!((c.get_attr(&none)?, c.get_attr(&plus)?), (Some(1), Some(2)));
    log.borrow_mut().clear();
    c.free()?;
    assert_eq!(
        *log.borrow(),
        vec![
            format!("even={me}"),
            "plus=2".to_string(),
            "none=1".to_string(),
            format!("same={me}")
        ]
    );
    log.borrow_mut().clear();
    // A dup of a dup copies again.
    let dd = d.dup()?;
    assert_eq!(dd.get_attr(&plus)?, Some(202));
    dd.free()?;
    log.borrow_mut().clear();
    // A keyval freed while in use: the attribute stays, its callbacks still run.
    same.clone().free()?;
    let d2 = d.dup()?;
    d2.free()?;
    assert!(
        log.borrow().contains(&format!("same={me}")),
        "{:?}",
        log.borrow()
    );
    log.borrow_mut().clear();
    d.free()?;
    let mut want = vec!["plus=102".to_string(), format!("same={me}")];
    if me % 2 == 0 {
        want.insert(0, format!("even={me}"));
    }
    assert_eq!(*log.borrow(), want);
    Ok(())
}

/// Errors from callbacks propagate with their class: a failing copy fails the dup (and the
/// next dup works), a failing delete fails the free and leaves the communicator usable.
fn callback_errors(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let refuse: Keyval<u8> = Keyval::new(
        |_: &Comm, v: &u8| Err(Error::new(ErrorClass::Other, format!("will not copy {v}"))),
        comm_null_delete_fn,
    );
    let deleted: Rc<RefCell<Vec<u8>>> = Rc::default();
    let dl = deleted.clone();
    let kept: Keyval<u8> = Keyval::new(comm_dup_fn, move |_: &Comm, v: &u8| {
        dl.borrow_mut().push(*v);
        Ok(())
    });
    let c = w.dup()?;
    c.set_attr(&kept, 7)?;
    c.set_attr(&refuse, 9)?;
    let e = c.dup().unwrap_err();
    assert!(
        e.class() == ErrorClass::Other
            && e.detail().contains("comm_dup")
            && e.detail().contains("will not copy 9"),
        "{e}"
    );
    assert_eq!(
        *deleted.borrow(),
        vec![7],
        "the copy already made was deleted again"
    );
    c.delete_attr(&refuse)?;
    let d = c.dup()?;
    assert_eq!(d.get_attr(&kept)?, Some(7));
    d.free()?;

    // A delete callback that fails once.
    let fail = Rc::new(std::cell::Cell::new(true));
    let f = fail.clone();
    let stubborn: Keyval<i32> = Keyval::new(comm_null_copy_fn, move |_: &Comm, v: &i32| {
        if f.replace(false) {
            Err(Error::new(ErrorClass::Arg, format!("cannot let {v} go")))
        } else {
            Ok(())
        }
    });
    c.set_attr(&stubborn, 3)?;
    common::assert_err(c.set_attr(&stubborn, 4), ErrorClass::Arg, "cannot let 3 go");
    assert_eq!(c.get_attr(&stubborn)?, Some(3), "the old value stays");
    fail.set(true);
    deleted.borrow_mut().clear();
    common::assert_err(c.clone().free(), ErrorClass::Arg, "comm_free");
    // Nothing before the failing attribute (last set first) was deleted; the communicator
    // still works.
    assert_eq!(*deleted.borrow(), Vec::<u8>::new());
    assert_eq!(c.get_attr(&stubborn)?, Some(3));
    let mut x = [w.rank()];
    c.sendrecv_replace(
        &mut x,
        (c.rank() + 1) % c.size(),
        0,
        (c.rank() + c.size() - 1) % c.size(),
        0,
    )?;
    assert_eq!(x[0], (w.rank() + w.size() - 1) % w.size());
    c.free()?;
    assert_eq!(*deleted.borrow(), vec![7]);
    Ok(())
}

/// Misuse: freed keyvals (through any clone) and freed communicators.
fn attr_misuse(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let k: Keyval<i32> = Keyval::new(comm_dup_fn, comm_null_delete_fn);
    let k2 = k.clone();
    w.set_attr(&k, 1)?;
    k.free()?;
    assert!(k2.is_freed());
    for r in [w.set_attr(&k2, 2), k2.clone().free()] {
        common::assert_err(r, ErrorClass::Keyval, "freed");
    }
    // Its attribute stays, to be read and deleted through the key (MPI 4.1 §7.7.2: the
    // program deletes the attributes of a freed key with MPI_Comm_delete_attr).
    assert_eq!(w.get_attr(&k2)?, Some(1));
    w.delete_attr(&k2)?;
    assert_eq!(w.get_attr(&k2)?, None);
    let d = w.dup()?;
    let gone = d.clone();
    d.free()?;
    let fresh: Keyval<i32> = Keyval::new(comm_dup_fn, comm_null_delete_fn);
    for r in [
        gone.set_attr(&fresh, 1),
        gone.get_attr(&fresh).map(drop),
        gone.get_attr(&keyval::TAG_UB).map(drop),
    ] {
        common::assert_err(r, ErrorClass::Comm, "comm_free");
    }
    Ok(())
}

/// Callbacks may use the communicator they are given (no re-entrancy trouble): a delete
/// callback that reads another attribute, a copy callback that sets one on the old
/// communicator.
fn reentrant_callbacks(u: &Universe) -> Result<()> {
    let w = u.world();
    let counter: Keyval<u32> = Keyval::new(comm_null_copy_fn, comm_null_delete_fn);
    let c2 = counter.clone();
    let watcher: Keyval<u32> = Keyval::new(
        move |old: &Comm, v: &u32| {
            let n = old.get_attr(&c2)?.unwrap_or(0);
            old.set_attr(&c2, n + 1)?;
            Ok(Some(*v))
        },
        comm_null_delete_fn,
    );
    let c = w.dup()?;
    c.set_attr(&watcher, 1)?;
    for _ in 0..3 {
        c.dup()?.free()?;
    }
    assert_eq!(c.get_attr(&counter)?, Some(3));
    c.free()?;
    Ok(())
}

scenarios! {
    predefined [1, 2, 3, 4, 8];
    set_get_delete [1, 2, 3, 4, 8];
    dup_copies_free_deletes [1, 2, 3, 4, 8];
    callback_errors [1, 2, 3, 4, 8];
    attr_misuse [1, 2];
    reentrant_callbacks [1, 2, 3, 4, 8];
}
