"""gateway/'s rooms import downwards only, and the pipeline never imports the runtime: the
import-linter contracts in pyproject.toml hold, and they really catch an import that runs back
up or a pipeline module that takes the runtime (checked on a copy with one such import)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the ``gateway`` package found first under ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [str(LINT_IMPORTS)] if LINT_IMPORTS.exists() else ["lint-imports"]
    return subprocess.run(
        command, cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_layers_hold() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def lint_with(tmp_path: Path, module: str, imported: str) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over a copy of ``gateway`` where ``module`` (a path below it) also
    imports ``imported``."""
    shutil.copytree(REPO / "gateway", tmp_path / "gateway")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    source = tmp_path / "gateway" / module
    source.write_text(source.read_text() + f"\nimport {imported}  # noqa\n")
    return lint_imports(tmp_path)


def test_an_import_that_runs_back_up_is_refused(tmp_path: Path) -> None:
    result = lint_with(tmp_path, "media/netguard.py", "gateway.routes.chat")
    assert result.returncode != 0
    assert "gateway.media is not allowed to import gateway.routes" in result.stdout


def test_the_pipeline_may_not_take_the_whole_runtime(tmp_path: Path) -> None:
    """The pipeline sits above ``runtime`` in the layers, so only the forbidden contract
    keeps it on its narrow services (``services.py``, a served model's policy)."""
    result = lint_with(tmp_path, "pipeline/lora.py", "gateway.runtime")
    assert result.returncode != 0
    assert "the pipeline takes narrow services, never the whole runtime BROKEN" in result.stdout
    assert "gateway.pipeline.lora -> gateway.runtime" in result.stdout
