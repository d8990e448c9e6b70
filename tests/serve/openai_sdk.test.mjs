// `fucina serve` through the official OpenAI SDK (and raw fetch where the
// SDK hides what is checked: status codes, headers, the SSE bytes).
//
//   node --test tests/serve/openai_sdk.test.mjs
//
// Environment:
//   FUCINA_BIN         the fucina binary (default: ../../build/fucina from here)
//   FUCINA_MODEL       a small model (default: `make-model --preset tiny` in a temp dir)
//   FUCINA_SLOW_MODEL  a model slow enough that a generation outlasts a client's
//                      reaction (default: `make-model --preset small --n-vocab 151936`,
//                      about 15 ms a token on one thread: the output matrix)
//   FUCINA_SERVE_KEEP  keep the temp dir (servers' logs, models) and print its path
//
// Servers started (each on --port 0, the port read from its "listening on" line):
//   main   tiny model, -np 8 -c 256 -t 1 --metrics
//   auth   tiny model, -np 2 --api-key (twice) --max-body 4096 --timeout 2 -ctk q8_0 --no-webui
//   slow   slow model, -np 1 --queue 1 -c 512 --metrics (queue full, client abort, SIGTERM)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = process.env.FUCINA_BIN || path.resolve(here, '../../build/fucina');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fucina-serve-sdk-'));
const N_CTX = 256; // the main server's -c (the tiny model's training context)
const NP = 8;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- servers ---
const servers = [];

function makeModel(file, args) {
  execFileSync(BIN, ['make-model', ...args, file], { stdio: ['ignore', 'ignore', 'pipe'] });
  return file;
}

/** Starts `fucina serve MODEL ARGS...` on 127.0.0.1:0; resolves when /health
 * says 200, having checked every earlier /health answer was 503. */
async function startServer(name, model, args) {
  const log = path.join(tmp, `${name}.log`);
  const logFd = fs.openSync(log, 'w');
  const proc = spawn(BIN, ['serve', model, '--host', '127.0.0.1', '--port', '0', ...args], {
    stdio: ['ignore', logFd, 'pipe'],
  });
  const srv = { name, proc, log, stderr: '', exited: null, healthSeen: [] };
  servers.push(srv);
  srv.exitPromise = new Promise((resolve) => {
    proc.on('exit', (code, signal) => {
      srv.exited = { code, signal };
      resolve(srv.exited);
    });
  });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name}: no "listening on" line in 60 s:\n${srv.stderr}`)), 60000);
    proc.stderr.on('data', (d) => {
      srv.stderr += d;
      fs.appendFileSync(log, d);
      const m = /fucina serve: listening on http:\/\/([^\s:]+):(\d+)/.exec(srv.stderr);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[2]));
      }
    });
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name}: exited (${code ?? signal}) before listening:\n${srv.stderr}`));
    });
  });
  assert.ok(port > 0 && port < 65536, `${name}: port ${port}`);
  srv.port = port;
  srv.base = `http://127.0.0.1:${port}`;
  const t0 = Date.now();
  for (;;) {
    let status = 0;
    try {
      status = (await fetch(`${srv.base}/health`)).status;
    } catch {
      status = -1;
    }
    srv.healthSeen.push(status);
    if (status === 200) break;
    if (srv.exited) throw new Error(`${name}: exited while loading:\n${srv.stderr}`);
    if (Date.now() - t0 > 60000) throw new Error(`${name}: /health not 200 in 60 s (seen ${srv.healthSeen})`);
    await sleep(50);
  }
  return srv;
}

/** Sends sig and waits for the exit; {code, signal, ms}. */
async function stopServer(srv, sig = 'SIGTERM', ms = 20000) {
  if (srv.exited) return srv.exited;
  const t0 = Date.now();
  srv.proc.kill(sig);
  const r = await Promise.race([srv.exitPromise, sleep(ms).then(() => null)]);
  if (!r) {
    srv.proc.kill('SIGKILL');
    await srv.exitPromise;
    return { code: null, signal: 'timeout', ms: Date.now() - t0 };
  }
  return { ...r, ms: Date.now() - t0 };
}

function client(srv, opts = {}) {
  return new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000, ...opts });
}

// ------------------------------------------------------------ raw helpers ---
async function req(srv, method, p, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
    init.headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(srv.base + p, init);
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** Asserts an OpenAI-shaped error: {"error": {"message", "type", "param", "code"}}. */
function assertError(r, status, { param, mentions = [] } = {}, what = '') {
  const ctx = `${what}: ${r.status} ${r.text.slice(0, 400)}`;
  assert.equal(r.status, status, ctx);
  assert.match(r.headers.get('content-type') || '', /application\/json/, ctx);
  assert.ok(r.json && typeof r.json.error === 'object' && r.json.error, `no error object: ${ctx}`);
  const e = r.json.error;
  assert.equal(typeof e.message, 'string', ctx);
  assert.ok(e.message.length > 0, ctx);
  assert.equal(typeof e.type, 'string', ctx);
  assert.ok('param' in e, `error.param missing: ${ctx}`);
  assert.ok('code' in e, `error.code missing: ${ctx}`);
  if (param !== undefined) assert.equal(e.param, param, ctx);
  for (const m of mentions) {
    const hay = `${e.message} ${e.param ?? ''}`;
    if (m instanceof RegExp) assert.match(hay, m, ctx);
    else assert.ok(hay.includes(m), `error does not name ${JSON.stringify(m)}: ${ctx}`);
  }
  return e;
}

const enc = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function indexOfBytes(buf, pat, from = 0) {
  outer: for (let i = from; i + pat.length <= buf.length; i++) {
    for (let j = 0; j < pat.length; j++) if (buf[i + j] !== pat[j]) continue outer;
    return i;
  }
  return -1;
}

/** POSTs with stream: true and splits the SSE body into events at the byte
 * level. Every event must be exactly `data: PAYLOAD` with a payload that is
 * valid UTF-8 on its own; the last must be `data: [DONE]`. Returns the parsed
 * chunks (before [DONE]) and the raw event byte arrays. */
async function rawStream(srv, p, body, headers = {}) {
  const res = await fetch(srv.base + p, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.equal(res.status, 200, `stream ${p}: ${res.status}`);
  assert.match(res.headers.get('content-type') || '', /^text\/event-stream/);
  let buf = new Uint8Array(0);
  const events = [];
  const sep = enc.encode('\n\n');
  for await (const piece of res.body) {
    const nb = new Uint8Array(buf.length + piece.length);
    nb.set(buf);
    nb.set(piece, buf.length);
    buf = nb;
    let i;
    while ((i = indexOfBytes(buf, sep)) >= 0) {
      events.push(buf.slice(0, i));
      buf = buf.slice(i + 2);
    }
  }
  assert.equal(buf.length, 0, `bytes after the last event: ${JSON.stringify(new TextDecoder().decode(buf))}`);
  const chunks = [];
  let done = 0;
  for (const [k, ev] of events.entries()) {
    let text;
    try {
      text = strictUtf8.decode(ev);
    } catch {
      assert.fail(`event ${k} is not valid UTF-8: bytes ${Buffer.from(ev).toString('hex')}`);
    }
    // llama-server may interleave SSE comments (": ping"); none is in our spec
    assert.ok(text.startsWith('data: '), `event ${k} is not "data: ...": ${JSON.stringify(text)}`);
    const payload = text.slice(6);
    assert.ok(!payload.includes('\n'), `event ${k} has more than one line: ${JSON.stringify(text)}`);
    if (payload === '[DONE]') {
      done++;
      assert.equal(k, events.length - 1, 'data: [DONE] is not the last event');
      continue;
    }
    chunks.push(JSON.parse(payload));
  }
  assert.equal(done, 1, 'exactly one data: [DONE]');
  return { chunks, events };
}

function metricsOf(text) {
  const m = {};
  const types = {};
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) (\S+)/.exec(line);
    if (t) types[t[1]] = t[2];
    if (!line || line.startsWith('#')) continue;
    const v = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (v && !(v[1] in m)) m[v[1]] = Number(v[3]);
  }
  return { m, types };
}

async function metrics(srv) {
  const r = await req(srv, 'GET', '/metrics');
  assert.equal(r.status, 200, `/metrics: ${r.status} ${r.text.slice(0, 200)}`);
  return metricsOf(r.text).m;
}

async function slots(srv) {
  const r = await req(srv, 'GET', '/slots');
  assert.equal(r.status, 200, `/slots: ${r.status} ${r.text.slice(0, 200)}`);
  assert.ok(Array.isArray(r.json), `/slots is not an array: ${r.text.slice(0, 200)}`);
  return r.json;
}

/** Waits up to ms for no slot processing and no request waiting. */
async function waitIdle(srv, ms, withMetrics = true) {
  const t0 = Date.now();
  let last;
  for (;;) {
    const s = await slots(srv);
    const busy = s.filter((x) => x.is_processing).length;
    let proc = 0;
    let def = 0;
    if (withMetrics) {
      const m = await metrics(srv);
      proc = m.fucina_requests_processing;
      def = m.fucina_requests_deferred;
    }
    last = { busy, processing: proc, deferred: def, ms: Date.now() - t0 };
    if (busy === 0 && proc === 0 && def === 0) return last;
    if (Date.now() - t0 > ms) return last;
    await sleep(100);
  }
}

