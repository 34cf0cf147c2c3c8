// Loads the daemon's contract (proto/toolnexus/agents/v1/runtime.proto) at run time with
// @grpc/proto-loader: no generated code to keep in sync. The .proto is looked up in
// $TOOLNEXUS_PROTO_DIR, then in this package's own proto/ (copied in by `npm pack`), then in
// the repository's proto/ two levels up (a checkout of toolnexus-daemon).
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const PROTO_FILE = 'toolnexus/agents/v1/runtime.proto';
const here = dirname(fileURLToPath(import.meta.url));

// keepCase: field names as in the .proto (snake_case); longs as JS numbers (token counts and
// seq stay far below 2^53); defaults so absent scalars read as '' / 0 / false and absent
// messages as null; oneofs so a WorkerMessage/DaemonMessage/Value names its set member.
export const LOADER_OPTIONS = Object.freeze({
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});

/** The directory that holds toolnexus/agents/v1/runtime.proto. */
export function protoDir() {
  const candidates = [
    process.env.TOOLNEXUS_PROTO_DIR,
    join(here, '..', 'proto'),
    join(here, '..', '..', '..', 'proto'),
  ].filter(Boolean);
  for (const dir of candidates) {
    if (existsSync(join(dir, PROTO_FILE))) return resolve(dir);
  }
  throw new Error(`toolnexus-client: cannot find ${PROTO_FILE} (looked in ${candidates.join(', ')}); `
    + 'set TOOLNEXUS_PROTO_DIR to the directory that holds it');
}

let cached = null;

/** `{ AgentRuntime, definition }`: the service client constructor and the package definition. */
export function loadContract() {
  if (cached) return cached;
  const definition = protoLoader.loadSync(PROTO_FILE, { ...LOADER_OPTIONS, includeDirs: [protoDir()] });
  const pkg = grpc.loadPackageDefinition(definition);
  cached = { AgentRuntime: pkg.toolnexus.agents.v1.AgentRuntime, definition };
  return cached;
}
