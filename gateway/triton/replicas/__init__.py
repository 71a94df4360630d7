"""Several Triton replicas behind one backend: placement, health, discovery.

- ``choice``: which replica takes a call (rendezvous hashing bounded by load, least loaded,
  round robin), as pure functions;
- ``keys``: a call's affinity key (its content id, or its prompt's first block);
- ``health``: a replica's probe verdict and passive ejection with backoff;
- ``agreement``: whether two replicas' configs of a model agree, and what differs;
- ``discovery``: ``dns:`` names resolved to replica addresses;
- ``replica_set``: ``ReplicaSet``, the ``TritonBackend`` over them all.
"""

from __future__ import annotations

from gateway.triton.replicas.discovery import DnsName, is_dns, parse_dns
from gateway.triton.replicas.replica_set import Replica, ReplicaSet, Routing

__all__ = ["DnsName", "Replica", "ReplicaSet", "Routing", "is_dns", "parse_dns"]
