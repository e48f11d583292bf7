//! Two jobs:
//!
//! 1. The shared library answers to MPICH's soname, so that binaries linked against MPICH
//!    (`NEEDED libmpi.so.12` or Debian's `libmpich.so.12`) load it.
//! 2. Everything of the C interface that is a fact rather than code is made from one
//!    description, `api/mpi.api` (its head explains the lines): `mpi.h`; the ABI's constants
//!    for the Rust side (`abi::c`); the entry points of the calls earlybird does not
//!    implement; and, for each call it implements, a compile-time check that the Rust
//!    function takes the parameters the description gives (int, 64-bit integer, pointer or
//!    double, in order) and returns what it says.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// The calling-convention class of a C type: what the check compares.
fn class_of(ty: &str, types: &HashMap<String, &'static str>) -> &'static str {
    let ty = ty.trim();
    if ty == "..." {
        return "Var";
    }
    if ty.contains('*') || ty.contains('[') {
        return "Ptr";
    }
    let base = ty
        .trim_start_matches("const ")
        .split_whitespace()
        .next()
        .unwrap_or("");
    match base {
        "int" => "Int",
        "long" => "Long",
        "double" => "Double",
        "void" => "Void",
        t => types
            .get(t)
            .copied()
            .unwrap_or_else(|| panic!("api/mpi.api: unknown type {t}")),
    }
}

/// `RET NAME(PARAMS)` as (return type, name, parameters).
fn prototype(s: &str) -> (String, String, Vec<String>) {
    let open = s.find('(').expect("prototype has (");
    let close = s.rfind(')').expect("prototype has )");
    let (ret, name) = s[..open]
        .trim()
        .rsplit_once(' ')
        .expect("prototype has a return type");
    let params: Vec<String> = s[open + 1..close]
        .split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty() && p != "void")
        .collect();
    (ret.trim().to_string(), name.to_string(), params)
}

/// The type part of a parameter (its name dropped, array brackets kept as a pointer).
fn param_type(p: &str) -> String {
    if p == "..." {
        return p.to_string();
    }
    let arrays = p.matches('[').count();
    let p = p.split('[').next().unwrap_or(p).trim();
    let cut = p
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let mut t = p[..cut].trim().to_string();
    for _ in 0..arrays {
        t.push('*');
    }
    t
}

/// A value of the description as a Rust `i32` expression.
fn rust_int(v: &str) -> String {
    match v.strip_prefix("0x") {
        Some(hex) => format!("0x{hex}_u32 as i32"),
        None => v.to_string(),
    }
}

/// The Rust type a parameter of `class` is passed as in a generated wrapper (pointers as
/// `*mut c_void`: the wrapper only hands them on).
fn rust_type(class: &str) -> &'static str {
    match class {
        "Int" => "c_int",
        "Long" => "i64",
        "Double" => "f64",
        _ => "*mut c_void",
    }
}

