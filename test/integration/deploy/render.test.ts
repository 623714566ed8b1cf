// The rendered installs and the generated kustomize sources are what `npm run deploy:render` writes now:
// rendered again in memory (kubectl kustomize of a scratch copy of deploy/ holding freshly generated
// sources) and compared byte for byte.
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEPLOY_DIR, INSTALLS, renderAll, staleFiles } from '../../../scripts/deploy.ts';

let rendered: Map<string, string>;
let scratch: string | undefined;

beforeAll(async () => {
  rendered = await renderAll();
}, 60_000);

afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('npm run deploy:render', () => {
  it('has written deploy/ as it renders now (run `npm run deploy:render` after changing a source)', async () => {
    expect(await staleFiles(rendered)).toEqual([]);
    for (const file of INSTALLS.keys()) expect(rendered.get(file)).toMatch(/^# berth-operator install: /);
  });

  it('notices a stale install', async () => {
    scratch = await mkdtemp(join(tmpdir(), 'berth-deploy-stale-'));
    await cp(DEPLOY_DIR, scratch, { recursive: true });
    await writeFile(join(scratch, 'install.yaml'), `${rendered.get('install.yaml')}# edited\n`);
    await writeFile(join(scratch, 'kustomize/base/rbac.generated.yaml'), '');
    expect(await staleFiles(rendered, scratch)).toEqual([
      'kustomize/base/rbac.generated.yaml',
      'install.yaml',
    ]);
  });
});
