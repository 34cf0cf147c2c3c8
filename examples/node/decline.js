// Scenario (c): declining the authorization settles the task with the decline fed to the model.
//
// Run against a daemon: `node examples/node/decline.js --target 127.0.0.1:50051`.
import { Checks, isMain, main, newRuntime, suspend } from './_scenario.js';

export const EXPECTED = 'declined/expired: approve?';

export async function run(target, options = {}) {
  const checks = new Checks('scenario (c): resume with ok=false declines', options);
  const rt = await newRuntime(target);
  try {
    const [handle, result] = await suspend(rt);
    if (!checks.check('wait returned a pending request', result.pending !== null, result)) return checks.ok;
    await rt.resume({ id: result.pending.id, ok: false, reason: 'not authorized' });
    const after = await rt.snapshot(handle);
    const last = after.lastResult;
    checks.check("after the decline the handle is 'idle'", after.state === 'idle', after.state);
    checks.check('lastResult.isError is false', last !== null && !last.isError, last);
    checks.check(`lastResult.text === ${JSON.stringify(EXPECTED)}`, last?.text === EXPECTED, last?.text);
  } finally {
    await rt.shutdown();
  }
  return checks.ok;
}

if (isMain(import.meta.url)) await main(run);
