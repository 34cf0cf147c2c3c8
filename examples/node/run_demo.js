// Start a daemon on a temporary data dir, run the three scenarios, stop it.
//
// The daemon is `python -m toolnexus_daemon serve --listen 127.0.0.1:0` (port 0: the OS picks a
// free one), with the repository's .venv python (or $TOOLNEXUS_PYTHON); it logs a JSON line
// {"msg": "serving", "addresses": [...]} on stderr once it serves, which is how we learn where to
// connect. It is stopped with SIGTERM and must exit 0. The exit status is non-zero if any check
// of any scenario failed. With `--target HOST:PORT` the scenarios run against a daemon you
// already started instead.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { run as decline } from './decline.js';
import { run as suspendResume } from './suspend_resume.js';
import { run as usageGrows } from './usage_grows.js';

const SCENARIOS = [['suspend_resume', suspendResume], ['usage_grows', usageGrows], ['decline', decline]];
const START_TIMEOUT_MS = 30_000;
const REPO = resolve(fileURLToPath(import.meta.url), '..', '..', '..');

function python() {
  if (process.env.TOOLNEXUS_PYTHON) return process.env.TOOLNEXUS_PYTHON;
  const venv = join(REPO, '.venv', 'bin', 'python');
  return existsSync(venv) ? venv : 'python3';
}

/** The daemon subprocess, resolved with its first address once it logs "serving". */
function startDaemon(dataDir) {
  const proc = spawn(python(), ['-m', 'toolnexus_daemon', 'serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir],
    { cwd: REPO, stdio: ['ignore', 'ignore', 'pipe'] });
  const lines = [];
  const serving = new Promise((resolveServing, reject) => {
    const timer = setTimeout(() => reject(new Error(`the daemon did not start serving:\n${lines.slice(-20).join('\n')}`)),
      START_TIMEOUT_MS);
    createInterface({ input: proc.stderr }).on('line', (line) => {
      lines.push(line);
      try {
        const record = JSON.parse(line);
        if (record?.msg === 'serving' && record.addresses?.length) {
          clearTimeout(timer);
          resolveServing(record.addresses[0]);
        }
      } catch { /* not a JSON line */ }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the daemon exited with ${code}:\n${lines.slice(-20).join('\n')}`));
    });
    proc.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
  const stop = () => new Promise((resolveStop) => {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      resolveStop(proc.exitCode);
      return;
    }
    const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      resolveStop(code);
    });
    proc.kill('SIGTERM');
  });
  return { serving, stop };
}

async function runAll(target) {
  let failed = 0;
  for (const [name, scenario] of SCENARIOS) {
    let passed;
    try {
      passed = await scenario(target);
    } catch (err) {
      console.log(`  FAIL ${name} threw ${err}`);
      passed = false;
    }
    if (!passed) failed += 1;
    console.log();
  }
  return failed;
}

async function mainDemo() {
  const { values } = parseArgs({ options: { target: { type: 'string' } } });
  if (values.target) return (await runAll(values.target)) ? 1 : 0;
  const dataDir = mkdtempSync(join(tmpdir(), 'toolnexus-demo-'));
  const daemon = startDaemon(dataDir);
  let failed;
  let code;
  try {
    const target = await daemon.serving;
    console.log(`daemon serving on ${target} (data dir ${dataDir})\n`);
    failed = await runAll(target);
  } finally {
    code = await daemon.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(`daemon stopped with SIGTERM, exit code ${code}`);
  if (code !== 0) failed += 1;
  console.log(failed === 0 ? 'all scenarios passed' : `${failed} failure(s)`);
  return failed ? 1 : 0;
}

process.exitCode = await mainDemo();
