"""What a family asks of Triton and hands back, in neutral terms. Pure data, no I/O.

A family turns a request into a ``Plan``: the Triton calls to make (each a ``GenerationRequest``
for the TensorRT-LLM text contract, or a ``NamedCall`` of the family's own wire arrays), how
many may run at once, and how their outputs become the answer. The pipeline runs any plan the
same way (``pipeline/relay.py``); ``triton/tensors.py`` turns each call into the inputs the
deployment declares. ``Sampling`` is the one place the request's sampling is held; its mapping
onto TensorRT-LLM's inputs is written once, in ``triton/tensors.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from gateway.protocol.common import UsageCounts

Task = Literal["transcribe", "translate"]
FinishReason = Literal["stop", "length", "tool_calls"]
# TensorRT-LLM's guided decoding types (``guided_decoding_guide_type``), the only four its
# backend maps; it drops any other silently, so the gateway sends no other.
GuideType = Literal["json", "json_schema", "regex", "ebnf_grammar"]


@dataclass(frozen=True)
class Sampling:
    """The request's sampling in OpenAI's terms; ``temperature == 0`` means greedy."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature is not None and self.temperature <= 0.0


GREEDY = Sampling(temperature=0.0)


@dataclass(frozen=True)
class Guide:
    """Guided decoding for one call: the type and its guide text (none for ``json``)."""

    type: GuideType
    text: str = ""


@dataclass(frozen=True)
class GenerationRequest:
    """One call on the text contract (``text_input`` in, ``text_output`` out), neutral names."""

    text_input: str
    max_tokens: int
    stream: bool = True
    sampling: Sampling = Sampling()
    min_tokens: int | None = None
    end_id: int | None = None
    pad_id: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    beam_width: int | None = 1
    prompt_table_extra_id: int | None = None
    stop_words: Sequence[str] = ()
    images: tuple[str, np.ndarray[Any, Any]] | None = (
        None  # (tensor name, wire array with batch dim)
    )
    # The original image sizes some encoders need (LLaVA-NeXT, Phi-3-vision): (name, array).
    image_sizes: tuple[str, np.ndarray[Any, Any]] | None = None
    decoder_text_input: str | None = None  # encoder-decoder engines: the decoder's prompt
    lora_task_id: int | None = None
    # Sent with the first request of a task id only; the server caches them after that.
    lora_weights: np.ndarray[Any, Any] | None = None
    lora_config: np.ndarray[Any, Any] | None = None
    guide: Guide | None = None  # structured output: sent as guided_decoding_guide(_type)
    # The reasoning effort asked for ("none".."xhigh"), checked by ``pipeline/reasoning.py``:
    # only ever set for a family whose rendering has a reasoning switch (``Family.
    # reasoning_switch``: a chat template's ``enable_thinking``), which reads it; else None.
    reasoning_effort: str | None = None
    extra_flags: Sequence[str] = (
        "return_num_input_tokens",
        "return_num_output_tokens",
        "return_perf_metrics",
    )


class OutputReader(Protocol):
    """Reads one ``NamedCall``'s responses: text pieces as they come, then its output."""

    tokens: int  # tokens the model wrote so far (for max_tokens and usage)

    def feed(self, outputs: Mapping[str, np.ndarray[Any, Any]]) -> str: ...

    def close(self) -> Any: ...


@dataclass(frozen=True)
class NamedCall:
    """One call on a family's own contract: wire arrays by input name (batch axis first).

    ``aliases`` lists other spellings deployments use for an input (``runtime_top_k``);
    ``required`` are the inputs the deployment must declare; ``sampling`` is mapped onto
    whichever sampling inputs it declares.
    """

    arrays: Mapping[str, np.ndarray[Any, Any]]
    outputs: tuple[str, ...]
    reader: Callable[[], OutputReader]
    suffix: str = ""  # appended to the request id, so each call is traceable in Triton
    required: tuple[str, ...] = ()
    sampling: Sampling | None = None


@dataclass(frozen=True)
class LlmapiRequest:
    """One call on NVIDIA's ``llmapi`` Triton model (TensorRT-LLM's PyTorch backend).

    ``text_input`` is the finished prompt (the model's chat template already applied by the
    gateway) for text, or the user's text alone when ``image_urls`` holds images (the model then
    applies its template itself); ``image_urls`` are ``data:`` URIs, in order. ``prompt_tokens``
    is the gateway's own count (the model reports none). ``triton/llmapi.py`` maps the rest
    onto the ``sampling_param_*`` inputs.
    """

    text_input: str
    max_tokens: int
    prompt_tokens: int
    stream: bool = True
    sampling: Sampling = Sampling()
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    best_of: int | None = None
    stop: tuple[str, ...] = ()
    image_urls: tuple[str, ...] = ()


Call = GenerationRequest | NamedCall | LlmapiRequest


@dataclass(frozen=True)
class TimedSegment:
    """One segment of a whole clip (times in seconds from its start)."""

    id: int
    seek: int  # the window's start, in 10 ms mel frames
    start: float
    end: float
    text: str
    tokens: tuple[int, ...] = ()


@dataclass(frozen=True)
class Transcript:
    """What a transcription or translation produced, ready to be written in any format."""

    task: str
    language: str
    duration: float
    text: str
    segments: Sequence[TimedSegment] = field(default_factory=tuple)
    prompt_tokens: int = 0  # decoder prompt tokens sent, over all calls
    completion_tokens: int = 0  # tokens the decoder wrote, over all calls


@dataclass(frozen=True)
class Outcome:
    """How a request ended: why, what it cost, and (speech) the whole transcript."""

    finish_reason: FinishReason
    usage: UsageCounts
    transcript: Transcript | None = None


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token as OpenAI's ``logprobs`` report it: its text, its log probability,
    and the most likely alternatives at its position (most likely first), when asked."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Scored:
    """A text piece with the tokens it holds, for a request that asked for log probabilities.

    The tokens' texts joined are the piece, except where a stop string cut a token short."""

    text: str
    tokens: tuple[TokenLogprob, ...]

    def __bool__(self) -> bool:
        return bool(self.text or self.tokens)


@dataclass(frozen=True)
class Plan:
    """The calls one request makes and how their outputs combine.

    Calls run at most ``concurrency`` at a time; their text is relayed in call order (the
    second call's text waits until the first has finished). ``finish`` gets each call's
    ``OutputReader.close()`` value, in order, for a plan of ``NamedCall``s, and builds the
    ``Transcript`` (speech) or None. ``max_tokens`` caps the tokens relayed over all calls.
    With ``probe_then``, ``calls`` is one look at the model whose output decides the real
    plan (a speech model's language guess): its reader's ``close()`` value goes to ``probe_then``.
    """

    calls: tuple[Call, ...]
    concurrency: int = 1
    max_tokens: int | None = None
    finish: Callable[[Sequence[Any]], Transcript | None] | None = None
    probe_then: Callable[[Any], Plan] | None = None
    # When set, each call's text comes out stripped and consecutive calls are joined by it.
    join_calls: str | None = None
