//! Seed 000 in C (`mpi-ext.h`): persistent requests bound into channels, K-slack channels,
//! their unbinding, and bundles, under the MPIX_ prefix. The semantics are the Rust API's
//! (`earlybird::channel`, `earlybird::Bundle`); what the C forms add:
//!
//! - **Handles.** A bind leaves the persistent request it binds valid, and gives the channel
//!   a handle of its own (the channel holds the request's buffer meanwhile, and either may be
//!   freed first). The channel is a persistent request: MPI_Start, the wait and test family,
//!   MPI_Startall and bundles take it.
//! - **Nonblocking binds** complete as the seed says, by a wait or test on the *in* request
//!   (MPI_Waitall over the array given to MPIX_Ibind_channels completes them all, whatever
//!   order the partner lists its requests in); the status names the partner. The channel's
//!   handle is written into the out variable then, as MPI_Comm_idup writes its
//!   communicator's, so that variable must live until the completion; until then it holds
//!   MPI_REQUEST_NULL. A bind that fails leaves the in request as it was.
//! - **Unbinding** takes the channel's handle by value, as the seed writes it: after
//!   MPIX_Unbind_channel the handle names nothing. MPIX_Iunbind_channel turns the handle into
//!   a nonblocking request, complete at once (an end leaves without waiting for its
//!   partner), which a wait or test frees and sets to MPI_REQUEST_NULL. The array forms set
//!   the handles they unbind to MPI_REQUEST_NULL (blocking), or turn each into such a request
//!   (nonblocking). MPI_Request_free on a channel is MPI_ERR_REQUEST, as the seed says.
//! - **Slackness** is an `int` per request; the address increment of a K-slack channel is the
//!   info key MPIX_ADDRESS_BASE_INCREMENT ("address_base_increment"), in elements.
//! - **Bundles**: MPIX_Bundle_init moves its members (inactive persistent requests) into a
//!   new persistent request and sets their handles to MPI_REQUEST_NULL; freeing the bundle
//!   frees them (a channel among them leaves as if unbound).
//! - An array of infos may be NULL: no info for any request.

use crate::abi::{self, Handle, MPI_SUCCESS};
use crate::comms::info_of;
use crate::state::{self, fail, write, Held, Kept};
use earlybird::channel::{self, Binding, Channel};
use earlybird::{Error, ErrorClass, Request, Result, Status};
use std::ffi::c_int;

/// A bind in progress, kept with the persistent request it binds.
pub(crate) struct PendingBind {
    binding: Binding<'static>,
    /// The program's variable for the channel's handle, written when the bind completes.
    out: *mut Handle,
}

/// Advance the bind `p` holds: `None` when it holds none; `Some(Ok(None))` while it is in
/// progress; `Some(Ok(Some(status)))` once bound (the channel kept, its handle written where
/// the program asked); `Some(Err)` when it failed (the request is left as it was).
pub(crate) fn bind_step(p: &mut Held, block: bool) -> Option<Result<Option<Status>>> {
    let b = p.bind.as_mut()?;
    let r = match block {
        true => b.binding.wait().map(Some),
        false => b.binding.test(),
    };
    Some(match r {
        Ok(None) => Ok(None),
        Ok(Some(st)) => {
            let b = p.bind.take().expect("a bind, checked above");
            b.binding.into_channel().map(|ch| {
                let h = keep_channel(p, ch);
                // SAFETY: the program's handle variable, which lives until the bind completes
                // (the contract of MPIX_Ibind_channel, as of MPI_Comm_idup's new
                // communicator); `write` checks for null.
                unsafe { write(b.out, h) };
                Some(st)
            })
        }
        Err(e) => {
            p.bind = None;
            Err(e)
        }
    })
}

/// Keep the channel bound from the request of `p`, sharing its view of the buffer; its
/// handle.
fn keep_channel(p: &mut Held, ch: Channel<'static>) -> Handle {
    let view = p.share_view();
    state::add_request(state::pending(ch.into_request(), p.comm(), view))
}

/// `n` entries at `p` (a `count` the caller checked), or none for a null `p` where
/// `nullable`.
///
/// # Safety
/// Unless null, `p` points to `n` values.
unsafe fn entries<'a, T>(p: *const T, n: usize, nullable: bool) -> Result<&'a [T]> {
    if p.is_null() && nullable {
        return Ok(&[]);
    }
    // SAFETY: the function's contract (`n` came from a c_int).
    unsafe { crate::array(p, n as c_int) }
}

