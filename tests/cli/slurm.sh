#!/usr/bin/env bash
# A real Slurm on this machine (Debian's munge, slurmctld and slurmd; a generated slurm.conf
# with this machine as the one node, no cgroups) runs the elastic job through examples/slurm:
#  1. `sbatch dynapar.sbatch` (2 tasks: the controller, nodes for devices 0 and 1, the ids
#     from the tasks, a key per device made in advance); a second allocation (`sbatch
#     join.sbatch`, 2 tasks that describe themselves, each with a key it made and admitted
#     while the run went on) joins mid-run as devices 2 and 3, and its `scancel` makes its
#     nodes leave; a third (1 task, device 2 again) joins and its node process is killed
#     (SIGKILL, as when its machine fails: a crash; scancel, even with --signal=KILL, cancels
#     with a SIGTERM first, which is a leave). The run must equal one device (--verify), lose
#     and repeat no sample, show the joins and leaves in plans.jsonl, and recover.
#  2. A requeue (`scontrol requeue`, as after a node failure or preemption) of a job that has
#     written checkpoints: the job starts again, resumes from its newest checkpoint, and ends
#     equal to one device.
# The daemons are stopped at the end, whatever happened. Without Slurm's programs or root, the
# test is skipped (exit 77), except in CI (CI=true), where bootstrap installs them: it fails.
# slurm.sh DYNAPAR JOB OUT
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") job=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
events=$root/tests/cli/plan_events.py
skip() {
  if [ "${CI:-}" = true ]; then echo "slurm test: $1 (bootstrap.sh test installs slurm-wlm and munge)" >&2; exit 1; fi
  echo "skipped: $1"; exit 77
}
for p in munged slurmctld slurmd sbatch srun squeue scancel scontrol sinfo; do command -v "$p" > /dev/null || skip "no $p"; done
[ "$(id -u)" = 0 ] || skip "slurmd and munged run as root here"
rm -rf "$out" && mkdir -p "$out"
out=$(cd "$out" && pwd)
sl=$out/slurm
mkdir -p "$sl/state" "$sl/spool" "$sl/log" "$sl/munge"
chmod 700 "$sl/munge"
read -r ctld_port slurmd_port < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
node=$(hostname -s)
head -c 1024 /dev/urandom > "$sl/munge/munge.key"
chmod 400 "$sl/munge/munge.key"
cat > "$sl/slurm.conf" <<CONF
ClusterName=dynapar-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sl/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$sl/state
SlurmdSpoolDir=$sl/spool
SlurmctldPidFile=$sl/slurmctld.pid
SlurmdPidFile=$sl/slurmd.pid
SlurmctldLogFile=$sl/log/slurmctld.log
SlurmdLogFile=$sl/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MpiDefault=none
NodeName=$node NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:16
CONF
export SLURM_CONF=$sl/slurm.conf
stop_daemons() {
  jobs=$(squeue -h -o %i 2> /dev/null || true)
  if [ -n "$jobs" ]; then
    scancel $jobs 2> /dev/null || true
    for _ in $(seq 300); do [ -z "$(squeue -h -o %i 2> /dev/null)" ] && break; sleep 0.1; done
  fi
  for f in slurmd slurmctld munge/munged; do
    [ -f "$sl/$f.pid" ] && kill "$(cat "$sl/$f.pid")" 2> /dev/null || true
  done
}
trap stop_daemons EXIT
munged --force --key-file="$sl/munge/munge.key" --socket="$sl/munge/munge.socket" --pid-file="$sl/munge/munged.pid" \
  --log-file="$sl/log/munged.log" --seed-file="$sl/munge/seed"
slurmctld
slurmd -N "$node"
for _ in $(seq 300); do sinfo -h -o %T 2> /dev/null | grep -q idle && break; sleep 0.1; done
sinfo -h -o %T | grep -q idle || { echo "slurmd never became idle:"; sinfo; tail -20 "$sl/log/slurmctld.log" "$sl/log/slurmd.log"; exit 1; }
echo "slurm: $(sinfo -V), node $node, ports $ctld_port/$slurmd_port"

