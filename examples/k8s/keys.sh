#!/bin/bash
# Keys for examples/k8s (not run here): keys.sh N makes the controller's key and N device keys
# in ./k8s-keys and prints the kubectl commands that turn them into the two Secrets.
set -euo pipefail
n=${1:?usage: keys.sh NUMBER_OF_DEVICES}
dir=k8s-keys
names=()
for i in $(seq 0 $((n - 1))); do names+=(--name "device-$i"); done
dynapar keygen --out "$dir" --role node --authorize "${names[@]}" > /dev/null
dynapar keygen --out "$dir" --role controller > /dev/null
echo "kubectl create secret generic dynapar-controller-keys --from-file=controller.key=$dir/controller.key \\"
for i in $(seq 0 $((n - 1))); do echo "  --from-file=device-$i.pub=$dir/authorized/device-$i.pub \\"; done
echo "  # the controller mounts the .pub files under /keys/authorized (controller.yaml)"
echo "kubectl create secret generic dynapar-node-keys --from-file=controller.pub=$dir/controller.pub \\"
for i in $(seq 0 $((n - 1))); do echo "  --from-file=device-$i.key=$dir/device-$i.key \\"; done
echo "  # every node pod mounts all keys and proves its own, device-ORDINAL (nodes.yaml)"
