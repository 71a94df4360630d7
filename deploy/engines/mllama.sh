#!/usr/bin/env bash
# Llama-3.2-Vision (meta-llama/Llama-3.2-11B-Vision[-Instruct]): an encoder-decoder whose
# decoder cross-attends to the vision encoder's output. bfloat16 only (Triton passes the
# features as TYPE_BF16). Each image is 4 tiles x 1601 tokens = 6404 encoder positions, per
# request (the budget is max_encoder_input_len, which the batch does not multiply).
#
#   MODEL_DIR=/models/Llama-3.2-11B-Vision OUTPUT_DIR=/engines/mllama-11b \
#     MAX_BATCH=8 bash deploy/engines/mllama.sh
FAMILY=mllama
: "${DTYPE:=bfloat16}"
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

need MODEL_DIR OUTPUT_DIR
positive TP_SIZE MAX_BATCH MAX_IMAGES
check_dtype bfloat16
FEATURES_PER_IMAGE=6404
ENCODER_INPUT_LEN=$((FEATURES_PER_IMAGE * MAX_IMAGES))
CHECKPOINT="${WORK_DIR}/${FAMILY}-${DTYPE}-tp${TP_SIZE}"
PAGED=()
if [[ -n "${PAGED_CONTEXT_FMHA:-}" ]]; then
  PAGED=(--use_paged_context_fmha "${PAGED_CONTEXT_FMHA}")
fi

note "max_encoder_input_len = ${FEATURES_PER_IMAGE} (per image) x ${MAX_IMAGES} (images)" \
  "= ${ENCODER_INPUT_LEN}"
run python3 "$(example mllama convert_checkpoint.py)" \
  --model_dir "${MODEL_DIR}" --output_dir "${CHECKPOINT}" \
  --dtype "${DTYPE}" --tp_size "${TP_SIZE}"
run trtllm-build --checkpoint_dir "${CHECKPOINT}" --output_dir "${OUTPUT_DIR}/llm" \
  --gemm_plugin auto --max_batch_size "${MAX_BATCH}" \
  --max_seq_len "${MAX_SEQ_LEN:-2048}" --max_num_tokens "${MAX_NUM_TOKENS:-4096}" \
  --max_encoder_input_len "${ENCODER_INPUT_LEN}" --workers "${TP_SIZE}" ${PAGED[@]+"${PAGED[@]}"}
run python3 "$(example multimodal build_visual_engine.py)" \
  --model_type mllama --model_path "${MODEL_DIR}" \
  --output_dir "${OUTPUT_DIR}/visual" --max_batch_size "$((MAX_BATCH * MAX_IMAGES))"
next_step --llm-engine "${OUTPUT_DIR}/llm" --visual-engine "${OUTPUT_DIR}/visual" \
  --tokenizer-dir "${MODEL_DIR}" --max-images "${MAX_IMAGES}"
