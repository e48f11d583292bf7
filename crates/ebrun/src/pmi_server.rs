//! ebrun's PMI-1 server for jobs across hosts: the ranks connect to `PMI_PORT` and say
//! `PMI_ID`, as under Hydra's `-pmi-port`, and earlybird's own PMI client joins the job
//! (each host's segment card and each rank's network address go through the key-value
//! space; `PMI_process_mapping` says which ranks share a host).
//!
//! One thread per rank's connection. The key-value space is one map (a value is visible at
//! once, which PMI allows: it only promises visibility after the next barrier); the barrier
//! releases everyone when the last of the job's ranks arrives. `abort` and the ranks that
//! connected and finalized are reported to the supervisor.

use crate::control::read_line;
use earlybird::launch::{parse_pmi1, Pmi1Message};
use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex};

/// Longest key and value the server takes (a network address in hex fits well within).
const KEYLEN_MAX: usize = 256;
const VALLEN_MAX: usize = 1024;
/// Longest request line (a put of the longest key and value, with room to spare).
const MAX_REQUEST: u64 = 4096;

/// What the supervisor hears from the PMI server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PmiEvent {
    /// Rank `rank` asked to end the job with `code`.
    Abort {
        rank: u32,
        code: i32,
        message: String,
    },
    /// A connection broke the protocol (the job cannot go on well).
    Broken { rank: Option<u32>, why: String },
}

struct State {
    values: HashMap<String, String>,
    arrived: u32,
    generation: u64,
    connected: Vec<bool>,
    finalized: Vec<bool>,
}

/// The server's shared state.
pub(crate) struct Server {
    size: u32,
    kvsname: String,
    mapping: String,
    state: Mutex<State>,
    barrier: Condvar,
    notify: Box<dyn Fn(PmiEvent) + Send + Sync>,
}