function usageAddsUp(u, what) {
  assert.ok(u, `${what}: no usage`);
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
    assert.ok(Number.isInteger(u[k]) && u[k] >= 0, `${what}: usage.${k} = ${u[k]}`);
  }
  assert.equal(u.prompt_tokens + u.completion_tokens, u.total_tokens, `${what}: prompt + completion != total`);
  assert.ok(u.prompt_tokens > 0, `${what}: prompt_tokens 0`);
  const c = u.prompt_tokens_details?.cached_tokens;
  assert.ok(Number.isInteger(c) && c >= 0 && c <= u.prompt_tokens, `${what}: prompt_tokens_details.cached_tokens = ${c}`);
}

/** Checks a list of streamed chunks (the SDK's or raw): one id, role first
 * (chat), exactly one finish_reason and it is the last choice chunk, the
 * usage chunk (when asked) last with choices []. Returns {text, finish, usage}. */
function checkChunks(chunks, { chat, includeUsage, what }) {
  assert.ok(chunks.length > 0, `${what}: no chunks`);
  const ids = new Set(chunks.map((c) => c.id));
  assert.equal(ids.size, 1, `${what}: ids ${[...ids]}`);
  assert.equal(typeof chunks[0].id, 'string');
  const object = chat ? 'chat.completion.chunk' : 'text_completion';
  let text = '';
  let finish = null;
  let finishes = 0;
  let usage = null;
  let first = true;
  for (const [k, c] of chunks.entries()) {
    assert.equal(c.object, object, `${what}: chunk ${k} object`);
    if (includeUsage && k === chunks.length - 1) {
      assert.deepEqual(c.choices, [], `${what}: the usage chunk's choices`);
      usage = c.usage;
      continue;
    }
    assert.ok(c.usage == null, `${what}: usage on chunk ${k} of ${chunks.length}: ${JSON.stringify(c)}`);
    assert.equal(c.choices.length, 1, `${what}: chunk ${k} choices: ${JSON.stringify(c)}`);
    const ch = c.choices[0];
    assert.equal(ch.index, 0);
    assert.equal(finishes, 0, `${what}: chunk ${k} after the finish_reason: ${JSON.stringify(c)}`);
    let piece;
    if (chat) {
      if (first) assert.equal(ch.delta?.role, 'assistant', `${what}: the first delta has no role: ${JSON.stringify(c)}`);
      else assert.ok(ch.delta?.role === undefined || ch.delta.role === 'assistant', `${what}: role again`);
      piece = ch.delta?.content ?? '';
    } else {
      piece = ch.text ?? '';
    }
    first = false;
    assert.equal(typeof piece, 'string');
    assert.ok(!LONE_SURROGATE.test(piece), `${what}: chunk ${k} holds half a surrogate pair`);
    text += piece;
    if (ch.finish_reason != null) {
      finishes++;
      finish = ch.finish_reason;
    }
  }
  assert.equal(finishes, 1, `${what}: ${finishes} finish_reasons`);
  assert.ok(['stop', 'length'].includes(finish), `${what}: finish_reason ${finish}`);
  if (includeUsage) usageAddsUp(usage, `${what} (usage chunk)`);
  return { text, finish, usage };
}

/** The SDK's chat.completions or completions ('chat' | 'completions'). */
const api = (cl, kind) => (kind === 'chat' ? cl.chat.completions : cl.completions);

async function sdkStream(cl, kind, params, opts) {
  const stream = await api(cl, kind).create({ ...params, stream: true }, opts);
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

async function tokenize(srv, content) {
  const r = await req(srv, 'POST', '/tokenize', { content });
  assert.equal(r.status, 200, r.text);
  return r.json.tokens;
}

// ------------------------------------------------------------------ setup ---
let main, auth, slow, model, slowModel, MODEL_ID, oa;
const chatMsgs = (u) => [{ role: 'user', content: u }];
const G = { temperature: 0 }; // greedy

before(async () => {
  assert.ok(fs.existsSync(BIN), `no fucina binary at ${BIN} (set FUCINA_BIN)`);
  model = process.env.FUCINA_MODEL || makeModel(path.join(tmp, 'tiny.gguf'), ['--preset', 'tiny']);
  slowModel =
    process.env.FUCINA_SLOW_MODEL ||
    makeModel(path.join(tmp, 'slow.gguf'), ['--preset', 'small', '--n-vocab', '151936']);
  [main, auth, slow] = await Promise.all([
    startServer('main', model, ['-np', String(NP), '-c', String(N_CTX), '-t', '1', '--metrics']),
    startServer('auth', model, [
      '-np', '2', '-c', String(N_CTX), '-t', '1', '--api-key', 'key-one', '--api-key', 'key-two',
      '--max-body', '4096', '--timeout', '2', '-ctk', 'q8_0', '--no-webui',
    ]),
    startServer('slow', slowModel, ['-np', '1', '--queue', '1', '-c', '512', '-t', '1', '--metrics']),
  ]);
  oa = client(main);
  const models = await oa.models.list();
  MODEL_ID = models.data[0].id;
});

after(async () => {
  for (const s of servers) if (!s.exited) await stopServer(s, 'SIGKILL', 5000);
  if (process.env.FUCINA_SERVE_KEEP) console.log(`# kept ${tmp}`);
  else fs.rmSync(tmp, { recursive: true, force: true });
});

// ------------------------------------------------------------------ tests ---
test('health: 503 while loading, then 200 {"status":"ok"}', async () => {
  for (const s of [main, auth, slow]) {
    const bad = s.healthSeen.filter((x) => x !== 503 && x !== 200 && x !== -1);
    assert.deepEqual(bad, [], `${s.name}: /health answered ${bad} while loading`);
    const r = await req(s, 'GET', '/health');
    assert.equal(r.status, 200);
    assert.equal(r.json?.status, 'ok', r.text);
  }
});

test('GET /v1/models lists the model', async () => {
  const models = await oa.models.list();
  assert.ok(models.data.length >= 1);
  const m = models.data[0];
  assert.equal(m.object, 'model');
  assert.equal(typeof m.id, 'string');
  assert.ok(m.id.length > 0);
  const r = await req(main, 'GET', '/v1/models');
  assert.equal(r.json.object, 'list');
});

test('chat: plain response shape, usage, timings', async () => {
  const r = await oa.chat.completions.create({ model: MODEL_ID, messages: chatMsgs('Hello there'), max_tokens: 12, ...G });
  assert.equal(r.object, 'chat.completion');
  assert.equal(typeof r.id, 'string');
  assert.ok(Number.isInteger(r.created));
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['stop', 'length'].includes(c.finish_reason), c.finish_reason);
  usageAddsUp(r.usage, 'chat');
  assert.ok(r.usage.completion_tokens <= 12);
  if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 12);
  assert.ok(r.timings && typeof r.timings === 'object', 'no timings');
  assert.equal(r.timings.predicted_n, r.usage.completion_tokens, JSON.stringify(r.timings));
  assert.ok(r.timings.prompt_n <= r.usage.prompt_tokens, JSON.stringify(r.timings));
  for (const k of ['prompt_ms', 'predicted_ms']) assert.equal(typeof r.timings[k], 'number', `timings.${k}`);
});

test('prompt cache: a repeated prompt reports cached_tokens (timings.cache_n); cache_prompt false reads it all', async () => {
  const body = { model: MODEL_ID, messages: chatMsgs('A prompt to be cached, long enough to count'), max_tokens: 4, ...G };
  const first = await oa.chat.completions.create(body);
  const again = await oa.chat.completions.create(body);
  usageAddsUp(again.usage, 'again');
  const c = again.usage.prompt_tokens_details.cached_tokens;
  assert.ok(c >= again.usage.prompt_tokens / 2, `the same prompt again: ${c} of ${again.usage.prompt_tokens} cached`);
  assert.equal(again.timings.cache_n, c, 'timings.cache_n != cached_tokens');
  assert.equal(again.timings.prompt_n + again.timings.cache_n, again.usage.prompt_tokens, 'prompt_n + cache_n != prompt_tokens');
  assert.equal(again.choices[0].message.content, first.choices[0].message.content, 'greedy text changed with the cache');
  const fresh = await oa.chat.completions.create({ ...body, cache_prompt: false });
  assert.equal(fresh.usage.prompt_tokens_details.cached_tokens, 0, 'cache_prompt: false still reused the cache');
  assert.equal(fresh.choices[0].message.content, first.choices[0].message.content);
});

test('chat: system/user/assistant turns; max_completion_tokens', async () => {
  const r = await oa.chat.completions.create({
    model: MODEL_ID,
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Name a colour.' },
      { role: 'assistant', content: 'Blue.' },
      { role: 'user', content: 'Another.' },
    ],
    max_completion_tokens: 5,
    ...G,
  });
  usageAddsUp(r.usage, 'chat turns');
  assert.ok(r.usage.completion_tokens <= 5, `max_completion_tokens 5: ${r.usage.completion_tokens}`);
  if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, 5);
  const one = await oa.chat.completions.create({ model: MODEL_ID, messages: chatMsgs('Name a colour.'), max_tokens: 5, ...G });
  assert.ok(r.usage.prompt_tokens > one.usage.prompt_tokens, 'the earlier turns are not in the prompt');
});

