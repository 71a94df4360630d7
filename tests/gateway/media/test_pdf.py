"""``media/pdf.py``: PDFium's rendering under the caps, and its refusals, without a gateway."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from gateway.errors import MediaDecodeError, MediaTooLarge, TooManyMediaItems
from gateway.media.pdf import PdfLimits, render_pdf, render_scale
from tests.gateway.media.pdf_samples import (
    content_bomb_pdf,
    deeply_nested_pdf,
    encrypted_pdf,
    huge_page_pdf,
    lying_page_count_pdf,
    make_pdf,
    picture,
    text_pdf,
    two_page_pdf,
)


def test_pages_render_at_the_dpi_with_their_text() -> None:
    document = render_pdf(two_page_pdf(), PdfLimits(dpi=72), 8, "")
    first, second = document.pages
    assert (first.width, first.height) == (612, 792)  # US Letter at 72 dpi: one pixel a point
    assert first.text == "Quarterly report\nRevenue grew by 12 percent."
    assert second.text == "Figure 1"
    image = Image.open(io.BytesIO(second.png))
    assert image.format == "PNG" and image.size == (612, 792)
    # The picture is drawn: the page is not blank where it stands (400 pt square at 106, 196).
    crop = image.convert("RGB").crop((150, 250, 450, 550))
    assert len(crop.getcolors(maxcolors=10**6) or ()) > 100


def test_rendering_is_deterministic() -> None:
    """The content id hashes the page PNGs: the same document must give the same bytes."""
    pdf = make_pdf([picture(32, seed=3), "text"])
    first = render_pdf(pdf, PdfLimits(), 8, "")
    again = render_pdf(pdf, PdfLimits(), 8, "")
    assert [p.png for p in first.pages] == [p.png for p in again.pages]


def test_a_huge_page_box_is_rendered_at_the_scale_that_fits() -> None:
    caps = PdfLimits(max_page_pixels=100_000)
    (page,) = render_pdf(huge_page_pdf(), caps, 1, "").pages
    assert page.width * page.height <= 100_000 and abs(page.width - page.height) <= 1
    assert render_scale(612, 792, caps) < 2  # a Letter page at 144 dpi is 1.9 Mpx: scaled


def test_the_caps_refuse_by_name() -> None:
    with pytest.raises(TooManyMediaItems, match=r"100 pages.*at most 32 pages"):
        render_pdf(text_pdf(100), PdfLimits(), 100, "")
    with pytest.raises(TooManyMediaItems, match="3 pages, each sent as an image; the model"):
        render_pdf(text_pdf(3), PdfLimits(), 2, "the model takes 2")
    with pytest.raises(MediaTooLarge, match="max_total_pixels"):
        render_pdf(text_pdf(3), PdfLimits(max_total_pixels=2_000_000), 8, "")
    with pytest.raises(MediaTooLarge, match="max_bytes"):
        render_pdf(text_pdf(1), PdfLimits(max_bytes=100), 8, "")


def test_encrypted_and_malformed_files_are_refused() -> None:
    with pytest.raises(MediaDecodeError) as encrypted:
        render_pdf(encrypted_pdf(), PdfLimits(), 8, "")
    assert encrypted.value.code == "encrypted_document"
    with pytest.raises(MediaDecodeError) as malformed:
        render_pdf(b"%PDF-1.4\n1 0 obj <<", PdfLimits(), 8, "")
    assert malformed.value.code == "invalid_document"
    with pytest.raises(MediaDecodeError, match="not a PDF"):
        render_pdf(b"GIF89a", PdfLimits(), 8, "")


def test_hostile_structures_are_bounded() -> None:
    """PDFium counts the pages it finds, not the tree's claim; bounds its own nesting; and a
    content stream that inflates to 50 MB of blanks renders one blank page."""
    assert len(render_pdf(lying_page_count_pdf(), PdfLimits(), 1, "").pages) == 1
    assert len(render_pdf(deeply_nested_pdf(), PdfLimits(), 1, "").pages) == 1
    (page,) = render_pdf(content_bomb_pdf(), PdfLimits(dpi=36), 1, "").pages
    assert (page.width, page.height) == (306, 396) and page.text == ""
