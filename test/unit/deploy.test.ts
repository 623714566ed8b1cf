// deploy/ checked statically: the generated kustomize sources are current, the installs carry no webhook
// configuration (the operator registers them) and exactly the RBAC layers, the RBAC is least-privilege, and the Deployment is
// coherent with the flags it sets (parsed by the real flag parser), the Services, the probes, the drain
// window and the certificate mode of each install. (test/integration/deploy/ re-renders with kubectl and
// runs the operator under this RBAC.)
import { readFile } from 'node:fs/promises';
import type { V1Deployment, V1PodDisruptionBudget, V1PolicyRule, V1Service } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CERT_DIR } from '../../certs/files.ts';
import {
  CERT_MANAGER_CERTIFICATE,
  DEPLOY_DIR,
  generatedSources,
  WEBHOOK_PARAMS,
} from '../../scripts/deploy.ts';
import {
  AGENT_NAMESPACE,
  CA_SECRET_NAME,
  LEADER_ELECTION_ID,
  METRICS_AUTH_ROLE,
  METRICS_READER_ROLE,
  metricsAuthRules,
  nodeTaintGuardRbac,
  OPERATOR_NAMESPACE,
  type RbacObject,
  rbacLayers,
  ruleCovers,
  SERVICE_ACCOUNT,
  WEBHOOK_CONFIGURATION_NAME,
  withoutGrantedRules,
} from '../../scripts/deploy-rbac.ts';
import {
  containerEnvironment,
  find,
  type ManifestObject,
  operatorContainer,
  parseManifests,
  quantityBytes,
} from '../../scripts/install-manifest.ts';
import { parseFlags } from '../../src/cli.ts';
import { parseRunConfig } from '../../src/config.ts';
import { parseFeatureConfigs } from '../../src/features.ts';
import { runCommand } from '../../src/run.ts';
import { imageEnv, nodeOptionsInContainer } from '../helpers/image.ts';
import { operatorRules } from '../integration/deploy/install.ts';

const read = async (path: string): Promise<string> => readFile(new URL(path, `file://${DEPLOY_DIR}`), 'utf8');
const install = async (file: string): Promise<ManifestObject[]> => parseManifests(await read(file));
const INSTALLS = [
  ['install.yaml', 'selfsigned'],
  ['install-cert-manager.yaml', 'cert-manager'],
] as const;

/** What the README tells an installer to set in the ConfigMap berth-operator-config. */
const CONFIGURED = { BERTH_API_SERVER: 'https://berth.example.com', BERTH_CLUSTER_ID: 'cluster-a' };

/**
 * What the operator process would be configured with in a Pod of the install, once `settings` are in its
 * ConfigMap (by default what the README asks for; `{}` is the install as shipped).
 */
function operatorConfig(objects: ManifestObject[], settings: Record<string, string> = CONFIGURED) {
  const configured = objects.map((o) =>
    o.kind === 'ConfigMap' && o.metadata.name === 'berth-operator-config'
      ? { ...o, data: { ...(o as { data?: Record<string, string> }).data, ...settings } }
      : o,
  );
  const [command, ...argv] = operatorContainer(configured).args ?? [];
  const flags = parseFlags(runCommand, argv, containerEnvironment(configured));
  const config = parseRunConfig(flags);
  return { command, config, features: parseFeatureConfigs(flags, config.namespace) };
}

