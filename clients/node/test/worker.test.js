// The worker stream against the real daemon: what tools and the transport return or throw, the
// Context a tool sees, and a stream that breaks (daemon killed and restarted) and reconnects.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, describe, it } from 'node:test';

import { Runtime, ToolResult, agent, registry, tool } from '../src/index.js';
import { Daemon, freePort, startDaemon } from './helpers/daemon.js';
import { completion, mockTransport, mockTransportFor, scenarioRegistry, suspend } from './helpers/mock.js';

let daemon;
before(async () => { daemon = await startDaemon(); });
after(async () => { await daemon?.dispose(); });

const quiet = () => {
  const warnings = [];
  return { warnings, logger: { warn: (m) => warnings.push(m), error: (m) => warnings.push(m) } };
};

/** Run one agent whose model calls `name` once, then answers with the tool's output. */
async function runTool(name, execute, { args = {}, seen = [] } = {}) {
  const { warnings, logger } = quiet();
  const t = tool(name, execute, { inputSchema: { type: 'object', properties: { n: { type: 'number' } } } });
  const transport = async ({ body }) => {
    seen.push(body);
    const toolMessages = (body.messages ?? []).filter((m) => m.role === 'tool');
    if (toolMessages.length) return { body: completion({ role: 'assistant', content: toolMessages[0].content }, [2, 1, 3]) };
    return { status: 200, body: completion({ role: 'assistant', content: null, tool_calls: [
      { id: 'c1', type: 'function', function: { name, arguments: JSON.stringify(args) } }] }, [3, 2, 5]) };
  };
  const rt = await Runtime.new({ target: daemon.target, registry: registry(agent('a', { uses: { tools: [t] } })),
    transport, logger });
  try {
    const h = await rt.spawn(rt.root, 'a');
    await rt.wake(h, 'go');
    const result = await rt.wait(h, { timeoutMs: 15_000 });
    const events = [];
    for await (const e of rt.watch({ types: ['tool_result'] })) {
      events.push(e);
      break;
    }
    return { rt, h, result, events, warnings };
  } finally {
    await rt.shutdown();
  }
}

describe('native tools', () => {
  it('a tool that throws becomes an error result, not a crash', async () => {
    const { result, events, warnings } = await runTool('boom', async () => { throw new Error('kaboom'); });
    assert.equal(result.status, 'done', 'the turn goes on: the model saw the error');
    assert.equal(result.text, 'tool boom raised Error: kaboom');
    assert.equal(events[0].data.tool, 'boom');
    assert.equal(events[0].data.outcome, 'error');
    assert.match(warnings.join('\n'), /tool boom raised Error/);
  });

  it('a synchronous throw of a non-Error value is an error result too', async () => {
    const { result, events } = await runTool('boom2', () => { throw 'plain string'; }); // eslint-disable-line no-throw-literal
    assert.equal(result.text, 'tool boom2 raised string: plain string');
    assert.equal(events[0].data.outcome, 'error');
  });

  it('ToolResult.error is an error result; a JSON value is sent as its JSON text', async () => {
    const err = await runTool('fails', () => ToolResult.error('no such file'));
    assert.equal(err.result.text, 'no such file');
    assert.equal(err.events[0].data.outcome, 'error');
    const json = await runTool('lookup', (args) => ({ found: true, n: args.n, items: [1, 'two', null] }), { args: { n: 7 } });
    assert.deepEqual(JSON.parse(json.result.text), { found: true, n: 7, items: [1, 'two', null] });
  });

  it('a tool sees its arguments and Context', async () => {
    let seenArgs;
    let seenCtx;
    const { rt, h, result } = await runTool('inspect', (args, ctx) => {
      seenArgs = args;
      seenCtx = ctx;
      return `n=${args.n}`;
    }, { args: { n: 42 } });
    assert.equal(result.text, 'n=42');
    assert.deepEqual(seenArgs, { n: 42 });
    assert.equal(seenCtx.handle, h);
    assert.equal(seenCtx.runtimeId, rt.id);
    assert.equal(seenCtx.tool, 'inspect');
    assert.equal(seenCtx.answer, null);
    assert.ok(seenCtx.callId);
    assert.ok(seenCtx.signal instanceof AbortSignal);
    assert.equal(seenCtx.traceparent, '', 'no trace context while the daemon does not trace');
  });

  it('a resumed tool sees the Answer, with its data, in ctx.answer', async () => {
    const answers = [];
    const otp = tool('otp', (args, ctx) => {
      answers.push(ctx.answer);
      return ctx.answer
        ? `code ${ctx.answer.data.code} accepted`
        : ToolResult.suspend({ id: `otp:${ctx.handle}`, kind: 'input', prompt: 'the code?', data: { digits: 6 } });
    });
    const rt = await Runtime.new({ target: daemon.target, transport: mockTransportFor('otp'), logger: quiet().logger,
      registry: registry(agent('a', { uses: { tools: [otp] } })) });
    try {
      const h = await rt.spawn(rt.root, 'a');
      await rt.wake(h, 'log in');
      const pending = await rt.wait(h, { timeoutMs: 15_000 });
      assert.equal(pending.pending.kind, 'input');
      assert.equal(pending.pending.data.digits, 6);
      assert.deepEqual(pending.pending.data.path, h.split('/')); // id segments: join('/') is the id
      const resumed = await rt.resume({ id: pending.pending.id, ok: true, data: { code: '123456' } });
      assert.equal(resumed.result.text, 'code 123456 accepted');
      assert.deepEqual(answers, [null, { id: `otp:${h}`, ok: true, data: { code: '123456' }, reason: null }]);
    } finally {
      await rt.shutdown();
    }
  });

  it('ctx.actionId is stable across a resume and new for the next action', async () => {
    const seen = [];
    const approve = tool('approve', (args, ctx) => {
      seen.push({ callId: ctx.callId, actionId: ctx.actionId, answered: ctx.answer !== null });
      return ctx.answer ? 'done' : ToolResult.suspend({ id: `approve:${ctx.actionId}`, kind: 'approval', prompt: 'ok?' });
    });
    const rt = await Runtime.new({ target: daemon.target, transport: mockTransportFor('approve'), logger: quiet().logger,
      registry: registry(agent('a', { uses: { tools: [approve] } })) });
    const ids = [];
    try {
      for (let i = 0; i < 2; i += 1) { // two handles: two actions of one tool
        const h = await rt.spawn(rt.root, 'a');
        await rt.wake(h, 'go');
        const { pending } = await rt.wait(h, { timeoutMs: 15_000 });
        ids.push(pending.id);
        assert.equal((await rt.resume({ id: pending.id, ok: true })).result.text, 'done');
      }
    } finally {
      await rt.shutdown();
    }
    const [first, again, second] = seen;
    assert.ok(first.actionId && second.actionId);
    assert.equal(again.actionId, first.actionId);
    assert.ok(again.answered);
    assert.notEqual(second.actionId, first.actionId);
    assert.deepEqual(ids, [`approve:${first.actionId}`, `approve:${second.actionId}`]);
  });

  it('the model request the transport receives is OpenAI-shaped', async () => {
    const seen = [];
    await runTool('noop', () => 'fine', { seen });
    assert.equal(seen.length, 2);
    const [first, second] = seen;
    assert.equal(first.messages.at(-1).role, 'user');
    assert.equal(first.tools[0].type, 'function');
    assert.equal(first.tools[0].function.name, 'noop');
    assert.deepEqual(second.messages.at(-1), { role: 'tool', tool_call_id: 'c1', content: 'fine' });
  });
});

