// Type declarations of toolnexus-client (hand-written; the implementation is plain ES modules).
import type { ChannelCredentials, ChannelOptions, Metadata } from '@grpc/grpc-js';

// ------------------------------------------------------------------ JSON and vocabularies

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** The state of a handle (docs/protocol.md §2). */
export declare const HandleState: {
  readonly IDLE: 'idle';
  readonly RUNNING: 'running';
  readonly SUSPENDED: 'suspended';
  readonly CLOSED: 'closed';
};
export type HandleStateName = (typeof HandleState)[keyof typeof HandleState];

/** The status of a TaskResult; only `done` and `pending` are not errors. */
export declare const Status: {
  readonly DONE: 'done';
  readonly PENDING: 'pending';
  readonly INCOMPLETE: 'incomplete';
  readonly INTERRUPTED: 'interrupted';
  readonly CLOSED: 'closed';
  readonly TIMEOUT: 'timeout';
  readonly ERROR: 'error';
};
export type StatusName = (typeof Status)[keyof typeof Status];

// ------------------------------------------------------------------ values

/** An out-of-band question a suspended tool waits on; `kind` is open (authorization, approval, input, ...). */
export interface Request {
  id: string;
  kind: string;
  prompt: string;
  url: string | null;
  data: JsonObject | null;
  /** RFC 3339. */
  expiresAt: string | null;
  /** A single-use link answering exactly this request (when a link was asked for: `answerLink`). */
  answerUrl?: string | null;
}

/** A Request as a tool writes it: without an id the daemon assigns a unique one. */
export interface RequestInit {
  id?: string;
  kind: string;
  prompt: string;
  url?: string | null;
  data?: JsonObject | null;
  expiresAt?: string | null;
}

/** The answer to a Request, routed by `id`; `reason` is advisory (declined, cancelled, expired). */
export interface Answer {
  id: string;
  ok: boolean;
  data: JsonObject | null;
  reason: string | null;
}

export interface AnswerInit {
  id: string;
  ok: boolean;
  data?: JsonObject | null;
  reason?: string | null;
}

