//! `--hosts`: the host list, where each rank goes, and how PMI describes that.
//!
//! `--hosts a,b,c` spreads the ranks in blocks as evenly as the count allows (ranks 0..k on
//! `a`, the next on `b`, ...), so neighbours in rank order share a host. `--hosts a:2,b:4`
//! gives each host its slots in turn, as Hydra does, going round the list again when the
//! ranks outnumber the slots; `-n` may then be left out and is the sum of the slots. A name
//! given twice is one host.

/// One entry of `--hosts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostSpec {
    pub name: String,
    pub slots: Option<u32>,
}

/// Parse `a,b:2,c`.
pub(crate) fn parse(list: &str) -> Result<Vec<HostSpec>, String> {
    let mut specs = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        let (name, slots) = match item.rsplit_once(':') {
            Some((n, s)) => match s.parse::<u32>() {
                Ok(k) if k > 0 => (n, Some(k)),
                _ => {
                    return Err(format!(
                        "--hosts: {item:?} has {s:?} slots; a count of at least 1 is wanted"
                    ))
                }
            },
            None => (item, None),
        };
        if name.is_empty() || name.contains(char::is_whitespace) || name.starts_with('-') {
            return Err(format!("--hosts: {item:?} is not a host name"));
        }
        specs.push(HostSpec {
            name: name.to_string(),
            slots,
        });
    }
    Ok(specs)
}

/// The number of ranks `specs` asks for when `-n` is not given: the sum of the slots, when
/// every host has some.
pub(crate) fn slot_total(specs: &[HostSpec]) -> Option<u32> {
    specs
        .iter()
        .try_fold(0u32, |n, s| n.checked_add(s.slots?))
        .filter(|&n| n > 0)
}

/// Where the ranks of a job go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The hosts that run at least one rank, in the order of the list.
    pub hosts: Vec<String>,
    /// For each rank, its index in `hosts`.
    pub node_of: Vec<u32>,
    /// The placement repeats every `period` ranks (the slots of one round of the list).
    pub period: usize,
}

impl Placement {
    /// The ranks on host `h`.
    pub(crate) fn ranks_on(&self, h: usize) -> impl Iterator<Item = u32> + '_ {
        self.node_of
            .iter()
            .enumerate()
            .filter(move |(_, &n)| n as usize == h)
            .map(|(r, _)| r as u32)
    }
}

/// Place `n` ranks on `specs` (see the module's doc).
pub(crate) fn place(specs: &[HostSpec], n: u32) -> Placement {
    let mut names: Vec<String> = Vec::new();
    let index: Vec<usize> = specs
        .iter()
        .map(|s| match names.iter().position(|x| *x == s.name) {
            Some(i) => i,
            None => {
                names.push(s.name.clone());
                names.len() - 1
            }
        })
        .collect();
    let mut host_of: Vec<usize> = Vec::with_capacity(n as usize);
    let mut period = n as usize;
    if specs.iter().any(|s| s.slots.is_some()) {
        let round: u64 = specs.iter().map(|s| u64::from(s.slots.unwrap_or(1))).sum();
        period = period.min(round as usize);
        'fill: loop {
            for (s, &h) in specs.iter().zip(&index) {
                for _ in 0..s.slots.unwrap_or(1) {
                    if host_of.len() == n as usize {
                        break 'fill;
                    }
                    host_of.push(h);
                }
            }
        }
    } else {
        let k = names.len() as u32;
        for h in 0..k {
            let count = n / k + u32::from(h < n % k);
            host_of.extend(std::iter::repeat_n(h as usize, count as usize));
        }
    }
    // Number the hosts that got ranks, in list order.
    let mut used: Vec<usize> = Vec::new();
    for &h in &host_of {
        if !used.contains(&h) {
            used.push(h);
        }
    }
    used.sort_unstable();
    Placement {
        hosts: used.iter().map(|&h| names[h].clone()).collect(),
        node_of: host_of
            .iter()
            .map(|h| used.iter().position(|u| u == h).expect("a used host") as u32)
            .collect(),
        period,
    }
}

