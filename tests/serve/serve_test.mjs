// Drives `nxrt serve` with the official OpenAI client: chat and completions, streaming and not, models,
// the error cases, concurrency without cross-talk, prefix reuse, client disconnect, queue full, slow
// clients, SIGTERM drain. Exits 1 on any mismatch.
//   usage: node serve_test.mjs path/to/nxrt MODEL_DIR
import { spawn } from 'node:child_process';
import net from 'node:net';
import OpenAI from 'openai';

const [nxrt, modelDir] = process.argv.slice(2);
if (!nxrt || !modelDir) {
  console.error('usage: node serve_test.mjs path/to/nxrt MODEL_DIR');
  process.exit(2);
}

let pass = 0, fail = 0;
function check(name, ok, detail = '') {
  if (ok) pass++;
  else {
    fail++;
    console.log(`FAIL ${name}${detail ? ': ' + detail : ''}`);
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Starts a server on a free loopback port; resolves once it prints the port.
function startServer(args, env = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(nxrt, ['serve', modelDir, '--port', '0', ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    const exited = new Promise((r) => proc.on('exit', (code, signal) => r({ code, signal })));
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/[\d.]+:(\d+)/);
      if (m && !proc.port) {
        proc.port = Number(m[1]);
        resolve({ proc, port: proc.port, base: `http://127.0.0.1:${proc.port}`, exited, log: () => log });
      }
    });
    proc.on('error', reject);
    setTimeout(() => reject(new Error('server did not start: ' + log)), 20000);
  });
}

async function waitReady(base, timeoutMs = 30000) {
  const seen = new Set();
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    try {
      const r = await fetch(base + '/health');
      seen.add(r.status);
      if (r.status === 200) return seen;
    } catch { /* not listening yet */ }
    await sleep(25);
  }
  throw new Error('server not ready; /health answered ' + [...seen].join(','));
}

async function metric(base, name) {
  const text = await (await fetch(base + '/metrics')).text();
  let total = 0, found = false;
  for (const line of text.split('\n')) {
    if (line.startsWith(name + ' ') || line.startsWith(name + '{')) {
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
      found = true;
    }
  }
  return found ? total : NaN;
}

async function expectError(name, promise, status, test = () => true) {
  try {
    await promise;
    check(name, false, 'no error');
  } catch (e) {
    check(name, e.status === status && test(e), `status ${e.status} ${e.message}`);
    return e;
  }
}

async function collect(stream) {
  let text = '', finish = null, usage = null, chunks = 0, first = null;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      if (first === null && ch.delta) first = ch.delta;
      text += ch.delta ? (ch.delta.content ?? '') : (ch.text ?? '');
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { text, finish, usage, chunks, first };
}

const user = (content) => [{ role: 'user', content }];
const prompts = ['Hello there', 'Write a poem about rivers', 'abc', 'The quick brown fox', 'Tell me a story', '1 2 3 4 5 6 7'];

