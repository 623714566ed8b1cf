// `npm run kueue:build`: builds Kueue's controller-manager (sigs.k8s.io/kueue, pinned in hack/kueue/go.mod)
// for the benchmark's peer (test/bench/kueue-peer.ts) into a cache outside the checkout, keyed by the pin,
// the same way as Helm and the control plane (hack/gobuild.ts): a second run finds the cache, two runs at
// once share one build. The cache entry also keeps the module's own config/ tree (CRDs, webhook
// configuration, RBAC, the manager's Configuration), copied from the module the binary was built from, so
// that the peer installs what Kueue ships. See docs/controlplane.md.

import { cpSync, existsSync, mkdirSync } from 'node:fs';
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
  goText,
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

export interface KueueBinary {
  dir: string;
  version: string;
  /** The controller-manager (Kueue's image runs it as /manager). */
  bin: string;
  /** The module's config/ tree (config/components/crd, webhook, rbac, manager, ...). */
  config: string;
}

/**
 * The version Kueue's Makefile stamps (pkg/version.GitVersion). GitCommit and BuildDate keep the module's
 * fallbacks: the commit is not known from the module proxy, and a date would make the build differ per day.
 */
const kueueVersionFlags = (version: string): string[] => [
  `-X 'sigs.k8s.io/kueue/pkg/version.GitVersion=${version}'`,
];

const MODULE: GoModule = {
  dir: HERE,
  label: 'hack/kueue',
  module: 'sigs.k8s.io/kueue',
  packages: [{ pkg: 'sigs.k8s.io/kueue/cmd/kueue', binary: 'kueue' }],
  ldflags: kueueVersionFlags,
};

/** The cache root: $BERTH_KUEUE_CACHE, else $XDG_CACHE_HOME/berth-operator/kueue. */
export function kueueCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return cacheDir(env, 'BERTH_KUEUE_CACHE', 'kueue');
}

/** The cache entry of the pin: its version and a digest of go.mod and go.sum. */
export function kueueCacheKey(): string {
  return `kueue-${pinnedVersion(MODULE)}_${modulesDigest([MODULE], BUILD_FORMAT)}`;
}

const binaryIn = (dir: string): KueueBinary | undefined =>
  hasManifest(dir)
    ? {
        dir,
        version: pinnedVersion(MODULE),
        bin: join(dir, 'bin', 'kueue'),
        config: join(dir, 'config'),
      }
    : undefined;

/** Kueue of the current pin, built first when the cache does not have it. */
export function ensureKueue(options: BuildOptions = {}): Promise<KueueBinary> {
  const env = options.env ?? process.env;
  const log = labelledLog(options, 'kueue');
  return ensureBuilt({
    root: kueueCacheRoot(env),
    key: kueueCacheKey(),
    log,
    found: binaryIn,
    build: async (staging) => {
      const go = goVersion(env, HERE, 'Kueue');
      const start = Date.now();
      const version = pinnedVersion(MODULE);
      log(`building Kueue ${version} with ${go} (cold: several minutes on 2 cores, once)`);
      mkdirSync(join(staging, 'bin'));
      const buildEnv = goBuildEnv(env);
      await buildModule(MODULE, join(staging, 'bin'), buildEnv, log);
      // The module's directory in GOMODCACHE (downloaded and verified against go.sum by the build).
      const moduleDir = goText(['list', '-m', '-f', '{{.Dir}}', MODULE.module], HERE, buildEnv)?.trim();
      if (!moduleDir || !existsSync(join(moduleDir, 'config', 'components')))
        throw new BuildError(
          `${MODULE.module} ${version} has no config/components in the module cache (${moduleDir ?? 'go list failed'})`,
        );
      cpSync(join(moduleDir, 'config'), join(staging, 'config'), { recursive: true });
      writeManifest(staging, { version, go, module: `${MODULE.module}@${version}`, moduleDir }, start);
      log(`done in ${elapsed(start)}`);
    },
  });
}

if (import.meta.main) {
  await runBuildCommand({
    name: 'kueue:build',
    summary: "Builds (once) and caches Kueue's controller-manager and its shipped config.",
    label: 'kueue',
    ensure: async () => {
      const kueue = await ensureKueue();
      return { path: kueue.bin, line: `kueue ${kueue.version}: ${kueue.bin} (config: ${kueue.config})` };
    },
  });
}
