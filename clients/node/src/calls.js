// The calls a Runtime has open on its channel, so that `detach()` can end every one of them.
//
// Closing a @grpc/grpc-js channel does not end the calls already running on it: an open Watch (or
// a Wait without a timeout) keeps Node's event loop alive, and a script that called
// `rt.shutdown()` would never exit. Every unary call and every watch registers here while it is
// open; `closeAll()` cancels them: a watch's iteration ends quietly, a unary call rejects with
// `Cancelled` saying the runtime was detached. Once closed, a new call is refused with the same
// message instead of grpc's "Channel has been shut down".
import grpc from '@grpc/grpc-js';

import { Cancelled, FailedPrecondition, fromGrpcError } from './errors.js';

const DETACHED = 'this Runtime was detached (detach(), close() or shutdown()); '
  + 'the runtime lives on in the daemon: Runtime.new({runtimeId}) reattaches to it';

export class OpenCalls {
  constructor() {
    this.open = new Set(); // objects with cancel()
    this.closed = false;
  }

  /** Throws once the runtime is detached; call before starting a new call. */
  ensureOpen() {
    if (this.closed) throw new FailedPrecondition('FAILED_PRECONDITION', DETACHED);
  }

  /** Track `call` (anything with cancel()) until the returned release function runs. */
  track(call) {
    this.open.add(call);
    return () => this.open.delete(call);
  }

  /** A unary call's error as the client reports it: a cancellation by detach says so. */
  error(err) {
    if (this.closed && err?.code === grpc.status.CANCELLED) return new Cancelled('CANCELLED', DETACHED, { cause: err });
    return fromGrpcError(err);
  }

  /** Cancel every open call and refuse new ones. Idempotent. */
  closeAll() {
    this.closed = true;
    const calls = [...this.open];
    this.open.clear();
    for (const call of calls) call.cancel();
  }
}
