// Watch as an async iterator: the `pending` event with its Request, seq from 1 without gaps,
// afterSeq replay, type and handle filters, and the three ways to end it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { startDaemon } from './helpers/daemon.js';
import { newRuntime, suspend } from './helpers/mock.js';

let daemon;
let rt;
let handle;
let pending;
before(async () => {
  daemon = await startDaemon();
  rt = await newRuntime(daemon.target);
});
after(async () => {
  await rt?.shutdown();
  await daemon?.dispose();
});

/** Collect events until `until(event)` is true. */
async function collect(stream, until) {
  const events = [];
  for await (const event of stream) {
    events.push(event);
    if (until(event)) break;
  }
  return events;
}

describe('watch', () => {
  it('a live watch sees the pending event carrying the Request', async () => {
    const stream = rt.watch();
    const seen = collect(stream, (e) => e.type === 'pending');
    [handle, { pending }] = await suspend(rt);
    const events = await seen;
    const event = events.at(-1);
    assert.equal(event.type, 'pending');
    assert.equal(event.handle, handle);
    assert.equal(event.runtimeId, rt.id);
    assert.equal(event.pending.id, pending.id);
    assert.equal(event.pending.kind, 'authorization');
    assert.equal(event.pending.prompt, 'approve?');
    assert.match(event.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/);
    const suspended = events.find((e) => e.type === 'transition' && e.toState === 'suspended');
    assert.ok(suspended, 'the transition to suspended is announced');
    assert.equal(suspended.fromState, 'running');
    assert.equal(suspended.note, `${handle}: running→suspended DURABLE (pending "authorization", path preserved)`);
    assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => i + 1), 'seq from 1 without gaps');
  });

  it('replays stored events after afterSeq, filtered by type and handle', async () => {
    const all = await collect(rt.watch(), (e) => e.type === 'pending');
    const pendingSeq = all.at(-1).seq;
    const replay = await collect(rt.watch({ afterSeq: 2 }), (e) => e.seq === pendingSeq);
    assert.equal(replay[0].seq, 3);
    assert.deepEqual(replay.map((e) => e.seq), all.slice(2).map((e) => e.seq));
    const transitions = await collect(rt.watch({ types: ['transition'], handle }), (e) => e.toState === 'suspended');
    assert.ok(transitions.every((e) => e.type === 'transition' && e.handle === handle));
    assert.deepEqual(transitions.map((e) => `${e.fromState}→${e.toState}`), ['idle→running', 'running→suspended']);
  });

  it('follows live events: resumed, the result and running→idle', async () => {
    const stored = await collect(rt.watch(), (e) => e.type === 'pending');
    const stream = rt.watch({ afterSeq: stored.at(-1).seq, handle });
    const seen = collect(stream, (e) => e.type === 'result' && e.result.status === 'done');
    await rt.resume({ id: pending.id, ok: true });
    const events = await seen;
    const types = events.map((e) => e.type);
    assert.ok(types.includes('resumed'), `resumed in ${types}`);
    const moves = events.filter((e) => e.type === 'transition').map((e) => `${e.fromState}→${e.toState}`);
    assert.deepEqual(moves.slice(-3), ['suspended→idle', 'idle→running', 'running→idle']);
    assert.equal(events.at(-1).result.status, 'done');
    assert.equal(events.at(-1).result.text, 'action performed');
  });

  it('ends cleanly on cancel() and on an aborted signal', async () => {
    // a type this runtime never logs: nothing to replay, and nothing live happens
    const stream = rt.watch({ types: ['escalate'] });
    setTimeout(() => stream.cancel(), 100);
    assert.deepEqual(await collect(stream, () => false), []);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    assert.deepEqual(await collect(rt.watch({ types: ['escalate'], signal: controller.signal }), () => false), []);
  });

  it('a cursor past the last event is refused as OUT_OF_RANGE naming it', async () => {
    await assert.rejects(collect(rt.watch({ afterSeq: 1_000_000 }), () => false),
      (err) => err.code === 'OUT_OF_RANGE' && /past the last event .*watch with after_seq <= \d+/.test(err.message));
  });

  it('an error of the Watch call is thrown as a typed error', async () => {
    const stream = rt.watch();
    stream.call.cancel(); // not through stream.cancel(): looks like a failure of the call
    await assert.rejects(collect(stream, () => false), (err) => err.code === 'CANCELLED' && err.name === 'Cancelled');
  });
});
