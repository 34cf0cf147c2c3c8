// Cross-process and cross-language resume: one process creates a runtime,
// suspends a handle and exits; another process, in the other language, reattaches to the same
// runtime by id, serves the tool and the model, and resumes the handle to completion. Both
// directions, an approval and a decline, plus Node → Node from a fresh process.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';

import { startDaemon } from './helpers/daemon.js';
import { DECLINED } from './helpers/mock.js';
import { side } from './helpers/run.js';

let daemon;
before(async () => { daemon = await startDaemon(); });
after(async () => { await daemon?.dispose(); });

async function suspendThenResume(suspender, resumer, { decline = false } = {}) {
  const runtimeId = `xl-${suspender}-${resumer}-${randomUUID().slice(0, 8)}`;
  const target = daemon.target;
  const first = await side(suspender, 'suspend', { target, runtimeId });
  assert.equal(first.language, suspender);
  assert.equal(first.runtimeId, runtimeId);
  assert.equal(first.status, 'pending');
  assert.equal(first.pending.kind, 'authorization');
  assert.equal(first.state, 'suspended');
  // the suspending process has exited: the handle is parked in the daemon with nobody serving it
  const second = await side(resumer, 'resume', { target, runtimeId, handle: first.handle, id: first.pending.id, decline });
  assert.equal(second.language, resumer);
  assert.equal(second.runtimeId, runtimeId);
  assert.equal(second.reattached, true, 'New(runtime_id) of an existing runtime reattaches');
  assert.equal(second.resumedHandle, first.handle);
  assert.equal(second.state, 'idle');
  assert.equal(second.status, 'done');
  assert.equal(second.isError, false);
  assert.ok(second.usageTotal > first.usageTotal, `usage grew: ${first.usageTotal} → ${second.usageTotal}`);
  assert.ok(second.turnsTotal >= 2, `turnsTotal ${second.turnsTotal} >= 2`);
  return second;
}

describe('cross-language resume', () => {
  it('Python suspends and exits; Node reattaches, serves the tool and resumes to completion', async () => {
    const done = await suspendThenResume('python', 'node');
    assert.equal(done.text, 'action performed');
    assert.equal(done.lastText, 'action performed');
  });

  it('Node suspends and exits; Python reattaches, serves the tool and resumes to completion', async () => {
    const done = await suspendThenResume('node', 'python');
    assert.equal(done.text, 'action performed');
    assert.equal(done.lastText, 'action performed');
  });

  it('Python suspends; Node declines: the decline is fed to the model', async () => {
    const done = await suspendThenResume('python', 'node', { decline: true });
    assert.equal(done.text, DECLINED);
  });

  it('Node suspends; Python declines: the decline is fed to the model', async () => {
    const done = await suspendThenResume('node', 'python', { decline: true });
    assert.equal(done.text, DECLINED);
  });

  it('Node suspends and exits; a fresh Node process reattaches and resumes', async () => {
    const done = await suspendThenResume('node', 'node');
    assert.equal(done.text, 'action performed');
  });
});
