# swaptrace: `make demo` and `make test` each work as the only command on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SWAPTRACE := $(VENV)/bin/swaptrace
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

PRESET ?= demo
STEPS ?=
SEED ?= 0
MEMORY ?=
FRACTION ?= 0.5
MEMORY_ARGS := $(if $(MEMORY),--memory $(MEMORY),--memory-fraction $(FRACTION))
POLICY ?= linux
DEVICE ?= mqsim-default
TARGET ?= /tmp/swaptrace-fio.dat
SIZE ?= 1GiB
RUNTIME ?= 3
OUT := traces/$(PRESET)

ACCESS := $(OUT)/access.parquet
SWAPIO := $(OUT)/swapio.parquet
SSDOUT := $(OUT)/ssd.parquet
JOBS := fio_jobs/$(PRESET)

.PHONY: setup setup-test fio torch-extra torchrec-extra validate-real demo trace emulate mrc ssd fio-jobs fio-run report reproduce designs kernels test test-fast bench lint clean

# `make setup` installs swaptrace and what it runs on (the demo needs no more); `make setup-test` adds the test
# and dask extras (pytest, hypothesis, libCacheSim, pandas, Dask, ...), which `make test` and `make bench` need.
setup: $(STAMP) fio
setup-test: $(TEST_STAMP) fio

# pip runs with -q (no per-package lines); a line per phase says what is happening. PIP_QUIET drops one
# notice only: "Location '...' is ignored: it is neither a file nor a directory", which pip prints for every
# package that a folder index in the machine's pip configuration (extra-index-url) does not hold.
PIP_QUIET = 2> >(grep -v "^WARNING: Location '.*' is ignored: it is neither a file nor a directory" >&2)

$(STAMP): setup.cfg pyproject.toml
	@echo "setup 1/3: creating the virtualenv $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@echo "setup 2/3: upgrading pip"
	@$(PY) -m pip install -q --upgrade pip $(PIP_QUIET)
	@echo "setup 3/3: installing swaptrace (numba, pyarrow, click, matplotlib; about a minute)"
	@$(PY) -m pip install -q -e . $(PIP_QUIET)
	@touch $(STAMP)
	@echo "setup: done ($(VENV))"

$(TEST_STAMP): $(STAMP)
	@echo "setup: adding the test and dask extras (pytest, hypothesis, libCacheSim, pandas, Dask, ...)"
	@$(PY) -m pip install -q -e '.[test,dask]' $(PIP_QUIET)
	@touch $(TEST_STAMP)

# fio comes from Debian's packages; later stages (fio jobs, fio run) need it.
fio:
	@if command -v fio >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing fio from Debian's packages"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio) >/dev/null || echo "warning: could not install fio; fio stages will be skipped"; \
	else echo "note: fio is missing; install it with 'sudo apt-get install fio' (fio stages are skipped without it)"; fi

demo: setup
	$(SWAPTRACE) run --preset $(PRESET) --first-look -o $(OUT)

trace: $(ACCESS)
$(ACCESS): | $(STAMP)
	$(SWAPTRACE) generate --preset $(PRESET) $(if $(STEPS),--steps $(STEPS)) --seed $(SEED) -o $@ --force

mrc: $(OUT)/mrc.csv
$(OUT)/mrc.csv: $(ACCESS)
	$(SWAPTRACE) mrc $< -o $@ --plot $(OUT)/mrc.png --force

emulate: $(SWAPIO)
$(SWAPIO): $(ACCESS)
	$(SWAPTRACE) emulate $< $(MEMORY_ARGS) --policy $(POLICY) -o $@ --force

ssd: $(SSDOUT)
$(SSDOUT): $(SWAPIO)
	$(SWAPTRACE) ssd $< --device $(DEVICE) -o $@ --force

fio-jobs: $(JOBS)/manifest.json
$(JOBS)/manifest.json: $(SWAPIO) | fio
	$(SWAPTRACE) fio jobs $< -o $(JOBS) --force

