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
#define FAILOVER_ACCEPTED 3 /* the largest failover bound (whole ticks) failoverMarginProblem accepts for this spec without its Warning */
#define STOP_LEAD 0 /* ticks before the recorded deadline at which workloadActiveAt turns false */
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
#define FAILOVER_ACCEPTED 21 /* the largest failover bound (whole ticks) failoverMarginProblem accepts for this spec without its Warning */
#define STOP_LEAD 0 /* ticks before the recorded deadline at which workloadActiveAt turns false */
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
#define FAILOVER_ACCEPTED 39 /* the largest failover bound (whole ticks) failoverMarginProblem accepts for this spec without its Warning */
#define STOP_LEAD 0 /* ticks before the recorded deadline at which workloadActiveAt turns false */
#define SCOPE_TICK_MS 1000 /* the scope model's tick, in ms */
#define SCOPE_SETTLE 5 /* SCOPE_SETTLE_MS 5000 (src/berth/api.ts), in scope ticks */
#endif
