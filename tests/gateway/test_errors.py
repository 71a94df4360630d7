"""Errors are immutable: a layer that knows more raises a revised copy, so an error shared by
several waiters (a single-flight fetch's failure) never carries one caller's location into
another's answer."""

from __future__ import annotations

import pytest

from gateway.errors import GatewayError, InvalidRequest, MediaURLError, RequestTooLarge


def test_an_error_cannot_be_edited_after_it_is_raised() -> None:
    error = InvalidRequest("bad", param="messages[0]")
    with pytest.raises(AttributeError):
        error.param = "elsewhere"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        error.message = "other"  # type: ignore[misc]


def test_revised_is_a_copy_of_the_same_kind() -> None:
    shared = MediaURLError("refused")
    mine = shared.revised(code="invalid_video_url", param="messages[0].content[1]")
    assert type(mine) is MediaURLError and mine.status_code == 400
    assert (mine.code, mine.param, mine.message) == (
        "invalid_video_url",
        "messages[0].content[1]",
        "refused",
    )
    assert (shared.code, shared.param) == ("invalid_image_url", None)  # untouched
    assert str(mine.revised(message="image 2 of 2: refused")) == "image 2 of 2: refused"


def test_located_keeps_a_more_precise_location() -> None:
    precise = InvalidRequest("bad", param="messages[0].content[1].image_url.detail")
    assert precise.located("messages[0].content[1]") is precise
    assert InvalidRequest("bad").located("file").param == "file"


def test_the_body_renders_the_fields_as_revised() -> None:
    error = GatewayError("boom").revised(param="store")
    assert error.to_body()["error"] == {
        "message": "boom",
        "type": "server_error",
        "param": "store",
        "code": "internal_error",
    }
    assert RequestTooLarge("big").status_code == 413
