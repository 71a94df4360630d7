"""A PDF's bytes -> one PNG per page (and each page's text layer), under caps, in a worker.

PDFium (through pypdfium2) parses and renders: the renderer Chrome ships and fuzzes, in a
maintained binding whose wheels bundle it with no other dependency. It parses in C, so what a
hostile file can make it do is bounded from outside, not by counting objects: the byte cap
(checked before PDFium sees the file), the page-count cap (read from the page tree before any
page is loaded), a render scale chosen so each page fits ``max_page_pixels`` whatever its page
box says, the total-pixel cap, and the worker process around it (``offload.py``): the render
budget kills a worker stuck in a deeply nested object graph, and its address-space limit
turns a memory bomb into one refused item. PDFium is not thread-safe, which the worker
processes (one item at a time each) also settle.

Pages come back as PNG bytes, not arrays, so they take the image path every other image takes
(the families' preparation, the content digest over source bytes, the data: URLs the llmapi
contract sends): PDFium and zlib are deterministic, so a re-sent document gives the same bytes,
the same content id and so the KV cache of its first sending.

``render_pdf`` is a module-level function: the offloader sends it to a worker by reference.
"""

from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass

import pypdfium2 as pdfium
from PIL import Image

from gateway.errors import MediaDecodeError, MediaTooLarge, TooManyMediaItems
from gateway.media import limits

__all__ = [
    "PDF_MAGIC",
    "PdfLimits",
    "RenderedDocument",
    "RenderedPage",
    "check_page_count",
    "is_pdf",
    "render_pdf",
]

PDF_MAGIC = b"%PDF-"
# Readers accept the header anywhere in the first kilobyte (PDF 32000-1:2008 annex H.3 note).
_HEADER_WINDOW = 1024
POINTS_PER_INCH = 72.0
MAX_PAGE_SIDE = limits.DEFAULT_MAX_IMAGE_SIDE  # a page then passes the image path's side check


@dataclass(frozen=True)
class PdfLimits:
    """What one document may cost; ``pages_allowed`` is what the request's model takes."""

    max_bytes: int = limits.DEFAULT_PDF_MAX_BYTES
    max_pages: int = limits.DEFAULT_PDF_MAX_PAGES
    dpi: float = limits.DEFAULT_PDF_DPI
    max_page_pixels: int = limits.DEFAULT_PDF_MAX_PAGE_PIXELS
    max_total_pixels: int = limits.DEFAULT_PDF_MAX_TOTAL_PIXELS
    extract_text: bool = True


@dataclass(frozen=True)
class RenderedPage:
    png: bytes
    width: int
    height: int
    text: str


@dataclass(frozen=True)
class RenderedDocument:
    pages: tuple[RenderedPage, ...]
    render_s: float

    @property
    def pixels(self) -> int:
        return sum(page.width * page.height for page in self.pages)

    @property
    def size(self) -> int:
        """Bytes held: the pages' PNGs and text."""
        return sum(len(page.png) + len(page.text) for page in self.pages)


def is_pdf(data: bytes) -> bool:
    """Whether ``data`` starts like a PDF (the header within its first kilobyte)."""
    return PDF_MAGIC in data[:_HEADER_WINDOW]


def render_pdf(
    data: bytes, caps: PdfLimits, pages_allowed: int, allowed_why: str
) -> RenderedDocument:
    """Every page as PNG bytes at ``caps.dpi`` (lower where the page would pass
    ``max_page_pixels``), with its text layer when ``caps.extract_text``.

    ``pages_allowed`` is how many pages the request can carry as images (the family's, the
    engine's and the server's image limits less the request's other images); ``allowed_why``
    says which limit that is, for the refusal.
    """
    started = time.perf_counter()
    if len(data) > caps.max_bytes:
        raise MediaTooLarge(
            f"The PDF is {len(data)} bytes; this server takes PDFs of at most {caps.max_bytes} "
            "bytes ([media.pdf] max_bytes)."
        )
    if not is_pdf(data):
        raise MediaDecodeError("The file is not a PDF (no %PDF- header).", code="invalid_document")
    document = _open(data)
    try:
        count = len(document)
        check_page_count(count, caps.max_pages, pages_allowed, allowed_why)
        rendered = []
        total = 0
        for index in range(count):
            page = _render_page(document, index, caps)
            total += page.width * page.height
            if total > caps.max_total_pixels:
                raise MediaTooLarge(
                    f"The PDF's pages up to page {index + 1} render to {total} pixels; this "
                    f"server renders at most {caps.max_total_pixels} per document "
                    "([media.pdf] max_total_pixels)."
                )
            rendered.append(page)
    finally:
        document.close()
    return RenderedDocument(tuple(rendered), time.perf_counter() - started)


