//! `ebrun --hosts`: a job across hosts.
//!
//! ebrun listens on a TCP port and starts, through ssh (or `--launcher-exec CMD`, run as
//! `CMD HOST COMMAND...`), one proxy per host ([`proxy`](crate::proxy)), which connects back
//! and starts that host's ranks. The same port serves PMI-1 to the ranks
//! ([`pmi_server`](crate::pmi_server)): they join as under Hydra's `-pmi-port`, find the
//! ranks of their own host through `PMI_process_mapping`, share memory with them, and reach
//! the others over the network (the library's OFI fabric).
//!
//! How a job ends, as on one host, and also:
//!
//! * a host is lost (its proxy's connection ends before the proxy said it was done, or the
//!   proxy is silent for [`LOST_AFTER`]: the host froze or its link went down): ebrun names
//!   the host and its ranks, ends the job everywhere else, and exits 255; the proxy of a host
//!   cut off ends its own ranks when it stops hearing ebrun;
//! * a proxy cannot be started (the launcher exits first, or nothing connects within
//!   [`START_LIMIT`]): ebrun names the host and exits 255;
//! * `abort` through PMI: ebrun names the rank and exits with its code.

use crate::cli::{self, Options};
use crate::control::{self, FromProxy, ToProxy, BEAT, LOST_AFTER};
use crate::hosts::{self, Placement};
use crate::launcher::{
    blame_first, clamp_code, classify, exit_text, say, Failure, ABORT_GRACE, POLL, TIMEOUT_STATUS,
};
use crate::pmi_server::{PmiEvent, Server};
use crate::signals::{self, Event};
use earlybird::launch::{is_launch_variable, RankState};
use std::ffi::OsString;
use std::io::BufReader;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the proxies have to connect.
const START_LIMIT: Duration = Duration::from_secs(30);
/// How long ebrun waits for the proxies to end their ranks and say so.
const END_LIMIT: Duration = Duration::from_secs(3);
/// How long ebrun then waits for the launchers (ssh) to exit on their own, passing on the
/// last output, before it ends them.
const LAUNCHER_LIMIT: Duration = Duration::from_secs(2);
/// Exit status when a host is lost or cannot be reached (as ssh's own).
const HOST_STATUS: i32 = 255;

/// Whether ebrun passes its variable `key` to the ranks: not one that describes the host
/// ebrun runs on, nor one through which a launcher talks to its ranks.
fn forwarded(key: &[u8]) -> bool {
    const HOST: [&[u8]; 7] = [
        b"HOSTNAME",
        b"HOST",
        b"PWD",
        b"OLDPWD",
        b"SHLVL",
        b"_",
        b"DISPLAY",
    ];
    !HOST.contains(&key) && !key.starts_with(b"SSH_") && !is_launch_variable(key)
}

enum Ev {
    Signal(Event),
    ProxyUp { host: usize, link: control::Sender },
    Proxy(usize, FromProxy),
    ProxyLost(usize, String),
    Pmi(PmiEvent),
}

struct Host {
    name: String,
    /// ebrun's address as this host reaches it.
    here: SocketAddr,
    launcher: Option<Child>,
    launcher_exit: Option<ExitStatus>,
    link: Option<control::Sender>,
    done: bool,
    /// Why the host was lost, once it is.
    lost: Option<String>,
}

impl Host {
    fn send(&mut self, m: &ToProxy) {
        if let Some(l) = &mut self.link {
            // A failed write shows as a lost host on the reading side.
            let _ = l.send(&m.line());
        }
    }

    fn live(&self) -> bool {
        self.link.is_some() && !self.done && self.lost.is_none()
    }
}

struct RankInfo {
    host: usize,
    pid: Option<u32>,
    exit: Option<ExitStatus>,
}

enum Ending {
    AllDone,
    Failed { rank: u32, failure: Failure },
    Aborted { rank: u32, code: i32 },
    Unstartable { rank: u32, code: i32, why: String },
    HostLost { host: usize, why: String },
    NoProxy { host: usize, why: String },
    Timeout,
    Stopped(i32),
}

