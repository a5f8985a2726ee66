#!/usr/bin/python3
"""tools/chaos/campaign.py on a campaign written by hand: two runs, one restarted (its first
process's kill in log.txt only), one with a kill whose moment never came. The table must count
each kill where the logs say it landed, the rest apart, and the verdicts and sums as given.

    tests/chaos/campaign_test.py TOOLS_CHAOS_DIR WORK_DIR
"""
import json
import subprocess
import sys
from pathlib import Path

tools, work = Path(sys.argv[1]), Path(sys.argv[2])
out = work / "c"
out.mkdir(parents=True, exist_ok=True)
run = dict(verdict="ok", reference_max_rel_diff=0.0, faults_injected=0, devices_lost=0, recoveries=0, restarted=False,
           max_recovery_s=0.0, samples_lost=0, samples_duplicated=0)
runs = [dict(run, seed=1, faults_injected=3, devices_lost=2, recoveries=2, restarted=True, max_recovery_s=0.5),
        dict(run, seed=2, faults_injected=1, devices_lost=1, recoveries=1, max_recovery_s=0.25)]
(out / "chaos.json").write_text(json.dumps({"runs": runs}))
jobs = {
    1: "faults:\n  at:\n    - step: 0\n      kind: kill\n      moment: placement\n    - step: 4\n      kind: kill\n"
       "      moment: sum\n    - step: 4\n      kind: kill\n    - step: 9\n      kind: pause\n      seconds: 6\nname: x\n",
    2: "faults:\n  at:\n    - step: 3\n      kind: kill\n      moment: early\n    - step: 5\n      kind: kill\n      moment: replan\n",
}
logs = {
    # The first process's placement kill, then the resumed process's: metrics.jsonl would
    # hold only the second.
    1: "[00:00:01.0] [train] [warning] step 0: fault injected (plan): device 1 killed 2672 us into the placement\n"
       "[00:00:02.0] [train] [info] resuming from 'ck' at step 4\n"
       "[00:00:02.5] [train] [warning] step 4: fault injected (plan): device 2 killed 972 us into the sum\n"
       "[00:00:02.6] [train] [warning] step 4: fault injected (plan): device 3 killed 1000 us into the step\n",
    2: "[00:00:01.0] [train] [warning] step 3: fault injected (plan): device 0 killed 204 us into the early\n"
       "[00:00:09.0] [train] [warning] a kill planned at step 5 waited for the next replan, which never came\n",
}
for seed in (1, 2):
    d = out / f"seed-{seed}"
    (d / "out").mkdir(parents=True, exist_ok=True)
    (d / "job.yaml").write_text(jobs[seed])
    (d / "log.txt").write_text(logs[seed])
    (d / "out" / "metrics.jsonl").write_text("")
table = subprocess.run([sys.executable, str(tools / "campaign.py"), "--commit", "abc1234", f"hand={out}"],
                       check=True, capture_output=True, text=True).stdout
row = [c.strip() for c in table.strip().splitlines()[-1].strip("|").split("|")]
# campaign | seeds | ended as one device | injected | landed by moment | not landed | two in a step | lost | recoveries
# | restarts | max recovery | failed | lost / twice
assert row[0] == "hand" and row[1] == "1-2", row
assert row[2] == "2/2, diff <= 0", row
assert row[3] == "4", row
# replan / migration / sum / checkpoint / shard / early / evaluation / placement / joining
assert row[4] == "0 / 0 / 1 / 0 / 0 / 1 / 0 / 1 / 0", row
assert row[5] == "1", row  # the replan kill: its moment never came
assert row[6] == "1", row  # seed 1: two kills at step 4
assert row[7:11] == ["3", "3", "1", "0.50"], row
assert row[11] == "none" and row[12] == "0 / 0", row
assert "At abc1234" in table, table
print("ok")
