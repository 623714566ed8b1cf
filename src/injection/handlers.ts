// The injection webhooks as admission-server handlers: /mutate--v1-pod and /validate--v1-pod (the paths
// controller-runtime gives a core/v1 Pod defaulter and validator, as the Go operator serves them). Both
// decide from the review alone: no API reads.
import type { AdmissionHandler } from '../../webhooks/server.ts';
import { decideInjection } from './mutate.ts';
import type { InjectorSettings } from './settings.ts';
import { decideValidation } from './validate.ts';

export const MUTATE_POD_PATH = '/mutate--v1-pod';
export const VALIDATE_POD_PATH = '/validate--v1-pod';
export const INJECT_WEBHOOK = 'inject.berth.skaphos.io';
export const VALIDATE_INJECTION_WEBHOOK = 'validate-injection.berth.skaphos.io';

export function injectionHandlers(settings: InjectorSettings): AdmissionHandler[] {
  return [
    { path: MUTATE_POD_PATH, review: async (request) => decideInjection(request, settings) },
    { path: VALIDATE_POD_PATH, review: async (request) => decideValidation(request, settings) },
  ];
}
