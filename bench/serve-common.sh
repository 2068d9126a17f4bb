# Sourced by the bench/serve-*.sh scripts (run from the repository's root):
# the release binary, the model to serve and a server on loopback.
#   serve_model: sets $bin ($KESTREL_BIN, else the release build, built
#     here) and $vqf: $KESTREL_VQF, else the real model converted as
#     scripts/demo.sh does (dual), else the tiny fixture.
#   start_serve LOG ARGS...: starts `$bin serve $vqf --port 0 ARGS...`
#     (stderr to LOG) and sets $serve_pid and $serve_addr once it listens.

serve_model() {
    bin="${KESTREL_BIN:-}"
    if [ -z "$bin" ]; then
        cargo build -q --release --locked -p kestrel
        bin=./target/release/kestrel
    fi
    vqf="${KESTREL_VQF:-}"
    if [ -n "$vqf" ]; then return; fi
    local gguf
    if gguf=$(bash scripts/fetch-model.sh 2>/dev/null); then
        vqf=.cache/vqf/qwen2.5-coder-0.5b-instruct-dual.vqf
        mkdir -p .cache/vqf
        [ -f "$vqf" ] || "$bin" convert "$gguf" -o "$vqf" --wmode dual
    else
        vqf=$(mktemp -d)/fixture.vqf
        "$bin" convert tests/fixtures/dev_qwen3_dense_tied/hf -o "$vqf" --wmode dual 2>/dev/null
        echo "(real model unavailable: the fixture model)"
    fi
}

start_serve() {
    local log=$1; shift
    "$bin" serve "$vqf" --port 0 "$@" 2>"$log" &
    serve_pid=$!
    serve_addr=""
    for _ in $(seq 600); do
        serve_addr=$(grep -o 'listening on http://[^ ]*' "$log" | sed 's|.*http://||' || true)
        [ -n "$serve_addr" ] && return
        kill -0 "$serve_pid" 2>/dev/null || { cat "$log"; exit 1; }
        sleep 0.1
    done
    echo "kestrel serve did not listen within 60 s"; cat "$log"; exit 1
}
