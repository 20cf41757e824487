#!/usr/bin/env bash
# Test stages that are not plain ctest runs, called by `make test` after ctest:
#   asan  ASan+UBSan build of the library and tests, the suite run under it  (scripts/sanitize.sh)
#   tsan  ThreadSanitizer build, the Concurrency* tests                       (scripts/sanitize.sh)
#   fuzz  libFuzzer targets, each for UBFUSE_FUZZ_SECONDS (default 60)       (scripts/fuzz.sh)
# Env: UBFUSE_EXTRA_STAGES picks stages (default none, see below; "asan tsan fuzz" runs all). Each stage
# runs in its own build dir (build-asan, build-tsan, build-fuzz); the script fails if any fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# $1, the normal build dir, is not needed: every stage builds its own configuration.
# The stages are not yet verified end to end on a clean machine (issue 7 stays open until they
# are), so `make test` runs none by default; `make test-hardening` runs all three.
STAGES=${UBFUSE_EXTRA_STAGES:-none}
[[ $STAGES == none ]] && STAGES=""

failed=()
summary=()
for stage in $STAGES; do
  echo
  echo "==== extra-tests: $stage ===="
  t0=$(date +%s)
  case $stage in
    asan | tsan) cmd=(bash scripts/sanitize.sh "$stage") ;;
    fuzz) cmd=(bash scripts/fuzz.sh) ;;
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
