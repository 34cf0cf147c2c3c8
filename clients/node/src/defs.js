// Declaring agents, tools, budgets and the model: the registry a runtime is built from.
// Validation that needs no daemon (duplicate agents, one tool name bound to two different
// functions, a webhook/http tool without a url, unknown option keys) throws here, at
// declaration; everything else is the daemon's INVALID_ARGUMENT.

const TOOL_SOURCES = ['native', 'webhook', 'http'];
// what a call in flight at a daemon crash becomes: sent again, or asked about (docs/protocol.md §11)
const ON_CRASH = ['rerun', 'ask'];

/** A tool an agent uses; build it with `tool(...)`, `Tool.webhook(...)` or `Tool.http(...)`. */
export class Tool {
  /**
   * @param {{name: string, description?: string, inputSchema?: object|null,
   *   execute?: Function|null, source?: string, endpoint?: object|null, deadlineMs?: number,
   *   onCrash?: string, answerLink?: boolean}} fields — `answerLink`: its suspensions get
   *   `request.answerUrl` (the daemon needs --answers-listen); — `onCrash: 'ask'`: a call in flight at a crash (or whose worker
   *   vanished) is not sent again; the handle suspends on a `reconcile` request instead
   */
  constructor({ name, description = '', inputSchema = null, execute = null, source = 'native',
    endpoint = null, deadlineMs = 0, onCrash = 'rerun', answerLink = false }) {
    if (!name || typeof name !== 'string') throw new TypeError('a tool needs a name');
    if (!ON_CRASH.includes(onCrash)) {
      throw new TypeError(`tool "${name}": onCrash must be one of ${ON_CRASH.join(', ')}`);
    }
    if (!Number.isInteger(deadlineMs) || deadlineMs < 0) {
      throw new TypeError(`tool "${name}": deadlineMs must be a non-negative integer (0 = the daemon's default)`);
    }
    if (!TOOL_SOURCES.includes(source)) {
      throw new TypeError(`tool "${name}": source must be one of ${TOOL_SOURCES.join(', ')}`);
    }
    if (execute !== null && typeof execute !== 'function') {
      throw new TypeError(`tool "${name}": execute must be a function (args, ctx) => result`);
    }
    if (source !== 'native' && !endpoint?.url) {
      throw new TypeError(`tool "${name}": a ${source} tool needs a url`);
    }
    if (source !== 'native' && execute) {
      throw new TypeError(`tool "${name}": only a native tool has an execute function`);
    }
    this.name = name;
    this.description = String(description ?? '');
    this.inputSchema = inputSchema ?? null;
    this.execute = execute;
    this.source = source;
    this.endpoint = endpoint ? normaliseEndpoint(endpoint) : null;
    this.deadlineMs = deadlineMs;
    this.onCrash = onCrash;
    this.answerLink = Boolean(answerLink);
    Object.freeze(this);
  }

  /** A tool the daemon POSTs `{call_id, runtime_id, handle, tool, arguments, answer}` to. */
  static webhook(name, url, { description = '', inputSchema = null, headers = {}, timeoutMs = 0,
    onCrash = 'rerun' } = {}) {
    return new Tool({ name, description, inputSchema, source: 'webhook', onCrash,
      endpoint: { url, method: 'POST', headers, timeoutMs } });
  }

  /** A plain REST endpoint: `{placeholder}` URL args, `query` args, the rest as a JSON body. */
  static http(name, url, { method = 'GET', query = [], headers = {}, description = '', inputSchema = null,
    timeoutMs = 0, onCrash = 'rerun' } = {}) {
    return new Tool({ name, description, inputSchema, source: 'http', onCrash,
      endpoint: { url, method: String(method).toUpperCase(), query, headers, timeoutMs } });
  }
}

function normaliseEndpoint(e) {
  return Object.freeze({
    url: String(e.url),
    method: String(e.method ?? 'POST').toUpperCase(),
    headers: { ...(e.headers ?? {}) },
    query: [...(e.query ?? [])],
    timeoutMs: Number(e.timeoutMs ?? e.timeout_ms ?? 0),
  });
}

