// `npm run controlplane:build`: builds the real Kubernetes control plane the tests and `npm start` run on
// (kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok) from the Go modules pinned in
// hack/controlplane/{kubernetes,etcd,kwok}/go.mod into a cache outside the checkout, keyed by those pins.
// A second run finds the cache and returns at once; two runs at the same time share one build (a lock).
// See docs/controlplane.md for the layout, the versions and what a cold and a warm build cost.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
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
  type Log,
  labelledLog,
  modulesDigest,
  pinnedVersion,
  runBuildCommand,
  writeManifest,
} from '../gobuild.ts';

export type { BuildError };

const HERE = import.meta.dirname;

/** Bumped when the build itself changes (flags, outputs), so that an older cache is not reused. */
const BUILD_FORMAT = 1;

export const COMPONENTS = [
  'etcd',
  'kube-apiserver',
  'kube-controller-manager',
  'kube-scheduler',
  'kwok',
] as const;
export type Component = (typeof COMPONENTS)[number];

/** Absolute paths of the built binaries and of the KWOK stage configuration. */
export interface ControlPlaneBinaries {
  dir: string;
  versions: Versions;
  bin: Record<Component, string>;
  /** KWOK's own "fast" node and pod stages, copied from the pinned module. */
  kwokStages: string;
}

export interface Versions {
  kubernetes: string;
  etcd: string;
  kwok: string;
}

const kubeVersionFlags = (v: string): string[] => {
  const m = /^v(\d+)\.(\d+)\./.exec(v);
  if (!m) throw new BuildError(`unexpected k8s.io/kubernetes version ${v}`);
  // What Kubernetes' hack/lib/version.sh stamps, so `--version` and /version report the real release.
  const pairs: Array<[string, string]> = [
    ['gitVersion', v],
    ['gitMajor', m[1]!],
    ['gitMinor', m[2]!],
    ['gitTreeState', 'clean'],
    ['buildDate', '1970-01-01T00:00:00Z'],
  ];
  return pairs.flatMap(([k, val]) => [
    `-X 'k8s.io/component-base/version.${k}=${val}'`,
    `-X 'k8s.io/client-go/pkg/version.${k}=${val}'`,
  ]);
};

const goModule = (dir: 'kubernetes' | 'etcd' | 'kwok', m: Omit<GoModule, 'dir' | 'label'>): GoModule => ({
  dir: join(HERE, dir),
  label: `hack/controlplane/${dir}`,
  ...m,
});

const MODULES = {
  kubernetes: goModule('kubernetes', {
    module: 'k8s.io/kubernetes',
    packages: ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'].map((binary) => ({
      pkg: `k8s.io/kubernetes/cmd/${binary}`,
      binary,
    })),
    ldflags: kubeVersionFlags,
  }),
  etcd: goModule('etcd', {
    module: 'go.etcd.io/etcd/server/v3',
    packages: [{ pkg: 'go.etcd.io/etcd/server/v3', binary: 'etcd' }],
    // etcd's version is a constant of its api module; only the git SHA comes from its own build script.
    ldflags: () => [],
  }),
  kwok: goModule('kwok', {
    module: 'sigs.k8s.io/kwok',
    packages: [{ pkg: 'sigs.k8s.io/kwok/cmd/kwok', binary: 'kwok' }],
    ldflags: (v) => [`-X 'sigs.k8s.io/kwok/pkg/consts.Version=${v.replace(/^v/, '')}'`],
  }),
} as const;

/** The kwok stages copied into the cache: node initialisation and KWOK's "pod-fast" lifecycle. */
const KWOK_STAGES = [
  'kustomize/stage/node/fast/node-initialize.yaml',
  'kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml',
  'kustomize/stage/pod/fast/pod-ready.yaml',
  'kustomize/stage/pod/fast/pod-complete.yaml',
  'kustomize/stage/pod/fast/pod-delete.yaml',
];

export function pinnedVersions(): Versions {
  return {
    kubernetes: pinnedVersion(MODULES.kubernetes),
    etcd: pinnedVersion(MODULES.etcd),
    kwok: pinnedVersion(MODULES.kwok),
  };
}

/** The cache root: $BERTH_CONTROLPLANE_CACHE, else $XDG_CACHE_HOME/berth-operator/controlplane. */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return cacheDir(env, 'BERTH_CONTROLPLANE_CACHE', 'controlplane');
}

/** The cache entry of these pins: readable versions and a digest of every go.mod and go.sum. */
export function cacheKey(versions: Versions = pinnedVersions()): string {
  const digest = modulesDigest(Object.values(MODULES), BUILD_FORMAT);
  return `k8s-${versions.kubernetes}_etcd-${versions.etcd}_kwok-${versions.kwok}_${digest}`;
}

function binariesIn(dir: string, versions: Versions): ControlPlaneBinaries {
  const bin = Object.fromEntries(COMPONENTS.map((c) => [c, join(dir, 'bin', c)])) as Record<
    Component,
    string
  >;
  return { dir, versions, bin, kwokStages: join(dir, 'kwok-stages.yaml') };
}

/** The cached build of the current pins, or undefined when it has not been built. */
export function cachedBinaries(env: NodeJS.ProcessEnv = process.env): ControlPlaneBinaries | undefined {
  const versions = pinnedVersions();
  const dir = join(cacheRoot(env), cacheKey(versions));
  return hasManifest(dir) ? binariesIn(dir, versions) : undefined;
}

/** The binaries of the current pins, building them first when the cache does not have them. */
export async function ensureBinaries(options: BuildOptions = {}): Promise<ControlPlaneBinaries> {
  const env = options.env ?? process.env;
  const log = labelledLog(options, 'controlplane');
  const versions = pinnedVersions();
  return ensureBuilt({
    root: cacheRoot(env),
    key: cacheKey(versions),
    log,
    found: (dir) => (hasManifest(dir) ? binariesIn(dir, versions) : undefined),
    build: (staging) => build(staging, join(cacheRoot(env), cacheKey(versions)), versions, env, log),
  });
}

async function build(
  staging: string,
  dir: string,
  versions: Versions,
  env: NodeJS.ProcessEnv,
  log: Log,
): Promise<void> {
  const go = goVersion(env, HERE, 'the control plane');
  const start = Date.now();
  mkdirSync(join(staging, 'bin'), { recursive: true });
  log(
    `building Kubernetes ${versions.kubernetes}, etcd ${versions.etcd} and KWOK ${versions.kwok} with ${go} into ${dir} (cold: about 10 minutes on 2 cores, once)`,
  );
  const goEnv = goBuildEnv(env);
  for (const mod of Object.values(MODULES)) await buildModule(mod, join(staging, 'bin'), goEnv, log);
  const kwokDir = goText(['list', '-m', '-f', '{{.Dir}}', MODULES.kwok.module], MODULES.kwok.dir, goEnv);
  if (!kwokDir?.trim()) throw new BuildError(`cannot locate ${MODULES.kwok.module} in the module cache`);
  const stages = KWOK_STAGES.map((f) => readFileSync(join(kwokDir.trim(), f), 'utf8').trim()).join('\n---\n');
  writeFileSync(join(staging, 'kwok-stages.yaml'), `${stages}\n`);
  writeManifest(staging, { versions, go }, start);
  log(`done in ${elapsed(start)}`);
}

if (import.meta.main) {
  await runBuildCommand({
    name: 'controlplane:build',
    summary: 'Builds (once) and caches the local control plane binaries.',
    label: 'controlplane',
    ensure: async () => {
      const bins = await ensureBinaries();
      return { path: bins.dir, line: `control plane binaries: ${bins.dir}` };
    },
  });
}
