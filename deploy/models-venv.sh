#!/usr/bin/env bash
# The Python environment the embedded reference models run in, on an image whose own Python
# has NumPy 2 (NVIDIA's CUDA images, most PyTorch images).
#
# Why: Triton 2.51's Python-backend stub (the nvidia-pytriton wheel) garbles STRING inputs
# under NumPy 2, so the models must import NumPy 1; but the image's SciPy (imported by
# transformers) is built for NumPy 2, so NumPy 1 alone breaks it. This makes a venv that sees
# every package of the image (torch, transformers, ...) *behind* its own NumPy 1 and a SciPy
# that works with it. It reads the image's site-packages from the running python3 itself, so
# it works when python3 is itself a venv (where --system-site-packages would expose the base
# interpreter instead).
#
#   deploy/models-venv.sh /opt/models-venv                       # from PyPI
#   deploy/models-venv.sh /opt/models-venv --no-index --find-links ./wheels   # offline
#   export MMGW_EMBEDDED__PYTHON=/opt/models-venv/bin/python
set -euo pipefail
venv=${1:?usage: deploy/models-venv.sh DIR [pip options]}
shift
python=${PYTHON:-python3}
"$python" -m venv "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# The image's own packages, searched after the venv's (a .pth line is appended to sys.path).
"$python" -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"]); print(p["platlib"])' \
  | sort -u >"$site/image-packages.pth"
# llguidance: the reference models' guided decoding (one wheel, no dependencies).
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$@" 'numpy<2' 'scipy>=1.13,<1.17' \
  'llguidance>=1.0'
"$venv/bin/python" - <<'PY'
import llguidance
import numpy
import scipy.special
import torch
import transformers
from transformers import LlavaForConditionalGeneration, WhisperForConditionalGeneration

assert numpy.__version__.startswith("1."), numpy.__version__
print(
    f"models environment ready: numpy {numpy.__version__}, scipy {scipy.__version__}, "
    f"torch {torch.__version__} (cuda: {torch.cuda.is_available()}), "
    f"transformers {transformers.__version__}, llguidance {llguidance.__version__}"
)
PY
echo "export MMGW_EMBEDDED__PYTHON=$venv/bin/python"
