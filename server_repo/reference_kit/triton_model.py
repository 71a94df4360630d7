"""The decoupled Python-backend model both reference ``model.py`` files subclass.

``execute`` never generates: it parses each request, answers bad ones at once with an error
response, and hands the rest to a small thread pool (``workers`` parameter), returning None as a
decoupled model may. A worker streams one response per token (``stream`` true) or one response
with the whole text, then an empty response flagged ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``.
The client going away (``response_sender.is_cancelled()``) stops generation at the next step.

Config ``parameters`` (strings): ``tokens_per_block`` (16), ``checkpoint`` ("" = tiny generated
model), ``workers`` (2), ``max_cached_tokens`` (prefix cache bound, 65536). Device and cache
folder come from ``MMGW_REFERENCE_DEVICE`` and ``MMGW_REFERENCE_CACHE``.
"""

from __future__ import annotations

import json
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from server_repo.reference_kit.engine import ReferenceEngine, load_engine
from server_repo.reference_kit.pb_tensors import (
    InputNames,
    ReturnFlags,
    parse_request,
    read_inputs,
    response_outputs,
    to_pb_tensors,
)
from server_repo.reference_kit.prefix_cache import DEFAULT_MAX_CACHED_TOKENS
from server_repo.reference_kit.request import GenerationRequest, InvalidRequest


def _parameters(model_config: dict[str, Any]) -> dict[str, str]:
    raw = model_config.get("parameters", {}) or {}
    return {key: str(value.get("string_value", "")) for key, value in raw.items()}


class ReferenceTritonModel:
    """Triton ``TritonPythonModel`` body; subclasses set ``family``."""

    family: ClassVar[str]

    def initialize(self, args: dict[str, str]) -> None:
        import triton_python_backend_utils as pb_utils

        self.pb = pb_utils
        config = json.loads(args["model_config"])
        params = _parameters(config)
        self.names = InputNames.from_config(item["name"] for item in config.get("input", []))
        self.engine: ReferenceEngine = load_engine(
            self.family,
            checkpoint=params.get("checkpoint") or None,
            tokens_per_block=int(params.get("tokens_per_block") or 16),
            max_cached_tokens=int(params.get("max_cached_tokens") or DEFAULT_MAX_CACHED_TOKENS),
        )
        self._stopping = False
        workers = max(1, int(params.get("workers") or 2))
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix=f"{config['name']}-worker")
        pb_utils.Logger.log_info(
            f"{config['name']}: serving {self.engine.assets.directory} on "
            f"{self.engine.assets.device} with {workers} workers"
        )

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            sender = request.get_response_sender()
            try:
                parsed, flags = parse_request(read_inputs(request), self.names)
            except InvalidRequest as exc:
                self._send_error(sender, str(exc), invalid=True)
                continue
            self.pool.submit(self._serve, parsed, flags, sender)
        return None

    def finalize(self) -> None:
        """Stop running generations at their next step, then wait for the workers."""
        self._stopping = True
        self.pool.shutdown(wait=True, cancel_futures=True)

    def _serve(self, request: GenerationRequest, flags: ReturnFlags, sender: Any) -> None:
        """Generate and send responses; any failure becomes an error response, never a hang."""
        try:
            generation = self.engine.generate(
                request, is_cancelled=lambda: self._stopping or sender.is_cancelled()
            )
            token_ids: list[int] = []
            for step in generation:
                token_ids.append(step.token_id)
                if flags.stream:
                    self._send(sender, response_outputs(step.text, generation.stats, flags))
            if not flags.stream and not generation.stats.cancelled:
                text = self.engine.decode(token_ids)
                self._send(sender, response_outputs(text, generation.stats, flags))
            self._send_final(sender)
        except InvalidRequest as exc:
            self._send_error(sender, str(exc), invalid=True)
        except Exception as exc:
            self.pb.Logger.log_error(f"reference generation failed: {traceback.format_exc()}")
            self._send_error(sender, f"internal error: {exc}", invalid=False)

    def _send(self, sender: Any, outputs: dict[str, Any]) -> None:
        response = self.pb.InferenceResponse(output_tensors=to_pb_tensors(self.pb, outputs))
        sender.send(response)

    def _send_final(self, sender: Any) -> None:
        """Close the response stream (also after a cancel, so Triton releases the request)."""
        try:
            sender.send(flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception:
            self.pb.Logger.log_verbose("response stream already closed")

    def _send_error(self, sender: Any, message: str, invalid: bool) -> None:
        code_name = "INVALID_ARG" if invalid else "INTERNAL"
        code = getattr(self.pb.TritonError, code_name, None)
        error = (
            self.pb.TritonError(message, code) if code is not None else self.pb.TritonError(message)
        )
        try:
            sender.send(
                self.pb.InferenceResponse(output_tensors=[], error=error),
                flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        except Exception:
            self.pb.Logger.log_warn(f"could not deliver error response: {message}")
