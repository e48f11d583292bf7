//! The buffers of buffered mode (MPI_Bsend): the process's (MPI_Buffer_attach) and, from MPI
//! 4.1, one per communicator (MPI_Comm_attach_buffer), which a buffered send on that
//! communicator uses instead; automatic buffers ([`BUFFER_AUTOMATIC`]); and the flushes,
//! blocking and nonblocking, that wait until the messages a buffer holds have left.
//!
//! earlybird keeps the copies in its own memory and accounts them against the attached
//! capacity (`p2p/bsend.rs`), so a buffer is a size, not memory.
//!
//! # Standard section(s)
//! MPI 4.1 §3.6 (buffer allocation and usage: MPI_Buffer_attach / detach / flush / iflush,
//! MPI_Comm_attach_buffer and the communicator's calls, MPI_BUFFER_AUTOMATIC).
#![forbid(unsafe_code)]

use super::Comm;
use crate::error::Result;
use crate::fabric::job::BlockedIn;
use crate::p2p::engine::Engine;
use crate::p2p::wait::Blocked;
use crate::request::completion::Completion;
use crate::request::{Request, Scope};
use crate::status::Status;

/// The capacity of a buffer attached as MPI_BUFFER_AUTOMATIC: buffered sends take what they
/// need, with no limit.
pub const BUFFER_AUTOMATIC: usize = crate::p2p::bsend::AUTOMATIC;

impl Comm {
    /// MPI_Comm_attach_buffer (MPI 4.1): `bytes` of buffer space for the buffered sends on
    /// this communicator ([`BUFFER_AUTOMATIC`]: as much as they need), used instead of the
    /// process's. MPI_ERR_BUFFER if one is attached already.
    pub fn buffer_attach(&self, bytes: usize) -> Result<()> {
        let r = self.check_live().and_then(|()| {
            self.eng
                .borrow_mut()
                .buffer_attach(Some(self.ctx.raw()), bytes)
        });
        self.ret("comm_attach_buffer", r)
    }

    /// MPI_Comm_detach_buffer: waits until the buffered sends from this communicator's
    /// buffer have left, then detaches it; its size. MPI_ERR_BUFFER if none is attached.
    pub fn buffer_detach(&self) -> Result<usize> {
        let r = self.eng.borrow_mut().buffer_detach(Some(self.ctx.raw()));
        self.ret("comm_detach_buffer", r)
    }

    /// MPI_Comm_flush_buffer: waits until the buffered sends from this communicator's
    /// buffer have left; it stays attached.
    pub fn buffer_flush(&self) -> Result<()> {
        let r = self
            .eng
            .borrow_mut()
            .buffer_flush(Some(self.ctx.raw()))
            .map(drop);
        self.ret("comm_flush_buffer", r)
    }

    /// MPI_Comm_iflush_buffer: [`buffer_flush`](Self::buffer_flush) as a request.
    pub fn ibuffer_flush<'s>(&self, s: &'s Scope<'s, '_>) -> Result<Request<'s>> {
        self.flush_request(s, Some(self.ctx.raw()), "comm_iflush_buffer")
    }

    /// A request that completes once the buffered sends from the buffer of `ctx` (`None`:
    /// the process's) have left; MPI_ERR_BUFFER now if no buffer is attached there.
    pub(crate) fn flush_request<'s>(
        &self,
        s: &'s Scope<'s, '_>,
        ctx: Option<u32>,
        what: &str,
    ) -> Result<Request<'s>> {
        let r = self.eng.borrow_mut().buffer_attached(ctx).map(|()| {
            s.inner().note_engine(&self.eng);
            Request::ext(
                &self.eng,
                self.origin(),
                Box::new(Flush { ctx, active: true }),
            )
        });
        self.ret(what, r)
    }
}

/// A nonblocking flush of one buffer.
struct Flush {
    ctx: Option<u32>,
    active: bool,
}

impl Completion for Flush {
    fn kind(&self) -> &'static str {
        "buffer flush"
    }

    fn poll(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        let r = self.peek(eng)?;
        self.active = false;
        Some(r)
    }

    fn peek(&mut self, eng: &mut Engine) -> Option<Result<Status>> {
        (self.active && eng.buffer_flushed(self.ctx)).then(|| Ok(Status::empty()))
    }

    fn cancel(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        Ok(())
    }

    fn blocked_in(&self) -> Blocked {
        Blocked::in_call(BlockedIn::BufferDetach)
    }

    fn abandon(&mut self, eng: &mut Engine) {
        let _ = eng;
        self.active = false;
    }

    fn is_active(&self) -> bool {
        self.active
    }

    fn is_persistent(&self) -> bool {
        false
    }

    /// Freed: the flush touches no buffer of the program's; nothing to wait for.
    fn free(&mut self, eng: &mut Engine) -> Result<()> {
        let _ = eng;
        self.active = false;
        Ok(())
    }

    fn settle(&mut self, eng: &mut Engine) {
        let _ = eng;
        self.active = false;
    }
}
