// What the three reference scenarios share: the tool, the mock model, the registry and the checks.
//
// The tool `secret_action` needs an authorization: without an answer it suspends with an
// `authorization` request, once answered it performs the action. The mock model is the
// reference's mock transport, served by this process over the worker stream (llm style
// `worker`): with no tool message in the request it calls `secret_action` with {} (usage
// 3/2/5), otherwise it answers with the first tool message's content (usage 2/1/3).
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { Runtime, ToolResult, agent, registry, tool } from 'toolnexus-client';

export const AGENT = 'operator';
export const PROMPT = 'please perform the secret action';

/** Suspend until authorized; the request id is stable per handle so a decline is recognised. */
export async function secretAction(args, ctx) {
  if (!ctx.answer) {
    return ToolResult.suspend({ id: `secret-action:${ctx.handle}`, kind: 'authorization', prompt: 'approve?' });
  }
  return 'action performed';
}

function completion(message, [promptTokens, completionTokens, totalTokens]) {
  return {
    id: 'mock',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: 'mock',
    choices: [{ index: 0, message, finish_reason: message.tool_calls ? 'tool_calls' : 'stop' }],
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: totalTokens },
  };
}

/** The reference mock model, as a transport: `{body}` → `{status, headers, body}`. */
export async function mockTransport({ body }) {
  const toolMessages = (body.messages ?? []).filter((m) => m.role === 'tool');
  const reply = toolMessages.length
    ? completion({ role: 'assistant', content: String(toolMessages[0].content ?? '') }, [2, 1, 3])
    : completion({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'secret_action', arguments: '{}' } }],
    }, [3, 2, 5]);
  return { status: 200, headers: { 'content-type': 'application/json' }, body: reply };
}

/** A runtime with one agent using `secret_action`, the model served by `mockTransport`. */
export function newRuntime(target, extra = {}) {
  const secret = tool('secret_action', secretAction, {
    description: 'Performs the secret action; needs an authorization.',
    inputSchema: { type: 'object', properties: {} },
  });
  const reg = registry(agent(AGENT, { does: 'performs actions that need authorization', uses: { tools: [secret] } }));
  return Runtime.new({ target, registry: reg, transport: mockTransport, ...extra });
}

/** Spawn the agent under root, wake it and wait for its (pending) result, in one call. */
export async function suspend(rt) {
  const { handle, result } = await rt.spawn(rt.root, AGENT, { prompt: PROMPT, waitMs: 30_000 });
  // no result only when a daemon shutdown cut the wait short: the wake is durable, wait for it
  return [handle, result ?? await rt.wait(handle, { timeoutMs: 30_000 })];
}

/** Prints each verified fact; remembers whether any failed. */
export class Checks {
  constructor(title, { quiet = false } = {}) {
    this.failed = 0;
    this.facts = [];
    this.print = quiet ? () => {} : (line) => console.log(line);
    this.print(title);
  }

  check(label, passed, got) {
    this.facts.push({ label, passed: Boolean(passed) });
    const detail = passed || got === undefined ? '' : ` (got ${JSON.stringify(got)})`;
    this.print(`  ${passed ? 'ok  ' : 'FAIL'} ${label}${detail}`);
    if (!passed) this.failed += 1;
    return Boolean(passed);
  }

  get ok() {
    return this.failed === 0;
  }
}

/** `node examples/node/<scenario>.js --target HOST:PORT` against a running daemon. */
export async function main(run) {
  const { values } = parseArgs({ options: { target: { type: 'string', default: '127.0.0.1:50051' } } });
  const passed = await run(values.target);
  process.exitCode = passed ? 0 : 1;
}

/** True when the module at `metaUrl` is the script node was started with. */
export function isMain(metaUrl) {
  return Boolean(process.argv[1]) && resolve(process.argv[1]) === fileURLToPath(metaUrl);
}