impl Server {
    pub(crate) fn new(
        size: u32,
        mapping: String,
        notify: Box<dyn Fn(PmiEvent) + Send + Sync>,
    ) -> Arc<Server> {
        Arc::new(Server {
            size,
            kvsname: format!("ebrun-{}", std::process::id()),
            mapping,
            state: Mutex::new(State {
                values: HashMap::new(),
                arrived: 0,
                generation: 0,
                connected: vec![false; size as usize],
                finalized: vec![false; size as usize],
            }),
            barrier: Condvar::new(),
            notify,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `rank` joined through PMI and has not finalized: its exit, even with status 0,
    /// is then a failure.
    pub(crate) fn joined_unfinalized(&self, rank: u32) -> bool {
        let st = self.lock();
        st.connected[rank as usize] && !st.finalized[rank as usize]
    }

    /// Serve one rank's connection, whose first line `first` was already read from
    /// `reader`, until it closes.
    pub(crate) fn serve(self: &Arc<Self>, reader: BufReader<TcpStream>, first: &str) {
        let Ok(writer) = reader.get_ref().try_clone() else {
            return;
        };
        let mut session = Session {
            server: self.clone(),
            reader,
            writer,
            rank: None,
        };
        if let Err(why) = session.run(first) {
            (self.notify)(PmiEvent::Broken {
                rank: session.rank,
                why,
            });
        }
    }
}

struct Session {
    server: Arc<Server>,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    rank: Option<u32>,
}

impl Session {
    fn reply(&mut self, m: &str) -> Result<(), String> {
        self.writer
            .write_all(m.as_bytes())
            .map_err(|e| format!("cannot answer: {e}"))
    }

    /// The port-mode greeting, then requests until the connection ends.
    fn run(&mut self, first: &str) -> Result<(), String> {
        let hello = parse_pmi1(first)
            .map_err(|_| format!("a connection began with {first:?}, not a rank's initack"))?;
        let rank = match (
            hello.cmd.as_str(),
            hello.get("pmiid").map(str::parse::<u32>),
        ) {
            ("initack", Some(Ok(r))) if r < self.server.size => r,
            _ => {
                return Err(format!(
                    "a connection began with {first:?}, not a rank's initack"
                ))
            }
        };
        {
            let mut st = self.server.lock();
            if std::mem::replace(&mut st.connected[rank as usize], true) {
                return Err(format!("PMI_ID {rank} connected twice"));
            }
        }
        self.rank = Some(rank);
        let size = self.server.size;
        self.reply(&format!(
            "cmd=initack\ncmd=set size={size}\ncmd=set rank={rank}\ncmd=set debug=0\n"
        ))?;
        loop {
            let text = match read_line(&mut self.reader, MAX_REQUEST) {
                Ok(Some(l)) => l,
                Ok(None) => return Ok(()),
                Err(e) => return Err(format!("rank {rank}'s connection failed: {e}")),
            };
            let m = parse_pmi1(text.trim_end_matches('\r'))
                .map_err(|_| format!("rank {rank} sent {text:?}, not a PMI-1 request"))?;
            if !self.answer(rank, &m)? {
                return Ok(());
            }
        }
    }

    /// Answer one request; `false` once the rank finalized.
    fn answer(&mut self, rank: u32, m: &Pmi1Message) -> Result<bool, String> {
        let server = self.server.clone();
        match m.cmd.as_str() {
            "init" => {
                if m.get("pmi_version") == Some("1") {
                    self.reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n")?
                } else {
                    self.reply(
                        "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=ebrun_speaks_PMI-1\n",
                    )?
                }
            }
            "get_maxes" => self.reply(&format!(
                "cmd=maxes kvsname_max=256 keylen_max={KEYLEN_MAX} vallen_max={VALLEN_MAX} rc=0\n"
            ))?,
            "get_my_kvsname" => {
                self.reply(&format!("cmd=my_kvsname kvsname={} rc=0\n", server.kvsname))?
            }
            "get_appnum" => self.reply("cmd=appnum appnum=0 rc=0\n")?,
            "get_universe_size" => {
                self.reply(&format!("cmd=universe_size size={} rc=0\n", server.size))?
            }
            "put" => {
                let (Some(k), Some(v)) = (m.get("key"), m.get("value")) else {
                    return Err(format!("rank {rank}: a put without key or value"));
                };
                if k.len() > KEYLEN_MAX || v.len() > VALLEN_MAX {
                    self.reply("cmd=put_result rc=-1 msg=key_or_value_too_long\n")?;
                } else {
                    server.lock().values.insert(k.to_string(), v.to_string());
                    self.reply("cmd=put_result rc=0 msg=success\n")?;
                }
            }
            "get" => {
                let k = m.get("key").unwrap_or("");
                let v = if k == "PMI_process_mapping" {
                    Some(server.mapping.clone())
                } else {
                    server.lock().values.get(k).cloned()
                };
                match v {
                    Some(v) => {
                        self.reply(&format!("cmd=get_result rc=0 msg=success value={v}\n"))?
                    }
                    None => self.reply(&format!("cmd=get_result rc=-1 msg=key_{k}_not_found\n"))?,
                }
            }
            "barrier_in" => {
                let mut st = server.lock();
                let gen = st.generation;
                st.arrived += 1;
                if st.arrived == server.size {
                    st.arrived = 0;
                    st.generation += 1;
                    server.barrier.notify_all();
                } else {
                    while st.generation == gen {
                        st = server.barrier.wait(st).unwrap_or_else(|p| p.into_inner());
                    }
                }
                drop(st);
                self.reply("cmd=barrier_out rc=0\n")?;
            }
            "abort" => {
                let code = m.get("exitcode").and_then(|c| c.parse().ok()).unwrap_or(1);
                (server.notify)(PmiEvent::Abort {
                    rank,
                    code,
                    message: m.get("message").unwrap_or("").to_string(),
                });
            }
            "finalize" => {
                // Marked before the answer, so the rank's exit is never seen first.
                server.lock().finalized[rank as usize] = true;
                self.reply("cmd=finalize_ack rc=0\n")?;
                return Ok(false);
            }
            other => self.reply(&format!("cmd={other}_result rc=-1 msg=unknown_command\n"))?,
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// A server of `size` ranks on a loopback port, and its events.
    fn start(size: u32) -> (Arc<Server>, String, mpsc::Receiver<PmiEvent>) {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let server = Server::new(
            size,
            "(vector,(0,2,1))".into(),
            Box::new(move |e| {
                let _ = tx.lock().unwrap().send(e);
            }),
        );
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let s = server.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let c = c.unwrap();
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut r = BufReader::new(c);
                    let mut first = String::new();
                    r.read_line(&mut first).unwrap();
                    s.serve(r, first.trim_end());
                });
            }
        });
        (server, addr, rx)
    }