describe('model transport', () => {
  async function turnWith(transport) {
    const { logger } = quiet();
    const rt = await Runtime.new({ target: daemon.target, registry: registry(agent('a')), transport, logger });
    try {
      const h = await rt.spawn(rt.root, 'a');
      await rt.wake(h, 'hello');
      return await rt.wait(h, { timeoutMs: 15_000 });
    } finally {
      await rt.shutdown();
    }
  }

  it('a transport that throws settles the turn with status error, the worker keeps serving', async () => {
    const result = await turnWith(async () => { throw new Error('model offline'); });
    assert.equal(result.status, 'error');
    assert.equal(result.isError, true);
    assert.match(result.text, /model offline/);
  });

  it('a fetch Response, a JSON string body and a bare completion are all accepted', async () => {
    const body = completion({ role: 'assistant', content: 'hi there' }, [1, 1, 2]);
    const viaResponse = await turnWith(async () => new Response(JSON.stringify(body), {
      status: 200, headers: { 'content-type': 'application/json' } }));
    assert.equal(viaResponse.text, 'hi there');
    const viaString = await turnWith(() => ({ status: 200, headers: {}, body: JSON.stringify(body) }));
    assert.equal(viaString.text, 'hi there');
    const bare = await turnWith(() => body);
    assert.equal(bare.text, 'hi there');
    assert.equal(bare.status, 'done');
  });
});

