// Every limit a soak run is judged by, in one place (docs/performance.md, "Soak", states them). Memory
// limits apply to each product process on its own (both operators, the central server, the helper
// sidecar), measured from outside (probe.ts); the harness's own memory is reported, never judged.
export const LIMITS = {
  /** Heap in use right after a full GC: Theil-Sen slope over the second half of the run, MB per minute. */
  heapSlopeMBPerMin: 0.2,
  /**
   * RSS after warm-up (the second half of the run): its Theil-Sen trend projected over the second half
   * stays within this fraction of its median level there.
   */
  rssFlatFraction: 0.1,
  /**
   * Active handles and open sockets, flat: their trend projected over the second half stays within
   * this fraction of their median level there, or within `countFlatFloor`, whichever is larger
   * (a handful of keep-alive connections come and go with the request rate).
   */
  countFlatFraction: 0.25,
  countFlatFloor: 8,
  /** Invariant breaches over the run. */
  breaches: 0,
  /** Samples the second half needs before a trend is judged (a short run is not judged on memory). */
  minSecondHalfSamples: 8,
  /** The harness's event-loop delay, p99 over the run, ms (it drives the churn and the fronts). */
  harnessLagP99Ms: 100,
} as const;
