"""Where the wheel's tritonserver lives and what its Python stub needs to start.

The ``nvidia-pytriton`` wheel carries a real Triton 2.51 binary, its shared libraries and the
Python backend. Three facts make it start outside NVIDIA's container (each learnt the hard way):

- the Python backend wants one folder holding ``libtriton_python.so``,
  ``triton_python_backend_utils.py`` and the stub built for *this* interpreter's version;
- the stub embeds Python and finds the environment through ``python3`` on ``PATH``, so the
  environment's ``bin/`` must come first (``PYTHONPATH`` alone is not enough);
- ``LD_LIBRARY_PATH`` must hold the wheel's libs folder and this interpreter's ``LIBDIR``,
  else the stub loads another libpython and stdlib extension modules fail to import.

The stub is built against NumPy 1: under NumPy 2 it hands every STRING input to the model as
a buffer filled with its first byte (every prompt is lost and the stub dies). The stub also
ignores ``PYTHONPATH``. So the models may run in another interpreter's environment than the
gateway's (``python``, e.g. a venv with ``numpy<2`` beside a NumPy 2 torch install), and
starting a stub over NumPy 2 is refused with that advice.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import UpstreamUnavailable


@dataclass(frozen=True)
class StubPython:
    """The interpreter whose environment the models run in: its version picks the stub,
    its ``bin/`` goes first on ``PATH`` and its ``LIBDIR`` on ``LD_LIBRARY_PATH``."""

    version: str
    bin_dir: Path
    libdir: str
    numpy: str  # the NumPy version the models will import ("" when there is none)

    @classmethod
    def current(cls) -> StubPython:
        """The gateway's own interpreter (the default)."""
        try:
            import numpy
        except ImportError:
            numpy_version = ""
        else:
            numpy_version = numpy.__version__
        return cls(
            version=f"{sys.version_info.major}.{sys.version_info.minor}",
            bin_dir=Path(sys.executable).parent,
            libdir=sysconfig.get_config_var("LIBDIR") or "",
            numpy=numpy_version,
        )

    @classmethod
    def at(cls, executable: Path) -> StubPython:
        """Another interpreter, asked for its version, ``LIBDIR`` and NumPy."""
        probe = (
            "import json, sys, sysconfig\n"
            "try:\n import numpy; v = numpy.__version__\n"
            "except ImportError:\n v = ''\n"
            "print(json.dumps(['%d.%d' % sys.version_info[:2], "
            "sysconfig.get_config_var('LIBDIR') or '', v]))"
        )
        try:
            found = subprocess.run(
                [str(executable), "-c", probe], capture_output=True, check=True, timeout=60
            )
            version, libdir, numpy_version = json.loads(found.stdout)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            raise UpstreamUnavailable(
                f"embedded.python {str(executable)!r} is not a working Python: {exc}"
            ) from exc
        # Not resolved: a venv's bin/ (where python3 means the venv) must stay first on PATH.
        bin_dir = Path(executable).absolute().parent
        return cls(version=version, bin_dir=bin_dir, libdir=libdir, numpy=numpy_version)

    def refusal(self) -> str | None:
        """Why the stub cannot run the models in this environment, if it cannot."""
        if self.numpy.split(".")[0].isdigit() and int(self.numpy.split(".")[0]) >= 2:
            return (
                f"the embedded Triton's Python stub garbles every STRING input under NumPy "
                f"{self.numpy} (it is built for NumPy 1); run the models in an environment "
                "with numpy<2: set embedded.python (MMGW_EMBEDDED__PYTHON) to its interpreter"
            )
        return None


@dataclass(frozen=True)
class TritonInstall:
    """Where the wheel put the server, its libraries and the Python backend pieces."""

    binary: Path
    libs: Path
    python_backend: Path
    stub: Path

    @classmethod
    def find(cls, version: str | None = None) -> TritonInstall:
        """Locate the pieces inside the installed ``nvidia-pytriton`` wheel; ``version``
        names the stub (default: this interpreter's)."""
        # Locate the package without importing it: pytriton's __init__ pulls in its client
        # stack (zmq, tritonclient, ...) that launching the server does not need.
        spec = importlib.util.find_spec("pytriton")
        if spec is None or not spec.submodule_search_locations:
            raise UpstreamUnavailable(
                "the embedded Triton needs the 'embedded' extra: pip install -e '.[embedded]'"
            )
        root = Path(next(iter(spec.submodule_search_locations))).resolve()
        site = root.parent
        version = version or f"{sys.version_info.major}.{sys.version_info.minor}"
        install = cls(
            binary=root / "tritonserver" / "bin" / "tritonserver",
            libs=site / "nvidia_pytriton.libs",
            python_backend=root / "tritonserver" / "backends" / "python",
            stub=root
            / "tritonserver"
            / "python_backend_stubs"
            / version
            / "triton_python_backend_stub",
        )
        missing = [
            p
            for p in (install.binary, install.libs, install.python_backend, install.stub)
            if not p.exists()
        ]
        if missing:
            raise UpstreamUnavailable(f"nvidia-pytriton install is incomplete, missing: {missing}")
        return install

    def backend_dir(self, into: Path) -> Path:
        """Assemble the one-folder Python backend under ``into`` and return its parent."""
        python_dir = into / "python"
        python_dir.mkdir(parents=True, exist_ok=True)
        for source in (
            self.python_backend / "libtriton_python.so",
            self.python_backend / "triton_python_backend_utils.py",
            self.stub,
        ):
            target = python_dir / source.name
            if not target.exists():
                shutil.copy2(source, target)
        return into


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_environment(
    install: TritonInstall,
    base: Mapping[str, str],
    extra: Mapping[str, str],
    python: StubPython | None = None,
) -> dict[str, str]:
    """The environment the stub needs: the models' interpreter first on PATH, both lib
    folders."""
    python = python or StubPython.current()
    env = dict(base)
    env.update(extra)
    env["PATH"] = os.pathsep.join([str(python.bin_dir), env.get("PATH", "")])
    lib_path = [str(install.libs), python.libdir, env.get("LD_LIBRARY_PATH", "")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in lib_path if p)
    return env
