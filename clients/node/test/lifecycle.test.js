// What the client does that its ecosystem expects: a process that shut its runtime down exits by
// itself (every stream the client opened is ended), the target and token come from the
// environment a deployment sets, and post/interrupt say what they did.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';

import { Runtime, agent, registry, tool } from '../src/index.js';
import { startDaemon } from './helpers/daemon.js';
import { completion, newRuntime, scenarioRegistry, mockTransport, suspend } from './helpers/mock.js';

const QUICKSTART = resolve(fileURLToPath(import.meta.url), '..', 'fixtures', 'quickstart.js');
const EXIT_TIMEOUT_MS = 20_000;
const TOKEN = 'lifecycle-test-token-0123456789';

let daemon;
let authDaemon;
before(async () => {
  [daemon, authDaemon] = await Promise.all([startDaemon(), startDaemon({ env: { TOOLNEXUS_TOKEN: TOKEN } })]);
});
after(async () => {
  await Promise.all([daemon?.dispose(), authDaemon?.dispose()]);
});

/** Run the quickstart fixture; resolves to {code, signal, stdout, stderr} once it exits by itself. */
function runQuickstart(mode, env) {
  return new Promise((resolveRun) => {
    const child = execFile(process.execPath, [QUICKSTART, mode], {
      cwd: resolve(QUICKSTART, '..'), env: { ...process.env, ...env }, timeout: EXIT_TIMEOUT_MS, encoding: 'utf8',
    }, (err, stdout, stderr) => resolveRun({ code: child.exitCode, signal: child.signalCode, killed: Boolean(err?.killed), stdout, stderr }));
  });
}

