// The three reference scenarios through the Node client against a daemon subprocess, asserted
// directly; then the examples in examples/node/ run as their own processes and must pass, and
// `make demo-node` (what a fresh clone runs) runs them end to end.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { REPO, startDaemon } from './helpers/daemon.js';
import { DECLINED, newRuntime, suspend } from './helpers/mock.js';
import { runFile } from './helpers/run.js';

let daemon;
before(async () => { daemon = await startDaemon(); });
after(async () => { await daemon?.dispose(); });

async function withRuntime(body) {
  const rt = await newRuntime(daemon.target);
  try {
    return await body(rt);
  } finally {
    await rt.shutdown();
  }
}

describe('reference scenarios', () => {
  it('(a) a tool suspends for authorization; resume ok=true finishes with its output', () => withRuntime(async (rt) => {
    assert.equal(rt.root, 'root');
    assert.equal(rt.reattached, false);
    const [handle, result] = await suspend(rt);
    assert.equal(handle, 'root/operator.1');
    assert.equal(result.status, 'pending');
    assert.equal(result.isError, false);
    assert.equal(result.pending.kind, 'authorization');
    assert.equal(result.pending.prompt, 'approve?');
    assert.equal(result.pending.id, `secret-action:${handle}`);
    const snap = await rt.snapshot(handle);
    assert.equal(snap.state, 'suspended');
    assert.equal(snap.pending.id, result.pending.id);
    const resumed = await rt.resume({ id: result.pending.id, ok: true });
    assert.equal(resumed.handle, handle);
    assert.equal(resumed.duplicate, false);
    assert.equal(resumed.result.status, 'done');
    assert.equal(resumed.result.text, 'action performed');
    const after = await rt.snapshot(handle);
    assert.equal(after.state, 'idle');
    assert.equal(after.lastResult.text, 'action performed');
    assert.equal(after.pending, null);
  }));

  it('(b) usageTotal grows across the resume and turnsTotal >= 2', () => withRuntime(async (rt) => {
    const [handle, result] = await suspend(rt);
    const before = await rt.snapshot(handle);
    assert.equal(before.usageTotal, 5);
    assert.deepEqual(before.usage, { promptTokens: 3, completionTokens: 2, totalTokens: 5 });
    await rt.resume({ id: result.pending.id, ok: true });
    const after = await rt.snapshot(handle);
    assert.ok(after.usageTotal > before.usageTotal, `${after.usageTotal} > ${before.usageTotal}`);
    assert.equal(after.usageTotal, 8);
    assert.ok(after.turnsTotal >= 2);
  }));

  it('(c) resume ok=false settles idle with the decline fed to the model', () => withRuntime(async (rt) => {
    const [handle, result] = await suspend(rt);
    const resumed = await rt.resume({ id: result.pending.id, ok: false, reason: 'not authorized' });
    assert.equal(resumed.result.text, DECLINED);
    const after = await rt.snapshot(handle);
    assert.equal(after.state, 'idle');
    assert.equal(after.lastResult.isError, false);
    assert.equal(after.lastResult.text, DECLINED);
  }));
});

describe('examples/node', () => {
  const dir = join(REPO, 'examples', 'node');
  for (const script of ['suspend_resume.js', 'usage_grows.js', 'decline.js']) {
    it(`${script} passes and prints what it verified`, async () => {
      assert.ok(existsSync(join(dir, 'node_modules', 'toolnexus-client')),
        'examples/node is not installed: run `npm ci` in examples/node (make node-test does)');
      const { stdout } = await runFile(process.execPath, [join(dir, script), '--target', daemon.target], { cwd: dir });
      assert.match(stdout, /^scenario \([abc]\)/);
      assert.match(stdout, / {2}ok {3}/);
      assert.doesNotMatch(stdout, /FAIL/);
    });
  }
});

/** Run a command to its end; resolves to {code, stdout, stderr} whatever the exit status. */
function runToEnd(command, args, { cwd = REPO, env = process.env, timeoutMs = 60_000 } = {}) {
  return new Promise((resolveRun) => {
    const child = execFile(command, args, { cwd, env, timeout: timeoutMs, encoding: 'utf8' },
      (err, stdout, stderr) => resolveRun({ code: child.exitCode, killed: Boolean(err?.killed), stdout, stderr }));
  });
}

/** The environment without the variables of an enclosing make (its jobserver is not ours). */
function envWithout(...names) {
  const env = { ...process.env };
  for (const name of ['MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', ...names]) delete env[name];
  return env;
}

describe('make demo-node', () => {
  it('runs the three scenarios against a daemon it starts from .venv, and the daemon stops cleanly', { timeout: 180_000 }, async () => {
    const run = await runToEnd('make', ['-s', 'demo-node'], { env: envWithout('TOOLNEXUS_PYTHON'), timeoutMs: 170_000 });
    assert.equal(run.killed, false, `make demo-node did not finish:\n${run.stdout}\n${run.stderr}`);
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stdout, /^daemon serving on 127\.0\.0\.1:\d+/m);
    for (const letter of ['a', 'b', 'c']) assert.match(run.stdout, new RegExp(`^scenario \\(${letter}\\)`, 'm'));
    assert.doesNotMatch(run.stdout, /FAIL/);
    assert.match(run.stdout, /daemon stopped with SIGTERM, exit code 0\nall scenarios passed/);
  });

  describe('run_demo.js without its set-up says what to run instead of failing obscurely', () => {
    let copy;
    before(() => {
      // a checkout where nothing was installed: the examples alone, no node_modules, no .venv
      copy = mkdtempSync(join(tmpdir(), 'toolnexus-fresh-'));
      mkdirSync(join(copy, 'examples'));
      cpSync(join(REPO, 'examples', 'node'), join(copy, 'examples', 'node'), {
        recursive: true, filter: (source) => !source.includes('node_modules'),
      });
    });
    after(() => rmSync(copy, { recursive: true, force: true }));

    it('no Node packages: exit 2 naming make demo-node', async () => {
      const run = await runToEnd(process.execPath, [join(copy, 'examples', 'node', 'run_demo.js')], { cwd: copy });
      assert.equal(run.code, 2, `${run.stdout}\n${run.stderr}`);
      assert.match(run.stderr, /the Node packages are not installed \(Cannot find package 'toolnexus-client'/);
      assert.match(run.stderr, /run `make demo-node` from the repository root/);
      assert.doesNotMatch(run.stderr, /at .*\.js:\d+/, 'no stack trace');
    });

    it('no .venv and no TOOLNEXUS_PYTHON: exit 2 naming make demo-node, never the system python', async () => {
      const modules = join(copy, 'examples', 'node', 'node_modules');
      mkdirSync(modules, { recursive: true });
      symlinkSync(join(REPO, 'clients', 'node'), join(modules, 'toolnexus-client'));
      const run = await runToEnd(process.execPath, [join(copy, 'examples', 'node', 'run_demo.js')],
        { cwd: copy, env: envWithout('TOOLNEXUS_PYTHON') });
      assert.equal(run.code, 2, `${run.stdout}\n${run.stderr}`);
      assert.match(run.stderr, /no python to run the daemon: .*\.venv\/bin\/python does not exist/);
      assert.match(run.stderr, /run `make demo-node` from the repository root/);
      assert.doesNotMatch(run.stderr, /Traceback/);
    });
  });
});
