/*
 * scope.pml: the opt-in admission scope of issue 33, as specified for this model (docs/verification.md,
 * "The scope model"). One namespace, one BerthLease `web` targeting the Deployment `web`, its
 * ReplicaSet, Pod slots 0..1, without time.
 *
 * The namespace is in scope while it carries berth.skaphos.io/workload-admission=enabled. Each
 * kube-apiserver (one, or two with HA) judges namespaceSelectors on its own lagging view of that label
 * and of the webhook configurations (CFG 0: the old cluster-wide registration; 1: the scope guards
 * registered beside it; 2: the workload webhooks narrowed to the scope). With the narrowed registration
 * a workload write in a namespace the apiserver sees out of scope reaches no Berth webhook: it is admitted
 * as written. A targeted BerthLease CREATE is denied where the apiserver sees the namespace out of scope
 * (CFG >= 1). A label removal is guarded by a live LIST of targeted leases and stamped objects (CFG >= 1);
 * the LIST and the namespace write are two steps (write skew). The reconciler activates a lease only
 * after a live GET shows the namespace in scope, and stops an Active one once its own informer (lagging)
 * shows it out of scope. UPGRADE starts from the cluster-wide registration with nothing labelled: the
 * leader registers the guards, labels every namespace holding a targeted lease or a stamped object
 * (a live LIST), waits a settle period and narrows.
 *
 * Properties: those of admission.pml (`check`): a running Pod of the lease's chain is registered and
 * held; the admitted target of a lease is stamped.
 */

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
#define NA 2           /* kube-apiservers, each with its own views */
#else
#define NA 1
#endif

#define PH_NONE 0
#define PH_ACTIVE 1
#define PH_STOPPING 2

/* ---- the namespace ---- */
bit label;             /* berth.skaphos.io/workload-admission=enabled */
bit rm_pending;        /* a label removal the guard admitted, not yet written */
bit nsv[2];            /* each apiserver's view of the label */
bit rv_ns;             /* the reconciler's namespace informer */
byte cfg;              /* the webhook configurations: 0 cluster-wide, 1 + guards, 2 narrowed */
byte cfgv[2];          /* each apiserver's view of them */
byte up_step;          /* the upgrade: 0 not begun, 1 guards registered, 2 labelled, 3 narrowed */

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
byte a;                /* the apiserver of the request (scratch) */
byte r_out;            /* 0 unmanaged, 1 bound, 2 denied (scratch) */
byte i;
byte r_n;

/* NOLAG: every view of the label follows it at once (isolates the write skew from the lag) */
#ifdef NOLAG
#define SYNC nsv[0] = label; nsv[1] = label; rv_ns = label
#else
#define SYNC skip
#endif

#define OUT_FREE 0
#define OUT_BOUND 1
#define OUT_DENY 2
#define BIT(k) (1 << (k))
#define RUNNING(k) (p_ex[k] && !p_gate[k])
#define LIVE_ACTIVE (l_ex && !l_del && l_phase == PH_ACTIVE && !lost)
/* does a workload write at apiserver x reach the Berth workload webhooks? */
#define CALLED(x) (cfgv[x] < 2 || nsv[x])
/* any targeted lease or stamped object in the namespace (the guard's live LISTs) */
#define ANY_STAMPED (l_ex || d_stamp && d_ex || rs_stamp && rs_ex || p_ex[0] && p_stamp[0] || p_ex[1] && p_stamp[1])

#define IN_CHAIN(k) (p_own[k] && rs_ex && d_ex && (l_rec || d_should))
#define OF_LEASE(k) (l_ex && (p_stamp[k] || IN_CHAIN(k)))

inline pick_apiserver() {
  a = 0;
#ifdef HA
  if :: a = 0 :: a = 1 fi;
#endif
  skip
}

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
  assert(!(d_ex && d_should) || (d_stamp && l_rec))
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

/* a Pod CREATE at apiserver a */
inline create_pod(own, stamp, gate) {
  pick_apiserver();
  if
  :: !CALLED(a) ->
     p_ex[p_next] = 1; p_own[p_next] = own; p_stamp[p_next] = stamp; p_gate[p_next] = gate; p_next++;
     printf("EV apiserver %d: Pod %d admitted without review (namespace out of scope), gated %d\n", a, p_next - 1, gate)
  :: CALLED(a) ->
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
    cfg = 0; cfgv[0] = 0; cfgv[1] = 0; label = 0; nsv[0] = 0; nsv[1] = 0; rv_ns = 0;
    l_ex = 1; d_ex = 1; d_stamp = 1; d_gate = 1; d_rep = 0; d_should = 1; l_rec = 1; d_done = 1;
    rs_ex = 1; rs_stamp = 1; rs_tstamp = 1; rs_gate = 1
#else
    /* a namespace in scope, everything registered and seen, nothing in it yet */
    cfg = 2; cfgv[0] = 2; cfgv[1] = 2; up_step = 3; label = 1; nsv[0] = 1; nsv[1] = 1; rv_ns = 1
#endif
  }
