/*
 * helper.pml: the injected helper in time (docs/verification.md, "The helper model").
 *
 * Two opted-in Pods, A in one cluster and B in the other, run under the same central lease, each with
 * the helpers the injection webhook adds (docs/injection.md, docs/helper.md): the init container
 * berth-acquire (`helper acquire`: blocks until the lease is won), the native sidecar berth-sidecar
 * (`helper renew`: renews every heartbeat, confirms the lease until fenceAt = send + TTL - lead, stops
 * the app at fenceAt by a timer of its own, reacquires while stopped, answers GET /healthy), and one main
 * container with the injected liveness probe (period, failure threshold, the probe's own kill grace).
 * The kubelet starts the main container once the sidecar's startup probe passes, probes it, kills it
 * on a failed probe (gone within the kill grace plus the kill margin), and restarts it (RESTART). The
 * central server is lease.pml's: holder, token, expiry measured from its receipt of the call and expired
 * strictly after; acquire by the unexpired holder renews, a reclaim takes token + 1; renew only by the
 * unexpired holder with its token (decideRenew). The network loses, delays and stalls messages and
 * partitions a Pod from the server within a fault budget. Time is discrete (one tick = TICK_MS) and
 * advances only when nothing urgent is left; timers are relative (ticks left).
 *
 * Properties (assertions where they could break):
 *   at-most-once: a main container never starts while the other Pod's main container runs (counting a
 *                 killed one until it is gone);
 *   tokens: a helper never confirms a token below one it confirmed; two helpers never hold the lease
 *           confirmed with the same token.
 *
 * Switches (-D...): HOLE_PROBE_GRACE (hole 2: the probe's kill takes the Pod's grace), HOLE_RENEW_PAST_DEADLINE
 * (hole 3, the helper's side); RESTART (0: a killed main container is never restarted, 1: the kubelet
 * as it is, 2: a restarted main container waits for the lease again, as docs/injection.md claimed, 3: the
 * proposed fix, the sidecar exits on a loss and a RestartAllContainers rule restarts the Pod in place);
 * DRIFT (a node's timers measure the window long); FIRST_RESTART_ONLY (RESTART 1 without the restarts
 * after the back-off); RAC_KILL, RAC_SLOW (RESTART 3: how long the kubelet takes to kill every container);
 * ROBUST (only an overlap of a whole tick counts, not a container gone at the instant the other starts).
 */
#include "constants.pml"

/* ---- bounds, overridable with -D ---- */
#ifndef NET
#define NET 0          /* every message takes 0..NET ticks */
#endif
#ifndef DELAY
#define DELAY 1        /* a delay fault holds one message up to DELAY ticks */
#endif
#ifndef FAULTS
#define FAULTS 2       /* losses, delays, stalls, partitions */
#endif
#ifndef DRIFT
#define DRIFT 0        /* a node may measure the window up to DRIFT ticks long */
#endif
#ifndef RESTART
#define RESTART 1      /* a killed main container: 0 never restarted, 1 the kubelet as it is, 2 gated,
                          3 the proposal: the sidecar exits on a loss and RestartAllContainers restarts
                          the Pod's containers in place, init containers first */
#endif
#ifndef RAC_KILL
#ifdef RAC_SLOW
#define RAC_KILL (H_LEAD + 2) /* teeth: the kubelet takes two ticks longer than the lead */
#else
#define RAC_KILL H_RESTART_POD /* RESTART 3: every container is gone within this many ticks of the sidecar's exit */
#endif
#endif
#ifndef MAXTOK
#define MAXTOK (FAULTS + 3)
#endif
#ifndef PART
#define PART (H_TTL + 1)  /* a partition from the central server lasts this long */
#endif
#ifdef HOLE_PROBE_GRACE
#define KILL (H_POD_GRACE + H_MARGIN)   /* hole 2: the kill takes the Pod's grace */
#else
#define KILL (H_GRACE + H_MARGIN)       /* the probe's own terminationGracePeriodSeconds, and the margin */
#endif

