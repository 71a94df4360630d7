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
set -euo pipefail
wheels=${1:?usage: bench/gpu_goals.sh WHEELS [SITE] [-- gpu-goals options]}
shift
site=""
if (($#)) && [[ $1 != -- ]]; then site=$1; shift; fi
[[ ${1:-} == -- ]] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PYTHONPATH="${site:+$site:}$root"
[[ -n $site && -d $site/bin ]] && export PATH="$site/bin:$PATH"  # py-spy, pip --target'ed
export PYTHONUNBUFFERED=1
venv=${MODELS_VENV:-/tmp/models-venv}
if [[ ! -x $venv/bin/python ]]; then
  echo "== deploy/models-venv.sh $venv --no-index --find-links $wheels"
  bash deploy/models-venv.sh "$venv" --no-index --find-links "$wheels"
fi
echo "== python -m bench gpu-goals $* (the fixture in $venv)"
MMGW_EMBEDDED__PYTHON="$venv/bin/python" exec python3 -m bench gpu-goals \
  --out "build/bench/gpu-goals-$(date +%Y%m%d-%H%M%S)" "$@"
