// Runtime: one agent runtime on a toolnexus daemon, driven with promises from Node.
//
// `Runtime.new` creates the runtime (or reattaches to `runtimeId`), then, when this process has
// something to serve (native tools with an execute function, a model `transport`, a `waitFor`
// resolver), opens the worker stream and resolves only once the daemon welcomed it, so a wake
// right after never races a missing worker. Every verb is a thin async wrapper over one RPC;
// gRPC failures reject with ToolnexusError subclasses. `detach()` (or `close()` without a
// handle) only disconnects this client, ending every stream and call it opened so the process can
// exit: the runtime and its handles live on in the daemon and can be reattached from another
// process, in any language. `target` and `token` default to TOOLNEXUS_TARGET / TOOLNEXUS_TOKEN.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

import grpc from '@grpc/grpc-js';

import * as convert from './convert.js';
import { Registry, budgetFields, llmFields } from './defs.js';
import { Dispatcher } from './dispatch.js';
import { OpenCalls } from './calls.js';
import { fromGrpcError } from './errors.js';
import { loadContract } from './proto.js';
import { withTrace } from './trace.js';
import { toAnswer } from './types.js';
import { EventStream } from './watch.js';
import { WorkerStream } from './worker.js';

export const DEFAULT_TARGET = '127.0.0.1:50051';
export const RUNTIME_KEY_HEADER = 'x-toolnexus-runtime-key';
// grpc's own reconnect backoff grows to minutes; a sidecar that restarts should be found again quickly
export const CHANNEL_OPTIONS = Object.freeze({
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.min_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 2000,
});
// a Wait with a timeout is answered by the daemon; the deadline only guards against a dead one
const WAIT_DEADLINE_SLACK_MS = 10_000;

/** A fused call's `waitMs` as the daemon's `wait_ms`: unset → 0 (no wait), a positive fraction
 * → at least 1 ms; a negative one goes as it is, for the daemon to refuse (INVALID_ARGUMENT). */
function fusedWaitMs(waitMs) {
  if (waitMs === null || waitMs === undefined) return 0;
  const ms = Math.round(waitMs);
  return waitMs < 0 ? ms : Math.max(1, ms);
}

/** The gRPC deadline of a fused call that waits (its wait plus Wait's slack); none otherwise. */
const fusedDeadline = (waitMs) => (waitMs > 0 ? waitMs + WAIT_DEADLINE_SLACK_MS : undefined);

const SILENT = Object.freeze({ debug() {}, info() {} });
const defaultLogger = Object.freeze({
  ...SILENT,
  warn: (msg) => process.stderr.write(`toolnexus-client: ${msg}\n`),
  error: (msg) => process.stderr.write(`toolnexus-client: ${msg}\n`),
});

function makeMetadata(token, runtimeKey) {
  const md = new grpc.Metadata();
  if (token) md.set('authorization', `Bearer ${token}`);
  if (runtimeKey) md.set(RUNTIME_KEY_HEADER, runtimeKey);
  return md;
}

function resolveLlm(llm, transport) {
  if (transport !== undefined && transport !== null && typeof transport !== 'function') {
    throw new TypeError('transport must be a function ({body}) => {status, headers, body}');
  }
  if (!llm) {
    if (!transport) throw new TypeError('Runtime.new needs llm (a model config) or transport (a model function)');
    return { style: 'worker' };
  }
  const fields = llmFields(llm);
  const style = fields.style ?? 'openai';
  if (transport && style !== 'worker') {
    throw new TypeError(`transport serves llm style "worker", but llm style is "${style}"`);
  }
  return { ...llm, style };
}

// The generated client also gets camelCase aliases of the RPCs (`close` for Close, `wait` for
// Wait, ...), which shadow grpc.Client's own close(): always close the channel through Client.
export const closeClient = (client) => grpc.Client.prototype.close.call(client);

