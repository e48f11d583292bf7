//! The link between ebrun and the proxy it starts on each host (`--hosts`).
//!
//! One TCP connection per proxy, one message per line: a word, then numbers, then bytes in
//! hex (paths, arguments and environment entries may hold anything). The proxy connects to
//! ebrun, says which host it is and the job's cookie; ebrun sends the job (environment,
//! working directory, program and arguments, PMI address, ranks) and `start`. From then on
//! both sides send `beat` every [`BEAT`]; a side that hears nothing for [`LOST_AFTER`] (a
//! host that froze or whose link went down) or reads the end of the connection (a proxy or
//! ebrun that died) takes the other as lost.

use earlybird::launch::{hex, unhex};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::time::Duration;

/// How often each side says it is alive.
pub(crate) const BEAT: Duration = Duration::from_millis(500);
/// Silence after which the other side is lost.
pub(crate) const LOST_AFTER: Duration = Duration::from_secs(3);

/// From ebrun to a proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToProxy {
    /// One `NAME=VALUE` of the ranks' environment.
    Env(OsString),
    Cwd(OsString),
    /// The program, then each argument.
    Arg(OsString),
    /// `PMI_PORT` for the ranks: ebrun's address as this host reaches it.
    Pmi(String),
    /// A rank this proxy starts.
    Rank(u32),
    /// Prefix the ranks' lines with `[rank] `.
    Tag,
    /// The job is complete: start the ranks.
    Start,
    /// End the ranks (this signal, SIGKILL 300 ms later or at once if `End` comes again),
    /// report, and exit.
    End(i32),
    Beat,
}

/// From a proxy to ebrun.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FromProxy {
    Hello {
        host: u32,
        cookie: String,
        pid: u32,
    },
    Started {
        rank: u32,
        pid: u32,
    },
    /// The program could not be started; `code` is 127 (not found) or 126.
    Unstartable {
        rank: u32,
        code: i32,
        why: String,
    },
    /// A rank ended with this raw wait status.
    Exit {
        rank: u32,
        status: i32,
    },
    /// Every rank of the host ended and its output is forwarded; the proxy exits.
    Done,
    Beat,
}

fn num<T: std::str::FromStr>(line: &str, w: Option<&str>) -> Result<T, String> {
    w.and_then(|x| x.parse().ok())
        .ok_or_else(|| format!("malformed message {line:?}"))
}

fn bytes(line: &str, w: Option<&str>) -> Result<OsString, String> {
    w.and_then(unhex)
        .map(OsString::from_vec)
        .ok_or_else(|| format!("malformed message {line:?}"))
}

impl ToProxy {
    pub(crate) fn line(&self) -> String {
        match self {
            ToProxy::Env(v) => format!("env {}", hex(v.as_bytes())),
            ToProxy::Cwd(v) => format!("cwd {}", hex(v.as_bytes())),
            ToProxy::Arg(v) => format!("arg {}", hex(v.as_bytes())),
            ToProxy::Pmi(a) => format!("pmi {}", hex(a.as_bytes())),
            ToProxy::Rank(r) => format!("rank {r}"),
            ToProxy::Tag => "tag".into(),
            ToProxy::Start => "start".into(),
            ToProxy::End(s) => format!("end {s}"),
            ToProxy::Beat => "beat".into(),
        }
    }

    pub(crate) fn parse(line: &str) -> Result<ToProxy, String> {
        let mut w = line.split(' ');
        Ok(match w.next().unwrap_or("") {
            "env" => ToProxy::Env(bytes(line, w.next())?),
            "cwd" => ToProxy::Cwd(bytes(line, w.next())?),
            "arg" => ToProxy::Arg(bytes(line, w.next())?),
            "pmi" => ToProxy::Pmi(bytes(line, w.next())?.to_string_lossy().into_owned()),
            "rank" => ToProxy::Rank(num(line, w.next())?),
            "tag" => ToProxy::Tag,
            "start" => ToProxy::Start,
            "end" => ToProxy::End(num(line, w.next())?),
            "beat" => ToProxy::Beat,
            _ => return Err(format!("unknown message {line:?}")),
        })
    }
}

impl FromProxy {
    pub(crate) fn line(&self) -> String {
        match self {
            FromProxy::Hello { host, cookie, pid } => format!("proxy {host} {cookie} {pid}"),
            FromProxy::Started { rank, pid } => format!("started {rank} {pid}"),
            FromProxy::Unstartable { rank, code, why } => {
                format!("unstartable {rank} {code} {}", hex(why.as_bytes()))
            }
            FromProxy::Exit { rank, status } => format!("exit {rank} {status}"),
            FromProxy::Done => "done".into(),
            FromProxy::Beat => "beat".into(),
        }
    }

