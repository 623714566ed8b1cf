// The injection webhooks' pure decisions, with the cases of the Go webhook's tests (edge cases, the
// state-mount bypasses, Pod UID, init-container enforcement, the signal-mode probe fallback).
import type {
  V1Container,
  V1EnvVar,
  V1HTTPGetAction,
  V1Pod,
  V1PodSpec,
  V1Probe,
} from '@kubernetes/client-node';
import jsonpatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { parseBerthConfig } from '../../../src/berth/config.ts';
import { parseFlags } from '../../../src/cli.ts';
import {
  ANNOTATIONS,
  AUTH_CA_VOLUME,
  AUTH_TOKEN_VOLUME,
  ENV,
  INJECT_LABEL,
  STATE_VOLUME,
} from '../../../src/injection/contract.ts';
import { parseInjectionConfig } from '../../../src/injection/flags.ts';
import { decideInjection } from '../../../src/injection/mutate.ts';
import { berthLivenessProbe } from '../../../src/injection/probe.ts';
import { RESTART_POD_EXIT_CODE } from '../../../src/injection/restart-pod.ts';
import { injectorSettings } from '../../../src/injection/settings.ts';
import { decideValidation } from '../../../src/injection/validate.ts';
import { runCommand } from '../../../src/run.ts';
import type { AdmissionRequest, Decision } from '../../../webhooks/review.ts';

const flags = (...argv: string[]) => parseFlags(runCommand, argv, {});
const config = parseInjectionConfig(
  flags('--enable-injection-webhook', '--injection-helper-image=ghcr.io/skaphos/berth-operator:test'),
);
const settings = injectorSettings(
  config,
  {
    apiServer: 'https://berth.example:8443',
    clusterId: 'east-1',
    serverName: '',
    insecureSkipTlsVerify: false,
  },
  'berth-operator',
);

function optInPod(annotations: Record<string, string>, spec: Partial<V1PodSpec> = {}): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'database-0',
      labels: { [INJECT_LABEL]: 'acquire' },
      annotations,
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'database', uid: 'u', controller: true },
      ],
    },
    spec: { containers: [{ name: 'app', image: 'app:1' }], ...spec },
  };
}

function request(object: V1Pod, extra: Partial<AdmissionRequest> = {}): AdmissionRequest {
  return {
    uid: 'uid-1',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    resource: { group: '', version: 'v1', resource: 'pods' },
    namespace: 'prod',
    operation: 'CREATE',
    userInfo: { username: 'someone' },
    object: object as Record<string, unknown>,
    ...extra,
  };
}

const ephemeral = (object: V1Pod): AdmissionRequest =>
  request(object, { operation: 'UPDATE', subResource: 'ephemeralcontainers' });

/** The Pod as the API server would store it after the mutating webhook's patch. */
function injected(pod: V1Pod, s = settings): V1Pod {
  const decision = decideInjection(request(pod), s);
  if (!decision.allowed) throw new Error(`denied: ${decision.message}`);
  return jsonpatch.applyPatch(
    structuredClone(pod),
    (decision.patch ?? []) as jsonpatch.Operation[],
    true,
    false,
  ).newDocument;
}

const denial = (decision: Decision): string => {
  if (decision.allowed) throw new Error('allowed');
  return decision.message;
};

const lease = { [ANNOTATIONS.leaseName]: 'singleton' };

const spec = (pod: V1Pod): V1PodSpec => pod.spec as V1PodSpec;
const inits = (pod: V1Pod): V1Container[] => spec(pod).initContainers ?? [];
const main = (pod: V1Pod): V1Container => spec(pod).containers[0] as V1Container;
const names = (cs: V1Container[]): string[] => cs.map((c) => c.name);