// ------------------------------------------------------------------ server A: the API
{
  const srv = await startServer(['--api-key', 'sekrit', '--max-batch', '4', '--max-queue', '8', '--ctx', '256',
    '--max-body-bytes', '65536', '--max-n', '2', '--model-name', 'tiny'],
    { NXRT_SERVE_TEST_STEP_DELAY_MS: '3' });  // steps slower than requests arrive: they overlap
  await waitReady(srv.base);
  const client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'sekrit', maxRetries: 0 });

  const models = await client.models.list();
  check('models lists the served model', models.data.length === 1 && models.data[0].id === 'tiny' && models.data[0].object === 'model');
  const one = await client.models.retrieve('tiny');
  check('models/{id}', one.id === 'tiny');

  // Chat, not streaming.
  const req = { model: 'tiny', messages: user('Hello there'), temperature: 0, max_tokens: 12 };
  const r = await client.chat.completions.create(req);
  check('chat object', r.object === 'chat.completion' && r.id.startsWith('chatcmpl-') && r.model === 'tiny' &&
    Number.isInteger(r.created), JSON.stringify(r));
  check('chat choice', r.choices.length === 1 && r.choices[0].message.role === 'assistant' &&
    typeof r.choices[0].message.content === 'string' && ['stop', 'length'].includes(r.choices[0].finish_reason), JSON.stringify(r.choices));
  check('chat usage', r.usage.prompt_tokens > 0 && r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12 &&
    r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, JSON.stringify(r.usage));
  check('length finish at max_tokens', r.choices[0].finish_reason !== 'length' || r.usage.completion_tokens === 12);

  // Chat, streaming, with usage: the same text (greedy).
  const s = await collect(await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
  check('chat stream text equals non-stream', s.text === r.choices[0].message.content, `${JSON.stringify(s.text)} vs ${JSON.stringify(r.choices[0].message.content)}`);
  check('chat stream first delta has the role', s.first && s.first.role === 'assistant');
  check('chat stream finish and usage', s.finish === r.choices[0].finish_reason && s.usage &&
    s.usage.completion_tokens === r.usage.completion_tokens && s.usage.prompt_tokens === r.usage.prompt_tokens, JSON.stringify(s.usage));
  const s2 = await collect(await client.chat.completions.create({ ...req, stream: true }));
  check('no usage chunk without include_usage', s2.usage === null && s2.text === s.text);

  // Completions.
  const creq = { model: 'tiny', prompt: 'Once upon a time', temperature: 0, max_tokens: 10 };
  const c = await client.completions.create(creq);
  check('completion object', c.object === 'text_completion' && c.id.startsWith('cmpl-') && typeof c.choices[0].text === 'string' &&
    ['stop', 'length'].includes(c.choices[0].finish_reason) && c.usage.prompt_tokens > 0, JSON.stringify(c));
  const cs = await collect(await client.completions.create({ ...creq, stream: true, stream_options: { include_usage: true } }));
  check('completion stream text equals non-stream', cs.text === c.choices[0].text && cs.usage &&
    cs.usage.completion_tokens === c.usage.completion_tokens, `${JSON.stringify(cs.text)} vs ${JSON.stringify(c.choices[0].text)}`);
  const ids = await client.completions.create({ model: 'tiny', prompt: [40, 41, 42, 43, 44], temperature: 0, max_tokens: 4 });
  check('completion from token ids', ids.usage.prompt_tokens === 5 && typeof ids.choices[0].text === 'string');

  // Content parts are joined text; system / assistant / tool roles render.
  const parts = await client.chat.completions.create({ model: 'tiny', temperature: 0, max_tokens: 4, messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'there' }] },
    { role: 'assistant', content: 'Hi.' }, { role: 'user', content: 'More?' }] });
  check('roles and content parts', parts.usage.prompt_tokens > r.usage.prompt_tokens);

  // Stop strings: stop at a piece of the greedy text; the reply is what came before it.
  const long = await client.completions.create({ ...creq, max_tokens: 40, ignore_eos: true });
  const full = long.choices[0].text;
  if (full.length >= 6) {
    const stop = full.slice(3, 5);
    const cut = await client.completions.create({ ...creq, max_tokens: 40, ignore_eos: true, stop: [stop] });
    check('stop string cuts the text', cut.choices[0].text === full.slice(0, full.indexOf(stop)) && cut.choices[0].finish_reason === 'stop',
      `${JSON.stringify(cut.choices[0].text)} stop ${JSON.stringify(stop)} full ${JSON.stringify(full)}`);
    const cuts = await collect(await client.completions.create({ ...creq, max_tokens: 40, ignore_eos: true, stop: stop, stream: true }));
    check('stop string when streaming', cuts.text === full.slice(0, full.indexOf(stop)) && cuts.finish === 'stop');
  } else {
    check('greedy text long enough for the stop test', false, JSON.stringify(full));
  }

  // Sampling: a seed repeats; logprobs; n choices.
  const seeded = { model: 'tiny', messages: user('Tell me a story'), temperature: 1.2, top_p: 0.9, top_k: 50, min_p: 0.01, seed: 42,
    max_tokens: 16, presence_penalty: 0.5, frequency_penalty: 0.3, repetition_penalty: 1.1, ignore_eos: true };
  const a1 = await client.chat.completions.create(seeded), a2 = await client.chat.completions.create(seeded);
  check('a seed repeats the sample', a1.choices[0].message.content === a2.choices[0].message.content);
  const lp = await client.chat.completions.create({ ...req, logprobs: true, top_logprobs: 3 });
  const content = lp.choices[0].logprobs && lp.choices[0].logprobs.content;
  check('chat logprobs', Array.isArray(content) && content.length === lp.usage.completion_tokens &&
    content.every((t) => t.logprob <= 0 && t.top_logprobs.length === 3 && t.top_logprobs[0].logprob >= t.logprob - 1e-9),
    JSON.stringify(lp.choices[0].logprobs).slice(0, 300));
  const clp = await client.completions.create({ ...creq, logprobs: 2 });
  check('completion logprobs', clp.choices[0].logprobs && clp.choices[0].logprobs.token_logprobs.length === clp.usage.completion_tokens);
  const two = await client.chat.completions.create({ ...seeded, n: 2 });
  check('n = 2 choices', two.choices.length === 2 && two.choices[1].index === 1 && two.usage.completion_tokens === 32);

  // Concurrent greedy requests give what each gives alone (no cross-talk between rows).
  const alone = [];
  for (const p of prompts) alone.push((await client.chat.completions.create({ model: 'tiny', messages: user(p), temperature: 0, max_tokens: 24, ignore_eos: true })).choices[0].message.content);
  const [steps0, rows0] = [await metric(srv.base, 'nxrt_decode_steps_total'), await metric(srv.base, 'nxrt_decode_rows_total')];
  const together = await Promise.all(prompts.map(async (p) => (await collect(await client.chat.completions.create(
    { model: 'tiny', messages: user(p), temperature: 0, max_tokens: 24, ignore_eos: true, stream: true }))).text));
  check('concurrent = alone', together.every((t, i) => t === alone[i]), JSON.stringify({ alone, together }));
  const [steps1, rows1] = [await metric(srv.base, 'nxrt_decode_steps_total'), await metric(srv.base, 'nxrt_decode_rows_total')];
  // 6 requests of 24 tokens on 4 rows: shared decode steps, so far fewer steps than rows decoded.
  check('concurrent requests share decode steps', rows1 - rows0 === 6 * 23 && (rows1 - rows0) / (steps1 - steps0) > 1.5,
    `${rows1 - rows0} rows in ${steps1 - steps0} steps`);

  // Prefix reuse: the next turn of a conversation prefills only its new tokens.
  const before = await metric(srv.base, 'nxrt_prefix_cache_hit_tokens_total');
  const turn1 = await client.chat.completions.create({ model: 'tiny', messages: user('Remember the number 7.'), temperature: 0, max_tokens: 8 });
  const turn2 = await client.chat.completions.create({ model: 'tiny', temperature: 0, max_tokens: 8, messages: [
    ...user('Remember the number 7.'), { role: 'assistant', content: turn1.choices[0].message.content }, ...user('Which number?')] });
  const after = await metric(srv.base, 'nxrt_prefix_cache_hit_tokens_total');
  check('prefix reuse counted', after - before >= turn1.usage.prompt_tokens - 1 && turn2.usage.prompt_tokens_details.cached_tokens > 0,
    `hits ${before} -> ${after}, turn 1 prompt ${turn1.usage.prompt_tokens}, cached ${JSON.stringify(turn2.usage.prompt_tokens_details)}`);

  // Errors through the client.
  const msgOf = (e) => (e.error && e.error.message) || e.message;
  await expectError('wrong field type -> 400', client.chat.completions.create({ ...req, temperature: 'hot' }), 400,
    (e) => e.param === 'temperature' && e.type === 'invalid_request_error' && e.code === 'invalid_type');
  await expectError('missing messages -> 400', client.chat.completions.create({ model: 'tiny', max_tokens: 3 }), 400,
    (e) => e.param === 'messages' && e.code === 'missing_required_parameter');
  await expectError('bad message -> 400', client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 5 }] }), 400,
    (e) => e.param === 'messages[0].content');
  await expectError('context overflow -> 400 naming the numbers', client.chat.completions.create({ ...req, max_tokens: 1000 }), 400,
    (e) => e.code === 'context_length_exceeded' && /maximum context length is 256 tokens/.test(msgOf(e)) && /1000 in the completion/.test(msgOf(e)));
  await expectError('unknown model -> 404', client.chat.completions.create({ ...req, model: 'gpt-4' }), 404, (e) => e.code === 'model_not_found');
  await expectError('body over the limit -> 413', client.chat.completions.create({ ...req, messages: user('x'.repeat(70000)) }), 413);
  await expectError('wrong API key -> 401', new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'nope', maxRetries: 0 }).models.list(), 401,
    (e) => e.code === 'invalid_api_key');
  const noKey = await fetch(srv.base + '/v1/models');
  check('missing API key -> 401', noKey.status === 401 && (await noKey.json()).error.code === 'invalid_api_key');
  // Malformed JSON cannot be sent through the client: raw HTTP.
  const bad = await fetch(srv.base + '/v1/chat/completions', { method: 'POST', body: '{"messages": [', headers: { Authorization: 'Bearer sekrit', 'Content-Type': 'application/json' } });
  const badBody = await bad.json();
  check('malformed JSON -> 400 error object', bad.status === 400 && badBody.error && 'message' in badBody.error && 'type' in badBody.error &&
    'param' in badBody.error && 'code' in badBody.error && badBody.error.code === 'invalid_json', JSON.stringify(badBody));
  const health = await fetch(srv.base + '/health');
  check('/health needs no key', health.status === 200);

  // Metrics.
  const text = await (await fetch(srv.base + '/metrics')).text();
  for (const name of ['nxrt_http_requests_total{path="/v1/chat/completions",code="200"}', 'nxrt_http_requests_total{path="/v1/chat/completions",code="400"}',
    'nxrt_prompt_tokens_total', 'nxrt_generation_tokens_total', 'nxrt_time_to_first_token_seconds_bucket', 'nxrt_inter_token_latency_seconds_count',
    'nxrt_queue_depth', 'nxrt_active_sequences', 'nxrt_kv_cache_usage_ratio']) {
    check('metrics has ' + name, text.includes(name));
  }
  check('generated tokens counted', (await metric(srv.base, 'nxrt_generation_tokens_total')) > 100);
  srv.proc.kill('SIGTERM');
  const ex = await srv.exited;
  check('server A exits 0 on SIGTERM', ex.code === 0, JSON.stringify(ex));
}

