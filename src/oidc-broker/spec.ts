// The flags of `berth-operator oidc-broker`, named and defaulted as the Go project's berth-oidc-broker
// (docs/oidc-broker.md). Imports nothing heavy: main.ts dispatches the broker before loading the other
// commands, so the sidecar never loads the Kubernetes client.
import type { CommandSpec } from '../cli.ts';

export const OIDC_BROKER_COMMAND = 'oidc-broker';

export const DEFAULT_REFRESH_SKEW = '60s';
export const DEFAULT_MIN_REFRESH_INTERVAL = '30s';
export const DEFAULT_FETCH_TIMEOUT = '30s';
export const DEFAULT_MAX_RETRY_INTERVAL = '5m';

export const oidcBrokerCommand: CommandSpec = {
  name: OIDC_BROKER_COMMAND,
  summary:
    'OAuth2 client-credentials token broker: writes the access token to a file (atomically, 0600) and refreshes it before expiry, until interrupted.',
  flags: [
    {
      name: 'oidc-issuer-url',
      kind: 'string',
      default: '',
      help: 'OIDC issuer URL (https); the token endpoint is discovered from <issuer>/.well-known/openid-configuration at start-up',
    },
    {
      name: 'oidc-token-url',
      kind: 'string',
      default: '',
      help: 'OAuth2 token endpoint URL (https); overrides discovery from --oidc-issuer-url',
    },
    { name: 'oidc-client-id', kind: 'string', default: '', help: 'OAuth2 client id (required)' },
    {
      name: 'oidc-client-secret',
      kind: 'string',
      default: '',
      help: 'OAuth2 client secret, visible in process listings: prefer --oidc-client-secret-file (exclusive with it)',
    },
    {
      name: 'oidc-client-secret-file',
      kind: 'string',
      default: '',
      help: 'file holding the OAuth2 client secret (surrounding whitespace trimmed), read once at start-up',
    },
    {
      name: 'oidc-audience',
      kind: 'string',
      default: '',
      help: 'audience parameter sent with every token request (required by some IdPs, e.g. Auth0)',
    },
    { name: 'oidc-scopes', kind: 'string', default: '', help: 'comma-separated OAuth2 scopes' },
    {
      name: 'output',
      kind: 'string',
      default: '',
      help: 'file the current access token is written to, atomically (temp file + rename), mode 0600 (required)',
    },
    {
      name: 'refresh-skew',
      kind: 'duration',
      default: DEFAULT_REFRESH_SKEW,
      help: "refresh the token this long before its declared expiry (expires_in, by the broker's clock)",
    },
    {
      name: 'min-refresh-interval',
      kind: 'duration',
      default: DEFAULT_MIN_REFRESH_INTERVAL,
      help: 'never refresh more often than this; also the first retry delay after a failed refresh',
    },
    {
      name: 'fetch-timeout',
      kind: 'duration',
      default: DEFAULT_FETCH_TIMEOUT,
      help: 'deadline of each token request; a stalled endpoint is abandoned after this long and retried',
    },
    {
      name: 'max-retry-interval',
      kind: 'duration',
      default: DEFAULT_MAX_RETRY_INTERVAL,
      help: 'cap of the retry delay, which doubles after each failed refresh from --min-refresh-interval',
    },
  ],
};
