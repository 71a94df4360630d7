"""Tool-call formats: how each family of checkpoints writes tools, calls and results."""
