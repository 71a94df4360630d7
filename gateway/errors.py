"""The gateway's exception tree, and how each branch becomes an OpenAI error object.

Every failure a request can meet is raised as one of these, translated once at the
boundary where a foreign error appears (media/ maps PIL and httpx errors, triton/ maps
gRPC errors). The single handler in ``app.py`` turns them into::

    {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}

The tree:

    GatewayError                      500 server_error
    ├── ClientError                   400 invalid_request_error (the caller's fault)
    │   ├── InvalidRequest            400 a field is wrong or a combination is unsupported
    │   ├── MediaError                400 invalid_media: a media part could not be used
    │   │   ├── MediaFetchError       400 media_fetch_failed: HTTP error, unreachable, bad redirect
    │   │   │   └── MediaURLError     400 invalid_image_url (video/audio: invalid_*_url): the URL
    │   │   │                             itself is refused (malformed, scheme, not public)
    │   │   ├── MediaTooLarge         400 media_too_large: bytes, pixels, frames or seconds
    │   │   ├── MediaTimeout          400 media_timeout: fetching or decoding ran out of time
    │   │   ├── TooManyMediaItems     400 too_many_media_items: more parts than allowed
    │   │   └── MediaDecodeError      400 invalid_media: truncated, corrupt or empty bytes
    │   │       └── UnsupportedMedia  400 unsupported_media_type: a format, container or codec
    │   │                                 outside the allowlist
    │   ├── ModelNotFound             404 no served model has that id
    │   ├── NotFound                  404 no stored response has that id (for this API key)
    │   ├── AuthenticationError       401 missing or wrong API key
    │   ├── RequestTimeout            408 the request's head or body came too slowly
    │   ├── RequestTooLarge           413 request_too_large: the body is over the server's cap
    │   ├── RateLimited               429 too many requests in flight
    │   ├── HeaderFieldsTooLarge      431 too many header fields, or too many header bytes
    │   └── StoreQuotaExceeded        429 insufficient_quota: this API key's stored responses
    │                                     are at their byte quota (delete some, or store: false)
    ├── StoreError                    500 store_failed: the response store answered with an error
    │   ├── StoreUnavailable          503 store_unavailable: the store cannot be reached, is
    │   │                                 read-only, or did not answer in time (Retry-After)
    │   └── StoreFull                 507 store_full: the store's total-size cap, or its disk
    ├── UpstreamError                 503 Triton is not serving
    │   ├── UpstreamUnavailable       503 Triton is down, restarting or not ready (Retry-After)
    │   ├── UpstreamTimeout           504 Triton went silent: no token within the idle
    │   │                                 timeout, or the request ran past its deadline
    │   └── UpstreamFailed            502 Triton answered with an error mid-request
    ├── MediaWorkerFailed             503 media_worker_failed: a decoding worker died under an
    │                                     item, and again on the retry (Retry-After: 1)
    └── DecoderUnavailable            503 decoder_unavailable: this server lacks the decoder
                                          a media kind needs (PyAV/FFmpeg not installed)

An error with ``retry_after_s`` set is answered with a ``Retry-After`` header.
"""

from __future__ import annotations

import asyncio
from typing import Any

from typing_extensions import Self

from gateway.location import FieldNames, Location, Message, location_of, rendered, same_names


class StartupAborted(Exception):
    """The gateway could not start, and has logged why in words; the traceback a server
    would print for it adds nothing (``observability/logging.py`` leaves it out)."""


