/*
 * GENERATED from the code by verify/constants.ts; do not edit. Regenerate: npm run verify:constants.
 * A unit test (test/unit/verify/constants.test.ts) fails when this file and the code drift apart.
 * Values are in ticks unless named otherwise; PROFILE 1 is the CI bound, 2 the deeper one, 3 the defaults.
 */
#ifndef PROFILE
#define PROFILE 1
#endif

#if PROFILE == 1 /* ci: ttlSeconds 6, heartbeat 2 s, tick 1000 ms */
#define TICK_MS 1000 /* the length of one tick, in ms */
#define TTL 6 /* spec.ttlSeconds 6 */
#define HB 2 /* spec.heartbeatIntervalSeconds 2 */
#define ACQ_BUDGET 2 /* acquireBudgetMs(heartbeat) = min(heartbeat, ACQUIRE_TIMEOUT_MS 2500) */
#define ERR_REQUEUE 1 /* acquireErrorRequeueMs(heartbeat) = min(heartbeat, REQUEUE_ON_FAILURE_MS) */
#define REQUEUE_FAIL 1 /* REQUEUE_ON_FAILURE_MS (drain in progress, after a stop, failed release) */
#define REACQUIRE 2 /* reacquireIntervalMs(heartbeat, ttl) (a standby polls) */
#define RELEASE_BUDGET 2 /* RELEASE_TIMEOUT_MS 2500, in whole ticks (an unanswered release fails at the last tick before its bound) */
#define FAILOVER 2 /* leaderFailoverBoundMs(1000, 400) = 1880 ms, rounded up */
#define FAILOVER_ACCEPTED 0 /* the largest failover bound (whole ticks) failoverMarginProblem accepts for this spec without its Warning */
#define STOP_LEAD 1 /* --stop-lead=1s: ticks before the recorded deadline at which workloadActiveAt turns false */
#define POD_KILL_MARGIN_MS 1000 /* POD_KILL_MARGIN_MS, in ms: a bounded Pod grace ends this long before the deadline */
#define GRACE_MIN 1 /* podStopGraceSeconds past the deadline (its floor), in ticks */
#define H_TTL 7 /* BERTH_TTL_SECONDS 7 */
#define H_HB 2 /* resolveConfig: heartbeat 2000 ms */
#define H_LEAD 4 /* configLeadMs = enforcementLeadMs(probe, grace 0) = 4000 ms */
#define H_RESTART_POD 3 /* RESTART_POD_STOP_MS: the kubelet's kill of every container after the sidecar's exit (RESTART 3) */
#define H_WINDOW 3 /* ttl - lead: fenceAt = send + window (the Sidecar's window) */
#define H_CALL 2 /* callTimeoutMs(heartbeat) = min(10000, max(1000, heartbeat)) (berth-acquire) */
#define H_RETRY_HELD 2 /* retryDelayMs('held-by-other') (berth-acquire asks again) */
#define H_RETRY_ERR 1 /* retryDelayMs('error', 1) = 500 ms, rounded up (the back-off only doubles from there) */
#define H_PERIOD 2 /* berthLivenessProbe periodSeconds 2 */
#define H_FAILS 1 /* berthLivenessProbe failureThreshold (failed probes before the kill) */
#define H_GRACE 1 /* berthLivenessProbe terminationGracePeriodSeconds 1 (probeKillGraceSeconds(0)) */
#define H_MARGIN 1 /* KILL_MARGIN_MS (after the grace, for the container to be gone) */
#define H_STARTUP 1 /* berthSidecarStartupProbe periodSeconds (the main container's first start) */
#define H_POD_GRACE 30 /* Kubernetes' default terminationGracePeriodSeconds (30 s): the kill of hole 2 */
#define H_BACKOFF 10 /* the kubelet's crash back-off before the second restart (10 s) */
#define SCOPE_TICK_MS 2500 /* the scope model's tick, in ms */
#define SCOPE_SETTLE 2 /* SCOPE_SETTLE_MS 5000 (src/berth/api.ts), in scope ticks */
#endif

