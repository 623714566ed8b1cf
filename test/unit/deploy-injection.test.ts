// The injection component's sources checked statically: its RBAC (the owner ClusterRole of the injection
// webhook configurations, name-scoped to them) and its Deployment patch, whose explicit values are the
// operator's defaults and whose configuration name is its ClusterRole's. The rendered overlay is run
// against a real API server in test/integration/injection/install.test.ts.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DEPLOY_DIR } from '../../scripts/deploy.ts';
import {
  INJECTION_CONFIGURATION_NAME,
  OPERATOR_NAMESPACE,
  rbacLayers,
  SERVICE_ACCOUNT,
} from '../../scripts/deploy-rbac.ts';
import type { ManifestObject } from '../../scripts/install-manifest.ts';
import { parseFlags } from '../../src/cli.ts';
import { parseInjectionConfig } from '../../src/injection/flags.ts';
import { runCommand } from '../../src/run.ts';
import { operatorRules } from '../integration/deploy/install.ts';

const COMPONENT = `${DEPLOY_DIR}kustomize/components/injection`;

describe('the injection component', () => {
  it.each([true, false])(
    'grants (workload admission %s) only the registration of its own configurations, named',
    (workloadAdmission) => {
      const layer = rbacLayers({ workloadAdmission }).injection;
      const granted = operatorRules(layer.objects as unknown as ManifestObject[]);
      expect(granted.length).toBeGreaterThan(0);
      for (const { rule, role } of granted) {
        if (rule.resourceNames !== undefined)
          expect(rule.resourceNames, role).toEqual([INJECTION_CONFIGURATION_NAME]);
        // Unnamed only where Kubernetes cannot check a name: create, and the EndpointSlices (by label).
        else if (rule.verbs?.includes('create'))
          expect(rule).toMatchObject({
            resources: ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'],
            verbs: ['create'],
          });
        else expect(rule).toMatchObject({ resources: ['endpointslices'], verbs: ['list', 'watch'] });
      }
      // The owner of the configurations is the ClusterRole of their name.
      expect(granted.map((g) => g.role)).toContain(`ClusterRole/${INJECTION_CONFIGURATION_NAME}`);
      // With workload admission (every kustomize install) the base grants create and the EndpointSlices.
      expect(layer.dropped.length).toBe(workloadAdmission ? 2 : 0);
      for (const o of layer.objects)
        if ('subjects' in o)
          expect(o.subjects).toEqual([
            { kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: OPERATOR_NAMESPACE },
          ]);
    },
  );

  it("sets the operator's defaults explicitly, and the name its ClusterRole owns", () => {
    const patch = parse(readFileSync(`${COMPONENT}/deployment-patch.yaml`, 'utf8')) as {
      spec: { template: { spec: { containers: { env: { name: string; value: string }[] }[] } } };
    };
    const env = Object.fromEntries(
      patch.spec.template.spec.containers[0]!.env.map((e) => [e.name, e.value] as const),
    );
    const configured = parseInjectionConfig(parseFlags(runCommand, [], env));
    const defaults = parseInjectionConfig(
      parseFlags(runCommand, [], {
        BERTH_ENABLE_INJECTION_WEBHOOK: 'true',
        BERTH_INJECTION_HELPER_IMAGE: env.BERTH_INJECTION_HELPER_IMAGE!,
      }),
    );
    expect(configured).toEqual(defaults);
    expect(configured.enabled).toBe(true);
    expect(configured.configurationName).toBe(INJECTION_CONFIGURATION_NAME);
  });
});