/**
 * A native tool served by this process: `tool(name, execute, {description, inputSchema})` or
 * `tool(name, {description, inputSchema, execute, deadlineMs, onCrash})`. `execute(args, ctx)` may be
 * async and returns a string, a ToolResult or a JSON value; a throw becomes an error result.
 */
export function tool(name, execute, options = {}) {
  if (execute !== null && typeof execute === 'object') {
    options = execute;
    execute = options.execute ?? null;
  }
  const { description = '', inputSchema = null, deadlineMs = 0, onCrash = 'rerun', answerLink = false } = options;
  return new Tool({ name, description, inputSchema, execute: execute ?? null, deadlineMs, onCrash, answerLink });
}

/** One agent of a registry; build it with `agent(...)`. */
export class AgentSpec {
  constructor(fields) {
    Object.assign(this, fields);
    Object.freeze(this);
  }
}

/**
 * An MCP server whose tools an agent gets, offered to the model as `<name>__<tool>`: `{name, url,
 * headers, tools, timeoutMs, onCrash}`. `url` names a streamable-HTTP server (header values may hold
 * `${ENV}` of names the daemon allows); without it the daemon looks `name` up in its operator's
 * `--mcp-config` file. A bare string is such a name. `tools` limits which of its tools are offered.
 */
export function mcpServer(value) {
  const spec = typeof value === 'string' ? { name: value } : { ...(value ?? {}) };
  const known = ['name', 'url', 'headers', 'tools', 'timeoutMs', 'onCrash'];
  const unknownKeys = Object.keys(spec).filter((k) => !known.includes(k));
  if (unknownKeys.length) {
    throw new TypeError(`mcp server: unknown key(s) ${unknownKeys.join(', ')} (known: ${known.join(', ')})`);
  }
  if (!spec.name || typeof spec.name !== 'string') throw new TypeError('an MCP server needs a name');
  const onCrash = spec.onCrash ?? 'rerun';
  if (!ON_CRASH.includes(onCrash)) {
    throw new TypeError(`mcp server "${spec.name}": onCrash must be one of ${ON_CRASH.join(', ')}`);
  }
  const timeoutMs = Number(spec.timeoutMs ?? 0);
  if (!(timeoutMs >= 0)) throw new TypeError(`mcp server "${spec.name}": timeoutMs must not be negative`);
  return Object.freeze({
    name: spec.name, url: String(spec.url ?? ''), headers: Object.freeze({ ...(spec.headers ?? {}) }),
    tools: Object.freeze([...(spec.tools ?? [])]), timeoutMs, onCrash,
  });
}

/**
 * Declare an agent: `agent(name, {does, uses: {tools: [Tool...], team: [names], mcpServers: [...]},
 * model, soul, team, budget, waitFor, requestParams, mcpServers})`.
 */
