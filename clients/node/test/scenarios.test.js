// The three reference scenarios through the Node client against a daemon subprocess, asserted
// directly; then the examples in examples/node/ run as their own processes and must pass.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { REPO, startDaemon } from './helpers/daemon.js';
import { DECLINED, newRuntime, suspend } from './helpers/mock.js';
import { runFile } from './helpers/run.js';

let daemon;
before(async () => { daemon = await startDaemon(); });
after(async () => { await daemon?.dispose(); });

async function withRuntime(body) {
  const rt = await newRuntime(daemon.target);
  try {
    return await body(rt);
  } finally {
    await rt.shutdown();
  }
}

describe('reference scenarios', () => {
  it('(a) a tool suspends for authorization; resume ok=true finishes with its output', () => withRuntime(async (rt) => {
    assert.equal(rt.root, 'root');
    assert.equal(rt.reattached, false);
    const [handle, result] = await suspend(rt);
    assert.equal(handle, 'root/operator.1');
    assert.equal(result.status, 'pending');
    assert.equal(result.isError, false);
    assert.equal(result.pending.kind, 'authorization');
    assert.equal(result.pending.prompt, 'approve?');
    assert.equal(result.pending.id, `secret-action:${handle}`);
    const snap = await rt.snapshot(handle);
    assert.equal(snap.state, 'suspended');
    assert.equal(snap.pending.id, result.pending.id);
    const resumed = await rt.resume({ id: result.pending.id, ok: true });
    assert.equal(resumed.handle, handle);
    assert.equal(resumed.duplicate, false);
    assert.equal(resumed.result.status, 'done');
    assert.equal(resumed.result.text, 'action performed');
    const after = await rt.snapshot(handle);
    assert.equal(after.state, 'idle');
    assert.equal(after.lastResult.text, 'action performed');
    assert.equal(after.pending, null);
  }));

  it('(b) usageTotal grows across the resume and turnsTotal >= 2', () => withRuntime(async (rt) => {
    const [handle, result] = await suspend(rt);
    const before = await rt.snapshot(handle);
    assert.equal(before.usageTotal, 5);
    assert.deepEqual(before.usage, { promptTokens: 3, completionTokens: 2, totalTokens: 5 });
    await rt.resume({ id: result.pending.id, ok: true });
    const after = await rt.snapshot(handle);
    assert.ok(after.usageTotal > before.usageTotal, `${after.usageTotal} > ${before.usageTotal}`);
    assert.equal(after.usageTotal, 8);
    assert.ok(after.turnsTotal >= 2);
  }));

  it('(c) resume ok=false settles idle with the decline fed to the model', () => withRuntime(async (rt) => {
    const [handle, result] = await suspend(rt);
    const resumed = await rt.resume({ id: result.pending.id, ok: false, reason: 'not authorized' });
    assert.equal(resumed.result.text, DECLINED);
    const after = await rt.snapshot(handle);
    assert.equal(after.state, 'idle');
    assert.equal(after.lastResult.isError, false);
    assert.equal(after.lastResult.text, DECLINED);
  }));
});

describe('examples/node', () => {
  const dir = join(REPO, 'examples', 'node');
  for (const script of ['suspend_resume.js', 'usage_grows.js', 'decline.js']) {
    it(`${script} passes and prints what it verified`, async () => {
      assert.ok(existsSync(join(dir, 'node_modules', 'toolnexus-client')),
        'examples/node is not installed: run `npm ci` in examples/node (make node-test does)');
      const { stdout } = await runFile(process.execPath, [join(dir, script), '--target', daemon.target], { cwd: dir });
      assert.match(stdout, /^scenario \([abc]\)/);
      assert.match(stdout, / {2}ok {3}/);
      assert.doesNotMatch(stdout, /FAIL/);
    });
  }
});
