"""One Triton call per audio window, for either Whisper contract, as a stream of text pieces.

Each call ends with a ``WindowOutput``: the tokens (direct contract) or the transcript (BLS)
that the window produced. Pieces are the text as it arrives: on the direct contract, token
bytes run through an incremental UTF-8 decoder (a character split across tokens, as Chinese
often is, comes out whole); on the BLS, the growth of its cumulative transcript. Leaving a call
early closes its Triton stream, which cancels the request inside Triton.
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np

from gateway.families._audio_windows import Window
from gateway.families._mel import log_mel, to_encoder_input
from gateway.families._whisper_tokens import WhisperTokenizer
from gateway.families.whisper import Task, WhisperSpec, bls_prefix
from gateway.runtime import ServedRuntime
from gateway.streaming.text import CumulativeToDelta
from gateway.triton.contract import ModelContract
from gateway.triton.speech import (
    BLS_OUTPUTS,
    DIRECT_OUTPUTS,
    BlsCall,
    DirectCall,
    bls_inputs,
    direct_inputs,
    output_ids,
    transcript,
)


@dataclass(frozen=True)
class WindowOutput:
    """What one window produced: its token ids (direct) and its whole text."""

    tokens: tuple[int, ...]
    text: str
    generated: int  # tokens the decoder wrote (BLS: responses seen, one per token)


@dataclass(frozen=True)
class DirectPlan:
    """Everything a direct-contract window needs besides its samples."""

    spec: WhisperSpec
    tokenizer: WhisperTokenizer
    prompt: tuple[int, ...]
    temperature: float
    stream: bool


async def encoder_input(samples: np.ndarray, n_mels: int) -> np.ndarray:
    """fp16 log-mel ``[1, 3000, n_mels]`` of one window, computed off the event loop."""
    return await asyncio.to_thread(lambda: to_encoder_input(log_mel(samples, n_mels)))


def _strip_prompt(ids: list[int], prompt: tuple[int, ...], contract: ModelContract) -> list[int]:
    """Without ``exclude_input_in_output`` to ask for, a deployment may echo the prompt."""
    if "exclude_input_in_output" in contract.inputs or list(prompt) != ids[: len(prompt)]:
        return ids
    return ids[len(prompt) :]


async def direct_window(
    served: ServedRuntime,
    contract: ModelContract,
    plan: DirectPlan,
    samples: np.ndarray,
    request_id: str,
) -> AsyncIterator[str | WindowOutput]:
    """Text pieces of one window on the encoder-decoder contract, then its output."""
    tokenizer = plan.tokenizer
    call = DirectCall(
        features=await encoder_input(samples, plan.spec.options.n_mels),
        prompt=plan.prompt,
        max_new_tokens=plan.spec.max_new_tokens(len(plan.prompt)),
        end_id=tokenizer.eot,
        stream=plan.stream and contract.decoupled,
        temperature=plan.temperature,
    )
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    tokens: list[int] = []
    generated = 0
    ended = False
    results = served.client.stream(
        served.config.triton_model, direct_inputs(call, contract), request_id, DIRECT_OUTPUTS
    )
    try:
        async for result in results:
            ids = output_ids(result)
            ids = ids if call.stream else _strip_prompt(ids, plan.prompt, contract)
            for token in ids:
                if ended:
                    break
                generated += 1
                ended = token == tokenizer.eot
                if not ended:
                    tokens.append(token)
                    piece = decoder.decode(tokenizer.token_bytes(token))
                    if piece:
                        yield piece
    finally:
        await results.aclose()
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail
    yield WindowOutput(tuple(tokens), tokenizer.decode(tokens), generated)


async def bls_window(
    served: ServedRuntime,
    contract: ModelContract,
    samples: np.ndarray,
    language: str,
    task: Task,
    request_id: str,
) -> AsyncIterator[str | WindowOutput]:
    """Text pieces of one window on ``whisper_bls`` (cumulative transcripts), then its output."""
    call = BlsCall(samples, bls_prefix(language, task))
    to_delta = CumulativeToDelta()
    text = ""
    responses = 0
    results = served.client.stream(
        served.config.triton_model, bls_inputs(call, contract), request_id, BLS_OUTPUTS
    )
    try:
        async for result in results:
            current = transcript(result)
            if current is None:
                continue
            responses += 1
            text = current
            delta = to_delta(current)
            if delta:
                yield delta
    finally:
        await results.aclose()
    yield WindowOutput((), text, responses)


async def detect_language(
    served: ServedRuntime,
    contract: ModelContract,
    spec: WhisperSpec,
    samples: np.ndarray,
    request_id: str,
) -> str | None:
    """Whisper's own language guess: the token it writes after ``<|startoftranscript|>``."""
    tokenizer = spec.tokenizer()
    call = DirectCall(
        features=await encoder_input(samples, spec.options.n_mels),
        prompt=(tokenizer.sot,),
        max_new_tokens=1,
        end_id=tokenizer.eot,
        stream=False,
    )
    results = served.client.stream(
        served.config.triton_model, direct_inputs(call, contract), request_id, DIRECT_OUTPUTS
    )
    ids: list[int] = []
    try:
        async for result in results:
            ids.extend(_strip_prompt(output_ids(result), call.prompt, contract))
    finally:
        await results.aclose()
    return tokenizer.language_of(ids[0]) if ids else None


def window_samples(samples: np.ndarray, window: Window) -> np.ndarray:
    return samples[window.start : window.end]
