"""gateway/triton/__init__.py: grpc's classic client transport, chosen at import only."""

from __future__ import annotations

import gateway.triton as triton_package


def test_importing_the_package_left_no_grpc_variable_behind() -> None:
    """The classic-transport choice is made at import and not passed to child processes."""
    import os

    assert triton_package.GRPC_CLIENT_EXPERIMENTS == "-event_engine_client"
    assert os.environ.get("GRPC_EXPERIMENTS") != triton_package.GRPC_CLIENT_EXPERIMENTS
