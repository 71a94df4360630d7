"""Which lines of a Triton log explain a failure: its errors and the models' tracebacks, not
the CUDA/NVML/DCGM complaints of every start on a machine without a GPU, nor its tables."""

from __future__ import annotations

from pathlib import Path

from gateway.triton.embedded.output import MAX_LINES, explain, read_tail

# Lines as Triton 2.51 wrote them on a CPU machine (tests/e2e/test_startup.py starts one).
HEALTHY_NOISE = """\
W1126 15:51:31.405298 9559 pinned_memory_manager.cc:273] "Unable to allocate pinned system \
memory, pinned memory pool will not be available: CUDA driver version is insufficient for CUDA \
runtime version"
E1126 15:51:31.405418 9559 server.cc:241] "CudaDriverHelper has not been initialized."
I1126 15:51:31.500000 9559 model_lifecycle.cc:472] "loading: reference_llava:1"
+------------------+---------+--------+
| Model            | Version | Status |
+------------------+---------+--------+
Error: Failed to initialize NVML
W1126 15:51:57.975202 9559 metrics.cc:798] "DCGM unable to start: DCGM initialization error"
"""

FAILURE = """\
Traceback (most recent call last):
  File "/models/broken/1/model.py", line 1, in <module>
    import llguidance
ModuleNotFoundError: No module named 'llguidance'
E1126 15:56:34.239549 24166 model_lifecycle.cc:642] "failed to load 'broken' version 1: \
Internal: ModuleNotFoundError: No module named 'llguidance'"
I1126 15:56:34.300000 24166 server.cc:300] "Waiting for in-flight requests to complete."
"""


def test_the_failure_is_kept_and_the_gpu_less_noise_is_not() -> None:
    why = explain(HEALTHY_NOISE + FAILURE).splitlines()
    assert why == [
        "  Traceback (most recent call last):",
        '    File "/models/broken/1/model.py", line 1, in <module>',
        "      import llguidance",
        "  ModuleNotFoundError: No module named 'llguidance'",
        "  E1126 15:56:34.239549 24166 model_lifecycle.cc:642] \"failed to load 'broken' version "
        "1: Internal: ModuleNotFoundError: No module named 'llguidance'\"",
    ]


def test_without_an_error_line_the_last_lines_are_shown() -> None:
    lines = [f"I1126 10:00:{i:02d}.000000 1 server.cc:1] step {i}" for i in range(30)]
    why = explain("\n".join(lines)).splitlines()
    assert len(why) == 20 and why[-1].endswith("step 29")


def test_at_most_so_many_lines_each_cut_short() -> None:
    lines = [f"E1126 10:00:00.{i:06d} 1 x.cc:1] failure {i} " + "x" * 1000 for i in range(99)]
    why = explain("\n".join(lines)).splitlines()
    assert len(why) == MAX_LINES and "failure 98 " in why[-1]
    assert all(len(line) <= 2 + 400 + 4 for line in why)


def test_a_missing_log_reads_as_empty(tmp_path: Path) -> None:
    assert read_tail(tmp_path / "absent.log") == ""
    assert explain("") == ""
