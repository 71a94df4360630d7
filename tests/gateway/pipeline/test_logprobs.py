"""What a deployment must declare for log probabilities, and which tokens each text piece
holds when stop strings hold text back or cut it."""

from __future__ import annotations

import pytest

from gateway.config import ServedModel
from gateway.errors import InvalidRequest, UpstreamFailed
from gateway.families.calls import Scored, TokenLogprob
from gateway.families.registry import get_family
from gateway.pipeline.logprobs import LogprobsAsked, ScoredText, logprobs_asked
from gateway.runtime import ServedRuntime
from gateway.streaming.text import StopMatcher
from gateway.triton.contract import parse_model_config
from tests.fakes.triton import FakeTriton
from tests.fakes.triton_configs import ensemble_config


def _served(tokenizer: object = None) -> ServedRuntime:
    config = ServedModel(id="m", family="llava", triton_model="ensemble", triton_url="x:1")
    return ServedRuntime(config, get_family("llava"), FakeTriton(), tokenizer_path=tokenizer)


async def test_a_deployment_that_is_not_decoupled_cannot_give_per_token_values() -> None:
    contract = parse_model_config(ensemble_config("ensemble", decoupled=False))
    with pytest.raises(InvalidRequest, match="decoupled") as caught:
        await logprobs_asked(_served(), contract, 0, "logprobs")
    assert caught.value.param == "logprobs" and caught.value.code == "unsupported_parameter"


async def test_alternatives_need_declared_logits_and_a_readable_tokenizer(tmp_path) -> None:
    bare = parse_model_config(ensemble_config("ensemble", log_probs=False))
    with pytest.raises(InvalidRequest, match="'return_log_probs' or the output"):
        await logprobs_asked(_served(), bare, 0, "logprobs")
    contract = parse_model_config(ensemble_config("ensemble"))
    (tmp_path / "tokenizer.json").write_text("not json")
    with pytest.raises(InvalidRequest, match="tokenizer"):
        await logprobs_asked(_served(tmp_path), contract, 2, "top_logprobs")
    assert await logprobs_asked(_served(), contract, None, "logprobs") is None
    asked = await logprobs_asked(_served(), contract, 0, "logprobs", with_chosen=True)
    assert asked == LogprobsAsked(0, True) and asked.flags == ("return_log_probs",)


def test_a_response_without_the_asked_outputs_is_an_upstream_failure() -> None:
    with pytest.raises(UpstreamFailed, match="output_log_probs"):
        LogprobsAsked(0).token("a", None, None)
    assert LogprobsAsked(0, with_chosen=True).token("a", -1.0, None).top == (("a", -1.0),)


def _relay(tokens: list[str], stops: tuple[str, ...]) -> list[Scored]:
    """What the relay does: feed each token's text through the stop matcher, pair them."""
    stop, scored, out = StopMatcher(stops), ScoredText(), []
    for index, text in enumerate(tokens):
        scored.add(TokenLogprob(text, -float(index)))
        out.append(scored.emit(stop.feed(text)))
        if stop.stopped:
            break
    out.append(scored.end(stop.flush()))
    return [piece for piece in out if piece]


@pytest.mark.parametrize(
    ("tokens", "stops", "text", "kept"),
    [
        (["a", "bc", "d"], (), "abcd", ["a", "bc", "d"]),
        (["a", "bc", "d", ""], (), "abcd", ["a", "bc", "d"]),  # a trailing end token goes
        (["a", "", "b"], (), "ab", ["a", "", "b"]),  # an empty token inside stays
        (["x", "y", "STOP", "z"], ("STOP",), "xy", ["x", "y"]),
        (["x", "yS", "TOP", "z"], ("STOP",), "xy", ["x", "yS"]),
        (["x", "S", "T", "u"], ("STOP",), "xSTu", ["x", "S", "T", "u"]),  # held, then let go
    ],
)
def test_each_token_leaves_with_the_first_piece_that_holds_its_text(
    tokens: list[str], stops: tuple[str, ...], text: str, kept: list[str]
) -> None:
    pieces = _relay(tokens, stops)
    assert "".join(piece.text for piece in pieces) == text
    assert [token.token for piece in pieces for token in piece.tokens] == kept
