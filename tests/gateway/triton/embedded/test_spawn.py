"""The embedded server's child is started without a ``preexec_fn`` and still dies with the
gateway: a real parent process, a real child, SIGKILL (no clean-up runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from gateway.triton.embedded.spawn import ParentBound

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")

PARENT = textwrap.dedent(
    """
    import subprocess, sys
    from gateway.triton.embedded.spawn import ParentBound
    bound = ParentBound.of(["sh", "-c", "echo $GREETING; exec sleep 60"], {"GREETING": "hi"})
    child = subprocess.Popen(
        bound.argv, stdout=subprocess.PIPE, text=True, pass_fds=bound.pass_fds
    )
    bound.hand_over()
    print(child.pid, child.stdout.readline().strip(), flush=True)
    child.wait()
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead too
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_the_child_gets_its_own_environment_and_dies_with_a_killed_parent() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    assert parent.stdout is not None
    pid, greeting = parent.stdout.readline().split()
    assert greeting == "hi"  # the server's environment, not the shim's
    assert _alive(int(pid))
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(pid)), "the child outlived the killed gateway"


def test_the_shim_becomes_the_server_so_its_pid_is_the_servers() -> None:
    """The launcher watches and kills the pid it started: the shim must exec, not fork."""
    bound = ParentBound.of(["sh", "-c", "echo $$"], {})
    child = subprocess.Popen(bound.argv, stdout=subprocess.PIPE, text=True, pass_fds=bound.pass_fds)
    bound.hand_over()
    out, _ = child.communicate(timeout=30)
    assert int(out) == child.pid


def test_the_servers_environment_is_not_on_any_command_line() -> None:
    """A host's other users can read every process's command line; the gateway's environment
    (API keys) goes through the pipe."""
    bound = ParentBound.of(
        ["sh", "-c", "echo $SECRET"],
        {"SECRET": "sk-not-for-ps"},
    )
    assert not any("sk-not-for-ps" in part for part in bound.argv)
    child = subprocess.Popen(bound.argv, stdout=subprocess.PIPE, text=True, pass_fds=bound.pass_fds)
    bound.hand_over()
    out, _ = child.communicate(timeout=30)
    assert out.strip() == "sk-not-for-ps"
