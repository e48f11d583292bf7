//! The shared library answers to MPICH's soname, so that binaries linked against MPICH
//! (`NEEDED libmpi.so.12` or Debian's `libmpich.so.12`) load it.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi.so.12");
}
