"""The HTTP server under the app: uvicorn's protocol with the request head bounded in count,
size and time (``protocol.py``), and the limits and refusals it works with (``limits.py``).

It sits above ``gateway.app`` (it counts its refusals in the app's metrics) and below
``gateway.cli``, which runs it.
"""

from gateway.server.limits import HttpLimits
from gateway.server.protocol import LimitedHttpToolsProtocol, protocol_class

__all__ = ["HttpLimits", "LimitedHttpToolsProtocol", "protocol_class"]
