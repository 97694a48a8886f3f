#!/usr/bin/env bash
# A trial of smroute as OpenSM's routing engine on a simulated fabric: ibsim
# simulates a 32-host fat-tree, `smroute serve` routes it, OpenSM loads the
# plugin (deploy/opensm-plugin.conf) and programs the switches with the
# daemon's tables; a cable is cut in the simulator and the switches get the
# new tables.  Nothing here needs an HCA or root (everything is written under
# $T).  Run it from a clone after scripts/setup.sh (which builds the plugin):
#     scripts/ibsim-trial.sh          (exit 0: every check passed)
# or paste its steps into a shell.  The docs site shows this file; a test runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$PWD/.venv/bin:$PATH"
T=${TRIAL_DIR:-$(mktemp -d /tmp/smroute-trial.XXXXXX)}   # everything the trial writes
mkdir -p "$T"
pids=()  # started in the background, stopped in reverse order at exit: OpenSM
stop() {  # first (it unbinds from ibsim as it exits), then the daemon, then ibsim
    local i p
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        p=${pids[i]}
        kill "$p" 2>/dev/null || continue
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$p" 2>/dev/null || true
    done
}
trap stop EXIT
wait_for() {  # wait_for SECONDS WHAT COMMAND...: poll until the command succeeds
    local deadline=$((SECONDS + $1)) what=$2; shift 2
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || { echo "trial: no $what after waiting" >&2; exit 1; }
        sleep 0.5
    done
}

# 1. The simulator.  ibsim and every umad client (OpenSM, ibnetdiscover,
# dump_fts, run under ibsim-run) meet on IBSIM_SOCKNAME: a name of our own
# keeps this trial apart from any other simulator on the machine.  ibsim reads
# console commands (Unlink, ReLink, ...) on its standard input: a FIFO here.
export IBSIM_SOCKNAME="smroute-trial-$$"
smroute fabric generate pgft "2;4,8;1,4;1,1" --format ibsim --out "$T/net"
rm -f "$T/console" && mkfifo "$T/console"
ibsim -s "$T/net" <"$T/console" >"$T/ibsim.out" 2>&1 &
pids+=($!)
exec 3>"$T/console"                  # keep the console open; `echo CMD >&3` talks to ibsim
wait_for 30 "ibsim console" grep -q "sim>" "$T/ibsim.out"

# 2. The daemon, on a Unix socket; it gets its fabric from OpenSM's first sweep.
smroute serve --listen "unix:$T/smroute.sock" --state none --metrics-listen off \
    --ready-file "$T/ready" >"$T/smroute.log" 2>&1 &
pids+=($!)
wait_for 60 "daemon" test -s "$T/ready"

# 3. OpenSM with the plugin: the shipped config, its log in $T.
#    LD_LIBRARY_PATH: where OpenSM finds libsmroute.so (else install it in
#    /usr/local/lib and run ldconfig); SMROUTE_DAEMON: the daemon's address;
#    OSM_CACHE_DIR, OSM_TMP_DIR: OpenSM's guid2lid cache and dumps, here not
#    in /var/cache/opensm; force_log_flush TRUE (in the config) writes each
#    log line at once.
sed -e "s|^log_file .*|log_file $T/opensm.log|" deploy/opensm-plugin.conf >"$T/opensm.conf"
mkdir -p "$T/cache" "$T/tmp"
OSM_CACHE_DIR="$T/cache" OSM_TMP_DIR="$T/tmp" LD_LIBRARY_PATH="$PWD/build/opensm-plugin" \
    SMROUTE_DAEMON="unix:$T/smroute.sock" \
    ibsim-run opensm -F "$T/opensm.conf" >"$T/opensm.out" 2>&1 &
pids+=($!)
wait_for 120 "SUBNET UP" grep -q "SUBNET UP" "$T/opensm.log"
wait_for 60 "smroute epoch" grep -q "smroute: epoch" "$T/opensm.log"
grep "smroute: " "$T/opensm.log"

# 4. What the switches hold is what smroute computes for the fabric OpenSM
#    sees: read every switch back (dump_fts), route the discovered fabric
#    offline, compare (smroute diff: exit 0 when equal).
check_switches() {
    timeout 60 ibsim-run ibnetdiscover >"$T/fabric.topo" 2>/dev/null
    smroute route "$T/fabric.topo" --out "$T/smroute.lfts" -q
    timeout 60 ibsim-run dump_fts >"$T/switches.txt" 2>/dev/null
    smroute diff "$T/smroute.lfts" "$T/switches.txt" >"$T/diff.txt"
}
wait_for 60 "tables in the switches" check_switches
echo "trial: the switches hold smroute's tables"

# 5. Cut a leaf's up-link in the simulator: the switch sends a trap, OpenSM
#    sweeps, the plugin asks the daemon, which reroutes incrementally (a new
#    epoch with the derived fault event) and OpenSM programs the changed blocks.
echo 'Unlink "S-0002c90310000000"[5]' >&3
wait_for 120 "second epoch" grep -q "smroute: epoch 2" "$T/opensm.log"
wait_for 60 "rerouted tables in the switches" check_switches
grep "smroute: epoch 2" "$T/opensm.log"
echo "trial: after the cut the switches hold smroute's new tables ($T)"
