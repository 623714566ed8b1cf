// A real HTTPS admission webhook for tests: a throwaway CA, a serving certificate for the Service DNS
// name, and a handler deciding each AdmissionReview.
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { createAuthority } from '../../hack/controlplane/pki.ts';

export interface ReviewRequest {
  uid: string;
  operation: string;
  name?: string;
  namespace?: string;
  subResource?: string;
  resource: { group: string; version: string; resource: string };
  object?: { metadata?: { name?: string; labels?: Record<string, string>; uid?: string } } | null;
  oldObject?: unknown;
  userInfo: { username: string };
  dryRun?: boolean;
}

export interface ReviewAnswer {
  allowed: boolean;
  status?: { code?: number; message?: string };
  patch?: unknown[];
  warnings?: string[];
}

export interface TestWebhookServer {
  port: number;
  caBundle: string;
  requests: ReviewRequest[];
  stop(): Promise<void>;
}

/** A webhook server for `dnsName` (its certificate's name) on `host` (default loopback; 0.0.0.0 for Services). */
export async function startWebhookServer(
  dnsName: string,
  decide: (req: ReviewRequest, path: string) => ReviewAnswer,
  host = '127.0.0.1',
): Promise<TestWebhookServer> {
  const ca = await createAuthority('test-webhook-ca');
  const leaf = await ca.serving([dnsName, '127.0.0.1']);
  const requests: ReviewRequest[] = [];
  const server: Server = createServer({ key: leaf.key, cert: leaf.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { request: ReviewRequest };
      requests.push(review.request);
      const answer = decide(review.request, req.url ?? '/');
      const response: Record<string, unknown> = { uid: review.request.uid, allowed: answer.allowed };
      if (answer.status) response.status = answer.status;
      if (answer.warnings) response.warnings = answer.warnings;
      if (answer.patch) {
        response.patchType = 'JSONPatch';
        response.patch = Buffer.from(JSON.stringify(answer.patch)).toString('base64');
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    caBundle: Buffer.from(ca.cert).toString('base64'),
    requests,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
