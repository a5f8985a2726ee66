#!/usr/bin/env bash
# run_fuzzer.sh FUZZER CORPUS: a libFuzzer smoke run from the seed corpus (20 000 inputs,
# seeded). Fails when the fuzzer finds a crash, a leak or undefined behaviour, or when it did
# not start from the whole seed corpus (a run that found no seeds proves little).
set -euo pipefail
bin="$1" corpus="$2"
seeds=$(find "$corpus" -type f | wc -l)
[ "$seeds" -ge 10 ] || { echo "only $seeds seeds in $corpus"; exit 1; }
out=$("$bin" -runs=20000 -seed=1 -max_len=4096 "$corpus" 2>&1) || { echo "$out" | tail -60; exit 1; }
if [[ $out == *"runtime error:"* ]]; then echo "$out" | grep -m5 "runtime error:"; exit 1; fi
[[ $out == *"seed corpus: files: $seeds "* ]] || { echo "the fuzzer did not read the $seeds seeds:"; echo "$out" | head -20; exit 1; }
echo "$out" | grep -E "INITED|DONE" || true
