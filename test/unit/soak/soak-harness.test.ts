// The soak's judgement and its harness's memory (issue 32): the memory verdicts on a product process's
// samples (limits.ts, sampler.ts) on synthetic series with a clock of the test's own; the API proxy
// keeps no request records when told (the harness's growth of a 10-minute run); an operator process's
// log kept under a logLimit; the SVG of the curves.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createAuthority } from '../../../hack/controlplane/pki.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { startOperatorProcess, stopOperatorProcesses } from '../../helpers/operator-process.ts';
import { LIMITS } from '../../soak/limits.ts';
import type { ProcessSample } from '../../soak/probe.ts';
import { judgeProcess, summarizeProcess } from '../../soak/sampler.ts';
import { memorySvg } from '../../soak/svg.ts';

/** A 20-minute series every 5 s: heap after GC growing `heapPerMin` MB/min around 36 MB, with GC noise. */
function series(heapPerMin: number, over: Partial<ProcessSample> = {}): ProcessSample[] {
  const out: ProcessSample[] = [];
  for (let t = 0; t <= 1_200; t += 5) {
    const noise = ((t * 7919) % 13) / 10 - 0.6;
    out.push({
      t,
      rssMB: 120,
      heapMB: 36 + (heapPerMin * t) / 60 + noise,
      handles: 50,
      sockets: 30,
      fds: 60,
      ...over,
    });
  }
  return out;
}

describe('soak memory verdicts (LIMITS)', () => {
  it('passes a flat heap with GC noise, and fails one growing just above the slope limit', () => {
    expect(judgeProcess('op', summarizeProcess(series(0)))).toEqual([]);
    const growing = judgeProcess('op', summarizeProcess(series(LIMITS.heapSlopeMBPerMin * 1.5)));
    expect(growing).toHaveLength(1);
    expect(growing[0]).toMatch(/^op: heap after GC grows 0\.3\d? MB\/min/);
  });

  it('fails RSS that climbs by more than 10 % over the second half, and sockets that pile up', () => {
    const rss = series(0).map((s) => ({ ...s, rssMB: 120 + s.t / 30 }));
    expect(judgeProcess('op', summarizeProcess(rss)).join()).toMatch(/RSS moves/);
    const sockets = series(0).map((s) => ({ ...s, sockets: 30 + Math.floor(s.t / 20) }));
    expect(judgeProcess('op', summarizeProcess(sockets)).join()).toMatch(/sockets grow/);
  });

  it('does not judge a run too short for a trend', () => {
    const short = series(5).slice(0, 2 * LIMITS.minSecondHalfSamples - 2);
    expect(judgeProcess('op', summarizeProcess(short))).toEqual([]);
  });
});

describe('the harness keeps nothing per request over a long run', () => {
  const dir = mkdtempSync(join(tmpdir(), 'soak-harness-'));
  afterAll(async () => {
    await stopOperatorProcesses();
    rmSync(dir, { recursive: true, force: true });
  });

  it('ApiProxy with keepRecords off records only 403s', async () => {
    const ca = await createAuthority('soak-test-ca');
    const serving = await ca.serving(['127.0.0.1']);
    let n = 0;
    const upstream = createServer({ key: serving.key, cert: serving.cert }, (req, res) => {
      res.writeHead(++n % 10 === 0 ? 403 : 200, { 'content-type': 'application/json' });
      res.end('{}');
      req.resume();
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const url = `https://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const proxy = await ApiProxy.start({ url, ca, adminToken: 'admin' });
    proxy.keepRecords = false;
    const { Agent, fetch } = await import('undici');
    const dispatcher = new Agent({ connect: { ca: ca.cert } });
    try {
      for (let i = 0; i < 50; i++) {
        const r = await fetch(`${proxy.url}/api/v1/namespaces/default/pods/p${i}`, {
          headers: { authorization: 'Bearer some-user' },
          dispatcher,
        });
        await r.text();
      }
      expect(proxy.records.map((r) => r.status)).toEqual([403, 403, 403, 403, 403]);
    } finally {
      await dispatcher.close();
      await proxy.stop();
      await new Promise<void>((resolve) => upstream.close(() => resolve()));
    }
  });

  it('an operator process under a logLimit keeps its start-up lines and the newest', async () => {
    const main = join(dir, 'chatty.mjs');
    writeFileSync(
      main,
      `for (let i = 0; i < 3000; i++) console.log(JSON.stringify({ msg: 'line', i }));
       console.log(JSON.stringify({ msg: 'done' })); setTimeout(() => {}, 60000);`,
    );
    const op = startOperatorProcess({ kubeconfig: '/dev/null', namespace: 'x', main, logLimit: 500 });
    await op.waitForLog((l) => l.msg === 'done');
    const logs = op.logs();
    expect(logs).toHaveLength(500);
    expect(logs[0]).toMatchObject({ i: 0 });
    expect(logs[199]).toMatchObject({ i: 199 });
    expect(logs[200]).toMatchObject({ i: 2701 });
    op.kill('SIGKILL');
    await op.exited;
  });
});

describe('memorySvg', () => {
  it('draws one polyline per curve in each panel, with a legend', () => {
    const points = [
      { t: 0, v: 30 },
      { t: 10, v: 31 },
    ];
    const svg = memorySvg('run <1>', [
      {
        title: 'heap',
        curves: [
          { name: 'operator-east', points },
          { name: 'harness', points, dashed: true },
        ],
      },
      { title: 'rss', curves: [{ name: 'operator-east', points }] },
    ]);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.match(/<polyline /g)).toHaveLength(3);
    expect(svg).toContain('run &lt;1&gt;');
    expect(svg).toContain('stroke-dasharray');
  });
});