#define PA 0
#define PB 1
#define OTHER(c) (1 - (c))

/* the helper's phase */
#define HP_INIT 0      /* berth-acquire runs */
#define HP_SIDE 1      /* berth-sidecar runs */
#define HP_DOWN 2      /* RESTART 3: the sidecar exited on a loss; the kubelet restarts every container */

/* calls */
#define CALL_NONE 0
#define CALL_ACQ 1
#define CALL_REN 2

/* the main container */
#define M_WAIT 0       /* not started: waits for the sidecar's /healthy (the startup probe, or a gate) */
#define M_RUN 1
#define M_KILL 2       /* killed by the probe: still running until gone */
#define M_DEAD 3       /* exited: the kubelet restarts it (RESTART) */

#ifdef ROBUST
/* only an overlap of a whole tick counts: a killed container whose grace ends at this instant is gone */
#define RUNNING(c) (m[c] == M_RUN || (m[c] == M_KILL && kt[c] > 0))
#else
#define RUNNING(c) (m[c] == M_RUN || m[c] == M_KILL)
#endif
/* GET /healthy answers 200 (probeAnswer: held and confirmed; the marker is fresh whenever confirmed) */
#define HEALTHY(c) (hp[c] == HP_SIDE && held[c] && conf[c])

/* ---- the central server ---- */
byte s_h;              /* holder: 0 none or tombstone, 1 A, 2 B */
byte s_tok;            /* 0 = absent */
short s_exp;           /* expiresAt - now; expired strictly after: s_exp < 0 (clamped at -1) */

/* ---- the network: two request slots per Pod (the current call's and a stale one), one answer ---- */
typedef Req { byte kind; byte d; bit cur; byte tok };
Req net[4];
typedef Ans { bit on; byte d; bit acq; byte tok };
Ans ans[2];

/* ---- per Pod ---- */
byte hp[2];
bit held[2];           /* the sidecar's view: held (a handoff or a confirmation) */
bit conf[2];           /* confirmed: fenceAt is set */
byte fence[2];         /* fenceAt - now, while confirmed */
byte tok[2];
byte call[2];
byte el[2];            /* ticks since the call was sent */
byte bud[2];           /* the call's bound */
byte tk[2];            /* ticks until the sidecar's next tick, or berth-acquire's next attempt */
byte m[2];
byte kt[2];            /* ticks until a killed main container is gone */
byte rc[2];            /* restarts so far (capped at 1: later ones wait for the back-off) */
byte bo[2];            /* ticks left of the restart back-off */
byte pt[2];            /* ticks until the liveness probe's next period */
byte fails[2];         /* consecutive failed probes */
bit onhold[2];         /* the prober waits for a new container after a failure */
byte part[2];          /* ticks left of a partition */

/* ---- ghosts ---- */
byte maxconf[2];       /* the highest token each helper confirmed */
byte faults = FAULTS;
bit limit;             /* the token bound was reached: the run ends here (not an error) */
hidden int T;          /* absolute time, only for the trace */
byte slot;

#define MIN(a, b) ((a) < (b) -> (a) : (b))

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

inline pick(pv, plo, phi) {
  pv = plo;
  do
  :: pv < phi -> pv++
  :: break
  od
}

