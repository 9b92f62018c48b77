# Thin wrapper over CMake. `make demo` and `make test` install what is missing,
# configure a Release build in build/, build, then run.
BUILD_DIR ?= build
JOBS      ?= $(shell nproc)
CMAKE_ARGS ?=
BENCH_ARGS ?= --benchmark_repetitions=5 --benchmark_report_aggregates_only

.PHONY: all deps configure build demo test test-slow test-all test-soak bench lint format docs cosim coverage fuzz test-asan test-tsan clean help

all: build

help:
	@echo "make demo       install deps, build what the demo runs (a first time: the CLI and one chip's RTL), compare CPU and the simulated TPU (both engines) on 1,000 MNIST images"
	@echo "make test       install deps, build everything, run the fast test suite (ctest -L fast)"
	@echo "make test-slow  the slow tests (ctest -L slow)"
	@echo "make test-all   every test but the soak ones"
	@echo "make test-soak  the soak tests: 9,900 more programs on tpu-v3's RTL, about 28 hours of one core (JOBS=N)"
	@echo "make bench      Google Benchmarks: RTL simulation speed (builds N=64), CPU inference, training"
	@echo "make lint       verilator --lint-only -Wall over rtl/"
	@echo "make format     clang-format every C++ source in place (.clang-format; the fast suite checks it)"
	@echo "make docs       rewrite the tables in docs/ generated from contract/tpu_contract.toml"
	@echo "make cosim      the rtl and fast engines on 10,000 random programs per built size up to 32 and per chip of several cores, 25 on tpu-v1, extreme memories"
	@echo "make coverage   line and toggle coverage of the chip's RTL from cosim and random networks (build-coverage/coverage/coverage.json)"
	@echo "make fuzz       libFuzzer on every file reader, FUZZ_SECONDS each (default 180; FUZZ_RUNS=N to stop at N runs)"
	@echo "make test-asan  the fast suite built with AddressSanitizer + UBSan (build-asan/)"
	@echo "make test-tsan  the threaded code's tests built with ThreadSanitizer (build-tsan/)"
	@echo "make clean      remove $(BUILD_DIR)/"

deps:
	@scripts/install-deps

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

# Every model: a build dir that make demo began with its chip's RTL only is widened here.
configure: deps $(BUILD_DIR)/CMakeCache.txt
	@if grep -q '^TPUSIM_RTL_ONLY:STRING=.' $(BUILD_DIR)/CMakeCache.txt; then \
	  cmake -S . -B $(BUILD_DIR) -DTPUSIM_RTL_ONLY= ; fi

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The demo's chip. A first make demo builds only what the demo runs: the CLI and this
# preset's RTL (CMake TPUSIM_RTL_ONLY); make build or make test then adds the rest.
DEMO_CONFIG := small-16
demo: deps
	@test -f $(BUILD_DIR)/CMakeCache.txt || cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DTPUSIM_RTL_ONLY=$(DEMO_CONFIG) $(CMAKE_ARGS)
	cmake --build $(BUILD_DIR) -j $(JOBS) --target tpusim
	$(BUILD_DIR)/tpusim compare --images 1000 --configs $(DEMO_CONFIG) --engines rtl,fast

test: build
	cd $(BUILD_DIR) && ctest -L fast -j $(JOBS) --output-on-failure

test-slow: build
	cd $(BUILD_DIR) && ctest -L slow -j $(JOBS) --output-on-failure

test-all: build
	cd $(BUILD_DIR) && ctest -LE soak -j $(JOBS) --output-on-failure

test-soak: build
	cd $(BUILD_DIR) && ctest -L soak -j $(JOBS) --output-on-failure

bench: configure
	cmake -S . -B $(BUILD_DIR) -DTPUSIM_BENCH=ON
	cmake --build $(BUILD_DIR) -j $(JOBS) --target tpusim_bench tpusim_nn_bench tpusim_chip_bench
	$(BUILD_DIR)/bench/tpusim_bench $(BENCH_ARGS)
	$(BUILD_DIR)/bench/tpusim_nn_bench $(BENCH_ARGS)
	$(BUILD_DIR)/bench/tpusim_chip_bench $(BENCH_ARGS)

