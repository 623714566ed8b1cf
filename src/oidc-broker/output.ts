// The token file: written to a new sibling temp file (mode 0600), then renamed over the output, so a reader
// (the operator's or helper's token file source, re-read at most once a second) sees the old token or the
// new one, never a partial file. A failed write removes its temp file and leaves the output as it was.
import { randomBytes } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export const TEMP_PREFIX = '.token-';

export async function writeTokenAtomic(path: string, token: string): Promise<void> {
  const temp = join(dirname(path), `${TEMP_PREFIX}${basename(path)}-${randomBytes(6).toString('hex')}`);
  const file = await open(temp, 'wx', 0o600);
  try {
    try {
      await file.writeFile(token);
      // The umask cannot widen 0600, but an explicit chmod states the mode whatever the umask.
      await file.chmod(0o600);
    } finally {
      await file.close();
    }
    await rename(temp, path);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}