/* a request leaves Pod c: lost, stalled past its bound, delayed, or on time */
inline send(c, skind, stok, sbound) {
  call[c] = skind;
  el[c] = 0;
  bud[c] = sbound;
  net[2 * c].cur = 0;
  net[2 * c + 1].cur = 0;
  ans[c].on = 0;
  printf("EV %d send %d %d tok=%d bound=%d\n", T, c, skind, stok, sbound);
  if
  :: net[2 * c].kind == 0 -> slot = 2 * c
  :: else -> slot = 2 * c + 1
  fi;
  if
  :: part[c] > 0 -> skip
#ifdef F_LOSS
  :: part[c] == 0 && CALM && faults > 0 -> faults--; SETCALM; printf("EV %d lost %d\n", T, c)
#endif
  :: part[c] == 0 ->
     net[slot].kind = skind; net[slot].cur = 1; net[slot].tok = stok;
     if
     :: net[slot].d = 0
     :: NET > 0 -> net[slot].d = NET
#ifdef F_DELAY
     :: CALM && faults > 0 -> faults--; SETCALM; pick(net[slot].d, 1, DELAY)
#endif
#ifdef F_STALL
     :: CALM && faults > 0 -> faults--; SETCALM; net[slot].d = sbound + 1   /* lands after the helper gave up */
#endif
     fi
  fi;
  slot = 0
}

inline endcall(c) {
  call[c] = CALL_NONE;
  el[c] = 0;
  bud[c] = 0;
  net[2 * c].cur = 0;
  net[2 * c + 1].cur = 0;
  ans[c].on = 0; ans[c].d = 0; ans[c].acq = 0; ans[c].tok = 0
}

/* the central server (decideAcquire, decideRenew) */
inline serve(c, i) {
  printf("EV %d srv %d %d tok=%d cur=%d\n", T, c, net[i].kind, net[i].tok, net[i].cur);
  aacq = 0;
  if
  :: net[i].kind == CALL_ACQ ->
     if
     :: s_tok == 0 -> s_h = c + 1; s_tok = 1; s_exp = H_TTL; aacq = 1
     :: s_tok > 0 && s_h == c + 1 && s_exp >= 0 -> s_exp = H_TTL; aacq = 1
     :: s_tok > 0 && (s_h == 0 || s_exp < 0) && s_tok < MAXTOK -> s_h = c + 1; s_tok++; s_exp = H_TTL; aacq = 1
     :: s_tok > 0 && (s_h == 0 || s_exp < 0) && s_tok >= MAXTOK -> limit = 1
     :: s_tok > 0 && s_h != 0 && s_h != c + 1 && s_exp >= 0 -> skip
     fi
  :: net[i].kind == CALL_REN ->
     if
     :: s_tok > 0 && s_h == c + 1 && s_tok == net[i].tok && s_exp >= 0 -> s_exp = H_TTL; aacq = 1
     :: else -> skip   /* refused: not the unexpired holder with this token */
     fi
  fi;
  if
  :: net[i].cur && !ans[c].on && part[c] > 0 -> skip
  :: net[i].cur && !ans[c].on && part[c] == 0 ->
     if
#ifdef F_LOSS
     :: CALM && faults > 0 -> faults--; SETCALM; printf("EV %d anslost %d\n", T, c)
#endif
     :: ans[c].on = 1; ans[c].acq = aacq; ans[c].tok = s_tok;
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
  net[i].kind = 0; net[i].d = 0; net[i].cur = 0; net[i].tok = 0;
  aacq = 0
}
bit aacq;

/* the sidecar stops the app: the marker goes, /healthy answers 503; with RESTART 3 it also exits with
   the code of its RestartAllContainers rule: the kubelet kills every container without grace and runs
   the init containers again (berth-acquire first) once they are gone */
inline lose(c) {
  held[c] = 0; conf[c] = 0; fence[c] = 0;
  printf("EV %d lose %d\n", T, c);
#if RESTART == 3
  if
  :: hp[c] == HP_SIDE ->
     hp[c] = HP_DOWN; endcall(c); tk[c] = 255;
     if
     :: m[c] == M_RUN -> m[c] = M_KILL; onhold[c] = 1; if :: kt[c] = 0 :: kt[c] = RAC_KILL fi
     :: m[c] == M_KILL && kt[c] > RAC_KILL -> kt[c] = RAC_KILL
     :: else -> skip
     fi;
     printf("EV %d restartall %d kt=%d\n", T, c, kt[c])
  :: else -> skip
  fi;
#endif
  skip
}

