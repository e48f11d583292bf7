//! A PMI client: how a rank started by Hydra (`mpiexec`, MPICH's launcher) or by Slurm
//! (`srun --mpi=pmi2`) learns its rank and exchanges business cards with the other ranks.
//!
//! Two wires, one client:
//!
//! * **PMI-1** ("simple"): one line per message, `cmd=NAME key=value ...\n`. The rank speaks
//!   first and has one request in flight. Hydra offers it on an inherited socket (`PMI_FD`)
//!   or, under `mpiexec -pmi-port`, on a TCP port (`PMI_PORT=host:port`, `PMI_ID`), where a
//!   `cmd=initack` exchange gives the rank and size first.
//! * **PMI-2**: after a PMI-1 style `cmd=init pmi_version=2`, each message is a length in
//!   six space-padded decimal digits followed by `cmd=NAME;key=value;...;` (a `;` inside a
//!   value is doubled). Slurm's `mpi/pmi2` plugin speaks it natively; it is chosen when Slurm's
//!   variables (`PMI_JOBID`, `PMI2_SUN_PATH`) are present or `EARLYBIRD_PMI=2` asks for it.
//!
//! Replies are read by line (PMI-1) or by length (PMI-2) from a buffer, since a server may
//! send several at once; every request leaves in one `write`, since some servers read each
//! with a single `read`. Keys are matched wherever they stand in a reply and unknown ones
//! are ignored. A reply that does not parse, names another command or carries `rc` other
//! than 0 is an error that quotes it.
#![forbid(unsafe_code)]

use crate::error::{Error, ErrorClass, Result};
use std::io::Read;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

/// Which PMI wire a client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    V1,
    V2,
}

/// The connection to the PMI server.
pub(crate) enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl std::os::fd::AsFd for Stream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Stream::Unix(s) => s.as_fd(),
            Stream::Tcp(s) => s.as_fd(),
        }
    }
}

/// Set once a server closed its connection: the launcher is ending the job.
pub(crate) static SERVER_CLOSED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

fn pmi_error(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorClass::Other, format!("PMI: {what}"))
}

/// One PMI message: its command and its `key=value` pairs in order. (Public for ebrun,
/// whose PMI server reads the same lines from the other side.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub cmd: String,
    pairs: Vec<(String, String)>,
    /// The message as received, for error messages.
    raw: String,
}

impl Reply {
    /// The value of the first pair named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn need(&self, key: &str) -> Result<&str> {
        self.get(key)
            .ok_or_else(|| pmi_error(format!("reply {:?} lacks {key}", self.raw)))
    }

    fn need_u32(&self, key: &str) -> Result<u32> {
        let v = self.need(key)?;
        v.parse()
            .map_err(|_| pmi_error(format!("reply {:?}: {key}={v:?} is not a number", self.raw)))
    }

    /// `Err` when the reply carries a non-zero `rc`, with the server's `msg` or `errmsg`.
    fn check_rc(&self) -> Result<()> {
        match self.get("rc") {
            None | Some("0") => Ok(()),
            Some(rc) => {
                let msg = self.get("msg").or(self.get("errmsg")).unwrap_or("");
                Err(pmi_error(format!(
                    "the server answered {} with rc={rc} {msg}",
                    self.cmd
                )))
            }
        }
    }
}

/// Parse one PMI-1 line (without its newline): space-separated `key=value` tokens, the first
/// `cmd=NAME`. A token without `=` continues the previous value (servers put spaces in
/// `msg`).
pub fn parse_v1(line: &str) -> Result<Reply> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for tok in line.split(' ').filter(|t| !t.is_empty()) {
        match tok.split_once('=') {
            Some((k, v)) if !k.is_empty() => pairs.push((k.to_string(), v.to_string())),
            _ => match pairs.last_mut() {
                Some((_, v)) => {
                    v.push(' ');
                    v.push_str(tok);
                }
                None => return Err(pmi_error(format!("malformed reply {line:?}"))),
            },
        }
    }
    reply(pairs, line)
}

