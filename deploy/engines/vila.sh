#!/usr/bin/env bash
# VILA-1.5 (Efficient-Large-Model/vila1.5-3b ...): Llama checkpoint + VILA vision tower,
# several images per request; 196 features per image. Needs the VILA source (VILA_PATH).
#
#   MODEL_DIR=/models/vila1.5-3b VILA_PATH=/src/VILA OUTPUT_DIR=/engines/vila1.5-3b \
#     MAX_BATCH=8 MAX_IMAGES=4 bash deploy/engines/vila.sh
FAMILY=vila
: "${DTYPE:=float16}"
: "${MAX_IMAGES:=4}"
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

need VILA_PATH
FEATURES_PER_IMAGE=196
# The vision encoder sees every image of every request: max batch x images.
prompt_table_recipe llama vila "${FEATURES_PER_IMAGE}" "$((MAX_BATCH * MAX_IMAGES))" \
  --vila_path "${VILA_PATH}"
