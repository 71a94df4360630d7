"""PDFs written by hand for the tests: text pages, a page with a picture, and hostile files.

A PDF is a few numbered objects and a cross-reference table of their byte offsets; writing
them here (rather than keeping binary fixtures) shows exactly what each hostile file does.
"""

from __future__ import annotations

import zlib

import numpy as np


def _document(objects: list[bytes], trailer_extra: bytes = b"") -> bytes:
    """Objects 1..n (object 1 the catalog) with a valid cross-reference table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\n" % (len(objects) + 1, trailer_extra)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def _stream(content: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(content), extra) + content + b"\nendstream"


def _escaped(text: str) -> bytes:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")


def text_page_content(lines: list[str]) -> bytes:
    body = b"BT /F1 18 Tf 72 720 Td 22 TL "
    body += b"".join(b"(" + _escaped(line) + b") Tj T* " for line in lines)
    return body + b"ET"


def picture(size: int = 64, seed: int = 7) -> np.ndarray:
    """A small RGB picture: gradients plus noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size]
    pixels = np.stack([x * 255 // size, y * 255 // size, (x * y) % 256], axis=-1)
    return np.clip(pixels + rng.integers(-30, 30, pixels.shape), 0, 255).astype(np.uint8)


def make_pdf(
    pages: list[str | np.ndarray],
    *,
    page_size: tuple[float, float] = (612, 792),
    trailer_extra: bytes = b"",
) -> bytes:
    """One page per item: a string is a page of text, an array a page with that picture."""
    # 1 catalog, 2 page tree, 3 font; then per page: the page, its content, (its image).
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", b""]
    objects[2] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
    kids = []
    width, height = page_size
    for item in pages:
        page_number = len(objects) + 1
        kids.append(page_number)
        resources = b"/Font << /F1 3 0 R >>"
        if isinstance(item, str):
            content = text_page_content(item.split("\n"))
            objects += [b"", _stream(content)]
        else:
            h, w = item.shape[:2]
            content = b"q 400 0 0 400 106 196 cm /Im1 Do Q BT /F1 14 Tf 72 120 Td (Figure 1) Tj ET"
            image = _stream(
                zlib.compress(item.tobytes()),
                b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB "
                b"/BitsPerComponent 8 /Filter /FlateDecode " % (w, h),
            )
            resources += b" /XObject << /Im1 %d 0 R >>" % (page_number + 2)
            objects += [b"", _stream(content), image]
        objects[page_number - 1] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Resources << %s >> "
            b"/Contents %d 0 R >>" % (width, height, resources, page_number + 1)
        )
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % kid for kid in kids),
        len(kids),
    )
    return _document(objects, trailer_extra)


def two_page_pdf() -> bytes:
    """Page 1: text; page 2: a picture with a caption."""
    return make_pdf(["Quarterly report\nRevenue grew by 12 percent.", picture()])


def text_pdf(pages: int) -> bytes:
    return make_pdf([f"Page number {i + 1}" for i in range(pages)])


def encrypted_pdf() -> bytes:
    """A document whose standard security handler wants a user password (the /U entry
    matches no empty password), as a file encrypted with one is."""
    encrypt = b"<< /Filter /Standard /V 1 /R 2 /Length 40 /P -4 /O <%s> /U <%s> >>" % (
        b"11" * 32,
        b"22" * 32,
    )
    document = make_pdf(["secret"], trailer_extra=b"/Encrypt 99 0 R /ID [<00112233> <00112233>] ")
    # The /Encrypt dictionary as object 99, appended with an incremental update's xref.
    return _append_object(document, 99, encrypt, b"/Encrypt 99 0 R /ID [<00112233> <00112233>] ")


def _append_object(document: bytes, number: int, body: bytes, trailer_extra: bytes) -> bytes:
    previous = int(document.rsplit(b"startxref\n", 1)[1].split(b"\n", 1)[0])
    out = bytearray(document)
    offset = len(out)
    out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n%d 1\n%010d 00000 n \n" % (number, offset)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Prev %d %s>>\n" % (
        number + 1,
        previous,
        trailer_extra,
    )
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def deeply_nested_pdf(depth: int = 200_000) -> bytes:
    """A page whose resources hold an array nested ``depth`` deep (a parser recursion bomb)."""
    nested = b"[" * depth + b"]" * depth
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Deep "
        + nested
        + b" >> /Contents 4 0 R >>",
        _stream(b"BT /F1 12 Tf 72 720 Td (deep) Tj ET"),
    ]
    return _document(objects)


def huge_page_pdf() -> bytes:
    """One page whose box is 14400 x 14400 points (200 inches a side, PDF's largest)."""
    return make_pdf(["a very large page"], page_size=(14400, 14400))


def sliver_page_pdf() -> bytes:
    """One page 14400 points long and 1 point wide: any fitting scale leaves it no width."""
    return make_pdf(["x"], page_size=(1, 14400))


def lying_page_count_pdf(claimed: int = 999_999_999) -> bytes:
    """One page whose page tree claims ``claimed`` pages."""
    return make_pdf(["one page"]).replace(b"/Count 1", b"/Count %d" % claimed)


def content_bomb_pdf(decoded_bytes: int = 50_000_000) -> bytes:
    """A page whose content stream deflates from a few kilobytes to ``decoded_bytes`` of
    blanks (a decompression bomb inside the document)."""
    bomb = zlib.compress(b" " * decoded_bytes, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        _stream(bomb, b"/Filter /FlateDecode "),
    ]
    return _document(objects)
