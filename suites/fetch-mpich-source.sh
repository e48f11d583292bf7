#!/usr/bin/env bash
# Fetch MPICH 4.0.2's source (Debian's source package) and unpack its test suite, test/mpi,
# into $1 (default: target/suites/mpich). Adds a deb-src entry for Debian's main archive if
# apt has none. Prints the test suite's directory.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-target/suites/mpich}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
if [ ! -x "$dest/mpich-4.0.2/test/mpi/configure" ]; then
    if ! ls "$dest"/mpich_4.0.2.orig.tar.* >/dev/null 2>&1; then
        if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
            cat > /etc/apt/sources.list.d/earlybird-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
        fi
        apt-get update -qq >&2
        (cd "$dest" && apt-get source --download-only -qq mpich >&2)
    fi
    tar -C "$dest" -xf "$dest"/mpich_4.0.2.orig.tar.* mpich-4.0.2/test/mpi mpich-4.0.2/confdb 2>/dev/null \
        || tar -C "$dest" -xf "$dest"/mpich_4.0.2.orig.tar.*
fi
echo "$dest/mpich-4.0.2/test/mpi"
