//! The layer order of DESIGN.md, checked on the source: every path a module of the library
//! names into another (`crate::x::...`, or `super::` chains that climb to the crate root)
//! must go down the table below, or be one of the few kept edges written next to it with the
//! reason. A new top-level module fails here until it is given a layer.
//!
//! Comments and string literals are skipped (a doc link is not a dependency); `#[cfg(test)]`
//! code is not: a unit test may not reach up either.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each top-level module of `crates/earlybird/src` and its layer, bottom-up. A module may
/// name modules of its own layer or below.
const LAYERS: &[(&str, u32)] = &[
    // Base types every layer speaks: error classes, the status of a completion, info objects.
    ("error", 0),
    ("status", 0),
    ("info", 0),
    // The promises of seed 002, read by p2p, request, comm and coll alike.
    ("assertions", 0),
    ("sys", 1),
    ("fabric", 2),
    ("bootstrap", 3),
    ("datatype", 4),
    ("p2p", 5),
    ("request", 6),
    ("comm", 7),
    ("coll", 8),
    // Extensions and request kinds built on the core.
    ("channel", 9),
    ("grequest", 9),
    ("rma", 9),
    ("pmem", 9),
    // The API: the crate root (`lib.rs`) and the thread-job runner.
    ("lib", 10),
    ("threads", 10),
    ("shared", 10),
];

/// Upward edges kept on purpose: (from, to, why). Also written in DESIGN.md's layer table and
/// the README's.
const KEPT: &[(&str, &str, &str)] = &[(
    "comm",
    "coll",
    "a communicator stores its collective settings (algorithms forced by info keys, the \
     tuned choices of MPIX_COLL_EFFORT) so that every collective on it, and every dup, \
     sees one value; coll reads and fills them, comm only holds and frees them",
)];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn layer(m: &str) -> Option<u32> {
    LAYERS.iter().find(|(n, _)| *n == m).map(|&(_, l)| l)
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments, string and char literals blanked (newlines kept).
fn code_only(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !is_ident(b[i - 1]))
        {
            // A raw string r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                blank(&mut out, b[j]);
                j += 1;
            }
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' && (next == Some('\\') || b.get(i + 2) == Some(&'\'')) {
            // A char literal ('x', '\n', '\u{..}'); a lifetime has no closing quote.
            i += 1;
            while i < b.len() && b[i] != '\'' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier at the start of `s` (after spaces).
fn ident(s: &str) -> &str {
    let s = s.trim_start();
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// The top-level items named right after a path prefix: `x` for `prefix x::..`, and each
/// first segment of a `prefix {a::.., b}` group.
fn named_after(rest: &str) -> Vec<&str> {
    let rest = rest.trim_start();
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)];
    };
    let mut names = Vec::new();
    let mut depth = 0;
    let mut start = true;
    for (k, ch) in group.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            c if start && !c.is_whitespace() => {
                names.push(ident(&group[k..]));
                start = false;
            }
            _ => {}
        }
    }
    names
}

/// The top-level modules the code of a file at module path `path` names.
fn targets(code: &str, path: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes: Vec<char> = code.chars().collect();
    let text: String = bytes.iter().collect();
    for (at, _) in text.match_indices("crate::") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(is_ident) {
            continue;
        }
        for n in named_after(&text[at + "crate::".len()..]) {
            out.insert(n.to_string());
        }
    }
    // `super::` chains that climb out of this file's module path to the root.
    for (at, _) in text.match_indices("super::") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            continue;
        }
        let mut rest = &text[at..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r.trim_start();
        }
        if ups >= path.len() {
            for n in named_after(rest) {
                if layer(n).is_some() {
                    out.insert(n.to_string());
                }
            }
        }
    }
    out
}

/// Module path of a file: `p2p/engine.rs` is `[p2p, engine]`, `p2p/mod.rs` is `[p2p]`,
/// `lib.rs` is `[]` (named `lib` as a layer).
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src_dir()).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// Every (from, to, file) edge between different top-level modules.
fn edges() -> Vec<(String, String, PathBuf)> {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    assert!(files.len() > 20, "found the sources: {files:?}");
    let mut out = Vec::new();
    for f in files {
        let path = module_path(&f);
        let from = path.first().cloned().unwrap_or_else(|| "lib".to_string());
        let src = std::fs::read_to_string(&f).expect("read source");
        for to in targets(&code_only(&src), &path) {
            if to != from && to != "self" {
                out.push((from.clone(), to, f.clone()));
            }
        }
    }
    out
}

#[test]
fn no_module_depends_upward() {
    let mut bad = Vec::new();
    for (from, to, file) in edges() {
        let rel = file.strip_prefix(src_dir()).unwrap().display().to_string();
        let (Some(lf), Some(lt)) = (layer(&from), layer(&to)) else {
            // A root item of lib.rs (`crate::Universe`) counts as the API layer.
            let lt = layer(&to).unwrap_or(10);
            match layer(&from) {
                None => bad.push(format!("{rel}: module {from:?} has no layer in LAYERS")),
                Some(lf) if lt > lf => {
                    bad.push(format!("{rel}: {from} (layer {lf}) names crate::{to}, a root item of the API (layer 10)"))
                }
                Some(_) => {}
            }
            continue;
        };
        if lt > lf && !KEPT.iter().any(|(a, b, _)| *a == from && *b == to) {
            bad.push(format!(
                "{rel}: {from} (layer {lf}) depends on {to} (layer {lt})"
            ));
        }
    }
    assert!(bad.is_empty(), "upward edges:\n{}", bad.join("\n"));
}

#[test]
fn every_kept_edge_is_still_needed() {
    let all = edges();
    for (from, to, why) in KEPT {
        assert!(
            all.iter().any(|(a, b, _)| a == from && b == to),
            "the kept edge {from} -> {to} ({why}) is gone: remove it from KEPT and DESIGN.md"
        );
    }
}

/// The checker itself: comments and strings are not edges, paths and groups are.
#[test]
fn the_checker_reads_paths() {
    let code = code_only(
        "use crate::p2p::x; // crate::coll\n/* crate::comm */ let s = \"crate::sys\";\n\
         let c = '\"'; use crate::{error::E, fabric};\nfn f<'a>(x: &'a crate::datatype::T) {}\n\
         use super::super::request::R;",
    );
    let t = targets(&code, &["coll".to_string(), "api".to_string()]);
    let want: BTreeSet<String> = ["p2p", "error", "fabric", "datatype", "request"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(t, want);
}
