// The daemon-wide views of docs/protocol.md §10 as plain values, and PendingStream: what
// `daemon.watchPending()` returns over a `WatchPending` call. The stream is a list-watch: an
// ADDED for every open suspension, one SYNCED, then ADDED / REMOVED as they change. There is no
// sequence number to resume from, so a stream the daemon ends with UNAVAILABLE (a restart, a
// shutdown, a cluster move) is opened again from the start with backoff (RESUME_POLICY): the full
// list arrives again, then a new SYNCED; `reopened` counts the reopenings. So is one the daemon
// ended RESOURCE_EXHAUSTED because its reader fell behind (the RELIST trailer says so; the
// per-caller stream limit has none and is thrown). Any other error ends the iteration with it;
// breaking out of the loop, `cancel()` or the AbortSignal end it quietly.

import { requestFromPb } from './convert.js';
import { RESUME_POLICY, ReopeningStream, exhaustedTrailer } from './watch.js';

/** The trailer of a WatchPending the daemon ended because its reader fell behind: list again. */
export const RELIST = 'x-toolnexus-relist';

/** Whether the daemon ended a WatchPending RESOURCE_EXHAUSTED for its reader falling behind. */
export function fellBehind(err) {
  return exhaustedTrailer(err, RELIST) !== null;
}

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
    version: m.version,
  };
}

export function runtimeSummaryFromPb(m) {
  return { runtimeId: m.runtime_id, createdAt: m.created_at, handles: { ...m.handles }, pending: m.pending,
    keyed: m.keyed, version: m.version, versionsWithoutWorker: [...(m.versions_without_worker ?? [])] };
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

export class PendingStream extends ReopeningStream {
  /** @param open `() => call`: opens the server stream (again, from the start, on a reopen) */
  constructor(open, signal, policy = RESUME_POLICY) {
    super(policy, 'a PendingStream');
    this.open = open;
    this.begin(signal);
  }

  /** A list-watch has nothing to resume from: the full list again. */
  openAgain() {
    return this.open();
  }

  converted(message) {
    return pendingChangeFromPb(message);
  }

  /** UNAVAILABLE, or a reader that fell behind: the full list again either way. */
  resumable(err) {
    return fellBehind(err) || super.resumable(err);
  }
}
