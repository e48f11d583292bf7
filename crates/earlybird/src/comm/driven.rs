//! A rank driven by the calling thread: its endpoint, the communicator of its whole job
//! (MPI_COMM_WORLD, or an endpoint communicator) and its MPI_COMM_SELF, and how it ends.
//! [`crate::Universe`] and [`super::endpoints::EndpointComm`] are both one of these.
#![forbid(unsafe_code)]

use super::Comm;
use crate::error::Result;
use crate::p2p::engine::Finalizing;
use crate::p2p::wait::{Blocked, Waiter};
use crate::request::EngineRef;

pub(crate) struct Driven {
    eng: EngineRef,
    world: Comm,
    self_comm: Comm,
    done: bool,
    /// References to the endpoint, to the world's and to MPI_COMM_SELF's shared state when
    /// this was made (see [`check_alone`](Self::check_alone)).
    refs: [usize; 3],
}

impl Driven {
    pub(crate) fn new(eng: EngineRef, world: Comm, self_comm: Comm) -> Driven {
        let mut d = Driven {
            eng,
            world,
            self_comm,
            done: false,
            refs: [0; 3],
        };
        d.refs = d.count_refs();
        d
    }

    fn count_refs(&self) -> [usize; 3] {
        [
            std::rc::Rc::strong_count(&self.eng),
            std::rc::Rc::strong_count(&self.world.shared),
            std::rc::Rc::strong_count(&self.self_comm.shared),
        ]
    }

    /// `Ok` if nothing but this rank itself refers to its state: no communicator handle,
    /// request or scope made from it lives, and neither its world nor MPI_COMM_SELF has a
    /// user error handler or attributes (whose callbacks could keep handles), so that the
    /// rank can be handed to threads that take turns with a lock (`crate::shared`).
    pub(crate) fn check_alone(&self) -> Result<()> {
        let user_code = [&self.world, &self.self_comm].into_iter().any(|c| {
            matches!(
                *c.shared.errh.borrow(),
                super::errhandler::ErrHandler::User(_)
            ) || !c.shared.attrs.borrow().is_empty()
        });
        if self.count_refs() != self.refs || user_code {
            return Err(crate::error::Error::new(
                crate::error::ErrorClass::Other,
                "share: the universe is in use (a communicator handle, request or scope made from it lives, or its world or MPI_COMM_SELF has a user error handler or attributes); share it right after init",
            ));
        }
        Ok(())
    }

    pub(crate) fn eng(&self) -> &EngineRef {
        &self.eng
    }

    pub(crate) fn world(&self) -> &Comm {
        &self.world
    }

    pub(crate) fn comm_self(&self) -> &Comm {
        &self.self_comm
    }

    pub(crate) fn progress(&self) {
        self.eng.borrow_mut().progress();
    }

    /// MPI_Comm_free's attribute deletion on the job's communicator (an endpoint
    /// communicator's free).
    pub(crate) fn delete_world_attrs(&self) -> Result<()> {
        let r = self.world.delete_all_attrs();
        self.world.ret("comm_free", r)
    }

    /// MPI_Finalize for this rank: MPI_COMM_SELF's attributes are deleted first (MPI 4.1
    /// §11.2.4); a delete callback's error is returned after the rest has run (the other
    /// ranks must not wait for this one).
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.done = true;
        let attrs = self.self_comm.finalize_self();
        let r = self.eng.borrow_mut().finalize();
        let r = self.world.ret("finalize", r);
        attrs.and(r)
    }

    /// [`finish`](Self::finish) for several ranks this thread drives, stepped in turn so that
    /// none waits for another.
    pub(crate) fn finish_all(ranks: &mut [Driven]) -> Result<()> {
        if let [one] = ranks {
            return one.finish();
        }
        let mut first = Ok(());
        for r in ranks.iter_mut() {
            r.done = true;
            first = first.and(r.self_comm.finalize_self());
            let detach = r.eng.borrow_mut().buffers_drain();
            first = first.and(r.world.ret("finalize", detach));
        }
        let Some(lead) = ranks.first() else {
            return first;
        };
        let (budget, job, me) = {
            let e = lead.eng.borrow();
            (e.spin_budget(), e.job().clone(), e.rank())
        };
        let mut w = Waiter::new(
            budget,
            Blocked::in_call(crate::fabric::job::BlockedIn::Finalize),
        );
        let mut phases = vec![Finalizing::default(); ranks.len()];
        loop {
            let mut all = true;
            for (r, ph) in ranks.iter().zip(phases.iter_mut()) {
                all &= r.eng.borrow_mut().finalize_step(ph);
            }
            if all {
                w.finish(&job, me);
                return first;
            }
            if let Err(e) = w.idle(&job, me) {
                return first.and(ranks[0].world.ret("finalize", Err(e)));
            }
        }
    }
}

impl Drop for Driven {
    /// A rank dropped without being finished finishes as it would: MPI_COMM_SELF's
    /// attributes are deleted first, then the rank waits for the others. A rank unwinding
    /// from a panic aborts the job instead.
    fn drop(&mut self) {
        self.finish_at_drop();
    }
}

impl Driven {
    /// What dropping an unfinished rank does (see `Drop`); nothing once it is finished.
    pub(crate) fn finish_at_drop(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let panicking = std::thread::panicking();
        // Delete callbacks may call MPI: they run before the engine is borrowed here.
        let attrs = if panicking {
            Ok(())
        } else {
            self.self_comm.finalize_self()
        };
        let Ok(mut e) = self.eng.try_borrow_mut() else {
            return;
        };
        if panicking {
            // A rank unwinding (a panic in a thread job) must not wait in finalize for
            // peers that may be waiting for it: abort the job instead.
            let rank = e.rank() as i32;
            e.job().abort(rank, -1);
            if !e.ranks_are_threads() {
                // Started by Hydra, Slurm or mpirun: the launcher ends the other ranks (with
                // the status of a Rust panic).
                crate::bootstrap::launcher_abort(101, &format!("earlybird: rank {rank} panicked"));
            }
            return;
        }
        if let Err(err) = attrs.and(e.finalize()) {
            use std::io::Write;
            let line = format!(
                "earlybird: rank {}: finalize at drop failed: {err}\n",
                e.rank()
            );
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }
}
