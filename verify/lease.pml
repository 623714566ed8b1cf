/*
 * lease.pml: the BerthLease protocol in time (docs/verification.md, "The lease model").
 *
 * Two clusters A and B run the same managed BerthLease against one central lease server. Each cluster
 * has an operator (the BerthLease reconciler of docs/behaviour.md §2.3/§2.4 and the permit path of §2.7,
 * crashing and failing over within the leader failover bound, or handing over on a graceful stop), a
 * target whose ReplicaSet creates one Pod, born gated, and a kubelet that runs an ungated Pod and takes up
 * to T_TERM ticks to stop a deleted one, but no longer than the grace the drain gives it (GRACE: the code's
 * grace bound, ending a margin before the deadline). The network loses, delays, stalls and duplicates messages within
 * a fault budget. Time is discrete (one tick = TICK_MS) and advances only when nothing else can happen,
 * so every action happens at the earliest instant it may; delays are explicit nondeterministic choices.
 * All timers are relative (ticks left), so the state space is finite and cyclic (liveness).
 *
 * Properties (assertions, checked at the transitions that could break them):
 *   at-most-once: a Pod of the lease never runs (ungated, until its containers are gone) in both clusters;
 *   registration: a Pod is ungated only once registered;
 *   tokens: the central token never decreases; a cluster never records a token below one it recorded;
 *           two clusters are never Active with the same token.
 * Liveness (LTL `live`, with -a -f): once B is cut off from the central server for good, A eventually runs
 * the workload.
 *
 * Switches (-D...): HOLE_DEADLINE_FROM_RECEIPT (hole 3), HOLE_RELEASE_BEFORE_DRAIN (hole 4); parameters
 * T_TERM, LAG, DRIFT, LEAD, FAILOVER_TICKS expose the timing assumptions (docs/verification.md): with the
 * code's stop lead, at-most-once holds while LAG + the Pods' stop (at most GRACE) + DRIFT <= LEAD.
 */
#include "constants.pml"

/* ---- bounds, overridable with -D ---- */
#ifndef NET
#define NET 0          /* every message takes 0..NET ticks */
#endif
#ifndef DELAY
#define DELAY 1        /* a delay fault (F_DELAY) holds one message up to DELAY ticks */
#endif
#ifndef FAULTS
#define FAULTS 2       /* message losses, stalls, duplicates, operator crashes, hand-overs, cuts */
#endif
#ifndef CRASHES
#define CRASHES 1      /* operator crashes (each also counts as a fault) */
#endif
#ifndef DELETES
#define DELETES 0      /* BerthLease deletions (by a user) */
#endif
#ifndef T_TERM
#define T_TERM 0       /* a deleted Pod's containers are gone within 0..min(T_TERM, its grace) ticks */
#endif
#ifndef LAG
#define LAG 0          /* a due reconcile starts within 0..LAG ticks (workqueue, worker, API latency) */
#endif
#ifndef DRIFT
#define DRIFT 0        /* a cluster's clock may measure one TTL up to DRIFT ticks long (rate drift) */
#endif
#ifndef OFFSET
#define OFFSET 0       /* each cluster's clock is off the server's by -OFFSET..OFFSET ticks */
#endif
#ifndef LEAD
#define LEAD STOP_LEAD /* the activation ends LEAD ticks before the local deadline (the code's --stop-lead) */
#endif
#ifndef FAILOVER_TICKS
#define FAILOVER_TICKS FAILOVER /* a crashed leader is replaced within this many ticks */
#endif
#ifndef MAXTOK
#define MAXTOK (FAULTS + DELETES + 3)
#endif
#ifndef PART
#define PART (TTL + 1)  /* a partition from the central server lasts this long */
#endif

#define CA 0
#define CB 1
#define OTHER(c) (1 - (c))

/* status.workload.phase */
#define PH_NONE 0
#define PH_ACTIVE 1
#define PH_STOPPING 2

/* operator */
#define OP_UP 0
#define OP_DOWN 1      /* crashed or between leaders: nothing reconciles */
#define OP_HANDOVER 2  /* graceful stop without successor: stop, drain, release, then gone */
#define OP_GONE 3