fio-run: $(JOBS)/manifest.json
	$(SWAPTRACE) fio run $(JOBS) --target $(TARGET) --size $(SIZE) --runtime $(RUNTIME)

# Linux swap vs the fixes (docs/designs.md): every design at a tight (10 %) and a loose (50 %) budget, the SSD
# model on each stream and, with fio installed, each stream's first steps replayed on $(TARGET) (a file).
PACKED := $(OUT)/access-packed.parquet
DESIGNS_DEVICE ?= nvme-tlc
DESIGNS_REPEATS ?= 3
FIO_DESIGNS = $(if $(shell command -v fio),--fio-target $(TARGET) --fio-size $(SIZE) --fio-runtime $(RUNTIME) \
	--fio-repeats $(DESIGNS_REPEATS))

designs: $(ACCESS) $(PACKED) | fio
	for pct in 10 50; do \
		$(SWAPTRACE) designs $(ACCESS) --memory-fraction 0.$$pct --packed $(PACKED) --device $(DESIGNS_DEVICE) \
			$(FIO_DESIGNS) -o $(OUT)/designs-$$pct --force || exit 1; \
	done

$(PACKED): | $(STAMP)
	$(SWAPTRACE) generate --preset $(PRESET) $(if $(STEPS),--steps $(STEPS)) --seed $(SEED) --row-layout packed -o $@ --force

report: | $(STAMP)
	$(SWAPTRACE) report $(OUT) -o $(OUT)/report

reproduce: setup
	$(PY) analysis/reproduce_thesis.py

# The real-training tests (tests/test_train.py) need PyTorch, an optional extra kept out of `make setup`.
# As root, `make test` first installs torch's CPU build $(TORCH_VERSION) (this machine's pip finds it in
# /opt/wheels; elsewhere add TORCH_PIP_ARGS='--index-url https://download.pytorch.org/whl/cpu'), then the
# extra; otherwise those tests skip with the reason.
TORCH_VERSION ?= 2.13.0
TORCH_PIP_ARGS ?=

torch-extra: | $(STAMP)
	@if [ "$$(id -u)" = 0 ]; then \
		echo "installing the torch extra (torch $(TORCH_VERSION), CPU build) for the real-training tests"; \
		$(PY) -m pip install -q $(TORCH_PIP_ARGS) 'torch==$(TORCH_VERSION)' $(PIP_QUIET) && \
		$(PY) -m pip install -q -e '.[torch]' $(PIP_QUIET); \
	else echo "note: not root, so the torch extra is not installed; the real-training tests (tests/test_train.py) skip"; fi

# `swaptrace train --framework torchrec` (tests/test_train_torchrec.py) needs TorchRec and FBGEMM's CPU build, paired
# with TORCH_VERSION: torchrec 1.8 and fbgemm-gpu-cpu 1.8 go with torch 2.13 (fbgemm-gpu-cpu 1.9's libraries do not
# load on torch 2.13). torchrec's metadata requires `fbgemm-gpu`, the CUDA build, which shares the module
# fbgemm_gpu and fails to load on a CPU-only torch, so torchrec goes in with --no-deps, last (pip then checks
# nothing it could warn about), after what it imports: the `torchrec` extra (tensordict, pyre-extensions and
# fbgemm-gpu-cpu). torchmetrics and tqdm, which torchrec's metadata also lists, are for its metrics and
# datasets modules, which train does not load. Skipped when the pair is already there.
TORCHREC_VERSION ?= 1.8.0
#: the check that skips the install: torchrec at its version, and what the extra installs (its pins, setup.cfg)
TORCHREC_THERE = import importlib.metadata as m; m.version('tensordict'); m.version('pyre-extensions'); \
	assert m.version('torchrec') == '$(TORCHREC_VERSION)' and m.version('fbgemm-gpu-cpu') == '1.8.0'

