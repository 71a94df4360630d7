#!/usr/bin/env bash
# One `python -m bench COMMAND` on the GPU host with the models' NumPy-1 environment
# (deploy/models-venv.sh) as the embedded Triton's interpreter; what bench/gpu_goals.sh and
# bench/real_shape.sh run.
#
#   bench/in_models_venv.sh COMMAND WHEELS [SITE] [-- COMMAND options]
#
# WHEELS: the recipe's wheels (numpy 1.x, a SciPy that takes it, llguidance; --no-index, no
# network there), used only when the environment must be built. SITE (optional): a folder of
# the gateway's own dependencies put on PYTHONPATH, its bin/ on PATH (py-spy, strace
# wrappers). MODELS_VENV (default /tmp/models-venv) is reused when it already exists (as
# bench/gpu_recipe.sh leaves it). Results go to build/bench/COMMAND-<time> unless --out says.
set -euo pipefail
command=${1:?usage: bench/in_models_venv.sh COMMAND WHEELS [SITE] [-- options]}
wheels=${2:?usage: bench/in_models_venv.sh COMMAND WHEELS [SITE] [-- options]}
shift 2
site=""
if (($#)) && [[ $1 != -- ]]; then site=$1; shift; fi
[[ ${1:-} == -- ]] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PYTHONPATH="${site:+$site:}$root"
[[ -n $site && -d $site/bin ]] && export PATH="$site/bin:$PATH"
export PYTHONUNBUFFERED=1
venv=${MODELS_VENV:-/tmp/models-venv}
if [[ ! -x $venv/bin/python ]]; then
  echo "== deploy/models-venv.sh $venv --no-index --find-links $wheels"
  bash deploy/models-venv.sh "$venv" --no-index --find-links "$wheels"
fi
echo "== python -m bench $command $* (the models in $venv)"
MMGW_EMBEDDED__PYTHON="$venv/bin/python" exec python3 -m bench "$command" \
  --out "build/bench/$command-$(date +%Y%m%d-%H%M%S)" "$@"
