// Run a side script (Node or Python) as its own process and parse the JSON line it prints.
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { REPO, python } from './daemon.js';

const FIXTURES = resolve(fileURLToPath(import.meta.url), '..', '..', 'fixtures');

export const SIDES = {
  node: () => [process.execPath, [join(FIXTURES, 'side.js')]],
  python: () => [python(), [join(FIXTURES, 'side.py')]],
};

export function runFile(command, args, { timeoutMs = 30_000, cwd = REPO } = {}) {
  return new Promise((resolveRun, reject) => {
    execFile(command, args, { cwd, timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err) {
        reject(new Error(`${command} ${args.join(' ')} failed (${err.code ?? err.signal}):\n${stdout}\n${stderr}`));
        return;
      }
      resolveRun({ stdout, stderr });
    });
  });
}

/** Run `side.{js,py} <action> ...` in `language` and return its JSON line. */
export async function side(language, action, { target, runtimeId, handle, id, decline = false }) {
  const [command, prefix] = SIDES[language]();
  const args = [...prefix, action, '--target', target, '--runtime-id', runtimeId];
  if (handle) args.push('--handle', handle);
  if (id) args.push('--id', id);
  if (decline) args.push('--decline');
  const { stdout } = await runFile(command, args);
  const line = stdout.trim().split('\n').at(-1);
  try {
    return JSON.parse(line);
  } catch {
    throw new Error(`${language} side printed no JSON line:\n${stdout}`);
  }
}