describe('resolution of the annotations', () => {
  it.each([
    [{}, `${ANNOTATIONS.leaseName} is required when ${INJECT_LABEL}=acquire`],
    [{ ...lease, [ANNOTATIONS.mode]: 'forever' }, `invalid ${ANNOTATIONS.mode} "forever"`],
    [{ ...lease, [ANNOTATIONS.enforce]: 'kill' }, `invalid ${ANNOTATIONS.enforce} "kill"`],
    [{ ...lease, [ANNOTATIONS.enforce]: 'signal' }, `${ANNOTATIONS.signalTarget} is required`],
    [
      { ...lease, [ANNOTATIONS.ttlSeconds]: '0' },
      `${ANNOTATIONS.ttlSeconds} must be between 1 and 2147483647 seconds`,
    ],
    [{ ...lease, [ANNOTATIONS.ttlSeconds]: '2147483648' }, `${ANNOTATIONS.ttlSeconds} must be between`],
    [
      { ...lease, [ANNOTATIONS.ttlSeconds]: '3.5' },
      `invalid ${ANNOTATIONS.ttlSeconds} "3.5": must be an integer`,
    ],
    [
      { ...lease, [ANNOTATIONS.ttlSeconds]: '1e3' },
      `invalid ${ANNOTATIONS.ttlSeconds} "1e3": must be an integer`,
    ],
    [
      { ...lease, [ANNOTATIONS.heartbeatSeconds]: '-1' },
      `${ANNOTATIONS.heartbeatSeconds} must not be negative`,
    ],
    [
      { ...lease, [ANNOTATIONS.ttlSeconds]: '10', [ANNOTATIONS.heartbeatSeconds]: '10' },
      `${ANNOTATIONS.heartbeatSeconds} (10) must be less than ${ANNOTATIONS.ttlSeconds} (10)`,
    ],
    [
      // The helper would refuse it (a crash loop): 8 s + the 4 s lead leave nothing of a 12 s TTL.
      { ...lease, [ANNOTATIONS.ttlSeconds]: '12', [ANNOTATIONS.heartbeatSeconds]: '8' },
      `${ANNOTATIONS.heartbeatSeconds} (8s) plus the enforcement lead (4s: one probe period, the probe's kill grace and 1s to kill) must be less than ${ANNOTATIONS.ttlSeconds} (12s)`,
    ],
    [
      {
        ...lease,
        [ANNOTATIONS.enforce]: 'signal',
        [ANNOTATIONS.signalTarget]: 'app',
        [ANNOTATIONS.ttlSeconds]: '30',
        [ANNOTATIONS.enforceGraceSeconds]: '25',
      },
      `${ANNOTATIONS.heartbeatSeconds} (10s) plus the enforcement lead (26s: the enforce grace and 1s to kill) must be less than ${ANNOTATIONS.ttlSeconds} (30s)`,
    ],
    [
      { ...lease, [ANNOTATIONS.enforceGraceSeconds]: '-5' },
      `${ANNOTATIONS.enforceGraceSeconds} must not be negative`,
    ],
    [
      { ...lease, [ANNOTATIONS.releaseOnShutdown]: 'yes' },
      `invalid ${ANNOTATIONS.releaseOnShutdown} "yes" (want true or false)`,
    ],
  ])('denies %j naming the annotation', (annotations, message) => {
    const decision = decideInjection(request(optInPod(annotations)), settings);
    expect(denial(decision)).toContain(message);
    expect(decision.allowed ? '' : decision.reason).toBe('invalid_annotation');
  });

  it('refuses signal mode on a Pod that opted out of the shared process namespace', () => {
    const pod = optInPod(
      { ...lease, [ANNOTATIONS.enforce]: 'signal', [ANNOTATIONS.signalTarget]: 'app' },
      { shareProcessNamespace: false },
    );
    expect(denial(decideInjection(request(pod), settings))).toBe(
      `${ANNOTATIONS.enforce}=signal requires shareProcessNamespace, but the pod sets it to false`,
    );
  });
});

