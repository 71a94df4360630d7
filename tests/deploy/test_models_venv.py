"""``deploy/models-venv.sh`` installs and checks what the reference models' stub will import,
in the stub's own environment: not through ``PYTHONPATH``, which Triton's Python stub ignores.

Issue 27's GPU machine: the gateway's packages (llguidance among them) reached the machine on
``PYTHONPATH``; pip saw llguidance there and skipped it, the check imported it from there,
the recipe said "ready", and every reference model then failed with ``No module named
'llguidance'``. Here an "image" is made of this environment's packages less llguidance (a
venv whose site-packages links every other one), and llguidance is put on ``PYTHONPATH``
only. Everything runs offline (``--no-index``): what the image has is satisfied from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "deploy" / "models-venv.sh"
SITE = Path(sysconfig.get_paths()["purelib"])

pytestmark = pytest.mark.timeout(600)


def venv_site(python: Path) -> Path:
    found = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(found.stdout.strip())


def image_without(tmp_path: Path, left_out: str) -> Path:
    """An interpreter whose site-packages holds this environment's packages but one."""
    image = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(image)], check=True)
    site = venv_site(image / "bin" / "python")
    for entry in SITE.iterdir():
        if not entry.name.lower().startswith(left_out) and not (site / entry.name).exists():
            (site / entry.name).symlink_to(entry)
    return image / "bin" / "python"


def only_on_pythonpath(tmp_path: Path, package: str) -> Path:
    """A folder holding ``package`` (and its metadata), as a PYTHONPATH entry."""
    folder = tmp_path / "pythonpath"
    folder.mkdir()
    for entry in SITE.iterdir():
        if entry.name.lower().startswith(package):
            (folder / entry.name).symlink_to(entry)
    return folder


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PIP_NO_INPUT": "1", **extra}


@pytest.fixture
def image(tmp_path: Path) -> Path:
    pytest.importorskip("llguidance")
    return image_without(tmp_path, "llguidance")


def test_a_package_only_on_pythonpath_is_installed_not_skipped(image: Path, tmp_path: Path) -> None:
    pythonpath = only_on_pythonpath(tmp_path, "llguidance")
    done = subprocess.run(
        ["bash", str(RECIPE), str(tmp_path / "models-venv"), "--no-index"],
        env=clean_env(PYTHON=str(image), PYTHONPATH=str(pythonpath)),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    # pip asked for llguidance itself (offline, so it cannot have it): never "ready".
    assert done.returncode != 0, done.stdout + done.stderr
    assert "No matching distribution found for llguidance" in done.stderr, done.stderr
    assert "models environment ready" not in done.stdout


def test_the_check_imports_what_the_models_import_without_pythonpath(
    image: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "models-venv"
    subprocess.run([str(image), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv_site(venv / "bin" / "python")
    (site / "image.pth").write_text(f"import site; site.addsitedir({str(venv_site(image))!r})\n")
    (site / "zz-checkout.pth").write_text(f"{ROOT}\n")
    check = [
        str(venv / "bin" / "python"),
        str(ROOT / "server_repo/reference_kit/stub_environment.py"),
    ]
    pythonpath = only_on_pythonpath(tmp_path, "llguidance")
    done = subprocess.run(
        check,
        env=clean_env(PYTHONPATH=str(pythonpath)),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PYTHONPATH is set; Triton's Python stub ignores it" in done.stdout
    assert "models environment NOT ready" in done.stdout
    assert "missing: llguidance (ModuleNotFoundError" in done.stdout, done.stdout

    (site / "llguidance.pth").write_text(f"{pythonpath}\n")  # now in the venv's own path
    done = subprocess.run(
        check, env=clean_env(), capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "models environment ready" in done.stdout and "numpy 1." in done.stdout
