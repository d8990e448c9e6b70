#!/usr/bin/env python3
"""`fucina serve` under hostile and careless clients.

usage: robustness.py [--bin FUCINA] [--model MODEL.gguf] [--ctx N] [--only G1,G2] [-v]

Starts `fucina serve` itself (on 127.0.0.1, --port 0) with small limits:
-np 2, --queue 8, --timeout 3, --max-body 131072, -c 16384, --metrics,
--api-key. Without --model (or when the file is absent) a tiny model is made
with `fucina make-model --preset tiny` in a temporary directory.

Then it throws at the server, group by group:
  request-line  malformed request lines and headers: garbage, TLS bytes, no
                version, HTTP/9.9, absurd methods, NUL bytes, a 100 KB URI,
                a header without a colon, a 1 MB header, 20000 headers
  bodies        Content-Length larger than sent, negative, non-numeric,
                overflowing, doubled; bad chunked encoding (hex sizes, missing
                CRLF, truncated); bodies of max-body (200) and over it (413)
  json          malformed JSON and wrong field types to /v1/chat/completions
                and /v1/completions: a 400 in OpenAI's error shape whose param
                or message names the field; sampler and option edges (top_k
                1e9, repeat_last_n 1e9, every token banned...): 200 or 4xx
  endpoints     the GET endpoints, /tokenize and /detokenize edge cases (each
                token alone stays valid UTF-8 JSON), unknown paths and
                methods, --api-key
  slow          slowloris (20 connections trickling a header byte a second)
                and requests held open mid-header or mid-body: normal
                requests stay prompt, the slow ones are closed by --timeout
  flood         1000 connections opened and dropped (some mid-request, some
                reset); the server's threads and descriptors come back down;
                1000 pipelined requests on one connection; 200 idle ones held
  stall         a stream whose client never reads (4 KB receive buffer) does
                not stall another client's stream, and is dropped by --timeout
  disconnect    a client leaving mid-stream (FIN and RST), during a
                non-streaming request, and while queued: /slots shows the
                slots free again within seconds
  queue         a request queued behind two busy slots for longer than
                --timeout is still answered
  context       a second server with -c 64: prompts of 1..64 tokens end with
                finish_reason "length", 65 and more are a 400, streamed too
  load          200 short requests (max_tokens 4) from 8 threads: all 200 with
                valid JSON, and /metrics fucina_requests_total up by >= 200
  overload      16 concurrent long requests against 2 slots + 8 queued: each
                answered (200, or 429/503 in the error shape), none hangs
  sigterm       SIGTERM with an idle, a half-sent and a streaming connection:
                exit 0 within seconds, the stream's chunked body ended whole
After every group the process must be alive, GET /health must answer 200
within a few seconds, no slot may stay busy, and the server's output must
hold no sanitizer report. A crash or hang is reported with the server's last
output and the server is started again, so later groups still run.

A bad input passes if it gets a 4xx, or the connection is closed without a
reply where HTTP allows that. The only 5xx accepted are the ones RFC 9110
prescribes: 505 for an unsupported HTTP major version and 501 for an unknown
method or transfer coding. Every failure prints the bytes sent and what came
back. No bound is tighter than a few seconds (an ASan build runs this too).

Exit status: 0 every case passed, 1 a failure, 77 (skip) no server binary
(the file is missing, or it has no `serve` command).
"""
import argparse
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HOST = "127.0.0.1"
KEY = "robustness-key-7f3a"
SLOTS = 2
QUEUE = 8
IDLE = 3                # --timeout: idle connection seconds
MAX_BODY = 131072       # --max-body: room for 100000 '['
SLACK = 4.0             # what a server (an ASan one) may take beyond a limit
LEAVE = 3.0             # a client gone: its slot free within this (a poll per token does it in ms)
CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
MSGS = [{"role": "user", "content": "hi"}]
N_VOCAB = 1000          # the model's, from /v1/models, once the json group runs

VERBOSE = False
GROUP = "-"
FAILS = []
PASSES = 0
_print_lock = threading.Lock()


# ---------------------------------------------------------------- reporting

def show(data, limit=300):
    """The bytes as a Python literal, runs of one byte written <N x b'a'>."""
    if isinstance(data, str):
        data = data.encode()
    out, pos, size = [], 0, 0
    for m in re.finditer(rb"(.)\1{15,}", data, re.S):
        if m.start() > pos:
            out.append(repr(data[pos:m.start()]))
        out.append(f"<{m.end() - m.start()} x {data[m.start():m.start() + 1]!r}>")
        pos = m.end()
    if pos < len(data) or not out:
        out.append(repr(data[pos:]))
    text = " + ".join(out)
    if len(text) > limit:
        text = text[:limit] + f" ...({len(data)} bytes in all)"
    return text


def record(ok, name, detail=""):
    global PASSES
    with _print_lock:
        line = f"{'PASS' if ok else 'FAIL'} [{GROUP}] {name}"
        if detail and (not ok or VERBOSE):
            line += "\n       " + detail
        print(line, flush=True)
        if ok:
            PASSES += 1
        else:
            FAILS.append(f"[{GROUP}] {name}: {detail}")
    return ok


def note(name, detail):
    with _print_lock:
        print(f"NOTE [{GROUP}] {name}: {detail}", flush=True)


# ------------------------------------------------------------------- server

SANITIZER = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|ThreadSanitizer|"
                       r"UndefinedBehaviorSanitizer|Segmentation fault|stack-overflow|double free|"
                       r"free\(\): invalid|malloc\(\): |corrupted")


class Server:
    def __init__(self, binary, model, ctx, extra):
        self.binary, self.model, self.ctx, self.extra = binary, model, ctx, extra
        self.proc, self.port, self.log, self.scanned = None, None, [], 0
        self.lock = threading.Lock()

    def argv(self):
        return [self.binary, "serve", self.model, "--host", HOST, "--port", "0", "-np", str(SLOTS),
                "-c", str(self.ctx), "--timeout", str(IDLE), "--queue", str(QUEUE),
                "--max-body", str(MAX_BODY), "--metrics", "--api-key", KEY, *self.extra]

    def start(self, wait=90.0):
        """Start the server; None once it prints its address, else what went wrong."""
        with self.lock:
            self.log.append(f"--- start: {' '.join(self.argv())}")
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        ready, found = threading.Event(), {}

        def drain(proc):
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                with self.lock:
                    self.log.append(line)
                m = re.search(r"listening on http://(\[[^\]]*\]|[^\s:/]+):(\d+)", line)
                if m and "port" not in found:
                    found["port"] = int(m.group(2))
                    ready.set()
            ready.set()

        threading.Thread(target=drain, args=(self.proc,), daemon=True).start()
        ready.wait(wait)
        if "port" not in found:
            rc = self.proc.poll()
            if rc is None:
                self.proc.kill()
                self.proc.wait()
                return f"no 'listening on http://HOST:PORT' line within {wait:.0f} s"
            time.sleep(0.2)
            return f"exited with {rc} before listening"
        self.port = found["port"]
        return None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def tail(self, n=25):
        with self.lock:
            return "\n         | ".join([""] + self.log[-n:])

    def sanitizer_lines(self):
        with self.lock:
            new, self.scanned = self.log[self.scanned:], len(self.log)
        return [ln for ln in new if SANITIZER.search(ln)]

    def counts(self):
        """(threads, open descriptors) of the server process, from /proc."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                threads = int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))
            return threads, len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        except (OSError, AttributeError):
            return None


SRV = None


# ------------------------------------------------------------------- client

class Cut(Exception):
    """A read ended early: args[0] is 'timeout', 'eof', 'reset' or 'bad-chunk'."""


class Resp:
    """What came back: kind 'ok' (a whole response), 'partial' (a status line,
    then the body was cut), 'closed' / 'reset' (no reply byte before the peer
    closed), 'timeout' (nothing whole before the deadline: a hang), 'garbage'
    (bytes that are not an HTTP/1.x response), 'connect-failed'."""

    def __init__(self, kind, status=None, reason="", headers=None, body=b"", elapsed=0.0, detail=""):
        self.kind, self.status, self.reason = kind, status, reason
        self.headers, self.body, self.elapsed, self.detail = headers or {}, body, elapsed, detail

    def header(self, name):
        return self.headers.get(name.lower(), "")

    def json(self):
        return json.loads(self.body)

    def __str__(self):
        t = f"{self.elapsed:.2f} s"
        if self.kind == "ok":
            return f"HTTP {self.status} {self.reason} after {t}, body {show(self.body, 240)}"
        if self.kind == "partial":
            return f"HTTP {self.status} after {t}, body cut ({self.detail}) after {show(self.body, 160)}"
        if self.kind == "closed":
            return f"connection closed with no reply after {t}"
        if self.kind == "reset":
            return f"connection reset with no reply after {t}"
        if self.kind == "timeout":
            return f"no reply within {t} (hang){': got ' + show(self.body, 160) if self.body else ''}"
        if self.kind == "garbage":
            return f"not an HTTP/1.x response after {t}: {show(self.body, 200)}"
        return f"{self.kind} {self.detail}"


class Conn:
    def __init__(self, rcvbuf=None, timeout=5.0):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(timeout)
        s.connect((HOST, SRV.port))
        self.s, self.buf, self.pend = s, b"", b""

    def send(self, data):
        """Send all of data; the OSError if the server closed or stopped reading."""
        try:
            self.s.settimeout(10.0)
            self.s.sendall(data)
            return None
        except OSError as e:
            return e

    def send_watching(self, data, timeout=10.0):
        """Send data but stop at the first byte of a reply (a server may answer
        a huge request early and close): None when all is sent, else why not."""
        view, off, deadline = memoryview(data), 0, time.monotonic() + timeout
        self.s.setblocking(False)
        try:
            while off < len(data):
                if time.monotonic() > deadline:
                    return "timeout"
                r, w, _ = select.select([self.s], [self.s], [], 0.2)
                if r:
                    try:
                        got = self.s.recv(65536)
                    except BlockingIOError:
                        got = None
                    except OSError:
                        return "reset"
                    if got == b"":
                        return "eof"
                    if got:
                        self.buf += got
                        return "reply"
                if w:
                    try:
                        off += self.s.send(view[off:off + 65536])
                    except BlockingIOError:
                        pass
                    except OSError:
                        return "send-error"
            return None
        finally:
            self.s.setblocking(True)

    def shut_wr(self):
        try:
            self.s.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self, rst=False):
        try:
            if rst:
                self.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.s.close()
        except OSError:
            pass

    def readable(self, wait=0.0):
        return bool(self.buf) or bool(select.select([self.s], [], [], wait)[0])

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise Cut("timeout")
        self.s.settimeout(left)
        try:
            got = self.s.recv(65536)
        except socket.timeout:
            raise Cut("timeout")
        except OSError:
            raise Cut("reset")
        if not got:
            raise Cut("eof")
        self.buf += got

    def _line(self, deadline):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill(deadline)

    def _take(self, n, deadline):
        while len(self.buf) < n:
            self._fill(deadline)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_head(self, timeout=10.0):
        """The status line and headers of the next final (non-1xx) response."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        try:
            while True:
                while b"\r\n\r\n" not in self.buf:
                    if len(self.buf) >= 5 and not self.buf.startswith(b"HTTP/") or len(self.buf) > 1 << 20:
                        return Resp("garbage", body=self.buf, elapsed=time.monotonic() - t0)
                    self._fill(deadline)
                head, self.buf = self.buf.split(b"\r\n\r\n", 1)
                lines = head.split(b"\r\n")
                m = re.match(rb"HTTP/1\.[01] (\d{3})(?: (.*))?$", lines[0])
                if not m:
                    return Resp("garbage", body=head, elapsed=time.monotonic() - t0)
                status, headers = int(m.group(1)), {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(b":")
                    k, v = k.strip().decode("latin-1").lower(), v.strip().decode("latin-1")
                    headers[k] = headers[k] + ", " + v if k in headers else v
                if 100 <= status < 200:
                    continue
                return Resp("ok", status, (m.group(2) or b"").decode("latin-1"), headers,
                            elapsed=time.monotonic() - t0)
        except Cut as c:
            kind = {"eof": "closed", "reset": "reset"}.get(c.args[0], c.args[0])
            if self.buf:
                kind = "timeout" if kind == "timeout" else "garbage"
            return Resp(kind, body=self.buf, elapsed=time.monotonic() - t0)

    def pieces(self, r, deadline, head=False):
        """The body of response r as it arrives."""
        if head or r.status in (204, 304):
            return
        cl = r.header("content-length")
        if "chunked" in r.header("transfer-encoding").lower():
            while True:
                line = self._line(deadline)
                try:
                    n = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise Cut("bad-chunk")
                if n == 0:
                    while self._line(deadline):
                        pass
                    return
                data = self._take(n, deadline)
                if self._take(2, deadline) != b"\r\n":   # before the yield: a reader may stop after any piece
                    raise Cut("bad-chunk")
                yield data
        elif cl:
            if not cl.isdigit():
                raise Cut(f"bad Content-Length {cl!r}")
            yield self._take(int(cl), deadline)
        else:
            while True:
                if self.buf:
                    out, self.buf = self.buf, b""
                    yield out
                try:
                    self._fill(deadline)
                except Cut as c:
                    if c.args[0] == "eof":
                        return
                    raise

    def read_response(self, timeout=10.0, head=False):
        t0 = time.monotonic()
        r = self.read_head(timeout)
        if r.kind != "ok":
            return r
        body = []
        try:
            for p in self.pieces(r, t0 + timeout, head):
                body.append(p)
        except Cut as c:
            r.kind, r.detail = ("timeout" if c.args[0] == "timeout" else "partial"), c.args[0]
        r.body, r.elapsed = b"".join(body), time.monotonic() - t0
        return r

    def events(self, r, deadline):
        """The data: payloads of an SSE body, as they come (bytes). A reader
        may stop and call again: a partial event waits in self.pend."""
        def split():
            self.pend = self.pend.replace(b"\r\n", b"\n")
            while b"\n\n" in self.pend:
                ev, self.pend = self.pend.split(b"\n\n", 1)
                data = [ln[5:].lstrip(b" ") for ln in ev.split(b"\n") if ln.startswith(b"data:")]
                if data:
                    yield b"\n".join(data)
        yield from split()
        for p in self.pieces(r, deadline):
            self.pend += p
            yield from split()


def req(method, path, body=None, headers=(), auth=True, version="HTTP/1.1"):
    """The bytes of a request; body a dict/list (sent as JSON), str or bytes."""
    h = [f"Host: {HOST}:{SRV.port}"]
    if auth:
        h.append(f"Authorization: Bearer {KEY}")
    if body is not None:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        h += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    h += list(headers)
    return (f"{method} {path} {version}\r\n" + "".join(x + "\r\n" for x in h) + "\r\n").encode() + (body or b"")


def exchange(data, timeout=10.0, head=False, rcvbuf=None):
    """Send data on a new connection and read one response."""
    t0 = time.monotonic()
    try:
        c = Conn(rcvbuf)
    except OSError as e:
        return Resp("connect-failed", detail=str(e), elapsed=time.monotonic() - t0)
    try:
        err = c.send(data)
        r = c.read_response(timeout, head)
        if err and r.kind in ("closed", "reset"):
            r.detail = f"send: {err}"
        return r
    finally:
        c.close()


def get(path, timeout=10.0, auth=True):
    return exchange(req("GET", path, auth=auth), timeout)


def post(path, body, timeout=10.0, auth=True, headers=()):
    return exchange(req("POST", path, body, headers, auth), timeout)


def error_problem(r, field=None):
    """None if r carries OpenAI's error shape (naming field, if given), else what is wrong."""
    if "application/json" not in r.header("content-type"):
        return f"Content-Type {r.header('content-type')!r}, not application/json"
    try:
        j = json.loads(r.body)
    except ValueError:
        return "the body is not JSON"
    e = j.get("error") if isinstance(j, dict) else None
    if not isinstance(e, dict):
        return "no \"error\" object"
    missing = [k for k in ("message", "type", "param", "code") if k not in e]
    if missing:
        return f"\"error\" lacks {missing}"
    if not isinstance(e["message"], str) or not e["message"]:
        return "error.message is not a non-empty string"
    if not isinstance(e["type"], str) or not e["type"]:
        return "error.type is not a non-empty string"
    if field:
        word = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(field) + r"(?![A-Za-z0-9_])")
        if not word.search(str(e.get("param") or "")) and not word.search(e["message"]):
            return f"neither error.param ({e.get('param')!r}) nor error.message names '{field}'"
    return None