for (const chat of [true, false]) {
  const kind = chat ? 'chat' : 'completions';
  test(`${kind}: streamed text equals plain text under temperature 0 (include_usage)`, async () => {
    const prompts = ['Hello there', 'The capital of France is', 'Write a poem about rust'];
    for (const p of prompts) {
      for (const max_tokens of [1, 24]) {
        const params = chat
          ? { model: MODEL_ID, messages: chatMsgs(p), max_tokens, ...G }
          : { model: MODEL_ID, prompt: p, max_tokens, ...G };
        const plain = await api(oa, kind).create(params);
        const ptext = chat ? plain.choices[0].message.content : plain.choices[0].text;
        usageAddsUp(plain.usage, `${kind} plain`);
        const chunks = await sdkStream(oa, kind, { ...params, stream_options: { include_usage: true } });
        const s = checkChunks(chunks, { chat, includeUsage: true, what: `${kind} ${JSON.stringify(p)}` });
        assert.equal(s.text, ptext, `${kind} ${JSON.stringify(p)} max_tokens ${max_tokens}: streamed != plain`);
        assert.equal(s.finish, plain.choices[0].finish_reason);
        assert.equal(s.usage.completion_tokens, plain.usage.completion_tokens);
        assert.equal(s.usage.prompt_tokens, plain.usage.prompt_tokens);
        if (s.finish === 'length') assert.equal(s.usage.completion_tokens, max_tokens);
        assert.ok(s.usage.completion_tokens <= max_tokens);
        // a content chunk carries at least one token
        const pieces = chunks.filter((c) => (chat ? c.choices[0]?.delta?.content : c.choices[0]?.text)).length;
        assert.ok(pieces <= s.usage.completion_tokens, `${pieces} content chunks for ${s.usage.completion_tokens} tokens`);
        if (!chat) {
          const toks = await tokenize(main, p);
          assert.equal(plain.usage.prompt_tokens, toks.length, 'completions prompt_tokens != /tokenize of the prompt');
        }
      }
    }
  });

  test(`${kind}: a stream without stream_options has no usage chunk`, async () => {
    const params = chat
      ? { model: MODEL_ID, messages: chatMsgs('Hi'), max_tokens: 6, ...G }
      : { model: MODEL_ID, prompt: 'Hi', max_tokens: 6, ...G };
    const chunks = await sdkStream(oa, kind, params);
    checkChunks(chunks, { chat, includeUsage: false, what: kind });
    assert.ok(chunks.every((c) => c.choices.length === 1), 'a chunk with choices [] though include_usage was not asked');
  });
}

test('chat: logprobs and top_logprobs, one entry per completion token', async () => {
  const r = await oa.chat.completions.create({
    model: MODEL_ID, messages: chatMsgs('Tell me a story'), max_tokens: 10, logprobs: true, top_logprobs: 3, ...G,
  });
  const lp = r.choices[0].logprobs?.content;
  assert.ok(Array.isArray(lp), `no logprobs.content: ${JSON.stringify(r.choices[0])}`);
  assert.equal(lp.length, r.usage.completion_tokens);
  const bytes = [];
  for (const e of lp) {
    assert.equal(typeof e.token, 'string');
    assert.ok(e.logprob <= 0, `logprob ${e.logprob}`);
    assert.equal(e.top_logprobs.length, 3);
    for (let i = 1; i < 3; i++) assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob, 'top_logprobs not sorted');
    // greedy: the chosen token is the most likely one
    assert.equal(e.token, e.top_logprobs[0].token);
    assert.ok(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-4);
    if (Array.isArray(e.bytes)) bytes.push(...e.bytes);
  }
  // the tokens' bytes are the content's (where it holds no U+FFFD, whose count
  // for invalid bytes is the server's choice)
  const content = r.choices[0].message.content;
  if (bytes.length && !content.includes('\ufffd')) {
    assert.deepEqual(Buffer.from(bytes), Buffer.from(content, 'utf8'), "the tokens' bytes are not the content");
  }
  // streamed: the same entries, spread over the chunks
  const chunks = await sdkStream(oa, 'chat', {
    model: MODEL_ID, messages: chatMsgs('Tell me a story'), max_tokens: 10, logprobs: true, top_logprobs: 3, ...G,
  });
  const slp = chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
  assert.deepEqual(slp.map((e) => e.token), lp.map((e) => e.token), 'streamed logprobs tokens != plain');
});

test('seed: the same seed draws the same text at temperature 1', async () => {
  const params = { model: MODEL_ID, prompt: 'Once upon a time', max_tokens: 24, temperature: 1, top_k: 0, top_p: 1, min_p: 0 };
  const a = await oa.completions.create({ ...params, seed: 1234 });
  const b = await oa.completions.create({ ...params, seed: 1234 });
  assert.equal(a.choices[0].text, b.choices[0].text);
  const g = await oa.completions.create({ ...params, ...G, seed: 1 });
  const g2 = await oa.completions.create({ ...params, ...G, seed: 99 });
  assert.equal(g.choices[0].text, g2.choices[0].text, 'greedy depends on the seed');
});

test('sampling fields are accepted (top_p, top_k, min_p, penalties)', async () => {
  const r = await oa.chat.completions.create({
    model: MODEL_ID, messages: chatMsgs('Hello'), max_tokens: 8, temperature: 0.8, top_p: 0.9, min_p: 0.05,
    presence_penalty: 0.5, frequency_penalty: 0.5, seed: 7,
    // not in the SDK's types, llama-server's fields
    top_k: 20, repeat_penalty: 1.1,
  });
  usageAddsUp(r.usage, 'sampling');
  // a repetition penalty changes greedy text that repeats (the tiny model loops)
  const p = { model: MODEL_ID, prompt: 'Hello there, how are you', max_tokens: 32, ...G };
  const base = (await oa.completions.create(p)).choices[0].text;
  const pen = (await oa.completions.create({ ...p, repeat_penalty: 5 })).choices[0].text;
  const fpen = (await oa.completions.create({ ...p, frequency_penalty: 1.5 })).choices[0].text;
  assert.notEqual(pen, base, 'repeat_penalty 5 did not change a looping greedy text');
  assert.notEqual(fpen, base, 'frequency_penalty 1.5 did not change a looping greedy text');
});

test('completions: greedy text equals `fucina run` on the same prompt (plain and with a repeat penalty)', async () => {
  // `fucina run` prints the prompt, then the generated bytes, then a newline;
  // the server's text is those bytes as UTF-8 (invalid bytes as U+FFFD)
  const lossy = new TextDecoder('utf-8');
  for (const [prompt, rp] of [['Hello there, how are you', 1], ['Hello there, how are you', 5], ['Once upon a time', 2]]) {
    const r = await oa.completions.create({ model: MODEL_ID, prompt, max_tokens: 24, ...G, repeat_penalty: rp });
    const out = execFileSync(BIN, ['run', model, '-p', prompt, '-n', '24', '--repeat-penalty', String(rp), '--threads', '1'],
      { stdio: ['ignore', 'pipe', 'ignore'] });
    const pre = Buffer.from(prompt);
    assert.deepEqual(out.subarray(0, pre.length), pre, 'fucina run did not echo the prompt');
    let gen = out.subarray(pre.length);
    if (gen.at(-1) === 0x0a) gen = gen.subarray(0, gen.length - 1);
    assert.equal(r.choices[0].text, lossy.decode(gen), `${JSON.stringify(prompt)} repeat_penalty ${rp}: server != fucina run`);
  }
});

/** A stop string that certainly occurs: a piece of a first greedy run's text
 * from its middle, spanning a token boundary where possible. */
async function pickStop(kind, params) {
  const r = await api(oa, kind).create({ ...params, max_tokens: 40 });
  const t = kind === 'chat' ? r.choices[0].message.content : r.choices[0].text;
  if (t.length < 10) return null;
  for (let k = Math.floor(t.length / 2); k < t.length - 4; k++) {
    const s = t.slice(k, k + 4);
    if (/\S/.test(s) && !s.includes('\ufffd') && t.indexOf(s) > 0) return { s, full: t };
  }
  return null;
}

test('stop strings: the text ends before the first occurrence; nothing of it is streamed', async () => {
  let checked = 0;
  const prompts = ['Hello there, how are you', 'Once upon a time', 'The capital of France is', 'One two three'];
  for (const chat of [false, true]) {
    const kind = chat ? 'chat' : 'completions';
    for (const p of prompts) {
      const params = chat ? { model: MODEL_ID, messages: chatMsgs(p), ...G } : { model: MODEL_ID, prompt: p, ...G };
      const pick = await pickStop(kind, params);
      if (!pick) continue;
      const { s, full } = pick;
      const want = full.slice(0, full.indexOf(s));
      for (const stop of [s, [s], ['\u0007never-1', s, 'zzzq-never', 'QQ-never-QQ']]) {
        const what = `${kind} ${JSON.stringify(p)} stop ${JSON.stringify(stop)}`;
        const plain = await api(oa, kind).create({ ...params, max_tokens: 40, stop });
        const ptext = chat ? plain.choices[0].message.content : plain.choices[0].text;
        assert.equal(ptext, want, `${what}: plain`);
        assert.equal(plain.choices[0].finish_reason, 'stop', `${what}: plain finish_reason`);
        usageAddsUp(plain.usage, what);
        const { chunks } = await rawStream(main, chat ? '/v1/chat/completions' : '/v1/completions', {
          ...params, max_tokens: 40, stop, stream_options: { include_usage: true },
        });
        const st = checkChunks(chunks, { chat, includeUsage: true, what });
        assert.equal(st.text, want, `${what}: streamed (a piece of the stop string leaked, or text is missing)`);
        assert.equal(st.finish, 'stop');
        for (const c of chunks) {
          const piece = (chat ? c.choices[0]?.delta?.content : c.choices[0]?.text) ?? '';
          assert.ok(!piece.includes(s), `${what}: a chunk holds the stop string`);
        }
        checked++;
      }
    }
  }
  assert.ok(checked >= 6, `only ${checked} stop cases could be set up (greedy texts too short)`);
});

