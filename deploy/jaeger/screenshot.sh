#!/usr/bin/env bash
# Screenshots one jetrelay delivery trace into docs/img/jaeger-trace.png:
# starts the cached Jaeger (building it once if needed), runs the traced demo,
# picks a trace that has the bridge's publish, the engine's attempt and the
# send (preferring the one whose attempts carry the most span links), and
# renders it with headless Chromium.
#
# The Jaeger built from the Go module proxy has no UI assets (the module ships
# only a placeholder page), so unless the binary serves the real UI the trace
# is rendered from Jaeger's HTTP API by deploy/jaeger/trace.html.
set -euo pipefail

cd "$(dirname "$0")/../.."
out=${1:-docs/img/jaeger-trace.png}
api=http://127.0.0.1:16686

if ! command -v chromium >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "chromium not found: installing Debian's chromium with apt-get"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi
go tool task jaeger:build deps:redis

if curl -fsS -o /dev/null "$api/api/services" 2>/dev/null; then
  echo "something already answers on $api; stop it first so the trace comes from this run" >&2
  exit 1
fi

work=$(mktemp -d)
jaeger_pid=""
cleanup() {
  # Jaeger takes >10 s to stop on its own (it retries an internal gRPC
  # connection), so it is killed by its PID.
  if [ -n "$jaeger_pid" ]; then
    kill -9 "$jaeger_pid" 2>/dev/null || true
    wait "$jaeger_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

.cache/jaeger/jaeger \
  --set=extensions.jaeger_query.http.endpoint=127.0.0.1:16686 \
  --set=extensions.jaeger_query.grpc.endpoint=127.0.0.1:16685 >"$work/jaeger.log" 2>&1 &
jaeger_pid=$!
for _ in $(seq 100); do
  curl -fsS -o /dev/null http://127.0.0.1:13133/status 2>/dev/null && break
  kill -0 "$jaeger_pid" 2>/dev/null || { cat "$work/jaeger.log" >&2; exit 1; }
  sleep 0.2
done
curl -fsS -o /dev/null http://127.0.0.1:13133/status || { echo "Jaeger did not become healthy" >&2; exit 1; }

go tool task demo:traced -- --events 5

# The demo flushes its spans on exit; Jaeger indexes them shortly after.
# A delivery trace: the bridge's publish, the engine's attempt and the send.
# Of those, up to 40 spans, the one with the most span links (FOLLOWS_FROM
# references: a delivery handled many times), then the most wake-up (promotion) spans
# (jetrelay.deferred=true), then the most spans.
pick='[.data[] | select([.spans[].operationName] as $n
        | ($n | index("send jetrelay.dispatch")) and ($n | index("process jetrelay.dispatch"))
          and ($n | index("POST")))
      | select(.spans | length <= 40)]
    | max_by([([.spans[].references[]? | select(.refType == "FOLLOWS_FROM")] | length),
              ([.spans[] | select(any(.tags[]?; .key == "jetrelay.deferred" and .value == true))] | length),
              (.spans | length)])
    | .traceID // empty'
trace=""
for _ in $(seq 50); do
  trace=$(curl -fsS "$api/api/traces?service=jetrelay&limit=20&lookback=1h" | jq -r "$pick")
  [ -n "$trace" ] && break
  sleep 0.2
done
[ -n "$trace" ] || { echo "no delivery trace with publish, attempt and send spans found in Jaeger" >&2; exit 1; }
echo "trace $trace: $api/trace/$trace"

if curl -fsS "$api/" | grep -q "not the Jaeger UI"; then
  cp deploy/jaeger/trace.html "$work/trace.html"
  { printf 'window.TRACE = '; curl -fsS "$api/api/traces/$trace"; printf ';\n'; } >"$work/trace-data.js"
  url="file://$work/trace.html"
else
  url="$api/trace/$trace"
fi

chrome() {
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/chromium" --hide-scrollbars --virtual-time-budget=5000 "$@" 2>>"$work/chromium.log" \
    || { cat "$work/chromium.log" >&2; exit 1; }
}
# trace.html writes its rendered height into <body data-height>: a first
# pass reads it, so the screenshot holds the whole trace and no blank tail.
height=900
if [ "${url#file:}" != "$url" ]; then
  h=$(chrome --window-size=1400,900 --dump-dom "$url" | sed -n 's/.*data-height="\([0-9]*\)".*/\1/p' | head -n1)
  [ -n "$h" ] && height=$((h < 300 ? 300 : h > 4000 ? 4000 : h))
fi

mkdir -p "$(dirname "$out")"
chrome --screenshot="$PWD/$out" --window-size=1400,"$height" "$url"
echo "wrote $out"
