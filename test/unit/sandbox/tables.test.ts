import { describe, expect, it } from 'vitest';
import {
  buildTable,
  crdPrinterColumns,
  humanDuration,
  type PrinterColumn,
} from '../../../src/sandbox/tables.ts';
import { type JsonObject, type KubeObject, StatusError } from '../../../src/sandbox/types.ts';

const NOW = Date.parse('2025-06-01T12:00:00Z');
const ago = (ms: number): string => new Date(NOW - ms).toISOString();
const S = 1000;
const M = 60 * S;
const H = 60 * M;
const D = 24 * H;

interface Row {
  cells: unknown[];
  conditions?: unknown[];
  object: unknown;
}
interface Column {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

function table(kind: string, objects: KubeObject[], extra: Partial<Parameters<typeof buildTable>[2]> = {}) {
  const t = buildTable(kind, objects, { now: NOW, resourceVersion: '42', ...extra });
  return {
    raw: t,
    columns: t.columnDefinitions as unknown as Column[],
    rows: t.rows as unknown as Row[] | null,
  };
}

/** The cells of the only row, keyed by column name, as kubectl -o wide would pair them. */
function cellsOf(
  kind: string,
  obj: KubeObject,
  extra: Partial<Parameters<typeof buildTable>[2]> = {},
): Record<string, unknown> {
  const { columns, rows } = table(kind, [obj], extra);
  const row = rows?.[0];
  if (!row) throw new Error('no row');
  expect(row.cells).toHaveLength(columns.length);
  return Object.fromEntries(columns.map((c, i) => [c.name, row.cells[i]]));
}

describe('humanDuration', () => {
  it.each<[number, string]>([
    [-2 * S, '<invalid>'],
    [-1999, '0s'],
    [-S, '0s'],
    [0, '0s'],
    [5 * S, '5s'],
    [119 * S + 999, '119s'],
    [2 * M, '2m'],
    [3 * M + 2 * S, '3m2s'],
    [9 * M + 59 * S, '9m59s'],
    [10 * M + 30 * S, '10m'],
    [179 * M, '179m'],
    [3 * H, '3h'],
    [3 * H + 5 * M, '3h5m'],
    [7 * H + 59 * M, '7h59m'],
    [8 * H + 30 * M, '8h'],
    [47 * H, '47h'],
    [2 * D, '2d'],
    [2 * D + 1 * H, '2d1h'],
    [7 * D + 23 * H, '7d23h'],
    [8 * D + 5 * H, '8d'],
    [729 * D, '729d'],
    [730 * D, '2y'],
    [731 * D, '2y1d'],
    [8 * 365 * D, '8y'],
    [20 * 365 * D + 100 * D, '20y'],
  ])('%d ms -> %s', (ms, text) => {
    expect(humanDuration(ms)).toBe(text);
  });
});

const pod = (
  overrides: {
    metadata?: Partial<KubeObject['metadata']>;
    spec?: Record<string, unknown>;
    status?: Record<string, unknown>;
  } = {},
): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    name: 'web-0',
    namespace: 'default',
    uid: 'u1',
    resourceVersion: '7',
    creationTimestamp: ago(5 * M),
    ...overrides.metadata,
  },
  spec: { containers: [{ name: 'app', image: 'nginx' }], ...overrides.spec },
  status: overrides.status ?? {},
});

const running = {
  phase: 'Running',
  podIP: '10.0.0.7',
  podIPs: [{ ip: '10.0.0.7' }],
  conditions: [{ type: 'Ready', status: 'True' }],
  containerStatuses: [
    { name: 'app', ready: true, restartCount: 0, state: { running: { startedAt: ago(4 * M) } } },
  ],
};

