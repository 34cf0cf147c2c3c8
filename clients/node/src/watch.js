// EventStream: what `runtime.watch()` returns over a server-streaming `Watch` call. An async
// iterable of Events (stored ones with seq > afterSeq, then live ones). Breaking out of a
// `for await` loop, `cancel()`, aborting the `signal` given to watch(), or detaching the runtime
// ends the call; a stream error other than our own cancellation is thrown as a ToolnexusError.
import { eventFromPb } from './convert.js';
import { fromGrpcError } from './errors.js';

export class EventStream {
  constructor(call, signal) {
    this.call = call;
    this.cancelled = false;
    // set by the Runtime: forget this stream once it ended (detach() cancels the ones still open)
    this.onCancel = null;
    this.iterating = false;
    // until iteration starts nobody listens: keep an early error from crashing the process
    this.early = null;
    this.onEarlyError = (err) => { this.early ??= err; };
    call.on('error', this.onEarlyError);
    if (signal) {
      if (signal.aborted) this.cancel();
      else signal.addEventListener('abort', () => this.cancel(), { once: true });
    }
  }

  async *[Symbol.asyncIterator]() {
    if (this.iterating) throw new Error('an EventStream can be iterated once');
    this.iterating = true;
    try {
      if (this.cancelled) return;
      for await (const message of this.call) yield eventFromPb(message);
      if (this.early && !this.cancelled) throw fromGrpcError(this.early);
    } catch (err) {
      if (this.cancelled) return;
      throw fromGrpcError(err);
    } finally {
      this.call.off('error', this.onEarlyError);
      this.cancel();
    }
  }

  /** Stop the stream; a pending iteration ends without an error. Idempotent. */
  cancel() {
    if (this.cancelled) return;
    this.cancelled = true;
    this.call.cancel();
    this.onCancel?.();
  }
}