describe('what is injected', () => {
  it('runtime-singleton: state volume, berth-acquire then berth-sidecar, the HTTP probe, the env', () => {
    const pod = injected(optInPod(lease));
    expect(spec(pod).volumes).toEqual([{ name: STATE_VOLUME, emptyDir: {} }]);
    const [hold, sidecar] = inits(pod) as [V1Container, V1Container];
    expect(hold).toMatchObject({
      name: 'berth-acquire',
      image: 'ghcr.io/skaphos/berth-operator:test',
      imagePullPolicy: 'IfNotPresent',
      args: ['helper', 'acquire'],
      volumeMounts: [{ name: STATE_VOLUME, mountPath: '/berth' }],
    });
    expect(hold.restartPolicy).toBeUndefined();
    expect(sidecar).toMatchObject({
      name: 'berth-sidecar',
      args: ['helper', 'renew'],
      restartPolicy: 'Always',
      ports: [{ containerPort: 9394, protocol: 'TCP' }],
      // The main containers start once the sidecar has confirmed the lease; it gives up after one TTL.
      startupProbe: {
        httpGet: { path: '/healthy', port: 9394, scheme: 'HTTP' },
        periodSeconds: 1,
        timeoutSeconds: 1,
        successThreshold: 1,
        failureThreshold: 30,
      },
    });
    expect(main(pod).livenessProbe).toEqual({
      httpGet: { path: '/healthy', port: 9394, scheme: 'HTTP' },
      periodSeconds: 2,
      timeoutSeconds: 1,
      successThreshold: 1,
      failureThreshold: 1,
      // A failed probe kills within a second, not the Pod's 30 s grace: the sidecar's lead counts on it.
      terminationGracePeriodSeconds: 1,
    });
    // The probe is HTTP: the main container needs no state mount.
    expect(main(pod).volumeMounts).toBeUndefined();
    const env = Object.fromEntries(
      (hold.env ?? []).map((e: V1EnvVar) => [e.name, e.value ?? e.valueFrom?.fieldRef?.fieldPath]),
    );
    expect(env).toEqual({
      [ENV.leaseName]: 'singleton',
      [ENV.leaseNamespace]: 'prod',
      [ENV.mode]: 'runtime-singleton',
      [ENV.enforce]: 'probe',
      [ENV.ttlSeconds]: '30',
      [ENV.stateDir]: '/berth',
      [ENV.podNamespace]: 'metadata.namespace',
      [ENV.podName]: 'metadata.name',
      [ENV.podUid]: 'metadata.uid',
      [ENV.workloadKind]: 'StatefulSet',
      [ENV.workloadName]: 'database',
      [ENV.clusterId]: 'east-1',
      [ENV.apiServer]: 'https://berth.example:8443',
      [ENV.probePort]: '9394',
    });
    expect(sidecar.env).toEqual(hold.env);
    expect(pod.metadata?.annotations?.[ANNOTATIONS.injected]).toBe('true');
  });

  it('gives both helpers the Pod UID from the downward API (runtime holders differ per incarnation)', () => {
    const pod = injected(optInPod(lease));
    for (const c of inits(pod))
      expect(c.env).toContainEqual({
        name: 'POD_UID',
        valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } },
      });
  });

  it('startup-gate: only the hold, ahead of the author init containers, and no probe', () => {
    const pod = injected(
      optInPod(
        { ...lease, [ANNOTATIONS.mode]: 'startup-gate' },
        { initContainers: [{ name: 'migrate', image: 'm:1' }] },
      ),
    );
    expect(names(inits(pod))).toEqual(['berth-acquire', 'migrate']);
    expect(main(pod).livenessProbe).toBeUndefined();
  });

  it('signal mode shares the process namespace and keeps the probe as the fallback', () => {
    const pod = injected(
      optInPod({ ...lease, [ANNOTATIONS.enforce]: 'signal', [ANNOTATIONS.signalTarget]: 'app' }),
    );
    expect(spec(pod).shareProcessNamespace).toBe(true);
    expect(main(pod).livenessProbe).toEqual(berthLivenessProbe(9394, 0));
    expect(inits(pod)[0]?.env).toContainEqual({ name: ENV.signalTarget, value: 'app' });
  });

  it('mounts the token Secret and CA ConfigMap into the helpers only', () => {
    const withAuth = injectorSettings(
      parseInjectionConfig(
        flags(
          '--enable-injection-webhook',
          '--injection-helper-image=img',
          '--injection-helper-api-key-file=/var/run/berth/token',
          '--injection-helper-api-key-secret=berth-token',
          '--injection-helper-ca-bundle-file=/var/run/berth-ca/ca.crt',
          '--injection-helper-ca-bundle-configmap=berth-ca',
        ),
      ),
      { apiServer: 'https://b', clusterId: 'c', serverName: '', insecureSkipTlsVerify: false },
      'berth-operator',
    );
    const pod = injected(optInPod(lease), withAuth);
    expect(spec(pod).volumes).toContainEqual({
      name: 'berth-auth-token',
      secret: { secretName: 'berth-token', items: [{ key: 'token', path: 'token' }] },
    });
    expect(inits(pod)[0]?.volumeMounts).toContainEqual({
      name: 'berth-auth-ca',
      mountPath: '/var/run/berth-ca',
      readOnly: true,
    });
    expect(inits(pod)[0]?.env).toContainEqual({
      name: ENV.apiKeyFile,
      value: '/var/run/berth/token',
    });
  });

  it('hands --berth-insecure-skip-tls-verify to both helpers, and nothing at all without it (Go: verify)', () => {
    const operator = (...extra: string[]) => {
      const argv = [
        '--enable-injection-webhook',
        '--injection-helper-image=img',
        '--berth-api-server=https://berth.example:8443',
        '--cluster-id=east-1',
        ...extra,
      ];
      return injectorSettings(parseInjectionConfig(flags(...argv)), parseBerthConfig(flags(...argv)), 'ops');
    };
    const insecure = injected(optInPod(lease), operator('--berth-insecure-skip-tls-verify'));
    expect(names(inits(insecure))).toEqual(['berth-acquire', 'berth-sidecar']);
    for (const c of inits(insecure))
      expect(c.env?.filter((e) => e.name === 'BERTH_INSECURE_SKIP_TLS_VERIFY')).toEqual([
        { name: 'BERTH_INSECURE_SKIP_TLS_VERIFY', value: 'true' },
      ]);
    for (const c of inits(injected(optInPod(lease), operator())))
      expect(c.env?.map((e) => e.name)).not.toContain('BERTH_INSECURE_SKIP_TLS_VERIFY');
  });

  it('never trusts berth.skaphos.io/injected: a Pod claiming it is injected all the same', () => {
    const pod = injected(optInPod({ ...lease, [ANNOTATIONS.injected]: 'true' }));
    expect(names(inits(pod))).toEqual(['berth-acquire', 'berth-sidecar']);
  });

  it('leaves Pods in control-plane namespaces, Pods without the label and Pod UPDATEs alone', () => {
    expect(decideInjection(request(optInPod(lease), { namespace: 'berth-system' }), settings)).toEqual({
      allowed: true,
    });
    expect(decideInjection(request(optInPod(lease), { namespace: 'berth-operator' }), settings)).toEqual({
      allowed: true,
    });
    const unlabelled = optInPod(lease);
    unlabelled.metadata = { ...unlabelled.metadata, labels: {} };
    expect(decideInjection(request(unlabelled), settings)).toEqual({ allowed: true });
    expect(decideInjection(request(optInPod(lease), { operation: 'UPDATE' }), settings)).toEqual({
      allowed: true,
    });
  });

  it('answers a malformed Pod with a 400 denial, not an exception', () => {
    const decision = decideInjection(
      request({
        metadata: { labels: { [INJECT_LABEL]: 'acquire' } },
        spec: { containers: 'x' },
      } as unknown as V1Pod),
      settings,
    );
    expect(decision).toMatchObject({ allowed: false, code: 400, reason: 'malformed_pod' });
    expect(denial(decision)).toContain('spec.containers');
  });
});

