/*
 * scope.pml: the opt-in admission scope of issue 33 as implemented (docs/verification.md, "`verify/scope.pml`"
 * and "The admission scope"; docs/admission.md, "The admission scope"). One namespace, one BerthLease
 * `web` targeting the Deployment `web`, its ReplicaSet, Pod slots 0..1, in discrete time.
 *
 * The namespace's label berth.skaphos.io/workload-admission is a sequence of versions (each write one:
 * none, enabled or leaving). Every view of it lags: each kube-apiserver's namespace cache (one, or two
 * with HA), each operator replica's informer (one, or two with HA_OP; replica 0 leads), and each
 * apiserver's view of the webhook configurations. A view shows some version it has reached and may jump
 * over versions (a relist after 410 Gone); the version after the one it shows must be reached within
 * LAG ticks of its write (ALAG for an apiserver, whose workload writes are decided and written in one
 * step here, so its bound counts the commit too). An admitted request that the model splits (a
 * BerthLease CREATE, the exit's removal, a configuration write) is written within COMMIT ticks.
 *
 * v2 (webhooks/scope.ts, scope-exit.ts, scope-migration.ts, src/berth/namespace-scope.ts):
 * - the workload webhooks select `In [enabled, leaving]`: a workload write where the apiserver sees
 *   neither reaches no Berth webhook (once the configuration it sees is narrowed);
 * - berthlease-scope (every namespace): a BerthLease with a target is admitted only if the serving
 *   replica's informer shows the namespace `enabled` and has shown that value for SETTLE ticks;
 * - namespace-scope (every namespace): enabled <-> leaving and adding a value are free; a removal is the
 *   operator's alone, from `leaving`, with the serving replica's informer showing `leaving` for SETTLE,
 *   and live LISTs finding no targeted lease and no stamped object;
 * - the exit controller (the leader): its informer shows `leaving` for SETTLE, live LISTs find nothing,
 *   then (a later step) the removal, a merge patch carrying the resourceVersion it saw;
 * - the reconciler activates only after a live GET shows the namespace in scope, and stops an Active
 *   lease once the leader's informer shows it out of scope;
 * - UPGRADE: from the cluster-wide registration, nothing labelled, a managed target admitted: each plan
 *   LISTs and labels the holders (`#label`), then reads the clock: guardsSince is taken before the
 *   guards' write, and the selectors narrow once guardsSince and the last label are SETTLE old.
 * An informer's `since` is kept while the value it shows stays the same (namespace-scope.ts `observe`),
 * also across a jump. Versions every view has passed are forgotten (EV lines number versions from the
 * oldest one a view still shows).
 *
 * Time: a tick is SCOPE_TICK_MS of constants.pml, SETTLE (S) is SCOPE_SETTLE_MS in ticks; a check passes
 * once a value has been shown for S ticks (settleLeft == 0). By default LAG + COMMIT = S - 1 (COMMIT 1
 * when S > 2, else 0): the assumption at its edge in whole ticks.
 *
 * The v1 holes, as switches (each must yield a counterexample): HOLE_ENTRY_UNSETTLED (no settle on
 * entry), HOLE_ONE_STEP (a removal from `enabled`, guarded by the LISTs alone), HOLE_EXIT_UNGUARDED (the
 * exit's LIST, then a write neither version-guarded nor reviewed again), HOLE_EARLY_NARROW (narrowing
 * once the guards are written), BREAK_LAG (LAG + COMMIT = S: the assumption broken by a tick).
 * Other switches: NOSKIP (informers and caches see every version in order: no relist); the proposed
 * fixes FIX_RELIST (a replica's `since` restarts when its informer jumps over a version),
 * FIX_HOLDERS_SETTLED (the upgrade narrows only once every holder's label has been shown in scope by the
 * leader's informer for S, after a further S past the guards); with the code's single settle period,
 * FIX_PLAN_CLOCK (the plan reads the clock before its LISTs) and FIX_GUARDS_SINCE (guardsSince once the
 * guards are live, not before their write).
 *
 * Properties: those of admission.pml (`check`): a running Pod of the lease's chain is registered and
 * held; the admitted target of a lease is stamped.
 *
 * Events (`printf("EV <event> k=v ...")`, parsed by verify/scope-trace.ts for the trace replay on the real
 * scope code, docs/verification.md "The scope replay"): `EV init` the start, `EV tick` each tick, every
 * label write, view step and forgetting of versions (`EV shift`), every decision of a guard, the exit and
 * the upgrade with what the model decided, every workload write with the apiserver and whether it was
 * reviewed, and `EV state` (snap, after every check) the objects and views. Versions are printed as the
 * window numbers them. printf changes no state.
 */

