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
set -euo pipefail
wheels=${1:?usage: bench/real_shape.sh WHEELS [SITE] [-- real-shape options]}
shift
site=""
if (($#)) && [[ $1 != -- ]]; then site=$1; shift; fi
[[ ${1:-} == -- ]] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PYTHONPATH="${site:+$site:}$root"
export PYTHONUNBUFFERED=1
venv=${MODELS_VENV:-/tmp/models-venv}
if [[ ! -x $venv/bin/python ]]; then
  echo "== deploy/models-venv.sh $venv --no-index --find-links $wheels"
  bash deploy/models-venv.sh "$venv" --no-index --find-links "$wheels"
fi
echo "== python -m bench real-shape $* (the model in $venv)"
MMGW_EMBEDDED__PYTHON="$venv/bin/python" exec python3 -m bench real-shape \
  --out "build/bench/real-shape-$(date +%Y%m%d-%H%M%S)" "$@"
