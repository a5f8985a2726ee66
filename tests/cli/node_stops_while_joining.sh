#!/usr/bin/env bash
# A node asked to stop (SIGTERM: a scancel, a stop) while it still waits for the controller's
# answer exits at once, with 0: it hosted nothing yet. Before, it waited out its
# --connect-timeout-s (here 60 s), and Slurm's cancel of a node whose controller had gone hung.
set -euo pipefail
bin=$1
"$bin" node --controller tcp://127.0.0.1:9 --device 0 --connect-timeout-s 60 2> /dev/null &
node=$!
# Wait until the node takes SIGTERM as a leave (blocked, bit 15 of SigBlk, for its sigwait
# thread): on a loaded machine, loading the binary alone can take over 2 s, and a signal
# before that ends the node by default (exit 143, seen twice with the tests sharing 2 cores).
takes_term() { local m; m=$(awk '/^SigBlk:/ {print $2}' "/proc/$node/status" 2> /dev/null) || return 1; [ -n "$m" ] && (( (16#$m >> 14) & 1 )); }
for _ in $(seq 300); do takes_term && break; sleep 0.1; done
takes_term || { echo "the node did not block SIGTERM for its leave thread within 30 s"; exit 1; }
sleep 1
kill -0 "$node"  # still waiting for the controller
kill -TERM "$node"
for _ in $(seq 50); do kill -0 "$node" 2> /dev/null || break; sleep 0.1; done
if kill -0 "$node" 2> /dev/null; then kill -KILL "$node"; echo "the node did not stop within 5 s of SIGTERM"; exit 1; fi
wait "$node"
echo "ok: stopped on SIGTERM while joining"
