"""Whisper as a family: speech in, its transcript out, on either of NVIDIA's two contracts.

It answers the same questions a vision family does: what the request may carry (one audio
clip, checked before any fetch), what the prompt is (Whisper's decoder prompt: language, task,
the caller's previous text, timestamps on or off), which wire arrays go to Triton (one call per
window of the clip, ``wire.py``) and how the outputs come back (token ids or cumulative
transcripts, stitched into one ``Transcript``). The pipeline runs its ``Plan`` as it runs any
other; nothing outside this package knows a Whisper model is behind it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel

from gateway.errors import InvalidRequest, TooManyMediaItems, UpstreamUnavailable
from gateway.families.base import Conversation, Family, SpeechOptions
from gateway.families.calls import GenerationRequest, NamedCall, Plan, Sampling, Transcript
from gateway.families.whisper import wire
from gateway.families.whisper.mel import log_mel, to_encoder_input
from gateway.families.whisper.options import WhisperOptions
from gateway.families.whisper.prompt import (
    BLS_MAX_NEW_TOKENS,
    MAX_WINDOW_S,
    SOT_SEQUENCE_TOKENS,
    TOKENS_PER_SECOND,
    bls_prefix,
    decoder_prompt,
)
from gateway.families.whisper.stitch import stitch
from gateway.families.whisper.tokens import (
    LANGUAGES,
    WhisperTokenizer,
    language_code,
    load_tokenizer,
)
from gateway.families.whisper.windows import Window, plan_windows

DEFAULT_LANGUAGE = "en"  # NVIDIA's whisper_bls default prefix, and the fallback guess
Contract = Literal["direct", "bls"]


@dataclass(frozen=True)
class WhisperSpec:
    """One served Whisper model: its options resolved against the contract Triton declares."""

    contract: Contract
    options: WhisperOptions
    echoes_prompt: bool = False  # no exclude_input_in_output to ask for

    @property
    def num_languages(self) -> int:
        return self.options.languages or (100 if self.options.n_mels == 128 else 99)

    def tokenizer(self) -> WhisperTokenizer:
        """The vocabulary (loaded once per process): needed by the direct contract only."""
        try:
            return load_tokenizer(self.options.vocabulary, self.num_languages)
        except (OSError, ValueError) as exc:
            raise UpstreamUnavailable(f"the Whisper vocabulary cannot be loaded: {exc}") from exc

    def max_new_tokens(self, prompt_tokens: int) -> int:
        if self.contract == "bls":
            return BLS_MAX_NEW_TOKENS
        return self.options.max_sequence_tokens - prompt_tokens

    def window_s(self, prompt_tokens: int = SOT_SEQUENCE_TOKENS) -> float:
        """The longest audio one call may carry so its output budget is unlikely to run out."""
        if self.options.window_s is not None:
            return self.options.window_s
        budget = self.max_new_tokens(prompt_tokens) / TOKENS_PER_SECOND
        return max(2.0, min(MAX_WINDOW_S, budget))


def resolve(options: WhisperOptions, declared: frozenset[str], name: str) -> WhisperSpec:
    """The configured contract, else the one the Triton model's inputs show."""
    kind = options.contract or wire.contract_kind(declared)
    if kind == "direct":
        return WhisperSpec("direct", options, "exclude_input_in_output" not in declared)
    if kind == "bls":
        return WhisperSpec("bls", options)
    raise UpstreamUnavailable(
        f"Triton model {name!r} declares neither Whisper contract (WAV and TEXT_PREFIX, or "
        "encoder_input_features and decoder_input_ids)"
    )