/* a confirmation (afterRenew / afterReacquire): the app may run until send + TTL - lead */
inline confirm(c, ctok, left) {
  assert(ctok >= maxconf[c]);
  assert(!(held[OTHER(c)] && conf[OTHER(c)] && tok[OTHER(c)] == ctok));
  maxconf[c] = ctok;
  held[c] = 1; conf[c] = 1; tok[c] = ctok; fence[c] = left;
#if DRIFT > 0
  if :: skip :: fence[c] = fence[c] + DRIFT fi;
#endif
  printf("EV %d confirm %d tok=%d fence=%d\n", T, c, ctok, fence[c])
}

/* the window left for a confirmation of a call sent el ticks ago */
#ifdef HOLE_RENEW_PAST_DEADLINE
#define LEFT(c) (H_WINDOW)              /* hole 3: counted from the answer */
#else
#define LEFT(c) (H_WINDOW - el[c])      /* counted from the send */
#endif

/* the answer of the current call */
inline onanswer(c) {
  printf("EV %d ans %d %d acq=%d tok=%d\n", T, c, call[c], ans[c].acq, ans[c].tok);
  if
  :: hp[c] == HP_INIT ->
     /* holdLease: won, or asked again after a heartbeat */
     if
     :: ans[c].acq -> ntok = ans[c].tok; endcall(c);
        hp[c] = HP_SIDE; held[c] = 1; conf[c] = 0; tok[c] = ntok; ntok = 0;
        printf("EV %d acquired %d tok=%d\n", T, c, tok[c]);
        tk[c] = 0   /* Sidecar.start: renews at once with the handoff, then every heartbeat */
     :: else -> endcall(c); tk[c] = H_RETRY_HELD
     fi
  :: hp[c] == HP_SIDE && call[c] == CALL_REN ->
     /* afterRenew */
     if
     :: !ans[c].acq -> endcall(c); lose(c)
#ifdef HOLE_RENEW_PAST_DEADLINE
     :: ans[c].acq -> ntok = ans[c].tok; scratch = LEFT(c); endcall(c); confirm(c, ntok, scratch); ntok = 0; scratch = 0
#else
     :: ans[c].acq && (el[c] >= H_WINDOW || (conf[c] && fence[c] == 0)) -> endcall(c); lose(c)
     :: ans[c].acq && el[c] < H_WINDOW && !(conf[c] && fence[c] == 0) ->
        ntok = ans[c].tok; scratch = LEFT(c); endcall(c); confirm(c, ntok, scratch); ntok = 0; scratch = 0
#endif
     fi
  :: hp[c] == HP_SIDE && call[c] == CALL_ACQ ->
     /* afterReacquire: confirm only an answer within its window */
     if
     :: ans[c].acq && el[c] < H_WINDOW -> ntok = ans[c].tok; scratch = LEFT(c); endcall(c); confirm(c, ntok, scratch); ntok = 0; scratch = 0
     :: else -> endcall(c)
     fi
  fi
}
byte ntok;
byte scratch;

/* the call's bound passed without an answer */
inline ontimeout(c) {
  printf("EV %d err %d\n", T, c);
  if
  :: hp[c] == HP_INIT -> endcall(c); tk[c] = H_RETRY_ERR
  :: hp[c] == HP_SIDE && call[c] == CALL_REN ->
     /* afterRenew on an error: keep until fenceAt, lost past it (or unconfirmed) */
     if
     :: !conf[c] || fence[c] == 0 -> endcall(c); lose(c)
     :: else -> endcall(c)
     fi
  :: hp[c] == HP_SIDE && call[c] == CALL_ACQ -> endcall(c)
  fi
}

