#!/usr/bin/env bash
# Set up smroute on a fresh machine: Debian packages (real InfiniBand tools),
# a virtual environment in .venv, and the package with its test extra.
# Idempotent: re-running installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PKGS=(opensm ibsim-utils infiniband-diags ibutils python3-pyverbs rdma-core graphviz slurmctld fish)
missing=()
for p in "${DEB_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}" >&2
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv" >&2
    "$PY" -m venv .venv
fi
stamp=.venv/.smroute-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "setup: installing smroute into .venv" >&2
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e '.[test]'
    touch "$stamp"
fi

# The compiled validation walk, routing kernel and Nmodc steps
# (smroute/routing/native/*.c, loaded by smroute/routing/walk_native.py,
# kernel_native.py and nmodc/native.py): each rebuilt when its source is
# newer.  Without a C compiler, or if a build fails, the numpy code runs (the
# same results).
if cc=$(command -v cc || command -v gcc); then
    for spec in walk:walk kernel:route nmodc:nmodc; do
        dir=${spec%%:*} src=smroute/routing/native/${spec#*:}.c
        lib=build/$dir/libsmroute_$dir.so
        if [ ! -f "$lib" ] || [ "$src" -nt "$lib" ]; then
            mkdir -p "build/$dir"
            if "$cc" -O3 -shared -fPIC -o "$lib.tmp" "$src"; then
                mv "$lib.tmp" "$lib"
            else
                echo "setup: the compiled $dir was not built (the numpy $dir runs)" >&2
            fi
        fi
    done
fi

# The OpenSM routing-engine plugin (opensm-plugin/, libsmroute.so): when OpenSM
# is installed, its build dependencies from Debian, then the library in
# build/opensm-plugin (make: nothing to do when it is up to date).  A failed
# build is reported, not fatal: tests/test_opensm_plugin.py then skips.
if command -v opensm >/dev/null 2>&1; then
    PLUGIN_PKGS=(libopensm-dev libibumad-dev g++ make pkg-config libgrpc++-dev libprotobuf-dev
                 protobuf-compiler protobuf-compiler-grpc)
    missing=()
    for p in "${PLUGIN_PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        echo "setup: installing the OpenSM plugin's build packages: ${missing[*]}" >&2
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if ! out=$(make -s -C opensm-plugin BUILD="$PWD/build/opensm-plugin" all check-version 2>&1); then
        echo "setup: the OpenSM plugin was not built (tests/test_opensm_plugin.py will skip):" >&2
        echo "$out" | tail -20 >&2
    fi
fi
