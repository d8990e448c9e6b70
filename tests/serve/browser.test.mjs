// The chat page of `fucina serve` in a real browser: Debian's headless Chromium
// driven by playwright-core, against a real server on a random-weight model
// (its replies are gibberish; only their shape matters here).
//
//   node --test tests/serve/browser.test.mjs
//
// FUCINA_BIN    the fucina binary (default: ../../build/fucina from this file)
// FUCINA_SLOW_MODEL
//               the GGUF model (default: `fucina make-model --preset tiny
//               --n-vocab 151936` in a temporary folder, under a second). It must
//               be slow enough that a reply outlasts the time to watch it and to
//               press Stop: the real vocabulary's size makes each token cost a
//               few milliseconds. FUCINA_MODEL (the plain tiny model, which writes
//               2000 tokens in under half a second) is not used for that reason.
// CHROMIUM      the browser (default: /usr/bin/chromium); without it, or without
//               playwright-core (npm ci in tests/serve), the suite is skipped.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const BIN = process.env.FUCINA_BIN || path.resolve(here, '../../build/fucina');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

// require() (unlike import) honours NODE_PATH as well as tests/serve/node_modules,
// so a scratch install works too.
let chromium = null;
let skip = false;
if (!fs.existsSync(CHROMIUM)) {
  skip = `no Chromium at ${CHROMIUM} (apt-get install chromium)`;
} else {
  try {
    ({ chromium } = createRequire(import.meta.url)('playwright-core'));
  } catch {
    skip = 'playwright-core is not installed (run npm ci in tests/serve)';
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Whatever way this process ends, no server outlives it.
const children = new Set();
process.on('exit', () => { for (const c of children) c.kill('SIGKILL'); });

// The server under test, started the way a user would: --port 0, the port read
// from the line it prints when it listens, ready once /health answers 200.
async function startServer(bin, model, extra) {
  const child = spawn(bin, ['serve', model, '--port', '0', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  try {
    return await untilReady(child);
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }
}

async function untilReady(child) {
  let log = '';
  child.stdout.on('data', (d) => { log += d; });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`fucina serve did not say it listens within 60 s:\n${log}`)), 60_000);
    child.stderr.on('data', (d) => {
      log += d;
      const m = /fucina serve: listening on (http:\/\/\S+)/.exec(log);
      if (m) { clearTimeout(timer); resolve(m[1].replace(/\/+$/, '')); }
    });
    child.on('exit', (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`fucina serve exited (${code ?? sig}) before listening:\n${log}`));
    });
  });
  // A wildcard listen address is reached through the loopback.
  const base = url.replace('//0.0.0.0:', '//127.0.0.1:').replace('//[::]:', '//[::1]:');
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const r = await fetch(`${base}/health`);
      if (r.status === 200) break;
    } catch { /* not accepting yet */ }
    if (Date.now() > deadline) throw new Error(`/health never answered 200:\n${log}`);
    await sleep(100);
  }
  return { child, base, log: () => log };
}

async function stopServer(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await gone;
  clearTimeout(t);
}