describe('worker stream', () => {
  it('reconnects after the daemon is killed and restarted, and serves the resume', async () => {
    const port = await freePort();
    const first = new Daemon({ listen: `127.0.0.1:${port}` });
    let rt;
    let second;
    try {
      await first.start();
      rt = await Runtime.new({ target: first.target, registry: scenarioRegistry(), transport: mockTransport,
        logger: quiet().logger });
      const [handle, result] = await suspend(rt);
      assert.equal(result.status, 'pending');
      await first.kill9();
      second = await new Daemon({ dataDir: first.dataDir, listen: `127.0.0.1:${port}` }).start();
      await rt.worker.waitWelcomed(2, 15_000); // said hello again on the new daemon
      const resumed = await rt.resume({ id: result.pending.id, ok: true });
      assert.equal(resumed.result.text, 'action performed');
      const snap = await rt.snapshot(handle);
      assert.equal(snap.state, 'idle');
      assert.equal(snap.usageTotal, 8, 'usage continues from before the crash');
      assert.equal(snap.turnsTotal, 2);
    } finally {
      rt?.detach();
      await second?.stop();
      await first.dispose();
    }
  });

  it('workers split the load: the model in one, the tool in another (no_tools)', async () => {
    const { logger } = quiet();
    const declared = tool('lookup', { description: 'served by another worker' });
    const served = tool('lookup', (args, ctx) => `looked up by the tool worker for ${ctx.handle}`);
    const modelSide = await Runtime.new({ target: daemon.target, transport: mockTransportFor('lookup'), logger,
      registry: registry(agent('a', { uses: { tools: [declared] } })) });
    let toolSide;
    try {
      assert.equal(modelSide.worker.hello.no_tools, true);
      toolSide = await Runtime.new({ target: daemon.target, runtimeId: modelSide.id, llm: { style: 'worker' }, logger,
        registry: registry(agent('a', { uses: { tools: [served] } })) });
      assert.equal(toolSide.reattached, true);
      assert.deepEqual([toolSide.worker.hello.tools, toolSide.worker.hello.llm], [['lookup'], false]);
      const h = await modelSide.spawn(modelSide.root, 'a');
      await modelSide.wake(h, 'go');
      const result = await modelSide.wait(h, { timeoutMs: 15_000 });
      assert.equal(result.text, `looked up by the tool worker for ${h}`);
    } finally {
      toolSide?.detach();
      await modelSide.shutdown();
    }
  });

  it('Runtime.new without a reachable daemon rejects with Unavailable', async () => {
    const port = await freePort();
    await assert.rejects(
      Runtime.new({ target: `127.0.0.1:${port}`, registry: scenarioRegistry(), transport: mockTransportFor(),
        channelOptions: { 'grpc.max_reconnect_backoff_ms': 200 } }).then((rt) => rt.detach()),
      (err) => err.name === 'Unavailable' && err.code === 'UNAVAILABLE' && err.status === 14);
  });
});

describe('watch across a restart', () => {
  it('reopens after the last seq when the daemon comes back: no gap, no duplicate', async () => {
    const port = await freePort();
    const first = new Daemon({ listen: `127.0.0.1:${port}` });
    let rt;
    let second;
    try {
      await first.start();
      rt = await Runtime.new({ target: first.target, registry: scenarioRegistry(), transport: mockTransport,
        logger: quiet().logger });
      const [handle, result] = await suspend(rt);
      const seqs = [];
      const following = (async () => {
        for await (const event of rt.watch()) {
          seqs.push(event.seq);
          if (event.type === 'transition' && event.handle === handle && event.toState === 'idle') return;
        }
      })();
      await new Promise((r) => setTimeout(r, 300));
      await first.kill9();
      second = await new Daemon({ dataDir: first.dataDir, listen: `127.0.0.1:${port}` }).start();
      await rt.worker.waitWelcomed(2, 15_000);
      await rt.resume({ id: result.pending.id, ok: true });
      await following;
      assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1));
      assert.ok(seqs.length > 5, `${seqs}`);
    } finally {
      rt?.detach();
      await second?.stop();
      await first.dispose();
    }
  });
});

describe('trace context', () => {
  // an OTLP/HTTP sink on 127.0.0.1 for the daemon's spans: each export answered 200 (an empty
  // ExportTraceServiceResponse), the spans themselves not read here
  let sink;
  let traced;
  before(async () => {
    sink = createServer((req, res) => { req.resume(); req.on('end', () => res.end()); });
    await new Promise((r) => sink.listen(0, '127.0.0.1', r));
    traced = await startDaemon({ args: ['--otlp-endpoint', `http://127.0.0.1:${sink.address().port}`] });
  });
  after(async () => {
    await traced?.dispose();
    sink?.close();
  });

  it('a tool sees the traceparent of its call\'s span, in the trace of the turn\'s model calls', async () => {
    const W3C = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;
    let seen = null;
    const lookup = tool('lookup', (args, ctx) => { seen = ctx.traceparent; return 'found'; },
      { inputSchema: { type: 'object', properties: {} } });
    const modelSeen = [];
    const transport = mockTransportFor('lookup');
    const rt = await Runtime.new({ target: traced.target, registry: registry(agent('a', { uses: { tools: [lookup] } })),
      transport: (request) => { modelSeen.push(request.traceparent); return transport(request); }, logger: quiet().logger });
    try {
      const h = await rt.spawn(rt.root, 'a');
      await rt.wake(h, 'go');
      assert.equal((await rt.wait(h, { timeoutMs: 15_000 })).text, 'found');
    } finally {
      await rt.shutdown();
    }
    const [, traceId, spanId] = W3C.exec(seen ?? '') ?? [];
    assert.ok(traceId, `a W3C traceparent: ${seen}`);
    assert.equal(modelSeen.length, 2);
    for (const parent of modelSeen) {
      const [, modelTrace, modelSpan] = W3C.exec(parent ?? '') ?? [];
      assert.equal(modelTrace, traceId, `the model call ${parent} is in the tool's trace ${seen}`);
      assert.notEqual(modelSpan, spanId, 'each call its own span');
    }
  });
});