#if PROFILE == 2 /* deep: ttlSeconds 24, heartbeat 2 s, tick 1000 ms */
#define TICK_MS 1000 /* the length of one tick, in ms */
#define TTL 24 /* spec.ttlSeconds 24 */
#define HB 2 /* spec.heartbeatIntervalSeconds 2 */
#define ACQ_BUDGET 2 /* acquireBudgetMs(heartbeat) = min(heartbeat, ACQUIRE_TIMEOUT_MS 2500) */
#define ERR_REQUEUE 1 /* acquireErrorRequeueMs(heartbeat) = min(heartbeat, REQUEUE_ON_FAILURE_MS) */
#define REQUEUE_FAIL 1 /* REQUEUE_ON_FAILURE_MS (drain in progress, after a stop, failed release) */
#define REACQUIRE 2 /* reacquireIntervalMs(heartbeat, ttl) (a standby polls) */
#define RELEASE_BUDGET 2 /* RELEASE_TIMEOUT_MS 2500, in whole ticks (an unanswered release fails at the last tick before its bound) */
#define FAILOVER 20 /* leaderFailoverBoundMs(15000, 2000) = 19400 ms, rounded up */
#define FAILOVER_ACCEPTED 14 /* the largest failover bound (whole ticks) failoverMarginProblem accepts for this spec without its Warning */
#define STOP_LEAD 5 /* --stop-lead=5s: ticks before the recorded deadline at which workloadActiveAt turns false */
#define POD_KILL_MARGIN_MS 1000 /* POD_KILL_MARGIN_MS, in ms: a bounded Pod grace ends this long before the deadline */
#define GRACE_MIN 1 /* podStopGraceSeconds past the deadline (its floor), in ticks */
#define H_TTL 12 /* BERTH_TTL_SECONDS 12 */
#define H_HB 3 /* resolveConfig: heartbeat 3000 ms */
#define H_LEAD 4 /* configLeadMs = enforcementLeadMs(probe, grace 0) = 4000 ms */
#define H_RESTART_POD 3 /* RESTART_POD_STOP_MS: the kubelet's kill of every container after the sidecar's exit (RESTART 3) */
#define H_WINDOW 8 /* ttl - lead: fenceAt = send + window (the Sidecar's window) */
#define H_CALL 3 /* callTimeoutMs(heartbeat) = min(10000, max(1000, heartbeat)) (berth-acquire) */
#define H_RETRY_HELD 3 /* retryDelayMs('held-by-other') (berth-acquire asks again) */
#define H_RETRY_ERR 1 /* retryDelayMs('error', 1) = 500 ms, rounded up (the back-off only doubles from there) */
#define H_PERIOD 2 /* berthLivenessProbe periodSeconds 2 */
#define H_FAILS 1 /* berthLivenessProbe failureThreshold (failed probes before the kill) */
#define H_GRACE 1 /* berthLivenessProbe terminationGracePeriodSeconds 1 (probeKillGraceSeconds(0)) */
#define H_MARGIN 1 /* KILL_MARGIN_MS (after the grace, for the container to be gone) */
#define H_STARTUP 1 /* berthSidecarStartupProbe periodSeconds (the main container's first start) */
#define H_POD_GRACE 30 /* Kubernetes' default terminationGracePeriodSeconds (30 s): the kill of hole 2 */
#define H_BACKOFF 10 /* the kubelet's crash back-off before the second restart (10 s) */
#define SCOPE_TICK_MS 1250 /* the scope model's tick, in ms */
#define SCOPE_SETTLE 4 /* SCOPE_SETTLE_MS 5000 (src/berth/api.ts), in scope ticks */
#endif

