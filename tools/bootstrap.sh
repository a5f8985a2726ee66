#!/usr/bin/env bash
# dynapar's two commands on a fresh Debian 12 machine (as root):
#   tools/bootstrap.sh demo   install packages, build, run the main demo
#   tools/bootstrap.sh test   install packages, build, run every test through ctest
# Idempotent: packages already present are not reinstalled, the build is incremental (ccache).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
mode=${1:-}
case "$mode" in
  demo|test|build) ;;
  *) echo "usage: tools/bootstrap.sh demo|test|build" >&2; exit 2 ;;
esac

packages=(
  cmake g++ ninja-build pkg-config ccache
  libcaf-dev libzmq3-dev cppzmq-dev libsodium-dev capnproto libcapnp-dev libgloo-dev
  libtorch-dev libopenblas0-pthread
  libspdlog-dev catch2 libyaml-cpp-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  dataset-fashion-mnist gnuplot-nox
  fortunes                                    # the text corpus (data: fortunes)
  libstb-dev                                  # images of your own (data: {kind: images}) decode with stb_image
  libjpeg62-turbo-dev                         # and their JPEGs with libjpeg-turbo, at a reduced scale
  libcpp-httplib-dev                          # the live dashboard
  chromium chromium-driver python3-selenium   # its test in a real headless browser
  python3-torch python3-torchvision python3-numpy   # tools/export (your own model) and its eager PyTorch reference
)
# The tests' fuzzers need clang with its libFuzzer runtime (tests/fuzz).
[[ $mode == test ]] && packages+=(clang libclang-rt-14-dev)
# A one-machine Slurm for tests/cli/slurm.sh (its daemons run only for that test).
[[ $mode == test ]] && packages+=(slurm-wlm munge)
# promtool (Debian's prometheus) lints the dashboard's /metrics (tests/cli/dashboard_browser.py).
[[ $mode == test ]] && packages+=(prometheus)

install_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "bootstrap: installing ${missing[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo=sudo
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  else
    echo "bootstrap: all Debian packages present"
  fi
}

build() {  # extra arguments go to cmake
  local jobs
  jobs=$(nproc)
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
  # LibTorch's precompiled header (runtime/model) is cacheable only with these.
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
  # Line tables only (-g1): backtraces still name files and lines, and LibTorch's templates
  # compile a quarter faster than with full debug information.
  # DYNAPAR_UNITY: the targets over LibTorch and CAF compiled a batch of files at a time (a
  # fresh build's compile time more than halved: CMakeLists.txt).
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DDYNAPAR_UNITY=ON "$@"
  # Torch translation units take ~1.5 GB each: cap parallelism by memory as well as cores.
  cmake --build build -j "$jobs"
}

install_packages
if [[ $mode == test ]]; then build -DDYNAPAR_FUZZ=ON -DDYNAPAR_WERROR=ON; else build; fi
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
case "$mode" in
  demo)
    echo "bootstrap: demo: the CNN on Fashion-MNIST over 6 emulated devices (2 GPU-class, 4 edge devices too small for the model alone),"
    echo "  re-planned online by joint_lyapunov, then dp_even, dp_balanced and dp_dispatch side by side on the same devices (a few minutes on 2 cores)"
    build/bin/dynapar train examples/jobs/flagship.yaml --verify --compare dp_even,dp_balanced,dp_dispatch --out out/demo
    build/bin/dynapar report out/demo
    ;;
  test)
    # Every tier's skips are counted and named at its end (a test skips only outside CI, with
    # its reason; in CI the tests that could skip fail instead: docs/TESTING.md).
    run_ctest() {  # DIR: its ctest, the skips said
      (cd "$1" && LSAN_OPTIONS="suppressions=$here/tests/lsan.supp" ctest --output-on-failure -j "$(nproc)" --timeout 600) | tee "$1/ctest.log"
      local skipped  # ctest's "did not run" list: "<tab>NUMBER - NAME (Skipped)"
      skipped=$(sed -nE 's/^[[:space:]]*[0-9]+ - (.*) \(Skipped\)$/\1/p' "$1/ctest.log")
      echo "bootstrap: $1: $(grep -c . <<< "$skipped" || true) test(s) skipped"
      [ -z "$skipped" ] || sed 's/^/  skipped: /' <<< "$skipped"
    }
    run_ctest build
    # The libraries, the actors and their tests again under AddressSanitizer + UBSan, and the
    # code that runs threads without LibTorch and CAF under ThreadSanitizer (docs/TESTING.md).
    for san in address,undefined thread; do
      dir=build-${san%%,*}
      cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DDYNAPAR_SANITIZE="$san" \
        -DDYNAPAR_UNITY=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache > /dev/null
      cmake --build "$dir" -j "$(nproc)"
      run_ctest "$dir"
    done
    ;;
  build) ;;
esac