describe('Pod', () => {
  it('has the columns kubectl shows, with priority-1 wide columns', () => {
    const { columns } = table('Pod', []);
    expect(columns.map((c) => [c.name, c.type, c.priority])).toEqual([
      ['Name', 'string', 0],
      ['Ready', 'string', 0],
      ['Status', 'string', 0],
      ['Restarts', 'string', 0],
      ['Age', 'string', 0],
      ['IP', 'string', 1],
      ['Node', 'string', 1],
      ['Nominated Node', 'string', 1],
      ['Readiness Gates', 'string', 1],
    ]);
    expect(Object.keys(columns[0] as Column)).toEqual(['name', 'type', 'format', 'description', 'priority']);
    expect(columns[0]).toMatchObject({
      format: 'name',
      description: expect.stringMatching(/^Name must be unique within a namespace\./),
    });
    expect(columns[4]?.description).toContain('in UTC.\n\nPopulated by the system.');
    expect(columns[1]).toEqual({
      name: 'Ready',
      type: 'string',
      format: '',
      description: 'The aggregate readiness state of this pod for accepting traffic.',
      priority: 0,
    });
  });

  it('running', () => {
    expect(cellsOf('Pod', pod({ spec: { nodeName: 'node-a' }, status: running }))).toEqual({
      Name: 'web-0',
      Ready: '1/1',
      Status: 'Running',
      Restarts: '0',
      Age: '5m',
      IP: '10.0.0.7',
      Node: 'node-a',
      'Nominated Node': '<none>',
      'Readiness Gates': '<none>',
    });
  });

  it('scheduling-gated (the PodScheduled condition the API server sets)', () => {
    const gated = pod({
      spec: { schedulingGates: [{ name: 'berth.skaphos.io/lease-held' }] },
      status: {
        phase: 'Pending',
        conditions: [{ type: 'PodScheduled', status: 'False', reason: 'SchedulingGated' }],
      },
    });
    expect(cellsOf('Pod', gated)).toMatchObject({
      Ready: '0/1',
      Status: 'SchedulingGated',
      Restarts: '0',
      IP: '<none>',
      Node: '<none>',
    });
    expect(cellsOf('Pod', pod({ status: { phase: 'Pending' } })).Status).toBe('Pending');
  });

  it('terminating, and Unknown when the node is lost', () => {
    const deleting = { deletionTimestamp: ago(10 * S) };
    expect(cellsOf('Pod', pod({ metadata: deleting, status: running })).Status).toBe('Terminating');
    expect(
      cellsOf('Pod', pod({ metadata: deleting, status: { ...running, reason: 'NodeLost' } })).Status,
    ).toBe('Unknown');
    // A finished Pod being deleted keeps its terminal status.
    expect(cellsOf('Pod', pod({ metadata: deleting, status: { phase: 'Succeeded' } })).Status).toBe(
      'Succeeded',
    );
  });

  it('completed, with the row condition kubectl uses to hide it', () => {
    const done = pod({
      status: {
        phase: 'Succeeded',
        containerStatuses: [
          {
            name: 'app',
            ready: false,
            restartCount: 0,
            state: { terminated: { exitCode: 0, reason: 'Completed' } },
          },
        ],
      },
    });
    const { rows } = table('Pod', [done]);
    expect(rows?.[0]?.cells[2]).toBe('Completed');
    expect(rows?.[0]?.cells[1]).toBe('0/1');
    expect(rows?.[0]?.conditions).toEqual([
      {
        type: 'Completed',
        status: 'True',
        reason: 'Succeeded',
        message: 'The pod has completed successfully.',
      },
    ]);
    expect(table('Pod', [pod({ status: running })]).rows?.[0]).not.toHaveProperty('conditions');
    expect(table('Pod', [pod({ status: { phase: 'Failed' } })]).rows?.[0]?.conditions).toEqual([
      { type: 'Completed', status: 'True', reason: 'Failed', message: 'The pod failed.' },
    ]);
  });

  it('container states: waiting reason, exit code, restarts with the last restart age', () => {
    const crashing = pod({
      status: {
        phase: 'Running',
        containerStatuses: [
          {
            name: 'app',
            ready: false,
            restartCount: 3,
            state: { waiting: { reason: 'CrashLoopBackOff' } },
            lastState: { terminated: { exitCode: 1, finishedAt: ago(2 * M + 5 * S) } },
          },
        ],
      },
    });
    expect(cellsOf('Pod', crashing)).toMatchObject({
      Ready: '0/1',
      Status: 'CrashLoopBackOff',
      Restarts: '3 (2m5s ago)',
    });
    const killed = pod({
      status: {
        phase: 'Running',
        containerStatuses: [{ name: 'app', state: { terminated: { exitCode: 137 } } }],
      },
    });
    expect(cellsOf('Pod', killed).Status).toBe('ExitCode:137');
  });

  it('a completed container next to a running one reads Running or NotReady', () => {
    const status = (ready: boolean) => ({
      phase: 'Running',
      conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
      containerStatuses: [
        { name: 'app', ready: true, state: { running: {} } },
        { name: 'once', ready: false, state: { terminated: { exitCode: 0, reason: 'Completed' } } },
      ],
    });
    const spec = { containers: [{ name: 'app' }, { name: 'once' }] };
    expect(cellsOf('Pod', pod({ spec, status: status(true) }))).toMatchObject({
      Ready: '1/2',
      Status: 'Running',
    });
    expect(cellsOf('Pod', pod({ spec, status: status(false) })).Status).toBe('NotReady');
  });

  it('init containers and native sidecars', () => {
    const initSpec = { initContainers: [{ name: 'migrate' }, { name: 'proxy', restartPolicy: 'Always' }] };
    const waiting = pod({
      spec: initSpec,
      status: {
        phase: 'Pending',
        initContainerStatuses: [{ name: 'migrate', state: { waiting: { reason: 'PodInitializing' } } }],
      },
    });
    expect(cellsOf('Pod', waiting)).toMatchObject({ Ready: '0/2', Status: 'Init:0/2' });
    const failed = pod({
      spec: initSpec,
      status: {
        phase: 'Pending',
        initContainerStatuses: [{ name: 'migrate', restartCount: 2, state: { terminated: { exitCode: 3 } } }],
      },
    });
    expect(cellsOf('Pod', failed)).toMatchObject({ Status: 'Init:ExitCode:3', Restarts: '2' });
    const sidecarUp = pod({
      spec: initSpec,
      status: {
        ...running,
        conditions: [...running.conditions, { type: 'Initialized', status: 'True' }],
        initContainerStatuses: [
          { name: 'migrate', state: { terminated: { exitCode: 0, reason: 'Completed' } } },
          { name: 'proxy', ready: true, started: true, restartCount: 1, state: { running: {} } },
        ],
      },
    });
    expect(cellsOf('Pod', sidecarUp)).toMatchObject({ Ready: '2/2', Status: 'Running', Restarts: '1' });
  });

  it('readiness gates count the true conditions', () => {
    const gated = pod({
      spec: { readinessGates: [{ conditionType: 'example.com/a' }, { conditionType: 'example.com/b' }] },
      status: {
        ...running,
        conditions: [
          { type: 'example.com/a', status: 'True' },
          { type: 'example.com/b', status: 'False' },
        ],
      },
    });
    expect(cellsOf('Pod', gated)['Readiness Gates']).toBe('1/2');
  });

  it('age of an object without creationTimestamp is <unknown>', () => {
    expect(cellsOf('Pod', pod({ metadata: { creationTimestamp: undefined } })).Age).toBe('<unknown>');
  });
});

