"""gateway/'s rooms import downwards only: the import-linter contract in pyproject.toml holds,
and it really catches an import that runs back up (checked on a copy with one reversed)."""

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
    assert "1 kept, 0 broken" in result.stdout


def test_an_import_that_runs_back_up_is_refused(tmp_path: Path) -> None:
    shutil.copytree(REPO / "gateway", tmp_path / "gateway")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    netguard = tmp_path / "gateway" / "media" / "netguard.py"
    netguard.write_text(netguard.read_text() + "\nimport gateway.routes.chat  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "gateway.media is not allowed to import gateway.routes" in result.stdout
