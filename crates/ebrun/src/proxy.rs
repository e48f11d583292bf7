//! `ebrun --proxy ADDR COOKIE HOST`: the part of a job across hosts that runs on one host.
//!
//! ebrun starts it through ssh (or `--launcher-exec`). It connects back to ebrun at `ADDR`,
//! receives the job (see [`control`](crate::control)), starts its ranks with `PMI_PORT` and
//! `PMI_ID` (the ranks join through ebrun's PMI server), and reports each rank's start and
//! exit. It ends its ranks (the signal ebrun names, then SIGKILL) when ebrun says `end`,
//! when ebrun is lost (the connection closed, or silent for [`LOST_AFTER`]: a host cut off
//! by its link keeps nothing running), or when the proxy itself gets SIGINT, SIGTERM or
//! SIGHUP. If the proxy is killed outright, its ranks die with it (each is started with
//! `PR_SET_PDEATHSIG`, before its program runs) and ebrun, reading the end of the
//! connection, ends the job.

use crate::control::{self, FromProxy, ToProxy, BEAT, LOST_AFTER};
use crate::launcher::{end_ranks, say, spawn_rank, Rank, OUTPUT_DRAIN_LIMIT};
use crate::output::Forwarders;
use crate::signals::{self, Event};
use earlybird::launch::{is_launch_variable, RankState};
use std::ffi::OsString;
use std::io::BufReader;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the proxy tries to reach ebrun.
const CONNECT_LIMIT: Duration = Duration::from_secs(10);

/// What the proxy's main thread waits on.
enum Pev {
    Signal(Event),
    /// ebrun ends the job: end the ranks with this signal.
    End(i32),
    Lost(String),
}

/// The job as ebrun sent it.
#[derive(Default)]
struct Job {
    env: Vec<(OsString, OsString)>,
    cwd: Option<OsString>,
    argv: Vec<OsString>,
    pmi: String,
    ranks: Vec<u32>,
    tag: bool,
}

/// Run the proxy; returns its exit status.
pub(crate) fn run(addr: &str, cookie: &str, host: u32) -> i32 {
    let me = format!("ebrun: proxy of host {host}");
    let stream = match connect(addr) {
        Ok(s) => s,
        Err(e) => {
            say(&format!("{me}: cannot reach ebrun at {addr}: {e}\n"));
            return 1;
        }
    };
    let _ = stream.set_nodelay(true);
    let (mut link, reader) = match stream.try_clone() {
        Ok(w) => (control::Sender::new(w), BufReader::new(stream)),
        Err(e) => {
            say(&format!("{me}: {e}\n"));
            return 1;
        }
    };
    let hello = FromProxy::Hello {
        host,
        cookie: cookie.to_string(),
        pid: std::process::id(),
    };
    let mut incoming = match link
        .send(&hello.line())
        .and_then(|_| control::Receiver::new(reader, Some(LOST_AFTER)))
    {
        Ok(r) => r,
        Err(e) => {
            say(&format!("{me}: cannot greet ebrun: {e}\n"));
            return 1;
        }
    };
    let job = match receive_job(&mut incoming) {
        Ok(Some(j)) => j,
        Ok(None) => return 0,
        Err(why) => {
            say(&format!("{me}: {why}\n"));
            return 1;
        }
    };

    // Signals before any rank exists, so that no SIGCHLD is missed.
    let (tx, rx) = mpsc::channel();
    if let Err(e) = signals::watch(tx.clone(), Pev::Signal) {
        say(&format!("{me}: cannot install signal handlers: {e}\n"));
        return 1;
    }
    listen(incoming, tx);

    if let Some(dir) = &job.cwd {
        // As on the host ebrun runs on, when the same directory exists here.
        if let Err(e) = std::env::set_current_dir(dir) {
            say(&format!(
                "{me}: the ranks start in {} (not in {}: {e})\n",
                std::env::current_dir().unwrap_or_default().display(),
                dir.to_string_lossy()
            ));
        }
    }
    // This host's own launch variables (a launcher that passes its environment on, a proxy
    // started inside another job) must not reach the ranks: they join through PMI_PORT.
    let stale: Vec<OsString> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| is_launch_variable(k.as_bytes()))
        .collect();
    let mut out = Forwarders::new();
    let mut ranks: Vec<Rank> = Vec::with_capacity(job.ranks.len());
    let mut reported = Vec::with_capacity(job.ranks.len());
    let (program, args) = job.argv.split_first().expect("a job has a program");
    for &r in &job.ranks {
        let mut env = job.env.clone();
        env.push(("PMI_PORT".into(), job.pmi.clone().into()));
        env.push(("PMI_ID".into(), r.to_string().into()));
        // From the main thread, which lives as long as the proxy: the ranks' death signal
        // is tied to the thread that forked them.
        let spawned = spawn_rank(
            r,
            program,
            args,
            (&stale, env),
            r == 0,
            job.tag.then_some(&mut out),
        );
        let msg = match spawned {
            Ok(rank) => {
                let m = FromProxy::Started {
                    rank: r,
                    pid: rank.pid,
                };
                ranks.push(rank);
                reported.push(false);
                m
            }
            Err((code, why)) => FromProxy::Unstartable { rank: r, code, why },
        };
        let _ = link.send(&msg.line());
    }

    // While ending the ranks, another stop (a signal here, or ebrun's second `end`) kills
    // them at once.
    let is_stop = |e: &Pev| matches!(e, Pev::Signal(Event::Stop(_)) | Pev::End(_));
    let mut next_beat = Instant::now() + BEAT;
    let status = loop {
        report_exits(&mut ranks, &mut reported, &mut link);
        if ranks.iter().all(|r| r.exit.is_some()) {
            break 0;
        }
        let now = Instant::now();
        if now >= next_beat {
            next_beat = now + BEAT;
            if let Err(e) = link.send(&FromProxy::Beat.line()) {
                say_lost(&me, &e.to_string());
                end_ranks(&mut ranks, &rx, is_stop, libc::SIGTERM);
                break 1;
            }
        }
        match rx.recv_timeout(next_beat.saturating_duration_since(now)) {
            Ok(Pev::Signal(Event::Child)) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(BEAT),
            Ok(Pev::End(sig)) => {
                end_ranks(&mut ranks, &rx, is_stop, sig);
                break 0;
            }
            Ok(Pev::Signal(Event::Stop(sig))) => {
                say(&format!(
                    "{me}: received {}; ending the ranks here\n",
                    signals::describe(sig)
                ));
                end_ranks(&mut ranks, &rx, is_stop, sig);
                break 128 + sig;
            }
            Ok(Pev::Lost(why)) => {
                say_lost(&me, &why);
                end_ranks(&mut ranks, &rx, is_stop, libc::SIGTERM);
                break 1;
            }
        }
    };
    report_exits(&mut ranks, &mut reported, &mut link);
    out.finish(OUTPUT_DRAIN_LIMIT);
    let _ = link.send(&FromProxy::Done.line());
    status
}