describe('preflight', () => {
  it.each([
    [
      'a container named berth-sidecar',
      { containers: [{ name: 'berth-sidecar', image: 'x' }] },
      'pod already has a container named "berth-sidecar"',
    ],
    [
      'a workload init container',
      { initContainers: [{ name: 'setup', image: 'x' }] },
      'workload init container "setup" is unsupported',
    ],
    [
      'a berth-state volume that is not an emptyDir',
      { volumes: [{ name: STATE_VOLUME, hostPath: { path: '/x' } }] },
      'not an emptyDir',
    ],
    [
      'a livenessProbe of its own',
      { containers: [{ name: 'app', livenessProbe: { tcpSocket: { port: 80 } } }] },
      'already defines a livenessProbe',
    ],
    [
      'a startupProbe',
      { containers: [{ name: 'app', startupProbe: { tcpSocket: { port: 80 } } }] },
      'defines a startupProbe',
    ],
    [
      'the probe port',
      { containers: [{ name: 'app', ports: [{ containerPort: 9394 }] }] },
      'declares port 9394',
    ],
    ['hostNetwork', { hostNetwork: true }, 'hostNetwork'],
  ])('denies a runtime Pod with %s', (_what, spec, message) => {
    const decision = decideInjection(request(optInPod(lease, spec)), settings);
    expect(denial(decision)).toContain(message);
    expect(decision.allowed ? '' : decision.reason).toBe('cannot_inject');
  });
});