test('UTF-8: every SSE event is valid UTF-8 on its own; streamed == plain byte for byte', async () => {
  const prompts = ['Grüße aus Köln', '日本語のテキスト', 'emoji 🙂🙃 test', 'Ελληνικά γράμματα', 'naïve café'];
  let multibyte = 0;
  let cases = 0;
  // the tiny model's greedy text loops on a word; a repetition penalty sends it
  // through its byte tokens, multi-byte characters among them
  const samplers = [
    G, { ...G, repeat_penalty: 5 }, { ...G, repeat_penalty: 2, frequency_penalty: 0.5 },
    ...[1, 2, 3].map((seed) => ({ temperature: 1, top_k: 0, top_p: 1, min_p: 0, repeat_penalty: 3, seed })),
  ];
  for (const p of prompts) {
    for (const chat of [true, false]) {
      for (const sp of samplers) {
        const body = chat
          ? { model: MODEL_ID, messages: chatMsgs(p), max_tokens: 32, ...sp }
          : { model: MODEL_ID, prompt: p, max_tokens: 32, ...sp };
        const what = `${chat ? 'chat' : 'completions'} ${JSON.stringify(p)} ${JSON.stringify(sp)}`;
        const { chunks } = await rawStream(main, chat ? '/v1/chat/completions' : '/v1/completions', body);
        const st = checkChunks(chunks, { chat, includeUsage: false, what });
        const plain = await req(main, 'POST', chat ? '/v1/chat/completions' : '/v1/completions', body);
        assert.equal(plain.status, 200, plain.text);
        const ptext = chat ? plain.json.choices[0].message.content : plain.json.choices[0].text;
        assert.ok(!LONE_SURROGATE.test(ptext), `${what}: plain text holds half a surrogate pair`);
        assert.equal(st.text, ptext, `${what}: streamed != plain (a character split between chunks becomes U+FFFD twice)`);
        if (/[^\x00-\x7f\ufffd]/.test(ptext)) multibyte++;
        cases++;
      }
    }
  }
  assert.ok(multibyte > 0, `no output among ${cases} held a multi-byte character: the check checked nothing`);
});

test('8 concurrent streams: each equals its solo run (greedy, different prompts)', async () => {
  const prompts = [
    'The capital of France is', 'Once upon a time', 'def fibonacci(n):', 'Dear Sir or Madam,',
    'In the beginning', 'Roses are red', 'SELECT * FROM', 'The quick brown fox',
  ];
  const mk = (p, i) =>
    i % 2 ? { model: MODEL_ID, messages: chatMsgs(p), max_tokens: 120, ...G } : { model: MODEL_ID, prompt: p, max_tokens: 120, ...G };
  const run = async (p, i) => {
    const kind = i % 2 ? 'chat' : 'completions';
    const chunks = await sdkStream(oa, kind, { ...mk(p, i), stream_options: { include_usage: true } });
    return checkChunks(chunks, { chat: i % 2 === 1, includeUsage: true, what: `${kind} ${p}` });
  };
  const solo = [];
  for (const [i, p] of prompts.entries()) solo.push(await run(p, i));
  const texts = new Set(solo.map((s) => s.text));
  assert.ok(texts.size > 1, 'all prompts gave one text: the comparison would not tell them apart');
  for (let round = 0; round < 2; round++) {
    const both = await Promise.all(prompts.map((p, i) => run(p, i)));
    for (const [i, b] of both.entries()) {
      assert.equal(b.text, solo[i].text, `round ${round}: ${JSON.stringify(prompts[i])} in a batch != solo`);
      assert.equal(b.finish, solo[i].finish);
      assert.equal(b.usage.completion_tokens, solo[i].usage.completion_tokens);
    }
  }
  // greedy beside sampled requests: still its solo text
  const mixed = await Promise.all(
    prompts.map((p, i) =>
      i % 2 === 0
        ? run(p, i)
        : oa.completions.create({ model: MODEL_ID, prompt: p, max_tokens: 120, temperature: 1.2, seed: i, top_k: 0 }),
    ),
  );
  for (let i = 0; i < prompts.length; i += 2) assert.equal(mixed[i].text, solo[i].text, `${prompts[i]} beside sampled requests`);
});

test('/slots: one entry per slot, idle', async () => {
  const s = await slots(main);
  assert.equal(s.length, NP);
  assert.deepEqual(s.map((x) => x.id).sort((a, b) => a - b), [...Array(NP).keys()]);
  for (const x of s) {
    assert.equal(x.n_ctx, N_CTX);
    assert.equal(x.is_processing, false);
  }
});

test('/props: a JSON object', async () => {
  const r = await req(main, 'GET', '/props');
  assert.equal(r.status, 200);
  assert.ok(r.json && typeof r.json === 'object' && !Array.isArray(r.json), r.text.slice(0, 200));
  if ('total_slots' in r.json) assert.equal(r.json.total_slots, NP);
  if (r.json.default_generation_settings?.n_ctx !== undefined) assert.equal(r.json.default_generation_settings.n_ctx, N_CTX);
});

test('/tokenize and /detokenize round trip; same ids as `fucina tokenize`', async () => {
  for (const content of ['Hello world', 'Grüße, 日本 🙂', ' leading space and\nnewline', '']) {
    const toks = await tokenize(main, content);
    assert.ok(Array.isArray(toks) && toks.every(Number.isInteger), JSON.stringify(toks));
    const r = await req(main, 'POST', '/detokenize', { tokens: toks });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.content, content);
    if (content) {
      const cli = execFileSync(BIN, ['tokenize', model, '--ids', '--no-escape', '--no-bos', '-p', content]).toString().trim();
      assert.deepEqual(toks, JSON.parse(cli), `${JSON.stringify(content)}: /tokenize != fucina tokenize`);
    }
  }
  assertError(await req(main, 'POST', '/tokenize', { content: 5 }), 400, {}, '/tokenize content 5');
  assertError(await req(main, 'POST', '/detokenize', { tokens: 'x' }), 400, {}, '/detokenize tokens "x"');
});

test('/metrics: Prometheus text; counters increase by the request', async () => {
  const r = await req(main, 'GET', '/metrics');
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type') || '', /^text\/plain/);
  const { m: m0, types } = metricsOf(r.text);
  for (const k of ['fucina_prompt_tokens_total', 'fucina_tokens_predicted_total', 'fucina_requests_total']) {
    assert.equal(types[k], 'counter', `# TYPE ${k}`);
    assert.ok(Number.isFinite(m0[k]), k);
  }
  for (const k of ['fucina_requests_processing', 'fucina_requests_deferred']) {
    assert.equal(types[k], 'gauge', `# TYPE ${k}`);
    assert.equal(m0[k], 0, `${k} at idle`);
  }
  const c = await oa.completions.create({ model: MODEL_ID, prompt: 'Counting tokens for metrics', max_tokens: 7, ...G });
  const m1 = await metrics(main);
  assert.equal(m1.fucina_requests_total - m0.fucina_requests_total, 1, 'requests_total');
  assert.equal(m1.fucina_tokens_predicted_total - m0.fucina_tokens_predicted_total, c.usage.completion_tokens, 'tokens_predicted_total');
  const dp = m1.fucina_prompt_tokens_total - m0.fucina_prompt_tokens_total;
  assert.ok(dp >= 1 && dp <= c.usage.prompt_tokens, `prompt_tokens_total grew by ${dp} for ${c.usage.prompt_tokens} prompt tokens`);
  const n = await metrics(auth).catch(() => null);
  assert.equal(n, null, '/metrics answered 200 on a server without --metrics');
});

// A schema without free strings: a random-weight model's reply under it
// always ends (no string it could run on in), so each one must match.
const SHAPE = {
  type: 'object',
  properties: {
    ok: { type: 'boolean' },
    n: { type: 'integer', minimum: -5, maximum: 42 },
    color: { enum: ['red', 'green', 'blue'] },
  },
  required: ['ok', 'n', 'color'],
  additionalProperties: false,
};
function matchesShape(text, what) {
  const v = JSON.parse(text);
  assert.deepEqual(Object.keys(v), ['ok', 'n', 'color'], `${what}: ${text}`);
  assert.equal(typeof v.ok, 'boolean', `${what}: ${text}`);
  assert.ok(Number.isInteger(v.n) && v.n >= -5 && v.n <= 42, `${what}: ${text}`);
  assert.ok(['red', 'green', 'blue'].includes(v.color), `${what}: ${text}`);
}

