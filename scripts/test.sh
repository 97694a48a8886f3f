#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite, lint and type checks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/python scripts/gen_proto.py --check 2>/dev/null || { [ ! -f scripts/gen_proto.py ] || { echo "generated protobuf code is stale: run scripts/gen_proto.py" >&2; exit 1; }; }
.venv/bin/ruff check smroute tests bench scripts
.venv/bin/mypy smroute
.venv/bin/python -m pytest -q "$@"
