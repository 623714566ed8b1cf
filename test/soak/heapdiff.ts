// `node test/soak/heapdiff.ts EARLY.heapsnapshot LATE.heapsnapshot [N]`: what grew between two heap
// snapshots of one process (the soak's `--heap-snapshots` writes them). Prints the top N (default 15)
// constructors by the growth of their objects' self size, with their counts, and the top N growing
// containers (arrays, Maps, Sets, objects with many elements), each named by the edge that holds it
// (`ApiProxy.records`), so that the retainer of a growth can be named without DevTools.
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: {
    meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

interface Parsed {
  byName: Map<string, { count: number; size: number }>;
  /** Containers by `holder.edge` (the first retaining edge found): element edges. */
  containers: Map<string, number>;
}

function parse(path: string): Parsed {
  const s = JSON.parse(readFileSync(path, 'utf8')) as Snapshot;
  const nf = s.snapshot.meta.node_fields;
  const ef = s.snapshot.meta.edge_fields;
  const nodeTypes = s.snapshot.meta.node_types[0];
  const edgeTypes = s.snapshot.meta.edge_types[0];
  const N = nf.length;
  const E = ef.length;
  const [iType, iName, iSize, iEdges] = ['type', 'name', 'self_size', 'edge_count'].map((f) => nf.indexOf(f));
  const [eType, eName, eTo] = ['type', 'name_or_index', 'to_node'].map((f) => ef.indexOf(f));
  const byName = new Map<string, { count: number; size: number }>();
  const nodeCount = s.nodes.length / N;
  const label = (n: number): string => {
    const type = nodeTypes[s.nodes[n * N + (iType ?? 0)] ?? 0] ?? '?';
    const name = s.strings[s.nodes[n * N + (iName ?? 0)] ?? 0] ?? '?';
    return type === 'object' || type === 'closure' ? name : `(${type})`;
  };
  // Outgoing element/property counts, and for each node the first (holder, edge name) that points at it.
  const elements = new Uint32Array(nodeCount);
  const holder = new Int32Array(nodeCount).fill(-1);
  const holderEdge: string[] = new Array(nodeCount);
  let edge = 0;
  for (let n = 0; n < nodeCount; n++) {
    const l = label(n);
    const entry = byName.get(l) ?? { count: 0, size: 0 };
    entry.count++;
    entry.size += s.nodes[n * N + (iSize ?? 0)] ?? 0;
    byName.set(l, entry);
    const count = s.nodes[n * N + (iEdges ?? 0)] ?? 0;
    for (let k = 0; k < count; k++, edge++) {
      const type = edgeTypes[s.edges[edge * E + (eType ?? 0)] ?? 0];
      const to = (s.edges[edge * E + (eTo ?? 0)] ?? 0) / N;
      const nameOrIndex = s.edges[edge * E + (eName ?? 0)] ?? 0;
      if (type === 'element' || type === 'internal') elements[n] = (elements[n] ?? 0) + 1;
      if (holder[to] === -1 && (type === 'property' || type === 'internal' || type === 'context')) {
        holder[to] = n;
        holderEdge[to] = s.strings[nameOrIndex] ?? '?';
      }
    }
  }
  const containers = new Map<string, number>();
  for (let n = 0; n < nodeCount; n++) {
    const count = elements[n] ?? 0;
    if (count < 200) continue;
    // An array's elements hang off it directly; a Map's or Set's off its internal table, one level down.
    let at = n;
    let path = label(n);
    // Up to the first holder that is neither internal nor a bare collection: the retainer to name.
    const plain = new Set(['Map', 'Set', 'Array', 'Object', 'WeakMap']);
    for (let up = 0; up < 6 && holder[at] !== -1; up++) {
      const h = holder[at] ?? -1;
      path = `${label(h)}.${holderEdge[at]} > ${path}`;
      at = h;
      if (!label(h).startsWith('(') && !plain.has(label(h))) break;
    }
    containers.set(path, Math.max(containers.get(path) ?? 0, count));
  }
  return { byName, containers };
}

const [early, late, top = '15'] = process.argv.slice(2);
if (early === undefined || late === undefined) {
  process.stderr.write('usage: node test/soak/heapdiff.ts EARLY.heapsnapshot LATE.heapsnapshot [N]\n');
  process.exit(2);
}
const a = parse(early);
const b = parse(late);
const n = Number(top);
const mb = (x: number): string => (x / 1e6).toFixed(2);
const rows = [...b.byName].map(([name, v]) => {
  const before = a.byName.get(name) ?? { count: 0, size: 0 };
  return { name, count: v.count - before.count, size: v.size - before.size, total: v.size };
});
rows.sort((p, q) => q.size - p.size);
const total = (p: Parsed): number => [...p.byName.values()].reduce((s, v) => s + v.size, 0);
process.stdout.write(`self size ${mb(total(a))} MB -> ${mb(total(b))} MB\n`);
process.stdout.write('growth by constructor (self size MB, count, late total MB):\n');
for (const r of rows.slice(0, n))
  process.stdout.write(
    `  ${mb(r.size).padStart(8)}  ${String(r.count).padStart(8)}  ${mb(r.total).padStart(8)}  ${r.name}\n`,
  );
const grown = [...b.containers].map(([path, count]) => ({
  path,
  count,
  before: a.containers.get(path) ?? 0,
}));
grown.sort((p, q) => q.count - q.before - (p.count - p.before));
process.stdout.write('growing containers (elements early -> late, held by):\n');
for (const g of grown.slice(0, n))
  process.stdout.write(`  ${String(g.before).padStart(8)} -> ${String(g.count).padStart(8)}  ${g.path}\n`);