/* the reconciler's central call */
#define CALL_NONE 0
#define CALL_ACQ 1
#define CALL_REL 2

/* the one Pod of a cluster */
#define POD_NONE 0
#define POD_GATED 1
#define POD_UP 2       /* ungated: may run from now on */
#define POD_TERM 3     /* deleted, containers still stopping */

#define RUNNING(c) (pod[c] == POD_UP || pod[c] == POD_TERM)

/* ---- the central server (docs/behaviour.md §3.7) ---- */
byte s_h;              /* holder: 0 absent or tombstone, 1 A, 2 B */
byte s_tok;            /* current token; 0 = absent */
short s_exp;           /* expiresAt - now; expired strictly after: s_exp < 0 (clamped at -1) */

/* ---- the network: two request slots per cluster, one answer slot ---- */
typedef Req { byte kind; byte d; bit cur; byte tok; bit dup };
Req net[4];            /* net[2*c + i] */
typedef Ans { bit on; byte d; bit acq; byte h; byte tok; short exp; bit ok };
Ans ans[2];

/* ---- per cluster ---- */
short off[2];          /* clock offset against the server, ticks */
byte op[2];
byte down[2];          /* ticks until a new leader reconciles */
bit deleting[2];
bit gone[2];           /* the finalizer was removed: the lease no longer exists here */
byte phase[2];
byte rtok[2];          /* status.workload.token */
short dl[2];           /* recorded deadline - now (0 = reached); meaningful while Active or Stopping */
byte hi[2];            /* the reconciler's in-memory highest token (lost on crash) */
byte call[2];
byte el[2];            /* ticks since the call was sent */
byte bud[2];           /* the call's bound */
bit wasActive[2];      /* activeAt(start) of the current reconcile */
byte rq[2];            /* ticks until the next reconcile is due */
bit busy[2];           /* a reconcile is waiting for its central call (holds the lease's lock) */
byte replicas[2];      /* the target's spec.replicas (0/1) */
byte rsrep[2];         /* what the ReplicaSet controller has caught up with */
byte pod[2];
bit reg[2];            /* the Pod is registered in status.workload.pods */
byte pterm[2];         /* ticks until a deleted Pod's containers are gone */
bit cut[2];            /* cut off from the central server for good */
byte part[2];          /* ticks left of a partition from the central server */
bit dirty[2];          /* an event came while the reconcile held the lease's lock: run it again at once */

/* ---- ghosts ---- */
byte maxrec[2];        /* the highest token each cluster recorded */
byte faults = FAULTS;
bit limit;             /* the token bound was reached: the run ends here (not an error) */
byte deletes = DELETES;
byte crashes = CRASHES;
hidden int T;          /* absolute time, only for the trace (not part of the state) */
hidden int rid[4];     /* when each request slot's message was sent, only for the trace */

/* random simulation (-DSIM, for the trace replay) spreads the faults over time instead of spending them
   at once: a fault is possible only once T reaches `calm`, which each fault moves on */
#ifdef SIM
hidden int calm;
#define CALM (T >= calm)
#define SETCALM if :: calm = T + 1 :: calm = T + 3 :: calm = T + 6 :: calm = T + 12 fi
#else
#define CALM 1
#define SETCALM skip
#endif

#define ACTIVE_AT(c) (phase[c] == PH_ACTIVE && dl[c] > LEAD && rtok[c] > 0 && !deleting[c])
#define MIN(a, b) ((a) < (b) -> (a) : (b))

/* a nondeterministic choice of v in lo..hi */
inline pick(pv, plo, phi) {
  pv = plo;
  do
  :: pv < phi -> pv++
  :: break
  od
}

/* a requeue: due in x ticks, plus a scheduling lag of 0..LAG */
inline requeue(c, x) {
  rq[c] = x;
  printf("EV %d done %d rq=%d\n", T, c, rq[c]);
#if LAG > 0
  if
  :: skip
  :: rq[c] = rq[c] + 1
  :: LAG > 1 -> rq[c] = rq[c] + LAG
  fi;
#endif
  skip
}

