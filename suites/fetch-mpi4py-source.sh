#!/usr/bin/env bash
# Fetch mpi4py 4.1.2's source distribution from PyPI (its test suite is in it, not in the
# wheels) into target/suites/mpi4py-4.1.2, once. Prints that directory.
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.1.2
src=$PWD/target/suites/mpi4py-$version
if [ ! -d "$src/test" ]; then
    mkdir -p target/suites
    url=$(python3 -c "
import json, urllib.request
d = json.load(urllib.request.urlopen('https://pypi.org/pypi/mpi4py/json', timeout=60))
print(next(u['url'] for u in d['releases']['$version'] if u['packagetype'] == 'sdist'))")
    curl -sSL "$url" | tar -C target/suites -xz
fi
echo "$src"