class GatewayError(Exception):
    """Base of every error the gateway raises on purpose.

    ``param`` is kept as a location (``param="messages[3].content"`` is read into its steps) and
    written, like any place a ``Message`` names, by the endpoint's ``FieldNames`` only when the
    body is written: the same mistake reads the same on every endpoint. ``items`` say which of
    several media items (or frames) the error is about: ``image 2 of 3: ...``."""

    status_code: int = 500
    error_type: str = "server_error"
    default_code: str = "internal_error"
    retry_after_s: int | None = None  # seconds, sent as Retry-After when set

    def __init__(
        self, message: Message, *, param: str | Location | None = None, code: str | None = None
    ):
        super().__init__(message)
        self._text = message
        self._location = location_of(param) if isinstance(param, str) else param
        self._code = code or self.default_code
        self._items: tuple[str, ...] = ()

    # Read-only: an error says what it said when it was raised. A layer that knows more (which
    # part of the request it was) raises a ``located`` copy instead of editing this one.
    @property
    def message(self) -> str:
        return self.message_as(same_names)

    @property
    def param(self) -> str | None:
        return self.param_as(same_names)

    @property
    def location(self) -> Location | None:
        return self._location

    @property
    def code(self) -> str:
        return self._code

    def __str__(self) -> str:
        return self.message

    def message_as(self, names: FieldNames) -> str:
        text = self._text
        if not isinstance(text, str):
            text = "".join(p if isinstance(p, str) else rendered(names(p)) for p in text)
        return ": ".join((*self._items, text))

    def param_as(self, names: FieldNames) -> str | None:
        return None if self._location is None else rendered(names(self._location))

    def _copy(self) -> Self:
        copy = type(self).__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.args = self.args
        return copy

    def revised(
        self, *, message: Message | None = None, param: str | None = None, code: str | None = None
    ) -> Self:
        """A copy of this error (same class, status and type) with these fields replaced."""
        copy = self._copy()
        if message is not None:
            copy._text, copy._items, copy.args = message, (), (message,)
        if param is not None:
            copy._location = location_of(param)
        copy._code = self._code if code is None else code
        return copy

    def located(self, at: str | Location | None, *, item: str | None = None) -> Self:
        """This error at ``at`` (unless it names a place already), about ``item`` (``image 2
        of 3``) when the request has several."""
        if item is None and (self._location is not None or not at):
            return self
        copy = self._copy()
        if copy._location is None and at:
            copy._location = location_of(at) if isinstance(at, str) else at
        if item is not None:
            copy._items = (item, *self._items)
        return copy

    def within(self, outer: Location) -> Self:
        """This error's place inside ``outer``: a check of a nested object that was told its
        fields only (``threshold`` is ``chunking_strategy.threshold``)."""
        copy = self._copy()
        copy._location = outer + (self._location or ())
        return copy

    def to_body(self, names: FieldNames = same_names) -> dict[str, Any]:
        """The OpenAI error object for this error, its places as ``names`` says them."""
        return {
            "error": {
                "message": self.message_as(names),
                "type": self.error_type,
                "param": self.param_as(names),
                "code": self.code,
            }
        }


class ClientError(GatewayError):
    """The request cannot be served as sent; retrying it unchanged will fail again."""

    status_code = 400
    error_type = "invalid_request_error"
    default_code = "invalid_request"


class InvalidRequest(ClientError):
    """A field is malformed, out of range, or unsupported by the chosen model."""


class MediaError(ClientError):
    """A media part (image, video, audio) could not be turned into model input."""

    default_code = "invalid_media"


class MediaFetchError(MediaError):
    """Fetching a media URL failed: HTTP error, unreachable host, bad or endless redirects."""

    default_code = "media_fetch_failed"


class MediaURLError(MediaFetchError):
    """The URL is refused before (or instead of) fetching it: malformed, unsupported scheme,
    a host outside the allowlist, or an address that is not public (SSRF guard).

    The pipeline sets the code per part kind (``invalid_image_url``, ``invalid_video_url``,
    ``invalid_audio_url``), as OpenAI names its image-URL refusals.
    """

    default_code = "invalid_image_url"


class MediaTooLarge(MediaError):
    """Bytes, pixels, frames or seconds exceed a configured limit."""

    default_code = "media_too_large"


class MediaTimeout(MediaError):
    """Fetching or decoding one item took longer than its time budget."""

    default_code = "media_timeout"


class TooManyMediaItems(MediaError):
    """A request carries more images, videos or audio clips than the model or server allows."""

    default_code = "too_many_media_items"


class MediaDecodeError(MediaError):
    """The bytes are not an intact media file (truncated, corrupt, empty)."""

    default_code = "invalid_media"


class UnsupportedMedia(MediaDecodeError):
    """The bytes are a format, container or codec outside the allowlist."""

    default_code = "unsupported_media_type"


class ModelNotFound(ClientError):
    """The request names a model this gateway does not serve."""

    status_code = 404
    default_code = "model_not_found"


class NotFound(ClientError):
    """The request names a stored object (a response) that does not exist, has expired, or
    belongs to another API key: the three are not told apart."""

    status_code = 404
    default_code = "not_found"


class AuthenticationError(ClientError):
    """The API key is missing or wrong."""

    status_code = 401
    error_type = "authentication_error"
    default_code = "invalid_api_key"


