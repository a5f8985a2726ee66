#!/usr/bin/env bash
# There (the device machine: CUDA, PyTorch with its LibTorch and NCCL, no package registry):
# unpacks the kit of Debian packages (tools/gpu/kit.sh) into a prefix and builds dynapar
# against the Python package's LibTorch with CUDA. The CPU build is untouched by this.
#   tools/gpu/build.sh [TARGET...]     (default: every target)
# Environment: KIT (.gpu-kit), PREFIX (/tmp/dynapar-prefix), BUILD (build-gpu), JOBS (nproc).
# Source tools/gpu/env.sh afterwards to run what was built.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$here"
kit=${KIT:-$here/.gpu-kit}
export PREFIX=${PREFIX:-/tmp/dynapar-prefix}
build=${BUILD:-$here/build-gpu}

ls "$kit"/*.deb >/dev/null 2>&1 || { echo "build.sh: no .deb files in $kit (run tools/gpu/kit.sh where apt works)" >&2; exit 2; }
if [[ ! -f $PREFIX/.unpacked ]]; then
  mkdir -p "$PREFIX"
  for f in "$kit"/*.deb; do dpkg -x "$f" "$PREFIX"; done
  # Debian's .pc and CMake files name /usr: point them at the prefix.
  find "$PREFIX" \( -name '*.pc' -o -name '*.cmake' \) -print0 |
    xargs -0 sed -i -E -e "s#^prefix=/usr\$#prefix=$PREFIX/usr#" \
      -e "s#(^|[ =\"';(])/usr/(include|lib|share|bin)#\1$PREFIX/usr/\2#g"
  touch "$PREFIX/.unpacked"
fi
source "$here/tools/gpu/env.sh"

torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
nccl_root=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)
echo "build.sh: LibTorch $(python3 -c 'import torch; print(torch.__version__)') at $torch_prefix; NCCL at ${nccl_root:-(none)}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX/usr;$torch_prefix" \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=native \
  -DNCCL_ROOT="$nccl_root" -DDYNAPAR_WITH_NCCL=AUTO \
  -DDYNAPAR_DATASET_DIR="$PREFIX/usr/share/datasets/fashion-mnist" -DDYNAPAR_FORTUNES_DIR="$PREFIX/usr/share/games/fortunes"
cmake --build "$build" -j "${JOBS:-$(nproc)}" -- -k 0 "$@"