torchrec-extra: torch-extra
	@if [ "$$(id -u)" != 0 ]; then \
		echo "note: not root, so the torchrec extra is not installed; the TorchRec tests (tests/test_train_torchrec.py) skip"; \
	elif $(PY) -c "$(TORCHREC_THERE)" 2>/dev/null; then :; \
	else \
		echo "installing the torchrec extra (torchrec $(TORCHREC_VERSION), fbgemm-gpu-cpu) for swaptrace train --framework torchrec"; \
		$(PY) -m pip install -q -e '.[torch,torchrec]' $(PIP_QUIET) && \
		$(PY) -m pip install -q --no-deps 'torchrec==$(TORCHREC_VERSION)' $(PIP_QUIET); \
	fi

# How close to real training (root): PyTorch DLRM runs captured under the kernel against generate --runtime +
# emulate at the same whole-process limits (docs/process.md). Captures are cached in traces/real-validation.
validate-real: setup torch-extra torchrec-extra
	$(PY) analysis/validate_real.py record --pageout
	$(PY) analysis/validate_real.py capture
	$(PY) analysis/validate_real.py measure
	$(PY) analysis/validate_real.py predict -o research/results/real-training \
		--costs research/results/real-training/this-boot/host-costs-loop.toml \
		--device research/results/real-training/this-boot/disk-loop-busy-reads.toml

# Two passes: every test that shares nothing machine-wide (pytest-xdist, whole files per worker so a module's
# fixtures are built once), then the `serial` ones (privileged, fio, capture, Dask, training: tests/conftest.py),
# collecting only the files that hold them (tests/serial_paths.py). Both run; the target fails if either does.
# The slowest tests of each pass are listed at its end.
# The first pass runs one worker more than there are cores: the pipeline test waits 45 s on fio and others on
# subprocesses, and the spare worker fills that core (on 2 cores the pass took 184 s rather than 209 s).
# The second runs in two lanes (tests/serial_paths.py): everything that holds swap, cgroups, the capture lock,
# loop devices or sysctls one test at a time in one process, and fio, Dask and training beside it in the other
# (93 s rather than 154 s in one process).
PYTEST_PARALLEL ?= -n $(shell echo $$(( $$(nproc) + 1 ))) --dist loadfile
PYTEST_SERIAL ?= -n 2 --serial-lanes

# numba compiles each kernel on its first call and caches it beside its source: compile every kernel once, in
# two processes, before the tests (tools/warm_kernels.py), rather than in whichever test calls it first -- in
# both xdist workers at once when both reach it together. Redone when a kernel's source changes.
KERNELS_STAMP := $(VENV)/.swaptrace-kernels-warm
$(KERNELS_STAMP): $(TEST_STAMP) $(wildcard swaptrace/kernels/*.py swaptrace/kernels/*/*.py)
	@echo "setup: compiling the numba kernels into their cache (about 35 s on a fresh clone)"
	@$(PY) tools/warm_kernels.py
	@touch $(KERNELS_STAMP)

kernels: $(KERNELS_STAMP)

# The serial tests run after the parallel ones, not beside them: tried beside (the two passes together took 270 s
# rather than 360 s), a capture test's 30 s guard ran out under the load of three busy processes, its capture kept
# the machine-wide lock and swap area, and a dozen privileged tests after it failed; signal-timing tests (a
# sweep's Ctrl-C) failed too. Their two lanes load the two cores no more than the first pass does.
test: setup-test torch-extra torchrec-extra kernels
	@status=0; \
	echo "test 1/2: the parallel-safe tests on every core"; \
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not serial" --durations=10 || status=$$?; \
	echo "test 2/2: privileged, fio, capture, Dask and training tests, in two lanes"; \
	$(PY) -m pytest -q $(PYTEST_SERIAL) -m serial --durations=10 $$($(PY) tests/serial_paths.py) || status=$$?; \
	exit $$status

test-fast: setup-test
	$(PY) -m pytest -q -m "not slow and not privileged"

bench: setup-test
	$(PY) benchmarks/run_all.py

lint: setup-test
	$(VENV)/bin/ruff check swaptrace tests benchmarks analysis research tools docs

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -prune -exec rm -rf {} +
	find traces fio_jobs -mindepth 1 ! -name README.md -exec rm -rf {} + 2>/dev/null || true