fn say_lost(me: &str, why: &str) {
    say(&format!(
        "{me}: lost ebrun ({why}); ending the ranks here\n"
    ));
}

/// Connect to `addr`, trying each address it names for at most [`CONNECT_LIMIT`].
fn connect(addr: &str) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, CONNECT_LIMIT) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Read the job up to `start`; `None` if ebrun ends the job first (or closes the
/// connection: ebrun ending).
fn receive_job(incoming: &mut control::Receiver) -> Result<Option<Job>, String> {
    let mut job = Job::default();
    loop {
        let line = match incoming.recv() {
            Ok(Some(l)) => l,
            // ebrun ended the job before this host's part began (another host failed).
            Ok(None) => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "waiting for the job: {}",
                    control::silence_or_error(&e)
                ))
            }
        };
        match ToProxy::parse(&line)? {
            ToProxy::Env(kv) => {
                let b = kv.as_bytes();
                if let Some(i) = b.iter().position(|&c| c == b'=') {
                    job.env.push((
                        std::ffi::OsStr::from_bytes(&b[..i]).to_owned(),
                        std::ffi::OsStr::from_bytes(&b[i + 1..]).to_owned(),
                    ));
                }
            }
            ToProxy::Cwd(d) => job.cwd = Some(d),
            ToProxy::Arg(a) => job.argv.push(a),
            ToProxy::Pmi(a) => job.pmi = a,
            ToProxy::Rank(r) => job.ranks.push(r),
            ToProxy::Tag => job.tag = true,
            ToProxy::Beat => {}
            ToProxy::End(_) => return Ok(None),
            ToProxy::Start if job.argv.is_empty() || job.pmi.is_empty() => {
                return Err("ebrun sent a job without a program or a PMI address".into())
            }
            ToProxy::Start => return Ok(Some(job)),
        }
    }
}

/// The thread that reads ebrun's messages once the job runs.
fn listen(mut incoming: control::Receiver, tx: mpsc::Sender<Pev>) {
    let spawned = std::thread::Builder::new()
        .name("ebrun-proxy-link".into())
        .spawn(move || loop {
            let ev = match incoming.recv() {
                Ok(Some(line)) => match ToProxy::parse(&line) {
                    Ok(ToProxy::End(s)) => Pev::End(s),
                    Ok(_) => continue,
                    Err(e) => Pev::Lost(e),
                },
                Ok(None) => Pev::Lost("ebrun closed the connection".into()),
                Err(e) => Pev::Lost(control::silence_or_error(&e)),
            };
            let last = matches!(ev, Pev::Lost(_));
            if tx.send(ev).is_err() || last {
                return;
            }
        });
    if spawned.is_err() {
        say("ebrun: proxy: cannot start the thread that listens to ebrun\n");
    }
}

/// Reap the ranks that ended and tell ebrun about them (once each).
fn report_exits(ranks: &mut [Rank], reported: &mut [bool], link: &mut control::Sender) {
    for (r, done) in ranks.iter_mut().zip(reported.iter_mut()) {
        if r.exit.is_none() {
            if let Ok(Some(st)) = r.child.try_wait() {
                r.exit = Some((st, RankState::NotStarted));
            }
        }
        if let (Some((st, _)), false) = (r.exit, *done) {
            *done = true;
            let _ = link.send(
                &FromProxy::Exit {
                    rank: r.rank,
                    status: st.into_raw(),
                }
                .line(),
            );
        }
    }
}
