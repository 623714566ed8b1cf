// `npm run helm:build`: builds Helm (helm.sh/helm/v4, pinned in hack/helm/go.mod) for the chart's tests
// into a cache outside the checkout, keyed by the pin, the same way as the control plane (hack/gobuild.ts):
// a second run finds the cache, two runs at once share one build. See docs/controlplane.md.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
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

/** Bumped when the build itself changes (flags, outputs), so that an older cache is not reused. */
const BUILD_FORMAT = 1;

export interface HelmBinary {
  dir: string;
  version: string;
  bin: string;
}

/**
 * What Helm's Makefile stamps for a release (no "unreleased" metadata; the git commit is not known from
 * the module proxy). The Kubernetes version it reports, and `helm template` assumes, it reads from its
 * k8s.io/client-go in the binary's build info.
 */
const helmVersionFlags = (version: string): string[] => [
  `-X 'helm.sh/helm/v4/internal/version.version=${version}'`,
  `-X 'helm.sh/helm/v4/internal/version.metadata='`,
  `-X 'helm.sh/helm/v4/internal/version.gitTreeState=clean'`,
];

const MODULE: GoModule = {
  dir: HERE,
  label: 'hack/helm',
  module: 'helm.sh/helm/v4',
  packages: [{ pkg: 'helm.sh/helm/v4/cmd/helm', binary: 'helm' }],
  ldflags: helmVersionFlags,
};

/** The cache root: $BERTH_HELM_CACHE, else $XDG_CACHE_HOME/berth-operator/helm. */
export function helmCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return cacheDir(env, 'BERTH_HELM_CACHE', 'helm');
}

/** The cache entry of the pin: its version and a digest of go.mod and go.sum. */
export function helmCacheKey(): string {
  return `helm-${pinnedVersion(MODULE)}_${modulesDigest([MODULE], BUILD_FORMAT)}`;
}

const binaryIn = (dir: string): HelmBinary | undefined =>
  hasManifest(dir) ? { dir, version: pinnedVersion(MODULE), bin: join(dir, 'bin', 'helm') } : undefined;

/** Helm of the current pin, built first when the cache does not have it. */
export function ensureHelm(options: BuildOptions = {}): Promise<HelmBinary> {
  const env = options.env ?? process.env;
  const log = labelledLog(options, 'helm');
  return ensureBuilt({
    root: helmCacheRoot(env),
    key: helmCacheKey(),
    log,
    found: binaryIn,
    build: async (staging) => {
      const go = goVersion(env, HERE, 'Helm');
      const start = Date.now();
      log(`building Helm ${pinnedVersion(MODULE)} with ${go} (cold: a few minutes on 2 cores, once)`);
      mkdirSync(join(staging, 'bin'));
      await buildModule(MODULE, join(staging, 'bin'), goBuildEnv(env), log);
      writeManifest(staging, { version: pinnedVersion(MODULE), go }, start);
      log(`done in ${elapsed(start)}`);
    },
  });
}

if (import.meta.main) {
  await runBuildCommand({
    name: 'helm:build',
    summary: 'Builds (once) and caches Helm.',
    label: 'helm',
    ensure: async () => {
      const helm = await ensureHelm();
      return { path: helm.bin, line: `helm ${helm.version}: ${helm.bin}` };
    },
  });
}