/// Parse one PMI-2 message body: `cmd=NAME;key=value;...;`, a doubled `;` standing for one
/// inside a value.
pub(crate) fn parse_v2(body: &str) -> Result<Reply> {
    let mut pairs = Vec::new();
    let mut field = String::new();
    let mut chars = body.chars().peekable();
    let mut end_field = |field: &mut String| -> Result<()> {
        if field.is_empty() {
            return Ok(());
        }
        let (k, v) = field
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| pmi_error(format!("malformed reply {body:?}")))?;
        pairs.push((k.to_string(), v.to_string()));
        field.clear();
        Ok(())
    };
    while let Some(c) = chars.next() {
        if c == ';' {
            if chars.peek() == Some(&';') {
                chars.next();
                field.push(';');
            } else {
                end_field(&mut field)?;
            }
        } else {
            field.push(c);
        }
    }
    end_field(&mut field)?;
    reply(pairs, body)
}

fn reply(mut pairs: Vec<(String, String)>, raw: &str) -> Result<Reply> {
    if pairs.first().is_none_or(|(k, _)| k != "cmd") {
        return Err(pmi_error(format!(
            "malformed reply {raw:?}: it does not start with cmd="
        )));
    }
    let cmd = pairs.remove(0).1;
    Ok(Reply {
        cmd,
        pairs,
        raw: raw.to_string(),
    })
}

/// Where each rank runs, from `PMI_process_mapping`: `(vector,(first,count,per),...)`, a
/// list of blocks each placing `per` consecutive ranks on each of the nodes `first` ..
/// `first + count`, the list repeated until every rank has a node. `None` for an empty value
/// (the launcher does not know).
pub fn parse_mapping(value: &str, size: u32) -> Result<Option<Vec<u32>>> {
    let bad = || pmi_error(format!("cannot parse PMI_process_mapping {value:?}"));
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let inner = v
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .and_then(|s| s.trim_start().strip_prefix("vector"))
        .ok_or_else(bad)?;
    let mut blocks = Vec::new();
    for part in inner.split('(').skip(1) {
        let nums = part.split(')').next().ok_or_else(bad)?;
        let n: Vec<u32> = nums
            .split(',')
            .map(|x| x.trim().parse::<u32>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| bad())?;
        match n[..] {
            [first, count, per] if count > 0 && per > 0 => blocks.push((first, count, per)),
            _ => return Err(bad()),
        }
    }
    if blocks.is_empty() {
        return Err(bad());
    }
    let mut node = Vec::with_capacity(size as usize);
    'fill: loop {
        for &(first, count, per) in &blocks {
            for n in first..first.saturating_add(count) {
                for _ in 0..per {
                    if node.len() == size as usize {
                        break 'fill;
                    }
                    node.push(n);
                }
            }
        }
    }
    Ok(Some(node))
}

/// A value or key as PMI carries it: printable ASCII without spaces, and (PMI-2) no `=`.
fn check_token(what: &str, s: &str, max: usize) -> Result<()> {
    if s.is_empty() || s.len() > max || !s.bytes().all(|b| (33..=126).contains(&b) && b != b'=') {
        return Err(pmi_error(format!(
            "{what} {s:?} is not 1 to {max} printable characters without '=' or spaces"
        )));
    }
    Ok(())
}

/// A connected, initialised PMI client.
pub(crate) struct Client {
    stream: Stream,
    inbuf: Vec<u8>,
    wire: Wire,
    pub rank: u32,
    pub size: u32,
    /// The key-value space's name (PMI-1 kvsname, PMI-2 jobid).
    kvs: String,
    keylen_max: usize,
    vallen_max: usize,
}

/// What the environment says about the PMI server.
#[derive(Debug, Default, Clone)]
pub(crate) struct Offer {
    /// `PMI_FD`: a socket the launcher made.
    pub fd: Option<i32>,
    /// `PMI_PORT` (`host:port`) with `PMI_ID`.
    pub port: Option<(String, u32)>,
    /// `PMI_RANK` and `PMI_SIZE` (set with `PMI_FD`).
    pub rank: Option<u32>,
    pub size: Option<u32>,
    pub wire: Option<Wire>,
    /// `PMI_JOBID` (Slurm), which PMI-2's `fullinit` must name.
    pub jobid: Option<String>,
}

