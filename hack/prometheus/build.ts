// `npm run prometheus:build`: builds Prometheus and promtool (github.com/prometheus/prometheus, pinned in
// hack/prometheus/go.mod) into a cache outside the checkout, keyed by the pin, the same way as the control
// plane and Helm (hack/gobuild.ts): a second run finds the cache, two runs at once share one build. promtool
// checks and unit-tests the rule files (deploy/prometheus/); the e2e test runs a real prometheus that scrapes
// the operator and the central server. See docs/controlplane.md.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  BuildError,
  type BuildOptions,
  buildModule,
  cacheDir,
  elapsed,
  ensureBuilt,
  type GoModule,
  goBuildEnv,
  goVersion,
  hasManifest,
  labelledLog,
  modulesDigest,
  pinnedVersion,
  runBuildCommand,
  writeManifest,
} from '../gobuild.ts';

const HERE = import.meta.dirname;

/** Bumped when the build itself changes (flags, tags, outputs), so that an older cache is not reused. */
const BUILD_FORMAT = 1;

export interface PrometheusBinaries {
  /** The cache entry. */
  dir: string;
  /** The pinned module version (v0.316.0); the release it is, `prometheus --version` prints (3.16.0). */
  version: string;
  promtool: string;
  prometheus: string;
}

/**
 * The release a module version is: since Prometheus 3 the module is tagged v0.<major><minor 2 digits>.<patch>
 * (v0.316.0 is 3.16.0, as the module's VERSION file says).
 */
export function prometheusRelease(moduleVersion: string): string {
  const m = /^v0\.(\d)(\d\d)\.(\d+)$/.exec(moduleVersion);
  if (!m) throw new BuildError(`hack/prometheus: cannot tell the release of module version ${moduleVersion}`);
  return `${m[1]}.${Number(m[2])}.${m[3]}`;
}

/**
 * What `make build` (promu, .promu.yml) stamps into github.com/prometheus/common/version: the release and
 * who built it. The git revision and branch are not known from the module proxy, and a build date would make
 * the binaries differ run to run, so they are left out.
 */
const prometheusVersionFlags = (version: string): string[] => [
  `-X 'github.com/prometheus/common/version.Version=${prometheusRelease(version)}'`,
  `-X 'github.com/prometheus/common/version.BuildUser=berth-operator/hack/prometheus'`,
];

/**
 * Build tags. promu builds with `netgo builtinassets`; `builtinassets` embeds the web UI from files that
 * only the UI's npm build generates (web/ui/embed.go, web/ui/static), which the module does not ship, so it
 * is left out: the UI then answers that it was not built in, and the API, scraping and rules all work.
 * `remove_all_sd` drops the cloud service discoveries (AWS, Azure, GCE, Kubernetes, ...; file and HTTP
 * discovery stay): the tests scrape static targets, and those SDKs are most of the build time.
 */
const TAGS = ['netgo', 'remove_all_sd'] as const;

const MODULE: GoModule = {
  dir: HERE,
  label: 'hack/prometheus',
  module: 'github.com/prometheus/prometheus',
  packages: [
    { pkg: 'github.com/prometheus/prometheus/cmd/prometheus', binary: 'prometheus' },
    { pkg: 'github.com/prometheus/prometheus/cmd/promtool', binary: 'promtool' },
  ],
  ldflags: prometheusVersionFlags,
  tags: TAGS,
};

/** The cache root: $BERTH_PROMETHEUS_CACHE, else $XDG_CACHE_HOME/berth-operator/prometheus. */
export function prometheusCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return cacheDir(env, 'BERTH_PROMETHEUS_CACHE', 'prometheus');
}

/** The cache entry of the pin: its version and a digest of go.mod and go.sum. */
export function prometheusCacheKey(): string {
  return `prometheus-${pinnedVersion(MODULE)}_${modulesDigest([MODULE], BUILD_FORMAT)}`;
}

const binariesIn = (dir: string): PrometheusBinaries | undefined =>
  hasManifest(dir)
    ? {
        dir,
        version: pinnedVersion(MODULE),
        promtool: join(dir, 'bin', 'promtool'),
        prometheus: join(dir, 'bin', 'prometheus'),
      }
    : undefined;

/** prometheus and promtool of the current pin, built first when the cache does not have them. */
export function ensurePrometheus(options: BuildOptions = {}): Promise<PrometheusBinaries> {
  const env = options.env ?? process.env;
  const log = labelledLog(options, 'prometheus');
  return ensureBuilt({
    root: prometheusCacheRoot(env),
    key: prometheusCacheKey(),
    log,
    found: binariesIn,
    build: async (staging) => {
      const go = goVersion(env, HERE, 'Prometheus');
      const start = Date.now();
      const version = pinnedVersion(MODULE);
      log(
        `building Prometheus ${version} (${prometheusRelease(version)}) and promtool with ${go} (cold: minutes on 2 cores, once)`,
      );
      mkdirSync(join(staging, 'bin'));
      await buildModule(MODULE, join(staging, 'bin'), goBuildEnv(env), log);
      writeManifest(staging, { version, release: prometheusRelease(version), tags: [...TAGS], go }, start);
      log(`done in ${elapsed(start)}`);
    },
  });
}

if (import.meta.main) {
  await runBuildCommand({
    name: 'prometheus:build',
    summary: 'Builds (once) and caches prometheus and promtool.',
    label: 'prometheus',
    ensure: async () => {
      const p = await ensurePrometheus();
      return {
        path: p.dir,
        line: `prometheus ${p.version} (${prometheusRelease(p.version)}): ${p.prometheus}, ${p.promtool}`,
      };
    },
  });
}
