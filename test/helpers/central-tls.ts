// The serving certificate of every central lease server the tests start: the central API is HTTPS only
// (docs/behaviour.md §3.1), so the tests use TLS too. One throwaway CA per test process signs a leaf for
// the loopback names. This process trusts the CA as if it were installed (its in-process operators,
// lease clients and fetch calls verify the server as usual); a child process is handed `caFile`
// (`--berth-ca-bundle-file`, `BERTH_CA_BUNDLE_FILE`), as an install hands it the CA bundle.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import { createAuthority } from '../../hack/controlplane/pki.ts';

export interface CentralTls {
  /** PEM serving certificate and key, for 127.0.0.1, ::1 and localhost. */
  cert: string;
  key: string;
  /** The CA's PEM certificate, and a file holding it. */
  ca: string;
  caFile: string;
}

let shared: Promise<CentralTls> | undefined;

async function create(): Promise<CentralTls> {
  const authority = await createAuthority('berth-test-central-ca');
  const leaf = await authority.serving(['localhost', '127.0.0.1', '::1']);
  const dir = mkdtempSync(join(tmpdir(), 'berth-central-ca-'));
  const caFile = join(dir, 'ca.crt');
  writeFileSync(caFile, authority.cert);
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  setDefaultCACertificates([...getCACertificates('default'), authority.cert]);
  return { cert: leaf.cert, key: leaf.key, ca: authority.cert, caFile };
}

/** This process's central TLS material, created on first use. */
export function centralTls(): Promise<CentralTls> {
  shared ??= create();
  return shared;
}