export interface TaskResult {
  status: StatusName | string;
  text: string;
  isError: boolean;
  pending: Request | null;
  turns: number;
  totalTokens: number;
  /** maxTokens, maxToolCalls, maxWallMs, maxTurns ('' on a clean stop). */
  limit: string;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface InboxItem {
  from: string;
  channel: string;
  text: string;
}

/** A read-only view of one handle; `usageTotal`/`turnsTotal` include its subtree and only grow. */
export interface HandleSnapshot {
  id: string;
  agent: string;
  state: HandleStateName | string;
  parent: string;
  children: string[];
  lastResult: TaskResult | null;
  usageTotal: number;
  turnsTotal: number;
  pending: Request | null;
  inbox: InboxItem[];
  taskKey: string;
  usage: Usage;
  depth: number;
  /** What changed since the handle suspended in what its answer will be fed to (empty otherwise). */
  definitionChanged: DefinitionChange[];
  /** The registry version this handle runs. */
  version: number;
}

/**
 * One difference between the definition a suspended step recorded and the registry now: `part`
 * "tool" (`change` "removed" or "schema", with the properties added / removed / retyped), "soul"
 * or "model" (`change` "changed"). `refusesResume`: resume refuses it without
 * `acceptChangedDefinition`.
 */
export interface DefinitionChange {
  part: 'tool' | 'soul' | 'model' | string;
  name: string;
  change: 'removed' | 'schema' | 'changed' | string;
  summary: string;
  refusesResume: boolean;
  added: string[];
  removed: string[];
  retyped: string[];
}

/** One entry of a runtime's event log (`seq` 0 on live-only `text` events). */
export interface Event {
  seq: number;
  runtimeId: string;
  handle: string;
  type: string;
  fromState: string;
  toState: string;
  note: string;
  pending: Request | null;
  result: TaskResult | null;
  /** RFC 3339. */
  at: string;
  data: JsonObject | null;
}

/**
 * What a fused call answered (`spawn(..., {prompt})`, `wake(..., {waitMs})`): the handle, whether
 * its wake was queued behind the parent's running children, and with `waitMs` the settled result
 * of the turn the wake started (or a `timeout` result). `result` is null without a wait, or when
 * a daemon shutdown cut the wait short: the wake is durable either way, so `wait(handle)` then.
 */
export interface Woken {
  handle: string;
  queued: boolean;
  result: TaskResult | null;
}

/** What Resume answered: the top-most handle the cascade reached and its settled result. */
export interface ResumeResult {
  handle: string;
  result: TaskResult | null;
  duplicate: boolean;
}

/** What `post` did: the item's 1-based place in the handle's inbox and the inbox cap in force. */
export interface PostResult {
  position: number;
  inboxCap: number;
}

/** What `interrupt` did: aborted a running turn, or cancelled a suspended handle's request. */
export interface InterruptResult {
  /** 'running' (its turn was aborted) or 'suspended' (its pending request was cancelled). */
  fromState: HandleStateName | string;
  /** The id of the request that was cancelled; null when a running turn was aborted. */
  cancelledRequest: string | null;
  /** Inbox items the aborted turn had drained and that were put back. */
  inboxRestored: number;
}

export interface Info {
  version: string;
  storePath: string;
  storeSizeBytes: number;
  limits: Record<string, number>;
  runtimes: number;
  formatVersion: string;
  /** Asked for a runtime (`runtime.info()`): its latest registry version. */
  runtimeVersion: number;
  /** Asked for a runtime: the registry versions whose native calls wait for a worker serving them. */
  versionsWithoutWorker: number[];
  /** The addresses the daemon listens on, ports resolved. */
  listen: string[];
  /** The effective configuration by flag name; secrets read "<redacted>". */
  config: Record<string, string>;
  /** Where Prometheus metrics are served; '' when off. */
  metricsAddress: string;
}

// ------------------------------------------------------------------ tools

/** What a native tool knows about its call; `answer` is set when a resume re-invokes it. */
export interface Context {
  readonly callId: string;
  /** The same for every invocation of this call, different for every other call: build request
   * ids from it (`approve:${ctx.actionId}`), since a request id is single-use within a runtime. */
  readonly actionId: string;
  readonly handle: string;
  readonly runtimeId: string;
  readonly tool: string;
  readonly answer: Answer | null;
  /** The W3C trace context of this call's `execute_tool` span when the daemon traces
   * (`--otlp-endpoint`), else '': start the tool's own spans under it to join the agent's trace. */
  readonly traceparent: string;
  /** Aborted when this client detaches. */
  readonly signal: AbortSignal;
}

/** What a tool returns: output text, or an error, or a suspension (`pending`). */
export declare class ToolResult {
  constructor(fields?: { output?: string; isError?: boolean; metadata?: JsonObject | null; pending?: RequestInit | null });
  readonly output: string;
  readonly isError: boolean;
  readonly metadata: JsonObject | null;
  readonly pending: Request | null;
  static ok(text: string, metadata?: JsonObject | null): ToolResult;
  static error(text: string, metadata?: JsonObject | null): ToolResult;
  /** Suspend the handle on a Request; the tool is invoked again with `ctx.answer` on resume. */
  static suspend(request: RequestInit): ToolResult;
}

/** A plain-object tool result (`is_error` accepted as the webhook JSON spelling). */
export interface ToolResultObject {
  output?: string;
  isError?: boolean;
  is_error?: boolean;
  metadata?: JsonObject | null;
  pending?: RequestInit | null;
}

/** A string, a ToolResult, a ToolResultObject, or any JSON value (sent as its JSON text). */
export type ToolReturn = string | ToolResult | ToolResultObject | JsonValue | undefined | void;

export type Execute<A = any> = (args: A, ctx: Context) => ToolReturn | Promise<ToolReturn>;

export interface HttpEndpoint {
  url: string;
  method: string;
  headers: Record<string, string>;
  query: string[];
  timeoutMs: number;
}

export declare class Tool {
  constructor(fields: {
    name: string;
    description?: string;
    inputSchema?: JsonObject | null;
    execute?: Execute | null;
    source?: 'native' | 'webhook' | 'http';
    endpoint?: Partial<HttpEndpoint> & { url: string } | null;
    /** Total time one call may take, dispatch to result; 0 = the daemon's --tool-deadline-ms. */
    deadlineMs?: number;
    /** `'ask'`: a call in flight at a crash is asked about (a `reconcile` request), not re-sent. */
    onCrash?: 'rerun' | 'ask';
    /** Its suspensions get `request.answerUrl` (the daemon needs --answers-listen). */
    answerLink?: boolean;
  });
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonObject | null;
  readonly execute: Execute | null;
  readonly source: 'native' | 'webhook' | 'http';
  readonly endpoint: HttpEndpoint | null;
  readonly deadlineMs: number;
  readonly onCrash: 'rerun' | 'ask';
  readonly answerLink: boolean;
  /** A tool the daemon POSTs `{call_id, runtime_id, handle, tool, arguments, answer}` to. */
  static webhook(name: string, url: string, options?: {
    description?: string; inputSchema?: JsonObject | null; headers?: Record<string, string>; timeoutMs?: number;
    onCrash?: 'rerun' | 'ask';
  }): Tool;
  /** A plain REST endpoint: `{placeholder}` URL args, `query` args, the rest as a JSON body. */
  static http(name: string, url: string, options?: {
    method?: string; query?: string[]; headers?: Record<string, string>; description?: string;
    inputSchema?: JsonObject | null; timeoutMs?: number; onCrash?: 'rerun' | 'ask';
  }): Tool;
}

export interface ToolOptions {
  description?: string;
  inputSchema?: JsonObject | null;
  deadlineMs?: number;
  onCrash?: 'rerun' | 'ask';
  answerLink?: boolean;
}

/** A native tool served by this process. */
export declare function tool<A = any>(name: string, execute: Execute<A>, options?: ToolOptions): Tool;
export declare function tool<A = any>(name: string, options: ToolOptions & { execute?: Execute<A> | null }): Tool;

// ------------------------------------------------------------------ agents and registry

/** Per-handle limits; 0 = unset. snake_case keys are accepted too. */
export interface Budget {
  maxTurns?: number;
  maxTokens?: number;
  maxToolCalls?: number;
  maxWallMs?: number;
  maxChildren?: number;
  maxConcurrent?: number;
  maxDepth?: number;
}

/** An MCP server whose tools an agent gets (`<name>__<tool>`); a bare string names one in --mcp-config. */
export interface McpServerSpec {
  name: string;
  /** A streamable-HTTP endpoint; empty = `name` is looked up in the daemon's --mcp-config. */
  url?: string;
  /** Values may hold `${ENV}` of names the daemon allows (--allow-env). */
  headers?: Record<string, string>;
  /** The server's tools to offer; empty = all. */
  tools?: string[];
  timeoutMs?: number;
  onCrash?: 'rerun' | 'ask';
}

export declare function mcpServer(value: McpServerSpec | string): Readonly<Required<McpServerSpec>>;

export interface AgentOptions {
  does?: string;
  uses?: { tools?: Tool[]; team?: string[]; mcpServers?: (McpServerSpec | string)[] };
  /** MCP servers whose tools this agent gets. */
  mcpServers?: (McpServerSpec | string)[];
  /** 'inherit' (default) = llm.model. */
  model?: string;
  /** The system prompt. */
  soul?: string;
  team?: string[];
  budget?: Budget | null;
  /** A connected resolver (`waitFor` of Runtime.new) answers this agent's suspensions inline. */
  waitFor?: boolean;
  requestParams?: JsonObject | null;
  /** Its suspensions get `request.answerUrl`. */
  answerLink?: boolean;
}

export declare class AgentSpec {
  readonly name: string;
  readonly does: string;
  readonly model: string;
  readonly soul: string;
  readonly tools: readonly Tool[];
  readonly team: readonly string[];
  readonly budget: Record<string, number> | null;
  readonly waitFor: boolean;
  readonly requestParams: JsonObject | null;
  readonly answerLink: boolean;
  readonly mcpServers: readonly Readonly<Required<McpServerSpec>>[];
}

export declare function agent(name: string, options?: AgentOptions): AgentSpec;

export declare class Registry {
  readonly agents: readonly AgentSpec[];
  names(): string[];
  /** Native tools with an execute function, by name: what this client serves over Connect. */
  nativeTools(): Map<string, Tool>;
}

export declare function registry(...agents: Array<AgentSpec | AgentSpec[]>): Registry;

// ------------------------------------------------------------------ model and runtime options

/** The model configuration; snake_case keys are accepted too. */
export interface LlmConfig {
  style?: 'openai' | 'anthropic' | 'worker' | string;
  baseUrl?: string;
  model?: string;
  /** The name of the daemon's environment variable that holds the API key. */
  apiKeyEnv?: string;
  headers?: Record<string, string>;
  retries?: number;
  timeoutMs?: number;
  stream?: boolean;
  requestParams?: JsonObject | null;
  maxTokens?: number;
}

/** RuntimeOptions; 0 = the default of docs/protocol.md §2. snake_case keys are accepted too. */
export interface RuntimeOptions {
  maxConcurrentTurns?: number;
  inboxCap?: number;
  closeGraceMs?: number;
  toolTimeoutMs?: number;
  waitFor?: boolean;
  eventRetention?: number;
  maxTurns?: number;
  /** Gives suspensions without an `expiresAt` one this far ahead (docs/protocol.md §10); 0 = none. */
  pendingTtlMs?: number;
  /** Every suspension of the runtime gets `request.answerUrl`. */
  answerLink?: boolean;
  /** Which registry version an idle handle's next wake runs: 'pinned' (default) or 'latest'. */
  versionPolicy?: 'pinned' | 'latest';
  /** An unused, not-latest registry version is deleted this long after it was last used (default one day). */
  versionGraceMs?: number;
}

/** The model call a `transport` receives: `{body}`, an OpenAI chat-completions request. */
export interface TransportRequest {
  body: JsonObject & { messages?: JsonObject[]; tools?: JsonObject[]; model?: string };
  /** The W3C trace context of this call's `chat` span; present only when the daemon traces. */
  traceparent?: string;
}

/** A transport reply: `{status, headers, body}` (body an object, JSON text or bytes). */
export interface TransportReply {
  status?: number;
  headers?: Record<string, string>;
  body: JsonObject | string | Uint8Array;
}

/** A model served by this process: the reference's mock-transport shape (a fetch Response works too). */
export type Transport = (request: TransportRequest) =>
  TransportReply | JsonObject | Response | Promise<TransportReply | JsonObject | Response>;

/** Answers a `waitFor` suspension inline. */
export type Resolver = (request: Request) => AnswerInit | Promise<AnswerInit>;

export interface Logger {
  debug?(message: string): void;
  info?(message: string): void;
  warn?(message: string): void;
  error?(message: string): void;
}

export interface NewOptions {
  /** 'host:port' or 'unix:/path'; default $TOOLNEXUS_TARGET, else 127.0.0.1:50051. */
  target?: string | null;
  registry: Registry;
  /** Serve the model from this process (llm style 'worker'). */
  transport?: Transport | null;
  llm?: LlmConfig | null;
  /** Reattach to an existing runtime (registry replaced, handles kept), or create it with this id. */
  runtimeId?: string | null;
  options?: RuntimeOptions | null;
  waitFor?: Resolver | null;
  /** Sent as `authorization: Bearer <token>`; default $TOOLNEXUS_TOKEN ('' sends none). */
  token?: string | null;
  /** Sent as x-toolnexus-runtime-key on every call. */
  runtimeKey?: string | null;
  credentials?: ChannelCredentials | null;
  channelOptions?: ChannelOptions;
  workerId?: string | null;
  /** How long to wait for the worker stream's Welcome (default 10000). */
  connectTimeoutMs?: number;
  logger?: Logger;
  /** The registry versions whose native tools this worker serves; empty = the latest. */
  workerVersions?: number[];
}

/** `Runtime.serve`: serve an older build's tools for the registry versions it deployed, without a New. */
export interface ServeOptions {
  target?: string | null;
  registry: Registry;
  runtimeId: string;
  versions: number[];
  transport?: Transport | null;
  token?: string | null;
  runtimeKey?: string | null;
  credentials?: ChannelCredentials | null;
  channelOptions?: ChannelOptions;
  workerId?: string | null;
  connectTimeoutMs?: number;
  logger?: Logger;
}

/** One registry version of a runtime (`runtime.versions()`). */
export interface VersionUse {
  number: number;
  /** sha256 hex of the canonical registry. */
  digest: string;
  /** RFC 3339. */
  createdAt: string;
  /** Handles pinned to it (root excluded). */
  handles: number;
  latest: boolean;
}

// ------------------------------------------------------------------ runtime

/**
 * Events of one runtime in seq order: the stored ones after `afterSeq`, then live ones. A stream
 * the daemon ends with UNAVAILABLE is reopened after the last seq received, with backoff; so is
 * one it ends with RESOURCE_EXHAUSTED because this reader fell behind the live events (after the
 * seq its `x-toolnexus-resume-after-seq` trailer names): no gap, no duplicate. A RESOURCE_EXHAUSTED
 * without that trailer (the caller holds `--max-watch-streams-per-caller` streams) is thrown.
 */
export declare class EventStream implements AsyncIterable<Event> {
  [Symbol.asyncIterator](): AsyncGenerator<Event, void, undefined>;
  /** How many times the stream was opened again (after UNAVAILABLE or falling behind). */
  readonly reopened: number;
  /** Stop the stream; a pending iteration ends without an error. */
  cancel(): void;
}

export interface WorkerStream {
  /** The WorkerHello this worker sends (proto field names). */
  readonly hello: {
    runtime_id: string; worker_id: string; tools: string[]; llm: boolean; resolver: boolean; no_tools: boolean;
  };
  /** How many times the daemon welcomed this worker (1 + reconnections). */
  readonly welcomes: number;
  waitWelcomed(count: number, timeoutMs: number): Promise<void>;
}

export interface WatchOptions {
  afterSeq?: number;
  types?: string[];
  handle?: string | null;
  signal?: AbortSignal | null;
}

export declare const DEFAULT_TARGET: '127.0.0.1:50051';
export declare const RUNTIME_KEY_HEADER: 'x-toolnexus-runtime-key';
export declare const VERSION: string;

export declare class Runtime {
  /** Create a runtime (or reattach to `runtimeId`) and start serving its tools and model. */
  static new(options: NewOptions): Promise<Runtime>;
  /** Serve an older build's tools for the registry versions it deployed, without a New. */
  static serve(options: ServeOptions): Promise<Runtime>;
  readonly id: string;
  readonly root: string;
  readonly reattached: boolean;
  /** The runtime's latest registry version once New returned (0 from serve). */
  readonly version: number;
  readonly metadata: Metadata;
  /** The worker stream serving this process's tools/model/resolver (null if it serves nothing). */
  readonly worker: WorkerStream | null;
  /** A new idle child handle; resolves to its id. */
  spawn(parent: string, agent: string, options?: { budget?: Budget | null; prompt?: null }): Promise<string>;
  /** Spawn and wake with `prompt` in one durable commit; with `waitMs` also the turn's settled result. */
  spawn(parent: string, agent: string,
    options: { budget?: Budget | null; prompt: string; waitMs?: number | null }): Promise<Woken>;
  /** idle→running; resolves once durable, to true if the wake was queued. */
  wake(handle: string, prompt: string, options?: { waitMs?: null; upgrade?: boolean }): Promise<boolean>;
  /** Wake and wait up to `waitMs` for the settled result of the turn it started, in one call. */
  wake(handle: string, prompt: string, options: { waitMs: number; upgrade?: boolean }): Promise<Woken>;
  /** The next result (or the last one of a settled handle); a `timeout` result after timeoutMs. */
  wait(handle: string, options?: number | { timeoutMs?: number | null }): Promise<TaskResult>;
  /** Answer a pending Request (routed by `answer.id`); resolves once the cascade settles. */
  resume(answer: AnswerInit, options?: { handle?: string | null; noWait?: boolean;
    acceptChangedDefinition?: boolean; upgrade?: boolean }): Promise<ResumeResult>;
  snapshot(handle: string): Promise<HandleSnapshot>;
  /** The runtime's registry versions, oldest first, with how many handles each holds. */
  versions(): Promise<VersionUse[]>;
  watch(options?: WatchOptions): EventStream;
  /** Append an inbox item for the handle's next wake. */
  post(handle: string, text: string, options?: { from?: string; channel?: string }): Promise<PostResult>;
  /** Abort a running turn, or cancel a suspended handle's pending request (FailedPrecondition otherwise). */
  interrupt(handle: string): Promise<InterruptResult>;
  /** With a handle: close it and its subtree. Without: detach(). */
  close(handle?: string | null): Promise<void>;
  list(): Promise<HandleSnapshot[]>;
  info(): Promise<Info>;
  /** Close every handle in the daemon (keeping the final state unless purge), then detach. */
  shutdown(options?: { purge?: boolean }): Promise<void>;
  /**
   * Stop serving, end every call this client opened (watches end quietly, calls in flight reject
   * with Cancelled, later calls with FailedPrecondition) and close the channel, so the process can
   * exit. The runtime lives on in the daemon.
   */
  detach(): void;
}

// ------------------------------------------------------------------ daemon-wide views (docs/protocol.md §10)

export declare const PendingChangeType: Readonly<{ ADDED: 'ADDED'; REMOVED: 'REMOVED'; SYNCED: 'SYNCED' }>;

/** One open suspension: the request, where it waits (leaf and top-level handle) and since when. */
export interface PendingItem {
  request: Request;
  runtimeId: string;
  handle: string;
  topHandle: string;
  /** RFC 3339: when the leaf suspended. */
  createdAt: string;
  expiresAt: string | null;
  agent: string;
  /** The registry version the leaf runs: the one its answer is fed to. */
  version: number;
}

export interface PendingPage {
  items: PendingItem[];
  /** Empty on the last page. */
  nextPageToken: string;
}

/** A runtime with its handle counts by state (root excluded) and open suspensions. */
export interface RuntimeSummary {
  runtimeId: string;
  createdAt: string;
  handles: Record<string, number>;
  pending: number;
  keyed: boolean;
  /** The latest registry version. */
  version: number;
  /** Versions whose native calls wait for a worker that serves them. */
  versionsWithoutWorker: number[];
}

export interface RuntimePage {
  runtimes: RuntimeSummary[];
  nextPageToken: string;
}

/** A WatchPending message; `item` null on SYNCED, `reason` set on REMOVED. */
export interface PendingChange {
  type: 'ADDED' | 'REMOVED' | 'SYNCED' | (string & {});
  item: PendingItem | null;
  /** REMOVED: answered, expired, cancelled or closed. */
  reason: string;
}

export interface PendingFilters {
  runtimeId?: string | null;
  kind?: string | null;
  minAgeMs?: number;
  /** 0 = no limit. */
  maxAgeMs?: number;
  /** 0 = the daemon's default (100); at most 1000. */
  pageSize?: number;
}

export interface DaemonOptions {
  /** 'host:port' or 'unix:/path'; default $TOOLNEXUS_TARGET, else 127.0.0.1:50051. */
  target?: string | null;
  /** Default $TOOLNEXUS_TOKEN. */
  token?: string | null;
  /** The key of the keyed runtimes to see (x-toolnexus-runtime-key; one key per call). */
  runtimeKey?: string | null;
  credentials?: ChannelCredentials | null;
  channelOptions?: ChannelOptions;
}

/** The open suspensions, then live changes; reopened from the full list after UNAVAILABLE, or when
 * the daemon ended it because the reader fell behind (RESOURCE_EXHAUSTED with x-toolnexus-relist). */
export declare class PendingStream implements AsyncIterable<PendingChange> {
  [Symbol.asyncIterator](): AsyncGenerator<PendingChange, void, undefined>;
  /** How many times the stream was reopened (each reopening starts with the full list). */
  readonly reopened: number;
  cancel(): void;
}

/** The calls about a whole daemon: open suspensions and runtimes across runtimes. */
export declare class Daemon {
  constructor(options?: DaemonOptions);
  readonly target: string;
  listPending(options?: PendingFilters & { pageToken?: string }): Promise<PendingPage>;
  iterPending(options?: PendingFilters): AsyncGenerator<PendingItem, void, undefined>;
  listRuntimes(options?: { pageSize?: number; pageToken?: string }): Promise<RuntimePage>;
  iterRuntimes(options?: { pageSize?: number }): AsyncGenerator<RuntimeSummary, void, undefined>;
  watchPending(options?: { runtimeId?: string | null; kind?: string | null; signal?: AbortSignal | null }): PendingStream;
  resume(runtimeId: string, answer: AnswerInit, options?: { handle?: string | null; noWait?: boolean }): Promise<ResumeResult>;
  /** End every call and stream this object opened and close the channel. */
  close(): void;
}

// ------------------------------------------------------------------ errors

/** A failed daemon call: `code` a gRPC status name, `status` its number, `message` the daemon's details. */
export declare class ToolnexusError extends Error {
  constructor(code: string, message: string, extra?: { cause?: unknown; metadata?: unknown });
  readonly code: string;
  readonly status: number;
  readonly details: string;
  readonly metadata?: Metadata;
}
export declare class Cancelled extends ToolnexusError {}
export declare class Unknown extends ToolnexusError {}
export declare class InvalidArgument extends ToolnexusError {}
export declare class DeadlineExceeded extends ToolnexusError {}
export declare class NotFound extends ToolnexusError {}
export declare class AlreadyExists extends ToolnexusError {}
export declare class PermissionDenied extends ToolnexusError {}
export declare class ResourceExhausted extends ToolnexusError {}
export declare class FailedPrecondition extends ToolnexusError {}
export declare class Aborted extends ToolnexusError {}
export declare class OutOfRange extends ToolnexusError {}
export declare class Unimplemented extends ToolnexusError {}
export declare class Internal extends ToolnexusError {}
export declare class Unavailable extends ToolnexusError {}
export declare class DataLoss extends ToolnexusError {}
export declare class Unauthenticated extends ToolnexusError {}
export declare function errorFor(code: string | number, message: string, extra?: { cause?: unknown; metadata?: unknown }): ToolnexusError;
export declare function fromGrpcError(err: unknown): unknown;

// ------------------------------------------------------------------ helpers

export declare function toRequest(value: RequestInit | Record<string, unknown>): Request;
export declare function toAnswer(value: AnswerInit | Record<string, unknown>): Answer;
export declare function toToolResult(value: unknown): ToolResult;
export declare function toStruct(value: JsonObject | null | undefined): { fields: Record<string, unknown> } | null;
export declare function fromStruct(struct: { fields?: Record<string, unknown> } | null | undefined): JsonObject | null;
export declare function protoDir(): string;
export declare function loadContract(): { AgentRuntime: any; definition: Record<string, unknown> };
