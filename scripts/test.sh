#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite, lint and type checks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ -f scripts/gen_proto.py ]; then .venv/bin/python scripts/gen_proto.py --check; fi
.venv/bin/ruff check smroute tests bench scripts research
.venv/bin/mypy smroute
# The docs site: a broken link, anchor or include fails the build.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir build/site
.venv/bin/python -m pytest -q "$@"
