"""How the gateway calls one Whisper deployment: the ``[models.whisper]`` table of a served
model. The family owns its options; ``config.py`` only places them under a served model."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class WhisperOptions(BaseModel):
    """How the gateway calls one Whisper deployment (``family = "whisper"`` only).

    Defaults follow NVIDIA's Whisper recipe: 80 mel bins (128 for large-v3), a decoder
    engine built with ``max_input_len`` 14 and ``max_seq_len`` 114.
    """

    model_config = ConfigDict(extra="forbid")

    contract: Literal["direct", "bls"] | None = Field(
        None,
        description="'direct': the encoder-decoder tensorrt_llm model (the gateway sends log-mel "
        "and prompt ids); 'bls': NVIDIA's whisper_bls (16 kHz samples and a text prefix). "
        "None: read from the inputs the Triton model declares.",
    )
    n_mels: Literal[80, 128] = 80
    vocabulary: str = Field(
        "multilingual",
        description="'multilingual' (multilingual.tiktoken from the installed openai-whisper), "
        "a path to a .tiktoken rank file, or 'bytes' (the tiny reference models).",
    )
    languages: int | None = Field(
        None, ge=1, le=100, description="language tokens; None: 100 with 128 mel bins, else 99"
    )
    max_prompt_tokens: int = Field(14, ge=4, description="the decoder engine's max_input_len")
    max_sequence_tokens: int = Field(
        114, ge=5, description="the decoder engine's max_seq_len (prompt + output)"
    )
    window_s: float | None = Field(
        None,
        gt=1,
        le=30,
        description="longest audio per Triton call; None: what the output budget can transcribe "
        "(new tokens / 5 per second, at most 30 s; 10 s for whisper_bls's 50 tokens)",
    )
    concurrency: int = Field(4, ge=1, description="windows of one request in flight at once")