const rbacObjects = (objects: ManifestObject[]) =>
  objects.filter((o) => ['ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].includes(o.kind));
type Identified = { kind?: string; metadata?: { name?: string; namespace?: string } };
const idOf = (o: Identified): string => `${o.kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name}`;
const byId = (a: Identified, b: Identified): number => idOf(a).localeCompare(idOf(b));

describe('generated kustomize sources', () => {
  it('are current (run `npm run deploy:render` after changing the builders or the RBAC data)', async () => {
    for (const [path, content] of generatedSources()) expect(await read(path), path).toBe(content);
  });
});

describe.each(INSTALLS)('deploy/%s', (file, mode) => {
  it('ships no webhook configuration: the leader registers them once a replica serves', async () => {
    const objects = await install(file);
    for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration'])
      expect(objects.filter((o) => o.kind === kind)).toEqual([]);
    // Their owner, whose deletion with the install deletes them.
    expect(find(objects, 'ClusterRole', WEBHOOK_CONFIGURATION_NAME).metadata.name).toBe(
      WEBHOOK_CONFIGURATION_NAME,
    );
  });

  it('holds exactly the RBAC of its layers', async () => {
    const layers = rbacLayers();
    const want = [
      ...layers.base.objects,
      ...layers.secureMetrics.objects,
      ...(mode === 'selfsigned' ? layers.selfSigned.objects : []),
    ];
    expect(rbacObjects(await install(file)).sort(byId)).toEqual([...want].sort(byId));
  });

  it("refuses to start until the central API and this cluster's id are set, naming the setting", async () => {
    const objects = await install(file);
    expect(() => operatorConfig(objects, {})).toThrow(/^--berth-api-server \(BERTH_API_SERVER\) is required/);
    expect(() => operatorConfig(objects, { BERTH_API_SERVER: CONFIGURED.BERTH_API_SERVER })).toThrow(
      /^--cluster-id \(BERTH_CLUSTER_ID\) is required/,
    );
    expect(operatorConfig(objects).features.berth).toMatchObject({
      apiServer: CONFIGURED.BERTH_API_SERVER,
      clusterId: CONFIGURED.BERTH_CLUSTER_ID,
    });
  });

  it('configures the operator coherently with the other manifests', async () => {
    const objects = await install(file);
    const { command, config, features } = operatorConfig(objects);
    const deployment = find<V1Deployment>(objects, 'Deployment', 'berth-operator');
    const pod = deployment.spec!.template;
    const container = operatorContainer(objects);
    expect(command).toBe('run');
    expect(config.leaderElect).toBe(true);
    expect(config.namespace).toBe(OPERATOR_NAMESPACE);
    expect(config.leaderElectionId).toBe(LEADER_ELECTION_ID);
    expect(features.webhook.enableWorkloadAdmission).toBe(true);
    expect(features.webhook.workloadOperatorUser).toBe(
      `system:serviceaccount:${OPERATOR_NAMESPACE}:${SERVICE_ACCOUNT}`,
    );
    expect(features.webhook.workloadOperatorNamespace).toBe(OPERATOR_NAMESPACE);
    expect(features.webhook.webhookConfigurationName).toBe(WEBHOOK_CONFIGURATION_NAME);
    expect(features.webhook.webhookRegistration).toBe(true);
    // What the leader registers is built from exactly these.
    expect({
      namespace: config.namespace,
      serviceName: features.certs.webhookServiceName,
      name: features.webhook.webhookConfigurationName,
      scope: features.webhook.workloadAdmissionScope,
    }).toEqual(WEBHOOK_PARAMS);
    expect(features.certs.webhookServiceName).toBe(WEBHOOK_PARAMS.serviceName);
    expect(features.certs.certMode).toBe(mode === 'selfsigned' ? 'selfsigned' : 'files');
    expect(features.certs.certCaSecretName).toBe(CA_SECRET_NAME);
    expect(features.nodeTaint.enabled).toBe(false);
    // Metrics over HTTPS with a certificate generated in memory, each scrape authorized.
    expect(config.metricsSecure).toBe(true);
    expect(config.metricsCertDir).toBe('');
    expect(pod.spec?.serviceAccountName).toBe(SERVICE_ACCOUNT);
    expect(container.env?.find((e) => e.name === 'POD_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath).toBe(
      'metadata.namespace',
    );
    // Ports: the flags' listeners are the container ports the probes and Services use.
    const port = (name: string) => container.ports?.find((p) => p.name === name)?.containerPort;
    expect(port('webhook')).toBe(features.webhook.webhookPort);
    expect(`:${port('health')}`).toBe(config.healthProbeBindAddress);
    expect(`:${port('metrics')}`).toBe(config.metricsBindAddress);
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'health' });
    expect(container.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'health' });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'health' });
    const service = find<V1Service>(objects, 'Service', features.certs.webhookServiceName);
    expect(service.metadata.namespace).toBe(OPERATOR_NAMESPACE);
    expect(service.spec?.ports).toEqual([
      { name: 'https', port: WEBHOOK_PARAMS.servicePort ?? 443, targetPort: 'webhook', protocol: 'TCP' },
    ]);
    expect(service.spec?.selector).toEqual(pod.metadata?.labels);
    const metrics = find<V1Service>(objects, 'Service', 'berth-operator-metrics');
    expect(metrics.spec?.ports).toEqual([
      { name: 'https', port: port('metrics'), targetPort: 'metrics', protocol: 'TCP' },
    ]);
    expect(metrics.spec?.selector).toEqual(pod.metadata?.labels);
    // The image is this version of the project.
    const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(container.image).toBe(`berth-operator:${pkg.version}`);
  });

  it('keeps a serving replica through rollouts, drains and shutdowns', async () => {
    const objects = await install(file);
    const { config } = operatorConfig(objects);
    const deployment = find<V1Deployment>(objects, 'Deployment', 'berth-operator');
    const spec = deployment.spec!;
    const labels = spec.template.metadata?.labels ?? {};
    expect(spec.replicas).toBe(2);
    expect(spec.strategy?.rollingUpdate?.maxUnavailable).toBe(0);
    const pdb = find<V1PodDisruptionBudget>(objects, 'PodDisruptionBudget');
    expect(pdb.spec?.minAvailable).toBe(1);
    expect(pdb.spec?.selector?.matchLabels).toEqual(labels);
    const spread = spec.template.spec?.topologySpreadConstraints ?? [];
    expect(spread.map((s) => s.topologyKey).sort()).toEqual([
      'kubernetes.io/hostname',
      'topology.kubernetes.io/zone',
    ]);
    for (const s of spread) expect(s.labelSelector?.matchLabels).toEqual(labels);
    // preStop sleeps for the drain window; the grace period covers it plus the whole shutdown.
    const container = operatorContainer(objects);
    const preStop = container.lifecycle?.preStop?.sleep?.seconds ?? 0;
    expect(preStop * 1000).toBe(config.drainWindow);
    expect((spec.template.spec?.terminationGracePeriodSeconds ?? 30) * 1000).toBeGreaterThan(
      preStop * 1000 + config.gracefulShutdownTimeout,
    );
  });

  it("sizes V8's heap to half the memory limit, on top of the image's NODE_OPTIONS", async () => {
    for (const [file] of INSTALLS) {
      const objects = await install(file);
      const limit = quantityBytes(String(operatorContainer(objects).resources?.limits?.memory));
      const nodeOptions = containerEnvironment(objects).NODE_OPTIONS ?? '';
      // Overriding NODE_OPTIONS replaces the image's: the Deployment must repeat it.
      expect(nodeOptions.startsWith(`${imageEnv().NODE_OPTIONS} `), nodeOptions).toBe(true);
      // Node takes the percentage of the container's limit (its cgroup's).
      const heapMib = Number(
        /--max-old-space-size=(\d+)$/.exec(nodeOptionsInContainer(nodeOptions, limit))?.[1],
      );
      expect(heapMib * 2 ** 20).toBe(limit / 2);
    }
  });

  it('runs the restricted way: non-root 65532, read-only root, no capabilities, RuntimeDefault seccomp', async () => {
    const objects = await install(file);
    const pod = find<V1Deployment>(objects, 'Deployment', 'berth-operator').spec!.template.spec!;
    const container = operatorContainer(objects);
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      runAsUser: 65532,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext?.capabilities?.add).toBeUndefined();
    for (const kind of ['requests', 'limits'] as const)
      expect(Object.keys(container.resources?.[kind] ?? {}).sort()).toEqual(['cpu', 'memory']);
    const ns = find(objects, 'Namespace', OPERATOR_NAMESPACE);
    expect((ns.metadata.labels as Record<string, string>)['pod-security.kubernetes.io/enforce']).toBe(
      'restricted',
    );
  });
});