/// Run a job across hosts; returns ebrun's exit status.
pub(crate) fn run(opts: &Options, specs: &[hosts::HostSpec]) -> i32 {
    let start = Instant::now();
    let place = hosts::place(specs, opts.nranks);
    let listener = match TcpListener::bind(("0.0.0.0", 0)) {
        Ok(l) => l,
        Err(e) => {
            say(&format!("ebrun: cannot open a port for the job: {e}\n"));
            return 1;
        }
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => {
            say(&format!("ebrun: {e}\n"));
            return 1;
        }
    };
    let mut hosts = Vec::with_capacity(place.hosts.len());
    for name in &place.hosts {
        match reach(name) {
            Ok(ip) => hosts.push(Host {
                name: name.clone(),
                here: SocketAddr::new(ip, port),
                launcher: None,
                launcher_exit: None,
                link: None,
                done: false,
                lost: None,
            }),
            Err(why) => {
                say(&format!("ebrun: host {name}: {why}\n"));
                return HOST_STATUS;
            }
        }
    }
    let mut ranks: Vec<RankInfo> = place
        .node_of
        .iter()
        .map(|&h| RankInfo {
            host: h as usize,
            pid: None,
            exit: None,
        })
        .collect();

    let (tx, rx) = mpsc::channel();
    if let Err(e) = signals::watch(tx.clone(), Ev::Signal) {
        say(&format!("ebrun: cannot install signal handlers: {e}\n"));
        return 1;
    }
    let pmi_tx = Mutex::new(tx.clone());
    let server = Server::new(
        opts.nranks,
        hosts::mapping(&place),
        Box::new(move |e| {
            let _ = pmi_tx
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .send(Ev::Pmi(e));
        }),
    );
    let cookie = cookie();
    accept(listener, server.clone(), cookie.clone(), hosts.len(), tx);

    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            say(&format!("ebrun: cannot tell where ebrun is: {e}\n"));
            return 1;
        }
    };
    let launcher: OsString = opts.launcher_exec.clone().unwrap_or_else(|| "ssh".into());
    let stdin_host = place.node_of[0] as usize;
    for (i, h) in hosts.iter_mut().enumerate() {
        let mut cmd = Command::new(&launcher);
        cmd.arg(&h.name)
            .arg(&exe)
            .arg("--proxy")
            .arg(h.here.to_string())
            .arg(&cookie)
            .arg(i.to_string());
        if i != stdin_host {
            // Its own process group: a Ctrl-C at the terminal reaches ebrun, which ends the
            // job in order, and not ssh, which would cut the ranks' output short. (The one
            // that carries standard input stays in the terminal's group to read it.)
            use std::os::unix::process::CommandExt;
            cmd.stdin(Stdio::null()).process_group(0);
        }
        match cmd.spawn() {
            Ok(c) => h.launcher = Some(c),
            Err(e) => {
                say(&format!(
                    "ebrun: cannot run {} to reach host {}: {e}\n",
                    launcher.to_string_lossy(),
                    h.name
                ));
                finish(&mut hosts, &rx, libc::SIGTERM);
                return HOST_STATUS;
            }
        }
    }

    let deadline = opts.timeout.map(|t| start + t);
    let ending = supervise(
        opts, &place, &mut hosts, &mut ranks, &server, &rx, start, deadline,
    );
    let whose = |r: u32| {
        let i = &ranks[r as usize];
        let pid = i.pid.map(|p| format!("pid {p} ")).unwrap_or_default();
        format!("rank {r} ({pid}on host {})", hosts[i.host].name)
    };
    let named = match &ending {
        Ending::HostLost { host, .. } => Some(*host),
        _ => None,
    };
    let (code, report, signal) = match ending {
        Ending::AllDone => (0, String::new(), None),
        Ending::Failed { rank, failure } => (
            failure.exit_code(),
            format!("{} {}", whose(rank), failure.describe()),
            None,
        ),
        Ending::Aborted { rank, code } => (
            clamp_code(code),
            format!("{} aborted the job with code {code}", whose(rank)),
            None,
        ),
        Ending::Unstartable { rank, code, why } => (
            code,
            format!(
                "cannot start rank {rank} on host {}: {why}",
                hosts[ranks[rank as usize].host].name
            ),
            None,
        ),
        Ending::HostLost { host, why } => {
            let on: Vec<String> = place.ranks_on(host).map(|r| r.to_string()).collect();
            (
                HOST_STATUS,
                format!(
                    "lost host {} ({why}); its ranks {} are gone; ending the job",
                    hosts[host].name,
                    on.join(", ")
                ),
                None,
            )
        }
        Ending::NoProxy { host, why } => (
            HOST_STATUS,
            format!("cannot start the job on host {}: {why}", hosts[host].name),
            None,
        ),
        Ending::Timeout => {
            let t = opts.timeout.map(cli::seconds).unwrap_or_default();
            let running: Vec<String> = (0..ranks.len() as u32)
                .filter(|&r| ranks[r as usize].exit.is_none())
                .map(whose)
                .collect();
            (
                TIMEOUT_STATUS,
                format!("timeout after {t} s; still running: {}", running.join(", ")),
                None,
            )
        }
        Ending::Stopped(sig) => (
            128 + sig,
            format!(
                "received {}; forwarding it to the ranks and ending the job",
                signals::describe(sig)
            ),
            Some(sig),
        ),
    };
    if !report.is_empty() {
        say(&format!("ebrun: {report}\n"));
    }
    for (h, host) in hosts.iter().enumerate() {
        if let (Some(why), false) = (&host.lost, named == Some(h)) {
            say(&format!("ebrun: also lost host {} ({why})\n", host.name));
        }
    }
    finish(&mut hosts, &rx, signal.unwrap_or(libc::SIGTERM));
    code
}