/// The requests `hs` names, out of the table: each once (the seed: a request appears once
/// in a call), none MPI_REQUEST_NULL, none with a bind in progress.
fn take_all(hs: &[Handle], what: &str) -> Result<Vec<Held>> {
    for (i, &h) in hs.iter().enumerate() {
        if h == abi::REQUEST_NULL {
            return Err(Error::new(
                ErrorClass::Request,
                format!("request {i} is MPI_REQUEST_NULL"),
            ));
        }
        if let Some(j) = hs[..i].iter().position(|&g| g == h) {
            return Err(Error::new(
                ErrorClass::Request,
                format!("request {h:#x} is both entry {j} and entry {i} (a request appears once in a call)"),
            ));
        }
    }
    let taken: Vec<Held> = state::take_requests(hs, what, false)?
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    if let Some(i) = taken.iter().position(|p| p.bind.is_some()) {
        put_all(hs, taken);
        return Err(Error::new(
            ErrorClass::Request,
            format!("request {i} has a bind in progress (complete it with a wait or test first)"),
        ));
    }
    Ok(taken)
}

/// Put back what [`take_all`] took.
fn put_all(hs: &[Handle], taken: Vec<Held>) {
    for (&h, p) in hs.iter().zip(taken) {
        state::put_back(h, p);
    }
}

/// Free what [`take_all`] took.
fn retire_all(hs: &[Handle], taken: Vec<Held>) {
    for (&h, p) in hs.iter().zip(taken) {
        state::retire(h, p);
    }
}

/// A call's error: through the error handler of the communicator of the requests (of
/// MPI_COMM_SELF when none was reached), once: each call clears the mark of a user handler
/// having run when it begins, so an error this layer finds is raised, and one the Rust API
/// raised already is not raised again.
fn raise(comm: Option<Handle>, what: &str, e: Error) -> c_int {
    match comm {
        Some(c) => state::request_error(c, Error::new(e.class(), format!("{what}: {e}"))),
        None => fail(abi::COMM_SELF, what, e),
    }
}

/// MPIX_(I)bind_(slack_)channel(s): bind the persistent requests `ins`, with a slackness and
/// an info each (empty: 1 and none for all), writing the channels' handles to `outs` (when
/// the binds complete, for `nonblocking`).
///
/// # Safety
/// `outs` points to `ins.len()` handles to write (for `nonblocking`, alive until each bind
/// completes).
unsafe fn bind(
    ins: &[Handle],
    outs: *mut Handle,
    slacks: &[c_int],
    infos: &[Handle],
    nonblocking: bool,
    what: &str,
) -> c_int {
    // No user handler has seen this call's error yet (see `raise`).
    state::clear_user_handler_ran();
    let n = ins.len();
    if n == 0 {
        return MPI_SUCCESS;
    }
    if outs.is_null() {
        let e = Error::new(ErrorClass::Arg, "a null pointer for the channels' handles");
        return raise(None, what, e);
    }
    let slacks: Result<Vec<u32>> = slacks
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            u32::try_from(k).ok().filter(|&k| k >= 1).ok_or_else(|| {
                Error::new(
                    ErrorClass::Arg,
                    format!("slackness {k} for request {i} (at least 1)"),
                )
            })
        })
        .collect();
    let infos: Result<Vec<earlybird::Info>> = infos.iter().map(|&h| info_of(h)).collect();
    let (slacks, infos) = match (slacks, infos) {
        (Ok(s), Ok(i)) => (s, i),
        (Err(e), _) | (_, Err(e)) => return raise(None, what, e),
    };
    let mut taken = match take_all(ins, what) {
        Ok(t) => t,
        Err(e) => return raise(None, what, e),
    };
    let comm = taken[0].comm();
    let r: Result<()> = (|| {
        let mut reqs: Vec<&mut Request<'static>> = Vec::with_capacity(n);
        for (i, p) in taken.iter_mut().enumerate() {
            reqs.push(p.request_mut().ok_or_else(|| {
                Error::new(ErrorClass::Request, format!("request {i} has no operation"))
            })?);
        }
        if nonblocking {
            let binds = channel::ibind_slack_channels(&mut reqs, &slacks, &[], &infos)?;
            for (i, (p, b)) in taken.iter_mut().zip(binds).enumerate() {
                let out = outs.wrapping_add(i);
                // SAFETY: the function's contract; `write` checks for null.
                unsafe { write(out, abi::REQUEST_NULL) };
                p.bind = Some(Box::new(PendingBind { binding: b, out }));
            }
        } else {
            let chans = channel::bind_slack_channels(&mut reqs, &slacks, &[], &infos)?;
            for (i, (p, ch)) in taken.iter_mut().zip(chans).enumerate() {
                let h = keep_channel(p, ch);
                // SAFETY: the function's contract; `write` checks for null.
                unsafe { write(outs.wrapping_add(i), h) };
            }
        }
        Ok(())
    })();
    put_all(ins, taken);
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(Some(comm), what, e),
    }
}

