// The plain values the client hands to, and receives from, application code. Everything is a
// plain object with camelCase keys; only ToolResult is a class (so a tool can return one and
// the worker can tell it from a JSON object). The pinned vocabularies of docs/protocol.md §2 are frozen
// string maps; fields stay plain strings so a value the daemon adds later still passes through.

/** The state of a handle (docs/protocol.md §2). */
export const HandleState = Object.freeze({
  IDLE: 'idle',
  RUNNING: 'running',
  SUSPENDED: 'suspended',
  CLOSED: 'closed',
});

/** The status of a TaskResult; only `done` and `pending` are not errors. */
export const Status = Object.freeze({
  DONE: 'done',
  PENDING: 'pending',
  INCOMPLETE: 'incomplete',
  INTERRUPTED: 'interrupted',
  CLOSED: 'closed',
  TIMEOUT: 'timeout',
  ERROR: 'error',
});

/** A Request from a plain object (`expiresAt` or `expires_at`); absent optionals are null. */
export function toRequest(value) {
  if (value === null || typeof value !== 'object') {
    throw new TypeError(`a request is an object {id, kind, prompt, url?, data?, expiresAt?}, got ${value}`);
  }
  const expires = value.expiresAt ?? value.expires_at;
  return {
    id: String(value.id ?? ''),
    kind: String(value.kind ?? ''),
    prompt: String(value.prompt ?? ''),
    url: value.url ? String(value.url) : null,
    data: value.data && typeof value.data === 'object' ? { ...value.data } : null,
    expiresAt: expires ? String(expires) : null,
  };
}

/** An Answer from a plain object `{id, ok, data?, reason?}` (both id and ok are required). */
export function toAnswer(value) {
  if (value === null || typeof value !== 'object' || !('id' in value) || !('ok' in value)) {
    const keys = value && typeof value === 'object' ? Object.keys(value).sort().join(', ') : String(value);
    throw new TypeError(`an answer needs 'id' and 'ok', got ${keys || 'no keys'}`);
  }
  return {
    id: String(value.id),
    ok: Boolean(value.ok),
    data: value.data && typeof value.data === 'object' ? { ...value.data } : null,
    reason: value.reason ? String(value.reason) : null,
  };
}

/** What a tool returns: output text, or an error, or a suspension on a Request (`pending`). */
export class ToolResult {
  /** @param {{output?: string, isError?: boolean, metadata?: object|null, pending?: object|null}} [fields] */
  constructor({ output = '', isError = false, metadata = null, pending = null } = {}) {
    this.output = String(output ?? '');
    this.isError = Boolean(isError);
    this.metadata = metadata ?? null;
    this.pending = pending ? toRequest(pending) : null;
    Object.freeze(this);
  }

  /** A successful result. */
  static ok(text, metadata = null) {
    return new ToolResult({ output: text, metadata });
  }

  /** An error result: the model sees the text, the turn goes on. */
  static error(text, metadata = null) {
    return new ToolResult({ output: text, isError: true, metadata });
  }

  /**
   * Suspend the handle on a Request `{id?, kind, prompt, url?, data?, expiresAt?}`; without an
   * id the daemon assigns a unique one. The tool is invoked again with `ctx.answer` set on resume.
   */
  static suspend(request) {
    return new ToolResult({ pending: request });
  }
}

const RESULT_KEYS = new Set(['output', 'isError', 'is_error', 'metadata', 'pending']);

/**
 * Coerce what a tool returned: a string → ok output; a ToolResult as is; an object whose keys
 * are all ToolResult keys (`output`, `isError`/`is_error`, `metadata`, `pending`) → that
 * ToolResult; null/undefined → empty output; anything else → its JSON text as output.
 */
export function toToolResult(value) {
  if (value instanceof ToolResult) return value;
  if (typeof value === 'string') return ToolResult.ok(value);
  if (value === null || value === undefined) return ToolResult.ok('');
  if (typeof value === 'object' && !Array.isArray(value)) {
    const keys = Object.keys(value);
    if (keys.length > 0 && keys.every((k) => RESULT_KEYS.has(k))) {
      return new ToolResult({
        output: value.output ?? '',
        isError: value.isError ?? value.is_error ?? false,
        metadata: value.metadata ?? null,
        pending: value.pending ?? null,
      });
    }
  }
  const text = JSON.stringify(value);
  return ToolResult.ok(text === undefined ? String(value) : text);
}
