// The official Node SDKs (openai, @anthropic-ai/sdk) against the chaos mock: the same streams
// and retry counts as sdk_python.py. Run by ci/conformance.sh with MOCK_URL set. Each request
// carries `x-chaos-request-id` (logged by the mock on every attempt) and, where a fault is
// wanted, `x-chaos-fault`. A failure names the SDK, its version and the request; exit code 1.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const BASE = process.env.MOCK_URL;
const failures = [];
const version = (pkg) => JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url))).version;
const WEATHER = {
  type: 'object',
  properties: { city: { type: 'string', minLength: 1 }, days: { type: 'integer', minimum: 1, maximum: 14 } },
  required: ['city', 'days'],
  additionalProperties: false,
};

function check(sdk, request, ok, detail = '') {
  const line = `${sdk}: ${request}: ${ok ? 'ok' : 'FAILED'}${detail ? ` (${detail})` : ''}`;
  console.log(line);
  if (!ok) failures.push(line);
}

async function attempts(tag) {
  const text = await (await fetch(`${BASE}/_chaos/attempts`)).text();
  return text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l)).filter((a) => a.request_id === tag);
}

const tagged = (name) => `node-${name.replace(/[^a-z0-9]+/gi, '-')}-${randomBytes(4).toString('hex')}`;
const headers = (tag, fault) => ({ 'x-chaos-request-id': tag, ...(fault ? { 'x-chaos-fault': JSON.stringify(fault) } : {}) });
const words = (s) => s.split(' ').length;

async function run(sdk, request, body) {
  try {
    await body();
  } catch (e) {
    check(sdk, request, false, `${e.constructor.name}: ${e.message}`);
  }
}

async function refused(sdk, name, send, want) {
  const tag = tagged(name);
  try {
    await send(tag);
    check(sdk, name, false, 'the request succeeded');
    return;
  } catch (e) {
    if (!(e instanceof OpenAI.APIError || e instanceof Anthropic.APIError)) throw e;
  }
  const got = await attempts(tag);
  const counts = got.map((a) => a.stainless_retry_count);
  check(sdk, `${name}: ${want} attempt(s)`, got.length === want, `${got.length} attempts, retry counts ${JSON.stringify(counts)}`);
  if (want > 1) check(sdk, `${name}: x-stainless-retry-count 0..${want - 1}`, JSON.stringify(counts) === JSON.stringify([...Array(want).keys()]));
}

async function openaiChecks() {
  const sdk = `node openai ${version('openai')}`;
  const client = new OpenAI({ baseURL: `${BASE}/v1`, apiKey: 'sk-test', maxRetries: 0 });
  const messages = [{ role: 'user', content: 'Say something.' }];
  const model = 'gpt-4o-mini';

  await run(sdk, 'chat', async () => {
    const r = await client.chat.completions.create({ model, messages }, { headers: headers(tagged('chat')) });
    const text = r.choices[0].message.content;
    check(sdk, 'chat', !!text && r.usage.completion_tokens === words(text), `${r.usage.completion_tokens} tokens`);
  });
  await run(sdk, 'chat streamed', async () => {
    const s = await client.chat.completions.create(
      { model, messages, stream: true, stream_options: { include_usage: true } },
      { headers: headers(tagged('chat-stream')) },
    );
    let text = '';
    let usage = null;
    let n = 0;
    for await (const c of s) {
      n += 1;
      text += c.choices?.[0]?.delta?.content ?? '';
      usage = c.usage ?? usage;
    }
    check(sdk, 'chat streamed with include_usage', usage && usage.completion_tokens === words(text), `${n} chunks`);
  });
  await run(sdk, 'chat tools', async () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: WEATHER } }];
    const s = client.chat.completions.stream({ model, messages, tools, tool_choice: 'required' }, { headers: headers(tagged('chat-tools')) });
    const final = await s.finalChatCompletion();
    const calls = final.choices[0].message.tool_calls ?? [];
    const ok = calls.length >= 1 && calls.every((c) => JSON.parse(c.function.arguments).city);
    check(sdk, 'chat streamed with tool calls (stream helper)', ok, `${calls.length} calls`);
  });
  await run(sdk, 'responses', async () => {
    const r = await client.responses.create({ model, input: 'Say something.' }, { headers: headers(tagged('responses')) });
    check(sdk, 'responses', r.status === 'completed' && !!r.output_text && r.usage.output_tokens === words(r.output_text));
  });
  await run(sdk, 'responses streamed', async () => {
    const s = await client.responses.create({ model, input: 'Say something.', stream: true }, { headers: headers(tagged('responses-stream')) });
    const events = [];
    for await (const e of s) events.push(e);
    const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
    const last = events[events.length - 1];
    const numbered = events.every((e, i) => e.sequence_number === i);
    // Raw stream events carry the response without the SDK's `output_text` convenience.
    const final = last.response.output.flatMap((o) => o.content ?? []).map((c) => c.text).join('');
    check(sdk, 'responses streamed', last.type === 'response.completed' && final === text && numbered, `${events.length} events`);
  });
  await run(sdk, 'responses call', async () => {
    const tools = [{ type: 'function', name: 'get_weather', parameters: WEATHER, strict: true }];
    const r = await client.responses.create({ model, input: 'Weather?', tools, tool_choice: 'required' }, { headers: headers(tagged('responses-call')) });
    const calls = r.output.filter((o) => o.type === 'function_call');
    check(sdk, 'responses with a function call', calls.length >= 1 && !!JSON.parse(calls[0].arguments).city);
    const s = client.responses.stream({ model, input: 'Weather?', tools, tool_choice: 'required' }, { headers: headers(tagged('responses-call-stream')) });
    const final = await s.finalResponse();
    const streamed = final.output.filter((o) => o.type === 'function_call');
    check(sdk, 'responses streamed with a function call (stream helper)', streamed.length >= 1 && !!JSON.parse(streamed[0].arguments).city);
  });
  await run(sdk, 'embeddings', async () => {
    const r = await client.embeddings.create({ model: 'text-embedding-3-small', input: 'hello' }, { headers: headers(tagged('embeddings')) });
    check(sdk, 'embeddings', r.data.length === 1 && r.data[0].embedding.length > 0, `${r.data[0].embedding.length} dimensions`);
  });
  const send = (fault) => (tag) => client.chat.completions.create({ model, messages }, { headers: headers(tag, fault), maxRetries: 2 });
  await run(sdk, '429 storm', () => refused(sdk, '429 storm, max_retries=2', send({ kind: 'status', code: 429, retry_after: '20ms' }), 3));
  await run(sdk, '503 x-should-retry', () => refused(sdk, '503 with x-should-retry: false', send({ kind: 'status', code: 503, should_retry: false }), 1));
  await run(sdk, 'spend limit', () => refused(sdk, 'spend-limit 429', send({ kind: 'spend_limit' }), 1));
  // Unlike openai-python, this SDK has no 120 s cliff: it sleeps whatever Retry-After says. The
  // check records that: one attempt in the first 3 s and the request still waiting. (Its sleep
  // takes no abort signal, so the process exits at the end rather than wait 150 s.)
  await run(sdk, 'Retry-After 150', async () => {
    const tag = tagged('retry-after-150');
    let settled = false;
    send({ kind: 'status', code: 429, retry_after: '150s' })(tag).then(() => (settled = true), () => (settled = true));
    await new Promise((r) => setTimeout(r, 3000));
    const got = await attempts(tag);
    check(sdk, '429 with Retry-After: 150: waits it out (1 attempt after 3 s, still pending)', got.length === 1 && !settled, `${got.length} attempts, settled ${settled}`);
  });
}