describe('Node', () => {
  const node = (
    labels: Record<string, string>,
    conditions: JsonObject[],
    unschedulable = false,
  ): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'n1', labels, creationTimestamp: ago(3 * D) },
    spec: unschedulable ? { unschedulable: true } : {},
    status: {
      conditions,
      addresses: [
        { type: 'Hostname', address: 'n1' },
        { type: 'InternalIP', address: '192.168.1.10' },
      ],
      nodeInfo: {
        kubeletVersion: 'v1.32.4',
        osImage: 'Debian GNU/Linux 12',
        kernelVersion: '6.1.0',
        containerRuntimeVersion: 'containerd://1.7.0',
      },
    },
  });

  it('status, roles, age, version and the wide columns', () => {
    const cells = cellsOf(
      'Node',
      node(
        {
          'node-role.kubernetes.io/worker': '',
          'node-role.kubernetes.io/control-plane': '',
          'kubernetes.io/role': 'infra',
        },
        [
          { type: 'MemoryPressure', status: 'False' },
          { type: 'Ready', status: 'True' },
        ],
      ),
    );
    expect(cells).toEqual({
      Name: 'n1',
      Status: 'Ready',
      Roles: 'control-plane,infra,worker',
      Age: '3d',
      Version: 'v1.32.4',
      'Internal-IP': '192.168.1.10',
      'External-IP': '<none>',
      'OS-Image': 'Debian GNU/Linux 12',
      'Kernel-Version': '6.1.0',
      'Container-Runtime': 'containerd://1.7.0',
    });
  });

  it('NotReady, Unknown and SchedulingDisabled', () => {
    expect(cellsOf('Node', node({}, [{ type: 'Ready', status: 'False' }], true))).toMatchObject({
      Status: 'NotReady,SchedulingDisabled',
      Roles: '<none>',
    });
    expect(cellsOf('Node', node({}, [{ type: 'Ready', status: 'Unknown' }])).Status).toBe('NotReady');
    expect(cellsOf('Node', node({}, [], true)).Status).toBe('Unknown,SchedulingDisabled');
  });
});

