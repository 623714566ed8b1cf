// The alerting rules of deploy/prometheus/ through the real promtool (built from its Go module,
// hack/prometheus/build.ts, cached): `promtool check rules` on every rules file, `promtool test rules` on
// the unit tests of test/prometheus/ (synthetic series, every alert firing and not firing), and for every
// alert two mutants that the tests must catch: one that never fires and one that always fires. Every alert
// carries a severity, a summary, a description and a runbook_url whose anchor is a section of
// docs/runbook.md; the charts' copies of the rules files and of the dashboard are the files themselves.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { ensurePrometheus } from '../../../hack/prometheus/build.ts';
import { kubectl } from '../../../scripts/deploy.ts';
import { type ManifestObject, parseManifests } from '../../../scripts/install-manifest.ts';
import { APISERVER_CHART, CHART, Helm } from '../../helpers/helm.ts';

const ROOT = new URL('../../../', import.meta.url).pathname;
const path = (p: string): string => join(ROOT, p);
/** The base of every runbook_url in the plain files; the charts rewrite it (prometheusRule.runbookBaseURL). */
const RUNBOOK_BASE = 'https://github.com/skaphos/berth-operator/blob/main/docs/runbook.md';

interface RulesFile {
  /** deploy/prometheus/<name> */
  name: string;
  chart: string;
  /** The chart's required values. */
  values: string;
  /** The kustomize component shipping it. */
  component: string;
  tests: string;
}
const RULES: readonly RulesFile[] = [
  {
    name: 'berth-operator.rules.yaml',
    chart: 'deploy/helm/berth-operator',
    values: 'test/fixtures/helm/required-values.yaml',
    component: 'deploy/kustomize/components/prometheus-rules',
    tests: 'test/prometheus/berth-operator.rules.test.yaml',
  },
  {
    name: 'berth-apiserver.rules.yaml',
    chart: 'deploy/helm/berth-apiserver',
    values: 'test/fixtures/helm-apiserver/required-values.yaml',
    component: 'deploy/kustomize/apiserver/components/prometheus-rules',
    tests: 'test/prometheus/berth-apiserver.rules.test.yaml',
  },
];

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface Groups {
  groups: { name: string; rules: Rule[] }[];
}

const readGroups = async (file: string): Promise<Groups> =>
  parse(await readFile(path(file), 'utf8')) as Groups;
const alertsOf = (g: Groups): Rule[] => g.groups.flatMap((group) => group.rules).filter((r) => r.alert);

interface Run {
  code: number;
  out: string;
}
let promtool: string;
let work: string;
let helm: Helm;

function run(args: readonly string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      promtool,
      [...args],
      { timeout: 120_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, out: `${stdout}${stderr}` });
      },
    );
  });
}

/** GitHub's anchor of a Markdown heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`. */
function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

