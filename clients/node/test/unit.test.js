// The client's pieces without a daemon: Struct conversion, what tools may return, transport
// replies, declarations, error mapping and the call_id deduplication of the dispatcher.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  FailedPrecondition, NotFound, Tool, ToolResult, ToolnexusError, agent, errorFor, fromGrpcError, fromStruct,
  loadContract, registry, toAnswer, toRequest, toStruct, toToolResult, tool,
} from '../src/index.js';
import { Dispatcher, replyParts } from '../src/dispatch.js';
import { newRequest } from '../src/convert.js';

const silent = { debug() {}, info() {}, warn() {}, error() {} };

describe('Struct', () => {
  it('round-trips JSON through the protobuf encoding', () => {
    const value = { s: 'x', n: 5, f: 1.5, t: true, z: null, list: [1, 'a', [false], { deep: { er: [] } }], empty: {} };
    const type = loadContract().definition['google.protobuf.Struct'];
    const decoded = type.deserialize(type.serialize(toStruct(value)));
    assert.deepEqual(fromStruct(decoded), value);
  });

  it('normalises like JSON.stringify and refuses what JSON cannot hold', () => {
    const date = new Date('2026-01-02T03:04:05Z');
    assert.deepEqual(fromStruct(toStruct({ at: date, gone: undefined, nan: NaN, arr: [undefined, () => 1] })),
      { at: '2026-01-02T03:04:05.000Z', nan: null, arr: [null, null] });
    assert.equal(toStruct(null), null);
    assert.throws(() => toStruct([1, 2]), TypeError);
    const loop = {};
    loop.self = loop;
    assert.throws(() => toStruct(loop), /circular/);
  });
});

describe('values', () => {
  it('coerces what a tool returns', () => {
    assert.deepEqual({ ...toToolResult('hi') }, { output: 'hi', isError: false, metadata: null, pending: null });
    assert.equal(toToolResult(undefined).output, '');
    assert.equal(toToolResult({ a: 1 }).output, '{"a":1}');
    assert.equal(toToolResult([1, 2]).output, '[1,2]');
    assert.equal(toToolResult(42).output, '42');
    const webhookShaped = toToolResult({ output: 'bad', is_error: true });
    assert.equal(webhookShaped.isError, true);
    const suspended = toToolResult({ pending: { kind: 'approval', prompt: 'ok?', expires_at: '2030-01-01T00:00:00Z' } });
    assert.deepEqual(suspended.pending, { id: '', kind: 'approval', prompt: 'ok?', url: null, data: null,
      expiresAt: '2030-01-01T00:00:00Z' });
    assert.equal(ToolResult.error('x').isError, true);
    assert.ok(Object.isFrozen(ToolResult.ok('x')));
  });

  it('validates answers and requests', () => {
    assert.deepEqual(toAnswer({ id: 'r', ok: false, reason: 'declined' }), { id: 'r', ok: false, data: null, reason: 'declined' });
    assert.throws(() => toAnswer({ ok: true }), /needs 'id' and 'ok'/);
    assert.equal(toRequest({ id: 1, kind: 'k', prompt: 'p', expiresAt: 'soon' }).expiresAt, 'soon');
  });
});

