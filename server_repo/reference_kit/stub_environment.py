"""Check an environment for the reference models as Triton's Python stub will load them.

``python server_repo/reference_kit/stub_environment.py`` (``deploy/models-venv.sh`` runs it
with the models' interpreter; by path, since the kit's package imports what it checks)
imports everything the reference models import, the way the stub will: the stub embeds that
interpreter and ignores ``PYTHONPATH``, so a package reachable only through ``PYTHONPATH``
(the gateway's own wheels, carried to a machine that way) passes a plain ``python -c "import
..."`` and then fails every model with ``ModuleNotFoundError``. So the check re-runs itself
without ``PYTHONPATH`` (and from ``/``, since the stub's working folder is wherever the
gateway happens to start), reads the imports from the models' own source
(``server_repo/reference`` and ``server_repo/reference_kit``, every ``import`` at any depth, as
the models import some only on first use), and imports each. It prints what is missing and
exits 1, or one "ready" line.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

KIT = Path(__file__).resolve().parent
MODELS = KIT.parent / "reference"
# The stub provides this one itself; the rest of the project comes with server_repo.
PROVIDED = {"triton_python_backend_utils", "server_repo", "__future__"}
_CHECKED = "MMGW_REFERENCE_STUB_CHECK"  # set in the re-run, so it runs once


def model_sources() -> Iterator[Path]:
    """Every Python file the stub can load for a reference model."""
    yield from sorted(KIT.rglob("*.py"))
    yield from sorted(MODELS.glob("*/1/model.py"))


def imported_modules() -> dict[str, list[str]]:
    """Top-level modules outside the standard library -> the files importing them."""
    found: dict[str, list[str]] = {}
    stdlib = set(sys.stdlib_module_names)
    for source in model_sources():
        tree = ast.parse(source.read_text(), filename=str(source))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in stdlib and top not in PROVIDED:
                    where = str(source.relative_to(KIT.parent.parent))
                    found.setdefault(name, []).append(where)
    return found


def _numpy_problem() -> list[str]:
    try:
        import numpy
    except ImportError:
        return []  # reported with the other imports
    if int(numpy.__version__.split(".")[0]) < 2:
        return []
    return [f"numpy {numpy.__version__}: the stub garbles STRING inputs under NumPy 2 (numpy<2)"]


def problems() -> list[str]:
    """What the stub would fail to import, one line each (empty: nothing)."""
    missing = []
    for name, where in sorted(imported_modules().items()):
        try:
            importlib.import_module(name)
        except Exception as exc:  # an import can fail with more than ImportError
            missing.append(f"{name} ({type(exc).__name__}: {exc}), imported by {where[0]}")
    if importlib.util.find_spec("server_repo") is None:
        missing.append(
            "server_repo (the models' own code): put this checkout on the environment's path "
            "(deploy/models-venv.sh writes a .pth) or install the project into it"
        )
    missing += _numpy_problem()
    if missing:  # the models' own modules would fail on the same imports
        return missing
    for source in model_sources():
        if source.parent.name == "1":  # a model.py: its imports are checked above
            continue
        module = ".".join(source.relative_to(KIT.parent.parent).with_suffix("").parts)
        try:
            importlib.import_module(module.removesuffix(".__init__"))
        except Exception as exc:
            missing.append(f"{module} ({type(exc).__name__}: {exc})")
    return missing


# Loaded by path: importing it through its package would run the kit's own imports first.
_RERUN = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("mmgw_stub_environment", sys.argv[1])
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)
sys.exit(check.main())
"""


def _rerun_as_the_stub() -> int:
    """This check again, without PYTHONPATH and from /, as the stub will import."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env[_CHECKED] = "1"
    command = [sys.executable, "-c", _RERUN, str(Path(__file__).resolve())]
    return subprocess.run(command, env=env, cwd="/", check=False).returncode


def main() -> int:
    if os.environ.get(_CHECKED) != "1":
        if os.environ.get("PYTHONPATH"):
            print("PYTHONPATH is set; Triton's Python stub ignores it, so this check does too")
        return _rerun_as_the_stub()
    missing = problems()
    if missing:
        print(f"models environment NOT ready ({sys.executable}): Triton's Python stub would fail")
        print("".join(f"  missing: {line}\n" for line in missing), end="")
        return 1
    import numpy
    import torch
    import transformers

    print(
        f"models environment ready ({sys.executable}): numpy {numpy.__version__}, "
        f"torch {torch.__version__} (cuda: {torch.cuda.is_available()}), "
        f"transformers {transformers.__version__}; "
        f"{len(imported_modules())} imports of the reference models checked"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