describe('the reserved auth volumes', () => {
  const withAuth = injectorSettings(
    parseInjectionConfig(
      flags(
        '--enable-injection-webhook',
        '--injection-helper-image=img',
        '--injection-helper-api-key-file=/var/run/berth/token',
        '--injection-helper-api-key-secret=berth-token',
        '--injection-helper-ca-bundle-file=/var/run/berth-ca/ca.crt',
        '--injection-helper-ca-bundle-configmap=berth-ca',
      ),
    ),
    { apiServer: 'https://b', clusterId: 'c', serverName: '', insecureSkipTlsVerify: false },
    'berth-operator',
  );

  // Go refuses rather than reuses: an author's volume under the name would hand the helpers another
  // token or CA bundle than the operator's.
  it.each([
    [AUTH_TOKEN_VOLUME, 'reserved for the injected auth token'],
    [AUTH_CA_VOLUME, 'reserved for the injected CA bundle'],
  ])('denies a Pod that already has a volume named %s when its source is configured', (name, message) => {
    const pod = optInPod(lease, {
      volumes: [{ name, secret: { secretName: 'someone-elses' } }],
    });
    const decision = decideInjection(request(pod), withAuth);
    expect(decision).toMatchObject({ allowed: false, reason: 'cannot_inject' });
    expect(denial(decision)).toBe(
      `cannot inject: pod already has a volume named ${JSON.stringify(name)} (${message})`,
    );
  });

  it('leaves such a volume alone when the operator injects no auth volumes (nothing to collide with)', () => {
    const own = { name: AUTH_TOKEN_VOLUME, emptyDir: {} };
    const pod = injected(optInPod(lease, { volumes: [own] }));
    expect(spec(pod).volumes).toEqual([own, { name: STATE_VOLUME, emptyDir: {} }]);
    for (const c of inits(pod)) expect(c.volumeMounts?.map((m) => m.name)).toEqual([STATE_VOLUME]);
  });
});

