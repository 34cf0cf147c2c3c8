// `npm pack` / `npm publish`: copy the repository's proto/ into the package (prepack), and
// remove the copy again afterwards (postpack), so a checkout always loads the repo's proto/.
import { cpSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const target = join(pkg, 'proto');
if (process.argv[2] === 'clean') {
  rmSync(target, { recursive: true, force: true });
} else {
  rmSync(target, { recursive: true, force: true });
  cpSync(join(pkg, '..', '..', 'proto', 'toolnexus'), join(target, 'toolnexus'), { recursive: true });
}