def refused(r, extra=(), close_ok=True, also=()):
    """A 4xx (or a status in extra/also), or, with close_ok, a close without a reply."""
    if r.kind in ("ok", "partial"):
        return 400 <= r.status < 500 or r.status in extra or r.status in also
    return close_ok and r.kind in ("closed", "reset")


def raw_case(name, data, extra=(), close_ok=True, also=(), timeout=8.0, watch=False, shut=False, head=False):
    """One request on its own connection; passes if it is refused (see refused)."""
    t0 = time.monotonic()
    try:
        c = Conn()
    except OSError as e:
        return record(False, name, f"connect failed: {e} (server alive: {SRV.alive()})")
    try:
        how = c.send_watching(data, timeout) if watch else c.send(data)
        if shut:
            c.shut_wr()
        r = c.read_response(max(0.5, timeout - (time.monotonic() - t0)), head)
    finally:
        c.close()
    sent = f"sent {show(data)}{' then half-closed' if shut else ''}"
    if watch and how:
        sent += f" (sending stopped: {how})"
    ok = refused(r, extra, close_ok, also)
    if r.kind == "ok" and r.body.startswith(b"HTTP/1."):
        note(name, "the reply's status line and headers came twice (libmicrohttpd 0.9.75 does this for a bad "
             f"Content-Length): {show(r.body, 120)}")
    if not ok and not SRV.alive():
        sent += f"; the server died (exit {SRV.proc.poll()})"
    return record(ok, name, f"{sent} -> {r}")


def parallel(funcs):
    ts = [threading.Thread(target=f, daemon=True) for f in funcs]
    for t in ts:
        t.start()
    return ts


# --------------------------------------------------------------------- slots

def slots_busy():
    """The ids of busy slots from GET /slots, or a string saying why unknown."""
    r = get("/slots", 5.0)
    if r.kind != "ok" or r.status != 200:
        return f"GET /slots -> {r}"
    try:
        j = r.json()
    except ValueError:
        return f"GET /slots: not JSON: {show(r.body)}"
    if isinstance(j, dict):
        j = j.get("slots", j)
    if not isinstance(j, list):
        return f"GET /slots: not a list: {show(r.body)}"
    busy = []
    for i, s in enumerate(j):
        if not isinstance(s, dict):
            return f"GET /slots: slot {i} not an object"
        if "is_processing" in s:
            b = bool(s["is_processing"])
        elif "state" in s:
            b = s["state"] not in (0, "idle", "IDLE")
        elif "busy" in s:
            b = bool(s["busy"])
        else:
            return f"GET /slots: slot {i} has no is_processing/state: {show(json.dumps(s))}"
        if b:
            busy.append(s.get("id", i))
    return busy


def wait_idle(bound):
    """Seconds until no slot is busy, or None (with the last answer) past bound."""
    t0 = time.monotonic()
    while True:
        b = slots_busy()
        if b == []:
            return time.monotonic() - t0, b
        if time.monotonic() - t0 > bound:
            return None, b
        time.sleep(0.2)


def metrics_total():
    r = get("/metrics", 5.0)
    if r.kind != "ok" or r.status != 200:
        return None, f"GET /metrics -> {r}"
    vals = re.findall(rb"^fucina_requests_total(?:\{[^}]*\})?\s+([0-9.eE+-]+)", r.body, re.M)
    if not vals:
        return None, f"GET /metrics has no fucina_requests_total: {show(r.body)}"
    return sum(float(v) for v in vals), ""


def check_server(after):
    """After a group: alive, /health 200 within a few seconds, no sanitizer
    report, no slot left busy. A dead or hung server is restarted."""
    global GROUP
    GROUP = after
    san = SRV.sanitizer_lines()
    record(not san, "no sanitizer report in the server's output", "\n         | ".join([""] + san[:20]))
    if not SRV.alive():
        record(False, "server alive", f"exited with {SRV.proc.poll()}; its last output:{SRV.tail()}")
        restart()
        return
    t0 = time.monotonic()
    r = get("/health", 5.0)
    ok = r.kind == "ok" and r.status == 200
    record(ok, "alive; GET /health 200 within 5 s", f"GET /health -> {r}; server output:{SRV.tail(10)}")
    if not ok:
        restart()
        return
    dt, b = wait_idle(6.0)
    record(dt is not None, "no slot left busy", f"after 6 s /slots still says {b}")
    if dt is None and wait_idle(30.0)[0] is None:    # let the next group start on free slots
        note("slots", "still busy after 36 s")
    if VERBOSE:
        note("health", f"{time.monotonic() - t0:.2f} s")


def restart():
    if SRV.alive():
        SRV.proc.kill()
        SRV.proc.wait()
    err = SRV.start()
    if err:
        record(False, "server restart", f"{err}; output:{SRV.tail()}")
        finish()
    note("restart", f"server started again on port {SRV.port}")


# ------------------------------------------------------------- request line