/* a sidecar tick (one at a time: dropped while a call is out) or an attempt of berth-acquire */
inline ontick(c) {
  if
  :: hp[c] == HP_INIT -> tk[c] = 255; send(c, CALL_ACQ, 0, H_CALL)
  :: hp[c] == HP_SIDE ->
     tk[c] = H_HB;
     if
     :: call[c] != CALL_NONE -> skip
     :: call[c] == CALL_NONE && held[c] && conf[c] && fence[c] == 0 -> lose(c)
     :: call[c] == CALL_NONE && held[c] && !(conf[c] && fence[c] == 0) ->
#ifdef HOLE_RENEW_PAST_DEADLINE
        send(c, CALL_REN, tok[c], H_HB)
#else
        if
        :: conf[c] -> scratch = MIN(H_HB, fence[c]); send(c, CALL_REN, tok[c], scratch); scratch = 0
        :: else -> send(c, CALL_REN, tok[c], H_HB)
        fi
#endif
     :: call[c] == CALL_NONE && !held[c] -> send(c, CALL_ACQ, 0, H_HB)
     fi
  fi
}

/* the kubelet's liveness probe, at each period */
inline probe(c) {
  pt[c] = H_PERIOD;
  if
  :: m[c] == M_RUN && !onhold[c] && HEALTHY(c) -> fails[c] = 0
  :: m[c] == M_RUN && !onhold[c] && !HEALTHY(c) ->
     fails[c]++;
     if
     :: fails[c] >= H_FAILS ->
        fails[c] = 0; onhold[c] = 1; m[c] = M_KILL;
        if :: kt[c] = 0 :: kt[c] = KILL fi;   /* gone at once, or only at the end of the grace */
        printf("EV %d kill %d kt=%d\n", T, c, kt[c])
     :: else -> skip
     fi
  :: else -> skip
  fi
}

/* a main container starts */
inline start(c) {
  assert(!RUNNING(OTHER(c)));
  m[c] = M_RUN; onhold[c] = 0; fails[c] = 0;
  printf("EV %d start %d\n", T, c)
}

#define TICKNET(i) if :: net[i].kind != 0 && net[i].d > 0 -> net[i].d-- :: else fi
#define TICKP(i) \
  if :: ans[i].on && ans[i].d > 0 -> ans[i].d-- :: else fi; \
  if :: call[i] != CALL_NONE && el[i] < 255 -> el[i]++ :: else fi; \
  if :: tk[i] > 0 && tk[i] < 255 -> tk[i]-- :: else fi; \
  if :: conf[i] && fence[i] > 0 -> fence[i]-- :: else fi; \
  if :: kt[i] > 0 -> kt[i]-- :: else fi; \
  if :: bo[i] > 0 -> bo[i]-- :: else fi; \
  if :: pt[i] > 0 -> pt[i]-- :: else fi; \
  if :: part[i] > 0 -> part[i]-- :: else fi

/* ---- guards: an urgent action happens before time may pass ---- */
#define G_ANS(c) (call[c] != CALL_NONE && ans[c].on && ans[c].d == 0 && el[c] < bud[c])
#define G_TMO(c) (call[c] != CALL_NONE && el[c] >= bud[c])
#define G_TICK(c) (tk[c] == 0)
#ifdef HOLE_RENEW_PAST_DEADLINE
#define G_FENCE(c) (hp[c] == HP_SIDE && held[c] && conf[c] && fence[c] == 0 && call[c] == CALL_NONE)
#else
#define G_FENCE(c) (hp[c] == HP_SIDE && held[c] && conf[c] && fence[c] == 0)
#endif
#define G_PROBE(c) (pt[c] == 0)
#define G_START(c) (m[c] == M_WAIT && HEALTHY(c))
#define G_GONE(c) (m[c] == M_KILL && kt[c] == 0)
#if RESTART == 1
#define G_RESTART(c) (m[c] == M_DEAD && rc[c] == 0)
#elif RESTART == 2 || RESTART == 3
#define G_RESTART(c) (m[c] == M_DEAD)
#else
#define G_RESTART(c) 0
#endif
#define G_SRV(i) (net[i].kind != 0 && net[i].d == 0)
#define G_REINIT(c) (hp[c] == HP_DOWN && m[c] != M_RUN && m[c] != M_KILL)
#define G_POD(c) (G_ANS(c) || G_TMO(c) || G_TICK(c) || G_FENCE(c) || G_PROBE(c) || G_START(c) || G_GONE(c) || G_RESTART(c) || G_REINIT(c))
#define URGENT (limit || G_POD(0) || G_POD(1) || G_SRV(0) || G_SRV(1) || G_SRV(2) || G_SRV(3))

