// Key custody (issue #10, security): in selfsigned mode the CA private key lives only in its Secret and
// every serving (leaf) key only in the operator's memory. A real operator process runs with HOME, TMPDIR
// and --cert-dir in a fresh directory; afterwards no Secret but the CA's holds a private key, the CA
// Secret's keys belong to the CA certificates, the served leaf's key is in no Secret, and no file the
// process could have written holds a key.
import { createPublicKey, X509Certificate } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopOperatorProcesses } from '../../helpers/operator-process.ts';
import { CA_SECRET, OPERATOR_NS, OperatorCluster } from './operator-cluster.ts';

let cluster: OperatorCluster;
let work: string;
beforeAll(async () => {
  cluster = await OperatorCluster.start();
  work = await mkdtemp(join(tmpdir(), 'berth-keys-'));
  // Writable, so that a key written there would land and be found.
  for (const dir of ['certs', 'home', 'tmp']) await mkdir(join(work, dir));
});
afterAll(async () => {
  await stopOperatorProcesses();
  await cluster?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

const PRIVATE_KEY = /-----BEGIN [A-Z ]*PRIVATE KEY-----/;

/** Every file below `dir` (recursively). */
async function files(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await files(path)));
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

/** The public key (SPKI, DER, base64) of a PEM private key or certificate. */
const spki = (pem: string): string =>
  (pem.includes('CERTIFICATE') ? new X509Certificate(pem).publicKey : createPublicKey(pem))
    .export({ type: 'spki', format: 'der' })
    .toString('base64');

/** The certificate the webhook server presents (the leaf), as PEM. */
async function servedLeaf(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      const cert = socket.getPeerX509Certificate();
      socket.end();
      if (cert === undefined) reject(new Error('no peer certificate'));
      else resolve(cert.toString());
    });
    socket.on('error', reject);
  });
}

describe('selfsigned key custody', () => {
  it('the CA key is only in its Secret, the leaf key only in memory', async () => {
    const op = cluster.startOperator({
      name: 'keys',
      args: [`--cert-dir=${join(work, 'certs')}`],
      env: { HOME: join(work, 'home'), TMPDIR: join(work, 'tmp') },
    });
    await op.ready();
    await cluster.route([op]);
    await cluster.admissionWorks();

    const core = cluster.t.kc.makeApiClient(CoreV1Api);
    const secrets = (await core.listSecretForAllNamespaces()).items;
    const keyed = secrets
      .map((s) => ({
        name: `${s.metadata?.namespace}/${s.metadata?.name}`,
        data: Object.fromEntries(
          Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
        ),
      }))
      .filter((s) => Object.values(s.data).some((v) => PRIVATE_KEY.test(v)));
    expect(keyed.map((s) => s.name)).toEqual([`${OPERATOR_NS}/${CA_SECRET}`]);
    const ca = keyed[0]?.data ?? {};
    const keys = Object.entries(ca).filter(([, v]) => PRIVATE_KEY.test(v));
    expect(keys.map(([k]) => k)).toEqual(['ca.key']);
    expect(spki(ca['ca.key'] ?? '')).toBe(spki(ca['ca.crt'] ?? ''));

    // The served leaf is signed by that CA, and its key is not the CA's nor stored anywhere.
    const leaf = await servedLeaf(await op.webhookPort());
    expect(new X509Certificate(leaf).checkIssued(new X509Certificate(ca['ca.crt'] ?? ''))).toBe(true);
    const stored = secrets.flatMap((s) =>
      Object.values(s.data ?? {})
        .map((v) => Buffer.from(v, 'base64').toString())
        .filter((v) => PRIVATE_KEY.test(v))
        .map(spki),
    );
    expect(stored).not.toContain(spki(leaf));

    // Nothing on disk where the process may write.
    const written = await files(work);
    const withKeys = [];
    for (const f of written) if (PRIVATE_KEY.test(await readFile(f, 'utf8'))) withKeys.push(f);
    expect(withKeys).toEqual([]);
  }, 60_000);
});