test('structured output: response_format json_object and json_schema (plain and streamed), grammar, json_schema', async () => {
  const base = { model: MODEL_ID, messages: chatMsgs('Answer in JSON'), temperature: 100, cache_prompt: false };
  // json_object: a reply that ends by itself is one JSON object; one cut at max_tokens is a start of one
  let ended = 0;
  for (let seed = 1; seed <= 12; seed++) {
    const r = await oa.chat.completions.create({ ...base, seed, max_tokens: 300, response_format: { type: 'json_object' } });
    const c = r.choices[0];
    if (c.finish_reason === 'stop') {
      ended++;
      const v = JSON.parse(c.message.content);
      assert.ok(v && typeof v === 'object' && !Array.isArray(v), c.message.content);
    } else {
      assert.ok(c.message.content.startsWith('{'), c.message.content);
    }
  }
  assert.ok(ended >= 1, 'no json_object reply ended by itself');
  // json_schema: every reply ends and has the schema's shape; streamed == plain for the same seed
  const rf = { type: 'json_schema', json_schema: { name: 'shape', schema: SHAPE, strict: true } };
  for (let seed = 1; seed <= 6; seed++) {
    const r = await oa.chat.completions.create({ ...base, seed, max_tokens: 200, response_format: rf });
    assert.equal(r.choices[0].finish_reason, 'stop', r.choices[0].message.content);
    matchesShape(r.choices[0].message.content, `seed ${seed}`);
    const st = await oa.chat.completions.create({ ...base, seed, max_tokens: 200, response_format: rf, stream: true });
    let text = '';
    for await (const ch of st) text += ch.choices[0]?.delta?.content || '';
    assert.equal(text, r.choices[0].message.content, `seed ${seed}: streamed != plain`);
  }
  // llama-server's fields: "json_schema" and "grammar" (GBNF), on both endpoints
  const js = await req(main, 'POST', '/v1/chat/completions', { ...base, seed: 3, max_tokens: 200, json_schema: SHAPE });
  assert.equal(js.status, 200, js.text);
  matchesShape(js.json.choices[0].message.content, 'json_schema field');
  for (const [p, body] of [
    ['/v1/chat/completions', { ...base, seed: 5 }],
    ['/v1/completions', { model: MODEL_ID, prompt: 'The answer is', temperature: 100, seed: 5 }],
  ]) {
    const g = await req(main, 'POST', p, { ...body, max_tokens: 20, grammar: 'root ::= ("yes" | "no") "!"' });
    assert.equal(g.status, 200, g.text);
    const c = g.json.choices[0];
    assert.match(p.includes('chat') ? c.message.content : c.text, /^(yes|no)!$/);
    assert.equal(c.finish_reason, 'stop');
  }
  // a bad grammar, an unsupported schema keyword, two constraints at once: 400s naming them
  assertError(await req(main, 'POST', '/v1/chat/completions', { ...base, grammar: 'root ::= "a" |' + ' [' }), 400,
    { param: 'grammar', mentions: [/line 1, column/] }, 'malformed grammar');
  assertError(await req(main, 'POST', '/v1/chat/completions', {
    ...base, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'integer', multipleOf: 3 } } },
  }), 400, { mentions: [/multipleOf/] }, 'multipleOf');
  assertError(await req(main, 'POST', '/v1/chat/completions', { ...base, grammar: 'root ::= "a"', json_schema: SHAPE }), 400,
    { mentions: [/grammar/, /json_schema/] }, 'grammar and json_schema');
});

