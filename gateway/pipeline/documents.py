"""PDF ``file`` parts -> their pages as image parts (and their text layer as a text part).

This runs first in a chat request (and so in a Responses one, whose ``input_file`` items become
chat ``file`` parts), before the conversation is parsed: from then on a page is an image like
any other, so the family's image rules (how many per request, how it renders them), the media
pipeline's decoding, the content digest and the KV-reuse id all apply unchanged, and a request
to the llmapi contract carries pages as the data: URLs it carries every image as.

A document is fetched as every media URL is (``data:``, or ``https`` through the SSRF-guarded
fetcher: a loopback ``file_url`` is refused as any loopback URL is) and rendered in the media
worker processes under ``[media.pdf]``'s caps and its own render budget. The pages it may have
are those the request can still carry as images (the family's limit, the engine's, the
server's, less the request's other images); past that the refusal names the page count and
the limit, and the part it came from. A rendered document is kept a while (``services.Documents``,
by its bytes and the caps): a conversation re-sends its document with every turn.
"""

from __future__ import annotations

import base64
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import (
    GatewayError,
    InvalidRequest,
    MediaURLError,
    TooManyMediaItems,
    UnsupportedMedia,
)
from gateway.location import Location
from gateway.media.local import FrameList
from gateway.media.pdf import PdfLimits, RenderedDocument, check_page_count, is_pdf, render_pdf
from gateway.observability.tracing import phase
from gateway.protocol.chat import (
    ChatCompletionRequest,
    ChatMessage,
    FilePart,
    ImageURL,
    ImageURLPart,
    TextPart,
)
from gateway.served import ServedRuntime
from gateway.services import Documents

__all__ = ["Expanded", "expand_documents"]


@dataclass
class Expanded:
    """The request with its documents' pages in place, and where each page came from
    (``messages[0].content[3]`` -> ``messages[0].content[1]``), so a refusal of a page names
    the part the client sent."""

    request: ChatCompletionRequest
    origins: dict[Location, Location] = field(default_factory=dict)
    pages: int = 0


def _has_documents(request: ChatCompletionRequest) -> bool:
    return any(
        isinstance(part, FilePart)
        for message in request.messages
        if isinstance(message.content, list)
        for part in message.content
    )


async def expand_documents(
    request: ChatCompletionRequest, served: ServedRuntime, documents: Documents
) -> Expanded:
    """``request`` with every ``file`` part replaced by its pages (and text)."""
    if not _has_documents(request):
        return Expanded(request)
    budget = _PageBudget(request, served, documents)
    expanded = Expanded(request)
    messages: list[ChatMessage] = []
    for index, message in enumerate(request.messages):
        if not isinstance(message.content, list):
            messages.append(message)
            continue
        content: list[Any] = []
        for part_index, part in enumerate(message.content):
            where: Location = ("messages", index, "content", part_index)
            if not isinstance(part, FilePart):
                content.append(part)
                continue
            if message.role != "user":
                raise InvalidRequest(
                    ("file parts are only allowed in user messages (", where, ")"), param=where
                )
            document = await _render(part, where, served, documents, budget)
            pages = _page_parts(document, part.file.filename)
            for page_part in pages[: len(document.pages)]:
                expanded.origins[("messages", index, "content", len(content))] = where
                content.append(page_part)
            content.extend(pages[len(document.pages) :])
            expanded.pages += len(document.pages)
        messages.append(message.model_copy(update={"content": content}))
    expanded.request = request.model_copy(update={"messages": messages})
    documents.media.metrics.document_pages_sent(served.config.id, expanded.pages)
    return expanded


class _PageBudget:
    """How many more images this request may carry, and which limit says so."""

    def __init__(self, request: ChatCompletionRequest, served: ServedRuntime, documents: Documents):
        model = served.config.id
        limits: list[tuple[int, str]] = [
            (
                documents.media.settings.max_images_per_request,
                f"this server takes at most {documents.media.settings.max_images_per_request} "
                "images per request ([media] max_images_per_request)",
            )
        ]
        if served.config.max_images is not None:
            limits.append(
                (served.config.max_images, f"model '{model}' (its engine) takes at most "
                 f"{served.config.max_images} images per request")
            )  # fmt: skip
        family = served.family
        if family.image_tensor is None:
            limits.append((0, f"model '{model}' does not accept images"))
        elif family.image_limit() is not None:
            limit = family.image_limit() or 0
            plural = "image" if limit == 1 else "images"
            why = f"model '{model}' takes at most {limit} {plural} per request"
            reason = family.image_limit_reason
            limits.append((limit, f"{why}: {reason}" if reason else why))
        self.limit, self.why = min(limits, key=lambda pair: pair[0])
        self.used = sum(
            1
            for message in request.messages
            if isinstance(message.content, list)
            for part in message.content
            if isinstance(part, ImageURLPart)
        )

    def left(self) -> tuple[int, str]:
        left = max(self.limit - self.used, 0)
        if self.used:
            others = "other image" if self.used == 1 else "other images"
            return left, f"{self.why}, and this request has {self.used} {others}"
        return left, self.why


