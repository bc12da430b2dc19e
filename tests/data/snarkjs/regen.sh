#!/usr/bin/env bash
# Regenerates the snarkjs fixtures in this folder (see README.md for provenance).
#
# Everything but proof.json is deterministic: the ceremony uses beacons (fixed hash,
# 2^10 iterations), never `contribute`, whose entropy snarkjs mixes with OS randomness.
# proof.json differs on every run (snarkjs draws r, s at random); it still verifies.
#
# Tools: snarkjs 0.7.6 and circom2 (circom 2.2.3) from npm. Looked up in this order:
#   $CUZK_SNARKJS / $CUZK_CIRCOM2, <repo>/.ci/node/node_modules/.bin, /tmp/jstools/node_modules/.bin, PATH.
# To install them: mkdir -p /tmp/jstools && cd /tmp/jstools && npm install snarkjs@0.7.6 circom2@0.2.23
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"

find_tool() {  # $1 = env override, $2 = binary name
    local override="$1" name="$2" dir
    if [[ -n "$override" ]]; then echo "$override"; return; fi
    for dir in "$repo/.ci/node/node_modules/.bin" /tmp/jstools/node_modules/.bin; do
        if [[ -x "$dir/$name" ]]; then echo "$dir/$name"; return; fi
    done
    command -v "$name" || { echo "regen.sh: $name not found (see README.md)" >&2; exit 1; }
}
SNARKJS="$(find_tool "${CUZK_SNARKJS:-}" snarkjs)"
CIRCOM2="$(find_tool "${CUZK_CIRCOM2:-}" circom2)"
echo "snarkjs: $SNARKJS ($("$SNARKJS" --version 2>&1 | head -n1 || true))"
echo "circom2: $CIRCOM2 ($("$CIRCOM2" --version 2>&1 | tr '\n' ' '))"

POWER=5   # 2^5 = 32 >= domainSize of both circuits (nConstraints + nPublic < 32)
BEACON1=0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
BEACON2=2021222324252627282930313233343536373839404142434445464748494a4b

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# Phase 1 (shared by both circuits).
"$SNARKJS" powersoftau new bls12381 "$POWER" pot0.ptau
"$SNARKJS" powersoftau beacon pot0.ptau pot1.ptau "$BEACON1" 10 -n="cuzk phase1 beacon"
"$SNARKJS" powersoftau prepare phase2 pot1.ptau pot.ptau

for c in mulchain rangecheck; do
    out="$here/$c"
    mkdir -p "$c"
    cp "$out/circuit.circom" "$out/input.json" "$c/"
    (
        cd "$c"
        "$CIRCOM2" circuit.circom --r1cs --wasm -p bls12381 --O1 -o .
        "$SNARKJS" groth16 setup circuit.r1cs ../pot.ptau circuit_0000.zkey
        "$SNARKJS" zkey beacon circuit_0000.zkey circuit.zkey "$BEACON2" 10 -n="cuzk phase2 beacon"
        "$SNARKJS" zkey verify circuit.r1cs ../pot.ptau circuit.zkey
        "$SNARKJS" zkey export verificationkey circuit.zkey verification_key.json
        "$SNARKJS" wtns calculate circuit_js/circuit.wasm input.json witness.wtns
        "$SNARKJS" wtns check circuit.r1cs witness.wtns
        "$SNARKJS" groth16 prove circuit.zkey witness.wtns proof.json public.json
        "$SNARKJS" groth16 verify verification_key.json public.json proof.json
        cp circuit.r1cs circuit_0000.zkey circuit.zkey witness.wtns verification_key.json proof.json public.json "$out/"
    )
done

cd "$here"
sha256sum */circuit.circom */input.json */circuit.r1cs */circuit_0000.zkey */circuit.zkey */witness.wtns \
    */verification_key.json */public.json > SHA256SUMS
echo "regenerated; deterministic artifacts listed in SHA256SUMS"
