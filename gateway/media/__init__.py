"""The media plane: fetch and decode what requests point at; knows no model.

``netguard`` judges addresses, ``fetch`` turns URLs into bytes, ``image`` turns bytes into RGB
images, ``identity`` turns processed content into the KV-reuse id. Import from the modules.
"""