describe('the reserved state volume', () => {
  it("reuses an emptyDir berth-state the Pod already has: one volume, the author's, mounted by the helpers", () => {
    const own = { name: STATE_VOLUME, emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } };
    const cache = { name: 'cache', emptyDir: {} };
    const pod = injected(optInPod(lease, { volumes: [cache, own] }));
    expect(spec(pod).volumes).toEqual([cache, own]);
    for (const c of inits(pod)) expect(c.volumeMounts).toEqual([{ name: STATE_VOLUME, mountPath: '/berth' }]);
    expect(decideValidation(request(pod), settings)).toEqual({ allowed: true });
  });

  it('repairs a writable mount at the state dir of an author init container (startup-gate)', () => {
    const pod = injected(
      optInPod(
        { ...lease, [ANNOTATIONS.mode]: 'startup-gate' },
        { initContainers: [{ name: 'setup', volumeMounts: [{ name: STATE_VOLUME, mountPath: '/berth' }] }] },
      ),
    );
    expect(inits(pod)[1]?.volumeMounts).toEqual([
      { name: STATE_VOLUME, mountPath: '/berth', readOnly: true },
    ]);
  });

  it('repairs a writable state-dir mount in signal mode too', () => {
    const pod = injected(
      optInPod(
        { ...lease, [ANNOTATIONS.enforce]: 'signal', [ANNOTATIONS.signalTarget]: 'app' },
        { containers: [{ name: 'app', volumeMounts: [{ name: STATE_VOLUME, mountPath: '/berth' }] }] },
      ),
    );
    expect(main(pod).volumeMounts?.[0]?.readOnly).toBe(true);
  });

  it('denies a writable mount elsewhere, whatever the container is called', () => {
    const pod = optInPod(
      { ...lease, [ANNOTATIONS.mode]: 'startup-gate' },
      {
        containers: [
          { name: 'app' },
          { name: 'berth-sidecar', volumeMounts: [{ name: STATE_VOLUME, mountPath: '/rw' }] },
        ],
      },
    );
    const decision = decideInjection(request(pod), settings);
    expect(decision).toMatchObject({ allowed: false, reason: 'writable_state_mount' });
    expect(denial(decision)).toContain(
      'container "berth-sidecar" mounts the Berth state volume "berth-state" writably at "/rw"',
    );
  });

  it('admits kubectl debug on an injected Pod; the helpers keep their own writable mounts', () => {
    const pod = injected(optInPod(lease));
    spec(pod).ephemeralContainers = [
      {
        name: 'debugger',
        image: 'busybox',
        volumeMounts: [{ name: STATE_VOLUME, mountPath: '/berth', readOnly: true }],
      },
    ];
    expect(decideInjection(ephemeral(pod), settings)).toEqual({ allowed: true });
    expect(decideValidation(ephemeral(pod), settings)).toEqual({ allowed: true });
  });

  it('refuses an ephemeral container mounting the state volume writably, on both webhooks', () => {
    const pod = injected(optInPod(lease));
    spec(pod).ephemeralContainers = [
      { name: 'debugger', image: 'busybox', volumeMounts: [{ name: STATE_VOLUME, mountPath: '/berth' }] },
    ];
    for (const decision of [
      decideInjection(ephemeral(pod), settings),
      decideValidation(ephemeral(pod), settings),
    ]) {
      expect(decision).toMatchObject({ allowed: false, reason: 'writable_state_mount_ephemeral' });
      expect(denial(decision)).toContain('cannot attach ephemeral container "debugger"');
    }
  });
});

