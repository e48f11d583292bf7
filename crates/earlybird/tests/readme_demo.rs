//! The README's demo command, as a newcomer runs it: the test reads the command from the first
//! code block of `README.md` (so the README cannot drift from what is tested), runs it with
//! the binaries of this build, and checks what the demo reports. The demo (`examples/ring`)
//! also runs on 1, 2 and 3 ranks.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The README at the root of the workspace.
fn readme() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// The demo command of the README: the first line of its first ```sh block is
/// `<build> && <demo>   # comment`; the words of `<demo>`.
fn demo_command(readme: &str) -> Vec<String> {
    let block = readme
        .split("```sh\n")
        .nth(1)
        .expect("README has a ```sh block");
    let first = block.lines().next().expect("the block has a first line");
    let cmd = first.split('#').next().unwrap_or_default();
    let (build, demo) = cmd
        .split_once("&&")
        .unwrap_or_else(|| panic!("first README line is `build && demo`: {first:?}"));
    assert!(
        build.trim().starts_with("cargo build"),
        "the README builds before it runs: {first:?}"
    );
    demo.split_whitespace().map(str::to_string).collect()
}

/// `target/release/<x>` in the README names the binaries this test was built with.
fn this_build(word: &str) -> String {
    let dir: PathBuf = ebrun_path().parent().expect("profile dir").to_path_buf();
    match word.strip_prefix("target/release/") {
        Some(rest) => dir.join(rest).to_string_lossy().into_owned(),
        None => word.to_string(),
    }
}

fn run(words: &[String]) -> JobOutput {
    let before = shm_entries();
    let mut cmd = Command::new(this_build(&words[0]));
    cmd.args(words[1..].iter().map(|w| this_build(w)));
    let out = run_bounded(cmd, &format!("the README demo {words:?}"));
    assert_no_new_shm(&before, &out);
    out
}

/// What the ring demo prints on `n` ranks when it worked.
fn check_ring_output(out: &JobOutput, n: u32) {
    assert!(out.status.success(), "{}", out.dump());
    let token = n as u64 * (n as u64 - 1) / 2;
    let want = [
        format!("ring: token went round {n} ranks and came back as {token} (expected {token})"),
        format!("heat: {} cells on {n} ranks, 500 steps", 1000 * n),
    ];
    for w in &want {
        assert!(
            out.stdout.contains(w.as_str()),
            "lacks {w:?}\n{}",
            out.dump()
        );
    }
    assert!(
        out.stdout
            .contains("matches the serial run bit for bit: true"),
        "{}",
        out.dump()
    );
}

#[test]
fn readme_demo_command_runs() {
    let words = demo_command(&readme());
    assert_eq!(
        words.first().map(String::as_str),
        Some("target/release/ebrun"),
        "the demo runs under ebrun: {words:?}"
    );
    let n: u32 = words
        .iter()
        .position(|w| w == "-n")
        .and_then(|i| words.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("the demo says how many ranks (-n N): {words:?}"));
    assert!(
        words.last().is_some_and(|w| w.ends_with("examples/ring")),
        "the demo is examples/ring: {words:?}"
    );
    check_ring_output(&run(&words), n);
}

#[test]
fn ring_demo_on_1_2_3_ranks() {
    for n in 1..=3 {
        let out = run_example("ring", n, &[]);
        check_ring_output(&out, n);
    }
}
