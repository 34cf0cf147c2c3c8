// Start a daemon on a temporary data dir, run the three scenarios, stop it.
//
// The daemon is `python -m toolnexus_daemon serve --listen 127.0.0.1:0` (port 0: the OS picks a
// free one), with the repository's .venv python (or $TOOLNEXUS_PYTHON); it logs a JSON line
// {"msg": "serving", "addresses": [...]} on stderr once it serves, which is how we learn where to
// connect. It is stopped with SIGTERM and must exit 0. The exit status is non-zero if any check
// of any scenario failed. With `--target HOST:PORT` the scenarios run against a daemon you
// already started instead.
//
// From a fresh clone, `make demo-node` (repository root) installs what this needs first: npm ci
// in clients/node and here, and .venv for the daemon. Run directly without them, it says so
// instead of failing on a missing package or a system python without the daemon's dependencies.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const SCENARIO_FILES = [['suspend_resume', './suspend_resume.js'], ['usage_grows', './usage_grows.js'],
  ['decline', './decline.js']];
const START_TIMEOUT_MS = 30_000;
const REPO = resolve(fileURLToPath(import.meta.url), '..', '..', '..');
const SET_UP = 'run `make demo-node` from the repository root: it installs the Node packages '
  + '(npm ci in clients/node and examples/node) and the daemon\'s .venv, then runs this demo';

/** A missing prerequisite: what is missing and how to get it, printed without a stack trace. */
class NotSetUp extends Error {}

/** The scenarios, imported only now so that missing Node packages can be reported plainly. */
async function loadScenarios() {
  try {
    return await Promise.all(SCENARIO_FILES.map(async ([name, file]) => [name, (await import(file)).run]));
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new NotSetUp(`the Node packages are not installed (${err.message.split('\n')[0]});\n${SET_UP}`);
  }
}

/** The python that runs the daemon: $TOOLNEXUS_PYTHON, else the repository's .venv. */
function python() {
  if (process.env.TOOLNEXUS_PYTHON) return process.env.TOOLNEXUS_PYTHON;
  const venv = join(REPO, '.venv', 'bin', 'python');
  if (existsSync(venv)) return venv;
  throw new NotSetUp(`no python to run the daemon: ${venv} does not exist and TOOLNEXUS_PYTHON is not set;\n`
    + `${SET_UP} (or pass --target HOST:PORT of a daemon you started)`);
}

/** The daemon subprocess, resolved with its first address once it logs "serving". */
function startDaemon(dataDir, command) {
  const proc = spawn(command, ['-m', 'toolnexus_daemon', 'serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir],
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
  for (const [name, scenario] of await loadScenarios()) {
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
  await loadScenarios();
  const command = python();
  const dataDir = mkdtempSync(join(tmpdir(), 'toolnexus-demo-'));
  const daemon = startDaemon(dataDir, command);
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

try {
  process.exitCode = await mainDemo();
} catch (err) {
  if (!(err instanceof NotSetUp)) throw err;
  console.error(`run_demo.js: ${err.message}`);
  process.exitCode = 2;
}