# The RTL includes the contract generated from contract/tpu_contract.toml.
RTL_GEN := $(BUILD_DIR)/generated/rtl
RTL_SOURCES := rtl/tpu_pkg.sv $(filter-out rtl/tpu_pkg.sv rtl/tpu_top.sv,$(wildcard rtl/*.sv))
# The bf16 models' top parameter: Dtype, bf16's number in the contract's dtype enum.
RTL_BF16 = -GDtype=$(shell /usr/bin/python3 -c 'import tomllib; \
  d = tomllib.load(open("contract/tpu_contract.toml", "rb")); \
  print(next(p["values"].index("bf16") for p in d["param"] if p["name"] == "dtype"))')

lint: deps
	/usr/bin/python3 contract/gen_contract.py --sv $(RTL_GEN)/tpu_contract.svh
	verilator --lint-only -Wall --assert -I$(RTL_GEN) -Irtl $(RTL_SOURCES) rtl/tpu_top.sv --top-module tpu_top
	verilator --lint-only -Wall --assert -I$(RTL_GEN) -Irtl $(RTL_SOURCES) --top-module tpu_mxu_top
	verilator --lint-only -Wall --assert -I$(RTL_GEN) -Irtl $(RTL_SOURCES) --top-module tpu_mxu_top $(RTL_BF16)
	verilator --lint-only -Wall --assert -I$(RTL_GEN) -Irtl $(RTL_SOURCES) rtl/tpu_top.sv --top-module tpu_top $(RTL_BF16)
	verilator --lint-only -Wall --assert -I$(RTL_GEN) -Irtl $(RTL_SOURCES) rtl/tpu_top.sv --top-module tpu_chip
	verilator --lint-only -Wall --assert -I$(RTL_GEN) -Irtl $(RTL_SOURCES) rtl/tpu_top.sv --top-module tpu_chip $(RTL_BF16)

format:
	find bench fast host python sim tests \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) -print0 | xargs -0 clang-format -i

FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 180
fuzz:
	@scripts/install-deps fuzz
	cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
	  -DCMAKE_CXX_COMPILER=clang++-14 -DTPUSIM_FUZZERS=ON
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzzers
	scripts/run-fuzzers $(FUZZ_DIR) $(FUZZ_SECONDS)

# The fast suite under AddressSanitizer + UBSan, RTL models included (build-asan/); the
# threaded code under ThreadSanitizer (build-tsan/): the trainer, the CPU backends and fast
# engines on several threads. (The SystemC kernel switches coroutines by hand, which
# ThreadSanitizer cannot follow, so the RTL tests are not run under it, and its build has
# only the smallest RTL models.) The ASan build leaves out the 256 x 256 models and the
# 128 x 128 bf16 ones, whose instrumented build alone would take longer than the rest.
SAN_DIMS := -DTPUSIM_TPU_DIMS="4;8;16;32" -DTPUSIM_TPU_BF16_DIMS=4 -DTPUSIM_ARRAY_DIMS="4;8;16" \
  -DTPUSIM_BF16_ARRAY_DIMS="4;16"
# -g1: file and line in every report, without the variable tracking that makes the
# Verilated models' huge functions slow to compile.
SAN_FLAGS_asan := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g1
SAN_FLAGS_tsan := -fsanitize=thread -g1
TSAN_TESTS := fp32_net_test int8_test fast_chip_test
TSAN_REGEX := ^(Fp32NetTest|TrainerTest|Int8OpsTest|QuantizeTest|Int8NetTest|FastChipTest.EnginesOnSeveralThreads)
test-asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DTPUSIM_CUDA=OFF $(SAN_DIMS) \
	  "-DCMAKE_CXX_FLAGS=$(SAN_FLAGS_asan)" "-DCMAKE_EXE_LINKER_FLAGS=$(SAN_FLAGS_asan)"
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest -L fast -j $(JOBS) --output-on-failure
test-tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Release -DTPUSIM_CUDA=OFF \
	  -DTPUSIM_TPU_DIMS=4 -DTPUSIM_TPU_BF16_DIMS=4 -DTPUSIM_ARRAY_DIMS=4 -DTPUSIM_TEACH_DIMS=4 \
	  "-DCMAKE_CXX_FLAGS=$(SAN_FLAGS_tsan)" "-DCMAKE_EXE_LINKER_FLAGS=$(SAN_FLAGS_tsan)"
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest -R '$(TSAN_REGEX)' -j $(JOBS) --output-on-failure

docs:
	/usr/bin/python3 contract/gen_contract.py --docs docs

cosim: build
	cd $(BUILD_DIR) && ctest -R '^cosim_slow' --output-on-failure

# The chip's RTL built with Verilator's line and toggle coverage (build-coverage/: the sizes
# up to 32, bf16 at 4, the small chips of several cores or units; not tpu-v3's), run on
# random programs and random networks; scripts/rtl-coverage writes
# build-coverage/coverage/coverage.json and the annotated sources (docs/reliability.md).
COVERAGE_ARGS ?=
coverage: deps
	cmake -S . -B build-coverage -DCMAKE_BUILD_TYPE=Release -DTPUSIM_CUDA=OFF \
	  -DTPUSIM_BUILD_TESTS=OFF -DTPUSIM_TPU_DIMS="4;8;16;32" -DTPUSIM_TPU_BF16_DIMS=4 \
	  -DTPUSIM_ARRAY_DIMS="4;8;16" \
	  -DTPUSIM_TEACH_DIMS=4 -DTPUSIM_TPU_CHIPS="2x4;1x2x4;2x2x4;1x2x4bf16" -DTPUSIM_RTL_COVERAGE=ON
	cmake --build build-coverage -j $(JOBS) --target tpusim
	scripts/rtl-coverage build-coverage $(COVERAGE_ARGS)

clean:
	rm -rf $(BUILD_DIR)
