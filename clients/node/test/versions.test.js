// Registry versions through the Node client (docs/versions.md): a handle parked on `charge` of
// version 1 survives redeploys (one removes `charge`) and a kill -9 of the daemon, and finishes on
// version 1 — its soul, its tool, served by `Runtime.serve` for that version — while `upgrade`
// is refused naming the removed tool.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';

import { FailedPrecondition, Runtime, ToolResult, agent, registry, tool } from '../src/index.js';
import { Daemon, freePort } from './helpers/daemon.js';
import { mockTransportFor } from './helpers/mock.js';

const AGENT = 'cashier';

function build(n, { withCharge = true } = {}) {
  const charge = tool('charge', async (args, ctx) => {
    if (!ctx.answer) return ToolResult.suspend({ id: `charge:${ctx.handle}:v${n}`, kind: 'approval', prompt: 'charge?' });
    return `charged by v${n}`;
  }, { inputSchema: { type: 'object', properties: { [`amount${n}`]: { type: 'number' } } } });
  const refund = tool('refund', async () => 'ok', { inputSchema: { type: 'object', properties: {} } });
  return registry(agent(AGENT, { does: 'charges cards', soul: `Soul v${n}`,
    uses: { tools: [withCharge ? charge : refund] } }));
}

describe('registry versions', () => {
  let daemon;
  before(async () => {
    daemon = new Daemon({ listen: `127.0.0.1:${await freePort()}` });
    await daemon.start();
  });
  after(async () => {
    await daemon.stop();
    rmSync(daemon.dataDir, { recursive: true, force: true });
  });

  it('a parked approval finishes on its own version after redeploys and a kill -9', async () => {
    const seen = [];
    const transport = mockTransportFor('charge', seen);
    const first = await Runtime.new({ target: daemon.target, registry: build(1), transport });
    let handle;
    let req;
    try {
      assert.equal(first.version, 1);
      handle = await first.spawn(first.root, AGENT);
      await first.wake(handle, 'charge 10');
      req = (await first.wait(handle, { timeoutMs: 20_000 })).pending.id;
    } finally {
      await first.detach();
    }
    for (const [n, reg] of [[2, build(2)], [3, build(3, { withCharge: false })]]) {
      const again = await Runtime.new({ target: daemon.target, registry: reg, transport, runtimeId: first.id });
      assert.equal(again.version, n);
      await again.detach();
    }
    await daemon.kill9();
    await daemon.start();
    const latest = await Runtime.new({ target: daemon.target, registry: build(3, { withCharge: false }), transport,
      runtimeId: first.id });
    const old = await Runtime.serve({ target: daemon.target, registry: build(1), runtimeId: first.id, versions: [1] });
    try {
      assert.equal(latest.version, 3);
      await assert.rejects(latest.resume({ id: req, ok: true }, { upgrade: true }), (err) => {
        assert.ok(err instanceof FailedPrecondition);
        assert.match(err.message, new RegExp(`^tool "charge" was removed since request "${req}" suspended`));
        return true;
      });
      const before = seen.length;
      const { result } = await latest.resume({ id: req, ok: true });
      assert.equal(result.text, 'charged by v1');
      assert.deepEqual(seen.slice(before).map((b) => b.messages[0].content), ['Soul v1']);
      const snap = await latest.snapshot(handle);
      assert.equal(snap.version, 1);
      assert.deepEqual((await latest.versions()).map((v) => [v.number, v.handles, v.latest]),
        [[1, 1, false], [2, 0, false], [3, 0, true]]);
    } finally {
      await old.detach();
      await latest.detach();
    }
  });
});
