// The TypeScript declarations compile against an example of real use (test/types/check.ts).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = join(pkg, 'node_modules', 'typescript', 'bin', 'tsc');

it('src/index.d.ts type-checks an application (tsc --strict)', { skip: !existsSync(tsc) && 'typescript is not installed (npm ci)' }, async () => {
  const output = await new Promise((resolve) => {
    execFile(process.execPath, [tsc, '-p', join(pkg, 'test', 'types')], { cwd: pkg }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, text: `${stdout}${stderr}` });
    });
  });
  assert.equal(output.code, 0, output.text);
});
