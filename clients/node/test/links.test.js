// Answer links through the Node client (docs/protocol.md §10): `answerLink` on a tool reaches the
// daemon, the pending request carries `answerUrl`, and a POST to it finishes the handle.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';

import { Runtime, ToolResult, agent, registry, tool } from '../src/index.js';
import { Daemon } from './helpers/daemon.js';
import { mockTransportFor } from './helpers/mock.js';

const AGENT = 'approver';
const transport = mockTransportFor('approve');

async function approve(args, ctx) {
  if (!ctx.answer) return ToolResult.suspend({ id: `approve:${ctx.actionId}`, kind: 'approval', prompt: 'ship it?' });
  return 'shipped';
}

describe('answer links', () => {
  let daemon;
  before(async () => {
    daemon = new Daemon({ args: ['--answers-listen', '127.0.0.1:0'] });
    await daemon.start();
  });
  after(async () => {
    await daemon.stop();
    rmSync(daemon.dataDir, { recursive: true, force: true });
  });

  it('a tool asking for a link gets answerUrl, and the link finishes the handle', async () => {
    const approving = tool('approve', approve, { description: 'asks first', answerLink: true });
    const rt = await Runtime.new({ target: daemon.target, registry: registry(agent(AGENT, { uses: { tools: [approving] } })), transport });
    try {
      const handle = await rt.spawn(rt.root, AGENT);
      await rt.wake(handle, 'ship the release');
      const { pending } = await rt.wait(handle, { timeoutMs: 20_000 });
      assert.match(pending.answerUrl, /^http:\/\/127\.0\.0\.1:\d+\/a\/[A-Za-z0-9_-]{43}$/);
      const reply = await fetch(pending.answerUrl, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ok: true }),
      });
      assert.equal(reply.status, 200, await reply.clone().text());
      assert.equal((await reply.json()).state, 'answered');
      const done = await rt.wait(handle, { timeoutMs: 20_000 });
      assert.deepEqual([done.status, done.text], ['done', 'shipped']);
    } finally {
      await rt.shutdown();
    }
  });
});
