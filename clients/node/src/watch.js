// EventStream: what `runtime.watch()` returns over a server-streaming `Watch` call. An async
// iterable of Events (stored ones with seq > afterSeq, then live ones). Breaking out of a
// `for await` loop, `cancel()`, aborting the `signal` given to watch(), or detaching the runtime
// ends the call; a stream error other than our own cancellation is thrown as a ToolnexusError.
// A stream the daemon ends with UNAVAILABLE (it restarted or is stopping, or in a cluster the
// runtime moved to another daemon) is opened again after the last seq received, with backoff,
// so the iteration goes on with no gap and no duplicate (RESUME_POLICY).
import grpc from '@grpc/grpc-js';

import { eventFromPb } from './convert.js';
import { fromGrpcError } from './errors.js';

/** Up to `attempts` reopenings in a row, waiting `firstMs` doubling to `maxMs` between them. */
export const RESUME_POLICY = Object.freeze({ attempts: 30, firstMs: 100, maxMs: 2000 });

export class EventStream {
  /**
   * @param open `(afterSeq) => call`: opens the server stream after a seq (again on a reopen)
   */
  constructor(open, afterSeq, signal, policy = RESUME_POLICY) {
    this.open = open;
    this.last = afterSeq;
    this.policy = policy;
    this.failures = 0;
    this.cancelled = false;
    // set by the Runtime: forget this stream once it ended (detach() cancels the ones still open)
    this.onCancel = null;
    this.iterating = false;
    this.wakeUp = null;
    this.attach(open(afterSeq));
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
    if (this.iterating) throw new Error('an EventStream can be iterated once');
    this.iterating = true;
    try {
      while (!this.cancelled) {
        let failure = null;
        try {
          for await (const message of this.call) {
            const event = eventFromPb(message);
            if (event.seq) this.last = event.seq; // a live text delta has no seq
            this.failures = 0;
            yield event;
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

  /** After UNAVAILABLE: wait, then open the stream again after the last seq received. */
  async reopen(err) {
    if (err?.code !== grpc.status.UNAVAILABLE || this.failures >= this.policy.attempts) return false;
    const delay = Math.min(this.policy.maxMs, this.policy.firstMs * 2 ** this.failures);
    this.failures += 1;
    await new Promise((resolveWait) => {
      const timer = setTimeout(resolveWait, delay);
      this.wakeUp = () => { clearTimeout(timer); resolveWait(); };
    });
    this.wakeUp = null;
    if (this.cancelled) return true; // the loop sees it and ends quietly
    this.attach(this.open(this.last));
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
