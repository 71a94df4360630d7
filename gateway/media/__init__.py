"""The media plane: fetch and decode what requests point at; knows no model.

``netguard`` judges addresses, ``fetch`` turns URLs into bytes (``local`` for data: URLs,
base64 and files; ``cache`` for single flight and repeats), ``image``, ``video`` and
``audio`` turn bytes into pixels, frames and samples, ``offload`` runs that decoding in
worker processes under a time budget, and ``identity`` turns processed content into the
KV-reuse id. Import from the modules.
"""