/* a request leaves cluster c: lost, stalled past its bound, duplicated, or delayed 0..NET */
inline send(c, skind, stok, sbound) {
  call[c] = skind;
  el[c] = 0;
  bud[c] = sbound;
  busy[c] = 1;
  /* earlier requests still in the network belong to calls that are over */
  net[2 * c].cur = 0;
  net[2 * c + 1].cur = 0;
  ans[c].on = 0;
  printf("EV %d send %d %d tok=%d\n", T, c, skind, stok);
  if
  :: net[2 * c].kind == 0 -> slot = 2 * c
  :: else -> slot = 2 * c + 1
  fi;
  if
  :: cut[c] || part[c] > 0 -> skip                 /* never arrives */
#ifdef F_LOSS
  :: !cut[c] && part[c] == 0 && CALM && faults > 0 -> faults--; SETCALM   /* lost */
#endif
  :: !cut[c] && part[c] == 0 ->
     net[slot].kind = skind; net[slot].cur = 1; net[slot].tok = stok; net[slot].dup = 0; rid[slot] = T;
     if
     :: net[slot].d = 0
     :: NET > 0 -> net[slot].d = NET
     :: NET > 1 -> net[slot].d = 1
#ifdef F_DELAY
     :: CALM && faults > 0 -> faults--; SETCALM; pick(net[slot].d, 1, DELAY)
#endif
#ifdef F_STALL
     :: CALM && faults > 0 -> faults--; SETCALM; net[slot].d = sbound + 1   /* stalled: lands after the client gave up */
#endif
#ifdef F_DUP
     :: CALM && faults > 0 -> faults--; SETCALM; net[slot].dup = 1; net[slot].d = 0
#endif
     fi
  fi;
  slot = 0
}
byte slot;
byte scratch;

/* the call of cluster c ends (answered, failed or abandoned) */
inline endcall(c) {
  call[c] = CALL_NONE;
  el[c] = 0;
  bud[c] = 0;
  busy[c] = 0;
  net[2 * c].cur = 0;
  net[2 * c + 1].cur = 0;
  ans[c].on = 0; ans[c].d = 0; ans[c].acq = 0; ans[c].h = 0; ans[c].tok = 0; ans[c].exp = 0; ans[c].ok = 0
}

/* docs/behaviour.md §2.4, after the drain: the lease is stopped (or, deleting, the finalizer removed) */
inline finishstop(c) {
  if
  :: deleting[c] ->
     gone[c] = 1; phase[c] = PH_NONE; rtok[c] = 0; dl[c] = 0; rq[c] = 0;
     printf("EV %d done %d gone\n", T, c)
  :: else ->
     phase[c] = PH_NONE; rtok[c] = 0; dl[c] = 0;
     requeue(c, REQUEUE_FAIL)
  fi
}

/* docs/behaviour.md §2.4: commit Stopping, stop the target, drain, and release only once drained */
inline stoprelease(c) {
  phase[c] = PH_STOPPING;
  replicas[c] = 0;
  /* drainPods: one LIST; every Pod seen is deleted; the pass is done only if none was left */
  pending = (pod[c] != POD_NONE);
  if
  :: pod[c] == POD_GATED -> pod[c] = POD_NONE; reg[c] = 0; dirty[c] = 1; printf("EV %d poddel %d\n", T, c)
  :: pod[c] == POD_UP ->
     /* the gracePeriodSeconds of the DELETE bounds the stop: killed when the grace ends at the latest */
     grace = GRACE(dl[c]);
     pod[c] = POD_TERM; printf("EV %d poddel %d g=%d\n", T, c, grace);
     if :: grace > T_TERM -> grace = T_TERM :: else fi;
     pick(pterm[c], 0, grace);
     grace = 0
  :: else -> skip
  fi;
#ifdef HOLE_RELEASE_BEFORE_DRAIN
  pending = 0;
#endif
  if
  :: pending -> requeue(c, REQUEUE_FAIL)
  :: !pending && rtok[c] > 0 -> send(c, CALL_REL, rtok[c], RELEASE_BUDGET)
  :: !pending && rtok[c] == 0 -> finishstop(c)
  fi;
  pending = 0
}
bit pending;
byte grace;            /* scratch: the grace bound of a Pod being deleted */