/// `PMI_process_mapping` for `p`: `(vector,(first,count,per),...)`, each block placing `per`
/// consecutive ranks on each of the nodes `first` .. `first + count`, the list read again
/// from the start until every rank has a node (so one period is written).
pub(crate) fn mapping(p: &Placement) -> String {
    let node_of = &p.node_of[..p.period];
    // Runs of consecutive ranks on one node, then runs of equal length on consecutive nodes.
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &n in node_of {
        match runs.last_mut() {
            Some((node, len)) if *node == n => *len += 1,
            _ => runs.push((n, 1)),
        }
    }
    let mut blocks: Vec<(u32, u32, u32)> = Vec::new();
    for (node, len) in runs {
        match blocks.last_mut() {
            Some((first, count, per)) if *per == len && *first + *count == node => *count += 1,
            _ => blocks.push((node, 1, len)),
        }
    }
    let mut s = String::from("(vector");
    for (first, count, per) in blocks {
        s.push_str(&format!(",({first},{count},{per})"));
    }
    s.push(')');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &Placement) -> Vec<&str> {
        p.hosts.iter().map(String::as_str).collect()
    }

    #[test]
    fn lists_parse_and_bad_entries_are_named() {
        let s = parse("a,b:2, c").unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].slots, Some(2));
        assert_eq!(s[2].name, "c");
        assert_eq!(slot_total(&s), None);
        assert_eq!(slot_total(&parse("a:2,b:3").unwrap()), Some(5));
        assert!(parse("a,,b").unwrap_err().contains("\"\""));
        assert!(parse("a:0").unwrap_err().contains("\"0\""));
        assert!(parse("a:x").unwrap_err().contains("\"x\""));
        assert!(parse("-n").is_err());
    }

    #[test]
    fn plain_lists_get_even_blocks() {
        let p = place(&parse("a,b,c").unwrap(), 7);
        assert_eq!(names(&p), ["a", "b", "c"]);
        assert_eq!(p.node_of, [0, 0, 0, 1, 1, 2, 2]);
        assert_eq!(p.ranks_on(1).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(mapping(&p), "(vector,(0,1,3),(1,2,2))");
        // Fewer ranks than hosts: the idle ones start nothing.
        let p = place(&parse("a,b,c").unwrap(), 2);
        assert_eq!(names(&p), ["a", "b"]);
        assert_eq!(mapping(&p), "(vector,(0,2,1))");
    }

    #[test]
    fn slots_are_filled_in_turn_and_repeated_names_are_one_host() {
        let p = place(&parse("a:2,b:1").unwrap(), 7);
        assert_eq!(p.node_of, [0, 0, 1, 0, 0, 1, 0]);
        assert_eq!(mapping(&p), "(vector,(0,1,2),(1,1,1))");
        let p = place(&parse("a,b,a").unwrap(), 4);
        assert_eq!(names(&p), ["a", "b"]);
        assert_eq!(p.node_of, [0, 0, 1, 1]);
        let p = place(&parse("x:1,y").unwrap(), 4);
        assert_eq!(p.node_of, [0, 1, 0, 1]);
        assert_eq!(mapping(&p), "(vector,(0,2,1))");
    }

    #[test]
    fn the_library_reads_every_mapping_back() {
        for (list, n) in [
            ("a,b,c", 7),
            ("a,b,c", 2),
            ("a:2,b:1", 7),
            ("a:3,b:1", 4096),
            ("x:1,y", 5),
            ("a,b,a", 4),
            ("h1:4294967295,h2", 3),
        ] {
            let p = place(&parse(list).unwrap(), n);
            let back = earlybird::launch::parse_pmi_mapping(&mapping(&p), n).unwrap();
            assert_eq!(back.as_deref(), Some(&p.node_of[..]), "{list} on {n}");
            assert!(mapping(&p).len() < 1024, "{list}: {}", mapping(&p));
        }
        assert_eq!(slot_total(&parse("a:4294967295,b:2").unwrap()), None);
    }
}
