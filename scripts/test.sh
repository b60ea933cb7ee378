#!/usr/bin/env bash
# Every check the project has, from a fresh machine: the README's test command, and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# The no_std crates must build for a bare-metal soft core, which proves they need no std and no allocator.
NO_STD_TARGET=riscv32imac-unknown-none-elf
NO_STD_CRATES=(link-phy link-dl link-tl switch-fw)

step() { printf '\n==> %s\n' "$*"; }

step "toolchain components and the $NO_STD_TARGET target"
rustup component add clippy rustfmt >/dev/null 2>&1 || true
rustup target add "$NO_STD_TARGET"

step "tshark, for the Wireshark dissector's test"
if ! command -v tshark >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y --no-install-recommends tshark >/dev/null 2>&1 \
        || { $SUDO apt-get update >/dev/null 2>&1 \
            && $SUDO apt-get install -y --no-install-recommends tshark >/dev/null 2>&1; } \
        || true
fi
if command -v tshark >/dev/null 2>&1; then
    tshark --version | head -n 1
    # With tshark here, the dissector's test must run: it fails, rather than skips, without it.
    export OPENLINK_REQUIRE_TSHARK=1
else
    echo "WARNING: tshark could not be installed (no apt-get or no root): the dissector's test will be skipped"
fi

step "formatting"
cargo fmt --all -- --check

step "no_std build for $NO_STD_TARGET"
for crate in "${NO_STD_CRATES[@]}"; do
    cargo build --locked --release -p "$crate" --target "$NO_STD_TARGET"
done

step "clippy, warnings denied (benchmarks are compiled here, not run)"
cargo clippy --locked --workspace --all-targets -- -D warnings

step "documentation, warnings denied (after clippy, whose checked dependencies it reuses)"
# First the no_std crates alone, as firmware builds them (without `std`, which the workspace turns on).
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps -p link-phy -p link-dl -p link-tl -p switch-fw
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --workspace

step "tests"
# Property tests draw their random cases from a fixed seed here, so that every run checks the same cases
# and a failure is the change's doing; unset, proptest draws new ones each run, as it does with
# `cargo test` run by hand.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-1}"
cargo test --locked --workspace

step "all checks passed"
