// `files` mode behind a real HTTPS server, with the directory laid out the way the kubelet writes a Secret
// volume (`tls.crt -> ..data/tls.crt`, `..data -> ..<timestamp>`; an update swaps `..data` atomically):
// a rotated pair is served without a restart, from the watch and from the poll alone; a bad pair is
// rejected, counted, and the old one keeps serving.
import { X509Certificate } from 'node:crypto';
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CaKeyPair, IssuedLeaf } from '../../../certs/authority.ts';
import { FilesCertificateProvider, type FilesProviderOptions } from '../../../certs/files.ts';
import { generateCa, issueLeaf } from '../../../certs/issue.ts';
import { RELOAD_ERRORS_METRIC } from '../../../certs/metrics.ts';
import { attachToTlsServer } from '../../../certs/tls-server.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { eventually } from '../../helpers/eventually.ts';

const HOST = 'hook.berth-system.svc';
const DAY = 86_400_000;

let root: string;
let ca: CaKeyPair;
const leaves: IssuedLeaf[] = [];

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'berth-certs-files-'));
  ca = await generateCa({ now: Date.now(), validityMs: 30 * DAY });
  for (let i = 0; i < 4; i++)
    leaves.push(await issueLeaf(ca, { now: Date.now(), validityMs: DAY, dnsNames: [HOST] }));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A directory written like the kubelet's atomic writer. */
class SecretVolume {
  readonly dir: string;
  #generation = 0;

  constructor(dir: string) {
    this.dir = dir;
  }

  async init(files: Record<string, string>): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await this.update(files);
    for (const name of Object.keys(files)) await symlink(join('..data', name), join(this.dir, name));
  }

  /** New timestamped directory, `..data_tmp` pointing at it, renamed over `..data` (atomic). */
  async update(files: Record<string, string>): Promise<void> {
    const generation = `..2026_01_01_00_00_00.${this.#generation++}`;
    await mkdir(join(this.dir, generation));
    for (const [name, content] of Object.entries(files))
      await writeFile(join(this.dir, generation, name), content);
    await symlink(generation, join(this.dir, '..data_tmp'));
    await rename(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }
}

interface Harness {
  provider: FilesCertificateProvider;
  server: Server;
  port: number;
  errors(): Promise<number>;
  served(): Promise<string>;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

let n = 0;
async function serve(volume: SecretVolume, options: Partial<FilesProviderOptions> = {}): Promise<Harness> {
  const registry = createRegistry({ defaultMetrics: false });
  const provider = new FilesCertificateProvider({ dir: volume.dir, registry, ...options });
  await provider.start();
  await provider.waitForCertificate();
  const pair = provider.current()!;
  const server = createServer({ minVersion: 'TLSv1.2', key: pair.key, cert: pair.cert }, (_req, res) =>
    res.end('ok'),
  );
  const detach = attachToTlsServer(provider, server, { minVersion: 'TLSv1.2' });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    detach();
    await provider.stop();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const port = (server.address() as AddressInfo).port;
  return {
    provider,
    server,
    port,
    errors: async () => (await registry.getSingleMetric(RELOAD_ERRORS_METRIC)!.get()).values[0]!.value,
    // A fresh connection trusting the CA; resolves with the fingerprint of the certificate served.
    served: () =>
      new Promise((resolve, reject) => {
        const req = request(
          { host: '127.0.0.1', port, servername: HOST, ca: ca.cert, agent: false, path: '/' },
          (res) => {
            const fp = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
            res.resume();
            res.on('end', () => resolve(fp));
          },
        );
        req.on('error', reject);
        req.end();
      }),
  };
}

const fp = (leaf: IssuedLeaf): string => new X509Certificate(leaf.cert).fingerprint256;
const pairFiles = (leaf: IssuedLeaf, key = leaf.key) => ({
  'tls.crt': leaf.cert,
  'tls.key': key,
  'ca.crt': ca.cert,
});

describe('files mode behind an HTTPS server', () => {
  it('serves a pair rotated by a ..data symlink swap without a restart (watch)', async () => {
    const volume = new SecretVolume(join(root, `volume-${n++}`));
    await volume.init(pairFiles(leaves[0]!));
    // A poll far away: only the directory watch can pick this up in time.
    const h = await serve(volume, { pollIntervalMs: 10 * 60_000 });
    expect(await h.served()).toBe(fp(leaves[0]!));
    expect(h.provider.current()?.ca).toBe(ca.cert);

    await volume.update(pairFiles(leaves[1]!));
    await eventually(async () => (await h.served()) === fp(leaves[1]!));
    await volume.update(pairFiles(leaves[2]!));
    await eventually(async () => (await h.served()) === fp(leaves[2]!));
    expect(await h.errors()).toBe(0);
  });

  it('rejects a bad pair and keeps serving the old one, then takes the next good one', async () => {
    const volume = new SecretVolume(join(root, `volume-${n++}`));
    await volume.init(pairFiles(leaves[0]!));
    const h = await serve(volume, { pollIntervalMs: 10 * 60_000 });

    // A certificate with another certificate's key.
    await volume.update(pairFiles(leaves[1]!, leaves[2]!.key));
    await eventually(async () => (await h.errors()) >= 1);
    expect(await h.served()).toBe(fp(leaves[0]!));
    // Garbage.
    const before = await h.errors();
    await volume.update({ 'tls.crt': 'garbage', 'tls.key': 'garbage', 'ca.crt': ca.cert });
    await eventually(async () => (await h.errors()) > before);
    expect(await h.served()).toBe(fp(leaves[0]!));

    await volume.update(pairFiles(leaves[3]!));
    await eventually(async () => (await h.served()) === fp(leaves[3]!));
  });

  it('picks up a rotation from the poll alone when no watch is possible', async () => {
    const volume = new SecretVolume(join(root, `volume-${n++}`));
    await volume.init(pairFiles(leaves[0]!));
    const h = await serve(volume, { watch: false, pollIntervalMs: 100 });
    await volume.update(pairFiles(leaves[1]!));
    await eventually(async () => (await h.served()) === fp(leaves[1]!));
  });

  it('picks up files rewritten in place (a plain directory, not a Secret volume)', async () => {
    const dir = join(root, `plain-${n++}`);
    await mkdir(dir);
    const write = async (leaf: IssuedLeaf): Promise<void> => {
      // Written to temporary names and renamed, so a read never sees half a file.
      for (const [name, content] of Object.entries(pairFiles(leaf))) {
        await writeFile(join(dir, `.${name}.tmp`), content);
        await rename(join(dir, `.${name}.tmp`), join(dir, name));
      }
    };
    await write(leaves[0]!);
    const h = await serve(new SecretVolume(dir), { pollIntervalMs: 10 * 60_000 });
    await write(leaves[2]!);
    await eventually(async () => (await h.served()) === fp(leaves[2]!));
  });
});