#include "constants.pml"

/* The implementation (namespace-scope.ts nextScopeEntry, scope-migration.ts readyAt) has the fixes of the
 * two findings: since restarts on a relist; the upgrade takes guardsSince once it sees the guards live,
 * reads its clock before its LISTs, and narrows two settle periods after the guards (one for them to
 * spread, one for the leader's informer to show any label removed meanwhile) once every holder's
 * namespace has been shown in scope by that informer for a settle period; it keeps no clock of its own
 * labels. V2_FIRST is the code before those fixes; HOLE_ONE_GUARD_SETTLE narrows one settle period after
 * the guards. */
#ifndef V2_FIRST
#define FIX_RELIST
#define FIX_GUARDS_SINCE
#define FIX_PLAN_CLOCK
#define FIX_HOLDERS_SETTLED
#define NO_LABEL_CLOCK
#endif

#define S SCOPE_SETTLE
#ifndef COMMIT
#if SCOPE_SETTLE > 2
#define COMMIT 1       /* ticks from an admission to its write */
#else
#define COMMIT 0
#endif
#endif
#ifndef LAG
#ifdef BREAK_LAG
#define LAG (S - COMMIT)
#else
#define LAG (S - 1 - COMMIT)
#endif
#endif
#define ALAG (LAG + COMMIT)
#if defined(FIX_HOLDERS_SETTLED) && !defined(HOLE_ONE_GUARD_SETTLE)
#define GA_MAX (2 * S)   /* the guards' settle period, then the holders' labels' */
#else
#define GA_MAX S
#endif
#if LAG < 0
#error "LAG + COMMIT must be below SETTLE"
#endif

#ifndef NP
#define NP 2
#endif
#ifndef USER
#define USER 4
#endif
#ifndef LOSSES
#define LOSSES 1
#endif
#ifndef TAKEOVERS
#define TAKEOVERS 1
#endif
#ifdef HA
#define NA 2           /* kube-apiservers */
#else
#define NA 1
#endif
#ifdef HA_OP
#define NR 2           /* operator replicas; 0 is the leader */
#else
#define NR 1
#endif
#ifndef NV
#define NV 4           /* label versions in the window (from the oldest a view shows) */
#endif

#define PH_NONE 0
#define PH_ACTIVE 1
#define PH_STOPPING 2

#define V_NONE 0
#define V_ENABLED 1
#define V_LEAVING 2

/* ---- the namespace: its label versions and the views of them ---- */
byte ver;              /* the stored version */
byte val[NV];          /* the label at each version */
byte age[NV];          /* ticks since written, while some view has not reached it (else 0), up to ALAG */
byte nv[NA];           /* the version each apiserver's namespace cache shows */
byte ri[NR];           /* the version each replica's informer shows */
byte sa[NR];           /* ticks since replica r's informer began showing its value (`since`), up to S */

/* ---- the webhook configurations: 0 cluster-wide, 1 + the scope guards, 2 narrowed ---- */
byte cver;
byte cage[3];
byte cv[NA];

/* ---- requests admitted, not written yet ---- */
bit l_pend; byte l_t;  /* a BerthLease CREATE */
byte e_st;             /* the exit: 0 idle, 1 its LISTs found nothing, 2 its removal admitted */
byte e_rv;             /* the version the leader's informer showed (the patch's resourceVersion) */
byte e_av;             /* the version the admission reviewed (the apiserver's optimistic write) */
byte e_t;
bit u_pend; byte u_av; byte u_t;   /* HOLE_ONE_STEP: a user's removal admitted */

/* ---- the upgrade (the leader's ScopeMigration) ---- */
byte up;               /* 0 guards not written yet, 1 written or being written, 2 narrowing written */
bit gs; byte ga;       /* guardsSince set; ticks since */
bit ls; byte la;       /* labelledAt set; ticks since */
bit pl; byte pl_t;     /* a plan between its LISTs and its clock read */
bit ph;                /* its LISTs found a holder */
bit c_pend; byte c_t; byte c_next;

/* ---- the BerthLease (one incarnation) ---- */
bit l_ex; bit l_del; bit l_rec; byte l_phase; byte l_pods; bit held; bit lost; bit other;
/* ---- the Deployment ---- */
bit d_ex; bit d_stamp; bit d_gate; byte d_rep; bit d_should; bit d_done;
/* ---- the ReplicaSet ---- */
bit rs_ex; bit rs_stamp; bit rs_tstamp; bit rs_gate; byte rs_rep;
/* ---- Pods ---- */
bit p_ex[NP]; bit p_own[NP]; bit p_stamp[NP]; bit p_gate[NP]; bit p_del[NP];
byte p_next;

