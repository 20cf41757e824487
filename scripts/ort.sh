#!/usr/bin/env bash
# onnxruntime (npm's onnxruntime-node, CPU) as a peer: runs a model on .npy inputs and writes its
# outputs as .npy, or times it. Installs onnxruntime-node on first use into a cache folder.
# Used only to make stored reference files and by the model benchmarks, never by `make test`.
#
#   scripts/ort.sh MODEL.onnx --in NAME=FILE.npy ... --out-dir DIR [--opt all|disabled]
#                  [--threads 2] [--time N] [--json]        (all options: scripts/ort.sh --help)
#   scripts/ort.sh --install     install if needed; print the folder and the version
#   scripts/ort.sh --version     print the onnxruntime version (installs if needed)
#
# Env: UBFUSE_ORT_VERSION (default 1.30.0), UBFUSE_ORT_DIR (default
# ${XDG_CACHE_HOME:-~/.cache}/ubfuse/ort-<version>). Exit status 3: node or npm is missing or
# the install failed; 2: bad arguments or onnxruntime refused the model.
#
# The install runs `npm install --ignore-scripts`: the package's postinstall script only fetches
# the CUDA execution provider from NuGet (linux/x64); the CPU library and its Node binding
# (bin/napi-v6/<platform>/<arch>/) are inside the npm tarball, so npm's registry is all it needs.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VERSION="${UBFUSE_ORT_VERSION:-1.30.0}"
DIR="${UBFUSE_ORT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ubfuse/ort-$VERSION}"

missing() {
  echo "ort.sh: $1 not found. onnxruntime-node needs Node.js >= 18 and npm" \
    "(Debian: apt-get install nodejs npm). It is only used to make reference files and for" \
    "benchmarks; make test does not need it." >&2
  exit 3
}

command -v node >/dev/null 2>&1 || missing node
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$NODE_MAJOR" -lt 18 ]; then
  echo "ort.sh: node $(node --version) is too old; onnxruntime-node $VERSION wants >= 18" >&2
  exit 3
fi

PLATFORM="$(node -p 'process.platform + "/" + process.arch')"
BINDING="node_modules/onnxruntime-node/bin/napi-v6/$PLATFORM/onnxruntime_binding.node"
# Loads the native binding and prints the version: proves the install works, not just that it exists.
probe() {
  (cd "$1" && node -e "const o=require('onnxruntime-node'); process.stdout.write(o.env.versions.node)")
}

install() {
  if [ -f "$DIR/$BINDING" ] && probe "$DIR" >/dev/null 2>&1; then
    return
  fi
  command -v npm >/dev/null 2>&1 || missing npm
  echo "ort.sh: installing onnxruntime-node@$VERSION into $DIR (once; about 300 MB)" >&2
  mkdir -p "$(dirname "$DIR")"
  local tmp
  tmp="$(mktemp -d "$DIR.tmp.XXXXXX")"
  echo '{"name": "ubfuse-ort-peer", "private": true}' >"$tmp/package.json"
  if ! (cd "$tmp" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
    "onnxruntime-node@$VERSION" >&2); then
    rm -rf "$tmp"
    echo "ort.sh: npm install onnxruntime-node@$VERSION failed (is the npm registry reachable?)" >&2
    exit 3
  fi
  if [ ! -f "$tmp/$BINDING" ]; then
    rm -rf "$tmp"
    echo "ort.sh: onnxruntime-node@$VERSION ships no CPU binding for $PLATFORM ($BINDING)" >&2
    exit 3
  fi
  if ! probe "$tmp" >/dev/null; then
    rm -rf "$tmp"
    echo "ort.sh: onnxruntime-node@$VERSION installed but its native binding does not load" >&2
    exit 3
  fi
  rm -rf "$DIR"
  mv "$tmp" "$DIR"
}

case "${1:-}" in
  --install)
    install
    echo "$DIR onnxruntime-node $(probe "$DIR")"
    ;;
  --version)
    install
    probe "$DIR"
    echo
    ;;
  "" | -h | --help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    echo
    UBFUSE_ORT_DIR=/nonexistent node "$HERE/ort_run.mjs" --help
    ;;
  *)
    install
    UBFUSE_ORT_DIR="$DIR" exec node "$HERE/ort_run.mjs" "$@"
    ;;
esac