/// The wrappers of the large-count calls marked `narrow`: each converts its `MPI_Count`
/// arguments to the `int` of the call without `_c` (MPI_ERR_COUNT, naming the value, when
/// one does not fit), hands the others on, and widens an `int` it gets back through an
/// `MPI_Count *`. Only these differences are allowed; anything else is a build error.
fn narrowing(
    narrowed: &[(String, Vec<String>)],
    sigs: &HashMap<String, Vec<String>>,
    types: &HashMap<String, &'static str>,
) -> String {
    let mut out = String::new();
    for (name, params) in narrowed {
        let base = name
            .strip_suffix("_c")
            .unwrap_or_else(|| panic!("{name}: narrow is for _c calls"));
        let bparams = sigs
            .get(base)
            .unwrap_or_else(|| panic!("{name}: {base} is not implemented"));
        assert_eq!(
            params.len(),
            bparams.len(),
            "{name}: not the parameters of {base}"
        );
        let (mut args, mut pre, mut call, mut post, mut ftypes) =
            (vec![], vec![], vec![], vec![], vec![]);
        // The buffer counts: an `MPI_Count` that the call without `_c` takes as an `int`,
        // followed by the buffer's datatype.
        let typed: Vec<usize> = (0..params.len().saturating_sub(1))
            .filter(|&i| {
                param_type(&params[i]).replace(' ', "") == "MPI_Count"
                    && param_type(&params[i + 1]).replace(' ', "") == "MPI_Datatype"
            })
            .collect();
        let mut widened_dt = None;
        for (i, (p, b)) in params.iter().zip(bparams).enumerate() {
            let (t, bt) = (
                param_type(p).replace(' ', ""),
                param_type(b).replace(' ', ""),
            );
            let (c, bc) = (class_of(&t, types), class_of(&bt, types));
            let arg = format!("a{i}");
            args.push(format!("{arg}: {}", rust_type(c)));
            ftypes.push(rust_type(bc));
            if t == bt
                || (c == bc
                    && (c == "Long"
                        || t.ends_with('*')
                            && [
                                "MPI_Count*",
                                "MPI_Aint*",
                                "constMPI_Count*",
                                "constMPI_Aint*",
                            ]
                            .contains(&t.as_str())
                            && [
                                "MPI_Count*",
                                "MPI_Aint*",
                                "constMPI_Count*",
                                "constMPI_Aint*",
                            ]
                            .contains(&bt.as_str())))
            {
                if widened_dt == Some(i) {
                    // The datatype of a widened count: the one made for it.
                    call.push(format!("w{}.dt", i - 1));
                } else {
                    call.push(arg);
                }
            } else if t == "MPI_Count" && bt == "int" && typed.contains(&i) {
                // A buffer's count, its datatype next: beyond INT_MAX, one element of a
                // contiguous datatype of that many (see `large_count::widened`).
                let d = format!("a{}", i + 1);
                pre.push(format!("let w{i} = match widened(\"{name}\", {arg}, {d}) {{ Ok(w) => w, Err(rc) => return rc }};"));
                call.push(format!("w{i}.count"));
                widened_dt = Some(i + 1);
            } else if t == "MPI_Count" && bt == "int" {
                pre.push(format!("let {arg} = match c_int::try_from({arg}) {{ Ok(v) => v, Err(_) => return large_count(\"{name}\", {arg}) }};"));
                call.push(arg);
            } else if t == "MPI_Count*" && bt == "int*" {
                // An out count, or MPI_Pack's in-out position (read first, then narrowed).
                if p.ends_with(" position") || p.ends_with("*position") {
                    pre.push(format!(
                        "let mut n{i}: c_int = 0;\n    if !{arg}.is_null() {{\n        \
                         // SAFETY: the caller's position, an MPI_Count to read (MPI's contract).\n        \
                         let v = unsafe {{ {arg}.cast::<i64>().read() }};\n        \
                         n{i} = match c_int::try_from(v) {{ Ok(v) => v, Err(_) => return large_count(\"{name}\", v) }};\n    }}"
                    ));
                } else {
                    pre.push(format!("let mut n{i}: c_int = 0;"));
                }
                call.push(format!(
                    "if {arg}.is_null() {{ {arg} }} else {{ (&raw mut n{i}).cast() }}"
                ));
                post.push(format!("if rc == MPI_SUCCESS && !{arg}.is_null() {{ {arg}.cast::<i64>().write(i64::from(n{i})); }}"));
            } else {
                panic!("{name}: parameter {i} is {t} where {base} has {bt}: not narrowable");
            }
        }
        let _ = writeln!(
            out,
            "/// {name}: [`P{base}`] on counts that fit in an `int`.\n\
             #[no_mangle]\n\
             pub unsafe extern \"C\" fn P{name}({args}) -> c_int {{\n    \
             let _entry = crate::state::enter_through();\n    {pre}\n    \
             // SAFETY: P{base} takes these parameters in these classes (the signature check\n    \
             // proves it), so this is its own type with the pointers named alike.\n    \
             let f: unsafe extern \"C\" fn({ftypes}) -> c_int = unsafe {{ std::mem::transmute(P{base} as *const ()) }};\n    \
             // SAFETY: the caller's contract is {base}'s, as MPI defines it.\n    \
             let rc = unsafe {{ f({call}) }};\n    \
             {post}\n    rc\n}}\n\n\
             /// {name}.\n\
             #[no_mangle]\n\
             pub unsafe extern \"C\" fn {name}({args}) -> c_int {{\n    \
             // SAFETY: the same arguments, under the same contract.\n    \
             unsafe {{ P{name}({names}) }}\n}}\n",
            args = args.join(", "),
            pre = pre.join("\n    "),
            ftypes = ftypes.join(", "),
            call = call.join(", "),
            post = if post.is_empty() {
                String::new()
            } else {
                format!("// SAFETY: a count to write where the caller asked for one.\n    unsafe {{ {} }}", post.join(" "))
            },
            names = (0..params.len()).map(|i| format!("a{i}")).collect::<Vec<_>>().join(", "),
        );
    }
    out
}

struct Missing {
    why: &'static str,
    how: &'static str,
    names: Vec<String>,
}

/// What the descriptions make, gathered over every file read.
struct Gen {
    types: HashMap<String, &'static str>,
    rust_types: HashMap<String, &'static str>,
    consts: String,
    checks: String,
    /// The calls implemented in Rust, with their parameters; and the large-count calls made
    /// by narrowing to them.
    sigs: HashMap<String, Vec<String>>,
    narrowed: Vec<(String, Vec<String>)>,
    missing: [Missing; 4],
}

