"""The README's top: the two commands first, then prerequisites that match what the install
really needs (the Triton wheel's glibc and Python stubs, the torch pin and its CPU build).

A newcomer reads these before anything works; a wheel or pin bumped without them would send
the next one into a failed install (tests/e2e/test_readme.py runs the examples below them).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pydantic-settings brings tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FIRST = "pip install -e '.[embedded]' && mmgw serve"
SECOND = "pip install -e '.[embedded,dev]' && python -m pytest"


def bash_blocks() -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```$", README, flags=re.M | re.S)


def prerequisites() -> str:
    start = README.index("**Prerequisites.**")
    return README[start : README.index("\n## ", start)]


def test_the_readme_starts_with_the_two_commands_then_the_prerequisites() -> None:
    assert README.startswith("# multimodal-gateway\n\n```bash\n" + FIRST + "\n```\n\n```bash\n")
    assert bash_blocks()[:2] == [FIRST + "\n", SECOND + "\n"]
    assert README.index("**Prerequisites.**") < README.index("\n## ")  # before any section


def test_the_stated_glibc_and_python_are_the_triton_wheels() -> None:
    pytest.importorskip("pytriton", reason="the embedded extra is not installed")
    wheel = importlib.metadata.distribution("nvidia-pytriton").read_text("WHEEL") or ""
    (tag,) = re.findall(r"^Tag: .*-manylinux_(\d+)_(\d+)_x86_64$", wheel, flags=re.M)
    text = prerequisites()
    assert f"glibc {tag[0]}.{tag[1]} or newer" in text and "x86-64" in text
    spec = importlib.util.find_spec("pytriton")
    assert spec is not None and spec.submodule_search_locations
    stubs = Path(next(iter(spec.submodule_search_locations))) / "tritonserver"
    versions = sorted(
        (tuple(map(int, p.name.split("."))) for p in (stubs / "python_backend_stubs").iterdir()),
    )
    lowest = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    assert f"Python {lowest} to {versions[-1][0]}.{versions[-1][1]}" in text


def test_the_torch_pin_and_its_cpu_build_are_named() -> None:
    (pin,) = [d for d in PYPROJECT["project"]["optional-dependencies"]["embedded"] if "torch" in d]
    version = pin.removeprefix("torch==")
    text = prerequisites()
    assert f"`{pin}`" in text and f"`{version}+cpu`" in text
    cpu = [b for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]
    assert cpu == [
        "  pip install -e '.[embedded]' --extra-index-url https://download.pytorch.org/whl/cpu"
        " && mmgw serve\n  "
    ]
    assert "GB" in text  # the download it saves, in numbers
