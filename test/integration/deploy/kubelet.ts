// What the kubelet gives a release's container that a process of this test cannot get by itself: the files of
// its volume mounts. Each mounted Secret's and ConfigMap's keys (their `items` when the volume lists some) are
// read from the cluster as the admin and written under a directory of the test's, with the volume's
// defaultMode; an emptyDir is an empty directory. The paths the container's args and environment name are
// then mapped to those copies (localPath), so the process reads what a Pod of the release would read.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { V1Container, V1KeyToPath, V1PodSpec } from '@kubernetes/client-node';
import type { TestCluster } from '../../helpers/cluster.ts';

/** A container's mount paths, each to the local directory holding what the kubelet would mount there. */
export type Mounts = ReadonlyMap<string, string>;

/** The kubelet's default file mode of Secret and ConfigMap volumes. */
const DEFAULT_MODE = 0o644;

async function writeKeys(
  local: string,
  data: Record<string, string>,
  items: V1KeyToPath[] | undefined,
  mode: number,
): Promise<void> {
  const files: V1KeyToPath[] = items ?? Object.keys(data).map((key) => ({ key, path: key }));
  for (const item of files) {
    const value = data[item.key];
    if (value === undefined) throw new Error(`the volume's source has no key ${item.key}`);
    await writeFile(join(local, item.path), value, { mode: item.mode ?? mode });
  }
}

/**
 * Writes what the kubelet would mount into `container` of `pod` (a Pod of `namespace`) under `dir`: one
 * directory per mount. Secret and ConfigMap volumes must exist (none of the charts' mounts is optional);
 * any other kind of volume but emptyDir is refused, so a chart change is noticed here.
 */
export async function writeVolumeMounts(
  t: TestCluster,
  namespace: string,
  pod: V1PodSpec,
  container: V1Container,
  dir: string,
): Promise<Mounts> {
  const mounts = new Map<string, string>();
  for (const mount of container.volumeMounts ?? []) {
    const volume = pod.volumes?.find((v) => v.name === mount.name);
    if (volume === undefined) throw new Error(`mount ${mount.name} has no volume`);
    if (mount.subPath !== undefined) throw new Error(`mount ${mount.name}: subPath is not supported`);
    const local = join(dir, mount.name);
    await mkdir(local, { recursive: true });
    mounts.set(mount.mountPath, local);
    if (volume.secret !== undefined) {
      const secret = await t.core.readNamespacedSecret({ namespace, name: volume.secret.secretName ?? '' });
      const data = Object.fromEntries(
        Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
      );
      await writeKeys(local, data, volume.secret.items, volume.secret.defaultMode ?? DEFAULT_MODE);
    } else if (volume.configMap !== undefined) {
      const map = await t.core.readNamespacedConfigMap({ namespace, name: volume.configMap.name ?? '' });
      await writeKeys(
        local,
        map.data ?? {},
        volume.configMap.items,
        volume.configMap.defaultMode ?? DEFAULT_MODE,
      );
    } else if (volume.emptyDir === undefined) {
      throw new Error(`volume ${volume.name}: only secret, configMap and emptyDir volumes are supported`);
    }
  }
  return mounts;
}

/** `path` with the longest mount path it is (or is under) replaced by that mount's local directory. */
export function localPath(path: string, mounts: Mounts): string {
  let best: [string, string] | undefined;
  for (const [mountPath, local] of mounts)
    if (
      (path === mountPath || path.startsWith(`${mountPath}/`)) &&
      mountPath.length > (best?.[0].length ?? -1)
    )
      best = [mountPath, local];
  return best === undefined ? path : best[1] + path.slice(best[0].length);
}

/** A `--flag=<path>` argument with its value mapped by localPath (any other argument as it is). */
export function localArg(arg: string, mounts: Mounts): string {
  const eq = arg.indexOf('=');
  return arg.startsWith('--') && eq > 0 ? arg.slice(0, eq + 1) + localPath(arg.slice(eq + 1), mounts) : arg;
}