end:
  do
  /* ================= the operator ================= */
  :: atomic { l_ex ->
       if
       /* activation: a live GET shows the namespace in scope (HOLE_NO_SCOPE_CHECK: not looked at) */
       :: !l_del && l_phase == PH_NONE && !lost && !other && l_rec && d_ex && d_stamp &&
#ifndef HOLE_NO_SCOPE_CHECK
          label &&
#endif
          1 ->
          held = 1; l_phase = PH_ACTIVE; d_rep = 1;
          printf("EV operator: namespace in scope (live GET), lease Active, Deployment scaled up\n")
       /* renewal of an Active lease (the scope is not looked at again) */
       :: l_phase == PH_ACTIVE && (l_del || lost || !rv_ns) ->
          l_phase = PH_STOPPING;
          printf("EV operator: Stopping (deleted, deadline, or its informer shows the namespace out of scope)\n")
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
          printf("EV operator: drained and released\n")
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
             printf("EV operator: Pod %d registered and ungated\n", i)
          :: else
          fi;
          i++
       :: i >= NP -> break
       od;
       i = 0;
       check() }
  :: atomic { losses > 0 && l_ex && l_phase == PH_ACTIVE -> losses--; lost = 1 }
  :: atomic { takeovers > 0 && !other && !held -> takeovers--; other = 1;
       printf("EV central: the other cluster holds the lease\n"); check() }

  /* ================= the upgrade (the leader) ================= */
#ifdef UPGRADE
  :: atomic { up_step == 0 -> up_step = 1; cfg = 1; printf("EV leader: registers the scope guards\n") }
  :: atomic { up_step == 1 ->
       up_step = 2;
       if :: ANY_STAMPED -> label = 1; SYNC :: else fi;
       printf("EV leader: labels the namespaces holding a targeted lease or a stamped object (labelled %d)\n", label) }
  /* the settle period: narrowed once every apiserver sees the label (SETTLE), or at any time */
  :: atomic { up_step == 2 &&
#ifdef SETTLE
       (nsv[0] == label) && (NA == 1 || nsv[1] == label) &&
#endif
       1 -> up_step = 3; cfg = 2; printf("EV leader: narrows the workload webhooks to the scope\n") }
