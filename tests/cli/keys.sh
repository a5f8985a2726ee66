#!/usr/bin/env bash
# Keys as a user meets them (docs/SECURITY.md): keygen writes a 0600 secret and a public file;
# a controller beyond loopback without keys exits 2 naming the fix; a key file others may read
# is refused (exit 2) naming chmod; an unknown role is a usage error; a controller on loopback
# refuses a node without its throwaway keys, and nodes started by hand with them prove keys
# of their own.
set -euo pipefail
bin="$1" out="$2"
rm -rf "$out" && mkdir -p "$out"
job="$(dirname "$0")/elastic.yaml"
x="$(dirname "$0")/expect_exit.sh"
# expect CODE PATTERN CMD...: CMD exits with CODE and its message has PATTERN; else says what
# it printed (a bare `| grep -q` failed once in CI without a word).
expect() {
  local code=$1 pattern=$2 got
  shift 2
  got=$("$x" "$code" "$@") || { echo "expected exit $code from: $*; got: $got"; return 1; }
  [[ $got == *"$pattern"* ]] || { echo "expected '$pattern' from: $*; got: $got"; return 1; }
}
"$bin" keygen --out "$out/ctl" --role controller > /dev/null
[ "$(stat -c %a "$out/ctl/controller.key")" = 600 ] || { echo "controller.key is not 0600"; exit 1; }
[ "$(stat -c %a "$out/ctl")" = 700 ] || { echo "the key directory is not 0700"; exit 1; }
grep -q "^role: controller" "$out/ctl/controller.pub"
if grep -q "secret" "$out/ctl/controller.pub"; then echo "controller.pub holds a secret"; exit 1; fi
expect 2 "dynapar keygen" "$bin" controller "$job" --bind tcp://0.0.0.0:5999 --allow-remote
# Keys but an empty authorized/ directory: nobody could connect.
expect 2 "authorized" "$bin" controller "$job" --keys "$out/ctl"
"$bin" keygen --out "$out/ctl/authorized" --role node --name node-a > /dev/null
rm "$out/ctl/authorized/node-a.key"
chmod 644 "$out/ctl/controller.key"
expect 2 "chmod 600" "$bin" controller "$job" --keys "$out/ctl"
expect 2 "role" "$bin" keygen --out "$out/x" --role admin
expect 2 "dynapar keygen" "$bin" node --controller tcp://127.0.0.1:9 --device 0 --keys "$out/nowhere"
# A controller on loopback serves CURVE with throwaway keys: a node without them is refused.
ep="tcp://127.0.0.1:$((20000 + ($$ % 20000) + 11))"
"$bin" controller "$job" --bind "$ep" --out "$out/run" --wait-s 20 --steps 4 > /dev/null 2> "$out/run.log" &
ctl=$!
trap 'kill -9 $ctl 2>/dev/null || true' EXIT
for _ in $(seq 600); do [ -f "$out/run/keys/controller.pub" ] && break; sleep 0.05; done
# The nodes' directory holds the nodes' own secrets only: the controller's and the operator's
# are in directories of their own, each of mode 0700; no key is shared by two nodes.
for d in keys keys-controller keys-operator; do
  [ "$(stat -c %a "$out/run/$d")" = 700 ] || { echo "$d is not 0700"; exit 1; }
done
[ "$(stat -c %a "$out/run/keys/device-0.key")" = 600 ] || { echo "the throwaway device-0.key is not 0600"; exit 1; }
for k in controller operator node; do
  [ ! -e "$out/run/keys/$k.key" ] || { echo "the nodes' directory holds $k.key"; exit 1; }
done
[ -f "$out/run/keys-controller/controller.key" ] && [ -f "$out/run/keys-operator/operator.key" ] || { echo "no controller or operator key"; exit 1; }
got=$("$bin" node --controller "$ep" --device 0 --connect-timeout-s 5 2>&1 || true)
[[ $got == *"CURVE"* ]] || { echo "a node without keys was not refused for CURVE: $got"; exit 1; }
# Two nodes started by hand with those keys each prove a key of their own (device-ID, ID
# their first device), not one shared node.key: the controller's log names both.
"$bin" node --controller "$ep" --keys "$out/run/keys" --device 0 --device 1 > /dev/null 2> "$out/left.log" &
"$bin" node --controller "$ep" --keys "$out/run/keys" --device 2 --device 3 > /dev/null 2> "$out/right.log" &
wait $ctl || { echo "the controller failed:"; tail -n 5 "$out/run.log"; exit 1; }
wait
for k in device-0 device-2; do
  grep -q "joined with 2 device(s), key node:$k\$" "$out/run.log" || { echo "no node joined with key $k:"; grep joined "$out/run.log"; exit 1; }
done
echo ok
