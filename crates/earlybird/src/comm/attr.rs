//! Attributes cached on communicators (MPI 4.1 §7.7): keyvals with copy and delete
//! callbacks, set / get / delete, and the predefined attributes of §9.1.2 and §11.10.
//!
//! # Typed values
//!
//! A [`Keyval<T>`] carries the type of the values stored under it, so
//! [`Comm::get_attr`] returns a `T` (a clone of the stored value) and a value of another
//! type cannot be stored or read by mistake: where C passes `void *`, Rust checks the type at
//! compile time. To share one object between communicators (C's pointer), make `T` an
//! `Rc<...>`. Values are kept type-erased (`Rc<dyn Any>`) so that the callbacks may touch the
//! communicator's attributes while they run.
//!
//! # Callbacks
//!
//! The copy callback (`Fn(&Comm, &T) -> Result<Option<T>>`, given the communicator being
//! duplicated) runs on [`Comm::dup`] for every attribute, in the order they were set:
//! `Ok(None)` leaves the attribute off the new communicator ([`comm_null_copy_fn`]),
//! `Ok(Some(v))` stores `v` there ([`comm_dup_fn`] stores a clone). The delete callback
//! (`Fn(&Comm, &T) -> Result<()>`) runs when an attribute is deleted ([`Comm::delete_attr`]),
//! replaced ([`Comm::set_attr`] on a key already set), or when its communicator is freed
//! ([`Comm::free`]), which deletes attributes in the reverse order of their setting (the order
//! MPI prescribes for MPI_COMM_SELF at finalize). Extra state is whatever the closures
//! capture.
//!
//! An error returned by a callback fails the call that ran it, with the callback's class and
//! a message naming the keyval: a failed copy fails the dup (the copies already made are
//! deleted again and no communicator is returned); a failed delete leaves that attribute in
//! place (and, in `free`, the communicator and the attributes not yet deleted usable).
//!
//! Dropping the last handle of a communicator without [`Comm::free`] drops its attributes
//! without running delete callbacks (Rust's `Drop` of the values still runs). A closure that
//! captures a handle of the communicator it is attached to keeps it alive until freed.
//!
//! # Predefined attributes
//!
//! [`keyval::TAG_UB`] and friends are answered on every communicator (MPI attaches them to
//! MPI_COMM_WORLD; answering everywhere is a harmless superset). Setting or deleting them, or
//! freeing their keyvals, is `MPI_ERR_KEYVAL`.
//!
//! # Errors
//!
//! A keyval used after [`Keyval::free`] (through any clone of it) or a predefined keyval where
//! a user one is required is `MPI_ERR_KEYVAL`. Deleting an attribute that is not set does
//! nothing (as MPICH).
#![forbid(unsafe_code)]

use super::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::{ANY_SOURCE, PROC_NULL, TAG_UB};
use std::any::Any;
use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

type CopyFn = dyn Fn(&Comm, &dyn Any) -> Result<Option<Rc<dyn Any>>>;
type DeleteFn = dyn Fn(&Comm, &dyn Any) -> Result<()>;

/// A user keyval's identity and callbacks (shared by its clones and by the attributes set
/// under it, which keep it alive after [`Keyval::free`]).
struct KeyInner {
    id: u64,
    freed: Cell<bool>,
    copy: Box<CopyFn>,
    delete: Box<DeleteFn>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Predef {
    TagUb,
    Host,
    Io,
    WtimeIsGlobal,
    UniverseSize,
    AppNum,
}

impl Predef {
    fn name(self) -> &'static str {
        match self {
            Predef::TagUb => "MPI_TAG_UB",
            Predef::Host => "MPI_HOST",
            Predef::Io => "MPI_IO",
            Predef::WtimeIsGlobal => "MPI_WTIME_IS_GLOBAL",
            Predef::UniverseSize => "MPI_UNIVERSE_SIZE",
            Predef::AppNum => "MPI_APPNUM",
        }
    }
}

#[derive(Clone)]
enum Key {
    Predefined(Predef),
    User(Rc<KeyInner>),
}

