//! `earlybird-install PREFIX`: installs earlybird's C interface into PREFIX, from the build
//! this program belongs to (run it as `target/release/earlybird-install` after
//! `cargo build --release --workspace`):
//!
//! - `lib/libmpi.so.12`, with the names `libmpi.so`, `libmpich.so.12` and `libmpich.so`;
//! - `include/mpi.h` (made from `api/mpi.api` by build.rs) and `include/mpi-ext.h` (the
//!   seeds' MPIX_ calls, from `api/mpi-ext.api`);
//! - `bin/mpicc` and `bin/mpicxx`, wrappers of the system's C and C++ compilers (`cc`, `c++`,
//!   or `$EARLYBIRD_CC` / `$EARLYBIRD_CXX`) that add the header, the library and its rpath
//!   (and for C, `-Werror=implicit-function-declaration`: the header declares only the calls
//!   earlybird implements, so a call it lacks fails to compile, as configure probes expect);
//! - `bin/ebrun`, with the names `mpiexec` and `mpirun`, when it was built beside this program.
//!
//! Programs built with this `mpicc` find the library through the rpath; programs built against
//! MPICH find it by `LD_LIBRARY_PATH=PREFIX/lib`.

#![forbid(unsafe_code)]

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

const HEADER: &str = include_str!(concat!(env!("OUT_DIR"), "/mpi.h"));
const EXT_HEADER: &str = include_str!(concat!(env!("OUT_DIR"), "/mpi-ext.h"));

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, prefix] = args.as_slice() else {
        eprintln!("usage: earlybird-install PREFIX");
        std::process::exit(2);
    };
    if let Err(e) = install(Path::new(prefix)) {
        eprintln!("earlybird-install: {e}");
        std::process::exit(1);
    }
}

/// The newest of the files that exist among `candidates`.
fn newest(candidates: &[PathBuf]) -> Option<PathBuf> {
    candidates
        .iter()
        .filter_map(|p| {
            let t = std::fs::metadata(p).and_then(|m| m.modified()).ok()?;
            Some((t, p))
        })
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p.clone())
}

fn link(target: &str, name: &Path) -> std::io::Result<()> {
    let _ = std::fs::remove_file(name);
    symlink(target, name)
}

fn write_exe(path: &Path, text: &str) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

/// A compiler wrapper: the header and, when the command links, the library with its rpath.
/// `extra` goes with the header's flags (for C: a call the header does not declare, one
/// earlybird lacks, is an error, as C99 and C++ make it, not a guess that links).
fn wrapper(prefix: &Path, var: &str, default: &str, extra: &str) -> String {
    let p = prefix.display();
    format!(
        r#"#!/bin/sh
# earlybird's compiler wrapper, made by earlybird-install.
prefix='{p}'
compiler="${{{var}:-{default}}}"
flags="-I$prefix/include{extra}"
libs="-L$prefix/lib -Wl,-rpath,$prefix/lib -lmpi"
link=yes
for a in "$@"; do
    case "$a" in
        -show|-showme) echo "$compiler $flags $libs"; exit 0 ;;
        -compile-info|-showme:compile) echo "$compiler $flags"; exit 0 ;;
        -link-info|-showme:link) echo "$compiler $libs"; exit 0 ;;
        -c|-E|-S|-M|-MM) link=no ;;
    esac
done
if [ "$link" = yes ]; then
    exec $compiler $flags "$@" $libs
else
    exec $compiler $flags "$@"
fi
"#
    )
}

fn install(prefix: &Path) -> Result<(), String> {
    let io = |what: &str| {
        let what = what.to_string();
        move |e: std::io::Error| format!("{what}: {e}")
    };
    let here = std::env::current_exe().map_err(io("this program's path"))?;
    let dir = here.parent().ok_or("this program has no directory")?;
    let lib =
        newest(&[dir.join("libmpi.so"), dir.join("deps").join("libmpi.so")]).ok_or_else(|| {
            format!(
                "no libmpi.so beside {}: build the workspace first",
                here.display()
            )
        })?;
    let prefix = if prefix.is_absolute() {
        prefix.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(io("current directory"))?
            .join(prefix)
    };
    for sub in ["lib", "include", "bin"] {
        std::fs::create_dir_all(prefix.join(sub))
            .map_err(io(&format!("{}/{sub}", prefix.display())))?;
    }
    let so = prefix.join("lib/libmpi.so.12");
    let _ = std::fs::remove_file(&so);
    std::fs::copy(&lib, &so).map_err(io(&format!("{} to {}", lib.display(), so.display())))?;
    for name in ["libmpi.so", "libmpich.so.12", "libmpich.so"] {
        link("libmpi.so.12", &prefix.join("lib").join(name)).map_err(io(name))?;
    }
    std::fs::write(prefix.join("include/mpi.h"), HEADER).map_err(io("include/mpi.h"))?;
    std::fs::write(prefix.join("include/mpi-ext.h"), EXT_HEADER)
        .map_err(io("include/mpi-ext.h"))?;
    write_exe(
        &prefix.join("bin/mpicc"),
        &wrapper(
            &prefix,
            "EARLYBIRD_CC",
            "cc",
            " -Werror=implicit-function-declaration",
        ),
    )
    .map_err(io("bin/mpicc"))?;
    write_exe(
        &prefix.join("bin/mpicxx"),
        &wrapper(&prefix, "EARLYBIRD_CXX", "c++", ""),
    )
    .map_err(io("bin/mpicxx"))?;
    let ebrun = dir.join("ebrun");
    if ebrun.exists() {
        let to = prefix.join("bin/ebrun");
        let _ = std::fs::remove_file(&to);
        std::fs::copy(&ebrun, &to).map_err(io("bin/ebrun"))?;
        for name in ["mpiexec", "mpirun"] {
            link("ebrun", &prefix.join("bin").join(name)).map_err(io(name))?;
        }
    } else {
        eprintln!("earlybird-install: no ebrun beside this program; bin/ebrun not installed");
    }
    println!("earlybird installed in {}", prefix.display());
    Ok(())
}
