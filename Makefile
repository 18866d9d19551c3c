# codelm: `make demo` and `make test` work on a fresh machine with Python 3.11 and the package registries.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo_out
# TensorFlow's and XLA's C++ INFO and WARNING lines would bury `make test` and `make bench` output (the
# entry points quiet themselves: quiet.py); CODELM_VERBOSE=1 brings everything back.
ifeq ($(CODELM_VERBOSE),)
export TF_CPP_MIN_LOG_LEVEL ?= 2
endif

.PHONY: install test test-e2e demo bench clean toolchains tpu_compiler gpu_compiler

install: $(STAMP)

# Re-installs only when pyproject.toml changes; otherwise a no-op.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing codelm and its pinned dependencies into $(VENV) (pip: errors only)"
	@$(BIN)/python -m pip install -qq --disable-pip-version-check -e '.[test,hf]'
	@touch $(STAMP)

# The TPU compiler (libtpu, the version jax[tpu] pins) for tpu/preflight.py on a CPU host: into
# .tpu_compiler/, outside the venv, where only the pre-flight loads it (installed in the venv, every
# JAX process on this machine would try to start a TPU and print libtpu's warnings).
LIBTPU_VERSION := 0.0.42.1
LIBTPU := .tpu_compiler/libtpu/libtpu.so
tpu_compiler: $(LIBTPU)
$(LIBTPU): | $(STAMP)
	@echo "installing libtpu $(LIBTPU_VERSION) (the TPU compiler, ~210 MB) into .tpu_compiler/"
	@$(BIN)/python -m pip install -qq --disable-pip-version-check --no-deps --target .tpu_compiler \
	  'libtpu==$(LIBTPU_VERSION)'

# jax's CUDA plugin (the version of the pinned jax) for tpu/preflight.py --topology=h100-8 on a host
# without a GPU: into .gpu_compiler/ (~480 MB), outside the venv for the same reason as libtpu. No
# NVIDIA libraries: compiling for a described GPU needs none.
JAX_VERSION := 0.10.2
CUDA_PLUGIN := .gpu_compiler/jax_plugins/xla_cuda12/__init__.py
gpu_compiler: $(CUDA_PLUGIN)
$(CUDA_PLUGIN): | $(STAMP)
	@echo "installing jax's CUDA plugin $(JAX_VERSION) (the GPU compiler, ~480 MB) into .gpu_compiler/"
	@$(BIN)/python -m pip install -qq --disable-pip-version-check --no-deps --target .gpu_compiler \
	  'jax-cuda12-plugin==$(JAX_VERSION)' 'jax-cuda12-pjrt==$(JAX_VERSION)'

# Two tiers. `make test` is what a developer runs: every module's behaviour, the slow end-to-end
# checks left out. `make test-e2e` runs those (marked `e2e` in tests/: the whole pipeline on the GCS
# emulator and on ram://, train.py resumed after SIGKILL, the ablation grid, the demo's stages, two
# processes against one, the scorer three ways in every language). `.ci/run` runs both.
# Two pytest workers (compilers, sandboxes and single-threaded XLA compilation leave the second core
# idle with one). loadfile: a module's tests run on one worker, so its module-scoped fixtures (a
# trained run, a Beam-built corpus) are built once, not once on each worker as worksteal did; an idle
# worker takes the next module, and tests/conftest.py lists the longest modules first.
PYTEST_WORKERS ?= 2
PYTEST_DIST ?= loadfile
PYTEST := CODELM_REQUIRE_TPU_COMPILER=1 CODELM_REQUIRE_GPU_COMPILER=1 $(BIN)/python -m pytest -q \
  -n $(PYTEST_WORKERS) --dist $(PYTEST_DIST)
# Each in-process test runs on one fake CPU device, as a user's CPU run is laid out; then the tests
# marked multidevice (a (2, 2, 2) mesh, training's layout over several devices) run in a second pass
# on 8 (tests/conftest.py). On 2 cores, training's data-parallel layout over 8 fake devices slowed
# every in-process run: test_train's demo run took 41-44 s on 8 devices and 23-25 s on one. Both
# passes run even when the first fails; the target fails if either does.
test: install tpu_compiler gpu_compiler
	status=0; \
	CODELM_TEST_DEVICES=1 $(PYTEST) -m "not e2e and not multidevice" tests || status=1; \
	CODELM_TEST_DEVICES=8 $(PYTEST) -m "not e2e and multidevice" tests || status=1; \
	exit $$status

test-e2e: install tpu_compiler gpu_compiler
	CODELM_TEST_DEVICES=1 $(PYTEST) -m e2e tests

# Compilers and runtimes for scoring predictions in 12 languages (sandbox/renderers/), and the
# sandbox (bubblewrap). Debian packages, then the TypeScript compiler from npm into .toolchains/.
# A no-op when everything is present; needs root (or sudo) for apt-get.
# The libraries MultiPL-E's tests import (evaluation/multiple/execution.py): luaunit, javatuples, testify.
TOOLCHAIN_PACKAGES := bubblewrap lua5.3 php-cli golang-go rustc mono-mcs mono-runtime r-base-core ghc \
  lua-unit libjavatuples-java golang-github-stretchr-testify-dev
# Commands whose package is installed only when the command is missing (the machine may have them
# from elsewhere): command:package.
TOOLCHAIN_COMMANDS := g++:g++ javac:openjdk-17-jdk-headless node:nodejs npm:npm
TYPESCRIPT_VERSION := 7.0.2
TSC := .toolchains/npm/node_modules/typescript/package.json
toolchains:
	@missing=""; \
	for p in $(TOOLCHAIN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; done; \
	for cp in $(TOOLCHAIN_COMMANDS); do \
	  command -v $${cp%%:*} >/dev/null || missing="$$missing $${cp#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "toolchains: installing Debian packages:$$missing"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq \
	    --no-install-recommends $$missing >/dev/null || exit 1; \
	else echo "toolchains: Debian packages present"; fi
	@if grep -qs '"version": "$(TYPESCRIPT_VERSION)"' $(TSC); then \
	  echo "toolchains: typescript $(TYPESCRIPT_VERSION) present"; \
	else echo "toolchains: installing typescript $(TYPESCRIPT_VERSION) from npm into .toolchains/npm"; \
	  npm install --silent --no-audit --no-fund --prefix .toolchains/npm typescript@$(TYPESCRIPT_VERSION); fi

# The whole pipeline on source code already on this machine (no download): corpus, vocabulary, SeqIO
# cache, mixtures, then the `mini` model trained with the UL2 + causal-LM mixture (runs/demo.gin) and
# sampled. demo.py runs each stage's entry point, prints one line per stage (full output in
# $(DEMO_DIR)/logs/) and ends with where everything is and what to run next. Quiet by default:
# `make demo CODELM_VERBOSE=1` shows every stage's output and the libraries' messages.
DEMO_VOCAB_SIZE ?= 8192
DEMO_STEPS ?= 200
demo: install
	@$(BIN)/python demo.py --output $(DEMO_DIR) --vocab_size $(DEMO_VOCAB_SIZE) --steps $(DEMO_STEPS)

bench: install
	$(BIN)/python bench/train_step.py --size small --seq 512 --batch 8

clean:
	rm -rf $(VENV) $(DEMO_DIR) *.egg-info .tpu_compiler .gpu_compiler
