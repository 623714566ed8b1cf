// The Helm chart checked statically: its version follows the project's, its default image is the
// installs', and the RBAC it renders without workload management (workloadManagement.enabled=false, the Go
// chart's default) grants nothing of the admission path. Rendered by real Helm:
// test/integration/deploy/helm-template.test.ts and helm-install.test.ts.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DEPLOY_DIR } from '../../scripts/deploy.ts';
import { AGENT_NAMESPACE, rbacLayers, WEBHOOK_CONFIGURATION_NAME } from '../../scripts/deploy-rbac.ts';
import { CHART_DIR } from '../../scripts/helm-chart.ts';
import { operatorContainer, parseManifests } from '../../scripts/install-manifest.ts';
import { managedWorkloadRules } from '../../src/berth/rbac.ts';

const chartFile = (name: string): unknown => parse(readFileSync(`${DEPLOY_DIR}${CHART_DIR}/${name}`, 'utf8'));

describe('the Helm chart', () => {
  it("is versioned as the project, and runs the installs' image by default", () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(chartFile('Chart.yaml')).toMatchObject({ version: pkg.version, appVersion: pkg.version });
    const values = chartFile('values.yaml') as { image: { repository: string; tag: string } };
    const install = parseManifests(readFileSync(`${DEPLOY_DIR}install.yaml`, 'utf8'));
    expect(`${values.image.repository}:${values.image.tag || pkg.version}`).toBe(
      operatorContainer(install).image,
    );
  });

  it("berth-apiserver: versioned as the project, runs the project's image by default, as its installs", () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    const file = (name: string): unknown =>
      parse(readFileSync(`${DEPLOY_DIR}helm/berth-apiserver/${name}`, 'utf8'));
    expect(file('Chart.yaml')).toMatchObject({ version: pkg.version, appVersion: pkg.version });
    const values = file('values.yaml') as { image: { repository: string; tag: string } };
    const install = parseManifests(readFileSync(`${DEPLOY_DIR}install-apiserver.yaml`, 'utf8'));
    const deployment = install.find((o) => o.kind === 'Deployment') as
      | { spec: { template: { spec: { containers: { image: string }[] } } } }
      | undefined;
    expect(`${values.image.repository}:${values.image.tag || pkg.version}`).toBe(
      deployment?.spec.template.spec.containers[0]?.image,
    );
  });

  it('grants a lease-only operator no admission, managed-workload or webhook rule, and the guard its Pod reads', () => {
    // Helper injection is a feature of its own (injection.enabled), with its own webhook configurations.
    const { injection, ...layers } = rbacLayers({ workloadAdmission: false });
    const objects = Object.values(layers).flatMap((l) => l.objects);
    const rules = objects.flatMap((o) => ('rules' in o ? (o.rules ?? []) : []));
    for (const managed of managedWorkloadRules) expect(rules).not.toContainEqual(managed);
    expect(rules.flatMap((r) => r.resources ?? [])).not.toContain('mutatingwebhookconfigurations');
    expect(objects.map((o) => o.metadata?.name)).not.toContain(WEBHOOK_CONFIGURATION_NAME);
    // With admission on, the base's cluster-wide Pod reads cover the guard's; here the guard needs its own.
    const podReads = layers.nodeTaintGuard.objects.filter(
      (o) => 'rules' in o && (o.rules ?? []).some((r) => r.resources?.includes('pods')),
    );
    expect(podReads.map((o) => o.metadata?.namespace)).toEqual([AGENT_NAMESPACE]);
    // Injection without workload admission registers its configurations with rights of its own.
    const injectionRules = injection.objects.flatMap((o) => ('rules' in o ? (o.rules ?? []) : []));
    expect(injectionRules).toContainEqual(
      expect.objectContaining({ resources: ['endpointslices'], verbs: ['list', 'watch'] }),
    );
    expect(injectionRules.filter((r) => r.verbs?.includes('create'))).toHaveLength(1);
    expect(injection.dropped).toEqual([]);
  });
});
