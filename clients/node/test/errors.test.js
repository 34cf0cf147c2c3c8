// gRPC failures of the real daemon surface as typed errors carrying the status code and the
// daemon's message; Resume's routing rules; Wait's timeout result; the remaining verbs.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import {
  FailedPrecondition, InvalidArgument, NotFound, Runtime, ToolnexusError, agent, registry, tool,
} from '../src/index.js';
import { startDaemon } from './helpers/daemon.js';
import { AGENT, mockTransport, newRuntime, suspend } from './helpers/mock.js';

let daemon;
let rt;
before(async () => {
  daemon = await startDaemon();
  rt = await newRuntime(daemon.target);
});
after(async () => {
  await rt?.shutdown();
  await daemon?.dispose();
});

const typed = (cls, code, status, pattern) => (err) => {
  assert.ok(err instanceof cls, `${err} is a ${cls.name}`);
  assert.ok(err instanceof ToolnexusError);
  assert.equal(err.code, code);
  assert.equal(err.status, status);
  if (pattern) assert.match(err.message, pattern);
  return true;
};

describe('typed errors', () => {
  it('Resume with an unknown request id → NotFound', async () => {
    await assert.rejects(rt.resume({ id: 'no-such-request', ok: true }), typed(NotFound, 'NOT_FOUND', 5));
  });

  it('Spawn of an unknown agent → NotFound naming the known agents', async () => {
    await assert.rejects(rt.spawn(rt.root, 'ghost'),
      typed(NotFound, 'NOT_FOUND', 5, new RegExp(`unknown agent "ghost" \\(known: ${AGENT}\\)`)));
  });

  it('Wake on a suspended handle → FailedPrecondition naming the request', async () => {
    const [handle, result] = await suspend(rt);
    await assert.rejects(rt.wake(handle, 'again'),
      typed(FailedPrecondition, 'FAILED_PRECONDITION', 9, new RegExp(result.pending.id)));
    const first = await rt.resume({ id: result.pending.id, ok: true });
    assert.equal(first.duplicate, false);
    const again = await rt.resume({ id: result.pending.id, ok: true });
    assert.equal(again.duplicate, true, 'the identical answer again is a harmless no-op');
    await assert.rejects(rt.resume({ id: result.pending.id, ok: false }),
      typed(FailedPrecondition, 'FAILED_PRECONDITION', 9));
    const snap = await rt.snapshot(handle);
    assert.equal(snap.turnsTotal, 2, 'nothing changed');
  });

  it('a bad registry → InvalidArgument', async () => {
    const bad = registry(agent('a', { team: ['nobody'], uses: { tools: [tool('t', () => 'x')] } }));
    await assert.rejects(Runtime.new({ target: daemon.target, registry: bad, transport: mockTransport }),
      typed(InvalidArgument, 'INVALID_ARGUMENT', 3, /nobody/));
  });

  it('Snapshot of an unknown runtime → NotFound', async () => {
    const other = new Runtime({ ...rt, runtimeId: 'rt-missing', worker: null });
    await assert.rejects(other.snapshot('root'), typed(NotFound, 'NOT_FOUND', 5));
  });

  it('client-side mistakes throw TypeError before any call', async () => {
    await assert.rejects(rt.resume({ id: 'x' }), TypeError);
    await assert.rejects(Runtime.new({ target: daemon.target, registry: registry(agent('a')) }),
      /needs llm .* or transport/);
    await assert.rejects(Runtime.new({ target: daemon.target, registry: registry(agent('a')), transport: mockTransport,
      options: { maxTurn: 3 } }), /unknown runtime option key "maxTurn"/);
  });
});

describe('verbs', () => {
  it('wait with a timeout returns a timeout result while the handle keeps running', async () => {
    let release;
    const gate = new Promise((resolve) => { release = resolve; });
    const slow = tool('slow', async () => { await gate; return 'finally'; });
    const transport = async ({ body }) => {
      const toolMessage = (body.messages ?? []).find((m) => m.role === 'tool');
      return { body: toolMessage
        ? { choices: [{ message: { role: 'assistant', content: toolMessage.content } }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }
        : { choices: [{ message: { role: 'assistant', content: null, tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'slow', arguments: '{}' } }] } }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } } };
    };
    const slowRt = await Runtime.new({ target: daemon.target, registry: registry(agent('s', { uses: { tools: [slow] } })),
      transport });
    try {
      const h = await slowRt.spawn(slowRt.root, 's');
      assert.equal(await slowRt.wake(h, 'go'), false);
      const timedOut = await slowRt.wait(h, 200);
      assert.equal(timedOut.status, 'timeout');
      assert.equal(timedOut.isError, true);
      assert.match(timedOut.text, /wait timeout after 200ms \(child still running\)/);
      assert.equal((await slowRt.snapshot(h)).state, 'running');
      release();
      const done = await slowRt.wait(h, { timeoutMs: 10_000 });
      assert.equal(done.status, 'done');
      assert.equal(done.text, 'finally');
    } finally {
      release();
      await slowRt.shutdown();
    }
  });

  it('post, list, info, close and shutdown', async () => {
    const other = await newRuntime(daemon.target);
    try {
      const a = await other.spawn(other.root, AGENT);
      const b = await other.spawn('root', AGENT);
      assert.deepEqual([a, b], [`root/${AGENT}.1`, `root/${AGENT}.2`]);
      await other.post(a, 'hello from node', { from: 'tester', channel: 'chat' });
      const snap = await other.snapshot(a);
      assert.deepEqual(snap.inbox, [{ from: 'tester', channel: 'chat', text: 'hello from node' }]);
      assert.deepEqual((await other.list()).map((s) => s.id), [a, b]);
      const info = await other.info();
      assert.ok(info.version);
      assert.equal(typeof info.limits, 'object');
      assert.ok(info.listen.includes(daemon.target), `${info.listen} lists ${daemon.target}`);
      await other.close(b);
      assert.equal((await other.snapshot(b)).state, 'closed');
      await assert.rejects(other.interrupt(a), FailedPrecondition); // idle: nothing to interrupt
      const [h, result] = await suspend(other);
      await other.interrupt(h); // suspended: its pending request is cancelled
      const interrupted = await other.snapshot(h);
      assert.notEqual(interrupted.state, 'suspended');
      assert.equal(interrupted.pending, null);
      await assert.rejects(other.resume({ id: result.pending.id, ok: true }), ToolnexusError);
    } finally {
      await other.shutdown();
    }
    await assert.rejects(other.snapshot('root')); // detached: the channel is closed
  });
});
