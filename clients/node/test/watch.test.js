// Watch as an async iterator: the `pending` event with its Request, seq from 1 without gaps,
// afterSeq replay, type and handle filters, the three ways to end it, and a reader that fell
// behind the live events (reopened after the seq the daemon names, not after the stream limit).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { ResourceExhausted, Runtime, agent, registry } from '../src/index.js';
import { startDaemon } from './helpers/daemon.js';
import { completion, newRuntime, suspend } from './helpers/mock.js';

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

/** A runtime whose agent `writer` answers every wake with `writer.text` (set it before a turn). */
async function writerRuntime(target) {
  const state = { text: 'ok' };
  const transport = async () => ({ status: 200, body: completion({ role: 'assistant', content: state.text }, [1, 1, 2]) });
  const writer = await Runtime.new({ target, registry: registry(agent('writer', { does: 'writes' })), transport });
  return Object.assign(writer, { state });
}

/** `results` turns of new handles, each settling `done` with `size` bytes of text. */
async function settle(writer, results, size) {
  writer.state.text = 'x'.repeat(size);
  for (let n = 0; n < results; n += 1) {
    const h = await writer.spawn(writer.root, 'writer');
    await writer.wake(h, 'go');
    const result = await writer.wait(h, { timeoutMs: 30_000 });
    assert.equal(result.status, 'done', JSON.stringify(result));
  }
}

describe('a watch that fell behind', () => {
  it('is reopened after the seq the daemon names: every seq once, in order', async () => {
    const writer = await writerRuntime(daemon.target);
    try {
      await settle(writer, 1, 10);
      const stream = writer.watch();
      const events = stream[Symbol.asyncIterator]();
      const seqs = [(await events.next()).value.seq]; // open, so subscribed to what follows
      // 24 results of 900 kB not read meanwhile: far past the daemon's 8 MB queue for a reader
      await settle(writer, 24, 900_000);
      let results = 0;
      while (results < 25) {
        const { value, done } = await events.next();
        assert.ok(!done, 'the stream ended early');
        seqs.push(value.seq);
        if (value.type === 'result') results += 1;
      }
      await events.return();
      assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'every seq once, in order');
      assert.ok(stream.reopened >= 1, 'the daemon did not end the stream: nothing was tested');
    } finally {
      await writer.shutdown();
    }
  });

  it('a stream past the caller\'s limit (no seq to resume after) is thrown, not retried', async () => {
    const limited = await startDaemon({ args: ['--max-watch-streams-per-caller', '1'] });
    const writer = await writerRuntime(limited.target);
    try {
      await settle(writer, 1, 10);
      const held = writer.watch();
      const first = held[Symbol.asyncIterator]();
      assert.equal((await first.next()).value.seq, 1); // holds the caller's one place
      const refused = writer.watch();
      const started = Date.now();
      await assert.rejects(collect(refused, () => false), (err) => err instanceof ResourceExhausted
        && /--max-watch-streams-per-caller/.test(err.message));
      assert.equal(refused.reopened, 0);
      assert.ok(Date.now() - started < 5_000, 'refused at once, not after a backoff');
      await first.return();
    } finally {
      await writer.shutdown();
      await limited.dispose();
    }
  });
});