// A tool whose arguments a random-weight model finishes quickly: an enum and a small integer range.
const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city for the next days',
    parameters: {
      type: 'object',
      properties: { city: { enum: ['Paris', 'Rome', 'Oslo'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};
const PING = { type: 'function', function: { name: 'ping', parameters: { type: 'object', properties: {}, additionalProperties: false } } };
function weatherArgs(text, what) {
  const a = JSON.parse(text);
  assert.deepEqual(Object.keys(a), ['city', 'days'], `${what}: ${text}`);
  assert.ok(['Paris', 'Rome', 'Oslo'].includes(a.city), `${what}: ${text}`);
  assert.ok(Number.isInteger(a.days) && a.days >= 1 && a.days <= 7, `${what}: ${text}`);
}

test('tools: forced calls (required, named), streamed deltas == plain, a tool result follow-up, errors', async () => {
  // the tools block takes ~600 tokens of the tiny vocabulary: a server with room for it
  const srv = await startServer('tools', model, ['-np', '2', '-c', '2048', '-t', '1']);
  const cl = client(srv);
  const base = { model: MODEL_ID, temperature: 100, max_tokens: 300, cache_prompt: false, parallel_tool_calls: false };
  const msgs = chatMsgs('What is the weather in Rome?');
  for (let seed = 1; seed <= 4; seed++) {
    const r = await cl.chat.completions.create({ ...base, seed, messages: msgs, tools: [WEATHER, PING], tool_choice: 'required' });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_[0-9a-f]{24}$/);
    if (call.function.name === 'get_weather') weatherArgs(call.function.arguments, `seed ${seed}`);
    else assert.deepEqual(JSON.parse(call.function.arguments), {}, `seed ${seed}`);
    // the SDK's stream helper assembles the deltas into the same call
    const st = cl.chat.completions.stream({ ...base, seed, messages: msgs, tools: [WEATHER, PING], tool_choice: 'required' });
    let deltas = 0;
    st.on('chunk', (ch) => { if (ch.choices[0]?.delta?.tool_calls) deltas++; });
    const fin = await st.finalChatCompletion();
    const fc = fin.choices[0];
    assert.equal(fc.finish_reason, 'tool_calls');
    assert.equal(fc.message.tool_calls.length, 1);
    assert.equal(fc.message.tool_calls[0].function.name, call.function.name, `seed ${seed}`);
    assert.equal(fc.message.tool_calls[0].function.arguments, call.function.arguments, `seed ${seed}: streamed != plain`);
    assert.ok(deltas >= 2, `seed ${seed}: ${deltas} tool-call deltas (name, then arguments growing)`);
  }
  // a named function is the one called
  const named = await cl.chat.completions.create({
    ...base, seed: 9, messages: msgs, tools: [WEATHER, PING], tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  assert.equal(named.choices[0].message.tool_calls[0].function.name, 'get_weather');
  weatherArgs(named.choices[0].message.tool_calls[0].function.arguments, 'named');
  // the call and its result go back in: the conversation renders and runs
  const call = named.choices[0].message.tool_calls[0];
  const follow = await cl.chat.completions.create({
    ...base, seed: 2, max_tokens: 8, tools: [WEATHER],
    messages: [...msgs, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }],
  });
  assert.ok(['stop', 'length', 'tool_calls'].includes(follow.choices[0].finish_reason));
  // errors name the field
  const bad = (body) => req(srv, 'POST', '/v1/chat/completions', { model: MODEL_ID, messages: msgs, max_tokens: 2, ...body });
  assertError(await bad({ tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } }), 400,
    { param: 'tools', mentions: [/nope/] }, 'unknown named tool');
  assertError(await bad({ tool_choice: 'required' }), 400, { param: 'tool_choice' }, 'required without tools');
  assertError(await bad({ tools: [{ type: 'function', function: { name: 'bad name' } }] }), 400, { param: 'tools[0]' }, 'bad name');
  assertError(await bad({ tools: [{ type: 'retrieval' }] }), 400, { param: 'tools[0]' }, 'not a function');
  assertError(await bad({ tools: [WEATHER], response_format: { type: 'json_object' } }), 400, { param: 'tools' }, 'tools + json');
  assertError(await bad({ tools: [WEATHER], tool_choice: 'sometimes' }), 400, { param: 'tool_choice' }, 'tool_choice value');
  assertError(await bad({ messages: [{ role: 'user', content: 'x', tool_calls: [] }] }), 400, { mentions: [/tool_calls/] }, 'user calls');
  await stopServer(srv);
});

// A family's own call syntax through the server: forced calls (required, named) parse and match
// the schema, the streamed deltas assemble into the same calls, and the calls and their results
// render back (the family's tool-result turns). oneCall: the family writes one call a reply.
async function familyTools(tag, makeArgs, { oneCall }) {
  const file = makeModel(path.join(tmp, `${tag}.gguf`), makeArgs);
  const srv = await startServer(`${tag}-tools`, file, ['-np', '1', '-c', '2048', '-t', '1']);
  const cl = client(srv);
  const id = (await cl.models.list()).data[0].id;
  const base = { model: id, temperature: 100, max_tokens: 400, cache_prompt: false, parallel_tool_calls: !oneCall ? false : true };
  const msgs = chatMsgs('What is the weather in Rome?');
  for (let seed = 1; seed <= 3; seed++) {
    const r = await cl.chat.completions.create({ ...base, seed, messages: msgs, tools: [WEATHER, PING], tool_choice: 'required' });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', `${tag} seed ${seed}: ${JSON.stringify(c)}`);
    assert.equal(c.message.tool_calls.length, 1, `${tag} seed ${seed}`);
    assert.equal(c.message.content, null);
    const call = c.message.tool_calls[0];
    if (call.function.name === 'get_weather') weatherArgs(call.function.arguments, `${tag} seed ${seed}`);
    else assert.deepEqual(JSON.parse(call.function.arguments), {}, `${tag} seed ${seed}`);
    const fin = await cl.chat.completions.stream({ ...base, seed, messages: msgs, tools: [WEATHER, PING], tool_choice: 'required' })
      .finalChatCompletion();
    assert.equal(fin.choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(fin.choices[0].message.tool_calls.map((t) => [t.function.name, t.function.arguments]),
      [[call.function.name, call.function.arguments]], `${tag} seed ${seed}: streamed != plain`);
  }
  const named = await cl.chat.completions.create({
    ...base, seed: 4, messages: msgs, tools: [WEATHER, PING], tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const call = named.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  weatherArgs(call.function.arguments, `${tag} named`);
  // the call and its result rendered back: the conversation runs
  const follow = await cl.chat.completions.create({
    ...base, seed: 2, max_tokens: 8, tools: [WEATHER],
    messages: [...msgs, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }],
  });
  assert.ok(['stop', 'length', 'tool_calls'].includes(follow.choices[0].finish_reason));
  return { srv, cl, id, msgs, call };
}

test('tools in Llama 3 JSON ({"name", "parameters"}): forced calls, one a reply, streamed == plain, an ipython follow-up', async () => {
  // parallel calls asked for: the family writes one call a reply, so one comes back
  const { srv, id, msgs, call } = await familyTools('llama', ['--arch', 'llama'], { oneCall: true });
  // two calls in one assistant message: the family's template cannot render them
  const two = await req(srv, 'POST', '/v1/chat/completions', {
    model: id, max_tokens: 2, tools: [WEATHER],
    messages: [...msgs, { role: 'assistant', content: null, tool_calls: [call, { ...call, id: 'call_2' }] }, { role: 'tool', tool_call_id: call.id, content: 'x' }],
  });
  assertError(two, 400, { mentions: [/one call a message/] }, 'two calls in a llama3 message');
  await stopServer(srv);
});

test('tools in Mistral\'s [TOOL_CALLS] list: forced calls, parallel calls in one list, a [TOOL_RESULTS] follow-up', async () => {
  const { srv, cl, id, msgs } = await familyTools('mistral', ['--arch', 'llama', '--chat-template', 'mistral-v3'], { oneCall: false });
  // parallel calls: one list of calls, each valid, streamed as deltas with increasing index
  let many = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const body = { model: id, temperature: 100, max_tokens: 600, seed, messages: msgs, tools: [WEATHER, PING], tool_choice: 'required' };
    const r = await cl.chat.completions.create(body);
    const c = r.choices[0];
    if (c.finish_reason !== 'tool_calls') continue; // cut by max_tokens: nothing to check
    for (const t of c.message.tool_calls) {
      if (t.function.name === 'get_weather') weatherArgs(t.function.arguments, `mistral parallel seed ${seed}`);
      else assert.deepEqual(JSON.parse(t.function.arguments), {});
    }
    many = Math.max(many, c.message.tool_calls.length);
    const fin = await cl.chat.completions.stream(body).finalChatCompletion();
    assert.deepEqual(fin.choices[0].message.tool_calls.map((t) => [t.function.name, t.function.arguments]),
      c.message.tool_calls.map((t) => [t.function.name, t.function.arguments]), `mistral parallel seed ${seed}: streamed != plain`);
    if (c.message.tool_calls.length > 1) {
      // the calls and their results go back in (OpenAI ids mapped to Mistral's 9 characters, pairs kept)
      const follow = await cl.chat.completions.create({
        model: id, max_tokens: 4, tools: [WEATHER, PING], messages: [...msgs, { role: 'assistant', content: null, tool_calls: c.message.tool_calls },
          ...c.message.tool_calls.map((t) => ({ role: 'tool', tool_call_id: t.id, content: 'ok' }))],
      });
      assert.ok(['stop', 'length', 'tool_calls'].includes(follow.choices[0].finish_reason));
    }
  }
  assert.ok(many >= 2, `no seed gave parallel calls (most: ${many})`);
  // a conversation the template refuses (two user turns in a row) is a 400 naming why
  const bad = await req(srv, 'POST', '/v1/chat/completions', {
    model: id, max_tokens: 2, tools: [WEATHER], messages: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }],
  });
  assertError(bad, 400, { mentions: [/alternation/] }, 'mistral alternation');
  await stopServer(srv);
});

test('Anthropic Messages (@anthropic-ai/sdk): create and stream, text and tool_use, stop sequences, errors', async () => {
  const srv = await startServer('messages', model, ['-np', '2', '-c', '2048', '-t', '1']);
  const an = new Anthropic({ baseURL: srv.base, apiKey: 'unused', maxRetries: 0 });
  const msgs = [{ role: 'user', content: 'Hello there' }];
  const m = await an.messages.create({ model: MODEL_ID, max_tokens: 12, temperature: 0, messages: msgs });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_/);
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  assert.ok(m.usage.input_tokens > 0 && m.usage.output_tokens <= 12, JSON.stringify(m.usage));
  const text = m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  // the same conversation through the OpenAI endpoint: the same greedy text
  const o = await client(srv).chat.completions.create({ model: MODEL_ID, max_tokens: 12, temperature: 0, messages: msgs });
  assert.equal(text, o.choices[0].message.content);
  assert.equal(m.stop_reason === 'max_tokens' ? 'length' : 'stop', o.choices[0].finish_reason);
  // streamed: the full event sequence, and the same text
  const st = an.messages.stream({ model: MODEL_ID, max_tokens: 12, temperature: 0, messages: msgs });
  const types = [];
  st.on('streamEvent', (e) => types.push(e.type));
  const fin = await st.finalMessage();
  assert.equal(types[0], 'message_start');
  assert.equal(types[types.length - 1], 'message_stop');
  assert.equal(types[types.length - 2], 'message_delta');
  if (text) for (const t of ['content_block_start', 'content_block_delta', 'content_block_stop']) assert.ok(types.includes(t), types.join());
  assert.equal(fin.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), text);
  assert.equal(fin.stop_reason, m.stop_reason);
  // a stop sequence taken from the greedy text: stop_reason stop_sequence, the sequence named, the text cut before it
  const longer = await an.messages.create({ model: MODEL_ID, max_tokens: 24, temperature: 0, messages: msgs });
  const lt = longer.content.map((b) => b.text || '').join('');
  assert.ok(lt.length >= 4, `greedy text too short for a stop sequence: ${JSON.stringify(lt)}`);
  const cut = lt.slice(lt.length >> 1, (lt.length >> 1) + 2);
  {
    const s2 = await an.messages.create({ model: MODEL_ID, max_tokens: 24, temperature: 0, messages: msgs, stop_sequences: [cut] });
    assert.equal(s2.stop_reason, 'stop_sequence');
    assert.equal(s2.stop_sequence, cut);
    assert.equal(s2.content.map((b) => b.text || '').join(''), lt.slice(0, lt.indexOf(cut)));
  }
  // tools: a forced call, plain and streamed (input_json_delta), then a tool_result follow-up
  const tools = [{ name: 'get_weather', description: 'Weather', input_schema: WEATHER.function.parameters }];
  const tq = { model: MODEL_ID, max_tokens: 300, temperature: 100, seed: 4, messages: [{ role: 'user', content: 'Weather in Oslo?' }],
    tools, tool_choice: { type: 'any', disable_parallel_tool_use: true } };
  const t1 = await an.messages.create(tq);
  assert.equal(t1.stop_reason, 'tool_use');
  const use = t1.content.find((b) => b.type === 'tool_use');
  assert.ok(use, JSON.stringify(t1.content));
  assert.equal(use.name, 'get_weather');
  assert.match(use.id, /^toolu_/);
  weatherArgs(JSON.stringify(use.input), 'tool_use');
  const ts = an.messages.stream(tq);
  let jsonDeltas = 0;
  ts.on('streamEvent', (e) => { if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') jsonDeltas++; });
  const tfin = await ts.finalMessage();
  assert.equal(tfin.stop_reason, 'tool_use');
  assert.deepEqual(tfin.content.find((b) => b.type === 'tool_use').input, use.input);
  assert.ok(jsonDeltas >= 1);
  const follow = await an.messages.create({ ...tq, max_tokens: 8, tool_choice: { type: 'auto' },
    messages: [...tq.messages, { role: 'assistant', content: [use] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '{"temp": -3}' }] }] });
  assert.equal(follow.type, 'message');
  // errors: Anthropic's shape, through the SDK's error classes
  await assert.rejects(an.messages.create({ model: MODEL_ID, messages: msgs }), (e) => e.status === 400 && /max_tokens/.test(e.message));
  await assert.rejects(an.messages.create({ model: MODEL_ID, max_tokens: 4, messages: [{ role: 'robot', content: 'x' }] }),
    (e) => e.status === 400 && /role/.test(e.message));
  await assert.rejects(an.messages.create({ model: MODEL_ID, max_tokens: 4, messages: msgs, tool_choice: { type: 'tool', name: 'nope' }, tools }),
    (e) => e.status === 400 && /nope/.test(e.message));
  const raw = await req(srv, 'POST', '/v1/messages', { model: MODEL_ID, max_tokens: 4, messages: msgs, frobnicate: 1 });
  assert.equal(raw.status, 400);
  assert.equal(raw.json.type, 'error');
  assert.equal(raw.json.error.type, 'invalid_request_error');
  assert.match(raw.json.error.message, /frobnicate/);
  await stopServer(srv);
});