byte user = USER;
byte losses = LOSSES;
byte takeovers = TAKEOVERS;
byte a;                /* the apiserver of a request (scratch) */
byte x;                /* the replica serving a review (scratch) */
byte r_out;            /* 0 unmanaged, 1 bound, 2 denied (scratch) */
byte i;
byte k;
byte r_n;

#define OUT_FREE 0
#define OUT_BOUND 1
#define OUT_DENY 2
#define BIT(j) (1 << (j))
#define RUNNING(j) (p_ex[j] && !p_gate[j])
#define LIVE_ACTIVE (l_ex && !l_del && l_phase == PH_ACTIVE && !lost)
#define IN_SCOPE(v) ((v) != V_NONE)
/* does a workload write at apiserver y reach the Berth workload webhooks? */
#define REVIEWED(y) (cv[y] < 2 || IN_SCOPE(val[nv[y]]))
/* any targeted lease or stamped object in the namespace (the live LISTs of scopeHolder) */
#define ANY_STAMPED (l_ex || d_stamp && d_ex || rs_stamp && rs_ex || p_ex[0] && p_stamp[0] || p_ex[1] && p_stamp[1])
/* replica y has shown value v for the settle period (settleLeft(...) == 0) */
#define SETTLED(y, v) (val[ri[y]] == (v) && sa[y] >= S)
#ifdef HOLE_ENTRY_UNSETTLED
#define ENTRY_OK(y) (val[ri[y]] == V_ENABLED)
#else
#define ENTRY_OK(y) SETTLED(y, V_ENABLED)
#endif
/* a view at version w must move before the next tick: the version after it is `bound` ticks old */
#define DUE(w, bound) ((w) < ver && age[(w) + 1] >= (bound))
#define CDUE(w) ((w) < cver && cage[(w) + 1] >= ALAG)

#define IN_CHAIN(j) (p_own[j] && rs_ex && d_ex && (l_rec || d_should))
#define OF_LEASE(j) (l_ex && (p_stamp[j] || IN_CHAIN(j)))

#if NP > 1
#define SLOT1(a) a[1]
#else
#define SLOT1(a) 0
#endif
#define LAST(a, n) a[n - 1]

/* the objects and views the replay checks the code against (printf only) */
inline snap() {
  printf("EV state lex=%d lphase=%d held=%d lost=%d dex=%d dstamp=%d rsex=%d rsstamp=%d pex=%d,%d pstamp=%d,%d pgate=%d,%d ver=%d nv=%d,%d ri=%d,%d sa=%d,%d cver=%d cv=%d,%d\n",
    l_ex, l_phase, held, lost, d_ex, d_stamp, rs_ex, rs_stamp,
    p_ex[0], SLOT1(p_ex), p_stamp[0], SLOT1(p_stamp), p_gate[0], SLOT1(p_gate),
    ver, nv[0], LAST(nv, NA), ri[0], LAST(ri, NR), sa[0], LAST(sa, NR), cver, cv[0], LAST(cv, NA))
}

inline pick_apiserver() {
  a = 0;
#ifdef HA
  if :: a = 0 :: a = 1 fi;
#endif
  skip
}

inline pick_replica() {
  x = 0;
#ifdef HA_OP
  if :: x = 0 :: x = 1 fi;
#endif
  skip
}

/* a write of the label (a new version), when the version budget allows; by 0 a user, 1 the exit, 2 the upgrade */
inline write_label(v, by) {
  ver++; val[ver] = v; age[ver] = 0;
  printf("EV label value=%d v=%d by=%d\n", v, ver, by)
}

/* versions every view has passed are forgotten: the window starts at the oldest version shown */
#define SHIFT(w) w = ((w) >= r_n -> (w) - r_n : 255)
inline canon() {
  r_n = ver;
  k = 0;
  do
  :: k < NA -> if :: nv[k] < r_n -> r_n = nv[k] :: else fi; k++
  :: k >= NA -> break
  od;
  k = 0;
  do
  :: k < NR -> if :: ri[k] < r_n -> r_n = ri[k] :: else fi; k++
  :: k >= NR -> break
  od;
  if
  :: r_n > 0 ->
     printf("EV shift n=%d\n", r_n);
     k = 0;
     do
     :: k + r_n <= ver -> val[k] = val[k + r_n]; age[k] = age[k + r_n]; k++
     :: k + r_n > ver -> break
     od;
     do
     :: k <= ver -> val[k] = 0; age[k] = 0; k++
     :: k > ver -> break
     od;
     ver = ver - r_n;
     k = 0;
     do
     :: k < NA -> nv[k] = nv[k] - r_n; k++
     :: k >= NA -> break
     od;
     k = 0;
     do
     :: k < NR -> ri[k] = ri[k] - r_n; k++
     :: k >= NR -> break
     od;
     /* the versions a request refers to: one no longer in the window is older than any (255) */
     if :: e_st != 0 -> SHIFT(e_rv) :: else fi;
     if :: e_st == 2 -> SHIFT(e_av) :: else fi;
     if :: u_pend -> SHIFT(u_av) :: else fi
  :: else
  fi;
  age[0] = 0;
  k = 0; r_n = 0
}