describe('validation of the final Pod', () => {
  it('admits the Pod as injected', () => {
    expect(decideValidation(request(injected(optInPod(lease))), settings)).toEqual({ allowed: true });
  });

  it('admits an injected startup-gate Pod with author init containers', () => {
    const pod = injected(
      optInPod({ ...lease, [ANNOTATIONS.mode]: 'startup-gate' }, { initContainers: [{ name: 'm' }] }),
    );
    expect(decideValidation(request(pod), settings)).toEqual({ allowed: true });
  });

  it.each([
    [
      'an init container appended by a later webhook',
      (p: V1Pod) => inits(p).push({ name: 'istio-init' }),
      'only the injected berth-acquire and berth-sidecar',
    ],
    [
      'the sidecar made a plain init container',
      (p: V1Pod) => delete (inits(p)[1] as V1Container).restartPolicy,
      'only the injected',
    ],
    [
      'a modified probe',
      (p: V1Pod) => ((main(p).livenessProbe ?? {}).failureThreshold = 3),
      'unmodified Berth liveness probe',
    ],
    [
      'a probe on another port',
      (p: V1Pod) => ((main(p).livenessProbe?.httpGet ?? { port: 0 }).port = 8080),
      'unmodified Berth liveness probe',
    ],
    [
      'a startup probe',
      (p: V1Pod) => (main(p).startupProbe = { exec: { command: ['true'] } }),
      'startup probes are unsupported',
    ],
    ['no state volume', (p: V1Pod) => (spec(p).volumes = []), 'Berth state volume is missing'],
    [
      'a state volume that is not an emptyDir',
      (p: V1Pod) => (spec(p).volumes = [{ name: STATE_VOLUME, hostPath: { path: '/' } }]),
      'must remain an emptyDir',
    ],
    ['hostNetwork added later', (p: V1Pod) => (spec(p).hostNetwork = true), 'hostNetwork'],
    [
      'a writable state mount added later',
      (p: V1Pod) => (main(p).volumeMounts = [{ name: STATE_VOLUME, mountPath: '/x' }]),
      'writably',
    ],
  ])('denies %s', (_what, change, message) => {
    const pod = injected(optInPod(lease));
    change(pod);
    expect(denial(decideValidation(request(pod), settings))).toContain(message);
  });

  // Go's freshness-fallback tampering cases: the probe is the fallback of signal mode too, so every
  // change of it, or a main container without it, is refused in both modes.
  describe.each(['probe', 'signal'])('the Berth liveness probe tampered with (enforce=%s)', (enforce) => {
    const annotations = {
      ...lease,
      [ANNOTATIONS.enforce]: enforce,
      [ANNOTATIONS.signalTarget]: 'app',
      [ANNOTATIONS.enforceGraceSeconds]: '3',
    };
    const probe = (p: V1Pod): V1Probe => main(p).livenessProbe as V1Probe;
    const tamperings: Array<[string, (p: V1Pod) => unknown]> = [
      ['the probe removed', (p) => delete main(p).livenessProbe],
      [
        'an exec probe in its place',
        (p) => (main(p).livenessProbe = { exec: { command: ['true'] }, periodSeconds: 2 }),
      ],
      ['an initial delay added to it', (p) => (probe(p).initialDelaySeconds = 10_000)],
      ['a longer period', (p) => (probe(p).periodSeconds = 60)],
      ['a higher failure threshold', (p) => (probe(p).failureThreshold = 5)],
      ['a higher success threshold', (p) => (probe(p).successThreshold = 2)],
      ['a longer timeout', (p) => (probe(p).timeoutSeconds = 30)],
      ['a longer kill grace', (p) => (probe(p).terminationGracePeriodSeconds = 30)],
      [
        "no kill grace of its own (the Pod's 30 s applies)",
        (p) => delete probe(p).terminationGracePeriodSeconds,
      ],
      ['another path', (p) => ((probe(p).httpGet as V1HTTPGetAction).path = '/')],
      [
        'another host (the probe sent elsewhere)',
        (p) => ((probe(p).httpGet as V1HTTPGetAction).host = '10.0.0.9'),
      ],
      ['HTTPS instead of HTTP', (p) => ((probe(p).httpGet as V1HTTPGetAction).scheme = 'HTTPS')],
      [
        'the enforce grace annotation changed after injection',
        (p) => ((p.metadata?.annotations ?? {})[ANNOTATIONS.enforceGraceSeconds] = '1'),
      ],
      [
        'a main container added later, without the probe',
        (p) => spec(p).containers.push({ name: 'late', image: 'x' }),
      ],
    ];

    it('admits the Pod as injected', () => {
      expect(decideValidation(request(injected(optInPod(annotations))), settings)).toEqual({ allowed: true });
    });

    it.each(tamperings)('denies %s', (_what, change) => {
      const pod = injected(optInPod(annotations));
      change(pod);
      const decision = decideValidation(request(pod), settings);
      expect(decision).toMatchObject({ allowed: false, reason: 'runtime_contract' });
      expect(denial(decision)).toContain('the unmodified Berth liveness probe is required');
    });
  });

  it('denies an opted-in Pod no mutating webhook injected (the webhook was bypassed or Ignore)', () => {
    expect(denial(decideValidation(request(optInPod(lease)), settings))).toContain('only the injected');
  });

  it('names the annotation when it is bad', () => {
    expect(denial(decideValidation(request(optInPod({})), settings))).toContain(ANNOTATIONS.leaseName);
  });
});

