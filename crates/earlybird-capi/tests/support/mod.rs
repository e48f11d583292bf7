//! What the C ABI's test programs share: the repository, and earlybird installed by its own
//! installer (from this build) into a prefix.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
#[allow(dead_code)] // not every test file needs it
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// earlybird installed into `prefix` by `earlybird-install` (the library under its four
/// names, `mpi.h`, `mpi-ext.h`, `mpicc`, and `ebrun` as `mpiexec`); `prefix` again.
pub(crate) fn install(prefix: &Path) -> PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_earlybird-install"))
        .arg(prefix)
        .output()
        .expect("earlybird-install runs");
    assert!(
        out.status.success() && prefix.join("bin/mpiexec").exists(),
        "earlybird-install {}: {}",
        prefix.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    prefix.to_path_buf()
}