/** Set environment variables for the duration of `body`, then restore them. */
async function withEnv(vars, body) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  try {
    for (const [k, v] of Object.entries(vars)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    return await body();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe('a process that is done with its runtime exits by itself', () => {
  for (const mode of ['shutdown', 'detach']) {
    it(`the quickstart with an open watch exits 0 after ${mode}()`, async () => {
      const run = await runQuickstart(mode, { TOOLNEXUS_TARGET: daemon.target, TOOLNEXUS_TOKEN: '' });
      assert.equal(run.killed, false, `still running after ${EXIT_TIMEOUT_MS} ms: a stream kept it alive\n${run.stdout}\n${run.stderr}`);
      assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
      const out = JSON.parse(run.stdout.trim().split('\n').at(-1));
      assert.equal(out.text, 'action performed');
      assert.equal(out.watchEnded, true, 'the watch loop ended quietly');
      assert.equal(out.watchError, null);
      assert.ok(out.types.includes('pending') && out.types.includes('resumed'), out.types.join(','));
      if (mode === 'detach') assert.equal(out.waitError, 'Cancelled', 'a Wait in flight is cancelled by detach');
    });
  }

  it('detach ends a live watch quietly, cancels calls in flight and refuses new ones', async () => {
    const rt = await newRuntime(daemon.target);
    const [handle] = await suspend(rt);
    const seen = [];
    const loop = (async () => { for await (const event of rt.watch({ afterSeq: 0 })) seen.push(event.type); })();
    for (let i = 0; i < 100 && !seen.includes('pending'); i += 1) await new Promise((r) => setTimeout(r, 50));
    const idle = await rt.spawn(rt.root, 'operator');
    const waiting = rt.wait(idle);
    rt.detach();
    await loop; // resolves: no error
    assert.ok(seen.includes('pending'), seen.join(','));
    await assert.rejects(waiting, (err) => err.name === 'Cancelled' && /detached/.test(err.message));
    await assert.rejects(rt.snapshot(handle), (err) => err.name === 'FailedPrecondition' && /Runtime\.new\(\{runtimeId\}\)/.test(err.message));
    assert.throws(() => rt.watch(), (err) => err.name === 'FailedPrecondition');
    rt.detach(); // idempotent
    // the runtime lives on in the daemon: reattach and find the suspended handle
    const again = await newRuntime(daemon.target, { runtimeId: rt.id });
    try {
      assert.equal(again.reattached, true);
      assert.equal((await again.snapshot(handle)).state, 'suspended');
    } finally {
      await again.shutdown();
    }
  });
});

describe('TOOLNEXUS_TARGET and TOOLNEXUS_TOKEN', () => {
  it('are used when no target or token is passed', () => withEnv(
    { TOOLNEXUS_TARGET: authDaemon.target, TOOLNEXUS_TOKEN: `${TOKEN}\n` }, async () => {
      const rt = await Runtime.new({ registry: scenarioRegistry(), transport: mockTransport });
      try {
        const [handle, result] = await suspend(rt);
        assert.equal(result.status, 'pending');
        assert.equal((await rt.resume({ id: result.pending.id, ok: true })).result.text, 'action performed');
        assert.equal((await rt.snapshot(handle)).state, 'idle');
      } finally {
        await rt.shutdown();
      }
    }));

  it('without the token from the environment the daemon refuses the call', () => withEnv(
    { TOOLNEXUS_TARGET: authDaemon.target, TOOLNEXUS_TOKEN: undefined }, async () => {
      await assert.rejects(Runtime.new({ registry: scenarioRegistry(), transport: mockTransport }),
        (err) => err.name === 'Unauthenticated');
    }));

  it('an explicit target and token win over the environment', () => withEnv(
    { TOOLNEXUS_TARGET: '127.0.0.1:1', TOOLNEXUS_TOKEN: 'wrong-token' }, async () => {
      const rt = await Runtime.new({ target: authDaemon.target, token: TOKEN, registry: scenarioRegistry(), transport: mockTransport });
      await rt.shutdown();
      // token '' explicitly: no token at all, even though the environment has one
      await assert.rejects(Runtime.new({ target: authDaemon.target, token: '', registry: scenarioRegistry(), transport: mockTransport }),
        (err) => err.name === 'Unauthenticated');
    }));
});

describe('post and interrupt say what happened', () => {
  it('post resolves to the item\'s place in the inbox and the cap in force', async () => {
    const rt = await newRuntime(daemon.target, { options: { inboxCap: 5 } });
    try {
      const handle = await rt.spawn(rt.root, 'operator');
      assert.deepEqual(await rt.post(handle, 'first'), { position: 1, inboxCap: 5 });
      assert.deepEqual(await rt.post(handle, 'second', { from: 'bob', channel: 'chat' }), { position: 2, inboxCap: 5 });
      assert.deepEqual((await rt.snapshot(handle)).inbox.map((i) => i.text), ['first', 'second']);
    } finally {
      await rt.shutdown();
    }
  });

  it('interrupt of a suspended handle names the request it cancelled', async () => {
    const rt = await newRuntime(daemon.target);
    try {
      const [handle, result] = await suspend(rt);
      assert.deepEqual(await rt.interrupt(handle), { fromState: 'suspended', cancelledRequest: result.pending.id, inboxRestored: 0 });
      assert.equal((await rt.snapshot(handle)).state, 'idle');
    } finally {
      await rt.shutdown();
    }
  });

  it('interrupt of a running turn says so and counts the inbox items put back', async () => {
    let release;
    const blocked = new Promise((r) => { release = r; });
    let called;
    const modelCalled = new Promise((r) => { called = r; });
    const transport = async () => {
      called();
      await blocked;
      return completion({ role: 'assistant', content: 'late' }, [1, 1, 2]);
    };
    const t = tool('noop', async () => 'ok');
    const rt = await Runtime.new({ target: daemon.target, transport,
      registry: registry(agent('slow', { does: 'waits on its model', uses: { tools: [t] } })) });
    try {
      const handle = await rt.spawn(rt.root, 'slow');
      await rt.post(handle, 'one');
      await rt.post(handle, 'two');
      await rt.wake(handle, 'go');
      await modelCalled;
      assert.deepEqual(await rt.interrupt(handle), { fromState: 'running', cancelledRequest: null, inboxRestored: 2 });
      const snap = await rt.snapshot(handle);
      assert.equal(snap.state, 'idle');
      assert.deepEqual(snap.inbox.map((i) => i.text), ['one', 'two']);
      await assert.rejects(rt.interrupt(handle), (err) => err.name === 'FailedPrecondition');
    } finally {
      release();
      await rt.shutdown();
    }
  });
});
