"""The thread lane's job for a still JPEG decoded and prepared on a device (``[decode] device``).

The device's counterpart of ``_media_jobs.prepare_image``: decode (``media/cuda_jpeg.py``),
the family's ``pixel_spec`` on the device (``families/_pixels_torch.py``), the source bytes
hashed beside it under the device decoder's own digest kind. It returns None where the image
is PIL's to decode after all; the caller then runs the CPU job, which has the last word.

Imported only by a gateway that decodes on a device: it brings in torch.
"""

from __future__ import annotations

import logging
import time

from gateway.families._pixels_torch import on_device, preprocess_tensor
from gateway.families.base import Family
from gateway.media.cuda_jpeg import DeviceDecoder, NotForDevice
from gateway.media.image import ImageLimits
from gateway.media.stripes import Pending
from gateway.pipeline._media_jobs import _OVERLAP_BYTES, DigestInputs, PreparedItem, source_array

__all__ = ["prepare_image_on_device"]

log = logging.getLogger("mmgw.media")


def prepare_image_on_device(
    data: bytes,
    limits: ImageLimits,
    family: Family,
    decoder: DeviceDecoder,
    digest: DigestInputs | None = None,
) -> PreparedItem | None:
    """``data`` decoded and prepared on ``decoder``'s device as ``family.pixel_spec`` says,
    or None where PIL must decode it: declined (NotForDevice, the reason at debug level) or a
    failure of the device's (a torch RuntimeError such as running out of its memory, logged),
    which is never the client's fault and so never its error."""
    spec = family.pixel_spec
    if spec is None or not on_device(spec):
        return None  # a recipe whose resize torch does not do as PIL does
    started = time.perf_counter()
    kind = digest.decoded_by(decoder.tag) if digest is not None else None
    hashing = None
    if kind is not None:
        inline = len(data) < _OVERLAP_BYTES
        hashing = Pending(kind.digest, [source_array(data)], inline=inline)
    try:
        image = decoder.decode(data, limits)
        decoded = time.perf_counter()
        array, size = preprocess_tensor(image.pixels, image.orientation, spec)
    except BaseException as exc:
        if hashing is not None:
            hashing.cancel()
        if isinstance(exc, NotForDevice):
            log.debug("the device declined an image: %s", exc)
            return None
        if isinstance(exc, RuntimeError):  # torch's, out of memory included: not the client's
            log.warning("the device failed on an image (PIL decodes it): %s", exc)
            return None
        raise
    prepared = time.perf_counter()
    hashed = hashing.result() if hashing is not None else None
    return PreparedItem(
        array,
        decoded - started,
        prepared - decoded,
        size[0] * size[1],
        size,
        hashed,
        started=started,
        digest_s=time.perf_counter() - prepared,
        decoder=decoder.tag,
    )
