// The database server a SQL test suite runs against: the DSN CI exported (.ci/run starts the servers with
// .ci/postgres.sh and .ci/mariadb.sh), otherwise a throwaway server started with the same script and
// stopped afterwards. Only when neither works does the suite skip, saying why (console.warn); an exported
// DSN that does not work fails the suite instead (the caller's first query throws).
import { execFile } from 'node:child_process';
import { join } from 'node:path';

export interface DatabaseScript {
  /** Product name for messages, e.g. `PostgreSQL`. */
  product: string;
  /** Under .ci/, e.g. `postgres.sh`: `start` prints `export <dsnVar>=...` and `export <dirVar>=...`. */
  script: string;
  dsnVar: string;
  dirVar: string;
  /** Set to 1 for a start that must not install the package (tests never install). */
  noInstallVar: string;
}

export interface DatabaseServer {
  dsn: string;
  /** Stops the server if this process started it. */
  stop(): Promise<void>;
}

function run(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      [join(process.cwd(), '.ci', script), ...args],
      { env, timeout: 120_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const exported = (stdout: string, name: string): string | undefined =>
  new RegExp(`export ${name}='([^']*)'`).exec(stdout)?.[1];

/** The server to use, or why there is none (then warned as a SKIP of `suite`). */
export async function databaseServer(
  d: DatabaseScript,
  suite: string,
): Promise<{ ok: true; server: DatabaseServer } | { ok: false; reason: string }> {
  const given = process.env[d.dsnVar];
  if (given !== undefined && given !== '') return { ok: true, server: { dsn: given, stop: async () => {} } };
  const started = await run(d.script, ['start'], { ...process.env, [d.noInstallVar]: '1' });
  const dsn = exported(started.stdout, d.dsnVar);
  const dir = exported(started.stdout, d.dirVar);
  if (started.code !== 0 || dsn === undefined || dir === undefined) {
    const why = started.stderr.trim().split('\n').slice(-3).join(' | ');
    const reason = `${d.dsnVar} is unset and ${d.product} could not be started: .ci/${d.script} start failed (exit ${started.code}): ${why}`;
    console.warn(`SKIP ${suite}: ${reason}`);
    return { ok: false, reason };
  }
  return {
    ok: true,
    server: {
      dsn,
      stop: async () => {
        await run(d.script, ['stop', dir], process.env);
      },
    },
  };
}
