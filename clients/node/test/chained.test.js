// Chained approvals through the Node client: a manager approves, then a director. The tool,
// re-invoked with the manager's ok, suspends again under a different request id: a new durable
// suspension of the same call, announced on Watch and answerable — also after a kill -9 of the
// daemon between the two answers.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, it } from 'node:test';

import { Runtime, ToolResult } from '../src/index.js';
import { Daemon } from './helpers/daemon.js';
import { AGENT, mockTransport, scenarioRegistry } from './helpers/mock.js';

const CHAIN = ['manager', 'director'];

async function approveTwice(args, ctx) {
  const asked = ctx.answer ? CHAIN.indexOf(ctx.answer.id.split(':')[0]) + 1 : 0;
  if (asked < CHAIN.length) {
    const who = CHAIN[asked];
    return ToolResult.suspend({ id: `${who}:${ctx.callId}`, kind: 'approval', prompt: `${who}: approve?` });
  }
  return 'approved by manager and director';
}

const open = (target, extra = {}) =>
  Runtime.new({ target, registry: scenarioRegistry(approveTwice), transport: mockTransport, ...extra });

async function announced(rt, count) {
  const stream = rt.watch({ types: ['pending'] });
  const out = [];
  for await (const event of stream) {
    out.push(event.pending.prompt);
    if (out.length === count) break;
  }
  stream.cancel();
  return out;
}

for (const kill of [false, true]) {
  describe(`chained approvals${kill ? ' across a kill -9' : ''}`, () => {
    it('the second approval is a durable suspension of the same call', async () => {
      let daemon = new Daemon();
      await daemon.start();
      let rt = await open(daemon.target);
      try {
        const handle = await rt.spawn(rt.root, AGENT);
        await rt.wake(handle, 'release it');
        const first = (await rt.wait(handle, { timeoutMs: 20_000 })).pending;
        assert.equal(first.prompt, 'manager: approve?');
        const second = (await rt.resume({ id: first.id, ok: true })).result;
        assert.equal(second.status, 'pending');
        assert.equal(second.pending.prompt, 'director: approve?');
        assert.notEqual(second.pending.id, first.id);
        assert.equal((await rt.snapshot(handle)).state, 'suspended');
        if (kill) {
          await rt.detach();
          await daemon.kill9();
          daemon = new Daemon({ dataDir: daemon.dataDir });
          await daemon.start();
          rt = await open(daemon.target, { runtimeId: rt.id });
        }
        assert.deepEqual(await announced(rt, 2), ['manager: approve?', 'director: approve?']);
        const done = (await rt.resume({ id: second.pending.id, ok: true })).result;
        assert.equal(done.status, 'done');
        assert.equal(done.text, 'approved by manager and director');
      } finally {
        await rt.shutdown();
        await daemon.stop();
        rmSync(daemon.dataDir, { recursive: true, force: true });
      }
    });
  });
}
