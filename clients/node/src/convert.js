// Proto-shaped objects (snake_case, as @grpc/proto-loader reads and writes them) <-> the
// client's camelCase values. The only module that knows both spellings.
import { budgetFields, llmFields, optionFields } from './defs.js';
import { fromStruct, toStruct } from './struct.js';

const EMPTY_SCHEMA = Object.freeze({ type: 'object', properties: {} });

// ------------------------------------------------------------------ values

export function requestToPb(r) {
  return {
    id: r.id ?? '',
    kind: r.kind ?? '',
    prompt: r.prompt ?? '',
    url: r.url ?? '',
    data: toStruct(r.data),
    expires_at: r.expiresAt ?? '',
  };
}

export function requestFromPb(m) {
  if (!m) return null;
  return {
    id: m.id,
    kind: m.kind,
    prompt: m.prompt,
    url: m.url || null,
    data: fromStruct(m.data),
    expiresAt: m.expires_at || null,
    answerUrl: m.answer_url || null,
  };
}

export function answerToPb(a) {
  return { id: a.id, ok: a.ok, data: toStruct(a.data), reason: a.reason ?? '' };
}

export function answerFromPb(m) {
  if (!m) return null;
  return { id: m.id, ok: m.ok, data: fromStruct(m.data), reason: m.reason || null };
}

export function taskResultFromPb(m) {
  if (!m) return null;
  return {
    status: m.status,
    text: m.text,
    isError: m.is_error,
    pending: requestFromPb(m.pending),
    turns: m.turns,
    totalTokens: m.total_tokens,
    limit: m.limit,
  };
}

export function snapshotFromPb(m) {
  const usage = m.usage ?? {};
  return {
    id: m.id,
    agent: m.agent,
    state: m.state,
    parent: m.parent,
    children: [...(m.children ?? [])],
    lastResult: taskResultFromPb(m.last_result),
    usageTotal: m.usage_total,
    turnsTotal: m.turns_total,
    pending: requestFromPb(m.pending),
    inbox: (m.inbox ?? []).map((i) => ({ from: i.from, channel: i.channel, text: i.text })),
    taskKey: m.task_key,
    usage: {
      promptTokens: usage.prompt_tokens ?? 0,
      completionTokens: usage.completion_tokens ?? 0,
      totalTokens: usage.total_tokens ?? 0,
    },
    depth: m.depth,
    definitionChanged: (m.definition_changed ?? []).map(definitionChangeFromPb),
    version: m.version,
  };
}

/** One registry version of a runtime, with how many handles are pinned to it (ListVersions). */
export function versionUseFromPb(m) {
  const v = m.version ?? {};
  return { number: v.number ?? 0, digest: v.digest ?? '', createdAt: v.created_at ?? '', handles: m.handles,
    latest: m.latest };
}

/** What changed, since a handle suspended, in what its answer will be fed to. */
export function definitionChangeFromPb(c) {
  return {
    part: c.part,
    name: c.name,
    change: c.change,
    summary: c.summary,
    refusesResume: Boolean(c.refuses_resume),
    added: [...(c.added ?? [])],
    removed: [...(c.removed ?? [])],
    retyped: [...(c.retyped ?? [])],
  };
}

export function eventFromPb(m) {
  return {
    seq: m.seq,
    runtimeId: m.runtime_id,
    handle: m.handle,
    type: m.type,
    fromState: m.from_state,
    toState: m.to_state,
    note: m.note,
    pending: requestFromPb(m.pending),
    result: taskResultFromPb(m.result),
    at: m.at,
    data: fromStruct(m.data),
  };
}

/** A fused Spawn/Wake reply: `result` is null without a wait (or a wait a daemon shutdown cut short). */
export function wokenFromPb(handle, m) {
  return { handle, queued: Boolean(m.queued), result: taskResultFromPb(m.result) };
}

export function resumeFromPb(m) {
  return { handle: m.handle, result: taskResultFromPb(m.result), duplicate: m.duplicate };
}

/** What Post answered: the item's 1-based place in the inbox and the inbox cap in force. */
export function postFromPb(m) {
  return { position: m.position, inboxCap: m.inbox_cap };
}

/** What Interrupt answered: the state it interrupted, the request it cancelled, items put back. */
export function interruptFromPb(m) {
  return { fromState: m.from_state, cancelledRequest: m.cancelled_request || null, inboxRestored: m.inbox_restored };
}

export function infoFromPb(m) {
  return {
    version: m.version,
    storePath: m.store_path,
    storeSizeBytes: m.store_size_bytes,
    limits: { ...(m.limits ?? {}) },
    runtimes: m.runtimes,
    formatVersion: m.format_version,
    listen: [...(m.listen ?? [])],
    config: { ...(m.config ?? {}) },
    metricsAddress: m.metrics_address ?? '',
    runtimeVersion: m.runtime_version ?? 0,
    versionsWithoutWorker: [...(m.versions_without_worker ?? [])],
  };
}

// ------------------------------------------------------------------ worker channel

/** The arguments and Context a native tool is invoked with. */
export function contextFromCall(runtimeId, call, signal) {
  const ctx = Object.freeze({
    callId: call.call_id,
    actionId: call.action_id || call.call_id, // stable across re-invocations: build request ids from it
    handle: call.handle,
    runtimeId,
    tool: call.tool,
    answer: answerFromPb(call.answer),
    // the W3C trace context of the call's execute_tool span when the daemon traces, else ''
    traceparent: call.traceparent ?? '',
    signal,
  });
  return [fromStruct(call.arguments) ?? {}, ctx];
}

export function outcomeToPb(callId, result) {
  return {
    call_id: callId,
    output: result.output,
    is_error: result.isError,
    metadata: toStruct(result.metadata),
    pending: result.pending ? requestToPb(result.pending) : null,
  };
}

// ------------------------------------------------------------------ registry

export function toolToPb(t) {
  const out = {
    name: t.name,
    description: t.description,
    input_schema: toStruct(t.inputSchema ?? EMPTY_SCHEMA),
    source: t.source,
    http: null,
    deadline_ms: t.deadlineMs ?? 0,
    on_crash: t.onCrash ?? 'rerun',
    answer_link: Boolean(t.answerLink),
  };
  if (t.endpoint) {
    const e = t.endpoint;
    out.http = { method: e.method, url: e.url, headers: e.headers, query: e.query, timeout_ms: e.timeoutMs };
  }
  return out;
}

export function budgetToPb(budget) {
  return budget ? budgetFields(budget) : null;
}

export function agentToPb(spec) {
  return {
    name: spec.name,
    does: spec.does,
    model: spec.model,
    soul: spec.soul,
    tools: spec.tools.map(toolToPb),
    team: [...spec.team],
    budget: spec.budget,
    wait_for: spec.waitFor,
    answer_link: Boolean(spec.answerLink),
    request_params: toStruct(spec.requestParams),
    mcp_servers: (spec.mcpServers ?? []).map((s) => ({
      name: s.name, url: s.url, headers: { ...s.headers }, tools: [...s.tools], timeout_ms: s.timeoutMs,
      on_crash: s.onCrash,
    })),
  };
}

export function llmToPb(llm) {
  const out = llmFields(llm);
  if ('request_params' in out) out.request_params = toStruct(out.request_params);
  return out;
}

export function newRequest({ registry, llm, options, runtimeId, runtimeKey }) {
  return {
    runtime_id: runtimeId ?? '',
    agents: registry.agents.map(agentToPb),
    llm: llmToPb(llm),
    options: optionFields(options),
    runtime_key: runtimeKey ?? '',
  };
}
