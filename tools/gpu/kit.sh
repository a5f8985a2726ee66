#!/usr/bin/env bash
# Here (Debian 12, network): gathers the Debian packages a GPU build needs besides LibTorch,
# as .deb files, into a folder to carry to the device machine (which has CUDA, PyTorch's
# LibTorch and NCCL but no package registry). Downloads only; installs nothing.
#   tools/gpu/kit.sh [DIR]        (default: .gpu-kit, ignored by git)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$here/.gpu-kit}
mkdir -p "$out"
cd "$out"

wanted=(libcaf-dev libzmq3-dev cppzmq-dev libsodium-dev capnproto libcapnp-dev libspdlog-dev libfmt-dev catch2 libyaml-cpp-dev
        libcli11-dev nlohmann-json3-dev zlib1g-dev libcpp-httplib-dev pkgconf libstb-dev
        dataset-fashion-mnist fortunes)
# What any Linux with a C++ compiler has already (the C library, the compiler's runtime),
# and development packages of dependencies we never link directly (their .so stays): taking
# these along would only shadow the machine's own or bloat the kit.
skip='^(libc6|libc6-dev|libc-dev-bin|libcrypt1|libcrypt-dev|libgcc-s1|libstdc\+\+6|gcc-12-base|linux-libc-dev|libicu-dev|icu-devtools|libxml2-dev|libxml2|libicu72|krb5-multidev|libkrb5-dev|comerr-dev|libgssrpc4|libkadm5clnt-mit12|libkadm5srv-mit12|libkdb5-10|libnsl-dev|libnsl2|libtirpc-dev|libtirpc3|libtirpc-common|rpcsvc-proto|libmd-dev|libbsd-dev|liblzma5|zlib1g|libcom-err2|libkeyutils1)$'
mapfile -t closure < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
  --no-enhances --no-pre-depends "${wanted[@]}" | grep -v '^[ <]' | sort -u | grep -Ev "$skip")
rm -f ./*.deb
# (As root apt warns that it downloads unsandboxed: harmless here, so not shown.)
apt-get download "${closure[@]}" 2>&1 >/dev/null | grep -v "unsandboxed" || true
got=$(ls ./*.deb 2>/dev/null | wc -l)
if ((got != ${#closure[@]})); then
  echo "kit: only $got of ${#closure[@]} packages downloaded (is apt's package list current? apt-get update)" >&2
  exit 1
fi
echo "kit: $got packages, $(du -sh . | cut -f1) in $out"
