#!/usr/bin/env bash
# LLaVA-1.5 (llava-hf/llava-1.5-7b-hf, -13b-hf): Llama checkpoint + CLIP vision encoder.
# Follows NVIDIA's multimodal guide; 576 visual features per image (336 px, patch 14).
#
#   MODEL_DIR=/models/llava-1.5-7b-hf OUTPUT_DIR=/engines/llava-1.5-7b \
#     TP_SIZE=1 MAX_BATCH=8 bash deploy/engines/llava.sh      # DRY_RUN=1 prints only
FAMILY=llava
: "${DTYPE:=float16}"
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

FEATURES_PER_IMAGE=576
prompt_table_recipe llama llava "${FEATURES_PER_IMAGE}" "$((MAX_BATCH * MAX_IMAGES))"