export DYNAPAR=$bin DYNAPAR_HOST=127.0.0.1 DYNAPAR_NODE_HOST=127.0.0.1 DYNAPAR_KEYS_FOR=4
cd "$out"
steps() { [ -f "$1/out/metrics.jsonl" ] && wc -l < "$1/out/metrics.jsonl" || echo 0; }
# Waits (up to 120 s) for job $1 to end.
wait_job() {
  for _ in $(seq 1200); do [ -z "$(squeue -h -j "$1" -o %i 2> /dev/null)" ] && return 0; sleep 0.1; done
  echo "job $1 still runs after 120 s"; squeue; return 1
}
# Waits (up to 120 s) until $4 (default 1) plans of run $1 say device $3 $2 ("joined" or
# "leaves") in their reason (tests/cli/plan_events.py).
wait_plan() {
  for _ in $(seq 1200); do
    /usr/bin/python3 "$events" "$1/out/plans.jsonl" "$2" "$3" "${4:-1}" && return 0
    sleep 0.1
  done
  echo "no plan with device $3 $2 (run $1 is at step $(steps "$1"))"; cat "$out"/*.out; return 1
}

# 1. A second allocation joins and is cancelled.
export DYNAPAR_RUN=$out/elastic DYNAPAR_PRIVATE=$out/private DYNAPAR_OPERATOR_KEYS=$out/operator
mkdir -p "$DYNAPAR_PRIVATE"
first=$(sbatch --parsable --ntasks=2 -o "$out/first.out" "$root/examples/slurm/dynapar.sbatch" "$job" --steps 200 --verify)
for _ in $(seq 1200); do [ "$(steps "$DYNAPAR_RUN")" -ge 4 ] && break; sleep 0.1; done
join=$(sbatch --parsable --ntasks=2 -o "$out/join.out" "$root/examples/slurm/join.sbatch")
wait_plan "$DYNAPAR_RUN" joined 2
wait_plan "$DYNAPAR_RUN" joined 3
scancel "$join"
wait_plan "$DYNAPAR_RUN" leaves 2
wait_plan "$DYNAPAR_RUN" leaves 3
wait_job "$join"
crash=$(sbatch --parsable --ntasks=1 -o "$out/crash.out" "$root/examples/slurm/join.sbatch")
wait_plan "$DYNAPAR_RUN" joined 2 2
# The job's node process: a process of the dynapar binary (not srun, whose arguments also hold
# "node --slurm", nor srun's helper) whose environment names the job (proctrack/linuxproc lists
# no pids for `scontrol listpids`).
killed=0
for pid in $(pgrep -f " node --slurm "); do
  [ "$(readlink "/proc/$pid/exe" 2> /dev/null)" = "$(readlink -f "$bin")" ] || continue
  if tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "SLURM_JOB_ID=$crash"; then
    kill -KILL "$pid" && killed=$((killed + 1))
  fi
done
[ "$killed" = 1 ] || { echo "found $killed node processes of job $crash, not 1"; exit 1; }
wait_job "$crash"
wait_job "$first"
grep -q "verify ok" "$out/first.out" || { echo "first job:"; cat "$out/first.out"; exit 1; }
/usr/bin/python3 - "$DYNAPAR_RUN/out" "$out/first.out" "$join" "$crash" "$root/tests/cli" <<'PY'
import json, re, sys
sys.path.insert(0, sys.argv[5])
from plan_events import steps
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
assert s["steps"] == 200 and s["joins"] == 3 and s["leaves"] == 2, s
assert s["devices_lost"] == 1 and s["recoveries"] == 1, s
plans = [json.loads(l) for l in open(d + "/plans.jsonl")]
used = lambda p, dev: any(dev in g["devices"] for g in p["plan"]["groups"])
# Device 2 joined again (the third allocation), after it had left.
rejoined = max(steps(plans, "joined", 2))
assert rejoined > min(steps(plans, "leaves", 2)), plans
for dev in (2, 3):
    joined, left = min(steps(plans, "joined", dev)), min(steps(plans, "leaves", dev))
    again = rejoined if dev == 2 else s["steps"]
    assert 0 < joined < left < s["steps"], (dev, joined, left)
    assert not any(used(p, dev) for p in plans if p["step"] < joined or left <= p["step"] < again), dev
# Each node proved its own key: the first job's the keys of its devices; each task of the
# others the key it made (slurm-JOB.STEP-TASK), which the controller read once it was met.
log = "".join(open(sys.argv[2].replace("first", f)).read() for f in ("first", "join", "crash"))
join, crash = sys.argv[3], sys.argv[4]
for key in ("device-0", "device-1", rf"slurm-{join}\.\d+-0", rf"slurm-{join}\.\d+-1", rf"slurm-{crash}\.\d+-0"):
    assert len(re.findall(r"joined with 1 device\(s\), key node:%s$" % key, log, re.M)) == 1, key
assert "authorized key(s) again" in log, "the controller never read authorized/ again"
print("elastic: diff", s["reference_max_rel_diff"], "joins", s["joins"], "leaves", s["leaves"], "lost", s["devices_lost"],
      "replans", s["replans"])
PY

# Secrets stayed where they were made (docs/SECURITY.md): the run's shared directory holds
# public halves only; each task's and the controller's secret is alone in a directory of mode
# 0700 (the controller's removed at its end), and the operator's stayed in its own.
if find "$DYNAPAR_RUN" -name '*.key' | grep -q .; then echo "FAIL: a secret key in the shared directory:"; find "$DYNAPAR_RUN" -name '*.key'; exit 1; fi
tasks=0
for d in "$DYNAPAR_PRIVATE"/dynapar-node.*; do
  [ "$(stat -c %a "$d")" = 700 ] || { echo "FAIL: $d is mode $(stat -c %a "$d")"; exit 1; }
  [ "$(find "$d" -name '*.key' | wc -l)" = 1 ] || { echo "FAIL: $d holds $(find "$d" -name '*.key' | wc -l) secret keys"; exit 1; }
  tasks=$((tasks + 1))
done
[ "$tasks" = 5 ] || { echo "FAIL: $tasks task key directories, want 5 (2 + 2 + 1 tasks)"; exit 1; }
[ -z "$(ls -d "$DYNAPAR_PRIVATE"/dynapar-controller.* 2> /dev/null)" ] || { echo "FAIL: the controller's secret outlived its run"; exit 1; }
[ -f "$DYNAPAR_OPERATOR_KEYS/operator.key" ] && [ -f "$DYNAPAR_RUN/keys/authorized/operator.pub" ] || { echo "FAIL: no operator key"; exit 1; }
echo "keys: 5 tasks and the controller each made their own secret, none in the shared directory"

# 2. A requeued job resumes from its newest checkpoint.
export DYNAPAR_RUN=$out/requeue DYNAPAR_CHECKPOINT_EVERY=20
again=$(sbatch --parsable --ntasks=2 -o "$out/requeue.out" "$root/examples/slurm/dynapar.sbatch" "$job" --steps 100 --verify)
for _ in $(seq 1200); do [ "$(steps "$DYNAPAR_RUN")" -ge 30 ] && break; sleep 0.1; done
scontrol requeue "$again"
# Slurm holds a requeued job back for a while (BeginTime); let it start now.
for _ in $(seq 600); do [ "$(squeue -h -j "$again" -o %T)" = PENDING ] && break; sleep 0.1; done
scontrol update jobid="$again" StartTime=now
wait_job "$again"
grep -q "resuming from" "$out/requeue.out" || { echo "the requeued job did not resume:"; cat "$out/requeue.out"; exit 1; }
grep -q "verify ok" "$out/requeue.out" || { echo "requeued job:"; cat "$out/requeue.out"; exit 1; }
/usr/bin/python3 - "$DYNAPAR_RUN/out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["resumed_from_step"] >= 20 and s["resumed_from_step"] % 20 == 0, s["resumed_from_step"]
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
print("requeue: resumed at", s["resumed_from_step"], "diff", s["reference_max_rel_diff"])
PY