describe('workloads', () => {
  const template = {
    spec: {
      containers: [
        { name: 'a', image: 'img:1' },
        { name: 'b', image: 'img:2' },
      ],
    },
  };

  it('Deployment: Name, Ready, Up-to-date, Available, Age', () => {
    const deployment: KubeObject = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', creationTimestamp: ago(90 * S) },
      spec: {
        replicas: 3,
        selector: {
          matchLabels: { app: 'web' },
          matchExpressions: [{ key: 'tier', operator: 'In', values: ['b', 'a'] }],
        },
        template,
      },
      status: { readyReplicas: 2, updatedReplicas: 1, availableReplicas: 2 },
    };
    const { columns } = table('Deployment', []);
    expect(columns.filter((c) => c.priority === 0).map((c) => c.name)).toEqual([
      'Name',
      'Ready',
      'Up-to-date',
      'Available',
      'Age',
    ]);
    expect(cellsOf('Deployment', deployment)).toEqual({
      Name: 'web',
      Ready: '2/3',
      'Up-to-date': 1,
      Available: 2,
      Age: '90s',
      Containers: 'a,b',
      Images: 'img:1,img:2',
      Selector: 'app=web,tier in (a,b)',
    });
    // spec.replicas defaults to 1; an absent status reads as zeros.
    expect(cellsOf('Deployment', { ...deployment, spec: { template }, status: {} })).toMatchObject({
      Ready: '0/1',
      Available: 0,
      Selector: '',
    });
  });

  it('ReplicaSet, StatefulSet, DaemonSet', () => {
    const meta = { name: 'w', creationTimestamp: ago(10 * S) };
    expect(
      cellsOf('ReplicaSet', {
        metadata: meta,
        spec: { replicas: 2, template, selector: { matchLabels: { app: 'w' } } },
        status: { replicas: 2, readyReplicas: 1 },
      }),
    ).toMatchObject({ Desired: 2, Current: 2, Ready: 1, Selector: 'app=w' });
    expect(
      cellsOf('StatefulSet', {
        metadata: meta,
        spec: { replicas: 3, template },
        status: { readyReplicas: 3 },
      }),
    ).toMatchObject({
      Ready: '3/3',
      Containers: 'a,b',
    });
    expect(
      cellsOf('DaemonSet', {
        metadata: meta,
        spec: {
          template: { spec: { ...template.spec, nodeSelector: { 'kubernetes.io/os': 'linux' } } },
          selector: {},
        },
        status: {
          desiredNumberScheduled: 4,
          currentNumberScheduled: 4,
          numberReady: 3,
          updatedNumberScheduled: 4,
          numberAvailable: 3,
        },
      }),
    ).toMatchObject({ Desired: 4, Ready: 3, 'Node Selector': 'kubernetes.io/os=linux', Selector: '<none>' });
  });

  it('Job status, completions and duration; CronJob', () => {
    const job = (status: JsonObject, spec: JsonObject = { completions: 1 }, metadata = {}): KubeObject => ({
      metadata: { name: 'j', creationTimestamp: ago(10 * M), ...metadata },
      spec: { ...spec, template },
      status,
    });
    expect(
      cellsOf(
        'Job',
        job({
          succeeded: 1,
          startTime: ago(10 * M),
          completionTime: ago(7 * M),
          conditions: [{ type: 'Complete', status: 'True' }],
        }),
      ),
    ).toMatchObject({
      Status: 'Complete',
      Completions: '1/1',
      Duration: '3m',
    });
    expect(cellsOf('Job', job({ startTime: ago(45 * S) }, { parallelism: 3 }))).toMatchObject({
      Status: 'Running',
      Completions: '0/1 of 3',
      Duration: '45s',
    });
    expect(cellsOf('Job', job({ conditions: [{ type: 'Suspended', status: 'True' }] }))).toMatchObject({
      Status: 'Suspended',
      Duration: '',
    });
    expect(cellsOf('Job', job({}, {}, { deletionTimestamp: ago(0) })).Status).toBe('Terminating');

    const cron: KubeObject = {
      metadata: { name: 'c', creationTimestamp: ago(2 * H) },
      spec: { schedule: '*/5 * * * *', jobTemplate: { spec: { template } } },
      status: { active: [{ name: 'c-1' }], lastScheduleTime: ago(4 * M) },
    };
    expect(cellsOf('CronJob', cron)).toMatchObject({
      Schedule: '*/5 * * * *',
      Timezone: '<none>',
      Suspend: 'False',
      Active: 1,
      'Last Schedule': '4m',
      Age: '120m',
    });
  });
});