/// MPIX_(I)unbind_channel(s): unbind the channels `hs` (all of them, or none when one cannot
/// be). Blocking, they are freed: `Ok(true)`. Nonblocking, each handle becomes a request of
/// its unbind, to complete with a wait or test: `Ok(false)`.
fn unbind(hs: &[Handle], nonblocking: bool, what: &str) -> std::result::Result<bool, c_int> {
    state::clear_user_handler_ran();
    if hs.is_empty() {
        return Ok(nonblocking);
    }
    let mut taken = take_all(hs, what).map_err(|e| raise(None, what, e))?;
    let comm = taken[0].comm();
    let conv: Vec<std::result::Result<Channel<'static>, Option<Request<'static>>>> = taken
        .iter_mut()
        .map(|p| match p.take_request() {
            Some(r) => Channel::try_from(r).map_err(Some),
            None => Err(None),
        })
        .collect();
    if let Some(i) = conv.iter().position(std::result::Result::is_err) {
        for (p, c) in taken.iter_mut().zip(conv) {
            match c {
                Ok(ch) => p.set_request(ch.into_request()),
                Err(Some(r)) => p.set_request(r),
                Err(None) => {}
            }
        }
        put_all(hs, taken);
        let e = Error::new(
            ErrorClass::Request,
            format!("request {i} ({:#x}) is not a bound channel", hs[i]),
        );
        return Err(raise(Some(comm), what, e));
    }
    let mut chans: Vec<Channel<'static>> = conv.into_iter().flatten().collect();
    let r = if nonblocking {
        channel::iunbind_channels(&mut chans).map(Some)
    } else {
        channel::unbind_channels(&mut chans).map(|()| None)
    };
    match r {
        Ok(Some(unbinds)) => {
            // The ends have left: each handle now names its unbind.
            drop(chans);
            for (p, u) in taken.iter_mut().zip(unbinds) {
                p.set_request(u);
            }
            put_all(hs, taken);
            Ok(false)
        }
        Ok(None) => {
            drop(chans);
            retire_all(hs, taken);
            Ok(true)
        }
        Err(e) => {
            for (p, ch) in taken.iter_mut().zip(chans) {
                p.set_request(ch.into_request());
            }
            put_all(hs, taken);
            Err(raise(Some(comm), what, e))
        }
    }
}

/// MPIX_Unbind_channels / MPIX_Iunbind_channels on `n` handles at `reqs`.
///
/// # Safety
/// `reqs` points to `n` handles, to read and write.
unsafe fn unbind_array(reqs: *mut Handle, n: c_int, nonblocking: bool, what: &str) -> c_int {
    let n = match usize::try_from(n) {
        Ok(n) => n,
        Err(_) => {
            let e = Error::new(ErrorClass::Count, format!("count {n} (negative)"));
            return raise(None, what, e);
        }
    };
    // SAFETY: the function's contract.
    let hs = match unsafe { entries(reqs, n, false) } {
        Ok(hs) => hs.to_vec(),
        Err(e) => return raise(None, what, e),
    };
    match unbind(&hs, nonblocking, what) {
        Ok(true) => {
            for i in 0..n {
                // SAFETY: the function's contract.
                unsafe { reqs.add(i).write(abi::REQUEST_NULL) };
            }
            MPI_SUCCESS
        }
        Ok(false) => MPI_SUCCESS,
        Err(code) => code,
    }
}

/// A call's requests, slackness values and infos.
type Arrays = (Vec<Handle>, Vec<c_int>, Vec<Handle>);