/* replica y's informer reaches a later version (its next event, or a relist that jumps) */
inline see_replica(y) {
  r_n = val[ri[y]];
  k = ri[y];
  ri[y]++;
#ifndef NOSKIP
  do
  :: ri[y] < ver -> ri[y]++
  :: break
  od;
#endif
  if
  :: val[ri[y]] != r_n -> sa[y] = 0
#ifdef FIX_RELIST
  :: val[ri[y]] == r_n && ri[y] > k + 1 -> sa[y] = 0
#endif
  :: else
  fi;
  printf("EV replica r=%d v=%d from=%d value=%d sa=%d\n", y, ri[y], k, val[ri[y]], sa[y]);
  k = 0;
  canon()
}

inline see_apiserver(y) {
  nv[y]++;
#ifndef NOSKIP
  do
  :: nv[y] < ver -> nv[y]++
  :: break
  od;
#endif
  printf("EV apiserver a=%d v=%d value=%d\n", y, nv[y], val[nv[y]]);
  canon()
}

inline tick() {
  k = 1;
  do
  :: k <= ver -> if :: age[k] < ALAG -> age[k]++ :: else fi; k++
  :: k > ver -> break
  od;
  k = 1;
  do
  :: k <= cver -> if :: cage[k] < ALAG && (cv[0] < k || cv[NA - 1] < k) -> cage[k]++ :: else -> cage[k] = 0 fi; k++
  :: k > cver -> break
  od;
  k = 0;
  do
  :: k < NR -> if :: sa[k] < S -> sa[k]++ :: else fi; k++
  :: k >= NR -> break
  od;
  k = 0;
  canon();
  if :: l_pend && l_t > 0 -> l_t-- :: else fi;
  if :: e_st == 2 && e_t > 0 -> e_t-- :: else fi;
  if :: u_pend && u_t > 0 -> u_t-- :: else fi;
  if :: c_pend && c_t > 0 -> c_t-- :: else fi;
  if :: pl && pl_t > 0 -> pl_t-- :: else fi;
  if :: gs && ga < GA_MAX -> ga++ :: else fi;
  if :: ls && la < S -> la++ :: else fi
}

/* time may pass unless a view or a write is due */
#define CAN_TICK (!DUE(nv[0], ALAG) && (NA < 2 || !DUE(nv[NA - 1], ALAG)) && \
  !DUE(ri[0], LAG) && (NR < 2 || !DUE(ri[NR - 1], LAG)) && \
  !CDUE(cv[0]) && (NA < 2 || !CDUE(cv[NA - 1])) && \
  !(l_pend && l_t == 0) && !(e_st == 2 && e_t == 0) && !(u_pend && u_t == 0) && \
  !(c_pend && c_t == 0) && !(pl && pl_t == 0))

inline check() {
  i = 0;
  do
  :: i < NP ->
     if :: RUNNING(i) -> assert(!OF_LEASE(i) || ((l_pods & BIT(i)) && held)) :: else fi;
     i++
  :: i >= NP -> break
  od;
  i = 0;
  /* a Deployment created while the lease existed is its admitted, stamped target */
  assert(!(d_ex && d_should) || (d_stamp && l_rec));
  snap()
}

/* resolve.ts for a Pod of the ReplicaSet (own) or without controller, with its own stamp */
inline resolve_pod(own, stamp) {
  r_out = OUT_FREE;
  if
  :: !own -> if :: stamp -> r_out = OUT_DENY :: else fi
  :: own && !rs_ex -> r_out = OUT_DENY
  :: own && rs_ex && rs_stamp -> r_out = (l_ex -> OUT_BOUND : OUT_DENY)   /* the stamped RS: matched on its reference */
  :: own && rs_ex && !rs_stamp ->
     if
     :: !d_ex -> r_out = OUT_DENY
     :: d_ex -> r_out = (l_ex -> OUT_BOUND : ((stamp || d_stamp) -> OUT_DENY : OUT_FREE))
     fi
  fi
}