/// An attribute key (MPI_Comm_create_keyval) whose values are of type `T`. Clones are
/// handles on the same key.
pub struct Keyval<T> {
    key: Key,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Keyval<T> {
    fn clone(&self) -> Self {
        Keyval {
            key: self.key.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Keyval<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe(&self.key))
    }
}

fn describe(k: &Key) -> String {
    match k {
        Key::Predefined(p) => p.name().to_string(),
        Key::User(u) => format!("keyval {}", u.id),
    }
}

fn keyval_err(detail: String) -> Error {
    Error::new(ErrorClass::Keyval, detail)
}

/// The predefined attribute keys (MPI 4.1 §9.1.2, §11.10.1), readable on every communicator.
pub mod keyval {
    use super::{Key, Keyval, Predef};
    use std::marker::PhantomData;

    const fn predef<T>(p: Predef) -> Keyval<T> {
        Keyval {
            key: Key::Predefined(p),
            _t: PhantomData,
        }
    }

    /// MPI_TAG_UB: the largest tag, 2^31 - 1 here.
    pub const TAG_UB: Keyval<i32> = predef(Predef::TagUb);
    /// MPI_HOST: the host process's rank; PROC_NULL, as there is none.
    pub const HOST: Keyval<i32> = predef(Predef::Host);
    /// MPI_IO: a rank that can do I/O; ANY_SOURCE, since every rank can.
    pub const IO: Keyval<i32> = predef(Predef::Io);
    /// MPI_WTIME_IS_GLOBAL: whether [`wtime`](crate::wtime) is synchronised across the
    /// job's ranks. True when all ranks are threads of one process (thread jobs, a singleton),
    /// which share one clock origin; false for ranks started by `ebrun`, where each process
    /// counts from its own first call.
    pub const WTIME_IS_GLOBAL: Keyval<bool> = predef(Predef::WtimeIsGlobal);
    /// MPI_UNIVERSE_SIZE: the processes the job may use, the job's size (no spawning).
    pub const UNIVERSE_SIZE: Keyval<i32> = predef(Predef::UniverseSize);
    /// MPI_APPNUM: the application number, 0 (one program per job).
    pub const APPNUM: Keyval<i32> = predef(Predef::AppNum);
}

/// MPI_COMM_NULL_COPY_FN: a dup leaves the attribute behind.
pub fn comm_null_copy_fn<T>(_old: &Comm, _value: &T) -> Result<Option<T>> {
    Ok(None)
}

/// MPI_COMM_DUP_FN: a dup carries a clone of the value.
pub fn comm_dup_fn<T: Clone>(_old: &Comm, value: &T) -> Result<Option<T>> {
    Ok(Some(value.clone()))
}

/// MPI_COMM_NULL_DELETE_FN: nothing to do when the attribute goes.
pub fn comm_null_delete_fn<T>(_comm: &Comm, _value: &T) -> Result<()> {
    Ok(())
}

static NEXT_KEYVAL: AtomicU64 = AtomicU64::new(1);

impl<T: Clone + 'static> Keyval<T> {
    /// MPI_Comm_create_keyval: a new key with its copy callback (run by [`Comm::dup`]:
    /// `Ok(None)` drops the attribute from the new communicator, `Ok(Some(v))` stores `v`)
    /// and delete callback (run when the attribute is deleted, replaced or its communicator
    /// freed). See [`comm_null_copy_fn`], [`comm_dup_fn`] and [`comm_null_delete_fn`].
    pub fn new<C, D>(copy: C, delete: D) -> Keyval<T>
    where
        C: Fn(&Comm, &T) -> Result<Option<T>> + 'static,
        D: Fn(&Comm, &T) -> Result<()> + 'static,
    {
        let inner = KeyInner {
            id: NEXT_KEYVAL.fetch_add(1, Ordering::Relaxed),
            freed: Cell::new(false),
            copy: Box::new(move |c, v| {
                Ok(copy(c, typed::<T>(v))?.map(|n| Rc::new(n) as Rc<dyn Any>))
            }),
            delete: Box::new(move |c, v| delete(c, typed::<T>(v))),
        };
        Keyval {
            key: Key::User(Rc::new(inner)),
            _t: PhantomData,
        }
    }
}

impl<T> Keyval<T> {
    /// MPI_Comm_free_keyval: this key (through every clone) can no longer be used to set
    /// attributes; the attributes already set under it stay, their callbacks still run on dup
    /// and free, and they can still be read and deleted through it (MPI 4.1 §7.7.2: the key is
    /// gone only once the program has deleted its attributes, "via calls to
    /// MPI_COMM_DELETE_ATTR" among others). Freeing a predefined key or a key already freed is
    /// `MPI_ERR_KEYVAL` (returned: a keyval has no communicator whose error handler applies).
    pub fn free(self) -> Result<()> {
        match &self.key {
            Key::Predefined(p) => Err(keyval_err(format!(
                "comm_free_keyval: {} is predefined",
                p.name()
            ))),
            Key::User(u) if u.freed.replace(true) => Err(keyval_err(format!(
                "comm_free_keyval: keyval {} is already freed",
                u.id
            ))),
            Key::User(_) => Ok(()),
        }
    }

