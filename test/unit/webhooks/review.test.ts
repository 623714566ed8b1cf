// Golden tests of the response builder: every decision shape becomes an answer kube-apiserver accepts
// (VerifyAdmissionResponse, test/fixtures/webhooks/verify-response.ts), in both review versions.
import { describe, expect, it } from 'vitest';
import {
  admissionReviewSchema,
  allow,
  answerApiVersion,
  type Decision,
  deny,
  reviewResponse,
  usableUid,
} from '../../../webhooks/review.ts';
import { checkAnswer } from '../../fixtures/webhooks/golden.ts';
import { reviewBody, workload } from '../../fixtures/webhooks/objects.ts';

const UID = '705ab4f5-6393-11e8-b7cc-42010a800002';

const decisions: [string, Decision, boolean][] = [
  ['allow', allow(), true],
  ['allow with an empty patch', allow({ patch: [] }), true],
  [
    'allow with a patch',
    allow({ patch: [{ op: 'add', path: '/metadata/labels', value: { a: 'b' } }] }),
    true,
  ],
  ['allow with warnings', allow({ warnings: ['w'.repeat(500)] }), true],
  ['deny 403', deny('rule', 'managed Pod is still scheduling gated'), false],
  ['deny 400', deny('malformed', 'malformed AdmissionReview: request.kind: required', 400), false],
  ['deny 500', deny('internal-error', 'internal error: x', 500), false],
  ['deny 504', deny('deadline', 'admission review deadline exceeded', 504), false],
  ['deny with an out-of-range code', deny('rule', 'x', 200), false],
];

describe('reviewResponse passes the API server checks', () => {
  for (const [name, decision, allowed] of decisions) {
    for (const version of ['v1', 'v1beta1'] as const) {
      it(`${name} (${version})`, () => {
        const review = reviewResponse(`admission.k8s.io/${version}`, UID, decision);
        const body = JSON.stringify(review);
        const hasPatch = decision.allowed && (decision.patch?.length ?? 0) > 0;
        // A validating webhook may not answer with a patch; the mutating one may.
        const answer = checkAnswer(
          200,
          'application/json',
          body,
          UID,
          hasPatch || version === 'v1beta1',
          version,
        );
        expect(answer.allowed).toBe(allowed);
        expect(review.response.uid).toBe(UID);
        expect('patchType' in review.response).toBe(hasPatch);
        if (!allowed) expect(answer.code).toBeGreaterThanOrEqual(400);
        for (const w of review.response.warnings ?? []) expect(w.length).toBeLessThanOrEqual(120);
      });
    }
  }

  it('a denial maps its code to a Status reason', () => {
    expect(reviewResponse('admission.k8s.io/v1', UID, deny('r', 'm')).response.status).toEqual({
      code: 403,
      reason: 'Forbidden',
      message: 'm',
    });
    expect(reviewResponse('admission.k8s.io/v1', UID, deny('r', 'm', 504)).response.status?.reason).toBe(
      'Timeout',
    );
  });
});

describe('reading the request', () => {
  it('usableUid', () => {
    expect(usableUid({ request: { uid: UID } })).toBe(UID);
    for (const body of [
      null,
      [],
      {},
      { request: [] },
      { request: { uid: '' } },
      { request: { uid: 7 } },
      { request: { uid: 'a b' } },
    ]) {
      expect(usableUid(body), JSON.stringify(body)).toBeUndefined();
    }
  });

  it('answerApiVersion', () => {
    expect(answerApiVersion({ apiVersion: 'admission.k8s.io/v1beta1' })).toBe('admission.k8s.io/v1beta1');
    expect(answerApiVersion({ apiVersion: 'admission.k8s.io/v1' })).toBe('admission.k8s.io/v1');
    expect(answerApiVersion({ apiVersion: 'x' })).toBe('admission.k8s.io/v1');
    expect(answerApiVersion('x')).toBe('admission.k8s.io/v1');
  });

  it('accepts what kube-apiserver sends (null oldObject, options, groups)', () => {
    const parsed = admissionReviewSchema.safeParse(reviewBody('Pod', 'CREATE', workload('Pod', 'p')));
    expect(parsed.success).toBe(true);
  });
});