/// The address of this machine on the way to `host` (no packet is sent: connecting a UDP
/// socket only picks the route).
fn reach(host: &str) -> Result<IpAddr, String> {
    let addr = (host, 9)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve it: {e}"))?
        .find(SocketAddr::is_ipv4)
        .ok_or("it has no IPv4 address")?;
    let s = UdpSocket::bind(("0.0.0.0", 0)).map_err(|e| e.to_string())?;
    s.connect(addr)
        .and_then(|_| s.local_addr())
        .map(|a| a.ip())
        .map_err(|e| format!("no route to {}: {e}", addr.ip()))
}

/// A secret of this job, that each proxy must repeat.
fn cookie() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{:016x}", h.finish())
}

/// Accept connections on the job's port: ranks (PMI) and proxies, told apart by their first
/// line.
fn accept(
    listener: TcpListener,
    server: Arc<Server>,
    cookie: String,
    nhosts: usize,
    tx: mpsc::Sender<Ev>,
) {
    let spawned = std::thread::Builder::new()
        .name("ebrun-accept".into())
        .spawn(move || {
            let claimed = Arc::new(Mutex::new(vec![false; nhosts]));
            for conn in listener.incoming() {
                let Ok(conn) = conn else {
                    // Out of descriptors, say: try again shortly rather than spin.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let (server, cookie, tx) = (server.clone(), cookie.clone(), tx.clone());
                let claimed = claimed.clone();
                let _ = std::thread::Builder::new()
                    .name("ebrun-conn".into())
                    .spawn(move || greet(conn, &server, &cookie, &claimed, &tx));
            }
        });
    if let Err(e) = spawned {
        say(&format!(
            "ebrun: cannot start the thread that accepts connections: {e}\n"
        ));
    }
}

/// Serve one connection according to its first line.
fn greet(
    conn: TcpStream,
    server: &Arc<Server>,
    cookie: &str,
    claimed: &Mutex<Vec<bool>>,
    tx: &mpsc::Sender<Ev>,
) {
    let _ = conn.set_nodelay(true);
    if conn
        .set_read_timeout(Some(Duration::from_secs(10)))
        .is_err()
    {
        return;
    }
    let mut reader = BufReader::new(conn);
    let Ok(Some(first)) = control::read_line(&mut reader, 4096) else {
        return;
    };
    if first.starts_with("cmd=") {
        if reader.get_ref().set_read_timeout(None).is_ok() {
            server.serve(reader, &first);
        }
        return;
    }
    let host = match FromProxy::parse(&first) {
        Ok(FromProxy::Hello {
            host, cookie: c, ..
        }) if c == cookie => host as usize,
        _ => return,
    };
    // One proxy per host: a second hello for it is dropped.
    match claimed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_mut(host)
    {
        Some(c) if !*c => *c = true,
        _ => return,
    }
    let Ok(w) = reader.get_ref().try_clone() else {
        return;
    };
    let mut incoming = match control::Receiver::new(reader, Some(LOST_AFTER)) {
        Ok(r) => r,
        Err(_) => return,
    };
    let link = control::Sender::new(w);
    if tx.send(Ev::ProxyUp { host, link }).is_err() {
        return;
    }
    let lost = loop {
        match incoming.recv() {
            Ok(Some(line)) => match FromProxy::parse(&line) {
                Ok(FromProxy::Beat) => {}
                Ok(m) => {
                    if tx.send(Ev::Proxy(host, m)).is_err() {
                        return;
                    }
                }
                Err(e) => break e,
            },
            Ok(None) => break "its proxy's connection closed".to_string(),
            Err(e) => break format!("its proxy: {}", control::silence_or_error(&e)),
        }
    };
    let _ = tx.send(Ev::ProxyLost(host, lost));
}

/// Send host `h`'s part of the job to its proxy.
fn send_job(opts: &Options, place: &Placement, h: usize, host: &mut Host) {
    for (k, v) in std::env::vars_os() {
        if forwarded(k.as_bytes()) {
            let mut kv = k;
            kv.push("=");
            kv.push(v);
            host.send(&ToProxy::Env(kv));
        }
    }
    if let Ok(d) = std::env::current_dir() {
        host.send(&ToProxy::Cwd(d.into_os_string()));
    }
    host.send(&ToProxy::Arg(opts.program.clone()));
    for a in &opts.args {
        host.send(&ToProxy::Arg(a.clone()));
    }
    host.send(&ToProxy::Pmi(host.here.to_string()));
    for r in place.ranks_on(h) {
        host.send(&ToProxy::Rank(r));
    }
    if opts.tag_output {
        host.send(&ToProxy::Tag);
    }
    host.send(&ToProxy::Start);
}

/// Watch the job until it ends one way or another. A failure (an exit or an abort) is
/// blamed [`ABORT_GRACE`] after the first, so that the cause, not a rank that failed
/// because of it, is named.
#[allow(clippy::too_many_arguments)]
fn supervise(
    opts: &Options,
    place: &Placement,
    hosts: &mut [Host],
    ranks: &mut [RankInfo],
    server: &Server,
    rx: &Receiver<Ev>,
    start: Instant,
    deadline: Option<Instant>,
) -> Ending {
    // Failed exits in the order they were reported, and the first abort with the number of
    // failed exits reported before it.
    let mut failures: Vec<(u32, Failure)> = Vec::new();
    let mut abort: Option<(u32, i32, usize)> = None;
    let mut first_failure: Option<Instant> = None;
    let mut next_beat = Instant::now() + BEAT;
    loop {
        let now = Instant::now();
        let all_exited = ranks.iter().all(|r| r.exit.is_some());
        if let Some(t) = first_failure {
            if all_exited || now - t >= ABORT_GRACE {
                // An abort is the cause when it came before every failed exit, unless a
                // rank was killed: a rank that saw another die aborts, often before the
                // death is reported.
                let killed = failures
                    .iter()
                    .any(|(_, f)| matches!(f, Failure::Signal { .. }));
                return match abort {
                    Some((rank, code, 0)) if !killed => Ending::Aborted { rank, code },
                    // Here a failed exit was reported (first_failure is set by one, or by an
                    // abort that came after one or beside a killed rank).
                    _ => {
                        // The likeliest cause; among equals, the first reported.
                        let order: Vec<(usize, Failure)> =
                            failures.iter().map(|&(_, f)| f).enumerate().collect();
                        let (i, failure) = blame_first(&order);
                        Ending::Failed {
                            rank: failures[i].0,
                            failure,
                        }
                    }
                };
            }
        } else if all_exited {
            return Ending::AllDone;
        }
        if deadline.is_some_and(|d| now >= d) {
            return Ending::Timeout;
        }
        if now - start >= START_LIMIT {
            if let Some(h) = hosts.iter().position(|h| h.link.is_none()) {
                return Ending::NoProxy {
                    host: h,
                    why: format!(
                        "its proxy did not connect within {} s",
                        START_LIMIT.as_secs()
                    ),
                };
            }
        }
        if now >= next_beat {
            next_beat = now + BEAT;
            for h in hosts.iter_mut().filter(|h| h.live()) {
                h.send(&ToProxy::Beat);
            }
        }
        let mut wait = POLL.min(next_beat - now);
        if let Some(d) = deadline {
            wait = wait.min(d.saturating_duration_since(now));
        }
        let ev = match rx.recv_timeout(wait) {
            Ok(ev) => ev,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(wait);
                continue;
            }
        };
        match ev {
            Ev::Signal(Event::Stop(sig)) => return Ending::Stopped(sig),
            Ev::Signal(Event::Child) => {
                for (i, h) in hosts.iter_mut().enumerate() {
                    if h.launcher_exit.is_some() {
                        continue;
                    }
                    if let Some(Ok(Some(st))) = h.launcher.as_mut().map(Child::try_wait) {
                        h.launcher_exit = Some(st);
                        if h.link.is_none() {
                            return Ending::NoProxy {
                                host: i,
                                why: format!(
                                    "{} {} before its proxy connected",
                                    opts.launcher_exec
                                        .as_deref()
                                        .unwrap_or("ssh".as_ref())
                                        .to_string_lossy(),
                                    exit_text(st)
                                ),
                            };
                        }
                    }
                }
            }
            Ev::ProxyUp { host, link } => {
                let h = &mut hosts[host];
                if h.link.is_none() {
                    h.link = Some(link);
                    send_job(opts, place, host, h);
                }
            }
            Ev::Proxy(host, FromProxy::Started { rank, pid }) => {
                if let Some(r) = ranks.get_mut(rank as usize).filter(|r| r.host == host) {
                    r.pid = Some(pid);
                }
            }
            Ev::Proxy(host, FromProxy::Unstartable { rank, code, why }) => {
                if ranks.get(rank as usize).is_some_and(|r| r.host == host) {
                    return Ending::Unstartable { rank, code, why };
                }
            }
            Ev::Proxy(host, FromProxy::Exit { rank, status }) => {
                let Some(r) = ranks.get_mut(rank as usize).filter(|r| r.host == host) else {
                    continue;
                };
                let st = ExitStatus::from_raw(status);
                r.exit = Some(st);
                let state = if server.joined_unfinalized(rank) {
                    RankState::Running
                } else {
                    RankState::Finalized
                };
                if let Some(f) = classify(st, state) {
                    failures.push((rank, f));
                    first_failure.get_or_insert(Instant::now());
                }
            }
            Ev::Proxy(host, FromProxy::Done) => {
                hosts[host].done = true;
                // Every rank's exit comes before; one missing was left running.
                let left: Vec<String> = place
                    .ranks_on(host)
                    .filter(|&r| ranks[r as usize].exit.is_none())
                    .map(|r| r.to_string())
                    .collect();
                if !left.is_empty() {
                    let why = format!(
                        "its proxy ended without reporting ranks {}",
                        left.join(", ")
                    );
                    hosts[host].lost = Some(why.clone());
                    if first_failure.is_none() {
                        return Ending::HostLost { host, why };
                    }
                }
            }
            Ev::Proxy(_, FromProxy::Hello { .. } | FromProxy::Beat) => {}
            Ev::ProxyLost(host, why) => {
                let h = &mut hosts[host];
                if !h.done && h.lost.is_none() {
                    h.lost = Some(why.clone());
                    // Within the grace of a failure, that failure is named (and the host
                    // beside it).
                    if first_failure.is_none() {
                        return Ending::HostLost { host, why };
                    }
                }
            }
            Ev::Pmi(PmiEvent::Abort { rank, code, .. }) => {
                abort.get_or_insert((rank, code, failures.len()));
                first_failure.get_or_insert(Instant::now());
            }
            Ev::Pmi(PmiEvent::Broken { rank, why }) => {
                let who = rank.map(|r| format!(" (rank {r})")).unwrap_or_default();
                say(&format!("ebrun: PMI{who}: {why}\n"));
            }
        }
    }
}