class RequestTimeout(ClientError):
    """The request's headers or body did not arrive within the server's deadlines."""

    status_code = 408
    default_code = "request_timeout"


class RateLimited(ClientError):
    """The in-flight request cap is reached; retry later."""

    status_code = 429
    error_type = "rate_limit_error"
    default_code = "rate_limit_exceeded"
    retry_after_s = 1


class RequestTooLarge(ClientError):
    """The request body is larger than the server takes (``[server] max_body_bytes``)."""

    status_code = 413
    default_code = "request_too_large"


class HeaderFieldsTooLarge(ClientError):
    """The request head has more header fields, or more bytes, than the server takes."""

    status_code = 431
    default_code = "request_header_fields_too_large"


class StoreQuotaExceeded(ClientError):
    """This API key's stored responses already hold its byte quota: a response to store is
    refused (before generation where possible) until the key deletes some."""

    status_code = 429
    error_type = "insufficient_quota"
    default_code = "store_quota_exceeded"


class StoreError(GatewayError):
    """The response store answered with an error that retrying will not fix (a corrupt
    file, a schema it cannot read)."""

    default_code = "store_failed"


class StoreUnavailable(StoreError):
    """The response store cannot be reached, cannot be written (a read-only disk), or did not
    answer within its deadline: requests that need it are refused at once, with Retry-After,
    and the store is tried again on the next one."""

    status_code = 503
    default_code = "store_unavailable"
    retry_after_s = 1


class StoreFull(StoreError):
    """The store's total-size cap is reached, or its disk is full: nothing more can be stored
    until responses expire or are deleted (deleting still works)."""

    status_code = 507
    default_code = "store_full"


class UpstreamError(GatewayError):
    """Triton could not serve a well-formed request."""

    status_code = 503
    error_type = "server_error"
    default_code = "upstream_error"


class UpstreamUnavailable(UpstreamError):
    """Triton is down, restarting, or the model is not ready."""

    default_code = "upstream_unavailable"
    retry_after_s = 1


class ShuttingDown(UpstreamUnavailable):
    """The gateway is stopping; the client should retry (elsewhere or shortly)."""

    default_code = "server_shutting_down"


# The message the graceful stop cancels a running request with (``drain.py``): the relay reads
# it as ``ShuttingDown``, so each endpoint ends its stream with its own failure events.
SHUTDOWN = "server_shutting_down"


def shutting_down() -> ShuttingDown:
    return ShuttingDown("the server is shutting down; retry shortly")


def shutdown_of(cancel: asyncio.CancelledError) -> ShuttingDown | None:
    """The ``ShuttingDown`` a cancellation stands for (the drain's), with the task's cancel
    request taken back so the stream can still write its end; None for any other cancel."""
    if cancel.args[:1] != (SHUTDOWN,):
        return None
    uncancel = getattr(asyncio.current_task(), "uncancel", None)  # Python 3.11+
    if uncancel is not None:
        uncancel()
    return shutting_down()


class UpstreamLost(UpstreamUnavailable):
    """Triton became unreachable in the middle of an answer (a replica died). What it had
    generated cannot be resumed elsewhere; an answer not yet sent can be generated again."""


class UpstreamTimeout(UpstreamError):
    """Triton accepted the request and then went silent for too long."""

    status_code = 504
    default_code = "upstream_timeout"


class UpstreamFailed(UpstreamError):
    """Triton accepted the request and then reported an error."""

    status_code = 502
    default_code = "upstream_failed"


class MediaWorkerFailed(GatewayError):
    """A media decoding worker process died while decoding an item, and so did the worker the
    item was retried on: the gateway's fault (a killed or crashing worker), not the media's."""

    status_code = 503
    default_code = "media_worker_failed"
    retry_after_s = 1


class DecoderUnavailable(GatewayError):
    """The server cannot decode this kind of media at all (its PyAV, and so FFmpeg, is not
    installed): the deployment's fault, not the media's, and no retry helps until an operator
    installs it."""

    status_code = 503
    default_code = "decoder_unavailable"


MAX_ECHOED_CHARS = 64  # of a client's value (an id, a name) quoted in an error message


def echoed(value: str, most: int = MAX_ECHOED_CHARS) -> str:
    """``value`` quoted for an error message, cut when long: a 5,000-character id is not
    sent back whole (nor logged whole)."""
    if len(value) <= most:
        return repr(value)
    return f"{value[:most]!r}... ({len(value)} characters)"