// ------------------------------------------------------------------ server B: one row, slow steps
{
  const srv = await startServer(['--max-batch', '1', '--max-queue', '1', '--ctx', '512', '--timeout', '1', '--drain-timeout', '20'],
    { NXRT_SERVE_TEST_LOAD_DELAY_MS: '1000', NXRT_SERVE_TEST_STEP_DELAY_MS: '25' });
  const seen = await waitReady(srv.base);
  check('/health is 503 while loading, then 200', seen.has(503) && seen.has(200), [...seen].join(','));
  const client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  const model = (await client.models.list()).data[0].id;
  const long = { model, messages: user('go'), temperature: 0, max_tokens: 400, ignore_eos: true, stream: true };

  // Row busy + one queued -> the next gets 429 with Retry-After.
  const s1 = await client.chat.completions.create(long);
  const it1 = s1[Symbol.asyncIterator]();
  await it1.next();
  const queued = client.chat.completions.create({ ...long, max_tokens: 5, stream: false });
  await sleep(100);
  try {
    await client.chat.completions.create({ ...long, max_tokens: 5, stream: false });
    check('queue full -> 429', false, 'accepted');
  } catch (e) {
    check('queue full -> 429 with Retry-After', e.status === 429 && e.headers && e.headers.get('retry-after') === '1' && e.code === 'queue_full',
      `status ${e.status}`);
  }
  // The client goes away: its request is cancelled, its row freed, the queued request runs.
  await it1.next();
  s1.controller.abort();
  const q = await queued;
  check('queued request runs after the disconnect', q.usage.completion_tokens === 5);
  let cancelled = 0;
  for (let i = 0; i < 80 && !(cancelled >= 1); i++) {
    cancelled = await metric(srv.base, 'nxrt_request_finish_total{reason="cancelled"}');
    await sleep(50);
  }
  check('client disconnect cancels the request', cancelled >= 1, String(cancelled));
  check('no sequence left running', (await metric(srv.base, 'nxrt_active_sequences')) === 0);
  // The same for a non-streaming request: the whitespace heartbeat finds the client gone.
  const ac = new AbortController();
  const pending = client.chat.completions.create({ ...long, stream: false }, { signal: ac.signal }).catch((e) => e);
  await sleep(300);
  ac.abort();
  await pending;
  let cancelled2 = cancelled;
  for (let i = 0; i < 100 && cancelled2 < cancelled + 1; i++) {
    await sleep(50);
    cancelled2 = await metric(srv.base, 'nxrt_request_finish_total{reason="cancelled"}');
  }
  check('non-streaming disconnect cancels the request', cancelled2 >= cancelled + 1 &&
    (await metric(srv.base, 'nxrt_active_sequences')) === 0, `${cancelled} -> ${cancelled2}`);

  // Slow clients: half-sent requests are cut off after --timeout and do not hold the workers.
  const sockets = [];
  for (let i = 0; i < 16; i++) {
    const sock = net.connect(srv.port, '127.0.0.1');
    sock.on('error', () => {});
    sock.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"pro');
    // Cut off: answered (httplib's 400 after the read timeout) or closed, whichever comes first.
    sockets.push(new Promise((r) => { sock.on('data', () => r(Date.now())); sock.on('close', () => r(Date.now())); }));
  }
  const t0 = Date.now();
  const closed = await Promise.race([Promise.all(sockets), sleep(8000).then(() => null)]);
  check('slow clients are cut off by the timeout', closed !== null && Math.max(...closed) - t0 < 6000);
  const h = await fetch(srv.base + '/health');
  check('server answers after slow clients', h.status === 200);

  // SIGTERM: stop accepting, let the running request finish, exit 0.
  const s4 = await client.chat.completions.create({ ...long, max_tokens: 30 });
  const it4 = s4[Symbol.asyncIterator]();
  const firstChunk = await it4.next();
  srv.proc.kill('SIGTERM');
  await sleep(150);
  let refused = false;
  try {
    const r = await fetch(srv.base + '/health');
    refused = r.status === 503;
  } catch { refused = true; }
  check('draining server refuses new work', refused);
  let text = firstChunk.value.choices[0].delta.content ?? '', finish = null, n = 0;
  for (let r = await it4.next(); !r.done; r = await it4.next()) {
    for (const ch of r.value.choices) { text += ch.delta.content ?? ''; if (ch.finish_reason) finish = ch.finish_reason; }
    n++;
  }
  check('in-flight request finishes during the drain', finish === 'length', `finish ${finish}`);
  const ex = await srv.exited;
  check('server B exits 0 after draining', ex.code === 0, JSON.stringify(ex));
}

