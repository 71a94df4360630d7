"""Errors are immutable: a layer that knows more raises a revised copy, so an error shared by
several waiters (a single-flight fetch's failure) never carries one caller's location into
another's answer."""

from __future__ import annotations

import pickle

import pytest

from gateway.errors import (
    GatewayError,
    InvalidRequest,
    MediaTooLarge,
    MediaURLError,
    RequestTooLarge,
)
from gateway.location import Location, location_of, rendered


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


def test_a_param_is_kept_as_its_steps_and_written_back_the_same() -> None:
    error = InvalidRequest("bad", param="messages[3].content[1].image_url")
    assert error.location == ("messages", 3, "content", 1, "image_url")
    assert error.param == "messages[3].content[1].image_url"
    for path in ("model", "text.format", "tools[0].function.parameters", "input[2]"):
        assert rendered(location_of(path)) == path
    assert location_of("metadata[a.b]") == ("metadata[a.b]",)  # a key that is not a path


def test_an_endpoints_names_rename_the_param_and_the_places_in_the_message() -> None:
    """Issue 23 item 2: the places a message names are steps, renamed when the body is written;
    the message's own words (which may quote a client's 'messages[0]') are never searched."""
    at: Location = ("messages", 1, "content", 0)
    error = InvalidRequest(("the part ", at, " quoting 'messages[1]' is refused"), param=at)

    def names(place: Location) -> Location:
        return ("input", 7, *place[2:]) if place[:2] == ("messages", 1) else place

    body = error.to_body(names)["error"]
    assert body["param"] == "input[7].content[0]"
    assert body["message"] == "the part input[7].content[0] quoting 'messages[1]' is refused"
    assert error.message == "the part messages[1].content[0] quoting 'messages[1]' is refused"


def test_which_item_an_error_is_about_is_kept_apart_from_its_message() -> None:
    """A decode worker's error crosses a pipe (pickled); the pipeline says which item it was."""
    raised = pickle.loads(pickle.dumps(MediaTooLarge("The image is too large.")))
    frame = raised.located(None, item="frame 2 of 9")
    video = frame.located(("messages", 0, "content", 1), item="video 1 of 1")
    assert video.message == "video 1 of 1: frame 2 of 9: The image is too large."
    assert video.param == "messages[0].content[1]" and raised.param is None
    again = pickle.loads(pickle.dumps(video))
    assert (again.message, again.param, again.code) == (video.message, video.param, video.code)


def test_a_nested_objects_field_is_named_within_it() -> None:
    error = InvalidRequest("threshold must be in [0, 1]", param="threshold")
    assert error.within(("chunking_strategy",)).param == "chunking_strategy.threshold"
