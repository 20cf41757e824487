#!/usr/bin/env bash
# Test stages that are not plain ctest runs, called by `make test` after ctest:
#   asan  ASan+UBSan build of the library and tests, the suite run under it  (scripts/sanitize.sh)
#   tsan  ThreadSanitizer build of the library and the Concurrency* tests     (scripts/sanitize.sh)
#   fuzz  libFuzzer targets replaying every committed corpus input (scripts/fuzz.sh, replay mode)
# Env: UBFUSE_EXTRA_STAGES picks stages (default "asan tsan fuzz"; "none" skips them all, for a
# quick local loop). Each stage runs in its own build dir (build-asan shared by asan and fuzz,
# build-tsan); the script fails if any fails. On a 2-core machine they take 6-13 min (asan: its
# build, then the suite), 1-3 min (tsan) and about a minute (fuzz replay); docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every stage builds its own configuration; $1, the normal build dir, tells the asan stage which
# compiler that build builds generated kernels with (scripts/sanitize.sh).
export UBFUSE_BUILD_DIR=${1:-${UBFUSE_BUILD_DIR:-build}}
STAGES=${UBFUSE_EXTRA_STAGES:-asan tsan fuzz}
[[ $STAGES == none ]] && STAGES=""

failed=()
summary=()
for stage in $STAGES; do
  echo
  echo "==== extra-tests: $stage ===="
  t0=$(date +%s)
  case $stage in
    asan | tsan) cmd=(bash scripts/sanitize.sh "$stage") ;;
    # Replay, not exploration: its outcome depends only on the tree. Mutation runs differ run to
    # run even for one seed (coverage depends on threads and addresses), so a red CI run would
    # hinge on luck, not on the change; exploring is `make fuzz`, and each finding it makes
    # joins the corpus replayed here.
    fuzz) cmd=(env UBFUSE_FUZZ_MODE=replay bash scripts/fuzz.sh) ;;
    *)
      echo "unknown stage '$stage' (asan, tsan, fuzz)" >&2
      exit 2
      ;;
  esac
  if "${cmd[@]}"; then res=ok; else res=FAILED; failed+=("$stage"); fi
  summary+=("$(printf '%-5s %-6s %5d s' "$stage" "$res" $(($(date +%s) - t0)))")
done
echo
echo "==== extra-tests summary ===="
for line in "${summary[@]}"; do echo "$line"; done
if ((${#failed[@]})); then
  echo "extra-tests: FAILED: ${failed[*]}"
  exit 1
fi
echo "extra-tests: ok"