impl Client {
    /// Connect to the server `offer` names and initialise: `stream` is the connection
    /// (already made from `PMI_FD` or `PMI_PORT`).
    pub(crate) fn start(stream: Stream, offer: &Offer) -> Result<Client> {
        let wire = offer.wire.unwrap_or(Wire::V1);
        let mut c = Client {
            stream,
            inbuf: Vec::new(),
            wire: Wire::V1,
            rank: offer.rank.unwrap_or(0),
            size: offer.size.unwrap_or(0),
            kvs: String::new(),
            keylen_max: 64,
            vallen_max: 1024,
        };
        if let Some((_, id)) = &offer.port {
            // Port mode: say which process this is; the server gives its rank and size.
            c.send_v1(&format!("cmd=initack pmiid={id}\n"))?;
            let ack = c.recv_v1()?;
            if ack.cmd != "initack" {
                return Err(pmi_error(format!("expected initack, got {:?}", ack.raw)));
            }
            let (mut rank, mut size) = (None, None);
            for _ in 0..3 {
                let set = c.recv_v1()?;
                if set.cmd != "set" {
                    return Err(pmi_error(format!("expected cmd=set, got {:?}", set.raw)));
                }
                rank = rank.or(set.get("rank").map(|_| set.need_u32("rank")).transpose()?);
                size = size.or(set.get("size").map(|_| set.need_u32("size")).transpose()?);
            }
            c.rank = rank.ok_or_else(|| pmi_error("the port-mode server sent no rank"))?;
            c.size = size.ok_or_else(|| pmi_error("the port-mode server sent no size"))?;
        }
        let (version, sub) = match wire {
            Wire::V1 => (1, 1),
            Wire::V2 => (2, 0),
        };
        c.send_v1(&format!(
            "cmd=init pmi_version={version} pmi_subversion={sub}\n"
        ))?;
        let r = c.recv_v1()?;
        c.expect(&r, "response_to_init")?;
        if r.get("pmi_version") != Some(&version.to_string()) {
            return Err(pmi_error(format!(
                "the server does not speak PMI-{version}: {:?}",
                r.raw
            )));
        }
        c.wire = wire;
        match wire {
            Wire::V1 => {
                let m = c.request("get_maxes", &[], "maxes")?;
                c.keylen_max = m.need_u32("keylen_max")? as usize;
                c.vallen_max = m.need_u32("vallen_max")? as usize;
                let k = c.request("get_my_kvsname", &[], "my_kvsname")?;
                c.kvs = k.need("kvsname")?.to_string();
            }
            Wire::V2 => {
                let rank = offer.rank.map(|r| r.to_string());
                let mut args = vec![("threaded", "FALSE")];
                if let Some(r) = &rank {
                    args.insert(0, ("pmirank", r.as_str()));
                }
                if let Some(j) = &offer.jobid {
                    args.insert(0, ("pmijobid", j.as_str()));
                }
                let f = c.request("fullinit", &args, "fullinit-response")?;
                c.rank = f.need_u32("rank")?;
                c.size = f.need_u32("size")?;
                let j = c.request("job-getid", &[], "job-getid-response")?;
                c.kvs = j.need("jobid")?.to_string();
            }
        }
        if c.size == 0 || c.rank >= c.size {
            return Err(pmi_error(format!(
                "the launcher says rank {} of {}",
                c.rank, c.size
            )));
        }
        Ok(c)
    }

    fn expect(&self, r: &Reply, cmd: &str) -> Result<()> {
        if r.cmd != cmd {
            return Err(pmi_error(format!("expected {cmd}, got {:?}", r.raw)));
        }
        r.check_rc()
    }

    /// Send one request and read its reply, which must be `answer` with `rc` 0.
    fn request(&mut self, cmd: &str, pairs: &[(&str, &str)], answer: &str) -> Result<Reply> {
        self.send(cmd, pairs)?;
        let r = self.recv()?;
        self.expect(&r, answer)?;
        Ok(r)
    }

    fn send(&mut self, cmd: &str, pairs: &[(&str, &str)]) -> Result<()> {
        match self.wire {
            Wire::V1 => {
                let mut m = format!("cmd={cmd}");
                for (k, v) in pairs {
                    m.push_str(&format!(" {k}={v}"));
                }
                m.push('\n');
                self.send_v1(&m)
            }
            Wire::V2 => {
                let mut body = format!("cmd={cmd};");
                for (k, v) in pairs {
                    body.push_str(&format!("{k}={};", v.replace(';', ";;")));
                }
                let m = format!("{:6}{body}", body.len());
                self.write_all(m.as_bytes())
            }
        }
    }