describe('declarations', () => {
  it('builds the NewRequest the daemon expects', () => {
    const t = tool('t', () => 'x', { description: 'does t', inputSchema: { type: 'object', properties: { q: { type: 'string' } } } });
    const hook = Tool.webhook('hook', 'http://127.0.0.1:9/hook', { headers: { Authorization: 'Bearer ${TOKEN}' } });
    const reg = registry(agent('a', { does: 'A', uses: { tools: [t, hook], team: ['b'] }, budget: { maxTurns: 3 }, waitFor: true }),
      agent('b', { soul: 'be brief', model: 'small' }));
    const req = newRequest({ registry: reg, llm: { style: 'openai', baseUrl: 'http://127.0.0.1:1', apiKeyEnv: 'KEY' },
      options: { inboxCap: 4, tool_timeout_ms: 500, pendingTtlMs: 60000 }, runtimeId: 'rt-x' });
    assert.equal(req.runtime_id, 'rt-x');
    assert.deepEqual(req.llm, { style: 'openai', base_url: 'http://127.0.0.1:1', api_key_env: 'KEY' });
    assert.deepEqual(req.options, { inbox_cap: 4, tool_timeout_ms: 500, pending_ttl_ms: 60000 });
    const [a, b] = req.agents;
    assert.deepEqual(a.budget, { max_turns: 3 });
    assert.equal(a.wait_for, true);
    assert.deepEqual(a.team, ['b']);
    assert.equal(a.tools[0].source, 'native');
    assert.equal(a.tools[1].source, 'webhook');
    assert.equal(a.tools[1].http.url, 'http://127.0.0.1:9/hook');
    assert.equal(b.model, 'small');
    assert.equal(b.soul, 'be brief');
    // and it encodes
    loadContract().definition['toolnexus.agents.v1.NewRequest'].serialize(req);
    assert.deepEqual([...reg.nativeTools().keys()], ['t']);
  });

  it('carries on_crash into the tool definition (rerun unless asked)', () => {
    const charge = tool('charge', () => 'ok', { onCrash: 'ask' });
    const hook = Tool.webhook('hook', 'http://127.0.0.1:9/hook', { onCrash: 'ask' });
    const req = newRequest({ registry: registry(agent('a', { uses: { tools: [charge, hook, tool('t', () => 1)] } })),
      llm: { style: 'openai', baseUrl: 'http://127.0.0.1:1' } });
    assert.deepEqual(req.agents[0].tools.map((t) => t.on_crash), ['ask', 'ask', 'rerun']);
    const encoded = loadContract().definition['toolnexus.agents.v1.NewRequest'].serialize(req);
    const decoded = loadContract().definition['toolnexus.agents.v1.NewRequest'].deserialize(encoded);
    assert.equal(decoded.agents[0].tools[0].on_crash, 'ask');
  });

  it('carries mcpServers into the agent definition (objects, or names from --mcp-config)', () => {
    const painter = agent('painter', {
      uses: { mcpServers: [{ name: 'paint', url: 'http://127.0.0.1:8765/mcp', headers: { Authorization: 'Bearer ${T}' },
        tools: ['paint'], timeoutMs: 500, onCrash: 'ask' }] },
      mcpServers: ['files'],
    });
    const req = newRequest({ registry: registry(painter), llm: { style: 'openai', baseUrl: 'http://127.0.0.1:1' } });
    assert.deepEqual(req.agents[0].mcp_servers, [
      { name: 'paint', url: 'http://127.0.0.1:8765/mcp', headers: { Authorization: 'Bearer ${T}' }, tools: ['paint'],
        timeout_ms: 500, on_crash: 'ask' },
      { name: 'files', url: '', headers: {}, tools: [], timeout_ms: 0, on_crash: 'rerun' },
    ]);
    const contract = loadContract().definition['toolnexus.agents.v1.NewRequest'];
    const decoded = contract.deserialize(contract.serialize(req));
    assert.equal(decoded.agents[0].mcp_servers[0].url, 'http://127.0.0.1:8765/mcp');
    assert.deepEqual(decoded.agents[0].mcp_servers[0].tools, ['paint']);
    assert.throws(() => agent('a', { mcpServers: ['files', 'files'] }), /named more than once/);
    assert.throws(() => agent('a', { mcpServers: [{ name: 'x', command: 'rm' }] }), /unknown key/);
    assert.throws(() => agent('a', { mcpServers: [{ name: 'x', onCrash: 'maybe' }] }), /onCrash must be one of/);
  });

  it('refuses mistakes at declaration', () => {
    assert.throws(() => registry(agent('a'), agent('a')), /declared twice/);
    assert.throws(() => registry(agent('a', { uses: { tools: [tool('t', () => 1)] } }),
      agent('b', { uses: { tools: [tool('t', () => 2)] } })), /two different execute functions/);
    assert.throws(() => agent('a', { tools: [] }), /unknown option/);
    assert.throws(() => agent('a', { uses: { tool: [] } }), /uses takes 'tools', 'team' and 'mcpServers'/);
    assert.throws(() => new Tool({ name: 'w', source: 'webhook' }), /needs a url/);
    assert.throws(() => tool('t', () => 1, { onCrash: 'maybe' }), /onCrash must be one of rerun, ask/);
    assert.throws(() => newRequest({ registry: registry(), llm: { styel: 'x' } }), /unknown llm key "styel"/);
  });
});