describe('deploy/install-cert-manager.yaml', () => {
  it('issues the serving certificate for the webhook Service, mounts it at --cert-dir and injects its CA', async () => {
    const objects = await install('install-cert-manager.yaml');
    const { features } = operatorConfig(objects);
    interface Certificate {
      spec: {
        secretName: string;
        dnsNames: string[];
        isCA?: boolean;
        issuerRef: { kind: string; name: string };
      };
    }
    const certificate = find<Certificate>(objects, 'Certificate', CERT_MANAGER_CERTIFICATE);
    const svc = features.certs.webhookServiceName;
    expect(certificate.metadata.namespace).toBe(OPERATOR_NAMESPACE);
    expect(certificate.spec.dnsNames).toEqual([
      svc,
      `${svc}.${OPERATOR_NAMESPACE}.svc`,
      `${svc}.${OPERATOR_NAMESPACE}.svc.cluster.local`,
    ]);
    // The serving certificate's issuer is a CA Issuer whose CA comes from a self-signed bootstrap.
    const issuer = find<{ spec: { ca?: { secretName: string } } }>(
      objects,
      'Issuer',
      certificate.spec.issuerRef.name,
    );
    const ca = objects.find(
      (o) =>
        o.kind === 'Certificate' &&
        (o as unknown as Certificate).spec.secretName === issuer.spec.ca?.secretName,
    ) as unknown as Certificate | undefined;
    expect(ca?.spec.isCA).toBe(true);
    expect(
      find<{ spec: { selfSigned?: object } }>(objects, 'Issuer', ca!.spec.issuerRef.name).spec.selfSigned,
    ).toEqual({});
    const pod = find<V1Deployment>(objects, 'Deployment', 'berth-operator').spec!.template.spec!;
    const volume = pod.volumes?.find((v) => v.secret?.secretName === certificate.spec.secretName);
    expect(volume).toBeDefined();
    const mount = operatorContainer(objects).volumeMounts?.find((m) => m.name === volume?.name);
    expect(mount).toMatchObject({ mountPath: features.certs.certDir, readOnly: true });
    expect(features.certs.certDir).toBe(DEFAULT_CERT_DIR);
  });
});

