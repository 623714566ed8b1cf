// A webhook test server's own view of the opt-in scope, as every replica of `run` keeps it
// (src/berth/namespace-scope.ts): started, listed once, and, with a ManualClock, advanced past the settle
// period so that the namespaces already labelled count as settled.
import { SCOPE_SETTLE_MS } from '../../src/berth/api.ts';
import { NamespaceScope } from '../../src/berth/namespace-scope.ts';
import type { ManualClock } from '../../src/kube/clock.ts';
import type { KubeRequester } from '../../src/kube/transport.ts';

export async function startScopeView(transport: KubeRequester, clock?: ManualClock): Promise<NamespaceScope> {
  const scope = new NamespaceScope({ transport, ...(clock ? { clock } : {}) });
  scope.informer.start();
  await scope.informer.waitForSync();
  clock?.advance(SCOPE_SETTLE_MS);
  return scope;
}