describe('restarting the Pod on a loss (--injection-restart-pod-on-loss)', () => {
  const restarting = { ...settings, restartPodOnLoss: true };
  const sidecarOf = (p: V1Pod): V1Container => inits(p)[1] as V1Container;

  it('gives berth-sidecar the RestartAllContainers rule for the reserved code, and tells it', () => {
    const pod = injected(optInPod(lease), restarting);
    const sidecar = sidecarOf(pod);
    expect(sidecar.restartPolicyRules).toEqual([
      { action: 'RestartAllContainers', exitCodes: { operator: 'In', values: [RESTART_POD_EXIT_CODE] } },
    ]);
    expect(sidecar.env).toContainEqual({ name: ENV.restartPodOnLoss, value: 'true' });
    expect(inits(pod)[0]?.restartPolicyRules).toBeUndefined();
    expect(decideValidation(request(pod), restarting)).toEqual({ allowed: true });
  });

  it('adds nothing without the flag', () => {
    const sidecar = sidecarOf(injected(optInPod(lease)));
    expect(sidecar.restartPolicyRules).toBeUndefined();
    expect(sidecar.env?.map((e) => e.name)).not.toContain(ENV.restartPodOnLoss);
  });

  it.each([
    [
      'the rule dropped (an API server without the feature gates)',
      (p: V1Pod) => delete sidecarOf(p).restartPolicyRules,
      'ContainerRestartRules feature gate',
    ],
    [
      'the rule changed',
      (p: V1Pod) =>
        (sidecarOf(p).restartPolicyRules = [
          { action: 'Restart', exitCodes: { operator: 'NotIn', values: [0] } },
        ]),
      'RestartAllContainers restartPolicyRules',
    ],
    [
      'the sidecar told otherwise',
      (p: V1Pod) =>
        (sidecarOf(p).env = (sidecarOf(p).env ?? []).map((e) =>
          e.name === ENV.restartPodOnLoss ? { ...e, value: 'false' } : e,
        )),
      `${ENV.restartPodOnLoss}=true`,
    ],
  ])('denies %s', (_what, change, message) => {
    const pod = injected(optInPod(lease), restarting);
    change(pod);
    expect(denial(decideValidation(request(pod), restarting))).toContain(message);
  });

  it('leaves startup-gate Pods without a sidecar or rule', () => {
    const pod = injected(optInPod({ ...lease, [ANNOTATIONS.mode]: 'startup-gate' }), restarting);
    expect(inits(pod).map((c) => c.name)).toEqual(['berth-acquire']);
    expect(decideValidation(request(pod), restarting)).toEqual({ allowed: true });
  });
});

describe('flags', () => {
  it('has the Go defaults', () => {
    expect(parseInjectionConfig(flags())).toMatchObject({
      enabled: false,
      controlPlaneNamespaces: ['berth-system'],
      apiKeySecretKey: 'token',
      caBundleKey: 'ca.crt',
      stateDir: '/berth',
      defaultMode: 'runtime-singleton',
      defaultEnforce: 'probe',
      defaultTtlSeconds: 30,
      probePort: 9394,
      imagePullPolicy: 'IfNotPresent',
      failurePolicy: 'Fail',
    });
  });

  it.each([
    [
      ['--enable-injection-webhook'],
      '--injection-helper-image (BERTH_INJECTION_HELPER_IMAGE) is required with --enable-injection-webhook',
    ],
    [['--injection-helper-api-key-file=/var/run/t/token'], 'must be set together'],
    [['--injection-state-dir=berth'], 'for --injection-state-dir'],
    [['--injection-default-mode=forever'], 'for --injection-default-mode'],
    [['--injection-probe-port=0'], 'for --injection-probe-port'],
    [['--injection-helper-api-key-file=/token', '--injection-helper-api-key-secret=s'], 'parent directory'],
  ])('refuses %j in one line', (argv, message) => {
    expect(() => parseInjectionConfig(flags(...argv))).toThrow(message);
  });

  it('splits and trims the control-plane namespaces; the operator namespace is always one', () => {
    const c = parseInjectionConfig(
      flags('--injection-control-plane-namespaces= berth-system , kube-system ,, extra '),
    );
    expect(c.controlPlaneNamespaces).toEqual(['berth-system', 'kube-system', 'extra']);
    expect(injectorSettings(c, settings, 'ops').controlPlaneNamespaces).toEqual([
      'ops',
      'berth-system',
      'kube-system',
      'extra',
    ]);
  });
});
