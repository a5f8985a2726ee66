#!/usr/bin/env bash
# install_test.sh BUILD_DIR SOURCE_DIR WORK: `cmake --install` puts dynapar in WORK/prefix; a
# project of its own (tests/install/CMakeLists.txt) finds it with find_package(dynapar),
# builds examples/actor_api.cpp against it, and runs it. Nothing of the source or build tree
# may be on the consumer's include path: only the installed headers.
set -euo pipefail
build="$1" src="$2" work="$3"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
[ -f "$work/prefix/lib/cmake/dynapar/dynaparConfig.cmake" ] || { echo "no dynaparConfig.cmake installed"; exit 1; }
# The public headers and nothing else: the same files as the tree's include/dynapar.
(cd "$src/include/dynapar" && find . -type f | sort) > "$work/public.txt"
(cd "$work/prefix/include/dynapar" && find . -type f | sort) > "$work/installed.txt"
diff "$work/public.txt" "$work/installed.txt" > "$work/headers.diff" ||
  { echo "installed headers differ from include/dynapar (< public only, > installed only):"; cat "$work/headers.diff"; exit 1; }
grep -q "actors/api.hpp" "$work/installed.txt" || { echo "actors/api.hpp not installed"; exit 1; }
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$src/tests/install" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DACTOR_API_SOURCE="$src/examples/actor_api.cpp" "${launcher[@]}" > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
# The consumer compiled against the prefix, not against this tree.
/usr/bin/python3 - "$work/consumer/compile_commands.json" "$src" "$work/prefix" <<'PY'
import json, shlex, sys
cmd = shlex.split(json.load(open(sys.argv[1]))[0]["command"])
src, prefix = sys.argv[2], sys.argv[3]
inc = [cmd[i + 1] if a in ("-I", "-isystem") else a[2:] for i, a in enumerate(cmd)
       if a in ("-I", "-isystem") or (a.startswith("-I") and len(a) > 2)]
assert prefix + "/include/dynapar" in inc, "the installed headers are not on the include path: %s" % inc
bad = [d for d in inc if d.startswith(src) and not d.startswith(prefix)]
assert not bad, "the consumer reached into the source or build tree: %s" % bad
PY
OPENBLAS_NUM_THREADS=1 "$work/consumer/actor_api"
