// Definition drift through the Node client (docs/protocol.md §11): the tool `charge` suspends, a
// second client reattaches with a changed input schema, and a resume that upgrades the handle to
// that new version is refused — naming the difference, consuming nothing — until called with
// `acceptChangedDefinition` (without `upgrade` the handle answers on its own version: versions.test.js). An unchanged
// registry resumes as before; a changed soul or model is reported and does not refuse.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';

import { FailedPrecondition, Runtime, ToolResult, agent, registry, tool } from '../src/index.js';
import { Daemon } from './helpers/daemon.js';
import { mockTransportFor } from './helpers/mock.js';

const AGENT = 'cashier';
const V1 = { type: 'object', properties: { amount: { type: 'number' }, currency: { type: 'string' } },
  required: ['amount'] };
const V2 = { type: 'object', properties: { amount: { type: 'string' } }, required: ['amount'] };
const transport = mockTransportFor('charge');

async function charge(args, ctx) {
  if (!ctx.answer) return ToolResult.suspend({ id: `charge:${ctx.handle}`, kind: 'approval', prompt: 'charge?' });
  return 'charged';
}

function cashier(schema = V1, { soul = 'You charge cards.', model = 'inherit' } = {}) {
  const charging = tool('charge', charge, { description: 'charges a card', inputSchema: schema });
  return registry(agent(AGENT, { does: 'charges cards', soul, model, uses: { tools: [charging] } }));
}

async function suspended(target) {
  const rt = await Runtime.new({ target, registry: cashier(), transport });
  try {
    const handle = await rt.spawn(rt.root, AGENT);
    await rt.wake(handle, 'charge 10 EUR');
    const { pending } = await rt.wait(handle, { timeoutMs: 20_000 });
    return [rt.id, handle, pending.id];
  } finally {
    await rt.detach();
  }
}

describe('definition drift', () => {
  let daemon;
  before(async () => {
    daemon = new Daemon();
    await daemon.start();
  });
  after(async () => {
    await daemon.stop();
    rmSync(daemon.dataDir, { recursive: true, force: true });
  });

  it('a changed schema is refused naming the difference, then accepted', async () => {
    const [runtimeId, handle, req] = await suspended(daemon.target);
    const rt = await Runtime.new({ target: daemon.target, registry: cashier(V2), transport, runtimeId });
    try {
      const [change] = (await rt.snapshot(handle)).definitionChanged;
      assert.deepEqual(change, {
        part: 'tool', name: 'charge', change: 'schema', refusesResume: true, added: [],
        removed: ['currency'], retyped: ['amount (number → string)'],
        summary: 'tool "charge" input schema changed: removed currency; retyped amount (number → string)',
      });
      for (let i = 0; i < 2; i += 1) { // nothing consumed: the same refusal again
        await assert.rejects(rt.resume({ id: req, ok: true }, { upgrade: true }), (err) => {
          assert.ok(err instanceof FailedPrecondition);
          assert.equal(err.message, `tool "charge" changed since request "${req}" suspended: input schema `
            + 'removed currency; retyped amount (number → string); resume with accept_changed_definition '
            + 'to feed the answer to the new definition');
          return true;
        });
      }
      assert.equal((await rt.snapshot(handle)).state, 'suspended');
      const { result } = await rt.resume({ id: req, ok: true }, { acceptChangedDefinition: true });
      assert.equal(result.status, 'done');
      assert.equal(result.text, 'charged');
      assert.deepEqual((await rt.snapshot(handle)).definitionChanged, []);
    } finally {
      await rt.detach();
    }
  });

  it('an unchanged registry resumes as today', async () => {
    const [runtimeId, handle, req] = await suspended(daemon.target);
    const rt = await Runtime.new({ target: daemon.target, registry: cashier(), transport, runtimeId });
    try {
      assert.deepEqual((await rt.snapshot(handle)).definitionChanged, []);
      const { result } = await rt.resume({ id: req, ok: true });
      assert.equal(result.text, 'charged');
    } finally {
      await rt.detach();
    }
  });

  it('a changed soul and model are reported, and resume proceeds', async () => {
    const [runtimeId, handle, req] = await suspended(daemon.target);
    const reg = cashier(V1, { soul: 'You charge cards, politely.', model: 'bigger' });
    const rt = await Runtime.new({ target: daemon.target, registry: reg, transport, runtimeId });
    try {
      const changed = (await rt.snapshot(handle)).definitionChanged;
      assert.deepEqual(changed.map((c) => [c.part, c.change, c.refusesResume]),
        [['soul', 'changed', false], ['model', 'changed', false]]);
      const { result } = await rt.resume({ id: req, ok: true }, { upgrade: true });
      assert.equal(result.text, 'charged');
    } finally {
      await rt.detach();
    }
  });
});
