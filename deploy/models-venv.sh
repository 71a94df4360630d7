#!/usr/bin/env bash
# The Python environment the embedded reference models run in, on an image whose own Python
# has NumPy 2 (NVIDIA's CUDA images, most PyTorch images).
#
# Why: Triton 2.51's Python-backend stub (the nvidia-pytriton wheel) garbles STRING inputs
# under NumPy 2, so the models must import NumPy 1; but the image's SciPy (imported by
# transformers) is built for NumPy 2, so NumPy 1 alone breaks it. This makes a venv that sees
# every package of the image (torch, transformers, ...) *behind* its own NumPy 1 and a SciPy
# that works with it (SciPy 1.18 needs NumPy 2; 1.17 still takes 1.26), where the image has
# SciPy. It reads the image's site-packages from the running python3 itself, so it works when
# python3 is itself a venv (where --system-site-packages would expose the base interpreter
# instead).
#
# The stub embeds the venv's interpreter and ignores PYTHONPATH, so nothing here may count on
# it: pip runs without it (else a package it finds there, such as the gateway's llguidance
# carried to the machine on PYTHONPATH, is "already satisfied" and never installed), this
# checkout is put on the venv's own path (a .pth), and the check imports everything the
# reference models import, as the stub will (server_repo/reference_kit/stub_environment.py:
# without PYTHONPATH, from /). It ends "models environment ready" only when all of it imports.
#
#   deploy/models-venv.sh /opt/models-venv                       # from PyPI
#   deploy/models-venv.sh /opt/models-venv --no-index --find-links ./wheels   # offline
#   export MMGW_EMBEDDED__PYTHON=/opt/models-venv/bin/python
set -euo pipefail
venv=${1:?usage: deploy/models-venv.sh DIR [pip options]}
shift
python=${PYTHON:-python3}
checkout=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Every step as the stub sees it: no PYTHONPATH (nor PYTHONHOME, PIP_TARGET, PIP_PREFIX).
clean=(env -u PYTHONPATH -u PYTHONHOME -u PIP_TARGET -u PIP_PREFIX)
"${clean[@]}" "$python" -m venv "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# The image's own packages, searched after the venv's; added as site dirs, so that their own
# .pth files (an editable install of this project in the image) count too.
image_sites=$("${clean[@]}" "$python" -c \
  'import sysconfig; p = sysconfig.get_paths(); print(sorted({p["purelib"], p["platlib"]}))')
echo "import site; list(map(site.addsitedir, $image_sites))" >"$site/image-packages.pth"
# The models' own code (server_repo), wherever the gateway starts from; last, so an installed
# copy of the project in the image wins.
printf '%s\n' "$checkout" >"$site/zz-mmgw-checkout.pth"
# llguidance: the reference models' guided decoding (one wheel, no dependencies). A SciPy that
# takes NumPy 1 only where the image has a SciPy (transformers imports it when it is there).
wanted=('numpy<2' 'llguidance>=1.0')
if "${clean[@]}" "$python" -c 'import importlib.util as u, sys; sys.exit(not u.find_spec("scipy"))'
then
  wanted+=('scipy>=1.13,<1.18')
fi
"${clean[@]}" "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@" "${wanted[@]}"
"${clean[@]}" "$venv/bin/python" "$checkout/server_repo/reference_kit/stub_environment.py"
echo "export MMGW_EMBEDDED__PYTHON=$venv/bin/python"
