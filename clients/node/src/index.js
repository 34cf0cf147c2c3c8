// toolnexus-client: the Node.js client of toolnexus-daemon.
//
//   import { Runtime, ToolResult, agent, registry, tool } from 'toolnexus-client';
//
//   const secretAction = tool('secret_action', async (args, ctx) =>   // ctx.actionId: one per call
//     ctx.answer ? 'action performed'
//       : ToolResult.suspend({ id: `secret:${ctx.actionId}`, kind: 'authorization', prompt: 'approve?' }));
//   const rt = await Runtime.new({ target: '127.0.0.1:50051',         // make run
//     llm: { style: 'openai', baseUrl: 'http://127.0.0.1:8099/v1', model: 'dev' },   // make dev-model
//     registry: registry(agent('operator', { does: 'acts', uses: { tools: [secretAction] } })) });
//   const { handle: h, result: r } = await rt.spawn(rt.root, 'operator',   // spawn, wake, wait: one call
//     { prompt: 'please perform the secret action', waitMs: 60_000 });      // 'root/operator.1'
//   // r.status 'pending', r.pending.kind 'authorization' (a turn longer than waitMs: rt.wait(h))
//   await rt.resume({ id: r.pending.id, ok: true });
//   (await rt.snapshot(h)).lastResult.text;       // 'action performed'
//
// `Daemon` lists and watches the open suspensions across runtimes (listPending, watchPending,
// listRuntimes; docs/protocol.md §10).
//
// See README.md for the whole API.
export { Runtime, DEFAULT_TARGET, RUNTIME_KEY_HEADER } from './runtime.js';
export { AgentSpec, Registry, Tool, agent, mcpServer, registry, tool } from './defs.js';
export { HandleState, Status, ToolResult, toAnswer, toRequest, toToolResult } from './types.js';
export { EventStream } from './watch.js';
export { Daemon } from './daemon.js';
export { PendingChangeType, PendingStream } from './pending.js';
export { toStruct, fromStruct } from './struct.js';
export { loadContract, protoDir } from './proto.js';
export {
  Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, FailedPrecondition, Internal,
  InvalidArgument, NotFound, OutOfRange, PermissionDenied, ResourceExhausted, ToolnexusError,
  Unauthenticated, Unavailable, Unimplemented, Unknown, errorFor, fromGrpcError,
} from './errors.js';

export const VERSION = '0.1.0';
