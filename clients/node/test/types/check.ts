// Compiled (never run) by `npm run typecheck` and test/types.test.js: the declarations in
// src/index.d.ts describe the API the way an application uses it.
import {
  type Context, type Event, type HandleSnapshot, type InterruptResult, type PostResult, type TaskResult, type Transport, type Woken,
  Daemon, type PendingChange, type PendingItem, NotFound, Runtime, Status, Tool, ToolResult, ToolnexusError, agent, registry, tool,
} from 'toolnexus-client';

const secretAction = tool('secret_action', async (_args: Record<string, never>, ctx: Context) =>
  ctx.answer ? 'action performed' : ToolResult.suspend({ id: `secret-action:${ctx.handle}`, kind: 'authorization', prompt: 'approve?' }));
const lookup = tool<{ q: string }>('lookup', {
  description: 'looks things up',
  inputSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
  execute: (args) => ({ found: args.q.length > 0 }),
});
const hook = Tool.webhook('approve', 'http://127.0.0.1:8099/approve', { timeoutMs: 5000 });

const transport: Transport = async ({ body }) => ({
  status: 200,
  headers: {},
  body: { choices: [{ message: { role: 'assistant', content: String(body.messages?.length ?? 0) } }] },
});

export async function demo(target: string): Promise<string> {
  const rt = await Runtime.new({
    target,
    registry: registry(agent('operator', { does: 'acts', uses: { tools: [secretAction, lookup, hook] }, budget: { maxTurns: 4 } }),
      agent('painter', { mcpServers: [{ name: 'paint', url: 'http://127.0.0.1:8765/mcp', tools: ['paint'], onCrash: 'ask' }, 'files'] })),
    transport,
    options: { toolTimeoutMs: 1000 },
  });
  const handle: string = await rt.spawn(rt.root, 'operator');
  const queued: boolean = await rt.wake(handle, 'go');
  const fused: Woken = await rt.spawn(rt.root, 'operator', { prompt: 'go', waitMs: 5000 });
  const settled: TaskResult | null = (await rt.wake(fused.handle, 'again', { waitMs: 5000 })).result;
  void settled;
  const result: TaskResult = await rt.wait(handle, { timeoutMs: 5000 });
  if (result.status === Status.PENDING && result.pending) {
    const resumed = await rt.resume({ id: result.pending.id, ok: true }, { noWait: false });
    const text: string | undefined = resumed.result?.text;
    void text;
  }
  const snap: HandleSnapshot = await rt.snapshot(handle);
  const total: number = snap.usageTotal + snap.turnsTotal + snap.usage.promptTokens;
  for await (const event of rt.watch({ afterSeq: 0, types: ['pending'] })) {
    const e: Event = event;
    if (e.pending?.kind === 'authorization') break;
  }
  try {
    await rt.resume({ id: 'nope', ok: false, reason: 'declined' });
  } catch (err) {
    if (err instanceof NotFound) console.log(err.code, err.status, err.message);
    else if (err instanceof ToolnexusError) throw err;
  }
  const posted: PostResult = await rt.post(handle, 'hi', { from: 'app' });
  const place: number = posted.position + posted.inboxCap;
  const stopped: InterruptResult = await rt.interrupt(handle);
  const cancelled: string | null = stopped.cancelledRequest;
  void [place, cancelled, stopped.fromState, stopped.inboxRestored];
  await rt.shutdown({ purge: false });
  return `${queued} ${total} ${snap.lastResult?.text ?? ''}`;
}

export async function inbox(target: string): Promise<number> {
  const d = new Daemon({ target, runtimeKey: 'k1' });
  const page = await d.listPending({ kind: 'approval', pageSize: 10 });
  const first: PendingItem | undefined = page.items[0];
  let n = 0;
  for await (const item of d.iterPending({ runtimeId: first?.runtimeId ?? null })) n += item.request.prompt.length;
  for await (const change of d.watchPending()) {
    const c: PendingChange = change;
    if (c.type === 'SYNCED') break;
  }
  const counts: Record<string, number> = (await d.listRuntimes()).runtimes[0]?.handles ?? {};
  d.close();
  return n + Object.keys(counts).length;
}
