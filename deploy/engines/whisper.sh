#!/usr/bin/env bash
# Whisper (OpenAI checkpoints, e.g. large-v3.pt): encoder and decoder engines, as NVIDIA's
# Whisper guide builds them. The encoder takes one 30 s window (3000 mel frames); the
# decoder's prompt is at most 14 tokens and it writes at most 100 more. No tensor
# parallelism: the model fits one GPU.
#
#   MODEL_DIR=/models/whisper (holding large-v3.pt) OUTPUT_DIR=/engines/whisper-large-v3 \
#     MAX_BATCH=64 bash deploy/engines/whisper.sh
FAMILY=whisper
: "${DTYPE:=float16}"
: "${MAX_BATCH:=64}"
: "${WHISPER_MODEL_NAME:=large-v3}"
: "${MAX_BEAM_WIDTH:=4}"
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

need MODEL_DIR OUTPUT_DIR
positive TP_SIZE MAX_BATCH MAX_BEAM_WIDTH
check_dtype float16
[[ "${TP_SIZE}" == "1" ]] || die "Whisper engines are built for one GPU (TP_SIZE=1)"
MEL_FRAMES=3000
CHECKPOINT="${WORK_DIR}/whisper-${WHISPER_MODEL_NAME}-${DTYPE}"

run python3 "$(example whisper convert_checkpoint.py)" \
  --model_dir "${MODEL_DIR}" --model_name "${WHISPER_MODEL_NAME}" \
  --dtype "${DTYPE}" --output_dir "${CHECKPOINT}"
run trtllm-build --checkpoint_dir "${CHECKPOINT}/encoder" --output_dir "${OUTPUT_DIR}/encoder" \
  --moe_plugin disable --max_batch_size "${MAX_BATCH}" \
  --gemm_plugin disable --bert_attention_plugin "${DTYPE}" \
  --max_input_len "${MEL_FRAMES}" --max_seq_len "${MEL_FRAMES}"
run trtllm-build --checkpoint_dir "${CHECKPOINT}/decoder" --output_dir "${OUTPUT_DIR}/decoder" \
  --moe_plugin disable --max_beam_width "${MAX_BEAM_WIDTH}" --max_batch_size "${MAX_BATCH}" \
  --max_seq_len 114 --max_input_len 14 --max_encoder_input_len "${MEL_FRAMES}" \
  --gemm_plugin "${DTYPE}" --bert_attention_plugin "${DTYPE}" \
  --gpt_attention_plugin "${DTYPE}"
next_step --encoder-engine "${OUTPUT_DIR}/encoder" --decoder-engine "${OUTPUT_DIR}/decoder" \
  --max-batch 8
