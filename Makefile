# Two entry points for a newcomer on a fresh machine:
#   make demo   install the package alone, then link -> convert -> validate -> simulate -> report
#               on the bundled sample (out/gpt_tiny_cpu.html: the HTML report, one page)
#   make test   install the rest (test tools, mlc-chakra, Ray, torch), then lint (ruff),
#               type-check (mypy, src and tests) and run the test suite, ASTRA-sim's tests
#               included where `make astra-sim` has built it (they skip, named, otherwise)
#   make test-fast   the test suite less its slow tier (pytest -m "not slow")
#   make test-pure-python   that tier again with the compiled fast path switched off
#   make test-sanitized     the compiled fast path's parity tests under AddressSanitizer and UBSan
#   make astra-sim   build ASTRA-sim from ../shared once (6-17 min), into a cache outside the clone
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SAMPLE := samples/gpt_tiny_cpu/gpt_tiny_cpu
OUT    := out

TESTS_READY := $(VENV)/.tests-ready

.PHONY: setup setup-demo demo test test-suite test-fast test-pure-python test-sanitized typecheck lint astra-sim \
        bench bench-convert bench-sim bench-whatif bench-scale bench-layout bench-ref-setup clean

# What the demo runs: the package (and matplotlib, for its --plot), nothing else.
# setup.py and the C sources (each tier's module, their shared header): the
# compiled fast path is rebuilt when they change.
C_SOURCES := $(wildcard src/pt2chakra/*/_fast.c src/pt2chakra/*/_fast.h)
$(BIN)/pt2chakra: pyproject.toml setup.py $(C_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[plot]'
	touch $@

# What the tests use besides.
$(TESTS_READY): $(BIN)/pt2chakra
	$(BIN)/pip install -q -e '.[test,plot]'
	# The reference implementation, for wire-compatibility tests (its other
	# requirements are for tools we do not call).
	$(BIN)/pip install -q --no-deps mlc-chakra==1.0.0
	# Ray, for the --ray test of convert --ranks (the optional extra [ray]); it skips without.
	$(BIN)/pip install -q 'ray>=2.9' || echo "ray not installed: the --ray test will skip"
	# torch (CPU build) for the collection tests; they skip where it cannot install.
	$(BIN)/pip install -q torch==2.13.0 || echo "torch not installed: collection tests will skip"
	touch $@

setup-demo: $(BIN)/pt2chakra

setup: $(TESTS_READY)

demo: setup-demo
	mkdir -p $(OUT)
	$(BIN)/pt2chakra convert --host-trace $(SAMPLE).host_et.json.gz \
	    --device-trace $(SAMPLE).kineto.json.gz -o $(OUT)/gpt_tiny_cpu.et \
	    --report $(OUT)/gpt_tiny_cpu.report.json --simulate
	$(BIN)/pt2chakra validate $(OUT)/gpt_tiny_cpu.et
	$(BIN)/pt2chakra simulate $(OUT)/gpt_tiny_cpu.et --timeline $(OUT)/gpt_tiny_cpu.timeline.json \
	    --plot $(OUT)/gpt_tiny_cpu.timeline.png
	$(BIN)/pt2chakra report $(OUT)/gpt_tiny_cpu.et -o $(OUT)/gpt_tiny_cpu.html \
	    --conversion-report $(OUT)/gpt_tiny_cpu.report.json

test: lint typecheck test-suite

# ASTRA_SIM_BIN: the user's, else the binary `make astra-sim` cached (none:
# the ASTRA-sim tests skip, and one line before the tests names them).
# --durations: the slowest tests, to keep an eye on the suite's time.
# -n $(TEST_WORKERS) --dist loadfile (pytest-xdist): two workers, each test file
# whole on one (its module fixtures built once); a third of the suite's time is
# waiting (Ray's start, signals sent at set moments, recordings), which the
# other worker fills. The tests starting Ray take a lock (one_ray_at_a_time).
TEST_WORKERS ?= 2
test-suite: setup
	ASTRA_SIM_BIN="$${ASTRA_SIM_BIN:-$$($(PYTHON) scripts/astra_sim_cache.py --find 2>/dev/null)}" \
	    $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=15

typecheck: setup
	$(BIN)/mypy

# ASTRA-sim's analytical binaries, built from ../shared/astra-sim-src once per
# tarball into ${XDG_CACHE_HOME:-~/.cache}/pt2chakra/ (needs root for apt-get);
# prints the binary's path. Standard library only: no setup needed.
astra-sim:
	$(PYTHON) scripts/astra_sim_cache.py

# The fast tier: everything but the tests marked slow (real traces, subprocess
# batches, collection, browsers, long property runs); under a minute.
test-fast: setup
	$(BIN)/python -m pytest -m "not slow"

# The fast tier on the pure-Python path alone (PT2CHAKRA_PURE_PYTHON=1: every
# tier's compiled module off), as where no C compiler built it. The tests that
# run the ASTRA-sim binary skip here: what they check of ours is the export,
# which the rest covers on this path, and test-suite runs them.
test-pure-python: setup
	env -u PT2CHAKRA_REQUIRE_COMPILED -u PT2CHAKRA_REQUIRE_ASTRA_SIM -u ASTRA_SIM_BIN \
	    PT2CHAKRA_PURE_PYTHON=1 $(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) --dist loadfile

# Every tier's C built again with AddressSanitizer and UBSan into a scratch
# folder, and the parity tests of the contract tables run against it.
test-sanitized: setup
	PYTHON=$(BIN)/python scripts/check_c_sanitized.sh -n $(TEST_WORKERS) --dist loadfile

lint: setup
	$(BIN)/ruff check src tests scripts

# The matrix: 25k / 100k / 1M ops x convert / simulate (CPU-s, wall, peak MB),
# with mlc-chakra ratios where it runs (samples: see scripts/bench_matrix.py).
bench: setup
	$(BIN)/python scripts/bench_matrix.py

# The reference for the ratios (never part of `make test` or CI): mlc-chakra with
# its dependencies in a venv of its own, and PARAM's et_replay, which its linker
# imports and PyPI lacks, from a checkout of PARAM (facebookresearch/param on
# GitHub) at PARAM_SRC. PARAM's et_replay/ folder is laid out as a repository of
# its own (its pyproject.toml maps the package to a subfolder): it is staged with
# that file one level up, outside this clone, and installed from there.
# Details and the linker's caveats: scripts/bench_ref.py.
REF_VENV  ?= .venv-ref
PARAM_SRC ?= ../param
bench-ref-setup:
	@test -f $(PARAM_SRC)/et_replay/execution_trace.py || { echo "bench-ref-setup: no PARAM checkout at $(PARAM_SRC) (clone facebookresearch/param there, or give PARAM_SRC=DIR)" >&2; exit 2; }
	$(PYTHON) -m venv $(REF_VENV)
	$(REF_VENV)/bin/pip install -q --upgrade pip
	$(REF_VENV)/bin/pip install -q mlc-chakra==1.0.0
	stage=$$(mktemp -d) && cp -r $(PARAM_SRC)/et_replay "$$stage/" && \
	    cp $(PARAM_SRC)/et_replay/pyproject.toml "$$stage/" && \
	    $(REF_VENV)/bin/pip install -q "$$stage"; rc=$$?; rm -rf "$$stage"; exit $$rc
	$(REF_VENV)/bin/chakra_trace_link --help > /dev/null
	@echo "mlc-chakra's linker and converter ready in $(REF_VENV): make bench prints both ratios"

bench-convert: setup
	$(BIN)/python scripts/bench_convert.py --host-trace bench_data/gpt_large_cpu.host_et.json.gz \
	    --device-trace bench_data/gpt_large_cpu.kineto.json.gz

bench-sim: setup
	$(BIN)/python scripts/bench_simulate.py

# What-ifs checked against measurements: gloo DDP on CPU at shaped loopback
# rates and two batch sizes (needs root and tc; skips in one line otherwise).
bench-whatif: setup
	$(BIN)/python scripts/bench_whatif.py

# Scale-out checked against measurements: a table of DDP and FSDP2 jobs over gloo
# (widths, bucket sizes, link rates) at 2 to 8 ranks, each rank in its own network
# namespace on a shaped veth link, a two-tier bed (hosts joined by slower uplinks)
# and one slow link; predictions beside the naive copy and the byte-volume baseline;
# ASTRA-sim where built (needs root, ip, tc and torch; skips in one line otherwise;
# sized for about 25 min on 2 cores). docs/SCALE_OUT_BENCH.md.
bench-scale: setup
	ASTRA_SIM_BIN="$${ASTRA_SIM_BIN:-$$($(PYTHON) scripts/astra_sim_cache.py --find 2>/dev/null)}" \
	    $(BIN)/python scripts/bench_scale.py

# Parallel layouts checked against measurements: TP, PP (GPipe, 1F1B), TP x DP and
# PP x DP of a small transformer over gloo, each rank in its own network namespace
# (the bed of bench-scale; needs root, ip, tc and torch; skips in one line
# otherwise), replayed by simulate and, where built, ASTRA-sim. docs/LAYOUT_BENCH.md.
bench-layout: setup
	ASTRA_SIM_BIN="$${ASTRA_SIM_BIN:-$$($(PYTHON) scripts/astra_sim_cache.py --find 2>/dev/null)}" \
	    $(BIN)/python scripts/bench_layout.py

clean:
	rm -rf $(OUT) .pytest_cache .hypothesis
