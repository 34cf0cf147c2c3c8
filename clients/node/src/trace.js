// The app's current trace context, sent as `traceparent` metadata when the app uses OpenTelemetry:
// the daemon makes the turns a call (New, Spawn, Wake, Resume) starts children of the app's span.
// @opentelemetry/api is an optional peer dependency: without it nothing is sent and nothing fails.
let otel = null;
try {
  otel = await import('@opentelemetry/api');
} catch {
  otel = null; // not installed: the app does not trace
}

/** `metadata` plus the active context's `traceparent`, as the app's propagator writes it. */
export function withTrace(metadata) {
  if (otel === null) return metadata;
  const carrier = {};
  otel.propagation.inject(otel.context.active(), carrier);
  const traceparent = carrier.traceparent;
  if (typeof traceparent !== 'string' || !traceparent) return metadata;
  const md = metadata.clone();
  md.set('traceparent', traceparent);
  return md;
}
