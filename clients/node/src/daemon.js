// Daemon: the calls about a whole toolnexus daemon rather than one runtime (docs/protocol.md §10).
//
// A person's inbox, a dashboard or an approval bot starts without a runtime id in hand: a Daemon
// lists the open suspensions across runtimes (`listPending`, paged, or `iterPending` over every
// page), the runtimes (`listRuntimes` / `iterRuntimes`), follows the suspensions live
// (`watchPending`) and answers one (`resume`) once it knows where it waits. Runtimes protected
// by a key are shown only when their key is passed (`runtimeKey`: one key per call, so a caller
// holding several makes one Daemon per key). `target` and
// `token` default to TOOLNEXUS_TARGET / TOOLNEXUS_TOKEN, as Runtime.new does. `close()` ends every
// call and stream it opened so the process can exit.
import grpc from '@grpc/grpc-js';

import { OpenCalls } from './calls.js';
import * as convert from './convert.js';
import { PendingStream, count, pendingItemFromPb, runtimeSummaryFromPb } from './pending.js';
import { loadContract } from './proto.js';
import { CHANNEL_OPTIONS, DEFAULT_TARGET, RUNTIME_KEY_HEADER, closeClient, fromEnv, unary } from './runtime.js';
import { toAnswer } from './types.js';

// a bound on the pages an iterator walks: a daemon handing out tokens forever must not loop us forever
const MAX_PAGES = 100_000;

function metadataOf(token, runtimeKey) {
  const md = new grpc.Metadata();
  if (token) md.set('authorization', `Bearer ${token}`);
  if (runtimeKey) md.set(RUNTIME_KEY_HEADER, runtimeKey);
  return md;
}

export class Daemon {
  /** @param {import('./index.js').DaemonOptions} options */
  constructor({ target = null, token = null, runtimeKey = null, credentials = null, channelOptions = {} } = {}) {
    this.target = fromEnv(target, 'TOOLNEXUS_TARGET', DEFAULT_TARGET);
    this.metadata = metadataOf(fromEnv(token, 'TOOLNEXUS_TOKEN', null), runtimeKey);
    const { AgentRuntime } = loadContract();
    this.client = new AgentRuntime(this.target, credentials ?? grpc.credentials.createInsecure(),
      { ...CHANNEL_OPTIONS, ...channelOptions });
    this.calls = new OpenCalls();
  }

  /** One page of open suspensions, oldest first; pass `nextPageToken` back as `pageToken` for the next. */
  async listPending({ runtimeId = null, kind = null, minAgeMs = 0, maxAgeMs = 0, pageSize = 0, pageToken = '' } = {}) {
    const request = { runtime_id: runtimeId ?? '', kind: kind ?? '', min_age_ms: count('minAgeMs', minAgeMs),
      max_age_ms: count('maxAgeMs', maxAgeMs), page_size: count('pageSize', pageSize), page_token: pageToken ?? '' };
    const reply = await this.rpc('ListPending', request);
    return { items: reply.items.map(pendingItemFromPb), nextPageToken: reply.next_page_token };
  }

  /** Every open suspension matching the filters, page after page, oldest first. */
  async *iterPending(filters = {}) {
    let pageToken = '';
    for (let n = 0; n < MAX_PAGES; n += 1) {
      const page = await this.listPending({ ...filters, pageToken });
      yield* page.items;
      pageToken = page.nextPageToken;
      if (!pageToken) return;
    }
  }

  /** One page of runtimes with their handle counts by state. */
  async listRuntimes({ pageSize = 0, pageToken = '' } = {}) {
    const reply = await this.rpc('ListRuntimes', { page_size: count('pageSize', pageSize), page_token: pageToken ?? '' });
    return { runtimes: reply.runtimes.map(runtimeSummaryFromPb), nextPageToken: reply.next_page_token };
  }

  /** Every runtime the caller may see, page after page. */
  async *iterRuntimes({ pageSize = 0 } = {}) {
    let pageToken = '';
    for (let n = 0; n < MAX_PAGES; n += 1) {
      const page = await this.listRuntimes({ pageSize, pageToken });
      yield* page.runtimes;
      pageToken = page.nextPageToken;
      if (!pageToken) return;
    }
  }

  /**
   * The open suspensions (an ADDED each, then SYNCED), then ADDED / REMOVED live, as an async
   * iterable; reopened from the start after UNAVAILABLE (see PendingStream).
   */
  watchPending({ runtimeId = null, kind = null, signal = null } = {}) {
    this.calls.ensureOpen();
    const request = { runtime_id: runtimeId ?? '', kind: kind ?? '' };
    const stream = new PendingStream(() => this.client.WatchPending(request, this.metadata), signal);
    stream.onCancel = this.calls.track(stream);
    return stream;
  }

  /** Answer a pending request of `runtimeId` (an item of listPending says which). */
  async resume(runtimeId, answer, { handle = null, noWait = false } = {}) {
    const request = { runtime_id: runtimeId, answer: convert.answerToPb(toAnswer(answer)), handle: handle ?? '',
      no_wait: noWait };
    return convert.resumeFromPb(await this.rpc('Resume', request));
  }

  /** End every call and stream this object opened and close the channel. Idempotent. */
  close() {
    this.calls.closeAll();
    closeClient(this.client);
  }

  rpc(method, request) {
    return unary(this.client, method, request, this.metadata, undefined, this.calls);
  }
}
