// EventStream: what `runtime.watch()` returns over a server-streaming `Watch` call. An async
// iterable of Events (stored ones with seq > afterSeq, then live ones). Breaking out of a
// `for await` loop, `cancel()`, aborting the `signal` given to watch(), or detaching the runtime
// ends the call; a stream error other than our own cancellation is thrown as a ToolnexusError.
// A stream the daemon ends with UNAVAILABLE (it restarted or is stopping, or in a cluster the
// runtime moved to another daemon) is opened again after the last seq received, with backoff,
// so the iteration goes on with no gap and no duplicate (RESUME_POLICY). So is a Watch the daemon
// ended with RESOURCE_EXHAUSTED because its reader fell behind the live events: that status
// carries the seq to resume after in its trailing metadata (RESUME_AFTER). A RESOURCE_EXHAUSTED
// without it (the caller holds too many streams) is thrown: retrying would not help.
import grpc from '@grpc/grpc-js';

import { eventFromPb } from './convert.js';
import { fromGrpcError } from './errors.js';

/** Up to `attempts` reopenings in a row, waiting `firstMs` doubling to `maxMs` between them. */
export const RESUME_POLICY = Object.freeze({ attempts: 30, firstMs: 100, maxMs: 2000 });

/** The trailer of a Watch the daemon ended because its reader fell behind: the seq to resume after. */
export const RESUME_AFTER = 'x-toolnexus-resume-after-seq';

/** The seq a Watch ended RESOURCE_EXHAUSTED for falling behind names in its trailers, else null. */
export function resumeAfter(err) {
  const value = exhaustedTrailer(err, RESUME_AFTER);
  return value !== null && /^\d+$/.test(value) ? Number(value) : null;
}

/**
 * The trailer `name` of a stream the daemon ended RESOURCE_EXHAUSTED, else null: how a reader that
 * fell behind is told from a refusal (the stream limit carries no such trailer).
 */
export function exhaustedTrailer(err, name) {
  if (err?.code !== grpc.status.RESOURCE_EXHAUSTED || typeof err.metadata?.get !== 'function') return null;
  const [value] = err.metadata.get(name);
  return value === undefined ? null : String(value);
}

/**
 * A server stream opened again after UNAVAILABLE (RESUME_POLICY; a subclass's `resumable(err)` may
 * accept more): where from is the subclass's `openAgain()`, what a message becomes its
 * `converted(message)`. `cancel()`, an aborted `signal` or breaking out of the loop ends the call
 * quietly.
 */
export class ReopeningStream {
  constructor(policy = RESUME_POLICY, what = 'a stream') {
    this.policy = policy;
    this.what = what;
    this.failures = 0;
    this.reopened = 0;
    this.cancelled = false;
    // set by the owner: forget this stream once it ended (detach() cancels the ones still open)
    this.onCancel = null;
    this.iterating = false;
    this.wakeUp = null;
  }

  /** Open the first call; a subclass calls it at the end of its constructor, once `openAgain` can run. */
  begin(signal) {
    this.attach(this.openAgain());
    if (signal) {
      if (signal.aborted) this.cancel();
      else signal.addEventListener('abort', () => this.cancel(), { once: true });
    }
  }

  attach(call) {
    this.call = call;
    // until iteration reads it nobody listens: keep an early error from crashing the process
    this.early = null;
    this.onEarlyError = (err) => { this.early ??= err; };
    call.on('error', this.onEarlyError);
  }

  async *[Symbol.asyncIterator]() {
    if (this.iterating) throw new Error(`${this.what} can be iterated once`);
    this.iterating = true;
    try {
      while (!this.cancelled) {
        let failure = null;
        try {
          for await (const message of this.call) {
            const value = this.converted(message);
            this.failures = 0;
            yield value;
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

  /** Whether the stream `err` ended is opened again: UNAVAILABLE (a subclass adds more). */
  resumable(err) {
    return err?.code === grpc.status.UNAVAILABLE;
  }

  /** After a resumable end (`resumable(err)`): wait, then open the stream again (`openAgain()`). */
  async reopen(err) {
    if (!this.resumable(err) || this.failures >= this.policy.attempts) return false;
    const delay = Math.min(this.policy.maxMs, this.policy.firstMs * 2 ** this.failures);
    this.failures += 1;
    await new Promise((resolveWait) => {
      const timer = setTimeout(resolveWait, delay);
      this.wakeUp = () => { clearTimeout(timer); resolveWait(); };
    });
    this.wakeUp = null;
    if (this.cancelled) return true; // the loop sees it and ends quietly
    this.attach(this.openAgain());
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

export class EventStream extends ReopeningStream {
  /**
   * @param open `(afterSeq) => call`: opens the server stream after a seq (again on a reopen)
   */
  constructor(open, afterSeq, signal, policy = RESUME_POLICY) {
    super(policy, 'an EventStream');
    this.open = open;
    this.last = afterSeq;
    this.begin(signal);
  }

  /** After the last seq received: no gap, no duplicate. */
  openAgain() {
    return this.open(this.last);
  }

  converted(message) {
    const event = eventFromPb(message);
    if (event.seq) this.last = event.seq; // a live text delta has no seq
    return event;
  }

  /** UNAVAILABLE, or RESOURCE_EXHAUSTED naming the seq to resume after (the reader fell behind). */
  resumable(err) {
    const after = resumeAfter(err);
    if (after !== null) { // every event up to it was sent (or filtered out): go on after it
      this.last = Math.max(this.last, after);
      return true;
    }
    return super.resumable(err);
  }
}