/* §2.7: register, then lift the gate (the webhook reads the lease live: activeAt and registered) */
inline permit(c) {
  if
  :: ACTIVE_AT(c) && pod[c] == POD_GATED ->
     reg[c] = 1;
     assert(reg[c]);
     assert(!RUNNING(OTHER(c)));
     pod[c] = POD_UP;
     printf("EV %d ungate %d\n", T, c)
  :: else -> skip
  fi
}

/* §2.3 step 8 */
inline acquirefailed(c) {
  if
  :: phase[c] == PH_ACTIVE && dl[c] <= LEAD -> stoprelease(c)
  :: else ->
     if
     :: wasActive[c] && dl[c] > LEAD -> scratch = MIN(ERR_REQUEUE, dl[c] - LEAD); requeue(c, scratch); scratch = 0
     :: else -> requeue(c, ERR_REQUEUE)
     fi
  fi
}

/* the central server's decisions (src/central/manager.ts decideAcquire / decideRelease) */
inline serve(c, i) {
  printf("EV %d srv %d %d id=%d\n", T, c, net[i].kind, rid[i]);
  if
  :: net[i].kind == CALL_ACQ ->
     if
     :: s_tok == 0 -> s_h = c + 1; s_tok = 1; s_exp = TTL; aacq = 1
     :: s_tok > 0 && s_h == c + 1 && s_exp >= 0 -> s_exp = TTL; aacq = 1
     :: s_tok > 0 && (s_h == 0 || s_exp < 0) && s_tok < MAXTOK -> s_h = c + 1; s_tok++; s_exp = TTL; aacq = 1
     :: s_tok > 0 && (s_h == 0 || s_exp < 0) && s_tok >= MAXTOK -> limit = 1   /* the model's bound: stop */
     :: s_tok > 0 && s_h != 0 && s_h != c + 1 && s_exp >= 0 -> aacq = 0
     fi;
     aok = 1
  :: net[i].kind == CALL_REL ->
     if
     :: s_h == 0 -> aok = 1
     :: s_h != 0 && (s_h != c + 1 || s_tok != net[i].tok) -> aok = 0   /* 409 */
     :: s_h == c + 1 && s_tok == net[i].tok -> s_h = 0; aok = 1
     fi
  fi;
  if
  :: net[i].cur && !ans[c].on && (cut[c] || part[c] > 0) -> skip   /* the answer is lost */
  :: net[i].cur && !ans[c].on && !cut[c] && part[c] == 0 ->
     if
#ifdef F_LOSS
     :: CALM && faults > 0 -> faults--; SETCALM   /* the answer is lost */
#endif
     :: ans[c].on = 1; ans[c].acq = aacq; ans[c].h = s_h; ans[c].tok = s_tok; ans[c].exp = s_exp; ans[c].ok = aok;
        if
        :: ans[c].d = 0
        :: NET > 0 -> ans[c].d = NET
#ifdef F_DELAY
        :: CALM && faults > 0 -> faults--; SETCALM; pick(ans[c].d, 1, DELAY)
#endif
        fi
     fi
  :: else -> skip
  fi;
  if
  :: net[i].dup -> net[i].dup = 0; net[i].d = NET
  :: else -> net[i].kind = 0; net[i].d = 0; net[i].cur = 0; net[i].tok = 0
  fi;
  aacq = 0; aok = 0
}
bit aacq;
bit aok;

