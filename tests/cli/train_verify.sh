#!/usr/bin/env bash
# `dynapar train JOB --verify` end to end on Fashion-MNIST: two groups of 2 and 3 stages must
# equal the single-device run exactly, with every sample used once; each device's data-plane
# bytes are what its stage's shapes say. With a fourth argument N: the same through
# `dynapar launch --local N`, where stages on different nodes send each other their tensors
# directly and each layer's holders add its gradients among themselves: the controller
# relays none of them, sends no inputs (the nodes look the samples up), and gathers less than one gradient of the model a step; each holder
# receives for the sums exactly the chunks the exact sum's tree says.
set -euo pipefail
if [ $# -ge 4 ]; then
  "$1" launch --local "$4" "$2" --verify --out "$3" > /dev/null
else
  "$1" train "$2" --verify --out "$3" > /dev/null
fi
/usr/bin/python3 - "$3/summary.json" "${4:-0}" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
if int(sys.argv[2]) > 0:
    by = s["controller_tensor_bytes_by_kind"]
    assert by["relayed"] == 0, by
    # Every node loaded Fashion-MNIST (both splits) itself and proved it by fingerprint: the
    # steps and the evaluation named their samples, and no input or target crossed the controller.
    assert by["inputs"] == 0, by
    # Each node built its layers from the job's model and seed, checked by hash: no layer was
    # sent (nothing was lost, so nothing was placed again from the controller's copies).
    assert by["sent"] == 0, by
    # The CNN's parameters (conv1, conv2, fc1, fc2), float32: a central sum would gather at
    # least this much every step.
    params = 4 * ((32 * 9 + 32) + (64 * 32 * 9 + 64) + (64 * 7 * 7 * 128 + 128) + (128 * 10 + 10))
    assert by["gathered"] < s["steps"] * params / 2, (by, params)
    # What each holder received for the sums: every layer has two holders (group 0's, rank 0;
    # group 1's, rank 1), each with 2 partial sums (micro-batches 0-3 and 4; 5 and 6-7). Rank k
    # gets the other's 2 slices of its chunk and the other's summed chunk; chunk 0 of n
    # parameters is [0, n/2), chunk 1 the rest.
    numel = [32 * 9 + 32, 64 * 32 * 9 + 64, 64 * 7 * 7 * 128 + 128, 128 * 10 + 10]
    chunk = lambda n, k: n // 2 if k == 0 else n - n // 2
    got = lambda n, k: 4 * (2 * chunk(n, k) + chunk(n, 1 - k))
    ranks = {"0": [(0, 0), (1, 0)], "1": [(2, 0), (3, 0)], "2": [(0, 1)], "3": [(1, 1), (2, 1)], "4": [(3, 1)]}
    want = {d: 20 * sum(got(numel[l], k) for l, k in lk) for d, lk in ranks.items()}
    assert s["sum_received_bytes"] == want, (s["sum_received_bytes"], want)
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
assert s["replica_hash_checks"] >= 1, s
assert s["steps"] == 20 and 0.1 < s["final_test_accuracy"] <= 1, s
# The run's accuracy is the devices' (each group's pipeline forwarded its part of the test set
# in evaluation mode); the reference's is the host's, on one device's layers: the same layers
# give the same figure.
assert s["final_test_accuracy"] == s["reference_test_accuracy"], (s["final_test_accuracy"], s["reference_test_accuracy"])
assert [len(g["devices"]) for g in s["plan"]["groups"]] == [2, 3], s["plan"]
# Bytes each device sent to its pipeline neighbours, from the CNN's shapes (float32 per
# sample: conv1+pool 32x14x14, conv2+pool 64x7x7, fc1 128), 20 steps of shares 40 and 24.
per = {1: 32 * 14 * 14 * 4, 2: 64 * 7 * 7 * 4, 3: 128 * 4}
want = {"0": per[2] * 40 * 20, "1": per[2] * 40 * 20, "2": per[1] * 24 * 20,
        "3": (per[1] + per[3]) * 24 * 20, "4": per[3] * 24 * 20}
assert s["data_plane_bytes"] == want, (s["data_plane_bytes"], want)
print("ok: diff 0, accuracy", s["final_test_accuracy"])
PY
