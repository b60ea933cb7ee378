#!/usr/bin/env bash
# The reference runs: a fixed set of simulations (every topology, algorithm and collective, bit errors,
# failures, synthetic traffic, the fabric manager's plan, a pcap and a VCD trace) whose outputs must not
# change when only the simulator's speed was meant to. Each run's output goes to a file of its own in
# OUTDIR, with the wall-clock figures (`wall_seconds`, `setup_wall_seconds`, `packets_per_s`) taken out,
# so that two builds' outputs can be compared byte for byte:
#
#   scripts/reference-runs.sh OUTDIR [LINKCTL]     LINKCTL: a linkctl binary (default: a release build
#                                                  of this checkout, built first)
#   scripts/reference-runs.sh --list               the runs, one per line: NAME ARGUMENTS...
#   diff -r OUTDIR_A OUTDIR_B                      no output: the simulation is the same
#
# About five minutes with a release build on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# NAME then linkctl's arguments. Traces are written to OUTDIR/NAME.pcap or OUTDIR/NAME.vcd (@OUT@).
RUNS=$(
    cat <<'EOF'
allreduce-default sim allreduce --max 16M
allreduce-tree sim allreduce --algo tree --max 4M
allreduce-switch-reduce sim allreduce --algo switch-reduce --max 4M
allgather sim allgather --max 1M
reducescatter sim reducescatter --max 1M
broadcast sim broadcast --max 1M
alltoall sim alltoall --max 1M
mesh2 sim allreduce --topology mesh2 --max 1M
mesh4-ber sim allreduce --topology mesh4 --max 1M --ber 1e-6
dgx1-hcm sim allreduce --topology dgx1-hcm --max 1M
dgx-a100-tree sim allreduce --topology dgx-a100 --max 1M --algo tree
pcie8 sim allreduce --topology pcie8 --max 1M
fat-tree-256 sim allreduce --topology fat-tree-256 --min 256K --max 256K
fat-tree-64-tree sim allreduce --topology fat-tree-64 --min 1M --max 1M --algo tree --trunks 4
fail-link-port sim allreduce --max 4M --fail-link gpu0:nvswitch1@20us --fail-port nvswitch2:gpu5@30us --ber 1e-7
fail-switch-reduce sim allreduce --algo switch-reduce --min 1M --max 4M --fail-link gpu0:nvswitch1@20us
degrade-link sim allreduce --min 1M --max 4M --degrade-link gpu0:nvswitch0@20us
replan-delay sim allreduce --min 4M --max 4M --fail-link gpu0:nvswitch1@20us --replan-delay 100us
repair-link sim allreduce --min 1M --max 8M --ber 1e-7 --fail-link gpu0:nvswitch1@2us --repair-link gpu0:nvswitch1@9us --degrade-link gpu3:nvswitch0@25us --repair-link gpu3:nvswitch0@30us --replan-delay 2us
fail-switch sim allreduce --min 1M --max 4M --fail-switch nvswitch1@0us --repair-switch nvswitch1@5us
drain-switch sim allreduce --min 1M --max 4M --drain-switch nvswitch1@2us --drain-switch nvswitch2@4us --replan-delay 1us
background sim allreduce --min 1M --max 4M --background uniform:0.3
two-jobs sim allreduce --topology fat-tree-64 --min 1M --max 1M --gpus gpu0..gpu31 --background uniform:0.3 --background-gpus rest
traffic sim traffic --pattern uniform --load 0.1,0.5,0.9
traffic-fat-tree sim traffic --topology fat-tree-64 --pattern hotspot --load 0.02,0.05 --spread flow
fabric-fat-tree-256 fabric --topology fat-tree-256
fabric-partition fabric --partition 1:gpu4,gpu5,gpu6,gpu7 --probe --routes
pcap sim allreduce --topology mesh4 --max 64K --pcap @OUT@.pcap
vcd sim allreduce --topology mesh4 --max 64K --vcd @OUT@.vcd
EOF
)

case "${1:-}" in
    --list)
        echo "$RUNS"
        exit 0
        ;;
    "" | -*)
        echo "usage: scripts/reference-runs.sh OUTDIR [LINKCTL] | --list" >&2
        exit 2
        ;;
esac
out=$1
linkctl=${2:-}
if [ -z "$linkctl" ]; then
    cargo build --locked --release -p linkctl >&2
    linkctl="${CARGO_TARGET_DIR:-target}/release/linkctl"
fi
[ -x "$linkctl" ] || {
    echo "reference-runs: $linkctl is not an executable linkctl" >&2
    exit 2
}
mkdir -p "$out"

failed=0
while read -r name args; do
    args=${args//@OUT@/$out/$name}
    printf '%-24s' "$name" >&2
    start=$(date +%s)
    # Word splitting of $args is wanted: the list holds no quoted arguments.
    # shellcheck disable=SC2086
    if "$linkctl" $args --json >"$out/$name.raw" 2>"$out/$name.stderr"; then
        status=ok
    else
        status="exit $?"
        failed=1
    fi
    grep -v -E '"(wall_seconds|setup_wall_seconds|packets_per_s)":' "$out/$name.raw" >"$out/$name.json"
    rm "$out/$name.raw"
    echo "$status, $(($(date +%s) - start)) s" >&2
    echo "$status" >"$out/$name.status"
done <<<"$RUNS"
exit $failed
