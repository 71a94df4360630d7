#!/usr/bin/env bash
# Issue 28's last goal row on the GPU host: `python -m bench real-shape`, the added TTFT of a
# one-image request on the reference LLaVA at LLaVA-1.5-7B's dimensions (random fp16 weights,
# generated on the GPU into ~/.cache/mmgw/reference/shaped-llava-1.5-7b, 14.1 GB, reused while
# current), the gateway against direct gRPC with the same tensors, 60 pairs.
#
#   bench/real_shape.sh WHEELS [SITE] [-- real-shape options]
#
# WHEELS and SITE as for bench/gpu_goals.sh: the models' environment (deploy/models-venv.sh,
# MODELS_VENV, default /tmp/models-venv, reused when already built) generates the checkpoint
# and runs the model; SITE holds the gateway's own dependencies for the image's Python.
exec "$(dirname "$0")/in_models_venv.sh" real-shape "$@"