// A skipped test rather than a skipped suite, so the runner counts it as skipped.
if (skip) test('fucina serve: the chat page in Chromium', { skip }, () => {});
else describe('fucina serve: the chat page in Chromium', () => {
  let tmp, model, server, browser, page;
  const pageErrors = [];
  const API_KEY = 'webui-test-key';
  const TOO_FAST = 'is the model too fast for this test? (FUCINA_SLOW_MODEL: a few ms a token or more, '
    + 'e.g. make-model --preset tiny --n-vocab 151936)';

  const messages = () => page.locator('[data-testid="message"]');
  const lastReply = () => page.locator('[data-testid="message"][data-role="assistant"]').last();

  // The state of the last reply once it is no longer streaming.
  async function replyEnds(timeout = 60_000) {
    const h = await page.waitForFunction(() => {
      const all = document.querySelectorAll('[data-testid="message"]');
      const m = all[all.length - 1];
      return m && m.dataset.role === 'assistant' && m.dataset.state !== 'streaming' && m.dataset.state;
    }, null, { timeout });
    return h.jsonValue();
  }

  async function say(text) {
    await page.fill('[data-testid="input"]', text);
    await page.press('[data-testid="input"]', 'Enter');
  }

  async function setting(id, value) {
    if (await page.locator('[data-testid="settings"]').isHidden()) await page.click('[data-testid="toggle-settings"]');
    await page.fill(`[data-testid="${id}"]`, String(value));
  }

  async function slots() {
    const r = await fetch(`${server.base}/slots`, { headers: { Authorization: `Bearer ${API_KEY}` } });
    assert.equal(r.status, 200, 'GET /slots');
    const list = await r.json();
    assert.ok(Array.isArray(list) && list.length > 0, 'GET /slots lists the slots');
    return list;
  }

  before(async () => {
    assert.ok(fs.existsSync(BIN), `no fucina binary at ${BIN} (set FUCINA_BIN)`);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fucina-webui-'));
    model = process.env.FUCINA_SLOW_MODEL;
    if (!model) {
      model = path.join(tmp, 'tiny.gguf');
      execFileSync(BIN, ['make-model', '--preset', 'tiny', '--n-vocab', '151936', model],
        { stdio: ['ignore', 'ignore', 'inherit'] });
    }
    // An API key, so the page's key field and its error display are both
    // exercised; 4096 positions, so a 2000-token reply fits a tiny model's context.
    server = await startServer(BIN, model, ['--api-key', API_KEY, '-c', '4096']);
    // Root (CI) cannot use Chromium's sandbox.
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await (await browser.newContext()).newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(`${server.base}/`);
  }, { timeout: 180_000 });

  after(async () => {
    if (browser) await browser.close().catch(() => {});
    if (server) await stopServer(server.child);
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('without the key, the server\'s error message is shown', async () => {
    const resp = page.waitForResponse((r) => r.url().endsWith('/v1/chat/completions'));
    await say('hello');
    const r = await resp;
    assert.equal(r.status(), 401);
    const { error } = await r.json();
    assert.equal(typeof error?.message, 'string');
    assert.equal(await replyEnds(), 'error');
    assert.equal(await lastReply().locator('[data-testid="message-error"]').textContent(), error.message);
    assert.equal(await page.locator('[data-testid="send"]').isVisible(), true, 'Send is back');
  });

  test('a reply streams in, ends, and shows tokens/s', async () => {
    await setting('api_key', API_KEY);
    await setting('seed', 7);
    await setting('max_tokens', 64);
    // Hot and unfiltered: a random-weight model then writes varied text rather
    // than one token over and over.
    await setting('temperature', 1.5);
    await setting('top_k', 0);
    await setting('top_p', 1);
    await setting('min_p', 0);
    await setting('system', 'You are a test.');
    // Every change of the reply's text, as the page makes it.
    await page.evaluate(() => {
      window.__seen = [];
      new MutationObserver(() => {
        const all = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
        const m = all[all.length - 1];
        if (!m) return;
        const n = m.querySelector('[data-testid="content"]').textContent.length;
        const seen = window.__seen;
        if (!seen.length || seen[seen.length - 1].n !== n || seen[seen.length - 1].state !== m.dataset.state)
          seen.push({ n, state: m.dataset.state });
      }).observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true, attributes: true });
    });
    const req = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
    // Markup in a message must come out as the characters typed.
    await say('Tell me about <b>bold</b> & <i>you</i>');
    const sent = (await req);
    assert.equal(sent.headers().authorization, `Bearer ${API_KEY}`);
    const body = sent.postDataJSON();
    assert.equal(body.stream, true);
    assert.equal(body.seed, 7);
    assert.equal(body.max_tokens, 64);
    assert.equal(body.temperature, 1.5);
    assert.equal(body.top_k, 0);
    assert.equal(body.top_p, 1);
    assert.equal(body.min_p, 0);
    assert.deepEqual(body.messages, [
      { role: 'system', content: 'You are a test.' },
      { role: 'user', content: 'Tell me about <b>bold</b> & <i>you</i>' },
    ], 'the failed exchange before is not sent');
    assert.equal(await replyEnds(), 'done');

    const seen = await page.evaluate(() => window.__seen);
    const growing = seen.filter((s) => s.state === 'streaming' && s.n > 0).map((s) => s.n);
    assert.ok(growing.length >= 2,
      `the reply grew in steps while streaming (lengths seen: ${JSON.stringify(seen)}); ${TOO_FAST}`);
    for (let i = 1; i < growing.length; i++) assert.ok(growing[i] > growing[i - 1], 'and only grew');
    const final = await lastReply().locator('[data-testid="content"]').textContent();
    assert.ok(final.length >= growing[growing.length - 1] && final.length > 0);
    assert.match(await lastReply().locator('[data-testid="stats"]').textContent(), /\d+(\.\d+)? tokens\/s/);

    const userMsg = page.locator('[data-testid="message"][data-role="user"]').last().locator('[data-testid="content"]');
    assert.equal(await userMsg.textContent(), 'Tell me about <b>bold</b> & <i>you</i>');
    assert.equal(await page.locator('[data-testid="content"] *').count(), 0, 'no element was made from message text');
  });

  test('split anywhere, the stream still reads as the server sent it', async () => {
    // The same real response, handed to the page three bytes at a time (events,
    // lines, and UTF-8 sequences when the reply has any, cut in the middle), the
    // bytes kept to compare.
    await page.evaluate(() => {
      const orig = window.fetch;
      window.__raw = [];
      window.fetch = async (...args) => {
        const res = await orig(...args);
        if (!String(args[0]).includes('chat/completions') || !res.body) return res;
        const reader = res.body.getReader();
        const body = new ReadableStream({
          async pull(ctrl) {
            const r = await reader.read();
            if (r.done) { ctrl.close(); return; }
            window.__raw.push(r.value);
            for (let i = 0; i < r.value.length; i += 3) ctrl.enqueue(r.value.slice(i, i + 3));
          },
          cancel(reason) { return reader.cancel(reason); },
        });
        return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
      };
    });
    await say('Once more, in pieces: é ü 漢字');
    assert.equal(await replyEnds(), 'done');
    const raw = await page.evaluate(() => {
      const all = new Uint8Array(window.__raw.reduce((n, c) => n + c.length, 0));
      let o = 0;
      for (const c of window.__raw) { all.set(c, o); o += c.length; }
      return new TextDecoder().decode(all);
    });
    let text = '';
    let timings = null;
    let finishes = 0;
    let done = false;
    for (const line of raw.split(/\r?\n/)) {
      if (!line.startsWith('data:')) continue;
      const d = line.slice(5).trim();
      if (d === '[DONE]') { done = true; continue; }
      const c = JSON.parse(d);
      text += c.choices?.[0]?.delta?.content ?? '';
      if (c.choices?.[0]?.finish_reason) { finishes++; timings = c.timings; }
    }
    assert.ok(done, 'the stream ended with [DONE]');
    assert.equal(finishes, 1, 'one finish_reason');
    assert.equal(typeof timings?.predicted_per_second, 'number', 'the final chunk has timings');
    assert.equal(await lastReply().locator('[data-testid="content"]').textContent(), text);
    assert.ok((await lastReply().locator('[data-testid="stats"]').textContent())
      .includes(`${timings.predicted_per_second.toFixed(1)} tokens/s`));
    await page.reload(); // the page's own fetch again
  });

  test('Stop ends a long reply, and the server stops generating it', async () => {
    const MAX = 2000;
    await setting('max_tokens', MAX);
    // How the request ends, as the browser saw it: aborted (failed) or read to the end.
    let ended = null;
    const chat = (r) => r.url().endsWith('/v1/chat/completions');
    const onFailed = (r) => { if (chat(r)) ended ??= 'aborted'; };
    const onFinished = (r) => { if (chat(r)) ended ??= 'finished'; };
    page.on('requestfailed', onFailed);
    page.on('requestfinished', onFinished);
    await say('Now a long one');
    await page.waitForFunction(() => {
      const all = document.querySelectorAll('[data-testid="message"]');
      const m = all[all.length - 1];
      return m.dataset.state !== 'streaming' || m.querySelector('[data-testid="content"]').textContent.length > 0;
    }, null, { timeout: 30_000 });
    const busy = (await slots()).filter((s) => s.is_processing);
    assert.equal(await lastReply().getAttribute('data-state'), 'streaming', `the reply is complete before Stop; ${TOO_FAST}`);
    await page.click('[data-testid="stop"]', { timeout: 5_000 });
    assert.equal(busy.length, 1, `one slot was generating the reply when Stop was pressed; ${TOO_FAST}`);
    const state = await replyEnds(5_000);
    assert.notEqual(state, 'done', `the reply was complete before Stop; ${TOO_FAST}`);
    assert.equal(state, 'stopped');
    for (let i = 0; ended === null && i < 50; i++) await sleep(100);
    page.off('requestfailed', onFailed);
    page.off('requestfinished', onFinished);
    assert.equal(ended, 'aborted', 'the browser ended the request before its end');
    assert.equal(await page.locator('[data-testid="send"]').isVisible(), true, 'Send is back');
    assert.ok((await lastReply().locator('[data-testid="content"]').textContent()).length > 0, 'the partial reply stays');
    const deadline = Date.now() + 5_000;
    let now;
    while ((now = await slots()).some((s) => s.is_processing)) {
      assert.ok(Date.now() < deadline, 'no slot is processing within 5 s of Stop');
      await sleep(100);
    }
    // The slot's cache holds the prompt and what was generated: far short of the
    // whole reply, so the server stopped, rather than finished, it.
    const slot = now.find((s) => s.id === busy[0].id);
    assert.ok(slot.n_cache < busy[0].n_prompt_tokens + MAX,
      `the slot kept ${slot.n_cache} positions of a ${busy[0].n_prompt_tokens}-token prompt + ${MAX}`);
  });

  test('the conversation and the settings survive a reload', async () => {
    const before = await messages().evaluateAll((els) => els.map((e) => [e.dataset.role, e.dataset.state,
      e.querySelector('[data-testid="content"]').textContent]));
    assert.equal(before.length, 8);
    await page.reload();
    const after = await messages().evaluateAll((els) => els.map((e) => [e.dataset.role, e.dataset.state,
      e.querySelector('[data-testid="content"]').textContent]));
    assert.deepEqual(after, before);
    // With the key kept, the page now reads the model's name too.
    const models = await (await fetch(`${server.base}/v1/models`, { headers: { Authorization: `Bearer ${API_KEY}` } })).json();
    await page.waitForFunction((id) => document.querySelector('[data-testid="model"]').textContent.includes(id),
      models.data[0].id, { timeout: 5_000 });
    assert.equal(await page.inputValue('[data-testid="seed"]'), '7');
    assert.equal(await page.inputValue('[data-testid="max_tokens"]'), '2000');
    assert.equal(await page.inputValue('[data-testid="system"]'), 'You are a test.');
    assert.equal(await page.inputValue('[data-testid="api_key"]'), API_KEY);
  });

  test('New chat clears the conversation, for good', async () => {
    await page.click('[data-testid="new-chat"]');
    assert.equal(await messages().count(), 0);
    await page.reload();
    assert.equal(await messages().count(), 0);
    assert.equal(await page.inputValue('[data-testid="seed"]'), '7', 'the settings stay');
  });

  test('a reply the server ends early says why, and keeps what came', async (t) => {
    await setting('max_tokens', 2000);
    await say('One more long one');
    await page.waitForFunction(() => {
      const all = document.querySelectorAll('[data-testid="message"]');
      const m = all[all.length - 1];
      return m.dataset.state !== 'streaming' || m.querySelector('[data-testid="content"]').textContent.length > 0;
    }, null, { timeout: 30_000 });
    assert.equal(await lastReply().getAttribute('data-state'), 'streaming', `the reply is complete already; ${TOO_FAST}`);
    // SIGTERM ends the requests in flight: the page must show the stream's error
    // event (or the cut connection), not hang or pass it off as a reply.
    await stopServer(server.child);
    assert.equal(await replyEnds(10_000), 'error');
    const why = await lastReply().locator('[data-testid="message-error"]').textContent();
    assert.ok(why.trim().length > 0, 'the error is said');
    t.diagnostic(`shown: ${why}`);
    assert.ok((await lastReply().locator('[data-testid="content"]').textContent()).length > 0, 'the partial reply stays');
    assert.equal(await page.locator('[data-testid="send"]').isVisible(), true, 'Send is back');
  });

  test('no script error on the page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