test('Responses API: responses.create and responses.stream (events in order, sequence numbers), function calls, text.format, errors', async () => {
  const srv = await startServer('responses', model, ['-np', '2', '-c', '2048', '-t', '1']);
  const cl = client(srv);
  // plain: the same greedy text as the chat endpoint for the same conversation
  const r = await cl.responses.create({ model: MODEL_ID, input: 'Hello there', max_output_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  if (r.status === 'incomplete') assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  const o = await cl.chat.completions.create({ model: MODEL_ID, max_tokens: 12, temperature: 0, messages: chatMsgs('Hello there') });
  assert.equal(r.output_text, o.choices[0].message.content);
  assert.equal(r.usage.input_tokens, o.usage.prompt_tokens);
  assert.equal(r.usage.output_tokens, o.usage.completion_tokens);
  // streamed: created, in_progress, ..., completed; sequence numbers 0, 1, 2, ...
  const st = cl.responses.stream({ model: MODEL_ID, input: 'Hello there', max_output_tokens: 12, temperature: 0 });
  const evs = [];
  for await (const e of st) evs.push(e);
  const fin = await st.finalResponse();
  assert.deepEqual(evs.map((e) => e.sequence_number), evs.map((_, i) => i));
  assert.equal(evs[0].type, 'response.created');
  assert.equal(evs[1].type, 'response.in_progress');
  assert.ok(['response.completed', 'response.incomplete'].includes(evs[evs.length - 1].type));
  assert.equal(fin.output_text, r.output_text);
  const types = evs.map((e) => e.type);
  if (r.output_text) {
    const order = ['response.output_item.added', 'response.content_part.added', 'response.output_text.delta',
      'response.output_text.done', 'response.content_part.done', 'response.output_item.done'];
    let at = 0;
    for (const t of order) {
      const k = types.indexOf(t, at);
      assert.ok(k >= at, `${t} missing or out of order: ${types.join()}`);
      at = k;
    }
  }
  // function calls: forced, plain and streamed agree; then a function_call_output follow-up
  const tools = [{ type: 'function', name: 'get_weather', description: 'Weather', parameters: WEATHER.function.parameters }];
  const tq = { model: MODEL_ID, input: 'Weather in Paris?', tools, tool_choice: 'required', parallel_tool_calls: false,
    temperature: 100, seed: 6, max_output_tokens: 300 };
  const t1 = await cl.responses.create(tq);
  const fc = t1.output.find((i) => i.type === 'function_call');
  assert.ok(fc, JSON.stringify(t1.output));
  assert.equal(fc.name, 'get_weather');
  assert.match(fc.call_id, /^call_/);
  weatherArgs(fc.arguments, 'responses call');
  const ts = cl.responses.stream(tq);
  const tev = [];
  for await (const e of ts) tev.push(e.type);
  const tfin = await ts.finalResponse();
  assert.equal(tfin.output.find((i) => i.type === 'function_call').arguments, fc.arguments);
  assert.ok(tev.includes('response.function_call_arguments.delta') && tev.includes('response.function_call_arguments.done'), tev.join());
  const follow = await cl.responses.create({ model: MODEL_ID, tools, max_output_tokens: 6, temperature: 0,
    input: [{ role: 'user', content: 'Weather in Paris?' }, { type: 'function_call', call_id: fc.call_id, name: fc.name, arguments: fc.arguments },
      { type: 'function_call_output', call_id: fc.call_id, output: '{"temp": 18}' }] });
  assert.equal(follow.object, 'response');
  // text.format json_schema: the output parses and has the shape
  const js = await cl.responses.create({ model: MODEL_ID, input: 'JSON please', temperature: 100, seed: 2, max_output_tokens: 200,
    text: { format: { type: 'json_schema', name: 'shape', schema: SHAPE, strict: true } } });
  assert.equal(js.status, 'completed', JSON.stringify(js.output));
  matchesShape(js.output_text, 'responses json_schema');
  // errors
  const bad = (b) => req(srv, 'POST', '/v1/responses', { model: MODEL_ID, input: 'x', ...b });
  assertError(await bad({ previous_response_id: 'resp_1' }), 400, { param: 'previous_response_id' }, 'previous_response_id');
  assertError(await bad({ input: [{ type: 'reasoning' }] }), 400, { param: 'input[0]' }, 'unknown item');
  assertError(await bad({ tools: [{ type: 'web_search' }] }), 400, { param: 'tools[0]' }, 'web_search');
  assertError(await bad({ frobnicate: true }), 400, { param: 'frobnicate' }, 'unknown field');
  assertError(await bad({ text: { format: { type: 'json_schema', name: 'x', schema: { type: 'integer', multipleOf: 2 } } } }), 400,
    { mentions: [/multipleOf/] }, 'multipleOf');
  await stopServer(srv);
});

test('errors: bad JSON, wrong types, unknown role, unsupported fields, too long prompts', async () => {
  const chat = (body) => req(main, 'POST', '/v1/chat/completions', body);
  const cmpl = (body) => req(main, 'POST', '/v1/completions', body);
  const msgs = chatMsgs('hi');
  assertError(await chat('{"messages": [{"role": "user", "content": "hi"}'), 400, {}, 'truncated JSON');
  assertError(await chat('{"messages": [], }'), 400, {}, 'trailing comma');
  assertError(await chat('not json'), 400, {}, 'not json');
  assertError(await chat('[1, 2]'), 400, {}, 'top-level array');
  assertError(await chat({ messages: 'hi' }), 400, { param: 'messages' }, 'messages a string');
  assertError(await chat({}), 400, { mentions: ['messages'] }, 'no messages');
  assertError(await cmpl({}), 400, { mentions: ['prompt'] }, 'no prompt');
  assertError(await chat({ messages: msgs, max_tokens: 'ten' }), 400, { param: 'max_tokens' }, 'max_tokens "ten"');
  assertError(await chat({ messages: msgs, temperature: 'hot' }), 400, { param: 'temperature' }, 'temperature "hot"');
  assertError(await chat({ messages: msgs, top_k: [1] }), 400, { param: 'top_k' }, 'top_k [1]');
  assertError(await cmpl({ prompt: 'x', stop: 5 }), 400, { param: 'stop' }, 'stop 5');
  assertError(await cmpl({ prompt: 'x', stop: ['a', 'b', 'c', 'd', 'e'] }), 400, { param: 'stop' }, '5 stop strings');
  assertError(await cmpl({ prompt: 'x', stop: ['a', 5] }), 400, { param: 'stop' }, 'stop ["a", 5]');
  assertError(await cmpl({ prompt: 'x', stream: 'yes' }), 400, { param: 'stream' }, 'stream "yes"');
  assertError(await chat({ messages: [{ role: 'wizard', content: 'hi' }] }), 400, { mentions: [/wizard|role/] }, 'role wizard');
  assertError(await chat({ messages: [{ role: 'user', content: 7 }] }), 400, { mentions: [/content/] }, 'content 7');
  for (const [field, value] of [
    ['n', 2],
    ['tool_choice', 'sometimes'],
    ['response_format', { type: 'xml' }],
  ]) {
    for (const stream of [false, true]) {
      const r = await chat({ messages: msgs, [field]: value, stream });
      assertError(r, 400, { mentions: [new RegExp(`\\b${field}\\b`)] }, `${field} (stream ${stream})`);
    }
  }
  // n = 1 is what is supported, and is fine
  assert.equal((await chat({ messages: msgs, n: 1, max_tokens: 2 })).status, 200);
  // longer than the slot's context: 400 naming both sizes
  const long = Array(400).fill('the').join(' ');
  const ntok = (await tokenize(main, long)).length;
  assert.ok(ntok > N_CTX, `the long prompt is ${ntok} tokens`);
  for (const stream of [false, true]) {
    const e = assertError(await cmpl({ prompt: long, max_tokens: 4, stream }), 400, { mentions: [String(N_CTX), String(ntok)] }, `prompt of ${ntok} tokens`);
    assert.ok(e.message.length < 1000);
    const ce = assertError(await chat({ messages: chatMsgs(long), max_tokens: 4, stream }), 400, { mentions: [String(N_CTX)] }, 'long chat');
    const nums = (ce.message.match(/\d+/g) || []).map(Number);
    assert.ok(nums.some((x) => x > ntok), `the chat error names no prompt size above ${ntok}: ${ce.message}`);
  }
  // the SDK sees a BadRequestError
  await assert.rejects(
    oa.chat.completions.create({ model: MODEL_ID, messages: msgs, n: 2 }),
    (err) => err instanceof OpenAI.BadRequestError && err.status === 400,
  );
  // the server is still well
  assert.equal((await chat({ messages: msgs, max_tokens: 2 })).status, 200);
});

test('errors: 404 unknown path, 405 wrong method', async () => {
  assertError(await req(main, 'GET', '/v1/nope'), 404, {}, 'GET /v1/nope');
  assertError(await req(main, 'POST', '/v1/chat/completions/extra', { messages: chatMsgs('x') }), 404, {}, 'extra path');
  assertError(await req(main, 'GET', '/v1/chat/completions'), 405, {}, 'GET chat');
  assertError(await req(main, 'GET', '/v1/completions'), 405, {}, 'GET completions');
  assertError(await req(main, 'POST', '/v1/models', {}), 405, {}, 'POST models');
  assertError(await req(main, 'DELETE', '/health'), 405, {}, 'DELETE health');
  await assert.rejects(
    client(main, { baseURL: `${main.base}/v2` }).chat.completions.create({ model: MODEL_ID, messages: chatMsgs('x') }),
    (err) => err instanceof OpenAI.NotFoundError,
  );
});

test('web UI: GET / serves HTML by default; 404 with --no-webui', async () => {
  const r = await req(main, 'GET', '/');
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type') || '', /text\/html/);
  const n = await req(auth, 'GET', '/', undefined, { authorization: 'Bearer key-one' });
  assert.equal(n.status, 404, `--no-webui: GET / answered ${n.status}`);
});

test('API keys: missing or wrong -> 401 (AuthenticationError), either key works, /health open', async () => {
  const body = { model: MODEL_ID, messages: chatMsgs('hi'), max_tokens: 3, ...G };
  assertError(await req(auth, 'POST', '/v1/chat/completions', body), 401, {}, 'no key');
  assertError(await req(auth, 'POST', '/v1/completions', { prompt: 'x', max_tokens: 2 }), 401, {}, 'no key, completions');
  assertError(await req(auth, 'POST', '/v1/chat/completions', body, { authorization: 'Bearer key-three' }), 401, {}, 'wrong key');
  assertError(await req(auth, 'POST', '/v1/chat/completions', body, { authorization: 'key-one' }), 401, {}, 'no Bearer');
  assertError(await req(auth, 'POST', '/v1/chat/completions', body, { authorization: 'Bearer key-on' }), 401, {}, 'a prefix of a key');
  assertError(await req(auth, 'POST', '/tokenize', { content: 'x' }), 401, {}, '/tokenize without a key');
  await assert.rejects(client(auth, { apiKey: 'wrong' }).chat.completions.create(body), (err) => err instanceof OpenAI.AuthenticationError && err.status === 401);
  for (const k of ['key-one', 'key-two']) {
    const r = await client(auth, { apiKey: k }).chat.completions.create(body);
    usageAddsUp(r.usage, `key ${k}`);
    const chunks = await sdkStream(client(auth, { apiKey: k }), 'chat', body);
    checkChunks(chunks, { chat: true, includeUsage: false, what: `stream with ${k}` });
  }
  const h = await req(auth, 'GET', '/health');
  assert.equal(h.status, 200);
  assert.equal(h.json?.status, 'ok');
});

test('413: a body over --max-body', async () => {
  const hdr = { authorization: 'Bearer key-one' };
  const big = JSON.stringify({ messages: chatMsgs('x'.repeat(8000)), max_tokens: 1 });
  assertError(await req(auth, 'POST', '/v1/chat/completions', big, hdr), 413, {}, `${big.length}-byte body`);
  const ok = JSON.stringify({ messages: chatMsgs('x'.repeat(100)), max_tokens: 1 });
  assert.equal((await req(auth, 'POST', '/v1/chat/completions', ok, hdr)).status, 200);
  await assert.rejects(
    client(auth, { apiKey: 'key-one' }).chat.completions.create({ model: MODEL_ID, messages: chatMsgs('y'.repeat(8000)) }),
    (err) => err instanceof OpenAI.APIError && err.status === 413,
  );
});

test('--timeout: an idle connection is closed', async () => {
  const t0 = Date.now();
  const closed = await new Promise((resolve) => {
    const sock = net.connect(auth.port, '127.0.0.1');
    const timer = setTimeout(() => {
      sock.destroy();
      resolve(false);
    }, 10000);
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
    sock.on('error', () => {});
  });
  assert.ok(closed, 'an idle connection stayed open 10 s with --timeout 2');
  assert.ok(Date.now() - t0 >= 1500, `closed after ${Date.now() - t0} ms, before the idle timeout`);
});

test('a client breaking off mid-stream frees its slot', async () => {
  const sc = client(slow);
  const m0 = await metrics(slow);
  const ac = new AbortController();
  let got = 0;
  const stream = await sc.completions.create(
    { model: MODEL_ID, prompt: 'Once upon a time', max_tokens: 400, ...G, stream: true },
    { signal: ac.signal },
  );
  // the SDK ends the iteration quietly on an abort (or throws APIUserAbortError)
  try {
    for await (const c of stream) {
      if (c.choices[0]?.text) got++;
      if (got === 3) ac.abort();
    }
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIUserAbortError || err.name === 'AbortError', `${err}`);
  }
  assert.equal(got, 3, 'the stream ended before the abort');
  const idle = await waitIdle(slow, 3000);
  assert.deepEqual({ busy: idle.busy, processing: idle.processing, deferred: idle.deferred }, { busy: 0, processing: 0, deferred: 0 },
    `3 s after the abort: ${JSON.stringify(idle)}`);
  const m1 = await metrics(slow);
  const dt = m1.fucina_tokens_predicted_total - m0.fucina_tokens_predicted_total;
  assert.ok(dt < 400, `the aborted request still generated all ${dt} tokens`);
  // and the slot serves the next request
  const r = await sc.completions.create({ model: MODEL_ID, prompt: 'Hi', max_tokens: 3, ...G });
  usageAddsUp(r.usage, 'after the abort');
});

test('503 with Retry-After when the queue is full (-np 1 --queue 1)', async () => {
  const sc = client(slow);
  const acA = new AbortController();
  const acB = new AbortController();
  const long = { model: MODEL_ID, prompt: 'Once upon a time', max_tokens: 400, ...G };
  // A: in the one slot
  const streamA = await sc.completions.create({ ...long, stream: true }, { signal: acA.signal });
  const itA = streamA[Symbol.asyncIterator]();
  await itA.next();
  // B: waits in the queue
  const bDone = fetch(`${slow.base}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...long, stream: true }), signal: acB.signal,
  }).then(async (res) => {
    const rd = res.body.getReader();
    for (;;) if ((await rd.read()).done) break;
    return res.status;
  }).catch((e) => e.name);
  let deferred = 0;
  for (let t0 = Date.now(); Date.now() - t0 < 5000; await sleep(50)) {
    deferred = (await metrics(slow)).fucina_requests_deferred;
    if (deferred === 1) break;
  }
  assert.equal(deferred, 1, 'fucina_requests_deferred never showed the waiting request');
  const m = await metrics(slow);
  assert.equal(m.fucina_requests_processing, 1);
  // C: no room
  const r = await req(slow, 'POST', '/v1/completions', long);
  assertError(r, 503, {}, 'third request');
  const ra = r.headers.get('retry-after');
  assert.ok(ra && (/^\d+$/.test(ra) || !Number.isNaN(Date.parse(ra))), `Retry-After: ${ra}`);
  await assert.rejects(sc.chat.completions.create({ model: MODEL_ID, messages: chatMsgs('x'), max_tokens: 2 }),
    (err) => err instanceof OpenAI.APIError && err.status === 503);
  // /health stays 200 while busy
  assert.equal((await req(slow, 'GET', '/health')).status, 200);
  acA.abort();
  await itA.next().catch(() => {});
  acB.abort();
  assert.equal(await bDone, 'AbortError');
  const idle = await waitIdle(slow, 3000);
  assert.deepEqual([idle.busy, idle.processing, idle.deferred], [0, 0, 0], JSON.stringify(idle));
  const ok = await sc.completions.create({ model: MODEL_ID, prompt: 'Hi', max_tokens: 2, ...G });
  usageAddsUp(ok.usage, 'after the queue drained');
});

test('CLI: --help, bad flags, an unknown chat template', async () => {
  const help = execFileSync(BIN, ['serve', '--help']).toString();
  for (const f of ['--host', '--port', '--parallel', '--api-key', '--metrics', '--queue', '--timeout', '--max-body']) {
    assert.ok(help.includes(f), `serve --help does not mention ${f}`);
  }
  const exitOf = (args) =>
    new Promise((resolve) => {
      const p = spawn(BIN, ['serve', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      p.stderr.on('data', (d) => (err += d));
      const timer = setTimeout(() => p.kill('SIGKILL'), 20000);
      p.on('exit', (code, signal) => {
        clearTimeout(timer);
        resolve({ code, signal, err });
      });
    });
  for (const args of [
    [],
    [model, '--port', '70000'],
    [model, '-np', '0'],
    [model, '--bogus-flag'],
    [path.join(tmp, 'no-such-model.gguf'), '--port', '0'],
    [model, '--port', '0', '--chat-template', 'no-such-template-name'],
  ]) {
    const r = await exitOf(args);
    assert.ok(r.code !== 0 && r.code !== null, `serve ${args.join(' ')}: exit ${r.code ?? r.signal}`);
    assert.ok(r.err.trim().length > 0, `serve ${args.join(' ')}: no message`);
  }
});

// A plain request's client that goes away once decoding has started: the
// server checks the socket while it waits, whatever the token rate.
test('a client breaking off a plain (non-streamed) request frees its slot', async () => {
  const ac = new AbortController();
  const p = fetch(`${slow.base}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 400, ...G }), signal: ac.signal,
  }).catch((e) => e.name);
  await sleep(300);
  ac.abort();
  assert.equal(await p, 'AbortError');
  try {
    const idle = await waitIdle(slow, 3000);
    assert.deepEqual([idle.busy, idle.processing], [0, 0], `3 s after the client left: ${JSON.stringify(idle)}`);
  } finally {
    await waitIdle(slow, 15000);
  }
});

