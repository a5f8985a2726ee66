#!/usr/bin/env bash
# Bad input gets one clear line naming what is wrong, exit 2 (issue 71): a directory given as
# the job; a model file that is not TorchScript (LibTorch's frames only with --log-level debug); --offload-optimizer on a
# node whose devices compute on a GPU. bad_inputs.sh DYNAPAR OUT
set -uo pipefail
bin=$1 out=$2
rm -rf "$out" && mkdir -p "$out/adir" && cd "$out"
expect() {  # WHAT PATTERN CMD...: exit 2, one line on stderr, holding PATTERN
  local what=$1 pattern=$2
  shift 2
  "$@" > /dev/null 2> err.txt
  local rc=$?
  [ "$rc" = 2 ] || { echo "FAIL: $what: exit $rc"; cat err.txt; exit 1; }
  [ "$(wc -l < err.txt)" = 1 ] || { echo "FAIL: $what: $(wc -l < err.txt) lines:"; cat err.txt; exit 1; }
  grep -q -- "$pattern" err.txt || { echo "FAIL: $what: no '$pattern' in:"; cat err.txt; exit 1; }
  echo "ok: $what: $(cat err.txt)"
}
expect "a directory as the job" "'adir' is a directory" "$bin" train adir
echo "not a model" > garbage.pt
cat > job.yaml <<'YAML'
name: garbage
model: garbage.pt
data: synthetic
synthetic_samples: 64
batch: 16
steps: 2
devices:
  - {id: 0, speed: 1, memory_gb: 4}
YAML
expect "a model file that is not TorchScript" "garbage.pt: not a TorchScript module" "$bin" train job.yaml
# LibTorch's whole message, its C++ frames with it, only under --log-level debug.
"$bin" --log-level debug train job.yaml > /dev/null 2> debug.txt
grep -q "LibTorch's whole message" debug.txt && grep -q "frame #" debug.txt ||
  { echo "FAIL: --log-level debug does not show LibTorch's frames:"; head -5 debug.txt; exit 1; }
echo "ok: --log-level debug shows LibTorch's frames"
mkdir -p off
expect "--offload-optimizer on a GPU node" "offload-optimizer" "$bin" --offload-optimizer off node --place cuda:0 --controller tcp://127.0.0.1:9 --device 0