describe('errors', () => {
  it('maps status codes to typed errors', () => {
    const err = errorFor('NOT_FOUND', 'unknown request id "x"');
    assert.ok(err instanceof NotFound && err instanceof ToolnexusError && err instanceof Error);
    assert.equal(err.status, 5);
    assert.equal(err.message, 'unknown request id "x"');
    assert.equal(String(err), 'NotFound [NOT_FOUND]: unknown request id "x"');
    const fromGrpc = fromGrpcError(Object.assign(new Error('9 FAILED_PRECONDITION: busy'), { code: 9, details: 'busy' }));
    assert.ok(fromGrpc instanceof FailedPrecondition);
    assert.equal(fromGrpc.message, 'busy');
    const plain = new Error('not grpc');
    assert.equal(fromGrpcError(plain), plain);
  });
});

describe('dispatcher', () => {
  it('runs a redelivered call_id once and answers both from the same run', async () => {
    let runs = 0;
    let release;
    const gate = new Promise((resolve) => { release = resolve; });
    const tools = registry(agent('a', { uses: { tools: [tool('count', async () => { runs += 1; await gate; return `run ${runs}`; })] } }))
      .nativeTools();
    const dispatcher = new Dispatcher({ runtimeId: 'rt', tools, logger: silent });
    const call = { msg: 'tool_call', tool_call: { call_id: 'c1', handle: 'root/a.1', tool: 'count', arguments: null, answer: null } };
    const first = dispatcher.submit(call);
    const redelivered = dispatcher.submit(call); // while the first run is still in flight
    release();
    assert.deepEqual(await first, await redelivered);
    assert.equal((await first).tool_outcome.output, 'run 1');
    assert.equal(runs, 1);
    assert.equal(dispatcher.submit({ msg: 'welcome', welcome: {} }), null);
  });

  it('answers a tool it does not serve, and a resolve without a resolver, without throwing', async () => {
    const dispatcher = new Dispatcher({ runtimeId: 'rt', tools: new Map(), logger: silent });
    const outcome = await dispatcher.submit({ msg: 'tool_call', tool_call: { call_id: 'c', tool: 'x', arguments: null } });
    assert.deepEqual(outcome.tool_outcome, { call_id: 'c', is_error: true, output: 'tool x is not served by this worker' });
    const resolved = await dispatcher.submit({ msg: 'resolve', resolve: { call_id: 'r', request: { id: 'q', kind: 'k', prompt: 'p' } } });
    assert.equal(resolved.resolve_reply.answer.ok, false);
    assert.equal(resolved.resolve_reply.answer.reason, 'cancelled');
  });

  it('reads transport replies in every accepted shape', async () => {
    assert.deepEqual(await replyParts({ status: 201, headers: {}, body: '{"a":1}' }), [201, { a: 1 }]);
    assert.deepEqual(await replyParts({ body: new TextEncoder().encode('{"b":2}') }), [200, { b: 2 }]);
    assert.deepEqual(await replyParts({ choices: [] }), [200, { choices: [] }]);
    assert.deepEqual(await replyParts({ status: 500, body: 'upstream broke' }), [500, { error: { message: 'upstream broke' } }]);
    assert.deepEqual(await replyParts(new Response('{"c":3}', { status: 200 })), [200, { c: 3 }]);
    await assert.rejects(replyParts(null), TypeError);
  });
});
