"""Load progress read from Triton's output as it grows: one line each time the count of
loaded models moved (at most every interval), none while nothing changes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway.triton.embedded.progress import LoadProgress


def test_progress_follows_the_growing_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    output = tmp_path / "tritonserver.log"
    output.write_text("")
    progress = LoadProgress(output, interval_s=0.0)
    caplog.set_level(logging.INFO, logger="gateway.triton.embedded")

    progress.report()  # nothing loading yet: nothing to say
    with output.open("a") as log:
        log.write('I1 model_lifecycle.cc:472] "loading: reference_llava:1"\n')
        log.write('I1 model_lifecycle.cc:472] "loading: reference_whisper:1"\n')
        log.write("I1 model_lifecycle.cc:839] \"successfully loaded 'reference_lla")  # mid-line
    progress.report()
    progress.report()  # unchanged: no second line
    with output.open("a") as log:
        log.write("va'\"\n")
    progress.report()

    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "loading the embedded models: 0 of 2 models loaded",
        "loading the embedded models: 1 of 2 models loaded",
    ]


def test_lines_are_spaced_by_the_interval(tmp_path: Path) -> None:
    output = tmp_path / "tritonserver.log"
    output.write_text('"loading: a:1"\n"loading: b:1"\n')
    progress = LoadProgress(output, interval_s=3600)
    progress.report()
    output.write_text(output.read_text() + "\"successfully loaded 'a'\"\n")
    progress.report()
    assert progress.summary() == "1 of 2 models loaded"
    assert progress._reported == 0  # the second line waits for the interval
