"""Code the reference Triton models share, and their in-process API for tests.

    from server_repo.reference_kit import GenerationRequest, load_engine

    engine = load_engine("llava_onevision", cache_dir=None, checkpoint=None, device="cpu")
    completion = engine.complete(GenerationRequest(text_input="What is this?", images=rgb))

Importing this package imports torch and transformers (the ``embedded`` extra).
"""

from server_repo.reference_kit.engine import Generation, ReferenceEngine, load_engine
from server_repo.reference_kit.request import (
    Completion,
    GenerationRequest,
    GenerationStats,
    InvalidRequest,
    Step,
)

__all__ = [
    "Completion",
    "Generation",
    "GenerationRequest",
    "GenerationStats",
    "InvalidRequest",
    "ReferenceEngine",
    "Step",
    "load_engine",
]
