"""The llmapi reference model's bookkeeping of one request (``reference_kit/llmapi_triton``).

The response sender here is a stand-in for Triton's Python-backend ``InferenceResponseSender``,
which cannot run outside a Triton stub. It follows that contract's one rule that matters here:
once a request's final response is sent, the server frees its response factory, and asking
``is_cancelled()`` after that is a use-after-free in the server (tritonserver 2.51 died of
SIGSEGV in ``TRITONBACKEND_ResponseFactoryIsCancelled``). The end-to-end cancellation tests run
the real server (``tests/server_repo/reference/test_reference_llmapi.py``).
"""

from __future__ import annotations

import threading
import time

from server_repo.reference_kit.llmapi_triton import Active


class Sender:
    """A response sender that fails the test if asked after its final response."""

    def __init__(self, cancelled: bool = False, ask_s: float = 0.0) -> None:
        self.final_sent = False
        self.asked_after_final = False
        self._cancelled = cancelled
        self._ask_s = ask_s

    def is_cancelled(self) -> bool:
        if self.final_sent:
            self.asked_after_final = True
        time.sleep(self._ask_s)  # the round trip to the server
        if self.final_sent:
            self.asked_after_final = True
        return self._cancelled

    def send_final(self) -> None:
        self.final_sent = True


def test_a_cancelled_client_is_seen_until_the_final_response_is_claimed() -> None:
    active = Active("id", Sender(cancelled=True))
    assert active.cancelled()
    assert active.claim_final()
    assert not active.cancelled()  # claimed: the sender is never asked again
    assert not active.claim_final()  # and only one caller sends the final response


def test_the_final_response_never_overtakes_a_question_in_flight() -> None:
    """The worker finishing while the cancellation loop asks: the worker's claim waits for
    the question, so ``is_cancelled()`` is never asked of a freed response factory."""
    for _ in range(20):
        sender = Sender(ask_s=0.002)
        active = Active("id", sender)
        asking = threading.Thread(target=active.cancelled)
        asking.start()
        time.sleep(0.0005)  # the question is in flight
        if active.claim_final():
            sender.send_final()
        asking.join()
        assert not sender.asked_after_final
        assert not active.cancelled() and not sender.asked_after_final
