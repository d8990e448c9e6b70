#!/usr/bin/env bash
# Two `fucina serve` replicas on loopback behind Debian's nginx, as
# docs/SERVE.md's "Scale-out" describes:
#
#   tests/serve/nginx_replicas.sh
#
# nginx runs in the foreground (daemon off) from a config generated in a temp
# dir, with its own pid, log and temp paths; the upstream has both replicas,
# passive health checks (max_fails / fail_timeout), keep-alive HTTP/1.1 to the
# upstreams, and proxy_buffering off for SSE. Checks: requests through nginx
# succeed, a stream arrives through it in several reads with [DONE] last,
# both replicas served requests (their /metrics), and with one replica killed
# every further request still succeeds.
#
# Environment: FUCINA_BIN (default ../../build/fucina from here), FUCINA_MODEL
# (default: make-model --preset tiny in the temp dir), NGINX (default: nginx on
# PATH or /usr/sbin/nginx), FUCINA_SERVE_KEEP=1 keeps the temp dir.
# Exit status: 0 passed, 1 failed, 77 skipped (no nginx, curl or python3).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${FUCINA_BIN:-$here/../../build/fucina}
nginx=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
if [ ! -x "$nginx" ]; then
  echo "SKIP: no nginx (apt-get install nginx)"
  exit 77
fi
for tool in curl python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: no $tool"
    exit 77
  fi
done
if [ ! -x "$bin" ]; then
  echo "FAIL: no fucina binary at $bin (set FUCINA_BIN)" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fucina-nginx-XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "${FUCINA_SERVE_KEEP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
check() { # DESCRIPTION COMMAND...: ok when the command succeeds
  local what=$1
  shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}

model=${FUCINA_MODEL:-}
if [ -z "$model" ]; then
  model=$tmp/tiny.gguf
  "$bin" make-model --preset tiny "$model" >/dev/null
fi

# --- the replicas --------------------------------------------------------------
# start_replica NAME: --port 0; sets port_NAME from its "listening on" line
start_replica() {
  local name=$1 log=$tmp/$1.log i port=
  "$bin" serve "$model" --host 127.0.0.1 --port 0 -np 2 -c 256 -t 1 --metrics --no-webui 2>"$log" >/dev/null &
  pids+=($!)
  eval "pid_$name=$!"
  for i in $(seq 1 300); do
    port=$(sed -n 's|.*fucina serve: listening on http://[^:]*:\([0-9][0-9]*\).*|\1|p' "$log" | head -n 1)
    [ -n "$port" ] && break
    if ! kill -0 "$!" 2>/dev/null; then
      echo "FAIL: replica $name exited before listening:" >&2
      cat "$log" >&2
      exit 1
    fi
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "FAIL: replica $name: no 'listening on' line in 30 s" >&2
    cat "$log" >&2
    exit 1
  fi
  for i in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] && break
    sleep 0.1
  done
  eval "port_$name=$port"
  echo "== replica $name: 127.0.0.1:$port (pid $!)"
}
start_replica a
start_replica b

