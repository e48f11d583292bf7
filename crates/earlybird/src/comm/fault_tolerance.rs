//! The agreement and shrink of fault tolerance's proposal (ULFM: MPIX_Comm_agree,
//! MPIX_Comm_iagree, MPIX_Comm_shrink, as MPICH exports them), in a library where a failed
//! process ends the job: ebrun stops every rank when one dies, so no process of a running job
//! ever sees a peer fail. The agreement is then the bitwise AND of a flag over every
//! process of the communicator, and a shrink keeps them all.
//!
//! An agreement keeps its own count of calls on the communicator, apart from the collective
//! calls': its messages go on the internal context under [`AGREE_ROUND`] of that count, so
//! an agreement matches the other processes' agreement of the same number whatever
//! collectives each process makes around it (a nonblocking agreement posted before a
//! barrier on one process and after it on another completes, as the proposal's users
//! expect; mpi4py's tests do this).
#![forbid(unsafe_code)]

use super::agree::{self, coll_tag, Exchange};
use super::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::p2p::Status;
use crate::request::steps::Steps;
use crate::request::{Request, Scope};
use std::cell::Cell;
use std::rc::Rc;

/// The round of the internal tags agreements use (context agreements stop one short of it).
pub(crate) const AGREE_ROUND: u32 = 31;

/// The AND of every participant's flag, from the bytes the exchange gathered.
fn and_of(got: &[Vec<u8>]) -> Result<u32> {
    got.iter().try_fold(u32::MAX, |acc, b| {
        let w: [u8; 4] = b.as_slice().try_into().map_err(|_| {
            Error::new(
                ErrorClass::Intern,
                format!("comm_agree: a flag of {} bytes", b.len()),
            )
        })?;
        Ok(acc & u32::from_le_bytes(w))
    })
}

impl Comm {
    /// This process's next agreement on the communicator: the participants (every process
    /// of both groups), this process's index among them, and the internal context and tag
    /// its messages go under.
    fn next_agreement(&self) -> Result<(Vec<u32>, usize, u32, i32)> {
        self.check_live()?;
        let (parts, me) = self.parts();
        let s = self.shared.agree_seq.get();
        self.shared.agree_seq.set(s.wrapping_add(1));
        Ok((
            parts,
            me,
            self.ctx.internal().raw(),
            coll_tag(s, AGREE_ROUND),
        ))
    }

    /// MPIX_Comm_agree: `flag` becomes the bitwise AND of the flags every process of the
    /// communicator (both groups of an intercommunicator) gives. Collective over agreements
    /// only (see the module doc). No failure is ever reported: a process that fails ends the
    /// job, this call included.
    pub fn agree(&self, flag: &mut u32) -> Result<()> {
        let r = (|| {
            let (parts, me, ctx, tag) = self.next_agreement()?;
            let got = agree::exchange(&self.eng, ctx, tag, &parts, me, flag.to_le_bytes().into())?;
            *flag = and_of(&got)?;
            Ok(())
        })();
        self.ret("comm_agree", r)
    }

    /// MPIX_Comm_iagree: [`agree`](Self::agree) as a request. The result is read from the
    /// returned [`Agreed`] once the request has completed.
    pub fn iagree<'s>(&self, s: &'s Scope<'s, '_>, flag: u32) -> Result<(Request<'s>, Agreed)> {
        let r = (|| {
            let (parts, me, ctx, tag) = self.next_agreement()?;
            let result = Rc::new(Cell::new(None));
            let x = Exchange::start(
                &mut self.eng.borrow_mut(),
                ctx,
                tag,
                &parts,
                me,
                flag.to_le_bytes().into(),
            )?;
            let steps = AgreeSteps {
                exchange: x,
                blocked: agree::blocked(ctx, tag),
                result: result.clone(),
            };
            s.inner().note_engine(&self.eng);
            Ok((
                Request::steps(&self.eng, self.origin(), steps),
                Agreed(result),
            ))
        })();
        self.ret("comm_iagree", r)
    }

    /// MPIX_Comm_shrink: a communicator of the processes that have not failed, which are
    /// all of them (see the module doc), in the same order; like a dup, but without the
    /// attributes and topology. Collective.
    pub fn shrink(&self) -> Result<Comm> {
        let r = (|| {
            self.check_live()?;
            self.split(0, self.rank())?
                .ok_or_else(|| Error::new(ErrorClass::Intern, "comm_shrink: no communicator"))
        })();
        self.ret("comm_shrink", r)
    }
}

/// The flag an MPIX_Comm_iagree agrees on, once its request has completed.
#[derive(Debug, Clone)]
pub struct Agreed(Rc<Cell<Option<u32>>>);

impl Agreed {
    /// The AND of every process's flag; `None` until the request has completed.
    pub fn flag(&self) -> Option<u32> {
        self.0.get()
    }
}

/// The steps of MPIX_Comm_iagree: one all-to-all exchange of the flags.
struct AgreeSteps {
    exchange: Exchange,
    blocked: Blocked,
    result: Rc<Cell<Option<u32>>>,
}

impl Steps for AgreeSteps {
    fn advance(&mut self, e: &mut Engine) -> Option<Result<Status>> {
        let got = self.exchange.poll(e)?;
        Some(got.and_then(|g| and_of(&g)).map(|f| {
            self.result.set(Some(f));
            Status::empty()
        }))
    }

    fn blocked(&self) -> Blocked {
        self.blocked
    }

    fn abandon(&mut self, e: &mut Engine) {
        self.exchange.abandon(e);
    }

    fn posts_more(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agreement_is_the_and_of_every_flag() {
        let got = vec![0b1011u32, 0b1101, 0b1111]
            .into_iter()
            .map(|f| f.to_le_bytes().to_vec())
            .collect::<Vec<_>>();
        assert_eq!(and_of(&got).unwrap(), 0b1001);
        assert!(and_of(&[vec![1, 2]]).is_err());
    }

    #[test]
    fn agreements_use_a_round_context_agreements_never_reach() {
        assert!(AGREE_ROUND >= agree::ROUNDS);
    }
}
