#!/usr/bin/env bash
# LLaVA-OneVision (llava-hf/llava-onevision-qwen2-7b-ov-hf): Qwen2 checkpoint + SigLIP encoder.
# One anyres image costs up to 7300 features (NVIDIA's guide budget); the vision encoder
# batches image tiles (up to 16 per image), so its batch is max batch x images x 16.
#
#   MODEL_DIR=/models/llava-onevision-qwen2-7b-ov-hf OUTPUT_DIR=/engines/ov-7b \
#     MAX_BATCH=1 bash deploy/engines/llava_onevision.sh
FAMILY=llava_onevision
: "${DTYPE:=float16}"
: "${MAX_BATCH:=1}"
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

FEATURES_PER_IMAGE=7300
TILES_PER_IMAGE=16
prompt_table_recipe qwen llava_onevision "${FEATURES_PER_IMAGE}" \
  "$((MAX_BATCH * MAX_IMAGES * TILES_PER_IMAGE))"
