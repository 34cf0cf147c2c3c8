// Start the real daemon as a subprocess for tests (docs/protocol.md §8): `python -m toolnexus_daemon serve`
// on 127.0.0.1 with a real LMDB data directory. The daemon logs JSON lines on stderr; once it
// serves it logs {"msg": "serving", "addresses": [...]} with the bound addresses, which is how
// we learn where to connect. The python is $TOOLNEXUS_PYTHON, else the repository's .venv.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const REPO = resolve(fileURLToPath(import.meta.url), '..', '..', '..', '..', '..');

export function python() {
  if (process.env.TOOLNEXUS_PYTHON) return process.env.TOOLNEXUS_PYTHON;
  const venv = join(REPO, '.venv', 'bin', 'python');
  return existsSync(venv) ? venv : 'python3';
}

/** A free TCP port on 127.0.0.1 (for a daemon that must come back on the same address). */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

export class Daemon {
  constructor({ dataDir = null, listen = '127.0.0.1:0', args = [], env = {} } = {}) {
    this.ownsDataDir = dataDir === null;
    this.dataDir = dataDir ?? mkdtempSync(join(tmpdir(), 'toolnexus-node-test-'));
    this.listen = listen;
    this.args = args;
    this.env = env;
    this.proc = null;
    this.lines = [];
    this.target = null;
  }

  /** Start and resolve once serving (this.target set). */
  start(timeoutMs = 30_000) {
    const proc = spawn(python(), ['-m', 'toolnexus_daemon', 'serve', '--listen', this.listen,
      '--data-dir', this.dataDir, ...this.args],
    { cwd: REPO, env: { ...process.env, ...this.env }, stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc = proc;
    return new Promise((resolveStart, reject) => {
      const timer = setTimeout(() => {
        proc.kill('SIGKILL');
        reject(new Error(`daemon did not start serving in time:\n${this.logs()}`));
      }, timeoutMs);
      createInterface({ input: proc.stderr }).on('line', (line) => {
        this.lines.push(line);
        let record;
        try {
          record = JSON.parse(line);
        } catch {
          return;
        }
        if (record?.msg === 'serving' && record.addresses?.length) {
          clearTimeout(timer);
          this.target = record.addresses.find((a) => a.startsWith('127.0.0.1:')) ?? record.addresses[0];
          resolveStart(this);
        }
      });
      proc.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`daemon exited (${code ?? signal}):\n${this.logs()}`));
      });
      proc.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  logs() {
    return this.lines.slice(-40).join('\n');
  }

  running() {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** SIGTERM (SIGKILL after a grace); resolves to the exit code. */
  stop(graceMs = 15_000) {
    const proc = this.proc;
    if (!proc) return Promise.resolve(0);
    if (!this.running()) return Promise.resolve(proc.exitCode);
    return new Promise((resolveStop) => {
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      proc.once('exit', (code) => {
        clearTimeout(timer);
        resolveStop(code);
      });
      proc.kill('SIGTERM');
    });
  }

  /** kill -9, resolved once the process is gone. */
  kill9() {
    const proc = this.proc;
    if (!proc || !this.running()) return Promise.resolve();
    return new Promise((resolveKill) => {
      proc.once('exit', () => resolveKill());
      proc.kill('SIGKILL');
    });
  }

  /** Stop, then remove the data dir if this Daemon made it. */
  async dispose() {
    await this.stop();
    if (this.ownsDataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** A started daemon on a fresh temporary data dir. */
export async function startDaemon(options) {
  const daemon = new Daemon(options);
  try {
    return await daemon.start();
  } catch (err) {
    await daemon.dispose();
    throw err;
  }
}
