// The background worker stream: one `Connect` per runtime, kept open until the runtime detaches.
// It sends WorkerHello, waits for Welcome, then hands every call to the Dispatcher and writes
// each reply back on the connection the call arrived on (a reply for a connection that died is
// dropped: the daemon redelivers the call, with the same call_id, on the next connection, and
// the dispatcher answers it from its cache). When the stream breaks (the daemon restarted or was
// killed) it reconnects with capped, jittered exponential backoff and says hello again. Before
// the first Welcome, a refusal that retrying cannot fix (bad runtime id, credentials, no Connect)
// is reported to `start` instead.
import grpc from '@grpc/grpc-js';

import { Unavailable, fromGrpcError } from './errors.js';

const FATAL_BEFORE_WELCOME = new Set([
  grpc.status.INVALID_ARGUMENT, grpc.status.NOT_FOUND, grpc.status.PERMISSION_DENIED,
  grpc.status.UNAUTHENTICATED, grpc.status.UNIMPLEMENTED, grpc.status.FAILED_PRECONDITION,
]);

export class WorkerStream {
  /**
   * @param {{client: any, hello: object, dispatcher: import('./dispatch.js').Dispatcher,
   *   metadata: grpc.Metadata, logger: object, backoffMs?: [number, number]}} options
   */
  constructor({ client, hello, dispatcher, metadata, logger, backoffMs = [50, 2000] }) {
    this.client = client;
    this.hello = hello;
    this.dispatcher = dispatcher;
    this.metadata = metadata;
    this.logger = logger;
    this.backoffMs = backoffMs;
    this.delay = backoffMs[0];
    this.welcomes = 0;
    this.stopped = false;
    this.conn = null;
    this.timer = null;
    this.waiters = new Set(); // {count, resolve, reject}
    this.failure = null;
  }

  /** Start serving; resolves once welcomed, rejects with the refusal or Unavailable after timeoutMs. */
  async start(timeoutMs) {
    this.connect();
    try {
      await this.waitWelcomed(1, timeoutMs);
    } catch (err) {
      this.stop();
      throw err;
    }
  }

  /** Resolves once the daemon has welcomed this worker `count` times in total (1 + reconnections). */
  waitWelcomed(count, timeoutMs) {
    if (this.failure) return Promise.reject(this.failure);
    if (this.welcomes >= count) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = { count, resolve, reject, timer: null };
      waiter.timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Unavailable('UNAVAILABLE', `worker stream got no Welcome within ${timeoutMs / 1000}s`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  /** Close the stream; calls still running are abandoned (the daemon redelivers them elsewhere). */
  stop() {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    const conn = this.conn;
    this.conn = null;
    if (conn && conn.open) {
      conn.open = false;
      conn.call.cancel();
    }
    this.dispatcher.close();
    for (const waiter of this.waiters) {
      clearTimeout(waiter.timer);
      waiter.reject(new Unavailable('UNAVAILABLE', 'the worker stream was stopped'));
    }
    this.waiters.clear();
  }

  connect() {
    if (this.stopped) return;
    const call = this.client.Connect(this.metadata);
    const conn = { call, open: true, welcomed: false };
    this.conn = conn;
    call.on('data', (message) => this.onMessage(conn, message));
    call.on('error', (err) => this.onClosed(conn, err));
    call.on('end', () => this.onClosed(conn, null));
    call.write({ hello: this.hello });
  }

  onMessage(conn, message) {
    if (!conn.open) return;
    if (message.msg === 'welcome') {
      conn.welcomed = true;
      this.delay = this.backoffMs[0];
      this.welcomes += 1;
      for (const waiter of this.waiters) {
        if (this.welcomes >= waiter.count) {
          clearTimeout(waiter.timer);
          this.waiters.delete(waiter);
          waiter.resolve();
        }
      }
      return;
    }
    const reply = this.dispatcher.submit(message);
    if (!reply) return;
    reply.then((workerMessage) => {
      if (!conn.open) return; // the call is redelivered on the next connection
      try {
        conn.call.write(workerMessage);
      } catch (err) {
        this.logger.warn(`worker reply not sent: ${err?.message ?? err}`);
      }
    }, (err) => this.logger.error(`worker call failed unexpectedly: ${err?.stack ?? err}`));
  }

  onClosed(conn, err) {
    if (!conn.open) return;
    conn.open = false;
    if (this.conn === conn) this.conn = null;
    try {
      conn.call.end();
    } catch { /* already closed */ }
    if (this.stopped) return;
    if (err && this.welcomes === 0 && FATAL_BEFORE_WELCOME.has(err.code)) {
      this.failure = fromGrpcError(err);
      for (const waiter of this.waiters) {
        clearTimeout(waiter.timer);
        waiter.reject(this.failure);
      }
      this.waiters.clear();
      return;
    }
    this.logger.info(`worker stream ${this.hello.worker_id} broke: ${err ? fromGrpcError(err).toString() : 'ended'}`);
    const wait = this.delay * (0.5 + Math.random() / 2);
    this.delay = Math.min(this.delay * 2, this.backoffMs[1]);
    this.timer = setTimeout(() => this.connect(), wait);
  }
}
