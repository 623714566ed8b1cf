// The condition message of a failed central call: stable while the cause persists, so a persisting
// error writes no new status.
import { LeaseClientError } from './leaseclient.ts';

/** Longest condition message taken from an error. */
const MAX_ERROR_MESSAGE = 1024;

export function centralErrorMessage(err: unknown): string {
  let text = err instanceof Error ? err.message : String(err);
  // A 5xx carries a fresh request id each time; it is logged, not written to the status.
  if (err instanceof LeaseClientError && err.requestId !== undefined)
    text = text.replace(/ \(requestId [^)]*\)$/, '');
  return text.length > MAX_ERROR_MESSAGE ? `${text.slice(0, MAX_ERROR_MESSAGE)}...` : text;
}
