"""Multipart uploads, read the same way by every route that takes one: the size limit (a 413 that names the
option raising it), the parse, and the parts a route needs (a 400 that says what to send)."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException

from voxlane.errors import InvalidRequest, PayloadTooLarge

MiB = 1024 * 1024


@dataclass(frozen=True)
class UploadLimit:
    """How large one route's upload may be, and what its 413 says."""

    max_mb: float
    flag: str
    """The ``voxlane serve`` option that sets ``max_mb``."""
    what: str = "the upload"
    param: str = "file"
    advice: str = ""
    """What to send instead, appended to the message."""

    def check(self, size_bytes: int) -> None:
        if size_bytes > self.max_mb * MiB:
            raise self.error(size_bytes)

    def error(self, size_bytes: int) -> PayloadTooLarge:
        return PayloadTooLarge(
            f"{self.what} is {size_bytes / MiB:.1f} MiB, over the server's limit of "
            f"{self.max_mb:g} MiB ({self.flag}){self.advice}",
            param=self.param,
            code="file_too_large",
        )


async def read_form(
    request: Request, limit: UploadLimit, *, other_bytes: int, max_files: int, max_fields: int, parts: str
) -> FormData:
    """The request's form. A declared length over ``limit`` (plus ``other_bytes`` for the parts it does not
    count) is refused before the body is read; a body that does not parse gets a 400 asking for ``parts``."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit.max_mb * MiB + other_bytes:
        raise limit.error(int(declared))
    try:
        return await request.form(max_files=max_files, max_fields=max_fields)
    except HTTPException as exc:  # inside an app, Starlette raises a MultiPartException as a bare 400
        raise _unparsed(exc.detail, parts) from None
    except (MultiPartException, AssertionError, ValueError) as exc:
        raise _unparsed(str(exc), parts) from None


def _unparsed(reason: str, parts: str) -> InvalidRequest:
    return InvalidRequest(f"could not parse the form ({reason}); send multipart/form-data with {parts}")


def file_part(form: FormData, name: str, missing: str) -> UploadFile:
    """The file part ``name``; a 400 saying ``missing`` when there is none."""
    part = form.get(name)
    if not isinstance(part, UploadFile):
        raise InvalidRequest(missing, param=name)
    return part


def text_field(form: FormData, name: str, missing: str) -> str:
    """The non-empty text field ``name``; a 400 saying ``missing`` when there is none."""
    value = form.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(missing, param=name)
    return value


def text_fields(form: FormData) -> dict[str, str]:
    """Every text field, by name (the last one where a name repeats)."""
    return {key: value for key, value in form.items() if isinstance(value, str)}