describe('other built-in kinds', () => {
  const meta = (name: string): KubeObject['metadata'] => ({
    name,
    namespace: 'ns',
    creationTimestamp: ago(30 * S),
  });

  it('Service', () => {
    const svc = (spec: JsonObject, status: JsonObject = {}): KubeObject => ({
      metadata: meta('s'),
      spec,
      status,
    });
    expect(
      cellsOf(
        'Service',
        svc({
          clusterIP: '10.96.0.10',
          clusterIPs: ['10.96.0.10'],
          ports: [
            { port: 443, protocol: 'TCP' },
            { port: 53, protocol: 'UDP' },
          ],
          selector: { app: 'dns' },
        }),
      ),
    ).toEqual({
      Name: 's',
      Type: 'ClusterIP',
      'Cluster-IP': '10.96.0.10',
      'External-IP': '<none>',
      'Port(s)': '443/TCP,53/UDP',
      Age: '30s',
      Selector: 'app=dns',
    });
    expect(
      cellsOf(
        'Service',
        svc({ type: 'LoadBalancer', clusterIPs: ['10.0.0.1'], ports: [{ port: 80, nodePort: 30080 }] }),
      ),
    ).toMatchObject({
      'External-IP': '<pending>',
      'Port(s)': '80:30080/TCP',
      Selector: '<none>',
    });
    expect(cellsOf('Service', svc({ type: 'ExternalName', externalName: 'example.com' }))).toMatchObject({
      'Cluster-IP': '<none>',
      'External-IP': 'example.com',
      'Port(s)': '<none>',
    });
  });

  it('ConfigMap, Secret, ServiceAccount, Namespace, Lease, webhook configurations', () => {
    expect(
      cellsOf('ConfigMap', { metadata: meta('cm'), data: { a: '1', b: '2' }, binaryData: { c: 'AA==' } }),
    ).toMatchObject({ Data: 3 });
    expect(cellsOf('Secret', { metadata: meta('s'), data: { k: 'dg==' } })).toMatchObject({
      Type: 'Opaque',
      Data: 1,
    });
    expect(cellsOf('Secret', { metadata: meta('s'), type: 'kubernetes.io/tls', data: {} })).toMatchObject({
      Type: 'kubernetes.io/tls',
      Data: 0,
    });
    expect(cellsOf('ServiceAccount', { metadata: meta('sa') })).toEqual({
      Name: 'sa',
      Secrets: 0,
      Age: '30s',
    });
    expect(cellsOf('Namespace', { metadata: meta('ns'), status: { phase: 'Terminating' } })).toEqual({
      Name: 'ns',
      Status: 'Terminating',
      Age: '30s',
    });
    expect(cellsOf('Lease', { metadata: meta('l'), spec: { holderIdentity: 'pod-a_123' } })).toEqual({
      Name: 'l',
      Holder: 'pod-a_123',
      Age: '30s',
    });
    expect(cellsOf('Lease', { metadata: meta('l'), spec: {} }).Holder).toBe('');
    expect(cellsOf('MutatingWebhookConfiguration', { metadata: meta('m'), webhooks: [{}, {}] })).toEqual({
      Name: 'm',
      Webhooks: 2,
      Age: '30s',
    });
    expect(cellsOf('ValidatingWebhookConfiguration', { metadata: meta('v') }).Webhooks).toBe(0);
  });

  it('RoleBinding and ClusterRoleBinding; Role and ClusterRole use the default convertor', () => {
    expect(
      cellsOf('RoleBinding', {
        metadata: meta('rb'),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
        subjects: [
          { kind: 'User', name: 'alice' },
          { kind: 'Group', name: 'devs' },
          { kind: 'ServiceAccount', name: 'op', namespace: 'berth' },
          { kind: 'User', name: 'bob' },
        ],
      }),
    ).toEqual({
      Name: 'rb',
      Role: 'ClusterRole/edit',
      Age: '30s',
      Users: 'alice, bob',
      Groups: 'devs',
      ServiceAccounts: 'berth/op',
    });
    expect(table('ClusterRoleBinding', []).columns.map((c) => c.name)).toEqual([
      'Name',
      'Role',
      'Age',
      'Users',
      'Groups',
      'ServiceAccounts',
    ]);
    for (const kind of ['Role', 'ClusterRole', 'CustomResourceDefinition', 'SomethingElse']) {
      expect(cellsOf(kind, { metadata: { name: 'x', creationTimestamp: '2025-05-01T10:20:30Z' } })).toEqual({
        Name: 'x',
        'Created At': '2025-05-01T10:20:30Z',
      });
    }
    expect(table('ClusterRole', []).columns.map((c) => [c.name, c.type])).toEqual([
      ['Name', 'string'],
      ['Created At', 'date'],
    ]);
  });

  it('Event, core/v1 and events.k8s.io/v1', () => {
    const core: KubeObject = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: meta('web-0.abc'),
      involvedObject: { kind: 'Pod', name: 'web-0', fieldPath: 'spec.containers{app}' },
      reason: 'Pulled',
      type: 'Normal',
      message: ' pulled image \n',
      source: { component: 'kubelet', host: 'n1' },
      firstTimestamp: ago(10 * M),
      lastTimestamp: ago(3 * M),
      count: 4,
    };
    expect(cellsOf('Event', core)).toEqual({
      'Last Seen': '3m',
      Type: 'Normal',
      Reason: 'Pulled',
      Object: 'pod/web-0',
      Subobject: 'spec.containers{app}',
      Source: 'kubelet, n1',
      Message: 'pulled image',
      'First Seen': '10m',
      Count: 4,
      Name: 'web-0.abc',
    });
    const modern: KubeObject = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: meta('bl.1'),
      regarding: { kind: 'BerthLease', name: 'bl' },
      note: 'acquired',
      reason: 'Acquired',
      type: 'Normal',
      eventTime: ago(20 * S),
      reportingController: 'berth.skaphos.io/operator',
      reportingInstance: 'pod-a',
    };
    expect(cellsOf('Event', modern)).toMatchObject({
      'Last Seen': '20s',
      Object: 'berthlease/bl',
      Source: 'berth.skaphos.io/operator, pod-a',
      Message: 'acquired',
      'First Seen': '20s',
      Count: 1,
    });
  });
});