/// The arrays of a call on `count` requests: the requests, its slackness values (when it
/// takes them) and its infos (a NULL array of infos is none).
///
/// # Safety
/// `ins` points to `count` handles, `slacks` (unless `None`) to `count` ints; `infos` is
/// null or points to `count` handles.
unsafe fn arrays(
    ins: *const Handle,
    count: c_int,
    slacks: Option<*const c_int>,
    infos: *const Handle,
    what: &str,
) -> std::result::Result<Arrays, c_int> {
    let n = usize::try_from(count).map_err(|_| {
        let e = Error::new(ErrorClass::Count, format!("count {count} (negative)"));
        raise(None, what, e)
    })?;
    // SAFETY: the function's contract.
    let r = unsafe {
        entries(ins, n, false).and_then(|i| {
            Ok((
                i.to_vec(),
                match slacks {
                    Some(k) => entries(k, n, false)?.to_vec(),
                    None => vec![],
                },
                entries(infos, n, true)?.to_vec(),
            ))
        })
    };
    r.map_err(|e| raise(None, what, e))
}

/// MPIX_Bundle_init: a bundle of the `n` requests `hs`, its handle.
fn bundle(hs: &[Handle], info: Handle, what: &str) -> std::result::Result<Handle, c_int> {
    state::clear_user_handler_ran();
    if hs.is_empty() {
        let e = Error::new(ErrorClass::Arg, "a bundle of no requests");
        return Err(raise(None, what, e));
    }
    info_of(info).map_err(|e| raise(None, what, e))?;
    let mut taken = take_all(hs, what).map_err(|e| raise(None, what, e))?;
    let comm = taken[0].comm();
    // The members' conditions, checked here so that a refusal leaves every handle as it was.
    let bad = taken.iter_mut().enumerate().find_map(|(i, p)| {
        let why = match p.request_mut() {
            None => "has no operation",
            Some(r) if !r.is_persistent() => "is not persistent",
            Some(r) if r.is_active() => "is active",
            Some(_) => return None,
        };
        Some(format!(
            "member {i} {why} (members must be inactive persistent requests)"
        ))
    });
    if let Some(why) = bad {
        put_all(hs, taken);
        return Err(raise(
            Some(comm),
            what,
            Error::new(ErrorClass::Request, why),
        ));
    }
    let members: Vec<Request<'static>> =
        taken.iter_mut().filter_map(|p| p.take_request()).collect();
    let views = Kept::All(taken.iter_mut().map(|p| p.take_view()).collect());
    retire_all(hs, taken);
    match earlybird::Bundle::new(members) {
        Ok(b) => Ok(state::add_request(state::pending(b.into(), comm, views))),
        // Not reached after the checks above; the members went with the refused bundle.
        Err(e) => Err(raise(Some(comm), what, e)),
    }
}

