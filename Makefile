# Thin wrapper over CMake/CTest. Every target installs missing Debian
# packages first (deploy/install-deps.sh is quiet when all are present).
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build test demo bench format clean

all: build

deps:
	@./deploy/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The main job: until the training launcher lands, a short local run of
# two server processes and the push/pull benchmark against them.
demo: build
	$(BUILD)/bin/shardps-bench --spawn_servers=2 --workers=2 --params=1000000 --seconds=3

# The reference figures: one server, one worker, 1M and 10M floats.
bench: build
	$(BUILD)/bin/shardps-bench --spawn_servers=1 --workers=1 --params=1000000 --seconds=5 --json
	$(BUILD)/bin/shardps-bench --spawn_servers=1 --workers=1 --params=10000000 --seconds=5 --json
	$(BUILD)/bin/ps_kernels_bench

format:
	clang-format -i --style=Google $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD)
