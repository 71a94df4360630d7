"""What the co-launched ``tritonserver`` prints: kept in a file, and read back only to explain
a failure.

A healthy start on a machine without a GPU prints about 80 lines: CUDA, NVML and DCGM
"errors" that are not errors there, option and model tables hundreds of characters wide, and
the reference models' own progress bars. None of it helps a user who only wanted the gateway,
so the server's stdout and stderr (its Python stubs' too, which inherit them) go to
``tritonserver.log`` in the launch's work folder. When the server dies or never gets ready,
``explain`` picks out of that file the lines that say why: Triton's own error lines, the
Python tracebacks of the models that failed, and any other line naming an error, less the
GPU-less noise; with nothing of the kind, the last lines.
"""

from __future__ import annotations

import re
from pathlib import Path

LOG_NAME = "tritonserver.log"
MAX_LINES = 40
TAIL_LINES = 20
MAX_LINE_CHARS = 400
_READ_BYTES = 512 * 1024  # the end of a long log: where the failure is

# glog's severity letter and date: "E1126 15:51:31.405418 9559 server.cc:241] ..."
_GLOG_ERROR = re.compile(r"^E\d{4} ")
_ERROR_WORD = re.compile(r"\b(error|failed|exception|cannot|unable)\b", re.IGNORECASE)
# Printed by every start on a machine without a GPU (or without NVIDIA's management
# libraries); never the cause of a failure of the CPU reference models.
NOISE = (
    "Failed to initialize NVML",
    "CudaDriverHelper has not been initialized",
    "CUDA driver version is insufficient",
    "Unable to allocate pinned system memory",
    "DCGM unable to start",
    "Collecting metrics for GPU",
)


def log_path(workdir: Path) -> Path:
    return workdir / LOG_NAME


def read_tail(path: Path) -> str:
    """The end of the log (it may be long); empty when there is none."""
    try:
        with path.open("rb") as log:
            log.seek(0, 2)
            size = log.tell()
            log.seek(max(0, size - _READ_BYTES))
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _noise(line: str) -> bool:
    return any(marker in line for marker in NOISE)


def _tracebacks(lines: list[str]) -> set[int]:
    """Indexes of the lines of every Python traceback, through its exception line."""
    kept: set[int] = set()
    inside = False
    for index, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            inside = True
        if inside:
            kept.add(index)
            if line and not line[0].isspace() and not line.startswith("Traceback"):
                inside = False  # the exception's own line ends it
    return kept


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r", "\n").splitlines()]
    return [line for line in lines if line.strip()]


def error_lines(text: str) -> list[str]:
    """The lines of a Triton log that name an error, in order (tracebacks whole)."""
    lines = _lines(text)
    kept = _tracebacks(lines)
    for index, line in enumerate(lines):
        if _noise(line) or line.startswith(("+", "|")):  # Triton's tables
            continue
        if _GLOG_ERROR.match(line) or _ERROR_WORD.search(line):
            kept.add(index)
    return [lines[i] for i in sorted(kept)]


def last_error(text: str) -> str:
    """The last line naming an error (the one a server that exits prints last), or ""."""
    found = error_lines(text)
    return found[-1].strip()[:MAX_LINE_CHARS] if found else ""


def explain(text: str) -> str:
    """The lines of a Triton log that explain a failure, indented, at most ``MAX_LINES``;
    the last lines when none names an error (a server killed from outside says nothing)."""
    chosen = error_lines(text) or _lines(text)[-TAIL_LINES:]
    unique = list(dict.fromkeys(chosen))[-MAX_LINES:]
    shortened = [
        line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " ..." for line in unique
    ]
    return "\n".join("  " + line for line in shortened)