    /// Whether [`free`](Self::free) was called on this key (through any clone).
    pub fn is_freed(&self) -> bool {
        matches!(&self.key, Key::User(u) if u.freed.get())
    }

    /// The user key behind this handle, freed or not, or `MPI_ERR_KEYVAL` (predefined): what
    /// reading and deleting an attribute take.
    fn user_any(&self, what: &str) -> Result<&Rc<KeyInner>> {
        match &self.key {
            Key::Predefined(p) => Err(keyval_err(format!(
                "{what}: {} is a predefined attribute, which cannot be changed",
                p.name()
            ))),
            Key::User(u) => Ok(u),
        }
    }

    /// The user key behind this handle, or `MPI_ERR_KEYVAL` (predefined or freed).
    fn user(&self, what: &str) -> Result<&Rc<KeyInner>> {
        let u = self.user_any(what)?;
        if u.freed.get() {
            return Err(keyval_err(format!("{what}: keyval {} was freed", u.id)));
        }
        Ok(u)
    }
}

/// The stored value as the keyval's type (always that type: only `Keyval<T>` stores under
/// its key).
fn typed<T: 'static>(v: &dyn Any) -> &T {
    v.downcast_ref::<T>()
        .expect("an attribute holds its keyval's type")
}

/// A dup's share of its parent: topology and copied attributes.
pub(crate) struct Inheritance {
    topo: Option<super::cart::Topo>,
    attrs: Vec<(Rc<KeyInner>, Rc<dyn Any>)>,
}

/// The attributes cached on one communicator, in the order they were set.
#[derive(Default)]
pub(crate) struct Attrs {
    list: Vec<(Rc<KeyInner>, Rc<dyn Any>)>,
}

impl Attrs {
    /// Whether no attribute is set.
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    fn find(&self, k: &Rc<KeyInner>) -> Option<usize> {
        self.list.iter().position(|(x, _)| Rc::ptr_eq(x, k))
    }
}

/// Rewrite a callback's error to say which callback of which keyval failed.
fn callback_err(what: &str, kind: &str, k: &KeyInner, e: Error) -> Error {
    Error::new(
        e.class(),
        format!(
            "{what}: the {kind} callback of keyval {} failed: {}",
            k.id,
            e.detail()
        ),
    )
}

impl Comm {
    /// Run `k`'s delete callback on `v`, then (on success) take the attribute off. The
    /// attribute list is not borrowed while the callback runs.
    fn delete_one(&self, what: &str, k: &Rc<KeyInner>, v: &Rc<dyn Any>) -> Result<()> {
        (k.delete)(self, &**v).map_err(|e| callback_err(what, "delete", k, e))?;
        let mut a = self.shared.attrs.borrow_mut();
        if let Some(i) = a.find(k) {
            a.list.remove(i);
        }
        Ok(())
    }

    fn lookup(&self, k: &Rc<KeyInner>) -> Option<Rc<dyn Any>> {
        let a = self.shared.attrs.borrow();
        a.find(k).map(|i| a.list[i].1.clone())
    }