/* §2.3 steps 9-15 on an Acquire answer */
inline onacquire(c) {
  if
  :: !ans[c].acq ->
     /* 9: held by another */
     if
     :: phase[c] == PH_ACTIVE || phase[c] == PH_STOPPING -> endcall(c); stoprelease(c)
     :: else -> endcall(c); replicas[c] = 0; requeue(c, REACQUIRE);
#ifdef BREAK_STANDBY
        rq[c] = 255   /* teeth: the standby never polls again */
#else
        skip
#endif
     fi
  :: ans[c].acq && (ans[c].tok < hi[c] || ans[c].exp - off[c] <= 0) ->
     /* 10: an untrusted answer is handled like a failed call */
     endcall(c); acquirefailed(c)
  :: else ->
     /* 11: the local deadline, min(start + TTL, central expiry), on this cluster's clock */
#ifdef HOLE_DEADLINE_FROM_RECEIPT
     ndl = MIN(TTL, ans[c].exp - off[c]);
#else
     ndl = MIN(TTL - el[c], ans[c].exp - off[c]);
#endif
#if DRIFT > 0
     if
     :: skip
     :: ndl = MIN(TTL - el[c] + DRIFT, ans[c].exp - off[c] + DRIFT)
     fi;
#endif
     ntok = ans[c].tok;
     endcall(c);
     if
     :: ndl <= LEAD -> stoprelease(c)
     :: ndl > LEAD && phase[c] == PH_ACTIVE && rtok[c] != ntok -> stoprelease(c)   /* 12: a new epoch */
     :: ndl > LEAD && !(phase[c] == PH_ACTIVE && rtok[c] != ntok) ->
        /* 12, 13: ownership persisted before any activation */
        assert(ntok >= maxrec[c]);
        assert(ntok >= rtok[c] || rtok[c] == 0);
        maxrec[c] = ntok;
        phase[c] = PH_ACTIVE; rtok[c] = ntok; dl[c] = ndl;
        if :: ntok > hi[c] -> hi[c] = ntok :: else fi;
        assert(!(phase[OTHER(c)] == PH_ACTIVE && rtok[OTHER(c)] == ntok && !gone[OTHER(c)]));
        printf("EV %d held %d tok=%d dl=%d\n", T, c, ntok, ndl);
        /* 14: acquireAction, then permit */
        replicas[c] = 1;
        permit(c);
        scratch = MIN(HB, ndl - LEAD); requeue(c, scratch); scratch = 0
     fi;
     ndl = 0; ntok = 0
  fi
}
short ndl;
byte ntok;

/* §2.3 steps 1-7 */
inline reconcile(c) {
  printf("EV %d rec %d\n", T, c);
  wasActive[c] = ACTIVE_AT(c);
  if
  :: deleting[c] || phase[c] == PH_STOPPING || (phase[c] == PH_ACTIVE && !ACTIVE_AT(c)) -> stoprelease(c)
  :: else ->
     if
     :: ACTIVE_AT(c) -> scratch = MIN(ACQ_BUDGET, dl[c] - LEAD); send(c, CALL_ACQ, 0, scratch); scratch = 0
     :: else -> send(c, CALL_ACQ, 0, ACQ_BUDGET)
     fi
  fi
}

#define TICKNET(i) if :: net[i].kind != 0 && net[i].d > 0 -> net[i].d-- :: else fi
#define TICKC(i) \
  if :: ans[i].on && ans[i].d > 0 -> ans[i].d-- :: else fi; \
  if :: ans[i].on && ans[i].exp >= 0 -> ans[i].exp-- :: else fi; \
  if :: call[i] != CALL_NONE && el[i] < 255 -> el[i]++ :: else fi; \
  if :: rq[i] > 0 && rq[i] < 255 -> rq[i]-- :: else fi; \
  if :: dl[i] > 0 -> dl[i]-- :: else fi; \
  if :: down[i] > 0 -> down[i]-- :: else fi; \
  if :: pterm[i] > 0 -> pterm[i]-- :: else fi; \
  if :: part[i] > 0 -> part[i]-- :: else fi

