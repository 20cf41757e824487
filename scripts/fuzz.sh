#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan+UBSan, in build-asan: the configuration that
# scripts/sanitize.sh asan runs the tests in) and runs each for a bounded time
# on a copy of its committed seed corpus (fuzz/corpus/<target>), two at a time.
#   scripts/fuzz.sh [target...]      default: every target
# Env: UBFUSE_FUZZ_SECONDS (per target, default 60), UBFUSE_FUZZ_SEED (libFuzzer's -seed, default 0:
# from the clock; set it to replay a run), UBFUSE_FUZZ_JOBS (targets at once, default
# nproc), UBFUSE_JOBS (build jobs). A crash leaves its input in build-asan/artifacts/<target>/ and
# fails the script; rerun it with build-asan/fuzz_<target> <file>, then add a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${UBFUSE_FUZZ_SECONDS:-60}
JOBS=${UBFUSE_JOBS:-$(nproc)}
FUZZ_JOBS=${UBFUSE_FUZZ_JOBS:-$(nproc)}
DIR=build-asan
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then TARGETS=(rules options npy onnx graph); fi

t0=$(date +%s)
bash scripts/sanitize.sh asan-configure  # the ASan+UBSan configuration, shared
cmake --build "$DIR" -j "$JOBS" --target "${TARGETS[@]/#/fuzz_}"
t1=$(date +%s)
echo "[fuzz] build: $((t1 - t0)) s"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export UBFUSE_NUM_THREADS=${UBFUSE_NUM_THREADS:-2}

run_one() {
  local t=$1 work=$DIR/corpus/$1 art=$DIR/artifacts/$1/
  mkdir -p "$work" "$art"
  # New inputs go to the work dir; the committed seeds are read only.
  # UBFUSE_FUZZ_SEED replays a run's mutation sequence.
  if "./$DIR/fuzz_$t" -seed="$SEED" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=3072 \
    -print_final_stats=1 -artifact_prefix="$art" "$work" "fuzz/corpus/$t" >"$DIR/fuzz_$t.log" 2>&1; then
    echo "ok"
  else
    echo "CRASH"
  fi >"$DIR/fuzz_$t.status"
}
export -f run_one
SEED=${UBFUSE_FUZZ_SEED:-0}
export DIR SECONDS_EACH SEED
printf '%s\n' "${TARGETS[@]}" | xargs -P "$FUZZ_JOBS" -I{} bash -c 'run_one {}'
t2=$(date +%s)

status=0
printf '[fuzz] %-8s %-6s %12s %8s %8s\n' target result executions exec/s corpus
for t in "${TARGETS[@]}"; do
  log=$DIR/fuzz_$t.log
  res=$(cat "$DIR/fuzz_$t.status")
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: [0-9]*' "$log" | awk '{print $2}' | tail -1)
  corpus=$(find "$DIR/corpus/$t" -type f | wc -l)
  printf '[fuzz] %-8s %-6s %12s %8s %8s\n' "$t" "$res" "${execs:-?}" "${rate:-?}" "$corpus"
  if [[ $res != ok ]]; then
    status=1
    echo "[fuzz] $t failed; the end of $log:"
    tail -n 60 "$log"
    ls -l "$DIR/artifacts/$t/"
  fi
done
echo "[fuzz] run: $((t2 - t1)) s (${SECONDS_EACH} s per target, $FUZZ_JOBS at once), status $status"
exit $status