/// End the job on every host: tell each live proxy to end its ranks with `first` (SIGTERM,
/// or the signal ebrun was sent; SIGKILL at once if ebrun is told to stop again), wait for
/// the proxies (at most [`END_LIMIT`]), then for the launchers (at most
/// [`LAUNCHER_LIMIT`]), and end those still running.
fn finish(hosts: &mut [Host], rx: &Receiver<Ev>, first: i32) {
    for h in hosts.iter_mut().filter(|h| h.live()) {
        h.send(&ToProxy::End(first));
    }
    let until = Instant::now() + END_LIMIT;
    while hosts.iter().any(Host::live) && Instant::now() < until {
        match rx.recv_timeout(POLL) {
            Ok(Ev::Proxy(h, FromProxy::Done)) => hosts[h].done = true,
            Ok(Ev::ProxyLost(h, why)) => hosts[h].lost = Some(why),
            Ok(Ev::Signal(Event::Stop(_))) => {
                for h in hosts.iter_mut().filter(|h| h.live()) {
                    h.send(&ToProxy::End(libc::SIGKILL));
                }
            }
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let launchers_left = |hosts: &mut [Host]| {
        hosts
            .iter_mut()
            .filter_map(|h| h.launcher.as_mut())
            .map(|c| !matches!(c.try_wait(), Ok(Some(_))))
            .filter(|&running| running)
            .count()
    };
    let until = Instant::now() + LAUNCHER_LIMIT;
    while launchers_left(hosts) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    for c in hosts.iter_mut().filter_map(|h| h.launcher.as_mut()) {
        if !matches!(c.try_wait(), Ok(Some(_))) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_leaves_host_and_launcher_variables_behind() {
        for k in [
            "PATH",
            "HOME",
            "EARLYBIRD_FAR_EAGER_LIMIT",
            "FI_PROVIDER",
            "RUST_LOG",
        ] {
            assert!(forwarded(k.as_bytes()), "{k}");
        }
        for k in [
            "HOSTNAME",
            "PWD",
            "PMI_FD",
            "PMIX_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "SLURM_PROCID",
            "SSH_CONNECTION",
            "EARLYBIRD_RANK",
            "EARLYBIRD_SEGMENT_FD",
        ] {
            assert!(!forwarded(k.as_bytes()), "{k}");
        }
    }

    #[test]
    fn the_loopback_is_reached_from_the_loopback() {
        assert_eq!(reach("127.0.0.1").unwrap(), IpAddr::from([127, 0, 0, 1]));
        assert!(reach("no-such-host.invalid")
            .unwrap_err()
            .contains("resolve"));
    }
}
