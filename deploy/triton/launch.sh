#!/usr/bin/env bash
# Start Triton over a TensorRT-LLM model repository inside NVIDIA's tritonserver
# -trtllm-python-py3 image (docker compose and Kubernetes both run this), in the foreground.
#
# Why not run launch_triton_server.py as the container command: it starts mpirun in the
# background and returns at once, and a container whose main process exits is stopped.
# This script starts it, then stays until that mpirun ends and forwards SIGTERM to it, so
# `docker compose stop` and a pod's termination shut Triton down cleanly.
# DRY_RUN=1 prints the launch command instead of running it.
set -euo pipefail

: "${TRITON_MODEL_REPO:?set TRITON_MODEL_REPO to the repository mmgw trtllm-repo wrote}"
: "${TRITON_WORLD_SIZE:=1}"
: "${TRITON_LLM_MODEL_NAMES:=tensorrt_llm,multimodal_encoders}"
: "${TRITON_CUDA_MEM_POOL_BYTES:=300000000}"
: "${TRITON_LAUNCH_SCRIPT:=/app/scripts/launch_triton_server.py}"
: "${TRITON_HTTP_PORT:=8000}"
: "${TRITON_GRPC_PORT:=8001}"
: "${TRITON_METRICS_PORT:=8002}"
: "${DRY_RUN:=0}"
# MPI_Init_thread fails in some containers without this (NVIDIA's documented workaround).
export PMIX_MCA_gds="${PMIX_MCA_gds:-hash}"

launch=(
  python3 "${TRITON_LAUNCH_SCRIPT}"
  --world_size "${TRITON_WORLD_SIZE}"
  --model_repo "${TRITON_MODEL_REPO}"
  --tensorrt_llm_model_name "${TRITON_LLM_MODEL_NAMES}"
  --multimodal_gpu0_cuda_mem_pool_bytes "${TRITON_CUDA_MEM_POOL_BYTES}"
  --http_port "${TRITON_HTTP_PORT}"
  --grpc_port "${TRITON_GRPC_PORT}"
  --metrics_port "${TRITON_METRICS_PORT}"
)
if [[ "${DRY_RUN}" == "1" ]]; then
  printf '%q ' "${launch[@]}" | sed 's/ $//'
  echo
  exit 0
fi
if [[ ! -f "${TRITON_MODEL_REPO}/tensorrt_llm/config.pbtxt" ]]; then
  echo "error: ${TRITON_MODEL_REPO} holds no tensorrt_llm model; run mmgw trtllm-repo" >&2
  exit 2
fi

"${launch[@]}"
mpirun_pid=""
for _ in $(seq 1 60); do
  mpirun_pid="$(pgrep -n -x mpirun || true)"
  [[ -n "${mpirun_pid}" ]] && break
  sleep 1
done
if [[ -z "${mpirun_pid}" ]]; then
  echo "error: mpirun did not start" >&2
  exit 1
fi
trap 'kill -TERM "${mpirun_pid}" 2>/dev/null || true' TERM INT
# mpirun is not our child (the launcher that started it has exited), so poll rather than wait.
while kill -0 "${mpirun_pid}" 2>/dev/null; do
  sleep 2 &
  wait $! || true
done
echo "tritonserver exited" >&2
exit 1
