"""The gateway's settings, loaded once and passed in: ``settings.py`` (the top-level sections
and loading), ``limits.py`` (request limits by concern), ``models.py`` (served models),
``response_store.py`` (the stored responses' file and retention), ``realtime.py`` (live
transcription sessions' bounds)."""

from gateway.config.guides import GuideSettings
from gateway.config.limits import (
    LEGACY_LIMITS,
    AudioSettings,
    DecodeSettings,
    FetchSettings,
    GenerationSettings,
    ImageSettings,
    MediaSettings,
    UpstreamSettings,
    VideoSettings,
)
from gateway.config.models import (
    DEFAULT_MAX_TOKENS,
    REFERENCE_WHISPER,
    LoraAdapter,
    ServedModel,
    default_models,
)
from gateway.config.policy import GenerationPolicy, Timeouts
from gateway.config.realtime import RealtimeSettings
from gateway.config.response_store import ResponsesSettings
from gateway.config.settings import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_REFERENCE_REPOSITORY,
    PACKAGE_ROOT,
    EmbeddedSettings,
    ObservabilitySettings,
    ServerSettings,
    Settings,
    load_settings,
)
from gateway.families.whisper.options import WhisperOptions

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_PORT",
    "DEFAULT_REFERENCE_REPOSITORY",
    "LEGACY_LIMITS",
    "PACKAGE_ROOT",
    "REFERENCE_WHISPER",
    "AudioSettings",
    "DecodeSettings",
    "EmbeddedSettings",
    "FetchSettings",
    "GenerationPolicy",
    "GenerationSettings",
    "GuideSettings",
    "ImageSettings",
    "LoraAdapter",
    "MediaSettings",
    "ObservabilitySettings",
    "RealtimeSettings",
    "ResponsesSettings",
    "ServedModel",
    "ServerSettings",
    "Settings",
    "Timeouts",
    "UpstreamSettings",
    "VideoSettings",
    "WhisperOptions",
    "default_models",
    "load_settings",
]