    struct Client {
        r: BufReader<TcpStream>,
        w: TcpStream,
    }

    impl Client {
        fn connect(addr: &str) -> Client {
            let w = TcpStream::connect(addr).unwrap();
            w.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            Client {
                r: BufReader::new(w.try_clone().unwrap()),
                w,
            }
        }
        fn say(&mut self, m: &str) {
            self.w.write_all(format!("{m}\n").as_bytes()).unwrap();
        }
        fn hear(&mut self) -> Pmi1Message {
            let mut l = String::new();
            self.r.read_line(&mut l).unwrap();
            parse_pmi1(l.trim_end()).unwrap()
        }
        fn ask(&mut self, m: &str) -> Pmi1Message {
            self.say(m);
            self.hear()
        }
    }

    #[test]
    fn two_ranks_greet_put_fence_get_and_finalize() {
        let (server, addr, _rx) = start(2);
        let handles: Vec<_> = (0..2u32)
            .map(|id| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let mut c = Client::connect(&addr);
                    c.say(&format!("cmd=initack pmiid={id}"));
                    assert_eq!(c.hear().cmd, "initack");
                    let mut sets = HashMap::new();
                    for _ in 0..3 {
                        let s = c.hear();
                        assert_eq!(s.cmd, "set");
                        for k in ["size", "rank", "debug"] {
                            if let Some(v) = s.get(k) {
                                sets.insert(k, v.to_string());
                            }
                        }
                    }
                    assert_eq!(sets["rank"], id.to_string());
                    assert_eq!(sets["size"], "2");
                    let r = c.ask("cmd=init pmi_version=1 pmi_subversion=1");
                    assert_eq!(
                        (r.cmd.as_str(), r.get("rc")),
                        ("response_to_init", Some("0"))
                    );
                    assert_eq!(c.ask("cmd=get_maxes").get("vallen_max"), Some("1024"));
                    let kvs = c
                        .ask("cmd=get_my_kvsname")
                        .get("kvsname")
                        .unwrap()
                        .to_string();
                    let put = format!("cmd=put kvsname={kvs} key=card-{id} value=v{id}");
                    assert_eq!(c.ask(&put).get("rc"), Some("0"));
                    assert_eq!(c.ask("cmd=barrier_in").cmd, "barrier_out");
                    let other = 1 - id;
                    let g = c.ask(&format!("cmd=get kvsname={kvs} key=card-{other}"));
                    assert_eq!(g.get("value"), Some(format!("v{other}").as_str()));
                    let g = c.ask(&format!("cmd=get kvsname={kvs} key=PMI_process_mapping"));
                    assert_eq!(g.get("value"), Some("(vector,(0,2,1))"));
                    let g = c.ask(&format!("cmd=get kvsname={kvs} key=nothing"));
                    assert_ne!(g.get("rc"), Some("0"));
                    assert_eq!(c.ask("cmd=finalize").cmd, "finalize_ack");
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(!server.joined_unfinalized(0) && !server.joined_unfinalized(1));
    }

    #[test]
    fn abort_and_broken_greetings_are_reported() {
        let (server, addr, rx) = start(3);
        let mut c = Client::connect(&addr);
        c.say("cmd=initack pmiid=2");
        for _ in 0..4 {
            c.hear();
        }
        assert!(server.joined_unfinalized(2));
        assert!(!server.joined_unfinalized(1));
        c.say("cmd=abort exitcode=7 message=gave_up");
        let e = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(
            e,
            PmiEvent::Abort {
                rank: 2,
                code: 7,
                message: "gave_up".into()
            }
        );
        let mut bad = Client::connect(&addr);
        bad.say("cmd=initack pmiid=9");
        match rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap() {
            PmiEvent::Broken { why, .. } => assert!(why.contains("pmiid=9"), "{why}"),
            e => panic!("{e:?}"),
        }
        let mut twice = Client::connect(&addr);
        twice.say("cmd=initack pmiid=2");
        match rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap() {
            PmiEvent::Broken { why, .. } => assert!(why.contains("twice"), "{why}"),
            e => panic!("{e:?}"),
        }
    }
}
