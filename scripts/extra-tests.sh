#!/usr/bin/env bash
# Test stages that are not plain ctest runs (sanitizer builds, bounded fuzzing). Each stage adds
# itself here; the script fails if any stage fails.
set -euo pipefail
BUILD=${1:-build}
echo "extra-tests: none configured yet"