# --- nginx ---------------------------------------------------------------------
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
mkdir -p "$tmp/nginx"
write_conf() { # PORT
  cat >"$tmp/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log info;
events { worker_connections 256; }
http {
  access_log $tmp/nginx/access.log;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;

  upstream fucina {
    # the replica with the fewest requests in flight (generations differ in length)
    least_conn;
    # passive health checks: 3 failures within 10 s take a replica out for 10 s
    server 127.0.0.1:$port_a max_fails=3 fail_timeout=10s;
    server 127.0.0.1:$port_b max_fails=3 fail_timeout=10s;
    keepalive 16;
  }
  server {
    listen 127.0.0.1:$1;
    client_max_body_size 8m;
    location / {
      proxy_pass http://fucina;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      # SSE: pass each event on as it comes
      proxy_buffering off;
      proxy_cache off;
      proxy_read_timeout 600s;
      # a refused or reset connection, or a full queue (503 before any work),
      # is retried on the other replica; POST included: a completion changes
      # nothing. Once a response has started it is never retried.
      proxy_next_upstream error timeout http_502 http_503 non_idempotent;
      proxy_next_upstream_tries 2;
      proxy_connect_timeout 2s;
    }
  }
}
EOF
}
nginx_port=
for attempt in 1 2 3; do
  nginx_port=$(free_port)
  write_conf "$nginx_port"
  "$nginx" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -t >"$tmp/nginx/test.log" 2>&1 || {
    echo "FAIL: nginx -t:" >&2
    cat "$tmp/nginx/test.log" >&2
    exit 1
  }
  "$nginx" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" 2>>"$tmp/nginx/stderr.log" &
  nginx_pid=$!
  up=0
  for i in $(seq 1 50); do
    if ! kill -0 "$nginx_pid" 2>/dev/null; then break; fi
    if curl -s -o /dev/null "http://127.0.0.1:$nginx_port/health"; then up=1; break; fi
    sleep 0.1
  done
  if [ "$up" = 1 ]; then pids+=("$nginx_pid"); break; fi
  kill "$nginx_pid" 2>/dev/null || true
  wait "$nginx_pid" 2>/dev/null || true
done
if [ "$up" != 1 ]; then
  echo "FAIL: nginx did not come up:" >&2
  cat "$tmp/nginx/error.log" "$tmp/nginx/stderr.log" >&2 2>/dev/null || true
  exit 1
fi
echo "== nginx: 127.0.0.1:$nginx_port (pid $nginx_pid)"
front=http://127.0.0.1:$nginx_port

# --- checks --------------------------------------------------------------------
# chat TEXT [MAX_TOKENS]: POST a greedy chat completion through nginx; prints
# the HTTP code and leaves the body in $tmp/body.json
chat() {
  curl -s -o "$tmp/body.json" -w '%{http_code}' --max-time 60 "$front/v1/chat/completions" \
    -H 'content-type: application/json' \
    -d "{\"messages\": [{\"role\": \"user\", \"content\": \"$1\"}], \"max_tokens\": ${2:-8}, \"temperature\": 0}"
}
metric() { # PORT NAME: the value of a metric of the replica at PORT (direct)
  curl -s --max-time 5 "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n { printf "%d\n", $2; f = 1 } END { if (!f) print -1 }'
}

code=$(curl -s -o "$tmp/health.json" -w '%{http_code}' "$front/health")
check "GET /health through nginx: 200 (got $code)" [ "$code" = 200 ]
code=$(curl -s -o "$tmp/models.json" -w '%{http_code}' "$front/v1/models")
check "GET /v1/models through nginx: 200 (got $code)" [ "$code" = 200 ]

a0=$(metric "$port_a" fucina_requests_total)
b0=$(metric "$port_b" fucina_requests_total)
all_ok=1
mkdir -p "$tmp/chat"
for i in $(seq 1 12); do
  code=$(chat "Hello number $((i % 3))")
  if [ "$code" != 200 ]; then all_ok=0; echo "  request $i: $code $(head -c 300 "$tmp/body.json")"; continue; fi
  cp "$tmp/body.json" "$tmp/chat/$((i % 3))_$i.json"
done
check "12 chat completions through nginx: all 200" [ "$all_ok" = 1 ]
# greedy: the same prompt gives the same text on either replica
python3 - "$tmp/chat" >"$tmp/same.check" 2>&1 <<'EOF2' && same=1 || same=0
import glob, json, os, sys
texts = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], '*.json'))):
    key = os.path.basename(f).split('_')[0]
    texts.setdefault(key, set()).add(json.load(open(f))['choices'][0]['message']['content'])
