"""``[guides]``: what one structured-output guide may cost, and the sandbox that compiles it.

A guide (a JSON schema, regex, grammar or choice list) is a program the engine compiles and runs
at every decoding step. The structural limits are checked first, on the event loop, in one pass
over the guide (cheap: no compiling), and name the limit a guide is over. The defaults keep
every guide inside what llguidance compiles without a native stack overflow (a ``$ref`` chain of
about 950 links with an 8 MiB stack) and inside the engine's parser limits (a row of at most
2,000 Earley items: an object of more than 500 optional properties, an ``anyOf`` of more than
2,000 branches fails in the engine at its first token). A guide within them is then compiled in
a sandboxed worker process, under a time budget and memory and stack caps.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gateway.sandbox import SandboxLimits


class GuideSettings(BaseModel):
    """``[guides]``: structural limits, then the compile sandbox, then the verdict cache."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_bytes: int = Field(256 * 1024, ge=1024, description="a guide's size, in UTF-8 bytes")
    max_depth: int = Field(
        64, ge=1, description="nesting of a JSON schema's objects and arrays, or a grammar's "
        "or regex's groups"
    )  # fmt: skip
    max_ref_depth: int = Field(
        256, ge=1, description="how deep a JSON schema goes with its $ref links followed "
        "(nesting levels along the deepest chain of links, a link counting one)"
    )  # fmt: skip
    max_properties: int = Field(
        500, ge=1, description="properties of one object schema (the engine's rows: 4 per one)"
    )
    max_branches: int = Field(
        1000, ge=1, description="anyOf/oneOf/allOf branches, enum values, or choices of one node"
    )
    max_nodes: int = Field(20000, ge=1, description="subschemas in a JSON schema, in all")
    max_rules: int = Field(500, ge=1, description="rules of a grammar")
    max_regex_bytes: int = Field(16 * 1024, ge=64, description="a regex's size (choices too)")
    compile_workers: int = Field(2, ge=1, description="sandboxed compile processes, at most")
    compile_timeout_s: float = Field(5.0, gt=0, description="per guide; then its worker is killed")
    compile_memory_mb: int = Field(
        1024, ge=0, description="address space per compile worker; 0 = no cap"
    )
    compile_stack_mb: int = Field(8, ge=0, description="stack per compile worker; 0 = inherited")
    cache_bytes: int = Field(
        4 << 20, ge=0, description="remembered verdicts, in bytes (0: compile every time)"
    )
    max_message_chars: int = Field(
        500, ge=80, description="the compiler's message, as quoted in a 400"
    )

    def sandbox_limits(self) -> SandboxLimits:
        return SandboxLimits(
            self.compile_workers,
            self.compile_timeout_s,
            self.compile_memory_mb or None,
            self.compile_stack_mb or None,
        )
