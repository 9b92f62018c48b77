# Thin wrapper over CMake. `make demo` and `make test` install what is missing,
# configure a Release build in build/, build, then run.
BUILD_DIR ?= build
JOBS      ?= $(shell nproc)
CMAKE_ARGS ?=
BENCH_ARGS ?= --benchmark_repetitions=5 --benchmark_report_aggregates_only

.PHONY: all deps configure build demo test test-slow test-all bench lint format docs cosim clean help

all: build

help:
	@echo "make demo       install deps, build, compare CPU and the simulated TPU (both engines) on 1,000 MNIST images"
	@echo "make test       install deps, build, run the fast test suite (ctest -L fast)"
	@echo "make test-slow  the slow tests (ctest -L slow)"
	@echo "make test-all   every test"
	@echo "make bench      Google Benchmarks: RTL simulation speed (builds N=64), CPU inference, training"
	@echo "make lint       verilator --lint-only -Wall over rtl/"
	@echo "make format     clang-format every C++ source in place (.clang-format; the fast suite checks it)"
	@echo "make docs       rewrite the tables in docs/ generated from contract/tpu_contract.toml"
	@echo "make cosim      the rtl and fast engines on 2,000 random programs per built size up to 32, 25 on tpu-v1"
	@echo "make clean      remove $(BUILD_DIR)/"

deps:
	@scripts/install-deps

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

configure: deps $(BUILD_DIR)/CMakeCache.txt

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	$(BUILD_DIR)/tpusim compare --images 1000 --configs small-16 --engines rtl,fast

test: build
	cd $(BUILD_DIR) && ctest -L fast -j $(JOBS) --output-on-failure

test-slow: build
	cd $(BUILD_DIR) && ctest -L slow -j $(JOBS) --output-on-failure

test-all: build
	cd $(BUILD_DIR) && ctest -j $(JOBS) --output-on-failure

bench: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target tpusim_bench tpusim_nn_bench tpusim_chip_bench
	$(BUILD_DIR)/bench/tpusim_bench $(BENCH_ARGS)
	$(BUILD_DIR)/bench/tpusim_nn_bench $(BENCH_ARGS)
	$(BUILD_DIR)/bench/tpusim_chip_bench $(BENCH_ARGS)

# The RTL includes the contract generated from contract/tpu_contract.toml.
RTL_GEN := $(BUILD_DIR)/generated/rtl
RTL_SOURCES := rtl/tpu_pkg.sv $(filter-out rtl/tpu_pkg.sv rtl/tpu_top.sv,$(wildcard rtl/*.sv))
lint: deps
	/usr/bin/python3 contract/gen_contract.py --sv $(RTL_GEN)/tpu_contract.svh
	verilator --lint-only -Wall --assert -I$(RTL_GEN) $(RTL_SOURCES) rtl/tpu_top.sv --top-module tpu_top
	verilator --lint-only -Wall --assert -I$(RTL_GEN) $(RTL_SOURCES) --top-module tpu_mxu_top

format:
	find bench fast host sim tests \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) -print0 | xargs -0 clang-format -i

docs:
	/usr/bin/python3 contract/gen_contract.py --docs docs

cosim: build
	cd $(BUILD_DIR) && ctest -R '^cosim_slow' --output-on-failure

clean:
	rm -rf $(BUILD_DIR)
