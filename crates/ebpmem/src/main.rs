#![forbid(unsafe_code)]
//! `ebpmem` — look after the checkpoints of persistent RMA windows on disk.
//!
//! ```text
//! ebpmem [--root DIR] list [--json]
//! ebpmem [--root DIR] verify [--json]
//! ebpmem [--root DIR] delete NAME [--rank R]
//! ebpmem [--root DIR] delete-version NAME VERSION [--rank R]
//! ```
//!
//! A job's persistent windows live under a root directory (the one its ranks give
//! `MPI_Win_pmem_set_root_path`): per window and rank, the window memory and every committed
//! version. ebpmem works on that directory from outside any job: it lists the windows and
//! their versions, checks every checksum of every version (before a restart, or after a disk
//! scare), and deletes whole parts or single versions. A part open in a running job is
//! locked, and deleting from it fails.
//!
//! The root is `--root DIR`, else `$EARLYBIRD_PMEM_ROOT`. Exit status: 0 on success, 1 when
//! `verify` finds a damaged or unreadable part, 2 on any error (bad usage included).

use clap::{Parser, Subcommand};
use earlybird::pmem::{self, Checked, WindowPart};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the root comes from when `--root` is not given.
const ROOT_ENV: &str = "EARLYBIRD_PMEM_ROOT";

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Parser)]
#[command(
    name = "ebpmem",
    version,
    about = "List, verify and delete the checkpoints of earlybird persistent RMA windows"
)]
struct Cli {
    /// Root directory of the windows [default: $EARLYBIRD_PMEM_ROOT]
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every window part with its versions
    List {
        /// One JSON object per part and line
        #[arg(long)]
        json: bool,
    },
    /// Check every checksum of every version (exit status 1 if anything is damaged)
    Verify {
        /// One JSON object per version and line
        #[arg(long)]
        json: bool,
    },
    /// Delete a window: every rank's part, or one rank's
    Delete {
        name: String,
        /// Only this rank's part (also reaches a part whose store cannot be read)
        #[arg(long)]
        rank: Option<u32>,
    },
    /// Delete one version of a window: from every rank's part, or from one rank's
    DeleteVersion {
        name: String,
        version: u64,
        /// Only this rank's part
        #[arg(long)]
        rank: Option<u32>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ebpmem: {e}");
            ExitCode::from(2)
        }
    }
}

