"""The live transcription sessions' metrics (``/v1/realtime``), in the gateway's registry.

Sessions open (a gauge) and opened (by outcome), seconds of audio received, utterances
transcribed (by outcome), and the latency a voice application feels: from the end of speech
(the commit, or the server VAD's stop) to the ``completed`` event.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

SPEECH_END_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0)


class RealtimeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.sessions_open = Gauge(
            "mmgw_realtime_sessions_open", "Realtime transcription sessions open now.",
            registry=registry, multiprocess_mode="livesum",
        )  # fmt: skip
        self.sessions = Counter(
            "mmgw_realtime_sessions",
            "Realtime sessions asked for, by outcome (accepted, or why they were refused).",
            ["outcome"],
            registry=registry,
        )
        self.audio_seconds = Counter(
            "mmgw_realtime_audio_seconds",
            "Seconds of audio received on realtime sessions, by served model.",
            ["model"],
            registry=registry,
        )
        self.utterances = Counter(
            "mmgw_realtime_utterances",
            "Committed utterances, by served model and outcome (completed, failed, cancelled).",
            ["model", "outcome"],
            registry=registry,
        )
        self.speech_end_to_completed = Histogram(
            "mmgw_realtime_speech_end_to_completed_seconds",
            "End of speech (commit or server-VAD stop) to the transcript's completed event.",
            ["model"],
            buckets=SPEECH_END_BUCKETS,
            registry=registry,
        )
