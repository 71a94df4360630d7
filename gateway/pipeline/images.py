"""Image URLs -> the family's wire tensor and its KV-reuse id.

Fetches run concurrently on the event loop; decoding and pixel work run in worker
threads, at most ``decode_workers`` at a time, so a burst of large images cannot starve
the token relay of other requests.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from gateway.errors import GatewayError, InvalidRequest
from gateway.media.identity import content_digest
from gateway.media.image import ImageLimits, decode_image
from gateway.runtime import Runtime, ServedRuntime


@dataclass(frozen=True)
class PreparedImages:
    tensor_name: str
    tensor: np.ndarray
    extra_id: int


def check_image_count(count: int, served: ServedRuntime, runtime: Runtime) -> None:
    limit = runtime.settings.limits.max_images_per_request
    engine_limit = served.config.max_images
    if engine_limit is not None:
        limit = min(limit, engine_limit)
    if count > limit:
        raise InvalidRequest(
            f"this request has {count} images; model '{served.config.id}' accepts at most {limit}",
            param="messages",
            code="too_many_images",
        )


async def _load_one(url: str, served: ServedRuntime, runtime: Runtime) -> np.ndarray:
    fetched = await runtime.fetcher.fetch(url)
    limits = ImageLimits(
        max_bytes=runtime.settings.limits.max_media_bytes,
        max_pixels=runtime.settings.limits.max_image_pixels,
    )
    async with runtime.decode_slots:
        return await asyncio.to_thread(
            lambda: served.family.prepare_image(decode_image(fetched.data, limits))
        )


async def prepare_images(
    urls: tuple[str, ...], served: ServedRuntime, runtime: Runtime
) -> PreparedImages | None:
    """Fetch, decode and preprocess every image; the first failure is the request's error."""
    if not urls:
        return None
    check_image_count(len(urls), served, runtime)
    family = served.family
    if family.image_tensor is None:
        raise InvalidRequest(f"model '{served.config.id}' does not accept images", param="messages")
    results = await asyncio.gather(
        *(_load_one(url, served, runtime) for url in urls), return_exceptions=True
    )
    for index, result in enumerate(results):
        if isinstance(result, GatewayError):
            result.message = f"image {index + 1} of {len(urls)}: {result.message}"
            raise result
        if isinstance(result, BaseException):
            raise result
    arrays = [r for r in results if isinstance(r, np.ndarray)]
    tensor = await asyncio.to_thread(family.stack_images, arrays)
    digest = content_digest(
        model=served.config.id, options=family.processing_options(), arrays=arrays
    )
    return PreparedImages(family.image_tensor, tensor, runtime.extra_ids.extra_id(digest))
