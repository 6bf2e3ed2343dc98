"""--upload-spool-mb: an upload up to that size stays in memory while Starlette parses it, so that its chunks
are not each written to a temporary file on a worker thread (a hand-off between the loop and a thread)."""

from __future__ import annotations

import asyncio

from starlette.datastructures import Headers, UploadFile
from starlette.formparsers import MultiPartParser

from voxlane.config import EngineConfig, ServerConfig
from voxlane.server.app import build_app

BOUNDARY = "voxlaneboundary"


def _parse(upload: bytes) -> UploadFile:
    body = (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
            "Content-Type: audio/wav\r\n\r\n"
        ).encode()
        + upload
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )

    async def stream():  # as uvicorn hands a body over: in chunks of 64 KiB
        for i in range(0, len(body), 65536):
            yield body[i : i + 65536]

    headers = Headers({"content-type": f"multipart/form-data; boundary={BOUNDARY}"})
    form = asyncio.run(MultiPartParser(headers, stream()).parse())
    part = form["file"]
    assert isinstance(part, UploadFile)
    return part


def _in_memory(part: UploadFile) -> bool:
    return not part.file._rolled  # type: ignore[attr-defined]  # SpooledTemporaryFile's own flag


def test_an_upload_under_the_spool_size_is_parsed_in_memory() -> None:
    build_app(ServerConfig(upload_spool_mb=3, engine=EngineConfig(model_path="")))
    five_mb = bytes(range(256)) * (5 * 4096)
    two_mb = five_mb[: 2 * 1024 * 1024]
    small, large = _parse(two_mb), _parse(five_mb)
    assert _in_memory(small) and not _in_memory(large)
    assert small.file.read() == two_mb and large.file.read() == five_mb
    build_app(ServerConfig(upload_spool_mb=8, engine=EngineConfig(model_path="")))
    assert _in_memory(_parse(five_mb))