def g_request_line():
    H = f"Host: {HOST}\r\n".encode()
    A = f"Authorization: Bearer {KEY}\r\n".encode()
    G = b"GET /health HTTP/1.1\r\n" + H
    cases = [
        ("TLS ClientHello bytes", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(32)) + b"\r\n\r\n", {}),
        ("garbage request line", b"hello there, server\r\n\r\n", {}),
        ("binary garbage", bytes(range(256)) * 4 + b"\r\n\r\n", {}),
        ("request line without a version", b"GET /health\r\n\r\n", {}),
        ("request line with four parts", b"GET /health HTTP/1.1 extra\r\n" + H + b"\r\n", {}),
        ("HTTP/9.9", b"GET /health HTTP/9.9\r\n" + H + b"\r\n", dict(extra=(505,))),
        ("HTTP/1.1x", b"GET /health HTTP/1.1x\r\n" + H + b"\r\n", dict(extra=(505,))),
        ("version HTTP/", b"GET /health HTTP/\r\n" + H + b"\r\n", dict(extra=(505,))),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", dict(extra=(505,))),
        ("method FOO", b"FOO /health HTTP/1.1\r\n" + H + b"\r\n", dict(extra=(501,))),
        ("method FOO on a POST endpoint", b"FOO /v1/completions HTTP/1.1\r\n" + H + A + b"\r\n", dict(extra=(501,))),
        ("method with control bytes", b"G\x01\x7fT /health HTTP/1.1\r\n" + H + b"\r\n", dict(extra=(501,))),
        ("10 KB method", b"X" * 10000 + b" /health HTTP/1.1\r\n" + H + b"\r\n", dict(extra=(501,))),
        ("lowercase method", b"get /health HTTP/1.1\r\n" + H + b"\r\n", dict(extra=(501,))),
        ("NUL in the path", b"GET /he\x00alth HTTP/1.1\r\n" + H + b"\r\n", {}),
        ("NUL in the method", b"GE\x00T /health HTTP/1.1\r\n" + H + b"\r\n", dict(extra=(501,))),
        ("NUL in the version", b"GET /health HTTP/1.\x001\r\n" + H + b"\r\n", dict(extra=(505,))),
        ("NUL in a header name", G + b"X-\x00A: b\r\n\r\n", {}),
        # RFC 9110 5.5: reject, or replace NUL with SP and go on
        ("NUL in a header value", G + b"X-A: a\x00b\r\n\r\n", dict(also=(200,))),
        ("path traversal", b"GET /../../../../etc/passwd HTTP/1.1\r\n" + H + A + b"\r\n", {}),
        ("100 KB URI", b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n" + H + b"\r\n", dict(watch=True)),
        ("header line without a colon", G + b"NoColonHere\r\n\r\n", {}),
        ("space before a header's colon", b"GET /health HTTP/1.1\r\nHost : x\r\n\r\n", {}),
        # RFC 9112 5.2: reject obs-fold, or replace it with SP
        ("obs-fold continuation line", G + b"X-A: a\r\n  b\r\n\r\n", dict(also=(200,))),
        # RFC 9112 2.2: a recipient may take a bare LF as the line end
        ("bare LF line ends", b"GET /health HTTP/1.1\nHost: x\n\n", dict(also=(200,))),
        ("1 MB header value", G + b"X-Big: " + b"a" * (1 << 20) + b"\r\n\r\n", dict(watch=True)),
        ("1 MB header name", G + b"X" * (1 << 20) + b": v\r\n\r\n", dict(watch=True)),
        ("20000 headers", G + b"".join(b"X-H%d: v\r\n" % i for i in range(20000)) + b"\r\n", dict(watch=True)),
        ("absurd Host", b"GET /health HTTP/1.1\r\nHost: " + b"\xff" * 300 + b"\r\n\r\n", dict(also=(200,))),
    ]
    for name, data, kw in cases:
        raw_case(name, data, **kw)
        if not SRV.alive():
            return

    # libmicrohttpd 0.9.75 ends the header block at a line that starts with
    # ':' and reads what follows as the next request (a 400 there); the
    # server never sees the line, so it cannot refuse it. Noted, not failed:
    # a proxy in front (nginx's ignore_invalid_headers) drops such lines.
    r = exchange(G + b": value\r\n\r\n")
    note("header with an empty name", f"libmicrohttpd ends the headers at it -> {r}")
    if not SRV.alive():
        record(False, "alive after a header with an empty name", "the server died")
        return

    # positive controls: these must work, or the refusals above prove nothing
    r = exchange(G + b"".join(b"X-H%d: v\r\n" % i for i in range(100)) + b"\r\n")
    record(r.kind == "ok" and r.status == 200, "100 small headers: 200", f"-> {r}")
    r = exchange(b"GET http://%s:%d/health HTTP/1.1\r\n" % (HOST.encode(), SRV.port) + H + b"\r\n")
    record(refused(r, close_ok=False, also=(200,)), "absolute-form URI: 200 or 4xx", f"-> {r}")
    r = exchange(b"HEAD /health HTTP/1.1\r\n" + H + b"\r\n", head=True)
    record(refused(r, close_ok=False, also=(200,)), "HEAD /health: 200 or 4xx, no hang", f"-> {r}")
    r = exchange(b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n")
    record(refused(r, extra=(501,), also=(200, 204)), "OPTIONS *: 2xx, 4xx or 501", f"-> {r}")
    r = exchange(b"GET /health HTTP/1.0\r\n\r\n")
    record(r.kind == "ok" and r.status == 200, "HTTP/1.0 without Host: 200", f"-> {r}")

    # three pipelined requests on one connection: three answers in order
    data = (G + b"\r\n") * 3
    try:
        c = Conn()
        c.send(data)
        rs = [c.read_response(8.0) for _ in range(3)]
        c.close()
        ok = all(r.kind == "ok" and r.status == 200 for r in rs)
        record(ok, "3 pipelined GET /health: three 200s", f"sent {show(data)} -> " + " | ".join(map(str, rs)))
    except OSError as e:
        record(False, "3 pipelined GET /health: three 200s", f"connect: {e}")

    # an error does not poison a keep-alive connection
    try:
        c = Conn()
        c.send(req("GET", "/no/such/path"))
        r1 = c.read_response(8.0)
        r2 = Resp("skipped")
        if r1.kind == "ok" and "close" not in r1.header("connection").lower():
            c.send(req("GET", "/health"))
            r2 = c.read_response(8.0)
        c.close()
        ok = r1.kind == "ok" and r1.status == 404 and (r2.kind == "skipped" or r2.status == 200)
        record(ok, "404 then GET /health on the same connection", f"-> {r1} then {r2}")
    except OSError as e:
        record(False, "404 then GET /health on the same connection", f"connect: {e}")


# -------------------------------------------------------------------- bodies

TOK = b'{"content":"hello"}'


def g_bodies():
    P = (f"POST /tokenize HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {KEY}\r\n"
         f"Content-Type: application/json\r\n").encode()

    r = exchange(P + b"Content-Length: %d\r\n\r\n" % len(TOK) + TOK)
    ok = r.kind == "ok" and r.status == 200 and isinstance(_json(r.body, {}).get("tokens"), list)
    record(ok, "POST /tokenize with Content-Length: 200 with tokens", f"-> {r}")
    chunked = P + b"Transfer-Encoding: chunked\r\n\r\n8\r\n" + TOK[:8] + b"\r\nb;ext=1\r\n" + TOK[8:] + b"\r\n0\r\n\r\n"
    r = exchange(chunked)
    ok = r.kind == "ok" and r.status == 200 and isinstance(_json(r.body, {}).get("tokens"), list)
    record(ok, "POST /tokenize chunked (with a chunk extension): 200 with tokens", f"sent {show(chunked)} -> {r}")

    short = P + b"Content-Length: 100\r\n\r\n" + TOK
    cases = [
        ("Content-Length 100, 19 bytes sent, then half-close", short, dict(shut=True)),
        ("Content-Length -1", P + b"Content-Length: -1\r\n\r\n" + TOK, {}),
        ("Content-Length abc", P + b"Content-Length: abc\r\n\r\n" + TOK, {}),
        ("Content-Length 1e3", P + b"Content-Length: 1e3\r\n\r\n" + TOK, {}),
        ("Content-Length 0x13", P + b"Content-Length: 0x13\r\n\r\n" + TOK, {}),
        ("Content-Length 2^64", P + b"Content-Length: 18446744073709551616\r\n\r\n" + TOK, {}),
        ("Content-Length 10^30", P + b"Content-Length: 1" + b"0" * 30 + b"\r\n\r\n" + TOK, {}),
        ("empty Content-Length", P + b"Content-Length: \r\n\r\n" + TOK, {}),
        ("two different Content-Lengths", P + b"Content-Length: 19\r\nContent-Length: 5\r\n\r\n" + TOK, {}),
        # RFC 9112 6.1: Transfer-Encoding overrides Content-Length (or reject)
        ("Content-Length and chunked", P + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n13\r\n" + TOK
         + b"\r\n0\r\n\r\n", dict(also=(200,))),
        ("chunk size zz", P + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + TOK + b"\r\n0\r\n\r\n", {}),
        ("chunk size -5", P + b"Transfer-Encoding: chunked\r\n\r\n-5\r\n" + TOK + b"\r\n0\r\n\r\n", {}),
        ("chunk size 0x13", P + b"Transfer-Encoding: chunked\r\n\r\n0x13\r\n" + TOK + b"\r\n0\r\n\r\n", {}),
        ("chunk size 2^76", P + b"Transfer-Encoding: chunked\r\n\r\n" + b"f" * 19 + b"\r\n" + TOK + b"\r\n0\r\n\r\n", {}),
        ("chunk size empty", P + b"Transfer-Encoding: chunked\r\n\r\n\r\n" + TOK + b"\r\n0\r\n\r\n", {}),
        ("chunk data without its CRLF", P + b"Transfer-Encoding: chunked\r\n\r\n13\r\n" + TOK + b"XX0\r\n\r\n", {}),
        ("chunked body cut mid-chunk, then half-close", P + b"Transfer-Encoding: chunked\r\n\r\n13\r\n" + TOK[:7],
         dict(shut=True)),
        ("chunked body without its last chunk, then half-close", P + b"Transfer-Encoding: chunked\r\n\r\n13\r\n"
         + TOK + b"\r\n", dict(shut=True)),
    ]
    for name, data, kw in cases:
        raw_case(name, data, **kw)
        if not SRV.alive():
            return

    # exactly --max-body bytes (JSON padded with spaces): accepted
    body = TOK + b" " * (MAX_BODY - len(TOK))
    r = exchange(P + b"Content-Length: %d\r\n\r\n" % len(body) + body, 15.0)
    record(r.kind == "ok" and r.status == 200, f"body of exactly --max-body ({MAX_BODY}) bytes: 200",
           f"sent {show(P)} + Content-Length: {len(body)} + {show(body, 80)} -> {r}")

    def expect_413(name, head, body, chunk=None):
        t0 = time.monotonic()
        try:
            c = Conn()
        except OSError as e:
            return record(False, name, f"connect: {e}")
        c.send(head)
        # a server may answer 413 from the headers alone: give it a moment
        how = None
        if not c.readable(0.5):
            how = c.send_watching(body if chunk is None else chunk, 10.0)
        r = c.read_response(10.0)
        r2 = Resp("skipped")
        if r.kind == "ok" and "close" not in r.header("connection").lower():
            # the connection is kept: the unread body must not be parsed as a request
            c.send(req("GET", "/health"))
            r2 = c.read_response(6.0)
        c.close()
        ok = r.kind in ("ok", "partial") and r.status == 413 and (r2.kind in ("skipped", "closed", "reset")
                                                                   or r2.status == 200)
        detail = f"sent {show(head)} + {len(body) if chunk is None else len(chunk)} body bytes"
        detail += f" (sending stopped: {how})" if how else ""
        detail += f" -> {r}"
        if r2.kind != "skipped":
            detail += f"; then GET /health on the kept connection -> {r2}"
        record(ok and r.elapsed < 10, name, detail + f" [{time.monotonic() - t0:.1f} s]")
        if ok and r.kind == "ok":
            p = error_problem(r)
            record(p is None, name + ": OpenAI error shape", f"{p}: {r}")

    big = TOK + b" " * (MAX_BODY + 1 - len(TOK))
    expect_413(f"Content-Length {len(big)} (max-body + 1): 413", P + b"Content-Length: %d\r\n\r\n" % len(big), big)
    chunks = b"".join(b"4000\r\n" + b" " * 0x4000 + b"\r\n" for _ in range(MAX_BODY // 0x4000 + 2)) + b"0\r\n\r\n"
    expect_413("chunked body over max-body: 413", P + b"Transfer-Encoding: chunked\r\n\r\n", big, chunks)
    expect_413("Content-Length 10^12, nothing sent: 413 promptly", P + b"Content-Length: 1000000000000\r\n\r\n",
               b"", b"")
    try:
        c = Conn()
        head = P + b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(big)
        c.send(head)
        r = c.read_response(6.0)
        c.close()
        record(r.kind in ("ok", "partial") and r.status in (413, 417),
               "Expect: 100-continue over max-body: 413 (or 417), no 100", f"sent {show(head)} -> {r}")
    except OSError as e:
        record(False, "Expect: 100-continue over max-body", f"connect: {e}")
    try:
        c = Conn()
        head = P + b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(TOK)
        c.send(head)
        got100 = c.readable(2.0)
        c.send(TOK)
        r = c.read_response(8.0)
        c.close()
        record(r.kind == "ok" and r.status == 200, "Expect: 100-continue, small body: 200",
               f"sent {show(head)}, {'a reply' if got100 else 'nothing'} within 2 s, then {show(TOK)} -> {r}")
    except OSError as e:
        record(False, "Expect: 100-continue, small body", f"connect: {e}")

    # a body on a GET is read past, not taken as the next request
    try:
        c = Conn()
        data = req("GET", "/health", b"GET /x HTTP/1.1\r\n\r\n") + req("GET", "/health")
        c.send(data)
        r1, r2 = c.read_response(8.0), c.read_response(8.0)
        c.close()
        ok = r1.kind == "ok" and r1.status in (200, 400, 405, 413) and (
            r2.kind in ("closed", "reset") or (r2.kind == "ok" and r2.status == 200))
        record(ok, "GET with a body that looks like a request, then GET /health",
               f"sent {show(data)} -> {r1} then {r2}")
    except OSError as e:
        record(False, "GET with a body", f"connect: {e}")


def _json(b, default=None):
    try:
        return json.loads(b)
    except ValueError:
        return default


# ---------------------------------------------------------------------- JSON

def chat(**kw):
    d = {"messages": MSGS, "max_tokens": 1}
    d.update(kw)
    return json.dumps(d).encode()


def comp(**kw):
    d = {"prompt": "hi", "max_tokens": 1}
    d.update(kw)
    return json.dumps(d).encode()


def g_json():
    global N_VOCAB
    meta = (_json(get("/v1/models").body, {}) or {}).get("data", [{}])
    N_VOCAB = int(((meta[0] if meta else {}).get("meta") or {}).get("n_vocab") or 1000)
    valid = chat()
    V = valid[:-1]              # the object without its closing brace
    str_in = lambda s: b'{"messages":[{"role":"user","content":"' + s + b'"}],"max_tokens":1}'  # noqa: E731
    cases = [  # (path, name, body, field or None, "400" | "any" (200 or 4xx))
        (CHAT, "empty body", b"", None, "400"),
        (CHAT, "truncated object", b'{"messages":[{"role":"user","content":"hi"', None, "400"),
        (CHAT, "truncated in a string", b'{"messages":[{"role":"user","content":"hi', None, "400"),
        (CHAT, "truncated after a colon", b'{"messages":', None, "400"),
        (CHAT, "truncated in a number", b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":1', None, "400"),
        (CHAT, "truncated in an escape", b'{"messages":[{"role":"user","content":"\\u12', None, "400"),
        (CHAT, "trailing garbage", valid + b" xyz", None, "400"),
        (CHAT, "two objects", valid + valid, None, "400"),
        (CHAT, "single quotes", b"{'messages':[{'role':'user','content':'hi'}]}", None, "400"),
        (CHAT, "trailing comma", b'{"messages":[{"role":"user","content":"hi"},],"max_tokens":1}', None, "400"),
        (CHAT, "NaN literal", V + b',"temperature":NaN}', None, "400"),
        (CHAT, "Infinity literal", V + b',"temperature":Infinity}', None, "400"),
        (CHAT, "leading zero number", V + b',"seed":0123}', None, "400"),
        (CHAT, "bare minus", V + b',"seed":-}', None, "400"),
        (CHAT, "100000 '['", b"[" * 100000, None, "400"),
        (CHAT, "100000 '{\"a\":'", b'{"a":' * 20000, None, "400"),
        (CHAT, "50000 '[' closed (valid, not an object)", b"[" * 50000 + b"]" * 50000, None, "400"),
        (CHAT, "20000 nested objects, closed", b'{"a":' * 20000 + b"1" + b"}" * 20000, None, "400"),
        (CHAT, "content nested 40000 deep", b'{"messages":[{"role":"user","content":' + b"[" * 40000
         + b"]" * 40000 + b"}]}", None, "400"),
        (CHAT, "top level []", b"[]", None, "400"),
        (CHAT, "top level string", b'"hi"', None, "400"),
        (CHAT, "top level number", b"42", None, "400"),
        (CHAT, "top level null", b"null", None, "400"),
        (CHAT, "{}", b"{}", "messages", "400"),
        (CHAT, "max_tokens 1e100", chat(max_tokens=1e100), "max_tokens", "400"),
        (CHAT, "max_tokens 10^30", V[:V.rindex(b"1")] + b"1" + b"0" * 30 + b"}", "max_tokens", "400"),
        (CHAT, "max_tokens -1", chat(max_tokens=-1), "max_tokens", "400"),
        (CHAT, "max_tokens 1.5", chat(max_tokens=1.5), "max_tokens", "400"),
        (CHAT, "max_tokens \"10\"", chat(max_tokens="10"), "max_tokens", "400"),
        (CHAT, "max_tokens true", chat(max_tokens=True), "max_tokens", "400"),
        (CHAT, "max_tokens [1]", chat(max_tokens=[1]), "max_tokens", "400"),
        (CHAT, "temperature 1e400", V + b',"temperature":1e400}', "temperature", "400"),
        (CHAT, "temperature \"hot\"", chat(temperature="hot"), "temperature", "400"),
        (CHAT, "temperature {}", chat(temperature={}), "temperature", "400"),
        (CHAT, "top_p \"x\"", chat(top_p="x"), "top_p", "400"),
        (CHAT, "seed \"abc\"", chat(seed="abc"), "seed", "400"),
        (CHAT, "presence_penalty \"x\"", chat(presence_penalty="x"), "presence_penalty", "400"),
        (CHAT, "frequency_penalty \"x\"", chat(frequency_penalty="x"), "frequency_penalty", "400"),
        (CHAT, "n \"two\"", chat(n="two"), "n", "400"),
        (CHAT, "model 42", chat(model=42), "model", "400"),
        (CHAT, "stream \"yes\"", chat(stream="yes"), "stream", "400"),
        (CHAT, "stream 1", chat(stream=1), "stream", "400"),
        (CHAT, "stop with 5 strings", chat(stop=["a", "b", "c", "d", "e"]), "stop", "400"),
        (CHAT, "stop 5", chat(stop=5), "stop", "400"),
        (CHAT, "stop [1, 2]", chat(stop=[1, 2]), "stop", "400"),
        (CHAT, "stop {}", chat(stop={"a": 1}), "stop", "400"),
        (CHAT, "logit_bias \"x\"", chat(logit_bias="x"), "logit_bias", "400"),
        (CHAT, "messages \"hi\"", chat(messages="hi"), "messages", "400"),
        (CHAT, "messages {}", chat(messages={}), "messages", "400"),
        (CHAT, "messages null", chat(messages=None), "messages", "400"),
        (CHAT, "messages 42", chat(messages=42), "messages", "400"),
        (CHAT, "messages []", chat(messages=[]), "messages", "400"),
        (CHAT, "messages [\"hi\"]", chat(messages=["hi"]), "messages", "400"),
        (CHAT, "messages [null]", chat(messages=[None]), "messages", "400"),
        (CHAT, "messages [[]]", chat(messages=[[]]), "messages", "400"),
        (CHAT, "message without role", chat(messages=[{"content": "hi"}]), "role", "400"),
        (CHAT, "role 5", chat(messages=[{"role": 5, "content": "hi"}]), "role", "400"),
        (CHAT, "role \"wizard\"", chat(messages=[{"role": "wizard", "content": "hi"}]), "role", "400"),
        (CHAT, "role \"\"", chat(messages=[{"role": "", "content": "hi"}]), "role", "400"),
        (CHAT, "user message without content", chat(messages=[{"role": "user"}]), "content", "400"),
        (CHAT, "content 42", chat(messages=[{"role": "user", "content": 42}]), "content", "400"),
        (CHAT, "content true", chat(messages=[{"role": "user", "content": True}]), "content", "400"),
        (CHAT, "content {}", chat(messages=[{"role": "user", "content": {"a": 1}}]), "content", "400"),
        (CHAT, "content part text 5", chat(messages=[{"role": "user", "content": [{"type": "text", "text": 5}]}]),
         None, "400"),
        (CHAT, "duplicate key messages", b'{"messages":[{"role":"user","content":"hi"}],"messages":'
         b'[{"role":"user","content":"ho"}],"max_tokens":1}', "messages", "400"),
        (CHAT, "duplicate key max_tokens", V + b',"max_tokens":2}', "max_tokens", "400"),
        (CHAT, "invalid UTF-8 \\xff\\xfe", str_in(b"\xff\xfe"), None, "400"),
        (CHAT, "overlong UTF-8 \\xc0\\xaf", str_in(b"\xc0\xaf"), None, "400"),
        (CHAT, "cut UTF-8 \\xe2\\x82", str_in(b"\xe2\x82"), None, "400"),
        (CHAT, "UTF-8 surrogate \\xed\\xa0\\x80", str_in(b"\xed\xa0\x80"), None, "400"),
        (CHAT, "UTF-8 past U+10FFFF", str_in(b"\xf4\x90\x80\x80"), None, "400"),
        (CHAT, "invalid UTF-8 in a key", b'{"mess\xffages":[]}', None, "400"),
        (CHAT, "lone surrogate \\ud800", str_in(b"\\ud800"), None, "400"),
        (CHAT, "lone surrogate \\udc00", str_in(b"\\udc00"), None, "400"),
        (CHAT, "\\ud800 then \\u0041", str_in(b"\\ud800\\u0041"), None, "400"),
        (CHAT, "\\ud800 at the string's end", str_in(b"abc\\ud800"), None, "400"),
        (CHAT, "bad escape \\x41", str_in(b"\\x41"), None, "400"),
        (CHAT, "short escape \\u12", str_in(b"\\u12"), None, "400"),
        (CHAT, "bad hex \\u12G4", str_in(b"\\u12G4"), None, "400"),
        (CHAT, "raw control byte in a string", str_in(b"a\x01b"), None, "400"),
        (CHAT, "raw newline in a string", str_in(b"a\nb"), None, "400"),
        (CHAT, "raw NUL in the body", b'{"messages\x00":[]}', None, "400"),
        # valid JSON at the edges: must not crash (200 or a 4xx)
        (CHAT, "\\u0000 in content", str_in(b"a\\u0000b"), None, "any"),
        (CHAT, "a surrogate pair \\ud83d\\ude00", str_in(b"\\ud83d\\ude00"), None, "any"),
        (CHAT, "100000-digit number in an unknown field", V + b',"x_big":' + b"9" * 100000 + b"}", None, "any"),
        (CHAT, "temperature 1e-400", V + b',"temperature":1e-400}', None, "any"),
        (CHAT, "empty content", chat(messages=[{"role": "user", "content": ""}]), None, "any"),
        (CHAT, "max_tokens 0", chat(max_tokens=0), None, "any"),
        (CHAT, "logit_bias for token 99999999", chat(logit_bias={"99999999": 5}), None, "any"),
        (CHAT, "logit_bias for token -1", chat(logit_bias={"-1": 5}), None, "any"),
        (CHAT, "stop [\"\"]", chat(stop=[""]), None, "any"),
        (CHAT, "content with an image part", chat(messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:,"}}]}]), None, "any"),
        (CHAT, "1000 messages", chat(messages=[{"role": "user", "content": "hi"}] * 1000), None, "any"),
        (COMP, "prompt of 60000 words (past the context)", comp(prompt="a " * 60000), None, "any"),
        (COMP, "empty prompt", comp(prompt=""), None, "any"),
        # sampler and option edges: clamp or refuse, never crash
        *[(COMP, f"{k} {v!r}", comp(max_tokens=2, **{k: v}), None, "any") for k, v in (
            ("top_k", 10 ** 9), ("top_k", -5), ("top_k", 0), ("top_p", 0), ("top_p", 1e-30), ("min_p", 2),
            ("min_p", -1), ("temperature", -1), ("temperature", 1e30), ("repeat_penalty", 0),
            ("repeat_penalty", -1), ("repeat_last_n", 10 ** 9), ("repeat_last_n", -5), ("presence_penalty", 1e308),
            ("frequency_penalty", -1e308), ("seed", -1), ("seed", 2 ** 64), ("logprobs", 100000), ("logprobs", -1),
            ("logit_bias", {"1": 1e308}), ("logit_bias", {"1": -1e308}), ("echo", True), ("suffix", "x"))],
        (COMP, "logprobs 5 at temperature 2 (byte pieces in JSON)", comp(max_tokens=40, logprobs=5, temperature=2,
                                                                          seed=3), None, "any"),
        (CHAT, "top_logprobs 20 at temperature 2", chat(max_tokens=40, logprobs=True, top_logprobs=20, temperature=2,
                                                        seed=3), None, "any"),
        (COMP, "logit_bias bans every token", comp(max_tokens=2, logit_bias={str(i): -100 for i in range(N_VOCAB)}),
         None, "any"),
        (COMP, "logit_bias key \"abc\"", comp(logit_bias={"abc": 1}), "logit_bias", "400"),
        (COMP, "logit_bias value \"x\"", comp(logit_bias={"1": "x"}), "logit_bias", "400"),
        (CHAT, "top_logprobs 100000", chat(max_tokens=2, logprobs=True, top_logprobs=100000), None, "any"),
        (CHAT, "top_logprobs -1", chat(logprobs=True, top_logprobs=-1), "top_logprobs", "400"),
        (CHAT, "logprobs \"x\"", chat(logprobs="x"), "logprobs", "400"),
        (CHAT, "stream_options.include_usage \"x\"", chat(stream=True, stream_options={"include_usage": "x"}),
         "include_usage", "400"),
        (CHAT, "max_completion_tokens -1", chat(max_completion_tokens=-1), "max_completion_tokens", "400"),
        (CHAT, "response_format json_schema", chat(response_format={"type": "json_schema"}), None, "any"),
        (CHAT, "tools", chat(tools=[{"type": "function", "function": {"name": "f"}}]), None, "any"),
        (CHAT, "tool message without content", chat(messages=MSGS + [{"role": "tool"}]), None, "any"),
        (CHAT, "assistant content null", chat(messages=[{"role": "assistant", "content": None}] + MSGS), None, "any"),
        (CHAT, "100 KB stop string", chat(stop=["x" * 100000]), None, "any"),
        # /v1/completions
        (COMP, "empty body", b"", None, "400"),
        (COMP, "truncated", b'{"prompt":"hi', None, "400"),
        (COMP, "trailing garbage", comp() + b"]", None, "400"),
        (COMP, "100000 '['", b"[" * 100000, None, "400"),
        (COMP, "{}", b"{}", "prompt", "400"),
        (COMP, "prompt 42", comp(prompt=42), "prompt", "400"),
        (COMP, "prompt null", comp(prompt=None), "prompt", "400"),
        (COMP, "prompt {}", comp(prompt={}), "prompt", "400"),
        (COMP, "prompt [true]", comp(prompt=[True]), "prompt", "400"),
        (COMP, "prompt [1.5]", comp(prompt=[1.5]), "prompt", "400"),
        (COMP, "prompt [[\"a\"]]", comp(prompt=[["a"]]), "prompt", "400"),
        (COMP, "prompt token -1", comp(prompt=[-1]), "prompt", "400"),
        (COMP, "prompt token 99999999", comp(prompt=[99999999]), "prompt", "400"),
        (COMP, "prompt token 2^31", comp(prompt=[2 ** 31]), "prompt", "400"),
        (COMP, "prompt token 2^64", comp(prompt=[2 ** 64]), "prompt", "400"),
        (COMP, "prompt [[99999999]]", comp(prompt=[[99999999]]), "prompt", "400"),
        (COMP, "invalid UTF-8 in prompt", b'{"prompt":"\xff\xfe","max_tokens":1}', None, "400"),
        (COMP, "lone surrogate in prompt", b'{"prompt":"\\ud800","max_tokens":1}', None, "400"),
        (COMP, "max_tokens -1", comp(max_tokens=-1), "max_tokens", "400"),
        (COMP, "max_tokens 1e100", comp(max_tokens=1e100), "max_tokens", "400"),
        (COMP, "max_tokens \"x\"", comp(max_tokens="x"), "max_tokens", "400"),
        (COMP, "temperature \"x\"", comp(temperature="x"), "temperature", "400"),
        (COMP, "top_p []", comp(top_p=[]), "top_p", "400"),
        (COMP, "stop with 5 strings", comp(stop=["a", "b", "c", "d", "e"]), "stop", "400"),
        (COMP, "stream \"yes\"", comp(stream="yes"), "stream", "400"),
        (COMP, "duplicate key prompt", b'{"prompt":"a","prompt":"b","max_tokens":1}', "prompt", "400"),
        # grammars, schemas and tools a client controls: refused or run, never a crash or a hang
        (CHAT, "grammar of 5000 nested parentheses", chat(grammar="root ::= " + "(" * 5000 + '"a"' + ")" * 5000),
         "grammar", "400"),
        (CHAT, "grammar (\"a\"?){0,100000}", chat(grammar='root ::= ("a"?){0,100000}', max_tokens=4), None, "any"),
        (CHAT, "grammar of 20000 references", chat(grammar="root ::= " + "b " * 20000 + '\nb ::= "x"?',
                                                    max_tokens=2), None, "any"),
        (CHAT, "grammar with a left-recursive rule", chat(grammar='root ::= root "a" | "a"'), "grammar", "400"),
        (CHAT, "grammar (\"a\"?)*", chat(grammar='root ::= ("a"?)*'), "grammar", "400"),
        (CHAT, "json_schema 60 arrays deep", chat(json_schema=json.loads('{"type":"array","items":' * 60 + '{}' + '}' * 60)),
         None, "any"),
        (CHAT, "json_schema pattern of nested repeats", chat(json_schema={"type": "string",
                                                                          "pattern": "^((a?){0,10000}){0,10}$"},
                                                             max_tokens=3), None, "any"),
        (CHAT, "json_schema with 3000 properties", chat(json_schema={"type": "object", "properties": {
            f"p{i}": {"type": "integer"} for i in range(3000)}}, max_tokens=3), None, "any"),
        (CHAT, "json_schema multipleOf", chat(json_schema={"type": "integer", "multipleOf": 2}), "json_schema", "400"),
        (CHAT, "200 tools", chat(tools=[{"type": "function", "function": {"name": f"f{i}", "parameters": {
            "type": "object", "properties": {"x": {"type": "integer"}}}}} for i in range(200)],
            tool_choice="required", max_tokens=3), None, "any"),
        (CHAT, "tools with a duplicate name", chat(tools=[{"type": "function", "function": {"name": "f"}}] * 2),
         "tools", "400"),
        (CHAT, "tool_calls with arguments [1]", chat(messages=MSGS + [{"role": "assistant", "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]),
         "messages", "400"),
        ("/v1/responses", "input of 1000 items", json.dumps({"model": "m", "input": [
            {"role": "user", "content": "hi"}] * 1000}).encode(), "input", "400"),
        ("/v1/responses", "input item of type reasoning", json.dumps({"model": "m", "input": [
            {"type": "reasoning"}]}).encode(), "input[0]", "400"),
        ("/v1/responses", "text.format schema with if/then", json.dumps({"model": "m", "input": "x", "text": {
            "format": {"type": "json_schema", "name": "n", "schema": {"if": {}, "then": {}}}}}).encode(), None, "400"),
        ("/v1/responses", "function_call with 5 as arguments", json.dumps({"model": "m", "input": [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": 5}]}).encode(), "input[0]", "400"),
    ]
    for path, name, body, field, mode in cases:
        r = post(path, body, 20.0)
        label = f"{path} {name}"
        detail = f"POST {path} body {show(body, 200)} -> {r}"
        if mode == "any":
            ok = r.kind == "ok" and (r.status == 200 or 400 <= r.status < 500)
            if ok and r.status == 200:
                ok = isinstance(_json(r.body), dict)
                detail += " (a 200 whose body is not a JSON object)" if not ok else ""
            elif ok:
                p = error_problem(r)
                ok, detail = p is None, f"{p}: {detail}"
            record(ok, label + f": 200 or 4xx ({r.status})", detail)
        else:
            ok = r.kind == "ok" and r.status == 400
            if ok:
                p = error_problem(r, field)
                ok, detail = p is None, f"{p}: {detail}"
            record(ok, label + ": 400" + (f" naming '{field}'" if field else ""), detail)
        if not SRV.alive():
            record(False, label + ": server alive", f"the server died (exit {SRV.proc.poll()}) on {detail}")
            return
    # Anthropic's Messages API: 400s in its own error shape
    mcases = [
        ("no max_tokens", {"model": "m", "messages": MSGS}, "max_tokens"),
        ("an image block", {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {}}]}]}, "image"),
        ("tool_result in an assistant turn", {"model": "m", "max_tokens": 1, "messages": [{"role": "assistant",
            "content": [{"type": "tool_result", "tool_use_id": "x"}]}]}, "tool_result"),
        ("system 5", {"model": "m", "max_tokens": 1, "system": 5, "messages": MSGS}, "system"),
        ("5 stop sequences", {"model": "m", "max_tokens": 1, "messages": MSGS, "stop_sequences": list("abcde")},
         "stop_sequences"),
        ("an unknown field", {"model": "m", "max_tokens": 1, "messages": MSGS, "x_y": 1}, "x_y"),
        ("a grammar-breaking input_schema", {"model": "m", "max_tokens": 1, "messages": MSGS, "tools": [
            {"name": "f", "input_schema": {"type": "string", "format": "email"}}]}, "email"),
    ]
    for name, body, word in mcases:
        r = post("/v1/messages", json.dumps(body).encode(), 20.0)
        d = _json(r.body, {}) if r.kind == "ok" else {}
        err = d.get("error") if isinstance(d, dict) else None
        ok = (r.kind == "ok" and r.status == 400 and d.get("type") == "error" and isinstance(err, dict)
              and err.get("type") == "invalid_request_error" and word in str(err.get("message")))
        record(ok, f"/v1/messages {name}: 400 in Anthropic's shape naming '{word}'", f"-> {r}")
        if not SRV.alive():
            record(False, f"/v1/messages {name}: server alive", f"the server died (exit {SRV.proc.poll()})")
            return


# ----------------------------------------------------------------- endpoints

def g_endpoints():
    for path in ("/health", "/v1/models", "/props", "/slots"):
        r = get(path)
        ok = r.kind == "ok" and r.status == 200 and _json(r.body) is not None
        record(ok, f"GET {path}: 200 with JSON", f"-> {r}")
    r = get("/slots")
    n = len(_json(r.body, [])) if isinstance(_json(r.body), list) else None
    record(n == SLOTS, f"GET /slots lists {SLOTS} slots", f"-> {r}")
    r = get("/metrics")
    record(r.kind == "ok" and r.status == 200 and b"fucina_requests_total" in r.body,
           "GET /metrics: 200 with fucina_requests_total", f"-> {r}")
    r = get("/v1/models")
    d = _json(r.body, {})
    record(isinstance(d, dict) and d.get("object") == "list" and isinstance(d.get("data"), list),
           "GET /v1/models: {object: list, data: [...]}", f"-> {r}")
    for path, meth in (("/no/such/path", "GET"), ("/v1/no/such", "POST"), ("/v1/chat/completionsX", "POST")):
        r = exchange(req(meth, path, b"{}" if meth == "POST" else None))
        p = error_problem(r) if r.kind == "ok" else "no reply"
        record(r.kind == "ok" and r.status == 404 and p is None, f"{meth} {path}: 404 in the error shape",
               f"{p}: -> {r}")
    for path, meth in ((CHAT, "GET"), (COMP, "GET"), ("/tokenize", "GET"), ("/metrics", "POST"),
                       ("/health", "DELETE"), (CHAT, "PUT")):
        r = exchange(req(meth, path, b"{}" if meth in ("POST", "PUT") else None))
        record(r.kind == "ok" and r.status in (404, 405), f"{meth} {path}: 404 or 405", f"-> {r}")

    # /tokenize and /detokenize
    r = post("/tokenize", {"content": "hello world"})
    toks = _json(r.body, {}).get("tokens") if r.kind == "ok" else None
    record(isinstance(toks, list) and toks, "/tokenize 'hello world': tokens", f"-> {r}")
    if isinstance(toks, list) and toks and all(isinstance(t, int) for t in toks):
        r = post("/detokenize", {"tokens": toks})
        record(r.kind == "ok" and r.status == 200 and "hello world" in str(_json(r.body, {}).get("content")),
               "/detokenize gives 'hello world' back", f"-> {r}")
    r = post("/detokenize", {"tokens": []})
    record(r.kind == "ok" and r.status == 200, "/detokenize []: 200", f"-> {r}")
    text = "h\u00e9llo \u20ac \U0001d11e \u65e5\u672c <|im_start|>"
    r = post("/tokenize", {"content": text, "with_pieces": True})
    record(r.kind == "ok" and r.status == 200 and isinstance(_json(r.body), dict),
           "/tokenize with_pieces of multi-byte text: 200, valid UTF-8 JSON", f"-> {r}")
    # every token alone: byte tokens are pieces of UTF-8 sequences; the JSON
    # must stay valid UTF-8 all the same (one keep-alive connection)
    bad, n_vocab = [], int(((_json(get("/v1/models").body, {}) or {}).get("data") or [{}])[0].get("meta", {})
                           .get("n_vocab") or 0)
    try:
        c = Conn()
        for i in range(n_vocab):
            c.send(req("POST", "/detokenize", {"tokens": [i]}))
            r = c.read_response(5.0)
            if not (r.kind == "ok" and r.status in (200, 400) and isinstance(_json(r.body), dict)):
                bad.append(f"[{i}] -> {r}")
                if r.kind != "ok" or "close" in r.header("connection").lower():
                    c.close()
                    c = Conn()
        c.close()
    except OSError as e:
        bad.append(f"connect: {e}")
    record(n_vocab > 0 and not bad, f"/detokenize of each of the {n_vocab} tokens alone: 200 (or 400), valid "
           "UTF-8 JSON", "; ".join(bad[:4]))
    r = post("/detokenize", {"tokens": list(range(n_vocab))})
    record(r.kind == "ok" and r.status == 200 and isinstance(_json(r.body), dict),
           "/detokenize of the whole vocabulary at once: 200, valid UTF-8 JSON", f"-> {r}")
    for path, body, field in (
            ("/tokenize", b"{}", "content"), ("/tokenize", {"content": 5}, "content"),
            ("/tokenize", {"content": None}, "content"), ("/tokenize", b'{"content":"\xff"}', None),
            ("/tokenize", b'{"content":"\\ud800"}', None), ("/tokenize", b"[" * 100000, None),
            ("/tokenize", b'{"content":"hi"', None), ("/tokenize", {"content": "hi", "with_pieces": "x"}, "with_pieces"),
            ("/tokenize", {"content": "hi", "parse_special": 1}, "parse_special"),
            ("/detokenize", b"{}", "tokens"), ("/detokenize", {"tokens": "x"}, "tokens"),
            ("/detokenize", {"tokens": [-1]}, "tokens"), ("/detokenize", {"tokens": [99999999]}, "tokens"),
            ("/detokenize", {"tokens": [2 ** 31]}, "tokens"), ("/detokenize", {"tokens": [2 ** 64]}, "tokens"),
            ("/detokenize", {"tokens": [1.5]}, "tokens"), ("/detokenize", b'{"tokens":[1e100]}', "tokens"),
            ("/detokenize", {"tokens": ["a"]}, "tokens"), ("/detokenize", {"tokens": [[1]]}, "tokens")):
        r = post(path, body)
        p = error_problem(r, field) if r.kind == "ok" and r.status == 400 else "not a 400"
        shown = body if isinstance(body, bytes) else json.dumps(body).encode()
        record(p is None, f"{path} {show(shown, 60)}: 400" + (f" naming '{field}'" if field else ""),
               f"{p}: POST {path} {show(shown)} -> {r}")
        if not SRV.alive():
            return

    # --api-key
    body = comp()
    for name, hdrs in (("no Authorization", []), ("wrong key", ["Authorization: Bearer nope"]),
                       ("key plus a byte", [f"Authorization: Bearer {KEY}x"]),
                       ("key less a byte", [f"Authorization: Bearer {KEY[:-1]}"]),
                       ("Bearer without key", ["Authorization: Bearer"]),
                       ("Basic scheme", ["Authorization: Basic dXNlcjpwYXNz"]),
                       ("two Authorization headers, wrong first", ["Authorization: Bearer nope",
                                                                  f"Authorization: Bearer {KEY}"])):
        r = exchange(req("POST", COMP, body, hdrs, auth=False))
        p = error_problem(r) if r.kind == "ok" else "no reply"
        ok = r.kind == "ok" and r.status == 401 and p is None
        if name.startswith("two") and r.kind == "ok" and r.status == 400:
            ok = p is None
        record(ok, f"--api-key, {name}: 401 in the error shape", f"{p}: headers {hdrs} -> {r}")
    r = exchange(req("POST", COMP, body, ["Authorization: Bearer " + "k" * 20000], auth=False))
    record(refused(r), "--api-key, a 20 KB key: refused", f"-> {r}")
    r = get("/v1/models", auth=False)
    record(r.kind == "ok" and r.status in (200, 401), "GET /v1/models without a key: 200 or 401", f"-> {r}")


# --------------------------------------------------------------------- slow

def g_slow():
    """Slowloris plus requests held open mid-request: ordinary requests stay
    prompt meanwhile, and every held connection is closed by --timeout."""
    P = (f"POST /tokenize HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {KEY}\r\n"
         f"Content-Type: application/json\r\n").encode()
    held = [
        ("request line only", b"GET /health HTTP/1.1\r\n"),
        ("half a request line", b"GET /hea"),
        ("headers without their blank line", b"GET /health HTTP/1.1\r\nHost: x\r\n"),
        ("only CRLFs", b"\r\n\r\n\r\n"),
        ("CR line ends", b"GET /health HTTP/1.1\rHost: x\r\r"),
        ("Content-Length 100, 19 bytes sent", P + b"Content-Length: 100\r\n\r\n" + TOK),
        ("chunked, cut mid-chunk", P + b"Transfer-Encoding: chunked\r\n\r\n13\r\n" + TOK[:7]),
        ("chunked, no last chunk", P + b"Transfer-Encoding: chunked\r\n\r\n13\r\n" + TOK + b"\r\n"),
        ("chat POST, body cut", req("POST", CHAT, chat())[:-10]),
        ("nothing at all", b""),
        ("chunk shorter than its size", P + b"Transfer-Encoding: chunked\r\n\r\n20\r\n" + TOK + b"\r\n0\r\n\r\n"),
        ("Transfer-Encoding chunkedx", P + b"Transfer-Encoding: chunkedx\r\n\r\n13\r\n" + TOK + b"\r\n0\r\n\r\n"),
    ]
    bound = IDLE + SLACK + 2
    results = {}

    def hold(name, data):
        t0 = time.monotonic()
        try:
            c = Conn()
        except OSError as e:
            results[name] = (False, f"connect: {e}")
            return
        c.send(data)
        r = c.read_response(bound)
        c.close()
        ok = refused(r, extra=(501,))
        results[name] = (ok, f"sent {show(data)} and waited -> {r} [{time.monotonic() - t0:.1f} s]")

    trickle = b"GET /health HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\nX-Slow: " + b"s" * 200
    slow_state = {}

    def loris(i, seconds=4):
        try:
            c = Conn()
        except OSError as e:
            slow_state[i] = ("connect", str(e), 0.0)
            return
        t_last = time.monotonic()
        for k in range(seconds + 1):
            if c.send(trickle[k:k + 1]):
                slow_state[i] = ("closed while trickling", f"after {k} bytes", 0.0)
                c.close()
                return
            t_last = time.monotonic()
            time.sleep(1.0)
        r = c.read_response(bound)
        c.close()
        slow_state[i] = (r.kind, str(r), time.monotonic() - t_last)

    ts = parallel([lambda n=n, d=d: hold(n, d) for n, d in held] + [lambda i=i: loris(i) for i in range(20)])
    time.sleep(0.5)
    worst, bad = 0.0, []
    t_end = time.monotonic() + 4.0
    while time.monotonic() < t_end:
        for data in (req("GET", "/health"), req("POST", COMP, comp(max_tokens=2))):
            r = exchange(data, 5.0)
            worst = max(worst, r.elapsed)
            if r.kind != "ok" or r.status != 200 or r.elapsed > 3.0:
                bad.append(f"{show(data[:40])} -> {r}")
        time.sleep(0.2)
    record(not bad, "ordinary requests during slowloris: 200 within 3 s", f"worst {worst:.2f} s; " + "; ".join(bad[:4]))
    if VERBOSE:
        note("slowloris", f"slowest ordinary request {worst:.2f} s")
    for t in ts:
        t.join(bound + 8)
    for name, _ in held:
        ok, detail = results.get(name, (False, "no result (thread stuck)"))
        record(ok, f"held open: {name}: closed by --timeout", detail)
    closed = [i for i, s in slow_state.items() if s[0] in ("closed", "reset", "closed while trickling")
              or (s[0] == "ok" and s[1].startswith("HTTP 4"))]
    bad = [f"#{i}: {s[0]} {s[1]}" for i, s in sorted(slow_state.items()) if i not in closed]
    early = sum(1 for s in slow_state.values() if s[0] == "closed while trickling")
    record(len(closed) == 20, "20 slowloris connections: closed within --timeout + a few s of their last byte",
           "; ".join(bad[:5]) + f" ({len(slow_state)} reported)")
    if early:
        note("slowloris", f"{early} of 20 closed while still trickling (a header deadline)")


# --------------------------------------------------------------------- flood

def g_flood():
    base = SRV.counts()
    errors, t0 = [], time.monotonic()
    half_post = req("POST", COMP, comp(max_tokens=1))
    half_post = half_post[:len(half_post) - 12]
    for batch in range(10):
        conns = []
        for i in range(100):
            try:
                conns.append(Conn(timeout=5.0))
            except OSError as e:
                errors.append(f"connect #{batch * 100 + i}: {e}")
        for i, c in enumerate(conns):
            kind = i % 5
            if kind == 1:
                c.send(b"GET /health HTTP/1.1\r\nHost: x\r\nX-")
            elif kind == 2:
                c.send(half_post)
            elif kind == 3:
                c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            if kind == 3:
                c.close(rst=True)
            elif kind == 4:
                c.send(b"GET /health HTTP/1.1\r\n")
                c.shut_wr()
            else:
                c.close()
        for c in conns:
            c.close()
    record(not errors, "1000 connections opened and dropped: every connect accepted",
           f"{len(errors)} failed: " + "; ".join(errors[:3]))
    # 1000 requests on one keep-alive connection, pipelined 50 at a time
    got, bad = 0, []
    try:
        c = Conn()
        for _ in range(20):
            c.send(req("GET", "/health") * 50)
            for _ in range(50):
                r = c.read_response(5.0)
                if r.kind == "ok" and r.status == 200:
                    got += 1
                elif len(bad) < 3:
                    bad.append(str(r))
        c.close()
    except OSError as e:
        bad.append(str(e))
    record(got == 1000, "1000 pipelined GET /health on one connection: 1000 x 200", f"{got} x 200; {bad}")
    # 200 idle keep-alive connections held open: others are still served
    idle = []
    try:
        for _ in range(200):
            c = Conn()
            c.send(req("GET", "/health"))
            idle.append((c, c.read_response(5.0)))
    except OSError as e:
        errors.append(f"idle connection #{len(idle)}: {e}")
    ok_idle = sum(1 for _, r in idle if r.kind == "ok" and r.status == 200)
    r = post(COMP, comp(max_tokens=2), 5.0)
    record(ok_idle == 200 and r.kind == "ok" and r.status == 200,
           "200 idle keep-alive connections held: each answered, and a completion beside them 200",
           f"{ok_idle} of 200 answered; completion -> {r}")
    for c, _ in idle:
        c.close()
    r = get("/health", 5.0)
    record(r.kind == "ok" and r.status == 200, "GET /health right after the flood", f"-> {r} "
           f"(flood took {time.monotonic() - t0:.1f} s)")
    if base is None:
        return note("flood", "no /proc: thread and descriptor counts not checked")
    t1, now = time.monotonic(), SRV.counts()
    while now and (now[0] > base[0] + 4 or now[1] > base[1] + 4) and time.monotonic() - t1 < 10:
        time.sleep(0.3)
        now = SRV.counts()
    record(now is not None and now[0] <= base[0] + 4 and now[1] <= base[1] + 4,
           "threads and descriptors back near their count before the flood within 10 s",
           f"before: {base[0]} threads, {base[1]} fds; 10 s after: {now}")


# ---------------------------------------------------------- streams and slots

STREAM_PROMPT = "Once upon a time"


def stream_req(max_tokens, path=COMP, extra=None):
    body = ({"prompt": STREAM_PROMPT} if path == COMP else {"messages": MSGS})
    body.update({"max_tokens": max_tokens, "stream": True, "temperature": 0})
    body.update(extra or {})
    return req("POST", path, body)


def open_stream(max_tokens, path=COMP, rcvbuf=None, extra=None):
    """(conn, head response, first events) of a stream, or (None, what, [])."""
    try:
        c = Conn(rcvbuf)
    except OSError as e:
        return None, f"connect: {e}", []
    c.send(stream_req(max_tokens, path, extra))
    r = c.read_head(10.0)
    if r.kind != "ok" or r.status != 200:
        if r.kind == "ok":
            r.body = b"".join(c.pieces(r, time.monotonic() + 5.0))
        c.close()
        return None, f"stream request -> {r}", []
    return c, r, []


def take_events(c, r, n, timeout):
    out, deadline = [], time.monotonic() + timeout
    try:
        for ev in c.events(r, deadline):
            out.append(ev)
            if len(out) >= n or ev == b"[DONE]":
                break
    except Cut:
        pass
    return out


def slot_decoded():
    """{slot id: n_decoded} of the busy slots, or {} when /slots does not say."""
    r = get("/slots", 5.0)
    j = _json(r.body) if r.kind == "ok" else None
    if not isinstance(j, list):
        return {}
    return {x.get("id"): x.get("n_decoded") for x in j if isinstance(x, dict) and x.get("is_processing")}


def g_stall():
    """A streams into a 4 KB receive buffer and never reads; B's stream must
    still run, and A, stuck without progress, must be dropped by --timeout."""
    n = min(SRV.ctx - 64, 16000)
    # 20 top log-probabilities a token make ~2 KB events: the kernel's socket
    # buffers (megabytes on loopback) fill within a second, so A truly stalls
    a, ra, _ = open_stream(n, CHAT, rcvbuf=4096, extra={"logprobs": True, "top_logprobs": 20})
    if a is None:
        return record(False, "a stream whose client never reads", str(ra))
    time.sleep(1.5)     # A's buffers fill up; a server that writes in its decode loop is stuck now
    dec_a = slot_decoded()
    if not dec_a:
        note("stall", f"/slots shows no busy slot 1.5 s into A's stream: inconclusive")
    t0 = time.monotonic()
    b, rb, _ = open_stream(32, CHAT, extra={"temperature": 2, "seed": 5, "logprobs": True, "top_logprobs": 3})
    if b is None:
        a.close(rst=True)
        return record(False, "second stream beside a never-read one", str(rb))
    evs, done, bad = [], False, []
    try:
        for ev in b.events(rb, t0 + 10.0):
            if ev == b"[DONE]":
                done = True
                break
            j = _json(ev)
            if not (isinstance(j, dict) and isinstance(j.get("choices"), list)):
                bad.append(show(ev, 80))
            evs.append(ev)
    except Cut as e:
        bad.append(f"stream cut: {e.args[0]}")
    dt = time.monotonic() - t0
    if done and "close" not in rb.header("connection").lower():
        try:
            for _ in b.pieces(rb, time.monotonic() + 5.0):    # the rest of the body: its last chunk
                pass
        except Cut:
            pass
        b.send(req("GET", "/health"))
        r2 = b.read_response(5.0)
        record(r2.kind in ("closed", "reset") or (r2.kind == "ok" and r2.status == 200),
               "GET /health on the connection a finished stream kept open: 200", f"-> {r2}")
    b.close()
    record(done and not bad and dt < 10.0,
           "a chat stream beside a never-read stream (4 KB receive buffer) ends with [DONE] within 10 s",
           f"{len(evs)} events in {dt:.1f} s, done={done}, problems: {bad[:3]}; "
           f"content-type {rb.header('content-type')!r}")
    record("text/event-stream" in rb.header("content-type"), "stream Content-Type text/event-stream",
           f"{rb.header('content-type')!r}")
    # A still holds its socket open and reads nothing: no write progress for
    # --timeout seconds must close it and free its slot (else one such client
    # per slot takes the server down)
    bound = IDLE + SLACK + 2
    dt, busy = wait_idle(bound)
    dec_later = slot_decoded() if dt is None else {}
    record(dt is not None, f"the never-reading client is dropped: its slot free within {bound:.0f} s",
           f"/slots still busy: {busy}; n_decoded {dec_a} at 1.5 s, {dec_later} now" if dt is None
           else f"free after {dt:.1f} s")
    if VERBOSE:
        note("stall", f"A's n_decoded at 1.5 s: {dec_a}; slot free {dt} s after B ended")
    got, how = 0, "open"
    deadline = time.monotonic() + 6.0
    try:
        while True:
            a._fill(deadline)
            got += len(a.buf)
            a.buf = b""
    except Cut as e:
        how = e.args[0]
    a.close()
    record(how in ("eof", "reset"), "the never-reading client's connection is closed by the server",
           f"after reading {got} buffered bytes the connection is {how}")


def g_disconnect():
    n = min(SRV.ctx - 64, 16000)
    state = {}
    for how in ("FIN", "RST"):
        c, r, _ = open_stream(n)
        if c is None:
            record(False, f"client leaves mid-stream ({how})", str(r))
            continue
        t0 = time.monotonic()
        evs = take_events(c, r, 20, 5.0)
        rate = len(evs) / max(1e-3, time.monotonic() - t0)
        state["rate"] = rate
        busy = slots_busy()
        if not (isinstance(busy, list) and busy):
            note(f"mid-stream ({how})", f"/slots shows no busy slot during a stream: {busy}")
        c.close(rst=(how == "RST"))
        dt, b = wait_idle(LEAVE)
        record(dt is not None, f"client leaves mid-stream ({how}) after {len(evs)} events: slot free within "
               f"{LEAVE:.0f} s", f"/slots still busy: {b}" if dt is None else f"free after {dt:.1f} s")
        if VERBOSE and dt is not None:
            note("mid-stream", f"{how}: slot free {dt:.2f} s after the close")

    # non-streaming: the client gives up after 0.7 s
    try:
        c = Conn()
    except OSError as e:
        return record(False, "client leaves a non-streaming request", f"connect: {e}")
    body = {"prompt": STREAM_PROMPT, "max_tokens": n, "temperature": 0}
    c.send(req("POST", COMP, body))
    time.sleep(0.7)
    busy = slots_busy()
    answered = c.readable(0)
    c.close()
    if answered or not (isinstance(busy, list) and busy):
        note("non-streaming leave", f"inconclusive: answered already={answered}, /slots {busy}")
    dt, b = wait_idle(LEAVE)
    record(dt is not None, f"client leaves a non-streaming request (max_tokens {n}) after 0.7 s: slot free within "
           f"{LEAVE:.0f} s", f"sent {show(req('POST', COMP, body))}, closed after 0.7 s; /slots still busy "
           f"{LEAVE:.0f} s later: {b}" if dt is None else f"free after {dt:.1f} s")
    if VERBOSE and dt is not None:
        note("non-streaming leave", f"slot free {dt:.2f} s after the close")


def g_queue():
    """Both slots busy with streams we read; C1 (short) and C2 (long) queue.
    C2's client leaves while queued. After longer than --timeout the streams
    end: C1 must still be answered, and C2 must never take a slot."""
    n = min(SRV.ctx - 64, 16000)
    streams, stop = [], threading.Event()
    ended = []

    def reader(c, r):
        try:
            for ev in c.events(r, time.monotonic() + 60):
                if stop.is_set():
                    break
                if ev == b"[DONE]":
                    ended.append(time.monotonic())
                    break
        except Cut as e:
            if not stop.is_set():
                ended.append(e.args[0])

    for _ in range(2):
        c, r, _ = open_stream(n)
        if c is None:
            stop.set()
            for c2, _t in streams:
                c2.close()
            return record(False, "queue: two streams to fill the slots", str(r))
        streams.append((c, threading.Thread(target=reader, args=(c, r), daemon=True)))
        streams[-1][1].start()
    time.sleep(0.3)
    busy = slots_busy()
    record(isinstance(busy, list) and len(busy) == SLOTS, f"/slots shows {SLOTS} busy slots during 2 streams",
           f"/slots -> {busy}")
    c1 = Conn()
    c1.send(req("POST", COMP, comp(max_tokens=8)))
    time.sleep(0.2)
    c2 = Conn()
    c2.send(req("POST", COMP, {"prompt": STREAM_PROMPT, "max_tokens": n, "temperature": 0}))
    time.sleep(0.8)
    early1, early2 = c1.readable(0), c2.readable(0)
    c2.close()
    time.sleep(IDLE + 1.5 - 1.0)
    if ended:
        note("queue", f"inconclusive: a stream ended early ({ended})")
    before = c1.readable(0)
    stop.set()
    for c, t in streams:
        c.close()
    if before:
        note("queue", "C1 was answered while both slots were still streaming (inconclusive)")
    r1 = c1.read_response(10.0)
    c1.close()
    ok = r1.kind == "ok" and r1.status == 200 and isinstance(_json(r1.body), dict)
    record(ok, f"queued behind 2 busy slots for {IDLE + 1.5:.1f} s (> --timeout {IDLE}): answered 200",
           f"{'replied before the slots freed; ' if early1 else ''}POST {COMP} {show(comp(max_tokens=8))} -> {r1}")
    if early2:
        note("queue", "C2 had a reply before its client left (not queued?)")
    dt, b = wait_idle(5.0 + SLACK)
    record(dt is not None, "after the streams end, no slot busy (the queued request whose client left never ran)",
           f"/slots still busy: {b}" if dt is None else f"free after {dt:.1f} s")
    if dt is not None:
        time.sleep(1.0)
        b = slots_busy()
        record(b == [], "slots still free 1 s later", f"/slots -> {b}")


# ------------------------------------------------------------------- context

def g_context():
    """A second server with -c 64: prompts up to, at and past a slot's context.
    A prompt that fits is answered (finish_reason "length" once the context is
    full), one that does not is a 400; streamed the same; both slots at once."""
    global SRV
    main = SRV
    small = Server(main.binary, main.model, 64, main.extra)
    err = small.start()
    if err:
        return record(False, "a second server with -c 64 starts", f"{' '.join(small.argv())}: {err}{small.tail()}")
    SRV = small
    try:
        t = _json(post("/tokenize", {"content": "a"}).body, {}).get("tokens") or [100]
        tok = t[-1] if isinstance(t[-1], int) else t[-1].get("id", 100)
        for n in (1, 60, 63, 64):
            r = post(COMP, {"prompt": [tok] * n, "max_tokens": 100, "temperature": 0}, 20.0)
            j = _json(r.body, {}) if r.kind == "ok" else {}
            u, ch = j.get("usage") or {}, (j.get("choices") or [{}])[0]
            ok = r.kind == "ok" and r.status == 200 and ch.get("finish_reason") == "length" and \
                0 < (u.get("completion_tokens") or 0) <= 64 - n + 1
            record(ok, f"-c 64, prompt of {n} tokens, max_tokens 100: 200, finish_reason length, "
                   f"<= {64 - n + 1} tokens", f"-> {r}")
        for n in (65, 1000):
            r = post(COMP, {"prompt": [tok] * n, "max_tokens": 1}, 20.0)
            p = error_problem(r, "prompt") if r.kind == "ok" and r.status == 400 else "not a 400"
            record(p is None or p.startswith("neither"), f"-c 64, prompt of {n} tokens: 400 in the error shape",
                   f"{p}: -> {r}")
        r = post(CHAT, chat(messages=[{"role": "user", "content": "a " * 100}]), 20.0)
        record(r.kind == "ok" and r.status == 400 and error_problem(r) is None,
               "-c 64, a chat past the context: 400 in the error shape", f"-> {r}")
        c, r, _ = open_stream(100, extra={"prompt": [tok] * 62})
        if c is None:
            record(False, "-c 64, a stream that fills the context", str(r))
        else:
            evs = take_events(c, r, 1000, 20.0)
            c.close()
            last = [_json(e, {}) for e in evs if e != b"[DONE]"]
            fins = [((x.get("choices") or [{}])[0] or {}).get("finish_reason") for x in last if isinstance(x, dict)]
            record(evs[-1:] == [b"[DONE]"] and "length" in fins, "-c 64, a stream that fills the context: "
                   "finish_reason length, then [DONE]", f"{len(evs)} events, finish reasons {fins[-3:]}, "
                   f"last {show(b''.join(evs[-1:]), 120)}")
        out = []
        ts = parallel([lambda: out.append(post(COMP, {"prompt": [tok] * 60, "max_tokens": 100}, 20.0))
                       for _ in range(2 * SLOTS)])
        for t_ in ts:
            t_.join(30)
        record(len(out) == 2 * SLOTS and all(r.kind == "ok" and r.status == 200 for r in out),
               f"-c 64, {2 * SLOTS} concurrent requests filling the context: all 200", " | ".join(map(str, out)))
        san = small.sanitizer_lines()
        record(not san, "-c 64 server: no sanitizer report", "\n         | ".join([""] + san[:20]))
        record(small.alive(), "-c 64 server alive", f"exit {small.proc.poll()}:{small.tail()}")
    finally:
        SRV = main
        if small.alive():
            small.proc.send_signal(signal.SIGTERM)
            try:
                rc = small.proc.wait(10)
            except subprocess.TimeoutExpired:
                rc = None
                small.proc.kill()
                small.proc.wait()
            record(rc == 0, "-c 64 server: SIGTERM, exit 0", f"exit {rc}:{small.tail(8)}")


# ---------------------------------------------------------------------- load

def g_load():
    m0, why = metrics_total()
    record(m0 is not None, "/metrics fucina_requests_total before the load", why)
    total, per, results, lock = 200, 25, [], threading.Lock()
    t0 = time.monotonic()

    def worker(w):
        c = None
        for i in range(per):
            chat_req = (w + i) % 2 == 0
            body = chat(max_tokens=4) if chat_req else comp(max_tokens=4)
            data = req("POST", CHAT if chat_req else COMP, body)
            for attempt in range(2):
                try:
                    if c is None:
                        c = Conn()
                    c.send(data)
                    r = c.read_response(30.0)
                except OSError as e:
                    r = Resp("connect-failed", detail=str(e))
                if r.kind in ("closed", "reset") and attempt == 0:
                    c.close()       # a kept connection the server had closed: one retry on a new one
                    c = None
                    continue
                break
            problem = None
            if r.kind != "ok" or r.status != 200:
                problem = str(r)
            else:
                j = _json(r.body)
                try:
                    ch = j["choices"][0]
                    text = ch["message"]["content"] if chat_req else ch["text"]
                    if not isinstance(text, str) or j.get("object") != ("chat.completion" if chat_req else
                                                                       "text_completion"):
                        problem = f"bad completion JSON {show(r.body, 200)}"
                except (TypeError, KeyError, IndexError):
                    problem = f"bad completion JSON {show(r.body, 200)}"
            with lock:
                results.append(problem)
            if c is not None and (r.kind != "ok" or "close" in r.header("connection").lower()):
                c.close()
                c = None
        if c is not None:
            c.close()

    ts = parallel([lambda w=w: worker(w) for w in range(8)])
    for t in ts:
        t.join(60)
    dt = time.monotonic() - t0
    bad = [p for p in results if p]
    record(len(results) == total and not bad and dt < 40,
           f"{total} requests (max_tokens 4) from 8 threads: all 200 with a completion, within 40 s",
           f"{len(results)} answered, {len(bad)} bad in {dt:.1f} s: " + "; ".join(bad[:4]))
    if VERBOSE or dt > 20:
        note("load", f"{total} requests in {dt:.1f} s ({total / dt:.0f}/s)")
    m1, why = metrics_total()
    if m0 is not None:
        record(m1 is not None and m1 - m0 >= total, f"fucina_requests_total up by >= {total}",
               why or f"{m0:g} -> {m1:g}")


def g_overload():
    n, results, lock = 16, [], threading.Lock()
    barrier = threading.Barrier(n)

    def one(i):
        body = {"prompt": STREAM_PROMPT, "max_tokens": 600, "temperature": 0}
        data = req("POST", COMP, body)
        try:
            c = Conn()
        except OSError as e:
            with lock:
                results.append(Resp("connect-failed", detail=str(e)))
            return
        barrier.wait(10)
        c.send(data)
        r = c.read_response(40.0)
        c.close()
        with lock:
            results.append(r)

    t0 = time.monotonic()
    ts = parallel([lambda i=i: one(i) for i in range(n)])
    for t in ts:
        t.join(60)
    dt = time.monotonic() - t0
    statuses = sorted(r.status if r.kind == "ok" else r.kind for r in results)
    bad = []
    for r in results:
        if r.kind == "ok" and r.status == 200 and isinstance(_json(r.body), dict):
            continue
        if r.kind == "ok" and r.status in (429, 503) and error_problem(r) is None:
            continue
        bad.append(str(r))
    record(len(results) == n and not bad,
           f"{n} concurrent requests against {SLOTS} slots + {QUEUE} queued: each 200, or 429/503 in the error shape",
           f"statuses {statuses} in {dt:.1f} s; " + "; ".join(bad[:3]))
    rejected = sum(1 for s in statuses if s in (429, 503))
    if not rejected:
        note("overload", f"no request refused with {n} against {SLOTS}+{QUEUE} ({dt:.1f} s): is --queue enforced?")


def g_sigterm():
    held = []
    try:
        idle = Conn()
        idle.send(req("GET", "/health"))
        r = idle.read_response(5.0)
        held.append(idle)
        half = Conn()
        half.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"pro")
        held.append(half)
    except OSError as e:
        record(False, "connections for SIGTERM", f"{e}")
    s, rs, _ = open_stream(min(SRV.ctx - 64, 16000))
    if s is not None:
        take_events(s, rs, 3, 5.0)
    t0 = time.monotonic()
    SRV.proc.send_signal(signal.SIGTERM)
    try:
        rc = SRV.proc.wait(10 + SLACK)
    except subprocess.TimeoutExpired:
        rc = None
    dt = time.monotonic() - t0
    record(rc == 0, f"SIGTERM with an idle, a half-sent and a streaming connection: exit 0 within {10 + SLACK:.0f} s",
           f"exit {rc} after {dt:.1f} s; output:{SRV.tail(12)}")
    if rc is None:
        SRV.proc.kill()
        SRV.proc.wait()
    if s is not None:
        rest, end = [], "clean end of the chunked body"
        try:
            for ev in s.events(rs, time.monotonic() + 3.0):
                rest.append(ev)
        except Cut as e:
            end = f"cut ({e.args[0]})"
        s.close()
        record(end.startswith("clean"), "the in-flight stream ends with a whole chunked body after SIGTERM",
               f"{len(rest)} more events (last {show(b''.join(rest[-1:]), 200)}), then {end}")
    for c in held:
        c.close()
    time.sleep(0.3)
    san = SRV.sanitizer_lines()
    record(not san, "no sanitizer report in the server's output at exit", "\n         | ".join([""] + san[:20]))


GROUPS = [("request-line", g_request_line), ("bodies", g_bodies), ("json", g_json), ("endpoints", g_endpoints),
          ("slow", g_slow), ("flood", g_flood), ("stall", g_stall), ("disconnect", g_disconnect),
          ("queue", g_queue), ("context", g_context), ("load", g_load), ("overload", g_overload)]


def finish():
    if SRV and SRV.alive():
        SRV.proc.kill()
        SRV.proc.wait()
    if TMP:
        shutil.rmtree(TMP, ignore_errors=True)
    print(f"\n{PASSES} passed, {len(FAILS)} failed in {time.monotonic() - T0:.1f} s")
    for f in FAILS:
        print("  FAIL " + f.split("\n")[0][:300])
    sys.exit(1 if FAILS else 0)


TMP = None
T0 = time.monotonic()


def main():
    global SRV, TMP, VERBOSE, GROUP
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(here, "..", "..", "build", "fucina"), help="the fucina binary")
    ap.add_argument("--model", help="a GGUF model (default: a tiny one made with make-model)")
    ap.add_argument("--ctx", type=int, default=16384, help="-c per slot (default 16384: long streams last seconds)")
    ap.add_argument("--only", help="comma-separated groups to run (sigterm always runs last)")
    ap.add_argument("--server-arg", action="append", default=[], help="one more argument for fucina serve")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    VERBOSE = args.verbose
    if not (os.path.isfile(args.bin) and os.access(args.bin, os.X_OK)):
        print(f"SKIP: no server binary at {args.bin}")
        sys.exit(77)
    h = subprocess.run([args.bin, "serve", "--help"], capture_output=True, text=True, timeout=60)
    if h.returncode != 0 and "unknown command" in (h.stderr + h.stdout):
        print(f"SKIP: {args.bin} has no serve command: {(h.stderr or h.stdout).strip().splitlines()[0]}")
        sys.exit(77)
    model = args.model
    if not model or not os.path.isfile(model):
        TMP = tempfile.mkdtemp(prefix="fucina-serve-robust-")
        model = os.path.join(TMP, "tiny.gguf")
        mk = subprocess.run([args.bin, "make-model", "--preset", "tiny", model], capture_output=True, text=True,
                            timeout=300)
        if mk.returncode != 0:
            record(False, "make-model", f"exit {mk.returncode}: {mk.stderr.strip()}")
            finish()
    SRV = Server(args.bin, model, args.ctx, args.server_arg)
    GROUP = "start"
    err = SRV.start()
    if err:
        record(False, "server start", f"{' '.join(SRV.argv())}: {err}; output:{SRV.tail()}")
        finish()
    print(f"server: {' '.join(SRV.argv())} -> port {SRV.port}", flush=True)
    only = set(args.only.split(",")) if args.only else None
    for name, fn in GROUPS:
        if only and name not in only:
            continue
        GROUP = name
        t = time.monotonic()
        try:
            fn()
        except Exception as e:  # a bug here must not hide the server's later results
            import traceback
            record(False, "the group ran to its end", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        if VERBOSE:
            note(name, f"{time.monotonic() - t:.1f} s")
        check_server(name)
    GROUP = "sigterm"
    g_sigterm()
    finish()


if __name__ == "__main__":
    main()
