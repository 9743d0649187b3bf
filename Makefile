# Thin wrapper over CMake/CTest. Every target installs missing Debian
# packages first (deploy/install-deps.sh is quiet when all are present).
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build test demo sweep scale bench format clean

all: build

deps:
	@./deploy/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# In CI (CI=true) a skipped test fails the run (tests/ci/check_skips.py).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) \
	    --output-junit $(abspath $(BUILD))/ctest-junit.xml
	@if [ "$$CI" = true ]; then \
	    python3 tests/ci/check_skips.py $(BUILD)/ctest-junit.xml; fi

# The main job: the A/B on the emulated cluster (baseline --servers=1
# --loader=sequential against the fix --servers=4 --loader=parallel at
# N = 1, 4, 8), a table and plots in experiments/results/demo/. Needs root
# for network namespaces (uses sudo otherwise).
# `make demo REAL=1`: the same A/B with a real model instead of emulated
# compute (the LeNet-class CNN of model/README.md, batch 64, Adam: plain
# SGD at rate 0.1 diverges on the synthetic data with 4 async workers),
# results in experiments/results/demo-cnn/.
DEMO_REAL_ARGS = --model=cnn:28x28x1-c32k5-p2-c64k5-p2-f1024-10 \
    --emulate_compute_ms=0 --batch=64 --optimizer=adam \
    --out=$(abspath experiments/results/demo-cnn)
demo: build
	/usr/bin/python3 experiments/demo.py $(if $(REAL),$(DEMO_REAL_ARGS))

# The full N x S x loader sweep with the performance model (~40 minutes).
sweep: build
	/usr/bin/python3 experiments/sweep.py

# The scale simulation (SimGrid): calibrate from the sweep's N = 1 and S = 1 runs and
# shardps-bench, validate on the other sweep points, predict N up to 1024
# and S up to 128; results in experiments/results/scale/.
scale: build
	/usr/bin/python3 experiments/scale.py

# The reference figures: one server, one worker, 1M and 10M floats.
bench: build
	$(BUILD)/bin/shardps-bench --spawn_servers=1 --workers=1 --params=1000000 --seconds=5 --json
	$(BUILD)/bin/shardps-bench --spawn_servers=1 --workers=1 --params=10000000 --seconds=5 --json
	$(BUILD)/bin/ps_kernels_bench

format:
	clang-format -i --style=Google $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD)
