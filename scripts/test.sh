#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite, lint and type checks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ -f scripts/gen_proto.py ]; then .venv/bin/python scripts/gen_proto.py --check; fi
.venv/bin/ruff check smroute tests bench scripts research
.venv/bin/mypy smroute
.venv/bin/python -m pytest -q "$@"