    /// MPI_Comm_set_attr: store `value` under `keyval` on this communicator. A value already
    /// there is deleted first (its delete callback runs; if that fails, the old value stays
    /// and the error is returned).
    pub fn set_attr<T: Clone + 'static>(&self, keyval: &Keyval<T>, value: T) -> Result<()> {
        let what = "comm_set_attr";
        let r = self.check_live().and_then(|()| {
            let k = keyval.user(what)?;
            if let Some(old) = self.lookup(k) {
                self.delete_one(what, k, &old)?;
            }
            self.shared
                .attrs
                .borrow_mut()
                .list
                .push((k.clone(), Rc::new(value)));
            Ok(())
        });
        self.ret(what, r)
    }

    /// MPI_Comm_get_attr: a clone of the value stored under `keyval`, `None` if there is
    /// none (MPI's flag false).
    pub fn get_attr<T: Clone + 'static>(&self, keyval: &Keyval<T>) -> Result<Option<T>> {
        let r = self.check_live().and_then(|()| match &keyval.key {
            Key::Predefined(p) => Ok(typed::<T>(&*self.predefined(*p)).clone().into()),
            Key::User(_) => {
                let k = keyval.user_any("comm_get_attr")?;
                Ok(self.lookup(k).map(|v| typed::<T>(&*v).clone()))
            }
        });
        self.ret("comm_get_attr", r)
    }

    /// MPI_Comm_delete_attr: run the delete callback and take the attribute off (nothing to
    /// do if it is not set).
    pub fn delete_attr<T: Clone + 'static>(&self, keyval: &Keyval<T>) -> Result<()> {
        let what = "comm_delete_attr";
        let r = self.check_live().and_then(|()| {
            let k = keyval.user_any(what)?;
            match self.lookup(k) {
                Some(v) => self.delete_one(what, k, &v),
                None => Ok(()),
            }
        });
        self.ret(what, r)
    }

    fn predefined(&self, p: Predef) -> Rc<dyn Any> {
        match p {
            Predef::TagUb => Rc::new(TAG_UB),
            Predef::Host => Rc::new(PROC_NULL),
            Predef::Io => Rc::new(ANY_SOURCE),
            Predef::WtimeIsGlobal => {
                let e = self.eng.borrow();
                Rc::new(e.size() == 1 || e.ranks_are_threads())
            }
            Predef::UniverseSize => Rc::new(self.eng.borrow().size() as i32),
            Predef::AppNum => Rc::new(0i32),
        }
    }

    /// For `comm_free`: run every attribute's delete callback, last set first, taking each
    /// off as it succeeds; the first failure stops and is returned.
    /// Delete every attribute of this communicator, last set first, running their delete
    /// callbacks: what MPI_Comm_free does first, and MPI_Finalize on MPI_COMM_SELF. For a
    /// binding that must run that step of finalize while its own state is intact.
    pub fn delete_all_attributes(&self) -> Result<()> {
        let r = self.delete_all_attrs();
        self.ret("comm_delete_attr", r)
    }

    pub(super) fn delete_all_attrs(&self) -> Result<()> {
        loop {
            let last = self.shared.attrs.borrow().list.last().cloned();
            let Some((k, v)) = last else {
                return Ok(());
            };
            self.delete_one("comm_free", &k, &v)?;
        }
    }

    /// What a dup carries over besides the group: the topology, and the attributes through
    /// their copy callbacks (run now, in the order the attributes were set), for an idup
    /// whose communicator does not exist yet. If a copy callback fails, the copies made so
    /// far are dropped (no delete callback: they never belonged to a communicator) and the
    /// error is returned.
    pub(crate) fn inheritance(&self, what: &str) -> Result<Inheritance> {
        let mut attrs = Vec::new();
        let snapshot = self.shared.attrs.borrow().list.clone();
        for (k, v) in snapshot {
            match (k.copy)(self, &*v) {
                Ok(Some(nv)) => attrs.push((k, nv)),
                Ok(None) => {}
                Err(e) => return Err(callback_err(what, "copy", &k, e)),
            }
        }
        Ok(Inheritance {
            topo: self.topology(),
            attrs,
        })
    }

    /// Give a new communicator what [`inheritance`](Self::inheritance) prepared.
    pub(crate) fn adopt(new: &Comm, inh: Inheritance) {
        if let Some(t) = inh.topo {
            new.set_topology(t);
        }
        new.shared.attrs.borrow_mut().list.extend(inh.attrs);
    }

    /// What a blocking dup carries over (see [`inheritance`](Self::inheritance)), copied
    /// straight onto `new`: if a copy callback fails, the copies already made are deleted
    /// again through their delete callbacks (their errors ignored), `new` is dropped (its
    /// context goes back) and the error is returned.
    pub(crate) fn inherit(&self, new: Comm) -> Result<Comm> {
        if let Some(t) = self.topology() {
            new.set_topology(t);
        }
        let snapshot = self.shared.attrs.borrow().list.clone();
        for (k, v) in snapshot {
            match (k.copy)(self, &*v) {
                Ok(Some(nv)) => new.shared.attrs.borrow_mut().list.push((k, nv)),
                Ok(None) => {}
                Err(e) => {
                    let _ = new.delete_all_attrs();
                    return Err(callback_err("comm_dup", "copy", &k, e));
                }
            }
        }
        Ok(new)
    }
}
