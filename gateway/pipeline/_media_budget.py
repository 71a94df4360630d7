"""What a request's media cost in prompt positions, and the image-token budgets.

The family counts what it sends (``Family.image_tokens``, ``video_tokens``): usage reports it
per modality, and the budgets (a served model's ``max_image_tokens``, the server's ``[media]
max_image_tokens_per_request``) refuse a request over them, before any decoding where the
image's header already shows it over, and in any case before Triton sees it.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.config import MediaSettings
from gateway.errors import MediaTooLarge
from gateway.families.base import Family
from gateway.location import Location, Message
from gateway.media.image import read_header
from gateway.pipeline._media_jobs import PreparedItem
from gateway.pipeline.conversation import MediaPart
from gateway.protocol.common import MediaTokens
from gateway.served import ServedRuntime

__all__ = ["check_header_budget", "check_image_budget", "media_tokens"]


def media_tokens(family: Family, items: Sequence[PreparedItem], video: bool) -> MediaTokens:
    """What the items cost in prompt positions, as the family counts what it prepared."""
    if video:
        return MediaTokens(video_tokens=family.video_tokens(int(items[0].array.shape[0])))
    return MediaTokens(image_tokens=family.image_tokens([item.size for item in items]))


def _image_budgets(served: ServedRuntime, limits: MediaSettings) -> list[tuple[int, str]]:
    caps = [
        (served.config.max_image_tokens, f"model '{served.config.id}' (max_image_tokens)"),
        (limits.max_image_tokens_per_request, "this server ([media] max_image_tokens_per_request)"),
    ]
    return [(cap, who) for cap, who in caps if cap is not None]


def _over_budget(
    count: int, cap: int, who: str, what: Message, param: Location = ("messages",)
) -> MediaTooLarge:
    said = (what,) if isinstance(what, str) else what
    return MediaTooLarge(
        (
            *said,
            f" {count} image tokens; {who} allows at most {cap} per request. Send fewer or "
            "smaller images, or detail 'low' where the model has a choice of resolution.",
        ),
        param=param,
        code="image_token_budget_exceeded",
    )


def check_image_budget(tokens: MediaTokens, served: ServedRuntime, limits: MediaSettings) -> None:
    """Refuse images over the model's (``max_image_tokens``) or the server's
    (``[media] max_image_tokens_per_request``) image-token budget, before Triton sees them."""
    count = tokens.image_tokens
    for cap, who in _image_budgets(served, limits):
        if count is not None and count > cap:
            raise _over_budget(count, cap, who, "this request's images take")


def check_header_budget(
    data: bytes, part: MediaPart, served: ServedRuntime, limits: MediaSettings
) -> None:
    """Refuse an image whose header alone shows it over an image-token budget, before it is
    decoded. Its EXIF orientation is not read yet, so it must be over either way up."""
    budgets = _image_budgets(served, limits)
    size = read_header(data).size if budgets else None
    if size is None:
        return
    family = served.family
    width, height = size
    counts = [
        family.image_tokens([family.detail_size(h, w, part.detail)])
        for h, w in ((height, width), (width, height))
    ]
    if None in counts:
        return
    fewest = min(count for count in counts if count is not None)
    for cap, who in budgets:
        if fewest > cap:
            what = ("by its header, before decoding, ", part.where, " takes")
            raise _over_budget(fewest, cap, who, what, part.where)