let sigtermStream = 'not run';
test('SIGTERM: in-flight streams end, exit 0; SIGINT likewise', async () => {
  // a raw stream, to see how its body ends
  const res = await fetch(`${slow.base}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 400, ...G, stream: true }),
  });
  assert.equal(res.status, 200);
  const rd = res.body.getReader();
  const dec = new TextDecoder();
  let body = dec.decode((await rd.read()).value, { stream: true });
  const ended = (async () => {
    try {
      for (;;) {
        const { done, value } = await rd.read();
        if (done) break;
        body += dec.decode(value, { stream: true });
      }
    } catch (e) {
      return `cut (${e.cause?.code ?? e.message})`;
    }
    const events = body.split('\n\n').filter(Boolean);
    const last = events.at(-1) ?? '';
    if (last === 'data: [DONE]') return 'clean: [DONE]';
    if (last.startsWith('data: {"error"')) return 'clean: an error event';
    return `clean, but the last event is ${JSON.stringify(last.slice(0, 120))}`;
  })();
  const r = await stopServer(slow, 'SIGTERM');
  assert.equal(r.code, 0, `SIGTERM with a stream in flight: exit ${r.code ?? r.signal} after ${r.ms} ms`);
  const how = await Promise.race([ended, sleep(5000).then(() => 'hung')]);
  assert.notEqual(how, 'hung', 'the in-flight stream never ended');
  sigtermStream = how;
  const a = await stopServer(auth, 'SIGINT');
  assert.equal(a.code, 0, `SIGINT: exit ${a.code ?? a.signal}`);
  const m = await stopServer(main, 'SIGTERM');
  assert.equal(m.code, 0, `SIGTERM idle: exit ${m.code ?? m.signal}`);
});

// docs/SERVE.md: on SIGTERM "a stream gets an error event and ends" (the
// server waits for the responses in flight before closing connections).
test('SIGTERM: the in-flight stream ends with an error event (or [DONE]), whole', () => {
  assert.match(sigtermStream, /^clean: /, `the stream ended: ${sigtermStream}`);
});
