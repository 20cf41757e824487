#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan+UBSan, in build-asan: the configuration that
# scripts/sanitize.sh asan runs the tests in) and runs each on its committed corpus
# (fuzz/corpus/<target>), two targets at a time, in one of three modes (UBFUSE_FUZZ_MODE):
#   explore (default)  mutate for UBFUSE_FUZZ_SECONDS per target; new inputs go to a work dir,
#                      build-asan/corpus/<target> (`make fuzz`)
#   replay             run every committed input once, no mutation (`make test`). Its outcome
#                      is the same on every run; exploring's is not (coverage here differs run to
#                      run even for one seed: threads, addresses), so exploring stays out of CI
#   merge              fold the work dir's inputs that add edge coverage into fuzz/corpus/<target>
#                      (libFuzzer -merge=1 -use_counters=0), to commit
#   scripts/fuzz.sh [target...]      default: every target
# Env: UBFUSE_FUZZ_SECONDS (explore, per target, default 60), UBFUSE_FUZZ_SEED (libFuzzer's -seed,
# default 0: from the clock), UBFUSE_FUZZ_JOBS (targets at once, default nproc), UBFUSE_JOBS
# (build jobs). A crash leaves its input in build-asan/artifacts/<target>/ and fails the script;
# rerun it with build-asan/fuzz_<target> <file>, fix it, add a regression test and copy the input
# into fuzz/corpus/<target>.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${UBFUSE_FUZZ_MODE:-explore}
SECONDS_EACH=${UBFUSE_FUZZ_SECONDS:-60}
JOBS=${UBFUSE_JOBS:-$(nproc)}
FUZZ_JOBS=${UBFUSE_FUZZ_JOBS:-$(nproc)}
DIR=build-asan
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then TARGETS=(rules options npy onnx graph); fi
case $MODE in
  explore | replay | merge) ;;
  *)
    echo "UBFUSE_FUZZ_MODE='$MODE': expected explore, replay or merge" >&2
    exit 2
    ;;
esac

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
  local common=(-timeout=20 -rss_limit_mb=3072 -print_final_stats=1 -artifact_prefix="$art")
  mkdir -p "$work" "$art"
  case $MODE in
    # New inputs go to the work dir; the committed corpus is read only.
    explore) args=(-seed="$SEED" -max_total_time="$SECONDS_EACH" "${common[@]}" "$work" "fuzz/corpus/$t") ;;
    replay) args=(-runs=0 "${common[@]}" "fuzz/corpus/$t") ;;
    merge) args=(-merge=1 -use_counters=0 "${common[@]}" "fuzz/corpus/$t" "$work") ;;
  esac
  if "./$DIR/fuzz_$t" "${args[@]}" >"$DIR/fuzz_$t.log" 2>&1; then
    echo "ok"
  else
    echo "CRASH"
  fi >"$DIR/fuzz_$t.status"
}
export -f run_one
SEED=${UBFUSE_FUZZ_SEED:-0}
export DIR MODE SECONDS_EACH SEED
printf '%s\n' "${TARGETS[@]}" | xargs -P "$FUZZ_JOBS" -I{} bash -c 'run_one {}'
t2=$(date +%s)

status=0
printf '[fuzz] %-8s %-6s %12s %8s %8s\n' target result executions exec/s corpus
for t in "${TARGETS[@]}"; do
  log=$DIR/fuzz_$t.log
  res=$(cat "$DIR/fuzz_$t.status")
  # A merge prints no final stats: the greps may find nothing.
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1 || true)
  rate=$(grep -o 'stat::average_exec_per_sec: [0-9]*' "$log" | awk '{print $2}' | tail -1 || true)
  if [[ $MODE == explore ]]; then corpus_dir=$DIR/corpus/$t; else corpus_dir=fuzz/corpus/$t; fi
  corpus=$(find "$corpus_dir" -type f | wc -l)
  printf '[fuzz] %-8s %-6s %12s %8s %8s\n' "$t" "$res" "${execs:-?}" "${rate:-?}" "$corpus"
  if [[ $res != ok ]]; then
    status=1
    echo "[fuzz] $t failed; the end of $log:"
    tail -n 60 "$log"
    ls -l "$DIR/artifacts/$t/"
  fi
done
case $MODE in
  explore) what="${SECONDS_EACH} s per target" ;;
  replay) what="each committed input once" ;;
  merge) what="merged into fuzz/corpus" ;;
esac
echo "[fuzz] $MODE: $((t2 - t1)) s ($what, $FUZZ_JOBS targets at once), status $status"
exit $status