async def _render(
    part: FilePart,
    where: Location,
    served: ServedRuntime,
    documents: Documents,
    budget: _PageBudget,
) -> RenderedDocument:
    left, why = budget.left()
    if left == 0:  # no page could go: say so before fetching or parsing anything
        raise TooManyMediaItems(
            (where, f": a PDF's pages are sent as images; {why}"),
            param=where,
            code="unsupported_content_part" if served.family.image_tensor is None else None,
        )
    data = await _document_bytes(part, where, documents)
    caps = documents.caps
    key = f"{hashlib.sha256(data).hexdigest()}|{caps!r}"
    try:
        document = documents.cache.get(key)
        if document is not None:  # rendered before (a conversation re-sends its document)
            check_page_count(len(document.pages), caps.max_pages, left, why)
        else:
            document = await _rendered(data, caps, left, why, documents)
            documents.cache.put(key, document, document.size)
    except GatewayError as exc:
        raise exc.revised(message=(where, f": {exc.message}")).located(where) from exc
    budget.used += len(document.pages)
    return document


async def _rendered(
    data: bytes, caps: PdfLimits, left: int, why: str, documents: Documents
) -> RenderedDocument:
    """The document rendered in a worker process, under its own render budget."""
    submitted = time.perf_counter()
    document: RenderedDocument = await documents.media.plane.decoder.run(
        render_pdf,
        data,
        caps,
        left,
        why,
        what="the PDF",
        on_wait=lambda seconds: documents.media.metrics.queued("decode", seconds),
        timeout_s=documents.render_timeout_s,
    )
    documents.media.metrics.media_decoded("document", document.render_s, document.pixels)
    phase("media.render_pdf", submitted, pages=len(document.pages))
    return document


async def _document_bytes(part: FilePart, where: Location, documents: Documents) -> bytes:
    """The document's bytes: ``file_data`` (a data: URL or bare base64) or ``file_url``."""
    file = part.file
    if file.file_id is not None:
        raise InvalidRequest(
            (
                where,
                ": this gateway has no Files API, so file_id cannot be read; send the "
                "document inline as file.file_data (a data:application/pdf;base64 URL)",
            ),
            param=(*where, "file", "file_id"),
            code="unsupported_parameter",
        )
    if (file.file_data is None) == (file.file_url is None):
        raise InvalidRequest(
            (where, ": a file part needs exactly one of file.file_data and file.file_url"),
            param=(*where, "file"),
        )
    url = file.file_url or file.file_data or ""
    if file.file_data is not None and not url.startswith("data:"):
        url = "data:application/pdf;base64," + url  # OpenAI's bare base64 form
    started = time.perf_counter()
    try:
        fetched = await documents.media.plane.fetcher.fetch(url)
    except MediaURLError as exc:
        raise exc.revised(message=(where, f": {exc.message}"), code="invalid_file_url").located(
            where
        ) from exc
    except GatewayError as exc:
        raise exc.revised(message=(where, f": {exc.message}")).located(where) from exc
    if isinstance(fetched, FrameList) or not is_pdf(fetched.data):
        declared = "" if isinstance(fetched, FrameList) else f" ({fetched.content_type})"
        raise UnsupportedMedia(
            (
                where,
                f": file parts take PDF documents; this file is not one{declared}. Send "
                "images, videos and audio in image_url, video_url and input_audio parts.",
            ),
            param=where,
        )
    documents.media.metrics.media_fetched(
        "document", time.perf_counter() - started, len(fetched.data)
    )
    return fetched.data


def _page_parts(document: RenderedDocument, filename: str | None) -> list[Any]:
    """One image part per page (a PNG data: URL), then the text layer as one text part."""
    parts: list[Any] = [
        ImageURLPart(
            type="image_url",
            image_url=ImageURL(url="data:image/png;base64," + base64.b64encode(page.png).decode()),
        )
        for page in document.pages
    ]
    texts = [(number, page.text) for number, page in enumerate(document.pages, 1) if page.text]
    if texts:
        name = f" {filename}" if filename else ""
        body = "\n\n".join(f"[page {number}]\n{text}" for number, text in texts)
        parts.append(TextPart(type="text", text=f"[document{name}: text layer]\n{body}"))
    return parts