bad = {k: v for k, v in texts.items() if len(v) != 1}
assert not bad, bad
EOF2
check "greedy text is the same whichever replica answered" [ "$same" = 1 ]
a1=$(metric "$port_a" fucina_requests_total)
b1=$(metric "$port_b" fucina_requests_total)
echo "  requests: replica a $a0 -> $a1, replica b $b0 -> $b1"
check "replica a served requests (fucina_requests_total $a0 -> $a1)" [ "$a1" -gt "$a0" ]
check "replica b served requests (fucina_requests_total $b0 -> $b1)" [ "$b1" -gt "$b0" ]
check "the replicas' counts add up to the 12 requests" [ "$(( a1 - a0 + b1 - b0 ))" -eq 12 ]

# a stream through nginx: SSE headers, several data events, [DONE] last, and
# the same text as the plain request
curl -s -N -D "$tmp/sse.headers" -o "$tmp/sse.txt" --max-time 60 "$front/v1/chat/completions" \
  -H 'content-type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 24, "temperature": 0, "stream": true}' || true
plain_code=$(chat "Tell me a story" 24)
python3 - "$tmp/sse.txt" "$tmp/sse.headers" "$tmp/body.json" >"$tmp/sse.check" 2>&1 <<'EOF' && sse_ok=1 || sse_ok=0
import json, sys
body = open(sys.argv[1], 'rb').read().decode('utf-8')
headers = open(sys.argv[2]).read().lower()
assert 'content-type: text/event-stream' in headers, headers
events = [e for e in body.split('\n\n') if e]
assert events and events[-1] == 'data: [DONE]', events[-3:]
chunks = [json.loads(e[len('data: '):]) for e in events[:-1]]
assert len(chunks) >= 2, f'{len(chunks)} chunks'
text = ''.join((c['choices'][0]['delta'].get('content') or '') for c in chunks if c['choices'])
plain = json.load(open(sys.argv[3]))['choices'][0]['message']['content']
assert text == plain, (text, plain)
assert len({c['id'] for c in chunks}) == 1
print(f'{len(chunks)} chunks, {len(text)} chars')
EOF
check "a stream through nginx: text/event-stream, [DONE] last, text == plain ($(cat "$tmp/sse.check" | tail -n 1))" [ "$sse_ok" = 1 -a "$plain_code" = 200 ]

# the stream is not buffered: its first event arrives before the last is made
# (a long generation: the first byte comes well before the end)
timing=$(curl -s -N -o /dev/null -w '%{time_starttransfer} %{time_total}' --max-time 60 "$front/v1/completions" \
  -H 'content-type: application/json' \
  -d '{"prompt": "Once upon a time", "max_tokens": 200, "temperature": 0, "stream": true}')
echo "  stream of 200 tokens: first byte, end (s): $timing"

# one replica dies: requests keep succeeding (nginx retries the refused
# connection on the other one and then marks the dead one failed)
kill -9 "$pid_a"
{ wait "$pid_a" || true; } 2>/dev/null
b2=$(metric "$port_b" fucina_requests_total)
all_ok=1
for i in $(seq 1 8); do
  code=$(chat "After the failover $i")
  if [ "$code" != 200 ]; then all_ok=0; echo "  request $i after the kill: $code $(head -c 300 "$tmp/body.json")"; fi
done
check "8 requests after replica a was killed: all 200" [ "$all_ok" = 1 ]
b3=$(metric "$port_b" fucina_requests_total)
check "replica b served them all ($b2 -> $b3)" [ "$(( b3 - b2 ))" -eq 8 ]
sse_after=$(curl -s -N --max-time 60 "$front/v1/completions" -H 'content-type: application/json' \
  -d '{"prompt": "Hi", "max_tokens": 4, "temperature": 0, "stream": true}' | tail -c 200)
check "a stream after the kill ends with [DONE]" grep -q 'data: \[DONE\]' <<<"$sse_after"
if grep -q 'upstream' "$tmp/nginx/error.log"; then
  echo "  nginx noticed: $(grep -m1 -o 'connect() failed[^,]*' "$tmp/nginx/error.log" || true)"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