class Whisper(Family):
    """Speech recognition: answers with the transcript of the request's audio."""

    name = "whisper"
    nvidia_server_side = (
        "NVIDIA's Triton Whisper models (tensorrtllm_backend all_models/whisper, v0.15.0 on)"
    )
    accepts_audio = True
    completes_text = False  # its input is speech
    supports_extra_id = False
    required_inputs: ClassVar[tuple[str, ...]] = ()  # two contracts: see ``bound``

    def __init__(self, options: BaseModel | None = None) -> None:
        if options is not None and not isinstance(options, WhisperOptions):
            raise ValueError("the whisper family takes a WhisperOptions table")
        self.options = options or WhisperOptions()
        self._spec: WhisperSpec | None = None

    def bound(self, declared: frozenset[str], model_name: str) -> Whisper:
        """A new Whisper holding the contract this deployment offers (``resolve``)."""
        bound = Whisper(self.options)
        bound._spec = resolve(self.options, declared, model_name)
        return bound

    @property
    def spec(self) -> WhisperSpec:
        if self._spec is None:
            raise UpstreamUnavailable("the Whisper deployment's contract has not been read yet")
        return self._spec

    def render(self, conversation: Conversation) -> str:
        return ""  # text parts are not instructions to a speech model; the audio is the input

    def conversation_rules(self, conversation: Conversation) -> None:
        audios = sum(turn.audios for turn in conversation.turns)
        if conversation.image_count or conversation.video_count:
            return  # the media check refuses those parts by name
        if audios == 0:
            raise InvalidRequest(
                f"model family '{self.name}' transcribes audio: add an input_audio or audio_url "
                "part (or use /v1/audio/transcriptions)",
                param="messages",
                code="audio_required",
            )
        if audios > self.max_audio_clips:
            raise TooManyMediaItems(
                f"this request has {audios} audio clips; a chat request to a speech model takes "
                "one: it answers with one transcript, of one clip (its encoder reads that "
                "clip's 30 s windows)",
                param="messages",
            )

    def check_speech(self, speech: SpeechOptions, sampling: Sampling) -> SpeechOptions:
        """Refuse what the deployment cannot do; the language as Whisper's code."""
        spec = self.spec
        if spec.contract == "bls":
            used = {"prompt": bool(speech.prompt), "temperature": not sampling.greedy}
            for field, refused in used.items():
                if refused:
                    raise InvalidRequest(
                        f"'{field}' is not supported by this model's whisper_bls deployment "
                        "(fixed prompt, greedy decoding); serve the direct encoder-decoder "
                        "contract for it",
                        param=field,
                        code="unsupported_parameter",
                    )
        return replace(speech, language=self._language(speech))

    def _language(self, speech: SpeechOptions) -> str | None:
        spec = self.spec
        if speech.language is None:
            if spec.contract == "bls" and speech.task == "translate":
                raise InvalidRequest(
                    "this model's whisper_bls deployment cannot detect the spoken language: "
                    "pass 'language' to translate",
                    param="language",
                    code="language_required",
                )
            return DEFAULT_LANGUAGE if spec.contract == "bls" else None
        code = language_code(speech.language)
        if code is None or list(LANGUAGES).index(code) >= spec.num_languages:
            raise InvalidRequest(
                f"language {speech.language!r} is not one this Whisper model knows (ISO-639-1 "
                "codes such as 'en', 'de', 'zh')",
                param="language",
                code="unsupported_language",
            )
        return code

    def plan(
        self,
        draft: GenerationRequest,
        audio: np.ndarray[Any, Any] | None = None,
        speech: SpeechOptions | None = None,
    ) -> Plan:
        """One call per window of the clip (after a language guess when none was given)."""
        if audio is None:  # check_conversation refused this already
            raise InvalidRequest("no audio to transcribe", code="audio_required")
        # A chat request (no speech options) is capped by its max_tokens like any other chat;
        # with no temperature it decodes greedily, as Whisper transcribes by default.
        max_tokens = draft.max_tokens if speech is None else speech.max_tokens
        if draft.sampling.temperature is None:
            draft = replace(draft, sampling=replace(draft.sampling, temperature=0.0))
        speech = self.check_speech(speech or SpeechOptions(), draft.sampling)
        spec = self.spec
        prompt_tokens = SOT_SEQUENCE_TOKENS
        if spec.contract == "direct" and speech.prompt:
            prompt_tokens = spec.options.max_prompt_tokens
        windows = tuple(plan_windows(audio, spec.window_s(prompt_tokens), speech.find_speech))
        if spec.contract == "direct" and speech.language is None:
            probe = self._language_probe(audio[windows[0].start : windows[0].end])
            return Plan(
                (probe,),
                probe_then=lambda language: self._windows_plan(
                    draft, audio, windows, replace(speech, language=language or DEFAULT_LANGUAGE),
                    max_tokens,
                ),
            )  # fmt: skip
        return self._windows_plan(draft, audio, windows, speech, max_tokens)

    def _windows_plan(
        self,
        draft: GenerationRequest,
        audio: np.ndarray[Any, Any],
        windows: tuple[Window, ...],
        speech: SpeechOptions,
        max_tokens: int | None,
    ) -> Plan:
        spec = self.spec
        language = speech.language or DEFAULT_LANGUAGE
        prompt: tuple[int, ...] = ()
        tokenizer = None
        if spec.contract == "direct":
            tokenizer = spec.tokenizer()
            prompt = tuple(
                decoder_prompt(
                    tokenizer, language, speech.task, speech.timestamps, speech.prompt,
                    spec.options.max_prompt_tokens,
                )
            )  # fmt: skip
        calls = tuple(
            self._window_call(
                draft, audio[w.start : w.end], w, prompt, tokenizer, speech, max_tokens
            )
            for w in windows
        )

        def finish(outputs: Sequence[Any]) -> Transcript:
            return stitch(
                speech.task, language, audio.size, windows, outputs, tokenizer, len(prompt)
            )

        return Plan(calls, spec.options.concurrency, max_tokens, finish, join_calls=" ")

    def _window_call(
        self,
        draft: GenerationRequest,
        samples: np.ndarray[Any, Any],
        window: Window,
        prompt: tuple[int, ...],
        tokenizer: WhisperTokenizer | None,
        speech: SpeechOptions,
        max_tokens: int | None,
    ) -> NamedCall:
        suffix = f"-w{window.index}"
        if tokenizer is None:  # whisper_bls
            arrays = wire.bls_arrays(samples, bls_prefix(speech.language or "en", speech.task))
            return NamedCall(arrays, wire.BLS_OUTPUTS, wire.BlsReader, suffix, wire.BLS_REQUIRED)
        spec = self.spec
        features = to_encoder_input(log_mel(samples, spec.options.n_mels))
        budget = spec.max_new_tokens(len(prompt))
        budget = min(budget, max_tokens) if max_tokens else budget  # no window writes past it
        arrays = wire.direct_arrays(features, prompt, budget, tokenizer.eot, draft.stream)
        echoed = prompt if spec.echoes_prompt and not draft.stream else ()
        return NamedCall(
            arrays,
            wire.DIRECT_OUTPUTS,
            lambda: wire.DirectReader(tokenizer, echoed),
            suffix,
            wire.DIRECT_REQUIRED,
            draft.sampling,
        )

    def _language_probe(self, samples: np.ndarray[Any, Any]) -> NamedCall:
        """Whisper's own language guess: one token after ``<|startoftranscript|>``."""
        tokenizer = self.spec.tokenizer()
        features = to_encoder_input(log_mel(samples, self.spec.options.n_mels))
        prompt = (tokenizer.sot,)
        arrays = wire.direct_arrays(features, prompt, 1, tokenizer.eot, False)
        echoed = prompt if self.spec.echoes_prompt else ()
        return NamedCall(
            arrays,
            wire.DIRECT_OUTPUTS,
            lambda: wire.LanguageReader(tokenizer, echoed),
            "-lang",
            wire.DIRECT_REQUIRED,
        )
