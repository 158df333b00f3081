// Load test of a running `nxrt serve` with the official OpenAI client (bench/serve_load.sh starts the
// server): one fixed list of greedy streaming completion requests served by 1, 4, 16 and 64 concurrent
// clients. Concurrency 1 is the serial anchor: every other level's texts must equal it (no cross-talk
// between rows). Per level: p50 / p99 time to first token and inter-token latency, aggregate generated
// tokens/s and the speedup over serial. Bounded: stops after the last level.
//   usage: node serve_load.mjs BASE_URL [REQUESTS=64] [MAX_TOKENS=32] [LEVELS=1,4,16,64]
import OpenAI from 'openai';

const [base, nReq = '64', maxTok = '32', levelsArg = '1,4,16,64'] = process.argv.slice(2);
if (!base) {
  console.error('usage: node serve_load.mjs BASE_URL [REQUESTS] [MAX_TOKENS] [LEVELS]');
  process.exit(2);
}
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 600000 });
const model = (await client.models.list()).data[0].id;
const words = ['river', 'stone', 'cloud', 'lamp', 'forest', 'engine', 'paper', 'signal'];
const requests = Array.from({ length: Number(nReq) }, (_, i) =>
  `Request ${i}: tell me about the ${words[i % words.length]} and the ${words[(i * 3 + 1) % words.length]}.`);

async function one(prompt) {
  const t0 = performance.now();
  const stream = await client.completions.create({ model, prompt, temperature: 0,
    max_tokens: Number(maxTok), ignore_eos: true, stream: true, stream_options: { include_usage: true } });
  let text = '', ttft = null, last = null, tokens = 0;
  const itl = [];
  for await (const c of stream) {
    const now = performance.now();
    if (c.usage) tokens = c.usage.completion_tokens;
    const piece = c.choices.length ? c.choices[0].text ?? '' : '';
    if (piece) {
      if (ttft === null) ttft = now - t0;
      else itl.push(now - last);
      last = now;
      text += piece;
    }
  }
  return { text, ttft, itl, tokens };
}

function pct(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

const results = [];
let anchor = null;
for (const level of levelsArg.split(',').map(Number)) {
  const out = new Array(requests.length);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: level }, async () => {
    while (next < requests.length) {
      const i = next++;
      out[i] = await one(requests[i]);
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  const tokens = out.reduce((a, r) => a + r.tokens, 0);
  const row = {
    concurrency: level,
    requests: requests.length,
    completed: out.filter((r) => r && r.tokens === Number(maxTok)).length,
    ttft_p50_ms: pct(out.map((r) => r.ttft), 50),
    ttft_p99_ms: pct(out.map((r) => r.ttft), 99),
    itl_p50_ms: pct(out.flatMap((r) => r.itl), 50),
    itl_p99_ms: pct(out.flatMap((r) => r.itl), 99),
    tok_s: tokens / wall,
    wall_s: wall,
  };
  if (level === 1 || !anchor) anchor = { texts: out.map((r) => r.text), tok_s: row.tok_s };
  row.same_text_as_serial = out.filter((r, i) => r.text === anchor.texts[i]).length;
  row.speedup = row.tok_s / anchor.tok_s;
  results.push(row);
  console.error(JSON.stringify(row));
}
const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
console.log('| concurrency | completed | same text as serial | TTFT p50 / p99 ms | ITL p50 / p99 ms | generated tok/s | vs serial |');
console.log('|---|---|---|---|---|---|---|');
for (const r of results) {
  console.log(`| ${r.concurrency} | ${r.completed}/${r.requests} | ${r.same_text_as_serial}/${r.requests} | ${f(r.ttft_p50_ms)} / ${f(r.ttft_p99_ms)} | ` +
    `${f(r.itl_p50_ms)} / ${f(r.itl_p99_ms)} | ${f(r.tok_s)} | ${f(r.speedup, 2)}x |`);
}
const bad = results.some((r) => r.completed !== r.requests || r.same_text_as_serial !== r.requests);
process.exit(bad ? 1 : 0);
