"""Load progress read from Triton's output as it grows: one line each time the count of
loaded models moved (at most every interval), none while nothing changes."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from gateway.triton.embedded.progress import LoadProgress


def test_progress_follows_the_growing_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    output = tmp_path / "tritonserver.log"
    output.write_text("")
    progress = LoadProgress(output, interval_s=0.0, heartbeat_s=3600)
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

    said = [re.sub(r"\(\d+ s\)", "(N s)", r.getMessage()) for r in caplog.records]
    assert said == [
        "loading the embedded models: 0 of 2 models loaded (N s)",
        "loading the embedded models: 1 of 2 models loaded (N s)",
    ]


def test_lines_are_spaced_by_the_interval(tmp_path: Path) -> None:
    output = tmp_path / "tritonserver.log"
    output.write_text('"loading: a:1"\n"loading: b:1"\n')
    progress = LoadProgress(output, interval_s=3600, heartbeat_s=3600)
    progress.report()
    output.write_text(output.read_text() + "\"successfully loaded 'a'\"\n")
    progress.report()
    assert progress.summary() == "1 of 2 models loaded"
    assert progress._reported == 0  # the second line waits for the interval


def test_a_silent_stretch_gets_a_heartbeat_naming_a_first_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    output = tmp_path / "tritonserver.log"
    output.write_text(
        "generating tiny reference weights for reference_llava into /cache\n"
        '"loading: reference_llava:1"\n'
    )
    progress = LoadProgress(output, interval_s=3600, heartbeat_s=0.0)
    caplog.set_level(logging.INFO, logger="gateway.triton.embedded")
    progress.report()
    progress.report()  # nothing moved, but the heartbeat is due
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2
    assert said[1].startswith("loading the embedded models: 0 of 1 models loaded (")
    assert said[1].endswith("; generating the tiny reference weights (first start only)")