def _open(data: bytes) -> pdfium.PdfDocument:
    """The parsed document, or a 400 that says why PDFium would not open it."""
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        reason = str(exc).lower()
        if "password" in reason or "security" in reason:
            raise MediaDecodeError(
                "The PDF is encrypted with a password; send it decrypted.",
                code="encrypted_document",
            ) from None
        raise MediaDecodeError(
            "The PDF could not be parsed (PDFium: malformed or unsupported file).",
            code="invalid_document",
        ) from None


def check_page_count(count: int, max_pages: int, allowed: int, allowed_why: str) -> None:
    """Refuse a document of ``count`` pages over the server's cap or what the request may
    carry (``allowed``, ``allowed_why``)."""
    if count < 1:
        raise MediaDecodeError("The PDF has no pages.", code="invalid_document")
    if count > max_pages:
        raise TooManyMediaItems(
            f"The PDF has {count} pages; this server renders at most {max_pages} pages per "
            "document ([media.pdf] max_pages)."
        )
    if count > allowed:
        raise TooManyMediaItems(f"The PDF has {count} pages, each sent as an image; {allowed_why}.")


def render_scale(width_pt: float, height_pt: float, caps: PdfLimits) -> float:
    """The render scale (pixels per point): ``dpi``, or less so the page fits
    ``max_page_pixels`` and its longer side the image decoder's ``MAX_PAGE_SIDE``."""
    scale = caps.dpi / POINTS_PER_INCH
    area = width_pt * height_pt * scale * scale
    if area > caps.max_page_pixels:
        scale *= math.sqrt(caps.max_page_pixels / area) * 0.999  # rounding stays under the cap
    return min(scale, MAX_PAGE_SIDE * 0.999 / max(width_pt, height_pt))


def _render_page(document: pdfium.PdfDocument, index: int, caps: PdfLimits) -> RenderedPage:
    try:
        page = document[index]
    except pdfium.PdfiumError:
        raise MediaDecodeError(
            f"Page {index + 1} of the PDF could not be loaded.", code="invalid_document"
        ) from None
    try:
        width_pt, height_pt = (float(side) for side in page.get_size())
        if not (width_pt > 0 and height_pt > 0 and math.isfinite(width_pt * height_pt)):
            raise MediaDecodeError(
                f"Page {index + 1} of the PDF has an empty page box.", code="invalid_document"
            )
        scale = render_scale(width_pt, height_pt, caps)
        if min(width_pt, height_pt) * scale < 1:
            raise MediaTooLarge(
                f"Page {index + 1} of the PDF is {width_pt:g} x {height_pt:g} points: at the "
                f"{caps.max_page_pixels} pixels a page may have it would be under a pixel wide."
            )
        image = page.render(scale=scale, may_draw_forms=False).to_pil()
        text = _page_text(page) if caps.extract_text else ""
    finally:
        page.close()
    return RenderedPage(_png(image), image.width, image.height, text)


def _page_text(page: pdfium.PdfPage) -> str:
    textpage = page.get_textpage()
    try:
        return str(textpage.get_text_range()).replace("\r\n", "\n").strip()
    finally:
        textpage.close()


def _png(image: Image.Image) -> bytes:
    """PNG at zlib level 1: fast, lossless and deterministic (the content id relies on it)."""
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()
