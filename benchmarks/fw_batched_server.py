"""faster-whisper's BatchedInferencePipeline behind POST /v1/audio/transcriptions: the baseline of
benchmarks/gpu_bench.py, so that `voxlane bench serve` puts the same load on both servers.

    python benchmarks/fw_batched_server.py --port 8200 --model DIR --device cuda --batch-size 16 --workers 4

BatchedInferencePipeline is faster-whisper's fastest path on a GPU: Silero VAD cuts the upload into speech
chunks of up to 30 s, their features are batched (--batch-size) through one CTranslate2 generate. Each
request runs its own transcribe() on a thread of a pool (--threads); the model has --workers replicas
(faster-whisper's num_workers, CTranslate2's inter_threads), as voxlane's --engine-workers. It binds
127.0.0.1 only and answers {"text": ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import io
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def build(args: argparse.Namespace) -> Starlette:
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    model = WhisperModel(args.model, device=args.device, compute_type=args.compute_type, num_workers=args.workers)
    pipeline = BatchedInferencePipeline(model)
    pool = ThreadPoolExecutor(args.threads, thread_name_prefix="fw-request")

    def transcribe(data: bytes) -> str:
        segments, _ = pipeline.transcribe(io.BytesIO(data), batch_size=args.batch_size, beam_size=1)
        return "".join(s.text for s in segments).strip()

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def transcriptions(request: Request) -> Response:
        form = await request.form()
        upload: Any = form.get("file")
        if upload is None or isinstance(upload, str):
            return JSONResponse({"error": {"message": "missing 'file'", "type": "invalid_request_error"}}, 400)
        data = await upload.read()
        text = await asyncio.get_running_loop().run_in_executor(pool, transcribe, data)
        return JSONResponse({"text": text})

    return Starlette(
        routes=[Route("/health", health), Route("/v1/audio/transcriptions", transcriptions, methods=["POST"])]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8200)
    parser.add_argument("--model", required=True, help="CTranslate2 Whisper model directory")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--compute-type", default="float16")
    parser.add_argument("--batch-size", type=int, default=16, help="speech chunks per generate (faster-whisper's)")
    parser.add_argument("--workers", type=int, default=4, help="model replicas (num_workers)")
    parser.add_argument("--threads", type=int, default=64, help="requests transcribed at once")
    args = parser.parse_args()
    uvicorn.run(build(args), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
