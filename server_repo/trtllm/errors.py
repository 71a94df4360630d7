"""Why the repository tool refuses to write anything.

```
RepoError                 base: the CLI prints the message and exits 2
├── EngineError           an engine directory is missing or its config.json is unreadable
├── TemplateError         the tensorrtllm_backend templates are missing or hold unknown values
└── InconsistentInput     values disagree with each other or with the engines
```
"""

from __future__ import annotations

from collections.abc import Sequence


class RepoError(ValueError):
    """Nothing was written; the message says what to fix."""


class EngineError(RepoError):
    """An engine directory is missing, or is not what its option says it is."""


class TemplateError(RepoError):
    """The templates cannot produce a configuration Triton would load."""


class InconsistentInput(RepoError):
    """One or more values disagree; every disagreement is listed, each naming both sides."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"refusing to write an inconsistent repository:\n{lines}")