proctype pod(byte c) {
end:
  do
  :: atomic { !limit && G_ANS(c) -> onanswer(c) }
  :: atomic { !limit && G_TMO(c) -> ontimeout(c) }
  :: atomic { !limit && G_TICK(c) -> ontick(c) }
  /* the sidecar's own timer at fenceAt (hole 3: not while a renewal is out) */
  :: atomic { !limit && G_FENCE(c) -> printf("EV %d fence %d\n", T, c); lose(c) }
  /* the kubelet */
  :: atomic { !limit && G_PROBE(c) -> probe(c) }
  :: atomic { !limit && G_START(c) -> start(c) }
  :: atomic { !limit && G_GONE(c) -> m[c] = M_DEAD; bo[c] = H_BACKOFF; printf("EV %d gone %d\n", T, c) }
#if RESTART == 1
  /* restartPolicy Always: the first restart at once, later ones after the back-off (at any time after) */
#ifdef FIRST_RESTART_ONLY
  :: atomic { !limit && m[c] == M_DEAD && rc[c] == 0 ->
#else
  :: atomic { !limit && m[c] == M_DEAD && (rc[c] == 0 || bo[c] == 0) ->
#endif
       printf("EV %d restart %d\n", T, c); rc[c] = 1; start(c) }
#elif RESTART == 2 || RESTART == 3
  /* the restarted main container waits for the lease again */
  :: atomic { !limit && G_RESTART(c) -> printf("EV %d restart %d (gated)\n", T, c); m[c] = M_WAIT }
#endif
#if RESTART == 3
  /* every container gone: the init sequence runs again, berth-acquire first */
  :: atomic { !limit && G_REINIT(c) -> hp[c] = HP_INIT; m[c] = M_WAIT; tk[c] = 0; printf("EV %d reinit %d\n", T, c) }
#endif
#ifdef F_PART
  :: atomic { !limit && CALM && faults > 0 && part[c] == 0 -> faults--; SETCALM; part[c] = PART;
       net[2 * c].kind = 0; net[2 * c].d = 0; net[2 * c].cur = 0; net[2 * c].tok = 0;
       net[2 * c + 1].kind = 0; net[2 * c + 1].d = 0; net[2 * c + 1].cur = 0; net[2 * c + 1].tok = 0;
       ans[c].on = 0; ans[c].d = 0; ans[c].acq = 0; ans[c].tok = 0;
       printf("EV %d part %d\n", T, c) }
#endif
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

proctype clock() {
end:
  do
  :: atomic { !URGENT ->
     d_step {
       /* first: random simulation takes a d_step's first statement on its own (trace replay) */
       skip;
       T++;
       if :: s_tok > 0 && s_exp >= 0 -> s_exp-- :: else fi;
       TICKNET(0); TICKNET(1); TICKNET(2); TICKNET(3);
       TICKP(0); TICKP(1)
     } }
  od
}

init {
  atomic {
    /* each Pod's first attempt and its prober's phase are arbitrary */
    pick(tk[0], 0, H_HB);
    pick(tk[1], 0, H_HB);
    pick(pt[0], 1, H_PERIOD);
    pick(pt[1], 1, H_PERIOD);
    printf("EV %d init\n", T);
    run clock();
    run server();
    run pod(PA);
    run pod(PB)
  }
}
