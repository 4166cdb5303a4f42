#!/usr/bin/env bash
# Runs every `build/kvrt ...` command of README.md as written, from a directory laid out
# like the checkout (models/, tests/, build/kvrt), so that the README cannot drift from
# what kvrt does. The README's placeholders get the bundled model:
#   CHECKPOINT_DIR         the bundled model with max_position_embeddings 8192, so that
#                          `bench -d 0,4096` fits (its RoPE has no learned positions)
#   MODEL_DIR              a copy of it with the bundled chat template (chat.jinja)
#   reference.json         models/fortune-llama/reference.json
#   chat.json              one user message
#   prompt.txt             a prompt
#   Qwen/Qwen2.5-0.5B-Instruct  a Hugging Face cache ($HF_HUB_CACHE) whose snapshot is
#                          the bundled model, laid out as huggingface_hub writes it
# and two substitutions keep the run bounded: `serve` gets --port 0 (8080 may be taken)
# and is stopped once it answers /health (and, with a chat template, the README's
# curl request, sent to the port it took); `chat` reads one line from stdin. A
# `--device cuda` or `-ngl 99` command on a machine without CUDA must fail saying why.
#   readme_commands_test.sh SOURCE_DIR KVRT_BINARY
set -uo pipefail
src=$1
kvrt=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
ln -s "$src/models" models
ln -s "$src/tests" tests
mkdir build && ln -s "$kvrt" build/kvrt
export XDG_CACHE_HOME=$work/cache
cp "$src/models/fortune-llama/reference.json" reference.json
mkdir model_dir
for file in "$src"/models/fortune-llama/*; do ln -s "$file" model_dir/; done
cp "$src/tests/fixtures/serve/chat.jinja" model_dir/chat_template.jinja
mkdir checkpoint_dir
for file in "$src"/models/fortune-llama/*; do ln -s "$file" checkpoint_dir/; done
rm checkpoint_dir/config.json
sed 's/"max_position_embeddings": *[0-9]*/"max_position_embeddings": 8192/' \
  "$src/models/fortune-llama/config.json" > checkpoint_dir/config.json
echo '{"messages": [{"role": "user", "content": "A fortune?"}]}' > chat.json
echo "A computer" > prompt.txt
export HF_HUB_CACHE=$work/hub
sha=0123456789abcdef0123456789abcdef01234567
mkdir -p "$HF_HUB_CACHE/models--Qwen--Qwen2.5-0.5B-Instruct/refs" \
         "$HF_HUB_CACHE/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots"
printf %s "$sha" > "$HF_HUB_CACHE/models--Qwen--Qwen2.5-0.5B-Instruct/refs/main"
ln -s "$work/model_dir" "$HF_HUB_CACHE/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/$sha"

# The indented command lines, with continuations joined and trailing comments dropped.
mapfile -t commands < <(awk '
  /^    (source <\()?build\/kvrt / || more {
    line = $0; sub(/^ +/, "", line)
    if (line ~ /\\$/) { sub(/ *\\$/, " ", line); joined = joined line; more = 1; next }
    print joined line; joined = ""; more = 0
  }' "$src/README.md" | sed -E 's/ +# [^"]*$//' | awk '!seen[$0]++')
# The curl request of the serve section: from "curl" to the line that closes its body.
curl_command=$(awk '/^    curl / { on = 1 } on { print; if ($0 ~ /'"'"'$/) exit }' "$src/README.md")
if [ -z "$curl_command" ]; then
  echo "no curl request in README.md"
  exit 1
fi
if [ ${#commands[@]} -lt 10 ]; then
  echo "found only ${#commands[@]} commands in README.md"
  exit 1
fi

failures=0
for command in "${commands[@]}"; do
  line=${command//CHECKPOINT_DIR/checkpoint_dir}
  line=${line//MODEL_DIR/model_dir}
  case "$line" in
    *" serve "*) line=${line//--port 8080/--port 0} ;;
  esac
  echo "== $line"
  if [[ "$line" == *" serve "* ]]; then
    eval "exec $line" 2>serve.err &
    pid=$!
    ok=1
    for _ in $(seq 1 300); do
      port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' serve.err)
      [ -n "$port" ] && break
      sleep 0.2
    done
    if [ -n "${port:-}" ] && { ! command -v curl >/dev/null ||
         curl -sf "http://127.0.0.1:$port/health" >/dev/null; }; then ok=0; fi
    # The README's curl request, against the server that has a chat template.
    if [ $ok -eq 0 ] && [[ "$line" == *--chat-template* ]] && command -v curl >/dev/null; then
      request=${curl_command//8080/$port}
      echo "== $request"
      if ! eval "$request" | grep -q '"choices"'; then
        echo "FAILED: the README's curl request"
        ok=1
      fi
    fi
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    [ $ok -eq 0 ] || { echo "FAILED: serve did not answer"; cat serve.err; failures=$((failures + 1)); }
    continue
  fi
  status=0
  echo "A fortune?" | eval "$line" >out.txt 2>err.txt || status=$?
  if [[ "$line" == *"--device cuda"* || "$line" == *"-ngl 99"* ]] && [ $status -ne 0 ]; then
    if grep -q "CUDA" err.txt; then echo "(no CUDA here: refused with the reason)"; continue; fi
  fi
  if [ $status -ne 0 ]; then
    echo "FAILED (exit $status):"
    cat err.txt
    failures=$((failures + 1))
  fi
done
echo "$failures of ${#commands[@]} README commands failed"
[ $failures -eq 0 ]
