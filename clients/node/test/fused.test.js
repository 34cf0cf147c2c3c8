// The fused calls against the real daemon: spawn with a prompt (spawned and woken in
// one durable commit) and wake with waitMs (the wake and the wait for its turn in one call).
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';

import { InvalidArgument } from '../src/index.js';
import { startDaemon } from './helpers/daemon.js';
import { AGENT, PROMPT, newRuntime } from './helpers/mock.js';

let daemon;
before(async () => { daemon = await startDaemon(); });
after(async () => { await daemon?.dispose(); });

it('runs the cycle in two calls: spawn with prompt and waitMs, then resume', async () => {
  const rt = await newRuntime(daemon.target);
  try {
    const woken = await rt.spawn(rt.root, AGENT, { prompt: PROMPT, waitMs: 20_000 });
    assert.deepEqual([woken.handle, woken.queued], [`${rt.root}/${AGENT}.1`, false]);
    assert.equal(woken.result.status, 'pending');
    assert.equal(woken.result.pending.id, `secret-action:${woken.handle}`);
    const resumed = await rt.resume({ id: woken.result.pending.id, ok: true });
    assert.equal(resumed.result.text, 'action performed');

    const again = await rt.wake(woken.handle, PROMPT, { waitMs: 20_000 });
    assert.equal(again.handle, woken.handle);
    assert.deepEqual((await rt.snapshot(woken.handle)).lastResult, again.result);
  } finally {
    await rt.shutdown();
  }
});

it('keeps the old shapes and returns a fused spawn without wait once durable', async () => {
  const rt = await newRuntime(daemon.target);
  try {
    const quick = await rt.spawn(rt.root, AGENT, { prompt: PROMPT });
    assert.deepEqual(quick, { handle: `${rt.root}/${AGENT}.1`, queued: false, result: null });
    assert.equal((await rt.wait(quick.handle, { timeoutMs: 20_000 })).status, 'pending');
    const plain = await rt.spawn(rt.root, AGENT);
    assert.equal(plain, `${rt.root}/${AGENT}.2`);
    assert.equal(await rt.wake(plain, PROMPT), false);
  } finally {
    await rt.shutdown();
  }
});

it('refuses a bad waitMs or a waitMs without a prompt with InvalidArgument', async () => {
  const rt = await newRuntime(daemon.target);
  try {
    await assert.rejects(rt.spawn(rt.root, AGENT, { prompt: PROMPT, waitMs: -1 }),
      (err) => err instanceof InvalidArgument && /must not be negative/.test(err.message));
    await assert.rejects(rt.spawn(rt.root, AGENT, { waitMs: 1000 }),
      (err) => err instanceof InvalidArgument && /set prompt too/.test(err.message));
    await assert.rejects(rt.spawn(rt.root, AGENT, { prompt: '' }), /prompt is empty/);
    const handle = await rt.spawn(rt.root, AGENT);
    await assert.rejects(rt.wake(handle, PROMPT, { waitMs: 3_600_001 }),
      (err) => err instanceof InvalidArgument && /the limit is 3600000/.test(err.message));
  } finally {
    await rt.shutdown();
  }
});
