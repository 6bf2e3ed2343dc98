"""A minimal HTTP/1.1 client for the timed requests: one keep-alive connection, no pool, no per-request
object graph. httpx spent ~1.2 ms of CPU per request here, as much as a do-nothing server answering it;
this spends a fraction of that, so the generator stays far from being the bottleneck.

It offers the small part of httpx's streaming interface the backends use: ``client.stream(method, url,
content=..., headers=..., timeout=...)`` as an async context manager yielding a response with
``status_code``, ``headers``, ``aread()``, ``aiter_raw()`` and ``aiter_lines()``. Bodies: content-length,
chunked, or read to the connection's close.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

_READ_SIZE = 65536


class HTTPError(Exception):
    """The connection broke or the server's answer is not HTTP/1.1 we can read."""


class RawResponse:
    def __init__(self, client: RawClient, status_code: int, headers: dict[str, str], timeout_s: float) -> None:
        self._client = client
        self.status_code = status_code
        self.headers = headers
        self._timeout_s = timeout_s
        self._done = False

    async def _read(self, reader: asyncio.StreamReader, coro_fn, *args):
        async with asyncio.timeout(self._timeout_s):
            return await coro_fn(*args)

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        reader = self._client._reader
        assert reader is not None
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = await self._read(reader, reader.readline)
                if not size_line:
                    raise HTTPError("the connection closed inside a chunked body")
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await self._read(reader, reader.readline)) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                yield await self._read(reader, reader.readexactly, size)
                await self._read(reader, reader.readexactly, 2)
        elif "content-length" in self.headers:
            remaining = int(self.headers["content-length"])
            while remaining > 0:
                chunk = await self._read(reader, reader.read, min(remaining, _READ_SIZE))
                if not chunk:
                    raise HTTPError("the connection closed before the body's end")
                remaining -= len(chunk)
                yield chunk
        else:
            while chunk := await self._read(reader, reader.read, _READ_SIZE):
                yield chunk
            self._client._close()
        self._done = True
        if self.headers.get("connection", "").lower() == "close":
            self._client._close()

    async def aread(self) -> bytes:
        return b"".join([chunk async for chunk in self.aiter_raw()])

    async def aiter_lines(self) -> AsyncIterator[str]:
        pending = b""
        async for chunk in self.aiter_raw():
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.rstrip(b"\r").decode("utf-8", "replace")
        if pending:
            yield pending.rstrip(b"\r").decode("utf-8", "replace")


class RawClient:
    """One connection to one server, reused while the server keeps it alive."""

    def __init__(self, headers: Mapping[str, str] | None = None, tls: ssl.SSLContext | None = None) -> None:
        self._headers = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._tls = tls
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._origin: tuple[str, str, int] | None = None

    async def __aenter__(self) -> RawClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._close()

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def _connect(self, scheme: str, host: str, port: int, timeout_s: float) -> None:
        if (
            self._writer is not None
            and self._reader is not None
            and self._origin == (scheme, host, port)
            and not self._reader.at_eof()
        ):
            return
        self._close()
        async with asyncio.timeout(timeout_s):
            self._reader, self._writer = await asyncio.open_connection(
                host, port, ssl=self._tls or ssl.create_default_context() if scheme == "https" else None, limit=2**20
            )
        self._origin = (scheme, host, port)

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        url: str,
        *,
        content: bytes = b"",
        headers: Mapping[str, str] | None = None,
        timeout: float = 600.0,
    ) -> AsyncIterator[RawResponse]:
        parts = urlsplit(url)
        scheme, host = parts.scheme, parts.hostname or "127.0.0.1"
        port = parts.port or (443 if scheme == "https" else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Length: {len(content)}\r\n"
            f"{self._headers}{extra}\r\n"
        ).encode("latin-1")
        for attempt in (0, 1):  # a kept-alive connection the server closed meanwhile: reconnect once
            await self._connect(scheme, host, port, min(timeout, 10.0))
            assert self._writer is not None and self._reader is not None
            try:
                self._writer.write(head + content if len(content) < _READ_SIZE else head)
                if len(content) >= _READ_SIZE:
                    self._writer.write(content)
                async with asyncio.timeout(timeout):
                    await self._writer.drain()
                    status_line = await self._reader.readline()
                if not status_line:
                    raise ConnectionResetError("the server closed the connection")
                break
            except (ConnectionError, OSError):
                self._close()
                if attempt:
                    raise
        try:
            _, code, *_ = status_line.decode("latin-1").split(" ", 2)
            status = int(code)
        except ValueError:
            self._close()
            raise HTTPError(f"not an HTTP status line: {status_line[:80]!r}") from None
        response_headers: dict[str, str] = {}
        assert self._reader is not None  # set by _connect
        async with asyncio.timeout(timeout):
            while (line := await self._reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                response_headers[name.strip().lower()] = value.strip()
        response = RawResponse(self, status, response_headers, timeout)
        try:
            yield response
        finally:
            if not response._done:
                self._close()  # body left unread: the connection cannot be reused