/// Read one description (`file`, its `text`) into `g`, writing its declarations into `h`.
fn describe(text: &str, file: &str, g: &mut Gen, h: &mut String) {
    for (no, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix("# ---- ") {
            let _ = write!(h, "\n/* {c} */\n");
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        let words: Vec<&str> = rest.split_whitespace().collect();
        match kind {
            "type" => {
                let (name, ty) = (words[0], words[1..].join(" "));
                if let Some(class) = ["int", "long"].iter().position(|t| *t == ty) {
                    g.types.insert(name.to_string(), ["Int", "Long"][class]);
                    g.rust_types.insert(name.to_string(), ["i32", "i64"][class]);
                }
                let _ = writeln!(h, "typedef {ty} {name};");
            }
            "value16" => {
                // A 16-byte value of the library's, passed by value in two integer registers
                // (the class `Pair`); C sees four ints it should not look into.
                g.types.insert(words[0].to_string(), "Pair");
                let _ = writeln!(h, "typedef struct {0} {{ int eb_word[4]; }} {0};", words[0]);
            }
            "opaque" => {
                g.types.insert(words[0].to_string(), "Ptr");
                let _ = writeln!(h, "typedef struct {0}_opaque *{0};", words[0]);
            }
            "struct" => {
                let _ = writeln!(h, "typedef struct {} {{", words[0]);
                for f in &words[1..] {
                    let _ = writeln!(h, "    int {f};");
                }
                let _ = writeln!(h, "}} {};", words[0]);
            }
            "callback" => {
                let (ret, name, params) = prototype(rest);
                let _ = writeln!(h, "typedef {ret} ({name})({});", params.join(", "));
            }
            "const" => {
                let n = words.len();
                let (ty, name, value) = (words[..n - 2].join(" "), words[n - 2], words[n - 1]);
                if ty == "int" {
                    let _ = writeln!(h, "#define {name} ({value})");
                } else {
                    let _ = writeln!(h, "#define {name} (({ty}){value})");
                }
                if ty == "int" || g.rust_types.get(&ty) == Some(&"i32") {
                    g.rust_types.insert(name.to_string(), "i32");
                    let _ = writeln!(
                        g.consts,
                        "pub(crate) const {name}: i32 = {};",
                        rust_int(value)
                    );
                } else if ty.contains('*') {
                    g.rust_types.insert(name.to_string(), "usize");
                    let _ = writeln!(
                        g.consts,
                        "pub(crate) const {name}: usize = ({value}_isize) as usize;"
                    );
                }
            }
            "alias" => {
                let (name, other) = (words[0], words[1]);
                let _ = writeln!(h, "#define {name} {other}");
                if let Some(&t) = g.rust_types.get(other) {
                    g.rust_types.insert(name.to_string(), t);
                    let _ = writeln!(g.consts, "pub(crate) const {name}: {t} = {other};");
                }
            }
            "macro" => {
                let _ = writeln!(h, "#define {rest}");
            }
            "extern" => {
                let _ = writeln!(h, "extern {rest};");
            }
            "fn" => {
                let (status, proto) = (words[0], rest[words[0].len()..].trim());
                let (ret, name, params) = prototype(proto);
                // MPI_X has PMPI_X, and an extension MPIX_X has PMPIX_X.
                let pname = ["MPI_", "MPIX_"]
                    .iter()
                    .find(|p| name.starts_with(*p))
                    .map(|_| format!("P{name}"));
                let names: Vec<&str> = std::iter::once(name.as_str())
                    .chain(pname.as_deref())
                    .collect();
                if status == "macro" {
                    assert_eq!(
                        params.len(),
                        1,
                        "{file} line {}: a macro call takes one handle",
                        no + 1
                    );
                    let arg = params[0].rsplit(' ').next().unwrap_or("x");
                    for n in &names {
                        let _ = writeln!(h, "#define {n}({arg}) (({ret})({arg}))");
                    }
                    continue;
                }
                // A call earlybird lacks is declared only on request: the library has its
                // entry point (binaries built elsewhere link), but a program or a configure
                // probe compiled against this header sees that the call is not there.
                let absent = !matches!(status, "impl" | "narrow");
                if absent {
                    h.push_str("#ifdef EARLYBIRD_DECLARE_MISSING\n");
                }
                for n in &names {
                    let _ = writeln!(
                        h,
                        "{ret} {n}({});",
                        if params.is_empty() {
                            "void".to_string()
                        } else {
                            params.join(", ")
                        }
                    );
                }
                if absent {
                    h.push_str("#endif\n");
                }
                if status == "narrow" {
                    g.narrowed.push((name.clone(), params.clone()));
                    continue;
                }
                if status == "impl" {
                    g.sigs.insert(name.clone(), params.clone());
                    // A variadic call's fixed parameters are checked; what follows `...` is
                    // the caller's (the Rust side reads none of it).
                    let classes: Vec<&str> = params
                        .iter()
                        .filter(|p| p.as_str() != "...")
                        .map(|p| class_of(&param_type(p), &g.types))
                        .collect();
                    let blanks = vec!["_"; classes.len()].join(", ");
                    for n in &names {
                        let _ = writeln!(
                            g.checks,
                            "const _: () = check::<_, ({}), {}>({n} as unsafe extern \"C\" fn({blanks}) -> _);",
                            classes.iter().map(|c| format!("{c},")).collect::<String>(),
                            class_of(&ret, &g.types),
                        );
                    }
                    continue;
                }
                assert_eq!(
                    ret,
                    "int",
                    "{file} line {}: {name} returns {ret}: it must be implemented",
                    no + 1
                );
                let m = g
                    .missing
                    .iter_mut()
                    .find(|m| m.why == status)
                    .unwrap_or_else(|| panic!("{file} line {}: unknown status {status}", no + 1));
                m.names.push(name);
            }
            k => panic!("{file} line {}: unknown kind {k}", no + 1),
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=api/mpi.api");
    println!("cargo:rerun-if-changed=api/mpi-ext.api");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let missing = |why, how| Missing {
        why,
        how,
        names: vec![],
    };
    let mut g = Gen {
        types: HashMap::new(),
        rust_types: HashMap::new(),
        consts: String::new(),
        checks: String::new(),
        sigs: HashMap::new(),
        narrowed: Vec::new(),
        missing: [
            missing("io", "file_call(\"MPI-IO\")"),
            missing("dpm", "raised(\"dynamic process management\")"),
            missing("session", "raised(\"the sessions model\")"),
            missing("later", "raised(\"this call\")"),
        ],
    };

    let mut h = String::from(
        "/* mpi.h: earlybird's C interface, with MPICH's ABI (handles are ints with MPICH 4's\n \
         * values, MPICH's MPI_Status), so that programs built with it run on earlybird's\n \
         * libmpi.so.12 and programs built against MPICH do too.\n \
         * Made by crates/earlybird-capi/build.rs from api/mpi.api: edit that, not this. */\n\
         #ifndef MPI_INCLUDED\n#define MPI_INCLUDED\n\n#define EARLYBIRD 1\n\n\
         #if defined(__cplusplus)\nextern \"C\" {\n#endif\n",
    );
    let text = std::fs::read_to_string("api/mpi.api").expect("api/mpi.api");
    describe(&text, "api/mpi.api", &mut g, &mut h);
    h.push_str("\n#if defined(__cplusplus)\n}\n#endif\n#endif\n");

    // The seeds' calls, under MPICH's and Open MPI's prefix for extensions.
    let mut ext = String::from(
        "/* mpi-ext.h: earlybird's extensions to MPI, the calls of the MPI Forum proposals it\n \
         * implements (seed 000: bound channels, K-slack channels and bundles; seed 001: sync\n \
         * counters), under the MPIX_\n \
         * prefix MPICH and Open MPI give their extensions (PMPIX_ names for tools too).\n \
         * Made by crates/earlybird-capi/build.rs from api/mpi-ext.api: edit that, not this. */\n\
         #ifndef MPI_EXT_INCLUDED\n#define MPI_EXT_INCLUDED\n\n#include <mpi.h>\n\n\
         #define EARLYBIRD_EXT 1\n\n\
         #if defined(__cplusplus)\nextern \"C\" {\n#endif\n",
    );
    let text = std::fs::read_to_string("api/mpi-ext.api").expect("api/mpi-ext.api");
    describe(&text, "api/mpi-ext.api", &mut g, &mut ext);
    ext.push_str("\n#if defined(__cplusplus)\n}\n#endif\n#endif\n");

    let mut stubs = String::new();
    for m in &g.missing {
        let _ = writeln!(stubs, "unsupported! {{ {}:", m.how);
        for n in &m.names {
            let _ = writeln!(stubs, "    {n} / P{n},");
        }
        stubs.push_str("}\n");
    }
    let narrow = narrowing(&g.narrowed, &g.sigs, &g.types);
    let mut list = String::new();
    for m in &g.missing {
        for n in &m.names {
            let _ = writeln!(list, "{} {n}", m.why);
        }
    }
    for (file, body) in [
        ("mpi.h", &h),
        ("mpi-ext.h", &ext),
        ("consts.rs", &g.consts),
        ("checks.rs", &g.checks),
        ("stubs.rs", &stubs),
        ("missing.txt", &list),
        ("narrow.rs", &narrow),
    ] {
        std::fs::write(out.join(file), body).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}
