// The reference scenario's pieces for tests: the tool `secret_action`, the mock model transport
// and a registry builder (the same behaviour as examples/node/_scenario.js and the Python
// examples, so runtimes made by either language serve each other's handles).
import { Runtime, ToolResult, agent, registry, tool } from '../../src/index.js';

export const AGENT = 'operator';
export const PROMPT = 'please perform the secret action';
export const DECLINED = 'declined/expired: approve?';

export async function secretAction(args, ctx) {
  if (!ctx.answer) {
    return ToolResult.suspend({ id: `secret-action:${ctx.handle}`, kind: 'authorization', prompt: 'approve?' });
  }
  return 'action performed';
}

export function completion(message, [promptTokens, completionTokens, totalTokens]) {
  return {
    id: 'mock',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: 'mock',
    choices: [{ index: 0, message, finish_reason: message.tool_calls ? 'tool_calls' : 'stop' }],
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: totalTokens },
  };
}

export function toolCall(name, args = {}, id = 'call_1') {
  return { role: 'assistant', content: null,
    tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }] };
}

/** The mock model calling `toolName` first, then answering with the first tool message's content. */
export function mockTransportFor(toolName = 'secret_action', seen = null) {
  return async ({ body }) => {
    seen?.push(body);
    const toolMessages = (body.messages ?? []).filter((m) => m.role === 'tool');
    const reply = toolMessages.length
      ? completion({ role: 'assistant', content: String(toolMessages[0].content ?? '') }, [2, 1, 3])
      : completion(toolCall(toolName), [3, 2, 5]);
    return { status: 200, headers: { 'content-type': 'application/json' }, body: reply };
  };
}

export const mockTransport = mockTransportFor();

export function scenarioRegistry(execute = secretAction) {
  const secret = tool('secret_action', execute, {
    description: 'Performs the secret action; needs an authorization.',
    inputSchema: { type: 'object', properties: {} },
  });
  return registry(agent(AGENT, { does: 'performs actions that need authorization', uses: { tools: [secret] } }));
}

export function newRuntime(target, extra = {}) {
  return Runtime.new({ target, registry: scenarioRegistry(), transport: mockTransport, ...extra });
}

/** Spawn the agent under root, wake it, wait for the (pending) result. */
export async function suspend(rt) {
  const handle = await rt.spawn(rt.root, AGENT);
  await rt.wake(handle, PROMPT);
  return [handle, await rt.wait(handle, { timeoutMs: 20_000 })];
}