#if PROFILE == 3 /* defaults: ttlSeconds 30, heartbeat 10 s, tick 500 ms */
#define TICK_MS 500 /* the length of one tick, in ms */
#define TTL 60 /* spec.ttlSeconds 30 */
#define HB 20 /* spec.heartbeatIntervalSeconds 10 */
#define ACQ_BUDGET 5 /* acquireBudgetMs(heartbeat) = min(heartbeat, ACQUIRE_TIMEOUT_MS 2500) */
#define ERR_REQUEUE 2 /* acquireErrorRequeueMs(heartbeat) = min(heartbeat, REQUEUE_ON_FAILURE_MS) */
#define REQUEUE_FAIL 2 /* REQUEUE_ON_FAILURE_MS (drain in progress, after a stop, failed release) */
#define REACQUIRE 20 /* reacquireIntervalMs(heartbeat, ttl) (a standby polls) */
#define RELEASE_BUDGET 5 /* RELEASE_TIMEOUT_MS 2500, in whole ticks (an unanswered release fails at the last tick before its bound) */
#define FAILOVER 39 /* leaderFailoverBoundMs(15000, 2000) = 19400 ms, rounded up */
#define FAILOVER_ACCEPTED 24 /* the largest failover bound (whole ticks) failoverMarginProblem accepts for this spec without its Warning */
#define STOP_LEAD 10 /* --stop-lead=5s: ticks before the recorded deadline at which workloadActiveAt turns false */
#define POD_KILL_MARGIN_MS 1000 /* POD_KILL_MARGIN_MS, in ms: a bounded Pod grace ends this long before the deadline */
#define GRACE_MIN 2 /* podStopGraceSeconds past the deadline (its floor), in ticks */
#define H_TTL 60 /* BERTH_TTL_SECONDS 30 */
#define H_HB 20 /* resolveConfig: heartbeat 10000 ms (ttl/3) */
#define H_LEAD 8 /* configLeadMs = enforcementLeadMs(probe, grace 0) = 4000 ms */
#define H_RESTART_POD 6 /* RESTART_POD_STOP_MS: the kubelet's kill of every container after the sidecar's exit (RESTART 3) */
#define H_WINDOW 52 /* ttl - lead: fenceAt = send + window (the Sidecar's window) */
#define H_CALL 20 /* callTimeoutMs(heartbeat) = min(10000, max(1000, heartbeat)) (berth-acquire) */
#define H_RETRY_HELD 20 /* retryDelayMs('held-by-other') (berth-acquire asks again) */
#define H_RETRY_ERR 1 /* retryDelayMs('error', 1) = 500 ms, rounded up (the back-off only doubles from there) */
#define H_PERIOD 4 /* berthLivenessProbe periodSeconds 2 */
#define H_FAILS 1 /* berthLivenessProbe failureThreshold (failed probes before the kill) */
#define H_GRACE 2 /* berthLivenessProbe terminationGracePeriodSeconds 1 (probeKillGraceSeconds(0)) */
#define H_MARGIN 2 /* KILL_MARGIN_MS (after the grace, for the container to be gone) */
#define H_STARTUP 2 /* berthSidecarStartupProbe periodSeconds (the main container's first start) */
#define H_POD_GRACE 60 /* Kubernetes' default terminationGracePeriodSeconds (30 s): the kill of hole 2 */
#define H_BACKOFF 20 /* the kubelet's crash back-off before the second restart (10 s) */
#define SCOPE_TICK_MS 1000 /* the scope model's tick, in ms */
#define SCOPE_SETTLE 5 /* SCOPE_SETTLE_MS 5000 (src/berth/api.ts), in scope ticks */
#endif

/* the code's bounded Pod grace (drain.ts podStopGraceSeconds, a Pod whose own grace is longer) with d
   ticks left to the deadline, in ticks: max(1 s, floor((d - margin) / 1 s)); checked against the code */
#define GRACE_FIT(d) (((d) * TICK_MS - POD_KILL_MARGIN_MS) / 1000 * (1000 / TICK_MS))
#define GRACE(d) (GRACE_FIT(d) > GRACE_MIN -> GRACE_FIT(d) : GRACE_MIN)