    fn send_v1(&mut self, m: &str) -> Result<()> {
        self.write_all(m.as_bytes())
    }

    fn write_all(&mut self, m: &[u8]) -> Result<()> {
        use std::os::fd::AsFd;
        crate::sys::socket::send_all(self.stream.as_fd(), m)
            .map_err(|e| pmi_error(format!("cannot write to the server: {e}")))
    }

    fn recv(&mut self) -> Result<Reply> {
        match self.wire {
            Wire::V1 => self.recv_v1(),
            Wire::V2 => {
                let len = self.take(6)?;
                let len_s = String::from_utf8_lossy(&len).to_string();
                let n: usize = len_s
                    .trim()
                    .parse()
                    .map_err(|_| pmi_error(format!("malformed PMI-2 length {len_s:?}")))?;
                let body = self.take(n)?;
                parse_v2(&String::from_utf8_lossy(&body))
            }
        }
    }

    fn recv_v1(&mut self) -> Result<Reply> {
        loop {
            if let Some(i) = self.inbuf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.inbuf.drain(..=i).collect();
                return parse_v1(&String::from_utf8_lossy(&line[..i]));
            }
            self.fill()?;
        }
    }

    /// The next `n` bytes from the server.
    fn take(&mut self, n: usize) -> Result<Vec<u8>> {
        while self.inbuf.len() < n {
            self.fill()?;
        }
        Ok(self.inbuf.drain(..n).collect())
    }

    fn fill(&mut self) -> Result<()> {
        let mut buf = [0u8; 4096];
        let got = loop {
            match self.stream.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        match got {
            Ok(0) => {
                SERVER_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
                Err(pmi_error("the server closed the connection"))
            }
            Ok(n) => {
                self.inbuf.extend_from_slice(&buf[..n]);
                Ok(())
            }
            Err(e) => Err(pmi_error(format!("cannot read from the server: {e}"))),
        }
    }

    /// Publish `value` under `key` in the job's key-value space (seen by all ranks after the
    /// next [`barrier`](Self::barrier)).
    pub(crate) fn put(&mut self, key: &str, value: &str) -> Result<()> {
        check_token("key", key, self.keylen_max)?;
        check_token("value", value, self.vallen_max)?;
        let kvs = self.kvs.clone();
        match self.wire {
            Wire::V1 => self.request(
                "put",
                &[("kvsname", &kvs), ("key", key), ("value", value)],
                "put_result",
            ),
            Wire::V2 => self.request(
                "kvs-put",
                &[("key", key), ("value", value)],
                "kvs-put-response",
            ),
        }
        .map(|_| ())
    }

    /// Wait until every rank of the job has reached its barrier (PMI-2: `kvs-fence`).
    pub(crate) fn barrier(&mut self) -> Result<()> {
        match self.wire {
            Wire::V1 => self.request("barrier_in", &[], "barrier_out"),
            Wire::V2 => self.request("kvs-fence", &[], "kvs-fence-response"),
        }
        .map(|_| ())
    }

    /// The value another rank published under `key`, asking again every millisecond for at
    /// most `limit` while the key is missing.
    pub(crate) fn get_within(&mut self, key: &str, limit: std::time::Duration) -> Result<String> {
        let until = std::time::Instant::now() + limit;
        loop {
            if let Some(v) = self.lookup(key)? {
                return Ok(v);
            }
            if std::time::Instant::now() >= until {
                return Err(pmi_error(format!(
                    "no value under key {key:?} after {limit:?}"
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// `None` when nothing is published under `key`.
    fn lookup(&mut self, key: &str) -> Result<Option<String>> {
        let kvs = self.kvs.clone();
        match self.wire {
            Wire::V1 => {
                self.send("get", &[("kvsname", &kvs), ("key", key)])?;
                let r = self.recv()?;
                if r.cmd != "get_result" {
                    return Err(pmi_error(format!("expected get_result, got {:?}", r.raw)));
                }
                // A missing key is rc != 0 with a message; tell it from a broken reply.
                if r.get("rc") != Some("0") {
                    return Ok(None);
                }
                Ok(Some(r.need("value")?.to_string()))
            }
            Wire::V2 => {
                let r = self.request(
                    "kvs-get",
                    &[("jobid", &kvs), ("srcid", "-1"), ("key", key)],
                    "kvs-get-response",
                )?;
                Ok(match r.get("found") {
                    Some("TRUE") => Some(r.need("value")?.to_string()),
                    _ => None,
                })
            }
        }
    }

    /// `PMI_process_mapping`: the node of each rank, `None` if the launcher gives none.
    pub(crate) fn process_mapping(&mut self) -> Result<Option<Vec<u32>>> {
        let value = match self.wire {
            Wire::V1 => self.lookup("PMI_process_mapping")?,
            Wire::V2 => {
                let r = self.request(
                    "info-getjobattr",
                    &[("key", "PMI_process_mapping")],
                    "info-getjobattr-response",
                )?;
                match r.get("found") {
                    Some("TRUE") => Some(r.need("value")?.to_string()),
                    _ => None,
                }
            }
        };
        match value {
            Some(v) => parse_mapping(&v, self.size),
            None => Ok(None),
        }
    }

    /// Ask the launcher to end the job with exit code `code` (no reply comes). `why` is
    /// sent with spaces as `_`, since PMI-1 servers split values on spaces.
    pub(crate) fn abort(&mut self, code: i32, why: &str) {
        let why: String = why
            .chars()
            .map(|c| if c.is_ascii_graphic() { c } else { '_' })
            .take(self.vallen_max.min(512))
            .collect();
        let code_s = code.to_string();
        let _ = match self.wire {
            Wire::V1 => self.send("abort", &[("exitcode", &code_s), ("message", &why)]),
            Wire::V2 => self.send("abort", &[("isworld", "TRUE"), ("msg", &why)]),
        };
    }

    /// Tell the launcher this rank has finalized, and wait for its acknowledgement.
    pub(crate) fn finalize(&mut self) -> Result<()> {
        match self.wire {
            Wire::V1 => self.request("finalize", &[], "finalize_ack"),
            Wire::V2 => self.request("finalize", &[], "finalize-response"),
        }
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, Write};
    use std::time::Duration;

    #[test]
    fn v1_replies_parse_in_any_order_with_extra_keys() {
        let r = parse_v1("cmd=get_result rc=0 msg=success value=(vector,(0,1,1))").unwrap();
        assert_eq!(r.cmd, "get_result");
        assert_eq!(r.get("value"), Some("(vector,(0,1,1))"));
        assert!(r.check_rc().is_ok());
        let e = parse_v1("cmd=get_result rc=-1 msg=key not found").unwrap();
        assert_eq!(e.get("msg"), Some("key not found"));
        let err = e.check_rc().unwrap_err().to_string();
        assert!(err.contains("rc=-1 key not found"), "{err}");
        for bad in ["garbage", "value=1 cmd=x", "", "=x"] {
            let err = parse_v1(bad).unwrap_err().to_string();
            assert!(err.contains("malformed reply"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn v2_bodies_parse_with_doubled_semicolons() {
        let r = parse_v2("cmd=kvs-get-response;found=TRUE;value=a;;b=c;rc=0;").unwrap();
        assert_eq!(r.cmd, "kvs-get-response");
        assert_eq!(r.get("value"), Some("a;b=c"));
        assert_eq!(r.get("found"), Some("TRUE"));
        assert!(parse_v2("found=TRUE;cmd=x;").is_err());
        assert!(parse_v2("cmd=x;novalue;").is_err());
    }

    #[test]
    fn mappings_are_cyclic_blocks() {
        assert_eq!(
            parse_mapping("(vector,(0,1,3))", 3).unwrap(),
            Some(vec![0, 0, 0])
        );
        assert_eq!(
            parse_mapping("(vector,(0,2,2))", 4).unwrap(),
            Some(vec![0, 0, 1, 1])
        );
        assert_eq!(
            parse_mapping("(vector,(0,3,1))", 3).unwrap(),
            Some(vec![0, 1, 2])
        );
        // Repeated: 6 ranks on 2 nodes, 2 per node per round.
        assert_eq!(
            parse_mapping("(vector,(0,2,2))", 6).unwrap(),
            Some(vec![0, 0, 1, 1, 0, 0])
        );
        assert_eq!(
            parse_mapping("(vector,(0,1,2),(1,1,1))", 4).unwrap(),
            Some(vec![0, 0, 1, 0])
        );
        assert_eq!(parse_mapping("", 2).unwrap(), None);
        for bad in [
            "vector",
            "(vector)",
            "(vector,(0,1))",
            "(vector,(0,0,1))",
            "(list,(0,1,1))",
        ] {
            assert!(parse_mapping(bad, 2).is_err(), "{bad}");
        }
    }

    /// A server on the other end of a socket pair, answering each request line (PMI-1) with
    /// the script's next reply; `None` as a reply means read the request and answer nothing.
    fn serve_v1(
        script: Vec<(&'static str, Option<&'static str>)>,
    ) -> (UnixStream, std::thread::JoinHandle<Vec<String>>) {
        let (a, b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut w = b.try_clone().unwrap();
            let mut r = std::io::BufReader::new(b);
            for (expect, answer) in script {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap() == 0 {
                    break;
                }
                assert!(
                    line.starts_with(expect),
                    "expected {expect:?}, got {line:?}"
                );
                seen.push(line.trim_end().to_string());
                if let Some(a) = answer {
                    w.write_all(a.as_bytes()).unwrap();
                }
            }
            seen
        });
        (a, t)
    }

    fn fd_offer(rank: u32, size: u32) -> Offer {
        Offer {
            rank: Some(rank),
            size: Some(size),
            ..Offer::default()
        }
    }

    const INIT: (&str, Option<&str>) = (
        "cmd=init pmi_version=1 pmi_subversion=1",
        Some("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"),
    );
    const MAXES: (&str, Option<&str>) = (
        "cmd=get_maxes",
        Some("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n"),
    );
    const KVS: (&str, Option<&str>) = ("cmd=get_my_kvsname", Some("cmd=my_kvsname kvsname=k0\n"));

    #[test]
    fn v1_conversation_puts_fences_and_gets() {
        let (s, t) = serve_v1(vec![
            INIT,
            MAXES,
            KVS,
            (
                "cmd=get kvsname=k0 key=PMI_process_mapping",
                Some("cmd=get_result rc=0 msg=success value=(vector,(0,1,2))\n"),
            ),
            (
                "cmd=put kvsname=k0 key=card-1 value=abc",
                Some("cmd=put_result rc=0 msg=success\n"),
            ),
            ("cmd=barrier_in", Some("cmd=barrier_out\n")),
            (
                "cmd=get kvsname=k0 key=card-0",
                Some("cmd=get_result rc=0 value=xyz\n"),
            ),
            (
                "cmd=get kvsname=k0 key=none",
                Some("cmd=get_result rc=-1 msg=key_none_not_found\n"),
            ),
            ("cmd=finalize", Some("cmd=finalize_ack\n")),
        ]);
        let mut c = Client::start(Stream::Unix(s), &fd_offer(1, 2)).unwrap();
        assert_eq!((c.rank, c.size), (1, 2));
        assert_eq!(c.process_mapping().unwrap(), Some(vec![0, 0]));
        c.put("card-1", "abc").unwrap();
        c.barrier().unwrap();
        assert_eq!(c.get_within("card-0", Duration::ZERO).unwrap(), "xyz");
        let e = c
            .get_within("none", Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no value under key \"none\" after 0ns"), "{e}");
        c.finalize().unwrap();
        assert_eq!(t.join().unwrap().len(), 9);
    }

    #[test]
    fn port_mode_takes_rank_and_size_from_coalesced_set_lines() {
        let (s, t) = serve_v1(vec![
            (
                "cmd=initack pmiid=3",
                Some("cmd=initack\ncmd=set size=4\ncmd=set rank=3\ncmd=set debug=0\n"),
            ),
            INIT,
            MAXES,
            KVS,
        ]);
        let offer = Offer {
            port: Some(("h:1".into(), 3)),
            ..Offer::default()
        };
        let c = Client::start(Stream::Unix(s), &offer).unwrap();
        assert_eq!((c.rank, c.size), (3, 4));
        t.join().unwrap();
    }

    #[test]
    fn broken_servers_are_errors_that_quote_them() {
        let cases: Vec<(Vec<(&'static str, Option<&'static str>)>, &str)> = vec![
            (
                vec![("cmd=init", Some("hello there\n"))],
                "malformed reply \"hello there\"",
            ),
            (
                vec![(
                    "cmd=init",
                    Some("cmd=response_to_init pmi_version=1 rc=3 msg=no\n"),
                )],
                "rc=3 no",
            ),
            (
                vec![(
                    "cmd=init",
                    Some("cmd=response_to_init pmi_version=2 rc=0\n"),
                )],
                "does not speak PMI-1",
            ),
            (
                vec![INIT, ("cmd=get_maxes", Some("cmd=barrier_out\n"))],
                "expected maxes",
            ),
            (
                vec![
                    INIT,
                    (
                        "cmd=get_maxes",
                        Some("cmd=maxes keylen_max=x vallen_max=1\n"),
                    ),
                ],
                "keylen_max=\"x\" is not a number",
            ),
            (vec![INIT, ("cmd=get_maxes", None)], "closed the connection"),
        ];
        for (script, want) in cases {
            let (s, t) = serve_v1(script);
            let e = match Client::start(Stream::Unix(s), &fd_offer(0, 1)) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("a broken server was accepted (want {want})"),
            };
            assert!(e.contains(want), "want {want:?} in {e:?}");
            t.join().unwrap();
        }
    }

    #[test]
    fn v2_conversation_uses_length_prefixed_messages() {
        let (a, b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let mut w = b.try_clone().unwrap();
            let mut r = b;
            let mut line = Vec::new();
            let mut byte = [0u8; 1];
            while byte[0] != b'\n' {
                r.read_exact(&mut byte).unwrap();
                line.push(byte[0]);
            }
            assert_eq!(line, b"cmd=init pmi_version=2 pmi_subversion=0\n");
            w.write_all(b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n")
                .unwrap();
            let mut seen = Vec::new();
            let replies = [
                "cmd=fullinit-response;pmi-version=2;rank=1;size=2;appnum=0;rc=0;",
                "cmd=job-getid-response;jobid=j7;rc=0;",
                "cmd=kvs-put-response;rc=0;",
                "cmd=kvs-fence-response;rc=0;",
                "cmd=kvs-get-response;found=TRUE;value=v;;w;rc=0;",
                "cmd=abort-ignored;",
            ];
            for rep in replies {
                let mut len = [0u8; 6];
                r.read_exact(&mut len).unwrap();
                let n: usize = std::str::from_utf8(&len).unwrap().trim().parse().unwrap();
                let mut body = vec![0u8; n];
                r.read_exact(&mut body).unwrap();
                seen.push(String::from_utf8(body).unwrap());
                w.write_all(format!("{:6}{rep}", rep.len()).as_bytes())
                    .unwrap();
            }
            seen
        });
        let mut c = Client::start(
            Stream::Unix(a),
            &Offer {
                rank: Some(1),
                wire: Some(Wire::V2),
                jobid: Some("7.0".into()),
                ..Offer::default()
            },
        )
        .unwrap();
        assert_eq!((c.rank, c.size), (1, 2));
        c.put("k", "v1").unwrap();
        c.barrier().unwrap();
        assert_eq!(c.get_within("k", Duration::ZERO).unwrap(), "v;w");
        c.abort(7, "rank 1 gave up");
        let seen = t.join().unwrap();
        assert_eq!(
            seen,
            [
                "cmd=fullinit;pmijobid=7.0;pmirank=1;threaded=FALSE;",
                "cmd=job-getid;",
                "cmd=kvs-put;key=k;value=v1;",
                "cmd=kvs-fence;",
                "cmd=kvs-get;jobid=j7;srcid=-1;key=k;",
                "cmd=abort;isworld=TRUE;msg=rank_1_gave_up;",
            ]
        );
    }

    #[test]
    fn keys_and_values_are_checked_before_they_leave() {
        let (s, t) = serve_v1(vec![INIT, MAXES, KVS]);
        let mut c = Client::start(Stream::Unix(s), &fd_offer(0, 1)).unwrap();
        t.join().unwrap();
        for (k, v) in [("a b", "v"), ("k", "has space"), ("k", ""), ("k", "a=b")] {
            let e = c.put(k, v).unwrap_err().to_string();
            assert!(e.contains("printable characters"), "{k:?} {v:?}: {e}");
        }
        let long = "x".repeat(1025);
        assert!(c.put("k", &long).is_err());
    }
}
