#!/usr/bin/env bash
# Sanitizer builds of the library and tests, in their own build dirs:
#   scripts/sanitize.sh asan   ASan+UBSan (clang-14, -O1 -gline-tables-only) in build-asan, the
#                              configuration the fuzz targets share (fuzz/fuzz.cmake), so the
#                              library is built once for both; runs the suite minus
#                              UBFUSE_ASAN_EXCLUDE in 2 shards
#   scripts/sanitize.sh tsan   ThreadSanitizer (gcc, -O1 -g1) in build-tsan: Concurrency* only, from
#                              their own binary (ubfuse_concurrency_tests: concurrency_test.cc)
#   scripts/sanitize.sh asan-configure   only configures build-asan (used by scripts/fuzz.sh)
# Env: UBFUSE_JOBS (build jobs, default nproc), UBFUSE_ASAN_FILTER / UBFUSE_TSAN_FILTER (gtest
# filters overriding the defaults), UBFUSE_BUILD_DIR (the normal build, default build: its compiler
# builds the asan stage's generated kernels), UBFUSE_CXX (that compiler, given directly).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?usage: sanitize.sh asan|tsan|asan-configure}
JOBS=${UBFUSE_JOBS:-$(nproc)}

# Tests left out of the ASan run, with why (docs/reliability.md): none so far.
UBFUSE_ASAN_EXCLUDE=${UBFUSE_ASAN_EXCLUDE:-}

# Highway kernels for the one target this machine runs (instead of every AVX level): a third of
# the compile time, and the same code path the normal build dispatches to here.
# Line tables only (-gline-tables-only, -g1, per mode below): reports still name file and line,
# and full debug info would only lengthen the builds.
COMMON=(-G Ninja -DCMAKE_BUILD_TYPE=Release
  "-DCMAKE_CXX_FLAGS=-march=native -DHWY_COMPILE_ONLY_STATIC=1" -DUBFUSE_BUILD_BENCH=OFF)

# The C++ compiler of the normal build ($UBFUSE_BUILD_DIR, default build), which it also builds
# generated kernels with; CMake's default (c++) where that build is not configured.
normal_cxx() {
  local cache=${UBFUSE_BUILD_DIR:-build}/CMakeCache.txt
  if [[ -f $cache ]] && grep -q '^CMAKE_CXX_COMPILER:' "$cache"; then
    sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$cache"
  else
    command -v c++
  fi
}

case "$MODE" in
  asan | asan-configure)
    DIR=build-asan
    DEBUG=-gline-tables-only
    # The test sources at -O0 compile in about half the time and run no slower here: the
    # checking happens in the library, and each shard is one process.
    FLAGS=(-DCMAKE_CXX_COMPILER=clang++-14 -DUBFUSE_FUZZ=ON -DUBFUSE_BUILD_TESTS=ON
      -DUBFUSE_TEST_COMPILE_OPTIONS=-O0)
    FILTER=${UBFUSE_ASAN_FILTER:-*${UBFUSE_ASAN_EXCLUDE:+-$UBFUSE_ASAN_EXCLUDE}}
    TESTS=ubfuse_tests
    SHARDS=2
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:check_initialization_order=1
    # Generated kernels are compiled by the normal build's compiler, not clang: they are not
    # instrumented either way, and the kernel cache ctest's stage filled then serves them.
    # UBFUSE_CXX set before this script keeps its value.
    export UBFUSE_CXX=${UBFUSE_CXX:-$(normal_cxx)}
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ;;
  tsan)
    DIR=build-tsan
    DEBUG=-g1
    FLAGS=(-DUBFUSE_TSAN=ON)
    FILTER=${UBFUSE_TSAN_FILTER:-Concurrency*}
    TESTS=ubfuse_concurrency_tests  # tests/concurrency_test.cc alone: half the build
    SHARDS=1
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp"
    # oneDNN threads with libgomp, which TSan cannot see into: one OpenMP thread per call keeps
    # TSan's view exact; the ThreadPool and the 8 caller threads still run concurrently.
    export OMP_NUM_THREADS=1
    ;;
  *)
    echo "sanitize.sh: unknown mode '$MODE' (asan|tsan|asan-configure)" >&2
    exit 2
    ;;
esac

# The tests' fixed cost-model figures, as `make test` sets them: kernel counts must not depend on
# this machine's calibration.
export UBFUSE_COST_MODEL=${UBFUSE_COST_MODEL:-builtin}

t0=$(date +%s)
cmake -S . -B "$DIR" "${COMMON[@]}" "-DCMAKE_CXX_FLAGS_RELEASE=-O1 $DEBUG" "${FLAGS[@]}" >/dev/null
[[ $MODE == asan-configure ]] && exit 0
cmake --build "$DIR" -j "$JOBS" --target "$TESTS"
t1=$(date +%s)
echo "[$MODE] build: $((t1 - t0)) s"
if [[ $MODE == asan ]]; then echo "[asan] generated kernels built by $UBFUSE_CXX"; fi

# Shards run side by side (gtest's GTEST_TOTAL_SHARDS); each writes its own log.
pids=()
for ((i = 0; i < SHARDS; i++)); do
  GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$i "./$DIR/$TESTS" --gtest_filter="$FILTER" \
    --gtest_brief=1 >"$DIR/test-shard$i.log" 2>&1 &
  pids+=($!)
done
status=0
for ((i = 0; i < SHARDS; i++)); do
  if ! wait "${pids[$i]}"; then
    status=1
    echo "[$MODE] shard $i FAILED; the end of its log:"
    tail -n 80 "$DIR/test-shard$i.log"
  fi
done
t2=$(date +%s)
grep -h '^\[  PASSED  \]\|^\[  FAILED  \]\|^\[  SKIPPED \]' "$DIR"/test-shard*.log || true
echo "[$MODE] tests ($FILTER): $((t2 - t1)) s, status $status"
exit $status
