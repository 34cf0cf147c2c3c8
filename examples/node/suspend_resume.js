// Scenario (a): a tool suspends for an authorization, and resuming with ok=true finishes the task.
//
// Run against a daemon: `node examples/node/suspend_resume.js --target 127.0.0.1:50051`
// (or `node examples/node/run_demo.js`, which starts one for you).
import { Checks, isMain, main, newRuntime, suspend } from './_scenario.js';

export async function run(target, options = {}) {
  const checks = new Checks('scenario (a): suspend on authorization, resume with ok=true', options);
  const rt = await newRuntime(target);
  try {
    const [handle, result] = await suspend(rt);
    const { pending } = result;
    checks.check("wait returned status 'pending'", result.status === 'pending', result.status);
    if (!checks.check("the pending request has kind 'authorization'", pending?.kind === 'authorization', pending)) {
      return checks.ok;
    }
    const snap = await rt.snapshot(handle);
    checks.check(`snapshot of ${handle} is 'suspended'`, snap.state === 'suspended', snap.state);
    await rt.resume({ id: pending.id, ok: true });
    const after = await rt.snapshot(handle);
    const text = after.lastResult?.text;
    checks.check("after resume the handle is 'idle'", after.state === 'idle', after.state);
    checks.check("lastResult.text === 'action performed'", text === 'action performed', text);
  } finally {
    await rt.shutdown();
  }
  return checks.ok;
}

if (isMain(import.meta.url)) await main(run);