/* ---- guards: an urgent action happens before time may pass ---- */
#define G_REC(c) ((op[c] == OP_UP || op[c] == OP_HANDOVER) && !gone[c] && !busy[c] && rq[c] == 0)
#define G_ANS(c) (call[c] != CALL_NONE && ans[c].on && ans[c].d == 0 && el[c] < bud[c])
#define G_TMO(c) (call[c] != CALL_NONE && el[c] >= bud[c])
#define G_RS(c) (rsrep[c] != replicas[c])
#define G_NEW(c) (rsrep[c] == 1 && pod[c] == POD_NONE)
#define G_GONE(c) (pod[c] == POD_TERM && pterm[c] == 0)
#define G_UP(c) (op[c] == OP_DOWN && down[c] == 0)
#define G_SRV(i) (net[i].kind != 0 && net[i].d == 0)
#define G_CLUSTER(c) (G_REC(c) || G_ANS(c) || G_TMO(c) || G_RS(c) || G_NEW(c) || G_GONE(c) || G_UP(c))
#define URGENT (limit || G_CLUSTER(0) || G_CLUSTER(1) || G_SRV(0) || G_SRV(1) || G_SRV(2) || G_SRV(3))

/* the reconcile's lease lock was held when an event came: the workqueue runs it again at once */
inline nudge(c) {
  if
  :: busy[c] -> dirty[c] = 1
  :: else -> rq[c] = 0
  fi
}

proctype cluster(byte c) {
end:
  do
  /* a due reconcile (not while the lease's lock is held by a call) */
  :: atomic { !limit && G_REC(c) ->
       if
       :: op[c] == OP_UP -> reconcile(c)
       :: op[c] == OP_HANDOVER ->
          /* the stopping leader's passes (docs/decisions/0002): stop what is Active or Stopping */
          printf("EV %d handoverpass %d\n", T, c);
          if
          :: phase[c] != PH_NONE -> stoprelease(c)
          :: else -> op[c] = OP_GONE; printf("EV %d done %d handedover\n", T, c)
          fi
       fi;
       if :: dirty[c] && !busy[c] -> dirty[c] = 0; rq[c] = 0 :: else fi }
  /* the call's answer */
  :: atomic { !limit && G_ANS(c) ->
       printf("EV %d ans %d\n", T, c);
       if
       :: call[c] == CALL_ACQ -> onacquire(c)
       :: call[c] == CALL_REL -> endcall(c); finishstop(c)   /* 204, or 409: not ours any more */
       fi;
       if :: dirty[c] -> dirty[c] = 0; rq[c] = 0 :: else fi }
  /* the call's bound passed without an answer */
  :: atomic { !limit && G_TMO(c) ->
       printf("EV %d err %d\n", T, c);
       if
       :: call[c] == CALL_ACQ -> endcall(c); acquirefailed(c)
       :: call[c] == CALL_REL -> endcall(c); requeue(c, REQUEUE_FAIL)
       fi;
       if :: dirty[c] -> dirty[c] = 0; rq[c] = 0 :: else fi }
  /* managed-permits, on the Pod's creation (exclusive with the reconcile); not urgent: the next
     held reconcile permits too */
  :: atomic { !limit && op[c] == OP_UP && !busy[c] && pod[c] == POD_GATED && ACTIVE_AT(c) ->
       printf("EV %d permit %d\n", T, c);
       permit(c) }
  /* the ReplicaSet controller */
  :: atomic { !limit && G_RS(c) -> rsrep[c] = replicas[c] }
  :: atomic { !limit && G_NEW(c) -> pod[c] = POD_GATED; reg[c] = 0; printf("EV %d podnew %d\n", T, c);
       rsrep[c] = replicas[c] }   /* one Pod at most before it sees a scale-down */
  /* the kubelet: a deleted Pod's containers are gone; a drain in progress is nudged */
  :: atomic { !limit && G_GONE(c) -> pod[c] = POD_NONE; reg[c] = 0;
       printf("EV %d podgone %d\n", T, c);
       if :: phase[c] == PH_STOPPING && !gone[c] -> nudge(c) :: else fi }
  /* a new leader (or the successor of a graceful stop) reconciles every lease at once */
  :: atomic { !limit && G_UP(c) -> op[c] = OP_UP; rq[c] = 0; printf("EV %d up %d\n", T, c) }
  /* ---- faults and users: optional, at any instant ---- */
#ifdef F_CRASH
  :: atomic { !limit && CALM && faults > 0 && crashes > 0 && op[c] == OP_UP ->
       faults--; crashes--; SETCALM;
       op[c] = OP_DOWN; hi[c] = 0; dirty[c] = 0;
       if :: busy[c] -> endcall(c) :: else fi;
       pick(down[c], 1, FAILOVER_TICKS);
       printf("EV %d crash %d down=%d\n", T, c, down[c]) }
#endif
#ifdef F_HANDOVER
  :: atomic { !limit && CALM && faults > 0 && op[c] == OP_UP && !busy[c] ->
       faults--; SETCALM; op[c] = OP_HANDOVER; rq[c] = 0;
       printf("EV %d handover %d\n", T, c) }
#endif
#ifdef F_PART
  :: atomic { !limit && CALM && faults > 0 && part[c] == 0 && !cut[c] -> faults--; SETCALM; part[c] = PART;
       net[2 * c].kind = 0; net[2 * c].d = 0; net[2 * c].cur = 0; net[2 * c].tok = 0; net[2 * c].dup = 0;
       net[2 * c + 1].kind = 0; net[2 * c + 1].d = 0; net[2 * c + 1].cur = 0; net[2 * c + 1].tok = 0;
       net[2 * c + 1].dup = 0;
       ans[c].on = 0; ans[c].d = 0; ans[c].acq = 0; ans[c].h = 0; ans[c].tok = 0; ans[c].exp = 0; ans[c].ok = 0;
       printf("EV %d part %d\n", T, c) }
#endif
#ifdef F_CUT
  :: atomic { !limit && CALM && c == CB && faults > 0 && !cut[c] -> faults--; SETCALM; cut[c] = 1; part[c] = 0;
       net[2 * c].kind = 0; net[2 * c].d = 0; net[2 * c].cur = 0; net[2 * c].tok = 0; net[2 * c].dup = 0;
       net[2 * c + 1].kind = 0; net[2 * c + 1].d = 0; net[2 * c + 1].cur = 0; net[2 * c + 1].tok = 0;
       net[2 * c + 1].dup = 0;
       ans[c].on = 0; ans[c].d = 0; ans[c].acq = 0; ans[c].h = 0; ans[c].tok = 0; ans[c].exp = 0; ans[c].ok = 0;
       printf("EV %d cut %d\n", T, c) }
#endif
  /* a user deletes the BerthLease (behind the finalizer). Not while a reconcile waits for its call: its
     status writes would fail on the changed resourceVersion and it would run again, which only leaves the
     central lease held a little longer (docs/verification.md, abstractions) */
  :: atomic { !limit && CALM && deletes > 0 && !deleting[c] && !gone[c] && !busy[c] -> deletes--; SETCALM; deleting[c] = 1;
       printf("EV %d delete %d\n", T, c);
       nudge(c) }
  od
}