describe('custom resources', () => {
  const lease = (status: JsonObject = {}): KubeObject => ({
    apiVersion: 'berth.skaphos.io/v1alpha1',
    kind: 'BerthLease',
    metadata: { name: 'bl', namespace: 'ns', creationTimestamp: ago(3 * M + 2 * S) },
    spec: { target: { name: 'web', kind: 'Deployment' }, ttlSeconds: 30 },
    status,
  });
  const columns: PrinterColumn[] = [
    { name: 'State', type: 'string', jsonPath: '.status.state' },
    { name: 'Target', type: 'string', jsonPath: '.spec.target' },
    {
      name: 'TTL',
      type: 'integer',
      jsonPath: '.spec.ttlSeconds',
      priority: 1,
      description: 'Lease duration',
    },
    { name: 'Held', type: 'boolean', jsonPath: '.status.held' },
    { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    { name: 'Renewed', type: 'date', jsonPath: '.status.renewTime', format: 'date-time' },
  ];

  it('printer columns come after Name, with kube descriptions and priorities', () => {
    const { columns: defs } = table('BerthLease', [], { printerColumns: columns });
    expect(defs[0]?.name).toBe('Name');
    expect(defs[1]).toEqual({
      name: 'State',
      type: 'string',
      format: '',
      description: 'Custom resource definition column (in JSONPath format): .status.state',
      priority: 0,
    });
    expect(defs[3]).toEqual({
      name: 'TTL',
      type: 'integer',
      format: '',
      description: 'Lease duration',
      priority: 1,
    });
    expect(defs[6]).toMatchObject({ name: 'Renewed', type: 'date', format: 'date-time' });
  });

  it('evaluates JSONPaths like kube; missing values are empty (null) cells', () => {
    const full = lease({
      state: 'Held',
      held: true,
      renewTime: ago(12 * S),
      conditions: [
        { type: 'Other', status: 'False' },
        { type: 'Ready', status: 'True' },
      ],
    });
    expect(cellsOf('BerthLease', full, { printerColumns: columns })).toEqual({
      Name: 'bl',
      State: 'Held',
      Target: '{"kind":"Deployment","name":"web"}',
      TTL: 30,
      Held: true,
      Ready: 'True',
      Renewed: '12s',
    });
    expect(cellsOf('BerthLease', lease(), { printerColumns: columns })).toEqual({
      Name: 'bl',
      State: null,
      Target: '{"kind":"Deployment","name":"web"}',
      TTL: 30,
      Held: null,
      Ready: null,
      Renewed: null,
    });
    expect(
      cellsOf('BerthLease', lease({ renewTime: 'yesterday' }), { printerColumns: columns }).Renewed,
    ).toBe('<invalid>');
    const numbers: PrinterColumn[] = [
      { name: 'N', type: 'string', jsonPath: '.spec.ttlSeconds' },
      { name: 'I', type: 'integer', jsonPath: '.status.ratio' },
      { name: 'F', type: 'number', jsonPath: '.status.ratio' },
    ];
    expect(cellsOf('BerthLease', lease({ ratio: 2.75 }), { printerColumns: numbers })).toEqual({
      Name: 'bl',
      N: '30',
      I: 2,
      F: 2.75,
    });
  });

  it('without additionalPrinterColumns: Name and an Age date column', () => {
    const { columns: defs, rows } = table('BerthLease', [lease()], { printerColumns: [] });
    expect(defs.map((c) => [c.name, c.type])).toEqual([
      ['Name', 'string'],
      ['Age', 'date'],
    ]);
    expect(defs[1]?.description).toMatch(/^CreationTimestamp is a timestamp/);
    expect(rows?.[0]?.cells).toEqual(['bl', '3m2s']);
    expect(table('BerthLease', [], { printerColumns: [] }).rows).toEqual([]);
  });

  it('crdPrinterColumns picks the served version and defaults to Age', () => {
    const crd: KubeObject = {
      metadata: { name: 'berthleases.berth.skaphos.io' },
      spec: {
        versions: [
          {
            name: 'v1alpha1',
            additionalPrinterColumns: [
              { name: 'State', type: 'string', jsonPath: '.status.state', priority: 0 },
            ],
          },
          { name: 'v1alpha2' },
        ],
      },
    };
    expect(crdPrinterColumns(crd, 'v1alpha1')).toEqual([
      { name: 'State', type: 'string', jsonPath: '.status.state', priority: 0 },
    ]);
    expect(crdPrinterColumns(crd, 'v1alpha2').map((c) => [c.name, c.type, c.jsonPath])).toEqual([
      ['Age', 'date', '.metadata.creationTimestamp'],
    ]);
  });
});

describe('Table envelope and includeObject', () => {
  const cm: KubeObject = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'cm',
      namespace: 'ns',
      uid: 'u',
      resourceVersion: '9',
      labels: { a: 'b' },
      creationTimestamp: ago(S),
    },
    data: { k: 'v' },
  };

  it('is a meta.k8s.io/v1 Table with list metadata', () => {
    const { raw } = table('ConfigMap', [cm], { continueToken: 'next' });
    expect(Object.keys(raw)).toEqual(['kind', 'apiVersion', 'metadata', 'columnDefinitions', 'rows']);
    expect(raw).toMatchObject({
      kind: 'Table',
      apiVersion: 'meta.k8s.io/v1',
      metadata: { resourceVersion: '42', continue: 'next' },
    });
    expect(table('ConfigMap', []).raw.metadata).toEqual({ resourceVersion: '42' });
    expect(table('ConfigMap', []).rows).toEqual([]);
    expect(table('Role', []).rows).toBeNull();
  });

  it('Metadata (default) carries PartialObjectMetadata', () => {
    const expected = { apiVersion: 'meta.k8s.io/v1', kind: 'PartialObjectMetadata', metadata: cm.metadata };
    expect(table('ConfigMap', [cm]).rows?.[0]?.object).toEqual(expected);
    expect(table('ConfigMap', [cm], { includeObject: 'Metadata' }).rows?.[0]?.object).toEqual(expected);
  });

  it('Object carries the whole object, None carries null', () => {
    expect(table('ConfigMap', [cm], { includeObject: 'Object' }).rows?.[0]?.object).toEqual(cm);
    const none = table('ConfigMap', [cm], { includeObject: 'None' }).rows?.[0];
    expect(none?.object).toBeNull();
    expect(none?.cells).toEqual(['cm', 1, '1s']);
  });

  it('rejects an unknown includeObject value with 400 like the apiserver', () => {
    const run = () =>
      buildTable('ConfigMap', [cm], { now: NOW, resourceVersion: '1', includeObject: 'All' as 'None' });
    expect(run).toThrow(StatusError);
    expect(run).toThrow('unrecognized includeObject value: "All"');
  });
});
