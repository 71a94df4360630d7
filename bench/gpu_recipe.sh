#!/usr/bin/env bash
# The GPU recipe, end to end, on a machine with NVIDIA's CUDA image (its own Python has
# NumPy 2): deploy/models-venv.sh builds the models' environment, then `mmgw serve` co-launches
# the reference models on CUDA in it and answers the README's requests (an image, a stream,
# speech). Prints each step; exits non-zero at the first that fails.
#
#   bench/gpu_recipe.sh WHEELS [SITE]
#
# WHEELS: a folder of wheels for the recipe (numpy 1.x, a SciPy that takes it, llguidance),
# used with --no-index (the GPU host has no network). SITE (optional): a folder of the gateway's
# own dependencies put on PYTHONPATH, where the image's Python lacks them.
set -euo pipefail
wheels=${1:?usage: bench/gpu_recipe.sh WHEELS [SITE]}
site=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PYTHONPATH="${site:+$site:}$root"
export PYTHONUNBUFFERED=1
venv=${MODELS_VENV:-/tmp/models-venv}
port=${PORT:-8123}

echo "== 1. deploy/models-venv.sh $venv --no-index --find-links $wheels"
started=$(date +%s)
bash deploy/models-venv.sh "$venv" --no-index --find-links "$wheels"
echo "   recipe took $(($(date +%s) - started)) s"

echo "== 2. mmgw serve on CUDA in that environment (port $port)"
log=$(mktemp -d)/serve.log
MMGW_EMBEDDED__PYTHON="$venv/bin/python" MMGW_EMBEDDED__DEVICE=cuda \
  python3 -m gateway.cli serve --port "$port" >"$log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
started=$(date +%s)
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
  if ! kill -0 $server 2>/dev/null; then
    echo "   mmgw serve exited:"; tail -40 "$log"; exit 1
  fi
  if (($(date +%s) - started > 300)); then echo "   not ready in 300 s"; tail -40 "$log"; exit 1; fi
  sleep 1
done
echo "   ready after $(($(date +%s) - started)) s; its output:"
sed 's/^/   | /' "$log"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/   gpu: /' || true

image="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAFUlEQVR42mM8ISfHgA0wMeAAg1MCANDKARQfGKMRAAAAAElFTkSuQmCC"
ask() {  # model, stream
  curl -sS "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
    -d "{\"model\": \"$1\", \"max_tokens\": 8, \"stream\": $2, \"messages\": [{\"role\": \"user\",
         \"content\": [{\"type\": \"text\", \"text\": \"What colour is this?\"},
                       {\"type\": \"image_url\", \"image_url\": {\"url\": \"$image\"}}]}]}"
}
for model in reference-llava reference-llava-onevision reference-qwen2.5-vl; do
  echo "== 3. $model: one image"
  ask "$model" false | python3 -c 'import json,sys; b=json.load(sys.stdin); print("   ", b["choices"][0]["finish_reason"], b["usage"])'
  echo "== 3. $model: one image, streamed"
  ask "$model" true | grep -c '^data: ' | sed 's/^/    SSE events: /'
done
speech=$(ls tests/speech_sample.flac docs/samples/*.mp3 2>/dev/null | head -1)
echo "== 4. reference-whisper: $speech"
curl -sS "http://127.0.0.1:$port/v1/audio/transcriptions" -F model=reference-whisper \
  -F "file=@$speech" | head -c 300
echo
echo "== done: the recipe's environment served every default model on CUDA"
