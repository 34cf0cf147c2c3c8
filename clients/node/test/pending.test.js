// Daemon: listPending (paged and iterated), listRuntimes and watchPending. A scripted
// AgentRuntime server on 127.0.0.1 pins the client's side (requests, paging, metadata, the
// list-watch reopening from the full list after UNAVAILABLE); the real daemon, once it serves
// these RPCs, the round trip (skipped, saying so, while it answers UNIMPLEMENTED).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import grpc from '@grpc/grpc-js';

import {
  Daemon, InvalidArgument, PendingChangeType, ResourceExhausted, Runtime, ToolResult, agent, loadContract, registry,
  tool,
} from '../src/index.js';
import { startDaemon } from './helpers/daemon.js';
import { mockTransportFor, newRuntime, suspend } from './helpers/mock.js';

const item = (n) => ({
  request: { id: `req-${n}`, kind: 'approval', prompt: `ok ${n}?` }, runtime_id: 'rt-1', handle: `root/a.${n}`,
  top_handle: `root/a.${n}`, created_at: '2026-01-01T00:00:00Z', agent: 'a',
});

/** Five items two per page, two runtimes, a WatchPending that drops its first stream with UNAVAILABLE. */
function scripted() {
  const seen = { requests: [], metadata: [], watches: 0 };
  const items = [0, 1, 2, 3, 4].map(item);
  const impl = {
    ListPending(call, callback) {
      seen.requests.push(call.request);
      seen.metadata.push(call.metadata.getMap());
      seen.keys = call.metadata.get('x-toolnexus-runtime-key');
      const start = Number(call.request.page_token || 0);
      const end = start + 2;
      callback(null, { items: items.slice(start, end), next_page_token: end < items.length ? String(end) : '' });
    },
    ListRuntimes(call, callback) {
      if (!call.request.page_token) {
        callback(null, { runtimes: [{ runtime_id: 'rt-1', handles: { suspended: 5 }, pending: 5 }], next_page_token: 'p2' });
      } else {
        callback(null, { runtimes: [{ runtime_id: 'rt-2', keyed: true }], next_page_token: '' });
      }
    },
    WatchPending(call) {
      seen.watches += 1;
      seen.requests.push(call.request);
      call.write({ type: 'ADDED', item: items[0] });
      call.write({ type: 'SYNCED' });
      if (seen.watches === 1) {
        call.write({ type: 'REMOVED', item: items[0], reason: 'answered' });
        call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'daemon shutting down' });
      }
    },
  };
  return { impl, seen };
}

async function serve(impl) {
  const server = new grpc.Server();
  server.addService(loadContract().AgentRuntime.service, impl);
  const port = await new Promise((resolvePort, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolvePort(p)));
  });
  return { server, target: `127.0.0.1:${port}` };
}

describe('Daemon against a scripted server', () => {
  let server;
  let target;
  let seen;
  before(async () => {
    const s = scripted();
    seen = s.seen;
    ({ server, target } = await serve(s.impl));
  });
  after(() => server?.forceShutdown());

  it('listPending sends the filters and metadata, returns camelCase items and the next token', async () => {
    const d = new Daemon({ target, token: 'tok', runtimeKey: 'k1' });
    try {
      const page = await d.listPending({ runtimeId: 'rt-1', kind: 'approval', minAgeMs: 5, maxAgeMs: 9, pageSize: 2 });
      assert.equal(page.nextPageToken, '2');
      assert.deepEqual(page.items[0], {
        request: { id: 'req-0', kind: 'approval', prompt: 'ok 0?', url: null, data: null, expiresAt: null,
          ...(page.items[0].request.answerUrl === undefined ? {} : { answerUrl: page.items[0].request.answerUrl }) },
        runtimeId: 'rt-1', handle: 'root/a.0', topHandle: 'root/a.0', createdAt: '2026-01-01T00:00:00Z',
        expiresAt: null, agent: 'a', version: 0,
      });
      const sent = seen.requests.at(-1);
      assert.deepEqual([sent.runtime_id, sent.kind, Number(sent.min_age_ms), Number(sent.max_age_ms), sent.page_size],
        ['rt-1', 'approval', 5, 9, 2]);
      assert.equal(seen.metadata.at(-1).authorization, 'Bearer tok');
      assert.deepEqual(seen.keys, ['k1']);
    } finally {
      d.close();
    }
  });

  it('iterPending and iterRuntimes walk every page', async () => {
    const d = new Daemon({ target });
    try {
      const ids = [];
      for await (const i of d.iterPending()) ids.push(i.request.id);
      assert.deepEqual(ids, ['req-0', 'req-1', 'req-2', 'req-3', 'req-4']);
      const runtimes = [];
      for await (const r of d.iterRuntimes()) runtimes.push(r);
      assert.deepEqual(runtimes.map((r) => r.runtimeId), ['rt-1', 'rt-2']);
      assert.deepEqual([runtimes[0].handles, runtimes[0].pending, runtimes[1].keyed], [{ suspended: 5 }, 5, true]);
    } finally {
      d.close();
    }
  });

  it('a negative bound is refused before anything is sent', async () => {
    const d = new Daemon({ target });
    const before = seen.requests.length;
    try {
      await assert.rejects(d.listPending({ minAgeMs: -1 }), /minAgeMs must be an integer >= 0/);
      assert.equal(seen.requests.length, before);
    } finally {
      d.close();
    }
  });

  it('watchPending reopens from the full list after UNAVAILABLE', async () => {
    const d = new Daemon({ target });
    try {
      const stream = d.watchPending({ runtimeId: 'rt-1', kind: 'approval' });
      const changes = [];
      for await (const change of stream) {
        changes.push([change.type, change.item?.request.id ?? null, change.reason]);
        if (changes.length === 5) break;
      }
      assert.deepEqual(changes, [['ADDED', 'req-0', ''], ['SYNCED', null, ''], ['REMOVED', 'req-0', 'answered'],
        ['ADDED', 'req-0', ''], ['SYNCED', null, '']]);
      assert.equal(stream.reopened, 1);
      assert.equal(PendingChangeType.SYNCED, 'SYNCED');
    } finally {
      d.close();
    }
  });

  it('target and token come from the environment', async () => {
    const saved = { ...process.env };
    process.env.TOOLNEXUS_TARGET = target;
    process.env.TOOLNEXUS_TOKEN = 'from-env';
    try {
      const d = new Daemon();
      assert.equal(d.target, target);
      await d.listPending();
      d.close();
      assert.equal(seen.metadata.at(-1).authorization, 'Bearer from-env');
    } finally {
      process.env = saved;
    }
  });
});

