"""Windows' outputs -> one ``Transcript``: texts joined by a space, segment times shifted to the
clip's clock (so they stay monotonic across windows). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.families.calls import Task, TimedSegment, Transcript
from gateway.families.whisper.prompt import Segment, segments
from gateway.families.whisper.tokens import LANGUAGES, WhisperTokenizer
from gateway.families.whisper.windows import SAMPLE_RATE, Window
from gateway.families.whisper.wire import WindowOutput


def _window_segments(
    tokenizer: WhisperTokenizer | None, window: Window, out: WindowOutput
) -> list[Segment]:
    if tokenizer is not None:
        return segments(out.tokens, tokenizer, window.duration_s)
    # whisper_bls strips every timestamp: the window is the finest segment it can give.
    return [Segment(0.0, window.duration_s, out.text, ())] if out.text.strip() else []


def stitch(
    task: Task,
    language: str,
    samples: int,
    windows: Sequence[Window],
    outputs: Sequence[WindowOutput],
    tokenizer: WhisperTokenizer | None,
    prompt_tokens: int,
) -> Transcript:
    """The transcript of the windows that ran (all of them, unless a cap cut the request)."""
    timed: list[TimedSegment] = []
    for window, out in zip(windows, outputs, strict=False):
        for segment in _window_segments(tokenizer, window, out):
            timed.append(
                TimedSegment(
                    id=len(timed),
                    seek=round(window.start_s * 100),
                    start=window.start_s + segment.start,
                    end=window.start_s + segment.end,
                    text=segment.text,
                    tokens=segment.tokens,
                )
            )
    text = " ".join(t for t in (o.text.strip() for o in outputs) if t)
    spoken = "english" if task == "translate" else LANGUAGES[language]
    return Transcript(
        task=task,
        language=spoken,
        duration=samples / SAMPLE_RATE,
        text=text,
        segments=timed,
        prompt_tokens=prompt_tokens * len(outputs),
        completion_tokens=sum(o.generated for o in outputs),
    )