describe('RBAC', () => {
  const layers = rbacLayers();
  const all: RbacObject[] = [
    ...layers.base.objects,
    ...layers.secureMetrics.objects,
    ...layers.selfSigned.objects,
    ...layers.nodeTaintGuard.objects,
  ];
  const granted = operatorRules(all as unknown as ManifestObject[]);
  const rulesOn = (resource: string) => granted.filter((g) => (g.rule.resources ?? []).includes(resource));

  it('binds only its own roles, to the operator service account only, and grants no wildcard or escalation', () => {
    const roles = new Set(
      all.filter((o) => (o.kind ?? '').endsWith('Role')).map((o) => `${o.kind}/${o.metadata?.name}`),
    );
    for (const o of all) {
      if (o.kind !== 'ClusterRoleBinding' && o.kind !== 'RoleBinding') continue;
      const b = o as {
        roleRef: { kind: string; name: string };
        subjects?: { kind: string; name: string; namespace?: string }[];
      };
      expect(roles.has(`${b.roleRef.kind}/${b.roleRef.name}`), b.roleRef.name).toBe(true);
      expect(b.subjects).toEqual([
        { kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: OPERATOR_NAMESPACE },
      ]);
    }
    for (const { rule } of granted) {
      for (const list of [rule.apiGroups, rule.resources, rule.verbs]) expect(list ?? []).not.toContain('*');
      for (const verb of ['escalate', 'bind', 'impersonate', 'deletecollection'])
        expect(rule.verbs ?? []).not.toContain(verb);
      // Deletes only of what a stopping managed workload leaves behind.
      if (rule.verbs?.includes('delete'))
        expect(['pods', 'jobs']).toEqual(expect.arrayContaining(rule.resources ?? []));
      expect(rule.nonResourceURLs ?? []).toEqual([]);
    }
  });

  it('names the leader Lease, the CA Secret and the webhook configurations wherever a name can be checked', () => {
    const named = (resource: string, name: string, namespace?: string) => {
      const rules = rulesOn(resource);
      expect(rules.length, resource).toBeGreaterThan(0);
      for (const g of rules) {
        expect(g.namespace, resource).toBe(namespace);
        // `create` cannot be name-scoped (the name is not known to the authorizer); nothing else is unnamed.
        if ((g.rule.verbs ?? []).every((v) => v === 'create')) continue;
        expect(g.rule.resourceNames, `${resource} ${g.rule.verbs}`).toEqual([name]);
      }
    };
    named('leases', LEADER_ELECTION_ID, OPERATOR_NAMESPACE);
    named('secrets', CA_SECRET_NAME, OPERATOR_NAMESPACE);
    named('mutatingwebhookconfigurations', WEBHOOK_CONFIGURATION_NAME);
    named('validatingwebhookconfigurations', WEBHOOK_CONFIGURATION_NAME);
  });

  it('lets the operator review scrapes, and scrapers bind a reader role granted to no one', () => {
    const reviews = granted.filter((g) => g.role === `ClusterRole/${METRICS_AUTH_ROLE}`);
    expect(reviews.map((g) => g.rule)).toEqual(metricsAuthRules());
    for (const g of reviews) expect(g.namespace).toBeUndefined();
    expect(rulesOn('tokenreviews').map((g) => g.role)).toEqual([`ClusterRole/${METRICS_AUTH_ROLE}`]);
    const reader = all.find((o) => o.kind === 'ClusterRole' && o.metadata?.name === METRICS_READER_ROLE);
    expect((reader as { rules?: V1PolicyRule[] } | undefined)?.rules).toEqual([
      { nonResourceURLs: ['/metrics'], verbs: ['get'] },
    ]);
    const bindings = all.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding');
    expect(
      bindings.filter((b) => (b as { roleRef: { name: string } }).roleRef.name === METRICS_READER_ROLE),
    ).toEqual([]);
    expect(layers.secureMetrics.dropped).toEqual([]);
  });

  it('lets the guard read Pods in the agent namespace only, and nothing else touch Nodes', () => {
    // The guard's own grant, before layering (the managed-workload path may grant Pods cluster-wide).
    const guard = operatorRules(nodeTaintGuardRbac() as unknown as ManifestObject[]);
    const pods = guard.filter((g) => (g.rule.resources ?? []).includes('pods'));
    expect(pods.length).toBeGreaterThan(0);
    for (const g of pods) expect(g.namespace).toBe(AGENT_NAMESPACE);
    expect(rulesOn('nodes').map((g) => g.role)).toEqual(['ClusterRole/berth-operator-node-taint-guard']);
  });

  it('grants nothing twice: a rule already granted by an earlier layer is left out and listed', () => {
    const events: V1PolicyRule = {
      apiGroups: ['events.k8s.io'],
      resources: ['events'],
      verbs: ['create', 'patch'],
    };
    expect(ruleCovers(events, undefined, events, 'default')).toBe(true);
    expect(ruleCovers(events, 'default', events, undefined)).toBe(false);
    expect(ruleCovers({ ...events, resourceNames: ['a'] }, undefined, events, undefined)).toBe(false);
    expect(ruleCovers(events, undefined, { ...events, verbs: ['create', 'update'] }, undefined)).toBe(false);
    const cluster = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'a' },
      rules: [events],
    };
    const role = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'b', namespace: 'default' },
      rules: [events],
    };
    const binding = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'b', namespace: 'default' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'b' },
      subjects: [],
    };
    const reduced = withoutGrantedRules([role, binding] as RbacObject[], [cluster] as RbacObject[]);
    expect(reduced.objects).toEqual([]);
    expect(reduced.dropped).toEqual([{ role: 'Role default/b', rule: events, grantedBy: 'ClusterRole a' }]);
    const files = generatedSources();
    const fileOf = {
      base: 'kustomize/base/rbac.generated.yaml',
      secureMetrics: 'kustomize/base/rbac-metrics.generated.yaml',
      selfSigned: 'kustomize/components/selfsigned/rbac.generated.yaml',
      nodeTaintGuard: 'kustomize/components/node-taint-guard/rbac.generated.yaml',
    } as const;
    for (const [layer, path] of Object.entries(fileOf))
      for (const d of layers[layer as keyof typeof fileOf].dropped)
        expect(files.get(path)).toContain(`# ${d.role}: ${(d.rule.verbs ?? []).join(',')} on `);
  });
});
