// Scenario (b): resuming continues the task, so usage and turns keep growing across the suspension.
//
// Run against a daemon: `node examples/node/usage_grows.js --target 127.0.0.1:50051`.
import { Checks, isMain, main, newRuntime, suspend } from './_scenario.js';

export async function run(target, options = {}) {
  const checks = new Checks('scenario (b): usage and turns grow across the resume', options);
  const rt = await newRuntime(target);
  try {
    const [handle, result] = await suspend(rt);
    if (!checks.check('wait returned a pending request', result.pending !== null, result)) return checks.ok;
    const before = await rt.snapshot(handle);
    await rt.resume({ id: result.pending.id, ok: true });
    const after = await rt.snapshot(handle);
    checks.check(`usageTotal after the resume (${after.usageTotal}) > before it (${before.usageTotal})`,
      after.usageTotal > before.usageTotal);
    checks.check(`turnsTotal (${after.turnsTotal}) >= 2`, after.turnsTotal >= 2);
  } finally {
    await rt.shutdown();
  }
  return checks.ok;
}

if (isMain(import.meta.url)) await main(run);
