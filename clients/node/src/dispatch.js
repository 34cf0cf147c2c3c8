// What a worker does with each call the daemon sends (docs/protocol.md §6): ToolCall → ToolOutcome,
// LlmCall → LlmReply, Resolve → ResolveReply; the coercion of whatever user code returns into
// those replies; and deduplication by call_id: the daemon redelivers a call (same id) when the
// stream that held it broke, so the dispatcher keeps a bounded map call_id → reply promise and
// answers a redelivery from it without running the tool twice, even while the first run is
// still in flight. User code never crashes the worker: a throw becomes an error reply.
import * as convert from './convert.js';
import { fromStruct, toStruct } from './struct.js';
import { toAnswer, toToolResult } from './types.js';

const describeError = (err) => (err instanceof Error
  ? `${err.name}: ${err.message}`
  : `${typeof err === 'object' ? 'value' : typeof err}: ${String(err)}`);

/** Run one native tool call; never rejects. */
export async function runTool(runtimeId, tools, call, signal, logger) {
  const t = tools.get(call.tool);
  if (!t || !t.execute) {
    return { call_id: call.call_id, is_error: true, output: `tool ${call.tool} is not served by this worker` };
  }
  try {
    const [args, ctx] = convert.contextFromCall(runtimeId, call, signal);
    const result = toToolResult(await t.execute(args, ctx));
    return convert.outcomeToPb(call.call_id, result);
  } catch (err) {
    logger.warn(`tool ${call.tool} raised ${err instanceof Error ? err.name : typeof err}`);
    return { call_id: call.call_id, is_error: true, output: `tool ${call.tool} raised ${describeError(err)}` };
  }
}

/** Relay one model call to the transport; a failure becomes `LlmReply.error`. */
export async function runLlm(transport, call, logger) {
  if (!transport) return { call_id: call.call_id, error: 'this worker has no model transport' };
  try {
    const request = { body: fromStruct(call.body) ?? {} };
    if (call.traceparent) request.traceparent = call.traceparent; // the call's chat span, when the daemon traces
    const reply = await transport(request);
    const [status, body] = await replyParts(reply);
    return { call_id: call.call_id, status, body: toStruct(body), error: '' };
  } catch (err) {
    logger.warn(`model transport raised ${err instanceof Error ? err.name : typeof err}`);
    return { call_id: call.call_id, error: `transport raised ${describeError(err)}` };
  }
}

/**
 * `[status, body]` of a transport reply: `{status, headers, body}` (body an object, a JSON string
 * or bytes), a fetch Response, or a bare chat-completion object (a 200 body).
 */
export async function replyParts(reply) {
  if (reply === null || typeof reply !== 'object') {
    throw new TypeError(`the transport returned ${reply === null ? 'null' : typeof reply}, not {status, headers, body}`);
  }
  if (typeof reply.text === 'function' && typeof reply.status === 'number' && typeof reply.headers?.get === 'function') {
    return [reply.status, parseBody(await reply.text())]; // a fetch Response
  }
  if (!('body' in reply)) return [200, { ...reply }];
  const status = Number(reply.status || 200);
  let { body } = reply;
  if (body instanceof Uint8Array || body instanceof ArrayBuffer) body = new TextDecoder().decode(body);
  if (typeof body === 'string') body = parseBody(body);
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new TypeError(`the model reply body is ${Array.isArray(body) ? 'an array' : typeof body}, not a JSON object`);
  }
  return [status, body];
}

function parseBody(text) {
  if (!text.trim()) return {};
  try {
    const parsed = JSON.parse(text);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : { value: parsed };
  } catch {
    return { error: { message: text } };
  }
}

/** Ask the resolver for an Answer; none, or a failing one, declines (reason `cancelled`). */
export async function runResolve(resolver, call, logger) {
  const request = convert.requestFromPb(call.request) ?? { id: '' };
  let answer;
  try {
    if (!resolver) throw new Error('this worker has no resolver');
    answer = toAnswer(await resolver(request));
  } catch (err) {
    logger.warn(`resolver failed for request ${request.id}: ${err instanceof Error ? err.name : typeof err}`);
    answer = { id: request.id, ok: false, data: null, reason: 'cancelled' };
  }
  return { call_id: call.call_id, answer: convert.answerToPb(answer) };
}

/** Runs daemon calls concurrently and deduplicates them by call_id. */
export class Dispatcher {
  constructor({ runtimeId, tools, transport = null, resolver = null, logger, cacheSize = 1024 }) {
    this.runtimeId = runtimeId;
    this.tools = tools;
    this.transport = transport;
    this.resolver = resolver;
    this.logger = logger;
    this.cacheSize = cacheSize;
    this.cache = new Map(); // call_id → {promise, settled}
    this.abort = new AbortController();
  }

  /** The reply (a WorkerMessage) to one DaemonMessage call, or null for anything else. */
  submit(message) {
    const kind = message.msg;
    if (kind !== 'tool_call' && kind !== 'llm_call' && kind !== 'resolve') return null;
    const callId = message[kind].call_id;
    const known = this.cache.get(callId);
    if (known) {
      this.cache.delete(callId); // refresh its place in the LRU order
      this.cache.set(callId, known);
      return known.promise;
    }
    const entry = { settled: false, promise: null };
    entry.promise = this.handle(kind, message[kind]).finally(() => { entry.settled = true; });
    this.cache.set(callId, entry);
    this.evict();
    return entry.promise;
  }

  async handle(kind, call) {
    if (kind === 'tool_call') {
      return { tool_outcome: await runTool(this.runtimeId, this.tools, call, this.abort.signal, this.logger) };
    }
    if (kind === 'llm_call') return { llm_reply: await runLlm(this.transport, call, this.logger) };
    return { resolve_reply: await runResolve(this.resolver, call, this.logger) };
  }

  evict() {
    for (const [callId, entry] of this.cache) {
      if (this.cache.size <= this.cacheSize) return;
      if (!entry.settled) return; // never forget a call that is still running
      this.cache.delete(callId);
    }
  }

  /** Signal running tools (ctx.signal) that this worker is going away. */
  close() {
    this.abort.abort();
  }
}