export function agent(name, options = {}) {
  if (!name || typeof name !== 'string') throw new TypeError('an agent needs a name');
  const known = ['does', 'uses', 'model', 'soul', 'team', 'budget', 'waitFor', 'requestParams', 'answerLink',
    'mcpServers'];
  const unknownKeys = Object.keys(options).filter((k) => !known.includes(k));
  if (unknownKeys.length) {
    throw new TypeError(`agent "${name}": unknown option(s) ${unknownKeys.join(', ')} (known: ${known.join(', ')})`);
  }
  const uses = options.uses ?? {};
  const badUses = Object.keys(uses).filter((k) => !['tools', 'team', 'mcpServers'].includes(k));
  if (badUses.length) {
    throw new TypeError(`agent "${name}": uses takes 'tools', 'team' and 'mcpServers', not ${badUses.join(', ')}`);
  }
  const mcpServers = [...(uses.mcpServers ?? []), ...(options.mcpServers ?? [])].map(mcpServer);
  const serverNames = mcpServers.map((s) => s.name);
  const twice = serverNames.find((n, i) => serverNames.indexOf(n) !== i);
  if (twice) throw new TypeError(`agent "${name}": mcp server "${twice}" is named more than once`);
  const tools = [...(uses.tools ?? [])];
  for (const t of tools) {
    if (!(t instanceof Tool)) {
      throw new TypeError(`agent "${name}": uses.tools holds Tool values (from tool(...)), got ${typeof t}`);
    }
  }
  const team = [...new Set([...(uses.team ?? []), ...(options.team ?? [])])];
  return new AgentSpec({
    name,
    does: String(options.does ?? ''),
    model: options.model || 'inherit',
    soul: String(options.soul ?? ''),
    tools: Object.freeze(tools),
    team: Object.freeze(team),
    budget: options.budget ? budgetFields(options.budget) : null,
    waitFor: Boolean(options.waitFor),
    requestParams: options.requestParams ?? null,
    answerLink: Boolean(options.answerLink),
    mcpServers: Object.freeze(mcpServers),
  });
}

/** The agents a runtime knows, in declaration order. */
export class Registry {
  constructor(agents) {
    this.agents = Object.freeze([...agents]);
    Object.freeze(this);
  }

  names() {
    return this.agents.map((a) => a.name);
  }

  /** Native tools with an execute function, by name: what this client serves over Connect. */
  nativeTools() {
    const served = new Map();
    for (const spec of this.agents) {
      for (const t of spec.tools) {
        if (t.source !== 'native' || !t.execute) continue;
        const known = served.get(t.name);
        if (known && known.execute !== t.execute) {
          throw new TypeError(`tool "${t.name}" is bound to two different execute functions`);
        }
        served.set(t.name, known ?? t);
      }
    }
    return served;
  }
}

/** A registry: `registry(a, b)` or `registry([a, b])`; agent names must be unique. */
export function registry(...agents) {
  const flat = agents.flat();
  const seen = new Set();
  for (const spec of flat) {
    if (!(spec instanceof AgentSpec)) throw new TypeError('registry(...) takes agents built with agent(...)');
    if (seen.has(spec.name)) throw new TypeError(`agent "${spec.name}" is declared twice`);
    seen.add(spec.name);
  }
  const result = new Registry(flat);
  result.nativeTools(); // fail at declaration on a tool name bound twice
  return result;
}

// ------------------------------------------------------------------ option objects

const BUDGET_FIELDS = ['max_turns', 'max_tokens', 'max_tool_calls', 'max_wall_ms', 'max_children',
  'max_concurrent', 'max_depth'];
const LLM_FIELDS = ['style', 'base_url', 'model', 'api_key_env', 'headers', 'retries', 'timeout_ms', 'stream',
  'request_params', 'max_tokens'];
const OPTION_FIELDS = ['max_concurrent_turns', 'inbox_cap', 'close_grace_ms', 'tool_timeout_ms', 'wait_for',
  'event_retention', 'max_turns', 'pending_ttl_ms', 'answer_link', 'version_policy', 'version_grace_ms'];

const snake = (key) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camel = (key) => key.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/**
 * Keys of `value` (camelCase or snake_case) mapped to the proto's snake_case field names; an
 * unknown key throws a TypeError naming the known ones (in camelCase).
 */
export function pickFields(value, fields, what) {
  const out = {};
  for (const [key, item] of Object.entries(value ?? {})) {
    const name = snake(key);
    if (!fields.includes(name)) {
      throw new TypeError(`unknown ${what} key "${key}" (known: ${fields.map(camel).join(', ')})`);
    }
    if (item !== undefined) out[name] = item;
  }
  return out;
}

export const budgetFields = (value) => pickFields(value, BUDGET_FIELDS, 'budget');
export const llmFields = (value) => pickFields(value, LLM_FIELDS, 'llm');
export const optionFields = (value) => pickFields(value, OPTION_FIELDS, 'runtime option');
