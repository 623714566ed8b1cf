// The helper's central API client: the operator's HttpLeaseClient (the same wire protocol, per-request
// timeouts, token file re-read within 1 s of a rotation), set up as the Go helper sets up its own: the CA
// bundle added to the system roots, the token file read once at start so that a missing one fails at
// once, and a warning when verification is off.
import { readFile } from 'node:fs/promises';
import { HttpLeaseClient } from '../berth/leaseclient.ts';
import type { HelperConfig } from './config.ts';
import type { HelperLog } from './log.ts';

/** The helper cannot start: one line, exit code 1. */
export class HelperStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HelperStartError';
  }
}

const errCode = (err: unknown): string => (err as NodeJS.ErrnoException).code ?? (err as Error).message;

export async function createHelperClient(config: HelperConfig, log: HelperLog): Promise<HttpLeaseClient> {
  let caBundle: string | undefined;
  if (config.caBundleFile !== '') {
    try {
      caBundle = await readFile(config.caBundleFile, 'utf8');
    } catch (err) {
      throw new HelperStartError(
        `load TLS config: read CA bundle ${JSON.stringify(config.caBundleFile)}: ${errCode(err)}`,
      );
    }
    if (!caBundle.includes('-----BEGIN CERTIFICATE-----'))
      throw new HelperStartError('load TLS config: CA bundle contained no valid PEM certificates');
  }
  if (config.apiKeyFile !== '') {
    let token: string;
    try {
      token = await readFile(config.apiKeyFile, 'utf8');
    } catch (err) {
      throw new HelperStartError(`load api key file: ${config.apiKeyFile}: ${errCode(err)}`);
    }
    if (token.trim() === '') throw new HelperStartError('load api key file: token source: file is empty');
  }
  if (config.insecureSkipTlsVerify)
    log.warn(
      'TLS verification of the berth API server is disabled (insecure-skip-tls-verify): for development only',
      {
        url: config.apiServer,
      },
    );
  try {
    return new HttpLeaseClient({
      baseUrl: config.apiServer,
      apiKey: config.apiKey,
      apiKeyFile: config.apiKeyFile,
      caBundle,
      serverName: config.serverName,
      insecureSkipTlsVerify: config.insecureSkipTlsVerify,
    });
  } catch (err) {
    throw new HelperStartError((err as Error).message);
  }
}
