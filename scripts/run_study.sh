#!/usr/bin/env bash
# Reproduce the degradation study of the docs (docs/study/, docs/study.md).
#
# Two fabrics, switch and link degradation, every engine (Dmodc, Nmodc with
# detours over VLS virtual lanes, OpenSM's ftree, updn, dnup, minhop, dfsssp,
# sssp, nue and lash under ibsim), seed 2026:
#   * PGFT(2;18,36;1,18;1,1): 648 hosts, 54 switches   (THROWS_648 per mode)
#   * PGFT(3;12,12,12;1,12,12;1,1,1): 1,728 hosts, 432 switches (THROWS_1728 per mode)
# Resumable: throws already complete in docs/study/<fabric>/study.csv are skipped,
# so rerunning after a crash or with more throws only computes what is missing;
# a throw that lacks some engines (an engine added) runs those alone
# beside its cached rows once Dmodc reproduces its cached row (else it
# runs again in full on the next run).  Failed OpenSM rows are kept
# (--keep-failed): OpenSM's fallbacks are deterministic.
# ORDERS_PRECISE=N then reruns, with N random orders, the throws of the bands
# where the reference engine's random-order HSD comparison with a rival is
# unresolved (standard error unknown or not below the mean difference),
# resumable too: first ORDERS_PRECISE=20 (the study's orders, measures their
# error), then e.g. ORDERS_PRECISE=1000 for what is still unresolved;
# PRECISE_BANDS limits it to some removal bands (e.g. 0,1-3,4-15).
# Runs niced with a 2-process pool (WORKERS); a Dask cluster can be used with
# SCHEDULER=tcp://host:port.
#
#   scripts/run_study.sh                 # both fabrics
#   scripts/run_study.sh 648             # one of them
# Then docs/study/report.md is regenerated from the CSVs (when OUT is docs/study).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
SEED=${SEED:-2026}
WORKERS=${WORKERS:-2}
THROWS_648=${THROWS_648:-100}
THROWS_1728=${THROWS_1728:-60}
VLS=${VLS:-4}
ORDERS=${ORDERS:-20}  # random node orders the random-order HSD is averaged over
OUT=${OUT:-docs/study}
RERUN=${RERUN:-}   # e.g. RERUN=nmodc: drop nmodc's rows first (after changing it)
ENGINES=${ENGINES:-dmodc,nmodc,ftree,updn,dnup,minhop,dfsssp,sssp,nue,lash}
SCRATCH=${SCRATCH:-/tmp/smroute-study-work}
ORDERS_PRECISE=${ORDERS_PRECISE:-0}
PRECISE_BANDS=${PRECISE_BANDS:-}
REFERENCE=${REFERENCE:-}  # the engine judged (default: smroute's default engine)
extra=()
if [[ -n "$REFERENCE" ]]; then extra+=(--reference "$REFERENCE"); fi
if [[ -n "${SCHEDULER:-}" ]]; then extra+=(--scheduler "$SCHEDULER"); fi
which=${1:-all}

run() {  # name tuple throws
  nice -n 10 "$PY" -m smroute study degrade --pgft "$2" --mode switch,link \
    --throws "$3" --seed "$SEED" --workers "$WORKERS" --workdir "$SCRATCH/$1" \
    --engines "$ENGINES" --vls "$VLS" --random-orders "$ORDERS" --keep-failed --rerun "$RERUN" \
    --orders "$ORDERS_PRECISE" --orders-bands "$PRECISE_BANDS" --out "$OUT/$1" \
    "${extra[@]}"
}
if [[ $which == all || $which == 648 ]]; then
  run pgft648 "2;18,36;1,18;1,1" "$THROWS_648"
fi
if [[ $which == all || $which == 1728 ]]; then
  run pgft1728 "3;12,12,12;1,12,12;1,1,1" "$THROWS_1728"
fi
if [[ $OUT == docs/study ]]; then
  "$PY" -m smroute study report docs/study/pgft648/study.csv docs/study/pgft1728/study.csv \
    --out docs/study/report.md ${REFERENCE:+--reference "$REFERENCE"}
fi
