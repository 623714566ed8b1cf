// Keeps @kubernetes/client-node's generated API out of the operator's memory (docs/performance.md, "leases").
// The process uses KubeConfig (client.ts) and the RequestContext that carries its authentication
// (transport.ts); every request goes through our transport. But client-node's config module imports two
// names from its generated index, and that index loads every API class and model, code that never runs:
// 46 MiB of RSS and 15 MiB of heap in a bare Node process, 21 MiB of the idle operator's RSS. This
// resolve hook gives config.js, and only config.js, a module holding just those two names. Should a
// client-node upgrade import another name there, linking fails at start-up with that name in the message
// (a test runs the binary), never later at run time.
import { registerHooks } from 'node:module';

const CONFIG_MODULE = '/@kubernetes/client-node/dist/config.js';
const GENERATED_INDEX = './gen/index.js';

/** The module config.js gets in place of the generated index. */
export function slimIndexSource(): string {
  const configuration = import.meta.resolve('@kubernetes/client-node/dist/gen/configuration.js');
  const servers = import.meta.resolve('@kubernetes/client-node/dist/gen/servers.js');
  return [
    `export { createConfiguration } from ${JSON.stringify(configuration)};`,
    `export { ServerConfiguration } from ${JSON.stringify(servers)};`,
  ].join('\n');
}

/** Call before the first import of client-node's config module: a module already loaded keeps its imports. */
export function slimClientNode(): void {
  const url = `data:text/javascript,${encodeURIComponent(slimIndexSource())}`;
  registerHooks({
    resolve(specifier, context, next) {
      if (specifier === GENERATED_INDEX && context.parentURL?.endsWith(CONFIG_MODULE)) {
        return { url, format: 'module', shortCircuit: true };
      }
      return next(specifier, context);
    },
  });
}
