# shellcheck shell=bash
# Shared by the per-family recipes in this folder; sourced, never run.
#
# Why a helper: every recipe must (1) print exactly what it would run when DRY_RUN=1, so the
# flags can be reviewed and tested without a GPU, (2) find NVIDIA's example scripts in both
# TensorRT-LLM layouts (examples/<model>/ before 0.17, examples/models/core/<model>/ after),
# and (3) end by printing the `mmgw trtllm-repo` command that assembles the Triton
# repository for the engines it built, with the same sizes.

set -euo pipefail

: "${DRY_RUN:=0}"
: "${TP_SIZE:=1}"
: "${MAX_BATCH:=8}"
: "${MAX_IMAGES:=1}"
: "${TRTLLM_EXAMPLES:=/app/tensorrt_llm/examples}"
: "${WORK_DIR:=${OUTPUT_DIR:-/engines}/checkpoints}"

die() {
  echo "error: $*" >&2
  exit 2
}

need() {
  local name
  for name in "$@"; do
    [[ -n "${!name:-}" ]] || die "set ${name} (see deploy/README.md)"
  done
}

positive() {
  local name
  for name in "$@"; do
    [[ "${!name}" =~ ^[1-9][0-9]*$ ]] || die "${name} must be a positive integer, got '${!name}'"
  done
}

# run CMD...: print the command (shell-quoted, one line) when DRY_RUN=1, else run it.
run() {
  if [[ "${DRY_RUN}" == "1" ]]; then
    printf '%q ' "$@" | sed 's/ $//'
    echo
  else
    echo "+ $*" >&2
    "$@"
  fi
}

# example MODEL SCRIPT: the path of NVIDIA's example script in either layout.
example() {
  local newer="${TRTLLM_EXAMPLES}/models/core/$1/$2"
  if [[ -f "${newer}" ]]; then
    echo "${newer}"
  else
    echo "${TRTLLM_EXAMPLES}/$1/$2"
  fi
}

# note TEXT: a comment line in the output (prefixed with '#' so DRY_RUN output stays a script).
note() {
  echo "# $*"
}

# next_step ARGS...: the command that turns these engines into a Triton repository.
next_step() {
  note "next: mmgw trtllm-repo --family ${FAMILY} --templates /path/to/TensorRT-LLM" \
    "--output ./triton_repo --world-size ${TP_SIZE} $*"
}

check_dtype() {
  case "${DTYPE}" in
    float16 | bfloat16) ;;
    *) die "DTYPE must be float16 or bfloat16, got '${DTYPE}'" ;;
  esac
  if [[ "${DTYPE}" != "$1" ]]; then
    note "warning: Triton serves ${FAMILY} with ${1} engines; mmgw trtllm-repo will refuse ${DTYPE}"
  fi
}

# prompt_table_recipe CONVERT_MODEL VISUAL_TYPE FEATURES VISUAL_BATCH [VISUAL_ARGS...]
# LLaVA-style families: an LLM that takes visual features as a prompt table, plus a vision
# encoder. max_multimodal_len is computed (batch x features x images), never asked for.
prompt_table_recipe() {
  local convert_model="$1" visual_type="$2" features="$3" visual_batch="$4"
  shift 4
  need MODEL_DIR OUTPUT_DIR
  positive TP_SIZE MAX_BATCH MAX_IMAGES
  check_dtype float16
  local budget=$((MAX_BATCH * features * MAX_IMAGES))
  local max_input_len="${MAX_INPUT_LEN:-$((features * MAX_IMAGES + ${MAX_TEXT_LEN:-1536}))}"
  local max_seq_len="${MAX_SEQ_LEN:-$((max_input_len + ${MAX_OUTPUT_LEN:-512}))}"
  local checkpoint="${WORK_DIR}/${FAMILY}-${DTYPE}-tp${TP_SIZE}"
  note "max_multimodal_len = ${MAX_BATCH} (max batch) x ${features} (features per image)" \
    "x ${MAX_IMAGES} (images per request) = ${budget}"
  run python3 "$(example "${convert_model}" convert_checkpoint.py)" \
    --model_dir "${MODEL_DIR}" --output_dir "${checkpoint}" \
    --dtype "${DTYPE}" --tp_size "${TP_SIZE}"
  run trtllm-build --checkpoint_dir "${checkpoint}" --output_dir "${OUTPUT_DIR}/llm" \
    --gemm_plugin "${DTYPE}" --max_batch_size "${MAX_BATCH}" \
    --max_input_len "${max_input_len}" --max_seq_len "${max_seq_len}" \
    --max_multimodal_len "${budget}" \
    --use_paged_context_fmha "${PAGED_CONTEXT_FMHA:-enable}" --workers "${TP_SIZE}"
  run python3 "$(example multimodal build_visual_engine.py)" \
    --model_type "${visual_type}" --model_path "${MODEL_DIR}" \
    --output_dir "${OUTPUT_DIR}/visual" --max_batch_size "${visual_batch}" "$@"
  next_step --llm-engine "${OUTPUT_DIR}/llm" --visual-engine "${OUTPUT_DIR}/visual" \
    --tokenizer-dir "${MODEL_DIR}" --max-images "${MAX_IMAGES}" --kv-cache-reuse
}