describe('Daemon: an error other than UNAVAILABLE ends the watch', () => {
  it('throws it as a ToolnexusError', async () => {
    const { server, target } = await serve({
      WatchPending(call) { call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: 'kind too long' }); },
    });
    const d = new Daemon({ target });
    try {
      await assert.rejects((async () => { for await (const _ of d.watchPending({ kind: 'x' })) { /* none */ } })(),
        (err) => err instanceof InvalidArgument && /kind too long/.test(err.message));
    } finally {
      d.close();
      server.forceShutdown();
    }
  });
});

describe('Daemon against the real daemon', () => {
  let daemon;
  before(async () => { daemon = await startDaemon(); });
  after(async () => { await daemon?.dispose(); });

  it('lists a suspension, watches it go when answered', async () => {
    const d = new Daemon({ target: daemon.target });
    const rt = await newRuntime(daemon.target);
    try {
      const page = await d.listPending({ runtimeId: rt.id });
      assert.deepEqual(page.items, []);
      const [handle, result] = await suspend(rt);
      const [found] = (await d.listPending({ runtimeId: rt.id })).items;
      assert.deepEqual([found.request.id, found.handle, found.runtimeId], [result.pending.id, handle, rt.id]);
      const stream = d.watchPending({ runtimeId: rt.id });
      const changes = [];
      for await (const change of stream) {
        changes.push(change);
        if (change.type === 'SYNCED') await d.resume(rt.id, { id: result.pending.id, ok: true });
        if (change.type === 'REMOVED') break;
      }
      assert.deepEqual(changes.map((c) => c.type), ['ADDED', 'SYNCED', 'REMOVED']);
      assert.equal(changes[2].reason, 'answered');
    } finally {
      d.close();
      await rt.shutdown();
    }
  });
});

describe('a pending watcher that fell behind', () => {
  // each open suspension carries ~310 kB (the default bounds: 64 kB of prompt, 256 kB of data), so
  // 70 of them are well past the 8 MB a watcher may fall behind plus what the transport buffers
  const SUSPENSIONS = 70;
  let daemon;
  before(async () => { daemon = await startDaemon({ args: ['--max-watch-streams-per-caller', '2'] }); });
  after(async () => { await daemon?.dispose(); });

  const ask = tool('ask', async () => ToolResult.suspend({
    kind: 'input', prompt: 'p'.repeat(60_000), data: { blob: 'y'.repeat(250_000) } }),
  { inputSchema: { type: 'object', properties: {} } });
  const asker = () => Runtime.new({ target: daemon.target, transport: mockTransportFor('ask'),
    registry: registry(agent('asker', { does: 'asks', uses: { tools: [ask] } })) });

  it('starts over with the full list: every open request listed again, then SYNCED', async () => {
    const d = new Daemon({ target: daemon.target });
    const rt = await asker();
    try {
      const stream = d.watchPending({ runtimeId: rt.id });
      const changes = stream[Symbol.asyncIterator]();
      assert.equal((await changes.next()).value.type, 'SYNCED');
      const ids = new Set();
      for (let n = 0; n < SUSPENSIONS; n += 1) { // not read meanwhile
        const h = await rt.spawn(rt.root, 'asker');
        await rt.wake(h, 'go');
        ids.add((await rt.wait(h, { timeoutMs: 30_000 })).pending.id);
      }
      const listed = new Set();
      for (;;) {
        const { value, done } = await changes.next();
        assert.ok(!done, 'the stream ended before it was listed again');
        if (stream.reopened === 0) continue;
        if (value.type === 'SYNCED') break;
        assert.equal(value.type, 'ADDED');
        listed.add(value.item.request.id);
      }
      await changes.return();
      assert.equal(stream.reopened, 1);
      assert.deepEqual([...listed].sort(), [...ids].sort());
    } finally {
      d.close();
      await rt.shutdown();
    }
  });

  it('a stream past the caller\'s limit (no relist trailer) is thrown, not retried', async () => {
    const d = new Daemon({ target: daemon.target });
    try {
      const held = [d.watchPending(), d.watchPending()].map((s) => s[Symbol.asyncIterator]());
      for (const h of held) assert.equal((await h.next()).value.type, 'SYNCED');
      const refused = d.watchPending();
      await assert.rejects((async () => { for await (const _ of refused) { /* none */ } })(),
        (err) => err instanceof ResourceExhausted && /--max-watch-streams-per-caller/.test(err.message));
      assert.equal(refused.reopened, 0);
      for (const h of held) await h.return();
    } finally {
      d.close();
    }
  });
});