/* a Pod CREATE at apiserver a (what: 0 by the ReplicaSet controller, 1 by a user) */
inline create_pod(what, own, stamp, gate) {
  pick_apiserver();
  printf("EV write what=%d a=%d reviewed=%d\n", what, a, REVIEWED(a));
  if
  :: !REVIEWED(a) ->
     p_ex[p_next] = 1; p_own[p_next] = own; p_stamp[p_next] = stamp; p_gate[p_next] = gate; p_next++
  :: REVIEWED(a) ->
     resolve_pod(own, stamp);
     if
     :: r_out == OUT_DENY -> skip
     :: r_out == OUT_FREE -> p_ex[p_next] = 1; p_own[p_next] = own; p_stamp[p_next] = stamp; p_gate[p_next] = gate; p_next++
     :: r_out == OUT_BOUND && l_ex && !l_del ->
        p_ex[p_next] = 1; p_own[p_next] = own; p_stamp[p_next] = 1; p_gate[p_next] = 1; p_next++
     :: r_out == OUT_BOUND && !(l_ex && !l_del) -> skip
     fi
  fi;
  r_out = 0; a = 0
}

inline drain() {
  r_n = 0;
  i = 0;
  do
  :: i < NP ->
     if
     :: p_ex[i] && (p_stamp[i] || (l_pods & BIT(i))) ->
        r_n++;
        if :: p_gate[i] -> p_ex[i] = 0 :: else -> p_del[i] = 1 fi
     :: else
     fi;
     i++
  :: i >= NP -> break
  od;
  i = 0
}

