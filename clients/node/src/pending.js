// The daemon-wide views of docs/protocol.md §10 as plain values, and PendingStream: what
// `daemon.watchPending()` returns over a `WatchPending` call. The stream is a list-watch: an
// ADDED for every open suspension, one SYNCED, then ADDED / REMOVED as they change. There is no
// sequence number to resume from, so a stream the daemon ends with UNAVAILABLE (a restart, a
// shutdown, a cluster move) is opened again from the start with backoff (RESUME_POLICY): the full
// list arrives again, then a new SYNCED; `reopened` counts the reopenings. Any other error ends
// the iteration with it; breaking out of the loop, `cancel()` or the AbortSignal end it quietly.
import grpc from '@grpc/grpc-js';

import { requestFromPb } from './convert.js';
import { fromGrpcError } from './errors.js';
import { RESUME_POLICY } from './watch.js';

export const PendingChangeType = Object.freeze({ ADDED: 'ADDED', REMOVED: 'REMOVED', SYNCED: 'SYNCED' });

export function pendingItemFromPb(m) {
  return {
    request: requestFromPb(m.request),
    runtimeId: m.runtime_id,
    handle: m.handle,
    topHandle: m.top_handle,
    createdAt: m.created_at,
    expiresAt: m.expires_at || null,
    agent: m.agent,
  };
}

export function runtimeSummaryFromPb(m) {
  return { runtimeId: m.runtime_id, createdAt: m.created_at, handles: { ...m.handles }, pending: m.pending,
    keyed: m.keyed };
}

export function pendingChangeFromPb(m) {
  return { type: m.type, item: m.item ? pendingItemFromPb(m.item) : null, reason: m.reason };
}

/** A non-negative integer option (0 = no limit / the default), refused before anything is sent. */
export function count(name, value) {
  const n = value ?? 0;
  if (!Number.isInteger(n) || n < 0) throw new TypeError(`${name} must be an integer >= 0 (0 = unset), got ${value}`);
  return n;
}

export class PendingStream {
  /** @param open `() => call`: opens the server stream (again, from the start, on a reopen) */
  constructor(open, signal, policy = RESUME_POLICY) {
    this.open = open;
    this.policy = policy;
    this.failures = 0;
    this.reopened = 0;
    this.cancelled = false;
    this.onCancel = null;
    this.iterating = false;
    this.wakeUp = null;
    this.attach(open());
    if (signal) {
      if (signal.aborted) this.cancel();
      else signal.addEventListener('abort', () => this.cancel(), { once: true });
    }
  }

  attach(call) {
    this.call = call;
    this.early = null;
    this.onEarlyError = (err) => { this.early ??= err; };
    call.on('error', this.onEarlyError);
  }

  async *[Symbol.asyncIterator]() {
    if (this.iterating) throw new Error('a PendingStream can be iterated once');
    this.iterating = true;
    try {
      while (!this.cancelled) {
        let failure = null;
        try {
          for await (const message of this.call) {
            this.failures = 0;
            yield pendingChangeFromPb(message);
          }
          failure = this.early;
        } catch (err) {
          failure = err;
        }
        this.call.off('error', this.onEarlyError);
        if (this.cancelled || failure === null) return;
        if (!(await this.reopen(failure))) throw fromGrpcError(failure);
      }
    } finally {
      this.cancel();
    }
  }

  /** After UNAVAILABLE: wait, then open the stream again from the start (the full list). */
  async reopen(err) {
    if (err?.code !== grpc.status.UNAVAILABLE || this.failures >= this.policy.attempts) return false;
    const delay = Math.min(this.policy.maxMs, this.policy.firstMs * 2 ** this.failures);
    this.failures += 1;
    await new Promise((resolveWait) => {
      const timer = setTimeout(resolveWait, delay);
      this.wakeUp = () => { clearTimeout(timer); resolveWait(); };
    });
    this.wakeUp = null;
    if (this.cancelled) return true;
    this.attach(this.open());
    this.reopened += 1;
    return true;
  }

  /** Stop the stream; a pending iteration ends without an error. Idempotent. */
  cancel() {
    if (this.cancelled) return;
    this.cancelled = true;
    this.call.cancel();
    this.wakeUp?.();
    this.onCancel?.();
  }
}
