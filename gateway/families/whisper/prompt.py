"""Whisper: which contract a deployment speaks, its decoder prompts, and timestamps -> segments.

A Whisper deployment is either NVIDIA's ``whisper_bls`` (it takes 16 kHz samples and the decoder
prompt as text, computes the log-mel itself, writes at most 50 tokens and strips every special
token from its answer) or the encoder-decoder ``tensorrt_llm`` model underneath it (the
"direct" contract: the gateway sends log-mel features and prompt token ids and reads token
ids back). Direct is the better one: the gateway controls the prompt (language, task,
previous-text context, timestamps on or off) and the output length, and reads timestamps.

Everything here is pure: prompts as token ids or text, window lengths from the output budget,
and the segments a window's tokens describe (Whisper writes ``<|1.00|> text <|3.40|>``;
TensorRT-LLM applies none of Whisper's timestamp rules, so the parse tolerates stray, unpaired
and out-of-order timestamps: times are clamped into the window and never go backwards).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.families.calls import Task
from gateway.families.whisper.tokens import WhisperTokenizer

MAX_WINDOW_S = 30.0
BLS_MAX_NEW_TOKENS = 50  # fixed inside NVIDIA's whisper_bls
# Dense speech with segment timestamps: about 3 words, 4 tokens and a timestamp pair a second.
TOKENS_PER_SECOND = 5.0
SOT_SEQUENCE_TOKENS = 4  # <|startoftranscript|><|xx|><|task|><|notimestamps|>


def decoder_prompt(
    tokenizer: WhisperTokenizer,
    language: str,
    task: Task,
    timestamps: bool,
    previous: str | None,
    max_tokens: int,
) -> list[int]:
    """``[<|startofprev|> context]`` + ``<|startoftranscript|><|xx|><|task|>`` +
    ``[<|notimestamps|>]``; the context keeps its last tokens that fit ``max_tokens``
    (OpenAI's ``transcribe`` keeps at most 223 the same way)."""
    prompt = [tokenizer.sot, tokenizer.language_token(language), tokenizer.special(f"<|{task}|>")]
    if not timestamps:
        prompt.append(tokenizer.no_timestamps)
    room = min(max_tokens - len(prompt) - 1, 223)
    context = tokenizer.encode(" " + previous.strip()) if previous and previous.strip() else []
    if context and room > 0:
        prompt = [tokenizer.special("<|startofprev|>"), *context[-room:], *prompt]
    return prompt


def bls_prefix(language: str, task: Task) -> str:
    """``TEXT_PREFIX`` for ``whisper_bls`` (it always strips timestamps, so none are asked)."""
    return f"<|startoftranscript|><|{language}|><|{task}|><|notimestamps|>"


@dataclass(frozen=True)
class Segment:
    """A stretch of one window's text, times relative to the window's start."""

    start: float
    end: float
    text: str
    tokens: tuple[int, ...]


def _close(tokenizer: WhisperTokenizer, start: float, end: float, tokens: list[int]) -> list[Any]:
    text = tokenizer.decode(tokens)
    return [Segment(start, end, text, tuple(tokens))] if text.strip() else []


def segments(tokens: Sequence[int], tokenizer: WhisperTokenizer, duration: float) -> list[Segment]:
    """The segments ``tokens`` (one window's output) describe; text with no closing timestamp
    runs to the window's end, text with no timestamps at all is one segment of the window."""
    found: list[Segment] = []
    start = last = 0.0
    pending: list[int] = []
    for token in tokens:
        if token == tokenizer.eot:
            break
        if tokenizer.is_timestamp(token):
            time = min(max(tokenizer.seconds(token), last), duration)
            found += _close(tokenizer, start, time, pending)
            pending, start, last = [], time, time
        elif token < tokenizer.eot:
            pending.append(token)
    found += _close(tokenizer, start, max(start, duration), pending)
    return found


def text_of(tokens: Sequence[int], tokenizer: WhisperTokenizer) -> str:
    """The plain text of a window's tokens (up to end of text), specials left out."""
    kept: list[int] = []
    for token in tokens:
        if token == tokenizer.eot:
            break
        kept.append(token)
    return tokenizer.decode(kept)