/// Run one command: `Ok(false)` when `verify` found damage.
fn run(cli: Cli) -> Fallible<bool> {
    let root = cli
        .root
        .or_else(|| {
            std::env::var_os(ROOT_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .ok_or("no root: give --root or set EARLYBIRD_PMEM_ROOT")?;
    let out = &mut io::stdout().lock();
    match cli.command {
        Command::List { json } => list(out, &root, json)?,
        Command::Verify { json } => return verify(out, &root, json),
        Command::Delete { name, rank } => {
            for r in ranks(&root, &name, rank)? {
                pmem::delete_part(&root, &name, r)?;
                writeln!(out, "deleted {name} rank {r}")?;
            }
        }
        Command::DeleteVersion {
            name,
            version,
            rank,
        } => {
            for r in ranks(&root, &name, rank)? {
                pmem::delete_part_version(&root, &name, r, version)?;
                writeln!(out, "deleted {name} rank {r} version {version}")?;
            }
        }
    }
    Ok(true)
}

/// The ranks to act on: `rank` if given, else every rank holding a part of window `name`.
fn ranks(root: &Path, name: &str, rank: Option<u32>) -> Fallible<Vec<u32>> {
    pmem::check_name(name)?;
    if let Some(r) = rank {
        return Ok(vec![r]);
    }
    let mut ranks: Vec<u32> = pmem::scan_root(root, None)?
        .into_iter()
        .filter(|p| p.name == name)
        .map(|p| p.rank)
        .collect();
    if ranks.is_empty() {
        return Err(format!("no window {name:?} under {}", root.display()).into());
    }
    ranks.sort_unstable();
    Ok(ranks)
}

fn list(out: &mut impl Write, root: &Path, json: bool) -> Fallible<()> {
    let mut parts = pmem::scan_root(root, None)?;
    parts.sort_by(|a, b| (&a.name, a.rank).cmp(&(&b.name, b.rank)));
    if json {
        for p in &parts {
            writeln!(out, "{}", part_json(p))?;
        }
        return Ok(());
    }
    let header = [
        "NAME",
        "RANK",
        "SIZE",
        "VERSIONS",
        "NEWEST",
        "TIMESTAMPS",
        "STATE",
    ];
    let rows: Vec<[String; 7]> = std::iter::once(header.map(String::from))
        .chain(parts.iter().map(part_row))
        .collect();
    write_table(out, &rows)?;
    Ok(())
}

/// One row of `list`'s table.
fn part_row(p: &WindowPart) -> [String; 7] {
    let (newest, stamps, state) = match (p.versions.first(), p.versions.last()) {
        (Some(oldest), Some(newest)) => {
            let (old, new) = (utc(oldest.timestamp()), utc(newest.timestamp()));
            let stamps = if p.versions.len() == 1 {
                new
            } else {
                format!("{old}..{new}")
            };
            (newest.number.to_string(), stamps, "ok")
        }
        _ => ("-".into(), "-".into(), "empty"),
    };
    [
        p.name.clone(),
        p.rank.to_string(),
        p.size.to_string(),
        p.versions.len().to_string(),
        newest,
        stamps,
        state.into(),
    ]
}

/// Rows as left-aligned columns two spaces apart.
fn write_table<const N: usize>(out: &mut impl Write, rows: &[[String; N]]) -> io::Result<()> {
    let mut widths = [0; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

/// `{"name":..,"rank":..,"size":..,"versions":[{"number":..,"time_ns":..},..]}`
fn part_json(p: &WindowPart) -> String {
    let versions: Vec<String> = p
        .versions
        .iter()
        .map(|v| format!("{{\"number\":{},\"time_ns\":{}}}", v.number, v.time_ns))
        .collect();
    format!(
        "{{\"name\":{},\"rank\":{},\"size\":{},\"versions\":[{}]}}",
        json_str(&p.name),
        p.rank,
        p.size,
        versions.join(",")
    )
}

/// Check every part; `Ok(false)` if a version is damaged or a part unreadable. A commit cut
/// by a crash is only reported (on stderr with `--json`, whose states are those of versions).
fn verify(out: &mut impl Write, root: &Path, json: bool) -> Fallible<bool> {
    let mut checked = pmem::verify_root(root)?;
    checked.sort_by(|a, b| (&a.name, a.rank).cmp(&(&b.name, b.rank)));
    let mut clean = true;
    for c in &checked {
        for (version, problem) in &c.versions {
            clean &= problem.is_none();
            let state = if problem.is_some() { "damaged" } else { "ok" };
            report(out, json, c, Some(*version), state, problem.as_deref())?;
        }
        if let Some(error) = &c.error {
            clean = false;
            report(out, json, c, None, "unreadable", Some(error))?;
        }
        if let Some((version, why)) = &c.cut {
            let line = format!(
                "{} {} {version} cut commit (ignored): {why}",
                c.name, c.rank
            );
            if json {
                eprintln!("ebpmem: {line}");
            } else {
                writeln!(out, "{line}")?;
            }
        }
    }
    Ok(clean)
}

/// One line of `verify`: `name rank version ok` or `name rank version STATE: problem` (version
/// `-` for the part as a whole), or its JSON object.
fn report(
    out: &mut impl Write,
    json: bool,
    c: &Checked,
    version: Option<u64>,
    state: &str,
    problem: Option<&str>,
) -> io::Result<()> {
    if json {
        let version = version.map_or("null".into(), |v| v.to_string());
        let problem = problem.map_or("null".into(), json_str);
        let name = json_str(&c.name);
        let rank = c.rank;
        writeln!(
            out,
            "{{\"name\":{name},\"rank\":{rank},\"version\":{version},\"state\":\"{state}\",\"problem\":{problem}}}"
        )
    } else {
        let version = version.map_or("-".into(), |v| v.to_string());
        match problem {
            None => writeln!(out, "{} {} {version} {state}", c.name, c.rank),
            Some(p) => writeln!(
                out,
                "{} {} {version} {}: {p}",
                c.name,
                c.rank,
                state.to_uppercase()
            ),
        }
    }
}

/// `s` as a JSON string: quote and backslash escaped, control characters as `\u00XX`.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c < ' ' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Seconds since the Unix epoch as UTC `YYYY-MM-DD HH:MM:SS`.
fn utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let (h, min, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02}:{s:02}")
}

/// (year, month, day) of the proleptic Gregorian calendar for a count of days since
/// 1970-01-01 (Howard Hinnant's `civil_from_days`: eras of 400 years, years starting in March
/// so that the leap day is the last day of the year).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era, [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1, [0, 365]
    let mp = (5 * doy + 2) / 153; // month from March, [0, 11]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use earlybird::pmem::Version;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20");
        assert_eq!(utc(946_684_799), "1999-12-31 23:59:59");
        assert_eq!(utc(1_709_164_800), "2024-02-29 00:00:00");
        assert_eq!(utc(4_107_542_399), "2100-02-28 23:59:59");
        assert_eq!(utc(4_107_542_400), "2100-03-01 00:00:00");
        assert_eq!(utc(253_402_300_799), "9999-12-31 23:59:59");
        assert_eq!(utc(-1), "1969-12-31 23:59:59");
    }

    #[test]
    fn json_escaping() {
        assert_eq!(json_str("plain"), "\"plain\"");
        assert_eq!(json_str("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(json_str("\n\t\u{0}\u{1f}"), r#""\u000a\u0009\u0000\u001f""#);
        assert_eq!(json_str("é ✓ \u{7f}"), "\"é ✓ \u{7f}\"");
    }

    #[test]
    fn part_as_json_and_row() {
        let p = WindowPart {
            name: "w\"1".into(),
            rank: 3,
            size: 4096,
            versions: vec![
                Version {
                    number: 0,
                    time_ns: 0,
                },
                Version {
                    number: 2,
                    time_ns: 1_700_000_000_500_000_000,
                },
            ],
        };
        assert_eq!(
            part_json(&p),
            r#"{"name":"w\"1","rank":3,"size":4096,"versions":[{"number":0,"time_ns":0},{"number":2,"time_ns":1700000000500000000}]}"#
        );
        let row = part_row(&p);
        assert_eq!(row[4], "2");
        assert_eq!(row[5], "1970-01-01 00:00:00..2023-11-14 22:13:20");
        assert_eq!(row[6], "ok");
        let empty = WindowPart {
            versions: Vec::new(),
            ..p
        };
        assert_eq!(part_row(&empty)[4..], ["-", "-", "empty"]);
    }

    #[test]
    fn command_line() {
        Cli::command().debug_assert();
        assert!(Cli::try_parse_from(["ebpmem"]).is_err());
        assert!(Cli::try_parse_from(["ebpmem", "--root", "/r"]).is_err());
        let cli =
            Cli::try_parse_from(["ebpmem", "delete-version", "w", "7", "--root", "/r"]).unwrap();
        assert_eq!(cli.root, Some(PathBuf::from("/r")));
        assert!(matches!(
            cli.command,
            Command::DeleteVersion {
                version: 7,
                rank: None,
                ..
            }
        ));
    }
}