#endif

  /* ================= kube-apiserver views and Kubernetes' controllers ================= */
  :: atomic { nsv[0] != label -> nsv[0] = label; printf("EV apiserver 0 sees label %d\n", label) }
  :: atomic { NA > 1 && nsv[1] != label -> nsv[1] = label; printf("EV apiserver 1 sees label %d\n", label) }
  :: atomic { cfgv[0] != cfg -> cfgv[0] = cfg; printf("EV apiserver 0 sees configuration %d\n", cfg) }
  :: atomic { NA > 1 && cfgv[1] != cfg -> cfgv[1] = cfg; printf("EV apiserver 1 sees configuration %d\n", cfg) }
  :: atomic { rv_ns != label -> rv_ns = label; printf("EV operator informer sees label %d\n", label); check() }
  /* the guarded label removal is written */
  :: atomic { rm_pending -> rm_pending = 0; label = 0; SYNC; printf("EV namespace: label removed\n") }
  /* the Deployment controller creates the ReplicaSet from the template */
  :: atomic { d_ex && !rs_ex ->
       pick_apiserver();
       if
       :: !CALLED(a) -> rs_ex = 1; rs_stamp = 0; rs_tstamp = d_stamp; rs_gate = d_gate
       :: CALLED(a) && l_ex && !l_del -> rs_ex = 1; rs_stamp = 1; rs_tstamp = 1; rs_gate = 1
       :: CALLED(a) && !(l_ex && !l_del) && !d_stamp -> rs_ex = 1; rs_stamp = 0; rs_tstamp = 0; rs_gate = d_gate
       :: CALLED(a) && !(l_ex && !l_del) && d_stamp -> skip   /* denied: no live lease */
       fi;
       a = 0;
       check() }
  :: atomic { rs_ex && d_ex && rs_rep != d_rep -> rs_rep = d_rep }
  :: atomic { rs_ex && rs_rep > 0 && p_next < NP &&
       !((p_ex[0] && p_own[0] && !p_del[0]) || (NP > 1 && p_ex[1] && p_own[1] && !p_del[1])) ->
       create_pod(1, rs_tstamp, rs_gate); check() }
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
  /* a targeted BerthLease CREATE: denied where the apiserver sees the namespace out of scope */
  :: atomic { user > 0 && !l_ex && !d_done -> user--;
       pick_apiserver();
       if
       :: cfgv[a] >= 1 && !nsv[a] -> printf("EV user: BerthLease denied (apiserver %d sees the namespace out of scope)\n", a)
       :: else -> l_ex = 1; printf("EV user: BerthLease created (apiserver %d)\n", a)
       fi;
       a = 0;
       check() }
  /* the target's CREATE (a root: a live LIST of leases when reviewed) */
  :: atomic { user > 0 && !d_ex && !d_done -> user--; d_done = 1;
       pick_apiserver();
       d_should = l_ex;
#ifdef TARGET_REVIEWED
       cfgv[a] = 1;   /* (a scenario switch: the target's CREATE is reviewed; the configuration view is restored below) */
#endif
       if
       :: !CALLED(a) -> d_ex = 1; d_rep = 1; printf("EV user: Deployment created without review (apiserver %d)\n", a)
       :: CALLED(a) && l_ex && !l_del && l_phase == PH_NONE && l_pods == 0 ->
          d_ex = 1; d_stamp = 1; d_gate = 1; d_rep = 1; l_rec = 1;
          printf("EV user: Deployment created, stamped, admission recorded (apiserver %d)\n", a)
       :: CALLED(a) && l_ex && !(!l_del && l_phase == PH_NONE && l_pods == 0) -> d_should = 0
       :: CALLED(a) && !l_ex -> d_ex = 1; d_rep = 1
       fi;
#ifdef TARGET_REVIEWED
       cfgv[a] = cfg;
#endif
       a = 0;
       check() }
  /* a Pod naming the ReplicaSet as its controller, without gate or stamp */
  :: atomic { user > 0 && p_next < NP && rs_ex -> user--;
       printf("EV user: creates a Pod naming the ReplicaSet, ungated\n");
       create_pod(1, 0, 0); check() }
  /* the gate off a stamped Pod (validateManagedObject: only the operator) */
  :: atomic { user > 0 && ((p_ex[0] && p_gate[0]) || (NP > 1 && p_ex[1] && p_gate[1])) -> user--;
       r_n = (p_ex[0] && p_gate[0] -> 0 : 1);
       pick_apiserver();
       if
       :: !CALLED(a) || !p_stamp[r_n] -> p_gate[r_n] = 0; printf("EV user: removes the gate of Pod %d (apiserver %d)\n", r_n, a)
       :: else -> skip
       fi;
       r_n = 0; a = 0;
       check() }
  /* the Deployment's template gate off and its replicas up (7b, 7d) */
  :: atomic { user > 0 && d_ex -> user--;
       pick_apiserver();
       if
       :: !CALLED(a) || !d_stamp -> d_gate = 0; d_rep = 1; rs_gate = 0;   /* the rollout's ReplicaSet has no gate either */
          printf("EV user: the Deployment's template gate off, replicas 1 (apiserver %d)\n", a)
       :: CALLED(a) && d_stamp && LIVE_ACTIVE -> d_rep = 1
       :: else -> skip
       fi;
       a = 0;
       check() }
  /* the label removal: the guard's live LIST now, the namespace write later */
  :: atomic { user > 0 && label && !rm_pending -> user--;
       pick_apiserver();
       if
       :: cfgv[a] >= 1 && ANY_STAMPED -> printf("EV user: label removal denied by the guard\n")
       :: else -> rm_pending = 1; printf("EV user: label removal admitted (the guard's LIST found nothing)\n");
#ifdef ATOMIC_GUARD
          rm_pending = 0; label = 0; SYNC;   /* the LIST and the write as one step: no write skew */
#endif
          skip
       fi;
       a = 0 }
  /* the label back */
  :: atomic { user > 0 && !label && !rm_pending -> user--; label = 1; SYNC; printf("EV user: labels the namespace\n") }
  od
}