init {
  atomic {
#ifdef UPGRADE
    /* the cluster-wide registration: a managed target already admitted, nothing labelled */
    cver = 0; val[0] = V_NONE; up = 0;
    l_ex = 1; d_ex = 1; d_stamp = 1; d_gate = 1; d_rep = 0; d_should = 1; l_rec = 1; d_done = 1;
    rs_ex = 1; rs_stamp = 1; rs_tstamp = 1; rs_gate = 1;
    printf("EV init value=%d upgrade=1 na=%d nr=%d settle=%d tickms=%d\n", val[0], NA, NR, S, SCOPE_TICK_MS)
#else
    /* narrowed and seen everywhere; the namespace in scope or not, for long; nothing in it yet */
    cver = 2; cv[0] = 2; cv[NA - 1] = 2; up = 2;
    if :: val[0] = V_ENABLED :: val[0] = V_LEAVING :: val[0] = V_NONE fi;
    printf("EV init value=%d upgrade=0 na=%d nr=%d settle=%d tickms=%d\n", val[0], NA, NR, S, SCOPE_TICK_MS)
#endif
    ;
    sa[0] = S; sa[NR - 1] = S;
    snap()
  }
end:
  do
  /* ================= time ================= */
  :: atomic { CAN_TICK -> tick(); printf("EV tick\n") }

  /* ================= the operator ================= */
  :: atomic { l_ex ->
       if
       /* activation: a live GET shows the namespace in scope (confirmActivation) */
       :: !l_del && l_phase == PH_NONE && !lost && !other && l_rec && d_ex && d_stamp && IN_SCOPE(val[ver]) ->
          held = 1; l_phase = PH_ACTIVE; d_rep = 1;
          printf("EV activate\n")   /* a live GET showed the namespace in scope */
       /* an Active lease stops once deleted, past its deadline, or out of scope in the leader's informer */
       :: l_phase == PH_ACTIVE && (l_del || lost || !IN_SCOPE(val[ri[0]])) ->
          l_phase = PH_STOPPING;
          printf("EV stopping deleted=%d lost=%d\n", l_del, lost)   /* else the leader's informer shows it out of scope */
       :: l_phase == PH_NONE && l_del && !held -> l_ex = 0; l_del = 0
       :: else -> skip
       fi;
       check() }
  /* the quiet standby keeps a target it did not activate stopped */
  :: atomic { l_ex && l_phase == PH_NONE && d_ex && d_rep > 0 -> d_rep = 0; check() }
  :: atomic { l_ex && l_phase == PH_STOPPING ->
       if :: d_ex -> d_rep = 0 :: else fi;
       drain();
       if
       :: r_n == 0 -> held = 0; lost = 0; l_phase = PH_NONE; l_pods = 0;
          if :: l_del -> l_ex = 0; l_del = 0 :: else fi;
          printf("EV released\n")
       :: else -> skip
       fi;
       r_n = 0;
       check() }
  /* managed-permits: registration, then the gate (the operator's own checks; the webhook agrees) */
  :: atomic { p_next > 0 && LIVE_ACTIVE && held ->
       i = 0;
       do
       :: i < NP ->
          if
          :: p_ex[i] && !p_del[i] && p_gate[i] && p_stamp[i] && p_own[i] && rs_ex && d_ex && l_rec ->
             l_pods = l_pods | BIT(i); p_gate[i] = 0;
             printf("EV register slot=%d\n", i)
          :: else
          fi;
          i++
       :: i >= NP -> break
       od;
       i = 0;
       check() }
  :: atomic { losses > 0 && l_ex && l_phase == PH_ACTIVE -> losses--; lost = 1; printf("EV lost\n") }
  :: atomic { takeovers > 0 && !other && !held -> takeovers--; other = 1;
       printf("EV other\n"); check() }

  /* ================= the exit controller (the leader, scope-exit.ts) ================= */
  :: atomic { e_st == 0 && SETTLED(0, V_LEAVING) && ver < NV - 1 && !ANY_STAMPED ->
       e_st = 1; e_rv = ri[0];
       printf("EV exitcheck v=%d\n", e_rv) }   /* the leader sees it leaving, settled; its LISTs find nothing */
  /* the patch: its resourceVersion precondition, then namespace-scope's review of it */
  :: atomic { e_st == 1 ->
       pick_apiserver(); pick_replica();
       if
#ifndef HOLE_EXIT_UNGUARDED
       :: ver != e_rv -> e_st = 0;   /* 409: the namespace changed since e_rv */
          printf("EV exitpatch a=%d r=%d guarded=%d outcome=0\n", a, x, cv[a] >= 1)
       :: ver == e_rv && cv[a] >= 1 && !(val[ver] == V_LEAVING && SETTLED(x, V_LEAVING) && !ANY_STAMPED) ->
          e_st = 0; printf("EV exitpatch a=%d r=%d guarded=1 outcome=1\n", a, x)   /* denied */
#endif
       :: val[ver] == V_NONE -> e_st = 0;   /* nothing to remove: the patch writes nothing (a 409 if changed) */
          printf("EV exitpatch a=%d r=%d guarded=%d outcome=%d\n", a, x, cv[a] >= 1, (ver != e_rv -> 0 : 2))
       :: else -> e_st = 2; e_av = ver; e_t = COMMIT;   /* admitted */
          printf("EV exitpatch a=%d r=%d guarded=%d outcome=3\n", a, x, cv[a] >= 1)
       fi;
       if :: e_st == 0 -> e_rv = 0 :: else fi;
       a = 0; x = 0 }
  /* the write: the apiserver's optimistic update (changed meanwhile: admitted again) */
  :: atomic { e_st == 2 && ver < NV - 1 ->
       if
       :: ver == e_av -> printf("EV exitwrite written=1\n"); write_label(V_NONE, 1); e_st = 0
#ifdef HOLE_EXIT_UNGUARDED
       :: ver != e_av && val[ver] != V_NONE -> printf("EV exitwrite written=1\n"); write_label(V_NONE, 1); e_st = 0
       :: ver != e_av && val[ver] == V_NONE -> e_st = 0; printf("EV exitwrite written=0\n")   /* nothing to remove: no write */
#else
       :: ver != e_av -> e_st = 1; printf("EV exitwrite written=0\n")   /* changed meanwhile: the patch again */
#endif
       fi;
       e_av = 0; e_t = 0;
       if :: e_st == 0 -> e_rv = 0 :: else fi }

  /* ================= the upgrade (the leader, scope-migration.ts) ================= */
#ifdef UPGRADE
  /* a plan: #label's LISTs label every holder without a value */
  :: atomic { up < 2 && !pl && !c_pend ->
       if
       :: ANY_STAMPED && val[ver] == V_NONE && ver < NV - 1 ->
          printf("EV plan holders=1 labelled=1 full=0\n"); write_label(V_ENABLED, 2); ls = 1; la = 0
       :: else -> printf("EV plan holders=%d labelled=0 full=%d\n", ANY_STAMPED, ver >= NV - 1)
       fi;
       pl = 1; pl_t = COMMIT; ph = ANY_STAMPED;
#ifdef FIX_PLAN_CLOCK
       pl_t = 0;   /* the clock read before the LISTs: the decision below is as of their start */
#endif
       skip }
  /* ... then the clock: the guards first, the narrowing once they and the last label settled */
  :: atomic { pl ->
       pl = 0;
       if
       :: !gs || cver == 0 ->
#ifdef FIX_GUARDS_SINCE
          if :: cver >= 1 -> gs = 1; ga = 0 :: else fi;   /* guardsSince once the guards are live */
#else
          gs = 1; ga = 0;
#endif
          if
          :: cver == 0 -> c_pend = 1; c_t = COMMIT; c_next = 1;
             printf("EV planclock writes=1\n")   /* the scope guards, the selectors still cluster-wide */
          :: else -> printf("EV planclock writes=0\n")
          fi
#ifdef HOLE_EARLY_NARROW
       :: gs && cver >= 1 ->
#else
       :: gs && cver >= 1 && ga >= GA_MAX &&
#ifndef NO_LABEL_CLOCK
          (!ls || la >= S) &&   /* the last label the leader wrote, by its own clock */
#endif
#ifdef FIX_HOLDERS_SETTLED
          /* the holder's label, whoever wrote it, settled in the leader's informer */
          (!ph || IN_SCOPE(val[ri[0]]) && sa[0] >= S) &&
#endif
          1 ->
#endif
          up = 2; c_pend = 1; c_t = COMMIT; c_next = 2;
          printf("EV planclock writes=2\n")   /* narrows the workload webhooks to the scope */
       :: else -> printf("EV planclock writes=0\n")
       fi;
       ph = 0 }
  :: atomic { c_pend -> c_pend = 0; cver = c_next; cage[cver] = 0; c_next = 0;
       /* narrowed: the plan is done, its clocks forgotten */
       if :: cver == 2 -> gs = 0; ga = 0; ls = 0; la = 0 :: else fi;
       printf("EV configwrite c=%d\n", cver) }
#endif

  /* ================= the views ================= */
  :: atomic { nv[0] < ver -> see_apiserver(0) }
  :: atomic { NA > 1 && nv[NA - 1] < ver -> see_apiserver(NA - 1) }
  :: atomic { ri[0] < ver -> see_replica(0); check() }
  :: atomic { NR > 1 && ri[NR - 1] < ver -> see_replica(NR - 1) }
  :: atomic { cv[0] < cver -> cv[0] = cver; printf("EV config a=0 c=%d\n", cver) }
  :: atomic { NA > 1 && cv[NA - 1] < cver -> cv[NA - 1] = cver; printf("EV config a=1 c=%d\n", cver) }

  /* ================= Kubernetes' controllers ================= */
  /* the Deployment controller creates the ReplicaSet from the template */
  :: atomic { d_ex && !rs_ex ->
       pick_apiserver();
       printf("EV write what=2 a=%d reviewed=%d\n", a, REVIEWED(a));
       if
       :: !REVIEWED(a) -> rs_ex = 1; rs_stamp = 0; rs_tstamp = d_stamp; rs_gate = d_gate
       :: REVIEWED(a) && l_ex && !l_del -> rs_ex = 1; rs_stamp = 1; rs_tstamp = 1; rs_gate = 1
       :: REVIEWED(a) && !(l_ex && !l_del) && !d_stamp -> rs_ex = 1; rs_stamp = 0; rs_tstamp = 0; rs_gate = d_gate
       :: REVIEWED(a) && !(l_ex && !l_del) && d_stamp -> skip   /* denied: no live lease */
       fi;
       a = 0;
       check() }
  :: atomic { rs_ex && d_ex && rs_rep != d_rep -> rs_rep = d_rep }
  :: atomic { rs_ex && rs_rep > 0 && p_next < NP &&
       !((p_ex[0] && p_own[0] && !p_del[0]) || (NP > 1 && p_ex[1] && p_own[1] && !p_del[1])) ->
       create_pod(0, 1, rs_tstamp, rs_gate); check() }
  :: atomic { rs_ex && rs_rep == 0 && ((p_ex[0] && p_own[0] && !p_del[0]) || (NP > 1 && p_ex[1] && p_own[1] && !p_del[1])) ->
       if
       :: p_ex[0] && p_own[0] && !p_del[0] -> if :: p_gate[0] -> p_ex[0] = 0 :: else -> p_del[0] = 1 fi
       :: NP > 1 && p_ex[1] && p_own[1] && !p_del[1] -> if :: p_gate[1] -> p_ex[1] = 0 :: else -> p_del[1] = 1 fi
       fi;
       check() }
  :: atomic { (p_ex[0] && p_del[0]) || (NP > 1 && p_ex[1] && p_del[1]) ->
       if
       :: p_ex[0] && p_del[0] -> p_ex[0] = 0
       :: NP > 1 && p_ex[1] && p_del[1] -> p_ex[1] = 0
       fi;
       check() }

  /* ================= users ================= */
  /* a targeted BerthLease CREATE: berthlease-scope, on the serving replica's informer */
  :: atomic { user > 0 && !l_ex && !l_pend && !d_done -> user--;
       pick_apiserver(); pick_replica();
       if
       :: cv[a] >= 1 && !ENTRY_OK(x) -> printf("EV leasecreate a=%d r=%d guarded=1 admitted=0\n", a, x)
       :: else -> l_pend = 1; l_t = COMMIT; printf("EV leasecreate a=%d r=%d guarded=%d admitted=1\n", a, x, cv[a] >= 1)
       fi;
       a = 0; x = 0 }
  :: atomic { l_pend -> l_pend = 0; l_t = 0; l_ex = 1; printf("EV leasewritten\n"); check() }
  /* the target's CREATE (a root: a live LIST of leases when reviewed) */
  :: atomic { user > 0 && !d_ex && !d_done -> user--; d_done = 1;
       pick_apiserver();
       d_should = l_ex;
       printf("EV write what=3 a=%d reviewed=%d\n", a, REVIEWED(a));
       if
       :: !REVIEWED(a) -> d_ex = 1; d_rep = 1
       :: REVIEWED(a) && l_ex && !l_del && l_phase == PH_NONE && l_pods == 0 ->
          d_ex = 1; d_stamp = 1; d_gate = 1; d_rep = 1; l_rec = 1   /* stamped, the admission recorded */
       :: REVIEWED(a) && l_ex && !(!l_del && l_phase == PH_NONE && l_pods == 0) -> d_should = 0
       :: REVIEWED(a) && !l_ex -> d_ex = 1; d_rep = 1
       fi;
       a = 0;
       check() }
  /* a Pod naming the ReplicaSet as its controller, without gate or stamp */
  :: atomic { user > 0 && p_next < NP && rs_ex -> user--;
       create_pod(1, 1, 0, 0); check() }
  /* the gate off a stamped Pod (validateManagedObject: only the operator) */
  :: atomic { user > 0 && ((p_ex[0] && p_gate[0]) || (NP > 1 && p_ex[1] && p_gate[1])) -> user--;
       r_n = (p_ex[0] && p_gate[0] -> 0 : 1);
       pick_apiserver();
       printf("EV write what=4 a=%d reviewed=%d\n", a, REVIEWED(a));
       if
       :: !REVIEWED(a) || !p_stamp[r_n] -> p_gate[r_n] = 0
       :: else -> skip
       fi;
       r_n = 0; a = 0;
       check() }
  /* the Deployment's template gate off and its replicas up (7b, 7d) */
  :: atomic { user > 0 && d_ex -> user--;
       pick_apiserver();
       printf("EV write what=5 a=%d reviewed=%d\n", a, REVIEWED(a));
       if
       :: !REVIEWED(a) || !d_stamp -> d_gate = 0; d_rep = 1; rs_gate = 0   /* the rollout's ReplicaSet has no gate either */
       :: REVIEWED(a) && d_stamp && LIVE_ACTIVE -> d_rep = 1
       :: else -> skip
       fi;
       a = 0;
       check() }
  /* label writes (namespace-scope reviews each on the object it replaces): enabled <-> leaving, adding */
  :: atomic { user > 0 && ver < NV - 1 && val[ver] != V_LEAVING -> user--;
       printf("EV userset value=%d\n", V_LEAVING); write_label(V_LEAVING, 0) }
  :: atomic { user > 0 && ver < NV - 1 && val[ver] != V_ENABLED -> user--;
       printf("EV userset value=%d\n", V_ENABLED); write_label(V_ENABLED, 0) }
  /* a removal by a user: only where the apiserver does not call namespace-scope yet (the upgrade) */
  :: atomic { user > 0 && ver < NV - 1 && val[ver] != V_NONE -> user--;
       pick_apiserver();
       if
       :: cv[a] == 0 -> printf("EV userremove a=%d guarded=0 admitted=1\n", a); write_label(V_NONE, 0)
#ifdef HOLE_ONE_STEP
       /* v1: a removal from enabled guarded by the live LISTs alone, written later */
       :: cv[a] >= 1 && !u_pend && !ANY_STAMPED -> u_pend = 1; u_av = ver; u_t = COMMIT;
          printf("EV userremove a=%d guarded=1 admitted=1\n", a)   /* the LISTs found nothing */
#endif
       :: else -> printf("EV userremove a=%d guarded=%d admitted=0\n", a, cv[a] >= 1)   /* two steps, the operator's */
       fi;
       a = 0 }
#ifdef HOLE_ONE_STEP
  :: atomic { u_pend && ver < NV - 1 ->
       if :: ver == u_av -> write_label(V_NONE, 0) :: else fi;
       u_pend = 0; u_av = 0; u_t = 0 }
#endif
  od
}