    pub(crate) fn parse(line: &str) -> Result<FromProxy, String> {
        let mut w = line.split(' ');
        Ok(match w.next().unwrap_or("") {
            "proxy" => FromProxy::Hello {
                host: num(line, w.next())?,
                cookie: w
                    .next()
                    .ok_or_else(|| format!("malformed message {line:?}"))?
                    .to_string(),
                pid: num(line, w.next())?,
            },
            "started" => FromProxy::Started {
                rank: num(line, w.next())?,
                pid: num(line, w.next())?,
            },
            "unstartable" => FromProxy::Unstartable {
                rank: num(line, w.next())?,
                code: num(line, w.next())?,
                why: bytes(line, w.next())?.to_string_lossy().into_owned(),
            },
            "exit" => FromProxy::Exit {
                rank: num(line, w.next())?,
                status: num(line, w.next())?,
            },
            "done" => FromProxy::Done,
            "beat" => FromProxy::Beat,
            _ => return Err(format!("unknown message {line:?}")),
        })
    }
}

/// The writing half of a link: one line per message, in one `write`.
pub(crate) struct Sender(TcpStream);

impl Sender {
    pub(crate) fn new(s: TcpStream) -> Sender {
        Sender(s)
    }

    pub(crate) fn send(&mut self, line: &str) -> std::io::Result<()> {
        let mut m = Vec::with_capacity(line.len() + 1);
        m.extend_from_slice(line.as_bytes());
        m.push(b'\n');
        self.0.write_all(&m)
    }
}

/// The reading half of a link.
pub(crate) struct Receiver(BufReader<TcpStream>);

/// Longest line a link accepts (an environment entry in hex is the longest).
const MAX_LINE: u64 = 1 << 20;

impl Receiver {
    /// Reads from `r` (which may hold bytes already read) that wait at most `silence`
    /// (then fail with `TimedOut` or `WouldBlock`).
    pub(crate) fn new(
        r: BufReader<TcpStream>,
        silence: Option<Duration>,
    ) -> std::io::Result<Receiver> {
        r.get_ref().set_read_timeout(silence)?;
        Ok(Receiver(r))
    }

    /// The next line; `Ok(None)` at the end of the connection.
    pub(crate) fn recv(&mut self) -> std::io::Result<Option<String>> {
        read_line(&mut self.0, MAX_LINE)
    }
}

/// The next line of `r` without its newline, at most `max` bytes long; `Ok(None)` at the
/// end of the stream. A line cut short, too long or not UTF-8 is an error.
pub(crate) fn read_line(r: &mut BufReader<TcpStream>, max: u64) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = Read::take(&mut *r, max).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a line cut short or too long",
        ));
    }
    buf.pop();
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
}

/// What a failed read of a link means, for the report.
pub(crate) fn silence_or_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("no word for {} s", LOST_AFTER.as_secs())
        }
        _ => format!("the connection failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let to = [
            ToProxy::Env(OsString::from_vec(b"A=b c\n\xff".to_vec())),
            ToProxy::Cwd("/tmp".into()),
            ToProxy::Arg("".into()),
            ToProxy::Pmi("10.0.0.1:555".into()),
            ToProxy::Rank(7),
            ToProxy::Tag,
            ToProxy::Start,
            ToProxy::End(2),
            ToProxy::Beat,
        ];
        for m in to {
            let l = m.line();
            assert!(!l.contains('\n'));
            assert_eq!(ToProxy::parse(&l), Ok(m));
        }
        let from = [
            FromProxy::Hello {
                host: 2,
                cookie: "ab12".into(),
                pid: 9,
            },
            FromProxy::Started { rank: 1, pid: 2 },
            FromProxy::Unstartable {
                rank: 0,
                code: 127,
                why: "no such file".into(),
            },
            FromProxy::Exit { rank: 3, status: 9 },
            FromProxy::Done,
            FromProxy::Beat,
        ];
        for m in from {
            assert_eq!(FromProxy::parse(&m.line()), Ok(m));
        }
        assert!(ToProxy::parse("rank x").unwrap_err().contains("rank x"));
        assert!(FromProxy::parse("hello").unwrap_err().contains("hello"));
        assert!(ToProxy::parse("arg 0").is_err());
    }
}