proctype server() {
end:
  do
  :: atomic { !limit && G_SRV(0) -> serve(0, 0) }
  :: atomic { !limit && G_SRV(1) -> serve(0, 1) }
  :: atomic { !limit && G_SRV(2) -> serve(1, 2) }
  :: atomic { !limit && G_SRV(3) -> serve(1, 3) }
  od
}

/* one tick passes once no urgent action is left */
proctype clock() {
end:
  do
  :: atomic { !URGENT ->
     /* the first statement of a d_step is taken on its own in random simulation (another process may
        run right after it), so it must change nothing: else a trace would show T of one tick with the
        timers of the previous one */
     d_step {
       skip;
       T++;
       if :: s_tok > 0 && s_exp >= 0 -> s_exp-- :: else fi;
       TICKNET(0); TICKNET(1); TICKNET(2); TICKNET(3);
       TICKC(0); TICKC(1)
     } }
  od
}

init {
  atomic {
    pick(off[0], -OFFSET, OFFSET);
    pick(off[1], -OFFSET, OFFSET);
    printf("EV %d init %d %d\n", T, off[0], off[1]);
    run clock();
    run server();
    run cluster(CA);
    run cluster(CB)
  }
}

#define arun (pod[CA] == POD_UP)
#define bcut (cut[CB] == 1)
ltl live { [] (bcut -> <> arun) }