const workerId = () => `node-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;

/** One unary RPC as a promise; with `calls`, tracked so that detach() cancels it. */
export function unary(client, method, request, metadata, deadlineMs, calls = null) {
  return new Promise((resolve, reject) => {
    calls?.ensureOpen();
    const options = deadlineMs ? { deadline: Date.now() + deadlineMs } : {};
    let release = () => {};
    const call = client[method](request, withTrace(metadata), options, (err, reply) => {
      release();
      if (err) reject(calls ? calls.error(err) : fromGrpcError(err));
      else resolve(reply);
    });
    if (calls) release = calls.track(call);
  });
}

/** `value` if given, else the environment variable `name` (trimmed) if set, else `fallback`. */
export function fromEnv(value, name, fallback) {
  if (value !== undefined && value !== null) return value;
  const env = (process.env[name] ?? '').trim();
  return env || fallback;
}

/** A connected runtime; build it with `Runtime.new(...)`. */
export class Runtime {
  constructor({ client, runtimeId, root, reattached, metadata, worker, version = 0 }) {
    this.client = client;
    this.id = runtimeId;
    this.root = root;
    this.reattached = reattached;
    // the runtime's latest registry version once New returned (docs/versions.md); 0 from serve()
    this.version = version;
    this.metadata = metadata;
    this.worker = worker;
    this.calls = new OpenCalls();
  }

  /**
   * Create a runtime (or reattach to `runtimeId`) and start serving its tools, model and resolver.
   * @param {import('./index.js').NewOptions} options
   */
  static async new({
    target = null, registry, transport = null, llm = null, runtimeId = null, options = null,
    waitFor = null, token = null, runtimeKey = null, credentials = null, channelOptions = {},
    workerId: wid = null, connectTimeoutMs = 10_000, logger = defaultLogger, workerVersions = [],
  } = {}) {
    if (!(registry instanceof Registry)) {
      throw new TypeError('Runtime.new needs a registry (registry(agent(...), ...))');
    }
    if (waitFor !== null && typeof waitFor !== 'function') {
      throw new TypeError('waitFor must be a function (request) => answer');
    }
    const resolvedLlm = resolveLlm(llm, transport);
    const tools = registry.nativeTools();
    const request = convert.newRequest({ registry, llm: resolvedLlm, options, runtimeId, runtimeKey });
    const log = { ...SILENT, ...defaultLogger, ...logger };
    // the sidecar's address and bearer token, as a deployment sets them (deploy/pod.yaml)
    target = fromEnv(target, 'TOOLNEXUS_TARGET', DEFAULT_TARGET);
    const metadata = makeMetadata(fromEnv(token, 'TOOLNEXUS_TOKEN', null), runtimeKey);
    const { AgentRuntime } = loadContract();
    const client = new AgentRuntime(target, credentials ?? grpc.credentials.createInsecure(),
      { ...CHANNEL_OPTIONS, ...channelOptions });
    try {
      const reply = await unary(client, 'New', request, metadata);
      let worker = null;
      if (tools.size > 0 || transport || waitFor) {
        const dispatcher = new Dispatcher({ runtimeId: reply.runtime_id, tools, transport, resolver: waitFor, logger: log });
        const hello = {
          runtime_id: reply.runtime_id,
          worker_id: wid ?? workerId(),
          tools: [...tools.keys()].sort(),
          llm: Boolean(transport),
          resolver: Boolean(waitFor),
          // an empty `tools` alone means "every native tool": say so when this worker serves none
          no_tools: tools.size === 0,
          // the registry versions served; none: the latest
          versions: [...new Set(workerVersions)].sort((a, b) => a - b),
        };
        worker = new WorkerStream({ client, hello, dispatcher, metadata, logger: log });
        await worker.start(connectTimeoutMs);
      }
      return new Runtime({ client, runtimeId: reply.runtime_id, root: reply.root, reattached: reply.reattached,
        metadata, worker, version: reply.version?.number ?? 0 });
    } catch (err) {
      closeClient(client);
      throw err;
    }
  }

  /**
   * Serve the native tools of `registry` for the registry `versions` of an existing runtime,
   * without a New (which would make `registry` the latest version): an older build of the app keeps
   * serving the handles still pinned to its version while a newer build serves the latest.
   * @param {import('./index.js').ServeOptions} options
   */
  static async serve({
    target = null, registry, runtimeId, versions, transport = null, token = null, runtimeKey = null,
    credentials = null, channelOptions = {}, workerId: wid = null, connectTimeoutMs = 10_000,
    logger = defaultLogger,
  } = {}) {
    if (!(registry instanceof Registry)) {
      throw new TypeError('Runtime.serve needs the registry whose tools it serves');
    }
    if (!runtimeId || !Array.isArray(versions) || versions.length === 0) {
      throw new TypeError('Runtime.serve needs runtimeId and the registry versions it serves (runtime.version '
        + 'of the New that deployed them)');
    }
    const tools = registry.nativeTools();
    const log = { ...SILENT, ...defaultLogger, ...logger };
    target = fromEnv(target, 'TOOLNEXUS_TARGET', DEFAULT_TARGET);
    const metadata = makeMetadata(fromEnv(token, 'TOOLNEXUS_TOKEN', null), runtimeKey);
    const { AgentRuntime } = loadContract();
    const client = new AgentRuntime(target, credentials ?? grpc.credentials.createInsecure(),
      { ...CHANNEL_OPTIONS, ...channelOptions });
    try {
      const dispatcher = new Dispatcher({ runtimeId, tools, transport, resolver: null, logger: log });
      const hello = { runtime_id: runtimeId, worker_id: wid ?? workerId(), tools: [...tools.keys()].sort(),
        llm: Boolean(transport), resolver: false, no_tools: tools.size === 0,
        versions: [...new Set(versions)].sort((a, b) => a - b) };
      const worker = new WorkerStream({ client, hello, dispatcher, metadata, logger: log });
      await worker.start(connectTimeoutMs);
      return new Runtime({ client, runtimeId, root: 'root', reattached: true, metadata, worker });
    } catch (err) {
      closeClient(client);
      throw err;
    }
  }

  // ------------------------------------------------------------------ verbs

  /**
   * A new idle child handle of `parent` running `agent`; resolves to its id. With `prompt` the
   * handle is also woken, in the same durable commit (one call instead of spawn then wake), and
   * it resolves to a `Woken` `{handle, queued, result}`; with `waitMs` (at most an hour) `result`
   * is the settled result of that turn (or a `timeout` result), as `wait(handle, waitMs)` gives it.
   */
  async spawn(parent, agent, { budget = null, prompt = null, waitMs = null } = {}) {
    if (prompt === '') {
      // the daemon wakes on a non-empty prompt only: '' would spawn without the Woken promised
      throw new TypeError('prompt is empty: pass the text that wakes the new handle, or leave it unset to only spawn');
    }
    const request = { runtime_id: this.id, parent: parent ?? '', agent, budget: budget ? budgetFields(budget) : null,
      prompt: prompt ?? '', wait_ms: fusedWaitMs(waitMs) };
    const reply = await this.rpc('Spawn', request, fusedDeadline(request.wait_ms));
    return prompt === null || prompt === undefined ? reply.handle : convert.wokenFromPb(reply.handle, reply);
  }

  /**
   * idle→running with `prompt`; resolves once durable, to `true` if the wake was queued. With
   * `waitMs` (at most an hour) it resolves to a `Woken` `{handle, queued, result}` whose `result`
   * is the settled result of the turn it started (a queued wake: the turn that consumes it) or a
   * `timeout` result; the daemon registers that wait before it acknowledges the wake.
   */
  async wake(handle, prompt, { waitMs = null, upgrade = false } = {}) {
    const request = { runtime_id: this.id, handle, prompt, wait_ms: fusedWaitMs(waitMs), upgrade: Boolean(upgrade) };
    const reply = await this.rpc('Wake', request, fusedDeadline(request.wait_ms));
    return waitMs === null || waitMs === undefined ? reply.queued : convert.wokenFromPb(handle, reply);
  }

  /**
   * The next result of `handle` (or its last one if settled). With `timeoutMs` (a number or
   * `{timeoutMs}`), a `timeout` result once it passes; the handle keeps running.
   */
  async wait(handle, options = {}) {
    const timeoutMs = typeof options === 'number' ? options : options?.timeoutMs;
    const ms = timeoutMs === undefined || timeoutMs === null ? 0 : Math.max(1, Math.round(timeoutMs));
    const deadline = ms ? ms + WAIT_DEADLINE_SLACK_MS : undefined;
    const reply = await this.rpc('Wait', { runtime_id: this.id, handle, timeout_ms: ms }, deadline);
    return convert.taskResultFromPb(reply);
  }

  /**
   * Answer a pending Request (routed by `answer.id`) and resolve once the cascade settles
   * (with `noWait`, once the answer is durably accepted). A suspended tool whose definition
   * changed since it suspended (`snapshot(h).definitionChanged`) is refused with
   * FailedPrecondition unless `acceptChangedDefinition` is set. The handles answer on their own
   * registry version; `upgrade` moves them to the latest first (refused when a suspended tool
   * changed there, unless `acceptChangedDefinition`).
   */
  async resume(answer, { handle = null, noWait = false, acceptChangedDefinition = false, upgrade = false } = {}) {
    const request = { runtime_id: this.id, answer: convert.answerToPb(toAnswer(answer)), handle: handle ?? '',
      no_wait: noWait, accept_changed_definition: Boolean(acceptChangedDefinition), upgrade: Boolean(upgrade) };
    return convert.resumeFromPb(await this.rpc('Resume', request));
  }

  /** The runtime's registry versions, oldest first, with how many handles each holds. */
  async versions() {
    const reply = await this.rpc('ListVersions', { runtime_id: this.id });
    return (reply.versions ?? []).map(convert.versionUseFromPb);
  }

  /** A read-only view of one handle. */
  async snapshot(handle) {
    return convert.snapshotFromPb(await this.rpc('Snapshot', { runtime_id: this.id, handle }));
  }

  /**
   * Every stored event with `seq > afterSeq`, then live ones, as an async iterable; end it by
   * breaking out of the loop, with `stream.cancel()`, or with an AbortSignal. A stream the
   * daemon ends with UNAVAILABLE, or with RESOURCE_EXHAUSTED because this reader fell behind the
   * live events, is reopened after the last seq received (no gap, no duplicate).
   */
  watch({ afterSeq = 0, types = [], handle = null, signal = null } = {}) {
    this.calls.ensureOpen();
    const kinds = [...types];
    const open = (after) => this.client.Watch(
      { runtime_id: this.id, after_seq: after, types: kinds, handle: handle ?? '' }, this.metadata);
    const stream = new EventStream(open, afterSeq, signal);
    stream.onCancel = this.calls.track(stream);
    return stream;
  }

  /**
   * Append an inbox item `{from, channel, text}` for the handle's next wake; resolves to
   * `{position, inboxCap}`: the item's 1-based place in the inbox and the cap in force.
   */
  async post(handle, text, { from = 'app', channel = 'message' } = {}) {
    return convert.postFromPb(await this.rpc('Post', { runtime_id: this.id, handle, item: { from, channel, text } }));
  }

  /**
   * Abort a running turn, or cancel a suspended handle's pending request; resolves to
   * `{fromState, cancelledRequest, inboxRestored}` saying which of the two happened.
   */
  async interrupt(handle) {
    return convert.interruptFromPb(await this.rpc('Interrupt', { runtime_id: this.id, handle }));
  }

  /** With a handle: close it and its subtree (the Close RPC). Without: `detach()`. */
  async close(handle) {
    if (handle === undefined || handle === null) {
      this.detach();
      return;
    }
    await this.rpc('Close', { runtime_id: this.id, handle });
  }

  /** Every handle of the runtime (pre-order, root excluded). */
  async list() {
    return (await this.rpc('List', { runtime_id: this.id })).handles.map(convert.snapshotFromPb);
  }

  /** Daemon version, limits, store path and size. */
  async info() {
    return convert.infoFromPb(await this.rpc('Info', { runtime_id: this.id }));
  }

  /** Close every handle in the daemon (keeping the final state unless `purge`), then detach. */
  async shutdown({ purge = false } = {}) {
    try {
      await this.rpc('Shutdown', { runtime_id: this.id, purge });
    } finally {
      this.detach();
    }
  }

  /**
   * Stop serving, end every call this client opened (watches end quietly, calls in flight reject
   * with Cancelled) and close the channel, so nothing of this client keeps the process alive.
   * The runtime lives on in the daemon. Idempotent.
   */
  detach() {
    if (this.worker) {
      this.worker.stop();
      this.worker = null;
    }
    this.calls.closeAll();
    closeClient(this.client);
  }

  rpc(method, request, deadlineMs) {
    return unary(this.client, method, request, this.metadata, deadlineMs, this.calls);
  }
}
