"""Structured outputs and tool calling: what the request asks for, as guides and parsers."""
