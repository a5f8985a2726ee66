"""Membership events in a run's plans.jsonl, read from each plan's reason ("device N joined",
"device N leaves": the controller's words when a device comes or goes, lost ones included).

A plan record's `joined` and `left` lists are the devices that plan starts and stops using
against the plan before: a policy that leaves a device out (measured slow under load) puts it
in `left` though it never went, and back in `joined` later. Tests that check arrivals and
departures read these events instead.

As a command: plan_events.py PLANS EVENT DEVICE [COUNT] exits 0 once at least COUNT (1)
plans hold the event (joined or leaves) for the device, 1 otherwise.
"""
import json
import re
import sys

EVENT = re.compile(r"\bdevice (\d+) (joined|leaves)\b")


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def steps(plans, event, device):
    """The steps of the plans whose reason holds `event` ("joined" or "leaves") for `device`."""
    return [p["step"] for p in plans if (str(device), event) in EVENT.findall(p.get("reason", ""))]


if __name__ == "__main__":
    try:
        got = steps(load(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
    except (OSError, ValueError):
        sys.exit(1)  # not written yet, or a line being written
    sys.exit(0 if len(got) >= int(sys.argv[4] if len(sys.argv) > 4 else 1) else 1)
