#!/usr/bin/env bash
# Build the fastest linkctl: a release build optimised with a profile of the simulator's own runs
# (profile-guided optimisation). The simulation is the same code and gives byte-identical results; only
# the compiler's choices (inlining, block layout, which branches are likely) follow where time is spent.
#
#   scripts/build-pgo.sh            prints the path of the binary: target/pgo/use/release/linkctl
#   scripts/build-pgo.sh --native   the same for this machine's processor only (-C target-cpu=native:
#                                   AVX-512 and the rest wherever the compiler can use them), faster
#                                   still; the binary is in target/pgo-native/use/release/linkctl
#
# Takes two release builds and about ten seconds of training runs. The training runs are verified
# collectives like any other: if one fails, so does this script.
set -euo pipefail
cd "$(dirname "$0")/.."

cpu=""
case "${1:-}" in
    "") ;;
    --native) cpu="-Ctarget-cpu=native" ;;
    *)
        echo "usage: scripts/build-pgo.sh [--native]" >&2
        exit 2
        ;;
esac

rustup component add llvm-tools >/dev/null
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"

root="$PWD/target/pgo${cpu:+-native}"
profiles="$root/profiles"
rm -rf "$profiles"

echo "==> instrumented build" >&2
RUSTFLAGS="-Cprofile-generate=$profiles $cpu" \
    cargo build --locked --release -p linkctl --target-dir "$root/generate" >&2

echo "==> training runs" >&2
train="$root/generate/release/linkctl"
# Every algorithm, three collectives, a switched and a direct fabric, bit errors, and the fat tree: the
# profile should weigh what users run, not one case.
"$train" sim allreduce --max 16M >/dev/null
"$train" sim allreduce --algo switch-reduce --max 4M >/dev/null
"$train" sim allreduce --algo tree --max 4M >/dev/null
"$train" sim alltoall --max 4M >/dev/null
"$train" sim allgather --max 1M >/dev/null
"$train" sim allreduce --topology fat-tree-256 --min 256K --max 256K >/dev/null
"$train" sim allreduce --topology mesh4 --max 1M --ber 1e-6 >/dev/null
"$profdata" merge -o "$root/merged.profdata" "$profiles"

echo "==> optimised build" >&2
RUSTFLAGS="-Cprofile-use=$root/merged.profdata $cpu" \
    cargo build --locked --release -p linkctl --target-dir "$root/use" >&2
echo "$root/use/release/linkctl"
