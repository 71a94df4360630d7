#!/usr/bin/env bash
# Issue 28's goals on the 16-core GPU host (about 9 minutes with the models' environment
# already built, 30 s more to build it; split it under a 10-minute limit a command with
# `-- --no-diagnosis` then `-- --diagnosis-only`):
# `python -m bench gpu-goals` with the load fixture's stubs in the NumPy-1 environment of
# deploy/models-venv.sh (the image's Python has NumPy 2). Prints the machine, a table of goal
# vs measured per stream client and the diagnosis; every row is kept in --out.
#
#   bench/gpu_goals.sh WHEELS [SITE] [-- gpu-goals options]
#
# WHEELS and SITE as for bench/gpu_recipe.sh: the recipe's wheels (numpy 1.x, a SciPy that
# takes it, llguidance; --no-index, no network there) and, optionally, a folder of the
# gateway's own dependencies put on PYTHONPATH (it must hold grpclib and its h2, hpack,
# hyperframe and multidict for upstream.stream_client = "h2"; opentelemetry-sdk and
# opentelemetry-exporter-otlp-proto-http for the traces, py-spy for the profile of the
# diagnosis: a part whose package is missing prints "skipped" and the run goes on).
# MODELS_VENV (default /tmp/models-venv) is reused when bench/gpu_recipe.sh already built it.
exec "$(dirname "$0")/in_models_venv.sh" gpu-goals "$@"
