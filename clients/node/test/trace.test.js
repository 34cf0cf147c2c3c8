// The client sends the app's trace context (`traceparent` metadata) when the app uses
// OpenTelemetry (@opentelemetry/api, an optional peer dependency): the daemon, tracing, makes the
// turn a child of the app's span, so the model request it sends carries the app's trace id.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, describe, it } from 'node:test';

import { propagation } from '@opentelemetry/api';

import { Runtime, agent, registry } from '../src/index.js';
import { startDaemon } from './helpers/daemon.js';
import { completion } from './helpers/mock.js';

const APP_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const APP_SPAN = `00-${APP_TRACE}-00f067aa0ba902b7-01`;

// the app's propagator, as an OpenTelemetry SDK would register it (this one always has a span)
const appPropagator = {
  inject(_context, carrier, setter) { setter.set(carrier, 'traceparent', APP_SPAN); },
  extract(context) { return context; },
  fields() { return ['traceparent']; },
};

/** An OpenAI-compatible model on 127.0.0.1 that records each request's traceparent header; it
 * also accepts the daemon's OTLP exports (and drops them). */
function modelServer() {
  const seen = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/v1/chat/completions') seen.push(req.headers.traceparent ?? '');
      const body = req.url === '/v1/chat/completions'
        ? JSON.stringify(completion({ role: 'assistant', content: 'ok' }, [2, 1, 3])) : '';
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, seen,
    url: `http://127.0.0.1:${server.address().port}` })));
}

describe('trace context', () => {
  let model;
  let daemon;
  before(async () => {
    model = await modelServer();
    daemon = await startDaemon({ args: ['--otlp-endpoint', model.url] });
  });
  after(async () => {
    await daemon?.dispose();
    model?.server.close();
    propagation.disable();
  });

  it('sends the app\'s traceparent, so the agent\'s spans join the app\'s trace', async () => {
    const rt = await Runtime.new({ target: daemon.target, registry: registry(agent('plain', { does: 'answers' })),
      llm: { style: 'openai', base_url: `${model.url}/v1`, model: 'm' } });
    try {
      const handle = await rt.spawn(rt.root, 'plain');
      await rt.wake(handle, 'hello', { waitMs: 20_000 });
      assert.equal(model.seen.length, 1);
      assert.notEqual(model.seen[0].split('-')[1], APP_TRACE, 'no propagator: a trace of its own');
      propagation.setGlobalPropagator(appPropagator);
      const woken = await rt.wake(handle, 'again', { waitMs: 20_000 });
      assert.equal(woken.result.text, 'ok');
      assert.equal(model.seen.length, 2);
      assert.equal(model.seen[1].split('-')[1], APP_TRACE);
    } finally {
      await rt.shutdown();
    }
  });
});
