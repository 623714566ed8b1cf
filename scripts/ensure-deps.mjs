// `npm start` and `npm test` install the dependencies first when they are missing or older than the
// lockfile, so a fresh clone needs no other set-up command. Plain JavaScript: before the install, `node`
// is the system's (possibly Node 20), which cannot run TypeScript.
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';

const mtime = (path) => {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
};

const installed = mtime('node_modules/.package-lock.json');
const locked = mtime('package-lock.json');
if (installed === undefined || (locked !== undefined && locked > installed)) {
  process.stderr.write('Installing dependencies (npm ci)...\n');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { stdio: 'inherit' });
}
