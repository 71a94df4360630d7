"""Which LoRA adapters one Triton model has received, so later requests send the id alone.

TensorRT-LLM's backend caches an adapter by ``lora_task_id`` once it has seen its weights;
sending them again costs megabytes per request, and sending the id of an adapter the server
never saw (or has evicted, or lost in a restart) fails. One ledger per Triton model, shared by
every served id in front of it. Behind a replica set the calls spread over servers that each
cache on their own, so its ledger (``remember=False``) sends the weights with every request.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LoraLedger:
    """Task ids whose weights one Triton model has received (shared by its served ids)."""

    delivered: set[int] = field(default_factory=set)
    remember: bool = True  # False: several replicas, the weights go every time

    def needs_weights(self, task_id: int) -> bool:
        return task_id not in self.delivered

    def delivered_ok(self, task_id: int) -> None:
        if self.remember:
            self.delivered.add(task_id)

    def forget(self, task_id: int) -> None:
        self.delivered.discard(task_id)
