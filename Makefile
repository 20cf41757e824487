# Entry points. `make demo` and `make test` install what they need (scripts/install-deps.sh).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build demo test test-hardening fuzz bench bench-models bench-decode format clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/ubfuse demo --mode both

test: build
	cd $(BUILD) && OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-PASSIVE} GOMP_SPINCOUNT=$${GOMP_SPINCOUNT:-0} ctest --output-on-failure -j $(JOBS)
	bash scripts/extra-tests.sh $(BUILD)

# The cost model's fixed figures in every stage (sanitizer builds run the tests' binary directly).
test test-hardening: export UBFUSE_COST_MODEL ?= builtin

# ASan+UBSan suite, ThreadSanitizer concurrency tests, fuzz corpus replay (each its own build).
test-hardening: deps
	UBFUSE_EXTRA_STAGES="asan tsan fuzz" bash scripts/extra-tests.sh $(BUILD)

# Explore with libFuzzer: UBFUSE_FUZZ_SECONDS (60) per target, a fresh seed each run.
fuzz: deps
	UBFUSE_FUZZ_MODE=explore bash scripts/fuzz.sh

bench: build
	@for b in $(BUILD)/bench_*; do echo "== $$b"; $$b || exit 1; done

# Whole models against onnxruntime-node from npm (installed on first use; needs node and npm).
# The models are exported on first use into $(BUILD)/bench_models. Not part of `make test`.
PYTHON ?= /usr/bin/python3
bench-models: build
	$(PYTHON) bench/models_bench.py --build $(BUILD) $(BENCH_MODELS_ARGS)

# Per-token decode latency at batch 1 of the examples' greedy loops (the test decoder and the
# Whisper-shaped model): ubfuse graph and eager against onnxruntime-node (all, disabled), 2 and 1
# threads, tokens checked against tests/models/refs. Needs node and npm. Not part of `make test`.
bench-decode: build
	$(PYTHON) bench/decode_bench.py --build $(BUILD) $(BENCH_DECODE_ARGS)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf $(BUILD)