beforeAll(async () => {
  ({ promtool } = await ensurePrometheus());
  work = await mkdtemp(join(tmpdir(), 'berth-promtool-'));
  helm = await Helm.start();
}, 1_800_000);
afterAll(async () => {
  await helm?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('alerting rules (promtool)', () => {
  it('every rules file passes promtool check rules', async () => {
    const res = await run(['check', 'rules', ...RULES.map((r) => path(`deploy/prometheus/${r.name}`))]);
    expect(res.out).not.toContain('FAILED');
    expect(res.code, res.out).toBe(0);
    for (const r of RULES) expect(res.out).toContain(`Checking ${path(`deploy/prometheus/${r.name}`)}`);
  });

  it('the unit tests pass: every alert fires on its synthetic series and stays quiet on the others', async () => {
    const res = await run(['test', 'rules', ...RULES.map((r) => path(r.tests))]);
    expect(res.code, res.out).toBe(0);
    expect(res.out.match(/SUCCESS/g)).toHaveLength(RULES.length);
  });

  it('the unit tests catch, for every alert, a mutant that never fires and one that always fires', async () => {
    const mutants: { file: string; what: string }[] = [];
    for (const r of RULES) {
      const groups = await readGroups(`deploy/prometheus/${r.name}`);
      const tests = parse(await readFile(path(r.tests), 'utf8')) as Record<string, unknown>;
      for (const alert of alertsOf(groups)) {
        for (const [kind, expr] of [
          ['never fires', 'vector(1) < 0'],
          ['always fires', 'vector(1)'],
        ] as const) {
          const id = `${basename(r.name, '.rules.yaml')}-${alert.alert}-${kind.replace(' ', '-')}`;
          const mutated: Groups = {
            groups: groups.groups.map((g) => ({
              ...g,
              rules: g.rules.map((rule) => (rule.alert === alert.alert ? { ...rule, expr } : rule)),
            })),
          };
          const rulesFile = join(work, `${id}.rules.yaml`);
          const testFile = join(work, `${id}.test.yaml`);
          await writeFile(rulesFile, stringify(mutated));
          await writeFile(testFile, stringify({ ...tests, rule_files: [rulesFile] }));
          mutants.push({ file: testFile, what: `${alert.alert} (${kind})` });
        }
      }
    }
    // One promtool run per mutant (its exit code is the verdict), two at a time.
    const survived: string[] = [];
    const queue = [...mutants];
    const worker = async (): Promise<void> => {
      for (let m = queue.shift(); m !== undefined; m = queue.shift()) {
        const res = await run(['test', 'rules', m.file]);
        if (res.code === 0 || !res.out.includes('FAILED')) survived.push(m.what);
      }
    };
    await Promise.all([worker(), worker()]);
    expect(survived.sort()).toEqual([]);
    expect(mutants.length).toBeGreaterThanOrEqual(2 * 19);
  });
});

describe('alert metadata and runbook', () => {
  it('every alert has a severity, a summary, a description and a runbook section of its own', async () => {
    const runbook = await readFile(path('docs/runbook.md'), 'utf8');
    const anchors = new Set(
      [...runbook.matchAll(/^#{2,3} (.+)$/gm)].map((m) => headingAnchor(m[1] ?? '')).filter(Boolean),
    );
    const seen: string[] = [];
    for (const r of RULES) {
      for (const alert of alertsOf(await readGroups(`deploy/prometheus/${r.name}`))) {
        const name = alert.alert ?? '';
        seen.push(name);
        expect(alert.labels?.severity, name).toMatch(/^(critical|warning|info)$/);
        expect(alert.annotations?.summary, name).toBeTruthy();
        expect(alert.annotations?.description, name).toBeTruthy();
        expect(alert.annotations?.runbook_url, name).toBe(`${RUNBOOK_BASE}#${name.toLowerCase()}`);
        expect(anchors.has(name.toLowerCase()), `docs/runbook.md has no section ${name}`).toBe(true);
      }
    }
    expect(new Set(seen).size).toBe(seen.length);
  });
});

describe('one source of truth', () => {
  it("each chart's and component's copy of its rules file and of the dashboard is the file itself", async () => {
    const dashboard = await readFile(path('deploy/grafana/berth-dashboard.json'), 'utf8');
    for (const r of RULES) {
      const rules = await readFile(path(`deploy/prometheus/${r.name}`), 'utf8');
      expect(await readFile(path(`${r.chart}/files/${r.name}`), 'utf8'), r.chart).toBe(rules);
      expect(await readFile(path(`${r.chart}/files/berth-dashboard.json`), 'utf8'), r.chart).toBe(dashboard);
      expect(await readFile(path(`${r.component}/${r.name}`), 'utf8'), r.component).toBe(rules);
    }
    expect(
      await readFile(path('deploy/kustomize/components/prometheus-rules/berth-dashboard.json'), 'utf8'),
    ).toBe(dashboard);
  });

  it.each(RULES)(
    'the $chart chart renders the PrometheusRule and the dashboard ConfigMap',
    async ({ name, chart, values }) => {
      const base = 'https://docs.example.com/berth/runbook.md';
      const objects = await helm.render({
        chart: chart === 'deploy/helm/berth-operator' ? CHART : APISERVER_CHART,
        values: [
          path(values),
          {
            prometheusRule: { enabled: true, runbookBaseURL: `${base}/` },
            grafanaDashboard: { enabled: true },
          },
        ],
      });
      const rule = find(objects, 'PrometheusRule');
      expect(rule.apiVersion).toBe('monitoring.coreos.com/v1');
      const plain = await readGroups(`deploy/prometheus/${name}`);
      const rebased = JSON.parse(JSON.stringify(plain).replaceAll(RUNBOOK_BASE, base)) as Groups;
      expect((rule as unknown as { spec: Groups }).spec).toEqual(rebased);
      expect(JSON.stringify(rule)).not.toContain(RUNBOOK_BASE);
      const cm = find(objects, 'ConfigMap', '-dashboard');
      expect(labelsOf(cm).grafana_dashboard).toBe('1');
      const data = (cm as unknown as { data: Record<string, string> }).data;
      expect(JSON.parse(data['berth-dashboard.json'] ?? '')).toEqual(
        JSON.parse(await readFile(path('deploy/grafana/berth-dashboard.json'), 'utf8')),
      );
      // Off by default.
      const byDefault = await helm.render({
        chart: chart === 'deploy/helm/berth-operator' ? CHART : APISERVER_CHART,
        values: [path(values)],
      });
      expect(byDefault.filter((o) => o.kind === 'PrometheusRule')).toEqual([]);
      expect(byDefault.filter((o) => o.metadata.name.endsWith('-dashboard'))).toEqual([]);
    },
  );

  it.each(RULES)('the kustomize component $component ships the rules in a ConfigMap', async (r) => {
    const dir = await mkdtemp(join(work, 'kustomize-'));
    const rel = relative(dir, path(r.component));
    await writeFile(
      join(dir, 'kustomization.yaml'),
      stringify({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', components: [rel] }),
    );
    const objects = parseManifests(await kubectl(['kustomize', dir]));
    const rules = find(objects, 'ConfigMap', '-prometheus-rules');
    const data = (rules as unknown as { data: Record<string, string> }).data;
    expect(data[r.name]).toBe(await readFile(path(`deploy/prometheus/${r.name}`), 'utf8'));
    if (r.chart === 'deploy/helm/berth-operator') {
      expect(labelsOf(find(objects, 'ConfigMap', '-dashboard')).grafana_dashboard).toBe('1');
    }
  });
});

const labelsOf = (o: ManifestObject): Record<string, string> =>
  (o.metadata.labels ?? {}) as Record<string, string>;

function find(objects: ManifestObject[], kind: string, suffix = ''): ManifestObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name.endsWith(suffix));
  if (found === undefined) throw new Error(`no ${kind} *${suffix} rendered`);
  return found;
}
