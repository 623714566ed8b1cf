// Helm as a real client in the tests: the binary built from its Go module (hack/helm/build.ts, cached),
// run with its cache, configuration and data in a directory of its own, so the user's Helm setup neither
// leaks in nor changes.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureHelm } from '../../hack/helm/build.ts';
import { type ManifestObject, parseManifests } from '../../scripts/install-manifest.ts';

export const CHART = new URL('../../deploy/helm/berth-operator', import.meta.url).pathname;
/** The central lease API server's chart (`berth-operator central`). */
export const APISERVER_CHART = new URL('../../deploy/helm/berth-apiserver', import.meta.url).pathname;

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RenderOptions {
  /** Default: the operator's chart (CHART). */
  chart?: string;
  release?: string;
  namespace?: string;
  /** Values files (paths) or objects (written to files), in `-f` order. */
  values?: readonly (string | object)[];
}

export class Helm {
  readonly bin: string;
  readonly #dir: string;

  private constructor(bin: string, dir: string) {
    this.bin = bin;
    this.#dir = dir;
  }

  static async start(): Promise<Helm> {
    const { bin } = await ensureHelm();
    return new Helm(bin, await mkdtemp(join(tmpdir(), 'berth-helm-')));
  }

  run(args: readonly string[], opts: { kubeconfig?: string } = {}): Promise<HelmResult> {
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: this.#dir,
      HELM_CACHE_HOME: join(this.#dir, 'cache'),
      HELM_CONFIG_HOME: join(this.#dir, 'config'),
      HELM_DATA_HOME: join(this.#dir, 'data'),
      ...(opts.kubeconfig === undefined ? {} : { KUBECONFIG: opts.kubeconfig }),
    };
    return new Promise((resolve) => {
      execFile(
        this.bin,
        [...args],
        { env, timeout: 120_000, maxBuffer: 64 * 1024 * 1024 },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
    });
  }

  /** `helm <args>`; throws with Helm's own message when it fails. */
  async ok(args: readonly string[], opts: { kubeconfig?: string } = {}): Promise<string> {
    const r = await this.run(args, opts);
    if (r.code !== 0) throw new Error(`helm ${args.join(' ')}: ${r.stderr.trim()}`);
    return r.stdout;
  }

  /** The `-f` arguments for `values`, objects written to files of this client's directory. */
  async valuesArgs(values: readonly (string | object)[] = []): Promise<string[]> {
    const args: string[] = [];
    for (const v of values) {
      let path = v;
      if (typeof path !== 'string') {
        path = join(this.#dir, `values-${randomBytes(4).toString('hex')}.json`);
        await writeFile(path, JSON.stringify(v));
      }
      args.push('-f', path);
    }
    return args;
  }

  /** The objects of an installed release (`helm get manifest`), as Helm last applied them. */
  async manifest(
    release: string,
    namespace: string,
    opts: { kubeconfig?: string } = {},
  ): Promise<ManifestObject[]> {
    return parseManifests(await this.ok(['get', 'manifest', release, '-n', namespace], opts));
  }

  /** `helm template` of the chart: the rendered text, or Helm's error. */
  async template(o: RenderOptions = {}): Promise<HelmResult> {
    return this.run([
      'template',
      o.release ?? (o.chart === APISERVER_CHART ? 'berth-apiserver' : 'berth-operator'),
      o.chart ?? CHART,
      '--namespace',
      o.namespace ?? 'berth-system',
      ...(await this.valuesArgs(o.values)),
    ]);
  }

  /** `helm template` of the chart as objects; throws with Helm's error. */
  async render(o: RenderOptions = {}): Promise<ManifestObject[]> {
    const r = await this.template(o);
    if (r.code !== 0) throw new Error(`helm template: ${r.stderr.trim()}`);
    return parseManifests(r.stdout);
  }

  async stop(): Promise<void> {
    await rm(this.#dir, { recursive: true, force: true });
  }
}