mpi! {
    fn MPIX_Bind_channel / PMPIX_Bind_channel(req_in: Handle, req_out: *mut Handle, info: Handle) {
        // SAFETY: a handle to write (the call's contract).
        unsafe { bind(&[req_in], req_out, &[], &[info], false, "MPIX_Bind_channel") }
    }

    fn MPIX_Ibind_channel / PMPIX_Ibind_channel(req_in: Handle, req_out: *mut Handle, info: Handle) {
        // SAFETY: a handle to write, alive until the bind completes (the call's contract).
        unsafe { bind(&[req_in], req_out, &[], &[info], true, "MPIX_Ibind_channel") }
    }

    fn MPIX_Bind_slack_channel / PMPIX_Bind_slack_channel(req_in: Handle, req_out: *mut Handle, slack: c_int, info: Handle) {
        // SAFETY: a handle to write (the call's contract).
        unsafe { bind(&[req_in], req_out, &[slack], &[info], false, "MPIX_Bind_slack_channel") }
    }

    fn MPIX_Ibind_slack_channel / PMPIX_Ibind_slack_channel(req_in: Handle, req_out: *mut Handle, slack: c_int, info: Handle) {
        // SAFETY: a handle to write, alive until the bind completes (the call's contract).
        unsafe { bind(&[req_in], req_out, &[slack], &[info], true, "MPIX_Ibind_slack_channel") }
    }

    fn MPIX_Bind_channels / PMPIX_Bind_channels(ins: *mut Handle, outs: *mut Handle, count: c_int, infos: *mut Handle) {
        const WHAT: &str = "MPIX_Bind_channels";
        // SAFETY: `count` handles in each array, infos or null (the call's contract).
        match unsafe { arrays(ins, count, None, infos, WHAT) } {
            // SAFETY: `outs` holds `count` handles to write.
            Ok((ins, _, infos)) => unsafe { bind(&ins, outs, &[], &infos, false, WHAT) },
            Err(code) => code,
        }
    }

    fn MPIX_Ibind_channels / PMPIX_Ibind_channels(ins: *mut Handle, outs: *mut Handle, count: c_int, infos: *mut Handle) {
        const WHAT: &str = "MPIX_Ibind_channels";
        // SAFETY: as for MPIX_Bind_channels.
        match unsafe { arrays(ins, count, None, infos, WHAT) } {
            // SAFETY: `outs` holds `count` handles to write, alive until the binds complete.
            Ok((ins, _, infos)) => unsafe { bind(&ins, outs, &[], &infos, true, WHAT) },
            Err(code) => code,
        }
    }

    fn MPIX_Bind_slack_channels / PMPIX_Bind_slack_channels(ins: *mut Handle, outs: *mut Handle, count: c_int, slacks: *const c_int, infos: *mut Handle) {
        const WHAT: &str = "MPIX_Bind_slack_channels";
        // SAFETY: `count` handles and slackness values, infos or null (the call's contract).
        match unsafe { arrays(ins, count, Some(slacks), infos, WHAT) } {
            // SAFETY: `outs` holds `count` handles to write.
            Ok((ins, slacks, infos)) => unsafe { bind(&ins, outs, &slacks, &infos, false, WHAT) },
            Err(code) => code,
        }
    }

    fn MPIX_Ibind_slack_channels / PMPIX_Ibind_slack_channels(ins: *mut Handle, outs: *mut Handle, count: c_int, slacks: *const c_int, infos: *mut Handle) {
        const WHAT: &str = "MPIX_Ibind_slack_channels";
        // SAFETY: as for MPIX_Bind_slack_channels.
        match unsafe { arrays(ins, count, Some(slacks), infos, WHAT) } {
            // SAFETY: `outs` holds `count` handles to write, alive until the binds complete.
            Ok((ins, slacks, infos)) => unsafe { bind(&ins, outs, &slacks, &infos, true, WHAT) },
            Err(code) => code,
        }
    }

    fn MPIX_Unbind_channel / PMPIX_Unbind_channel(req: Handle) {
        unbind(&[req], false, "MPIX_Unbind_channel").map_or_else(|c| c, |_| MPI_SUCCESS)
    }

    fn MPIX_Iunbind_channel / PMPIX_Iunbind_channel(req: Handle, info: Handle) {
        const WHAT: &str = "MPIX_Iunbind_channel";
        if let Err(e) = info_of(info) {
            return raise(None, WHAT, e);
        }
        unbind(&[req], true, WHAT).map_or_else(|c| c, |_| MPI_SUCCESS)
    }

    fn MPIX_Unbind_channels / PMPIX_Unbind_channels(reqs: *mut Handle, count: c_int) {
        // SAFETY: `count` handles to read and write (the call's contract).
        unsafe { unbind_array(reqs, count, false, "MPIX_Unbind_channels") }
    }

    fn MPIX_Iunbind_channels / PMPIX_Iunbind_channels(reqs: *mut Handle, count: c_int) {
        // SAFETY: as above.
        unsafe { unbind_array(reqs, count, true, "MPIX_Iunbind_channels") }
    }

    fn MPIX_Bundle_init / PMPIX_Bundle_init(count: c_int, reqs: *mut Handle, info: Handle, out: *mut Handle) {
        const WHAT: &str = "MPIX_Bundle_init";
        // SAFETY: `count` handles (the call's contract).
        let hs = match unsafe { arrays(reqs, count, None, std::ptr::null(), WHAT) } {
            Ok((hs, _, _)) => hs,
            Err(code) => return code,
        };
        if out.is_null() {
            return raise(None, WHAT, Error::new(ErrorClass::Arg, "a null pointer for the bundle's handle"));
        }
        match bundle(&hs, info, WHAT) {
            Ok(h) => {
                for i in 0..hs.len() {
                    // SAFETY: `count` handles to write (the call's contract).
                    unsafe { reqs.add(i).write(abi::REQUEST_NULL) };
                }
                // SAFETY: a handle to write, checked for null.
                unsafe { write(out, h) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }
}