// ------------------------------------------------------------------ server C: the drain deadline
{
  const srv = await startServer(['--drain-timeout', '1'], { NXRT_SERVE_TEST_STEP_DELAY_MS: '50' });
  await waitReady(srv.base);
  const client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  const s = await client.completions.create({ model: (await client.models.list()).data[0].id, prompt: 'x', max_tokens: 1000, ignore_eos: true, stream: true, temperature: 0 });
  const it = s[Symbol.asyncIterator]();
  await it.next();
  const t0 = Date.now();
  srv.proc.kill('SIGTERM');
  try { for (let r = await it.next(); !r.done; r = await it.next()); } catch { /* the stream may end with an error event */ }
  const ex = await srv.exited;
  check('drain deadline: exits 0 within it', ex.code === 0 && Date.now() - t0 < 5000, `${JSON.stringify(ex)} after ${Date.now() - t0} ms`);
}

// ------------------------------------------------------------------ server D: a float16 KV cache
{
  const srv = await startServer(['--kv-dtype', 'float16', '--max-batch', '2', '--ctx', '128']);
  await waitReady(srv.base);
  const client = new OpenAI({ baseURL: srv.base + '/v1', apiKey: 'unused', maxRetries: 0 });
  const model = (await client.models.list()).data[0].id;
  const [a, b] = await Promise.all(['hello', 'a longer prompt than the other'].map((prompt) =>
    client.completions.create({ model, prompt, max_tokens: 12, ignore_eos: true, temperature: 0 })));
  check('--kv-dtype float16: two rows complete', a.choices[0].finish_reason === 'length' && b.choices[0].finish_reason === 'length' &&
        a.usage.completion_tokens === 12 && b.usage.completion_tokens === 12, JSON.stringify([a.usage, b.usage]));
  srv.proc.kill('SIGTERM');
  const ex = await srv.exited;
  check('--kv-dtype float16: server exits 0', ex.code === 0, JSON.stringify(ex));
}

console.log(`serve_test: ${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