async function anthropicChecks() {
  const sdk = `node @anthropic-ai/sdk ${version('@anthropic-ai/sdk')}`;
  const client = new Anthropic({ baseURL: BASE, apiKey: 'sk-ant-test', maxRetries: 0 });
  const messages = [{ role: 'user', content: 'Say something.' }];
  const model = 'claude-sonnet-4-5';

  await run(sdk, 'messages', async () => {
    const m = await client.messages.create({ model, max_tokens: 100, messages }, { headers: headers(tagged('messages')) });
    const text = m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
    check(sdk, 'messages', !!text && m.usage.output_tokens === words(text), `${m.usage.output_tokens} tokens`);
  });
  await run(sdk, 'messages streamed', async () => {
    const s = client.messages.stream({ model, max_tokens: 100, messages }, { headers: headers(tagged('messages-stream')) });
    let text = '';
    s.on('text', (t) => (text += t));
    const final = await s.finalMessage();
    check(sdk, 'messages streamed', !!text && final.usage.output_tokens === words(text) && final.stop_reason === 'end_turn');
  });
  await run(sdk, 'tool use', async () => {
    const tools = [{ name: 'get_weather', input_schema: WEATHER }];
    const body = { model, max_tokens: 200, messages, tools, tool_choice: { type: 'any' } };
    const m = await client.messages.create(body, { headers: headers(tagged('tool-use')) });
    const blocks = m.content.filter((b) => b.type === 'tool_use');
    check(sdk, 'messages with a tool_use block', m.stop_reason === 'tool_use' && blocks.length >= 1 && !!blocks[0].input.city);
    const s = client.messages.stream(body, { headers: headers(tagged('tool-use-stream')) });
    const final = await s.finalMessage();
    const streamed = final.content.filter((b) => b.type === 'tool_use');
    check(sdk, 'messages streamed with a tool_use block', streamed.length >= 1 && !!streamed[0].input.city);
  });
  const send = (fault) => (tag) => client.messages.create({ model, max_tokens: 10, messages }, { headers: headers(tag, fault), maxRetries: 2 });
  await run(sdk, '529 storm', () => refused(sdk, '529 storm, max_retries=2', send({ kind: 'status', code: 529, retry_after: '20ms' }), 3));
  await run(sdk, 'spend limit', () => refused(sdk, 'spend-limit 429', send({ kind: 'spend_limit' }), 1));
}

await openaiChecks();
await anthropicChecks();
if (failures.length) console.error(`${failures.length} Node SDK check(s) failed`);
process.exit(failures.length ? 1 : 0);
