/*
 * admission.pml: WorkloadAdmission and the managed-workload path of one cluster, without time
 * (docs/verification.md, "The admission model").
 *
 * Objects: BerthLease incarnations 1..2 named `web` (each targets the Deployment `web`), Deployment
 * incarnations 1..2 named `web`, one ReplicaSet `web-abc`, Pod slots 0..NP-1 (a slot is never reused).
 * Actors: a user (adversarial, a bounded number of writes), the Deployment, ReplicaSet and garbage
 * collector controllers, the kubelet, the operator (reconciler: activation, stop, drain, release;
 * managed-permits: registration before ungating), a second operator replica with a stale copy of the
 * lease (hole 5), and the other cluster (which may hold the central lease whenever this one does not).
 * Every write of a workload goes through the webhooks as webhooks/resolve.ts, decide-workload.ts and
 * decide-validate.ts decide it (owner chain, the stamped-ReplicaSet shortcut, stamping and the gate,
 * the validating rules 7a-7e). Lease lookups for owned objects may come from a lagging informer cache
 * (CACHE), one per webhook path; for a root object they are a live LIST unless HOLE_CACHE_ROOT.
 *
 * Properties (assertions after every action, `check`):
 *   registration: a running Pod of a lease's chain (stamped for it, or under a Deployment the lease
 *     targets that was created while the lease existed) is registered in the lease's status;
 *   held: such a Pod runs only while this cluster holds the central lease (the composition with
 *     lease.pml: the drain of every registered or stamped Pod ends before the other cluster may start);
 *   gate: the operator lifts a gate only while the lease is Active (live);
 *   admission: a Deployment created while a lease targets its name is stamped for that lease.
 *
 * Events (`printf("EV <event> k=v ...")`, parsed by verify/admission-trace.ts for the trace replay on the
 * real webhook code, docs/verification.md "Trace replay"): every action prints what it did and, for a
 * write through the webhooks, what each decided; `EV state` (snap) prints the state after every action
 * and before each operator gate removal, the world the next review reads. printf changes no state.
 */

#ifndef NP
#define NP 2
#endif
#if NP > 2
#error "the controller and kubelet actions name Pod slots 0 and 1: NP is at most 2"
#endif
#ifndef USER
#define USER 3         /* adversarial writes by users */
#endif
#ifndef LOSSES
#define LOSSES 1       /* the activation's deadline passes (lease.pml: the stop then drains in time) */
#endif
#ifndef TAKEOVERS
#define TAKEOVERS 2    /* the other cluster takes or gives up the central lease */
#endif

#define NONE 0
#define PH_NONE 0
#define PH_ACTIVE 1
#define PH_STOPPING 2

/* ---- BerthLeases 1..2 (0: none); one at a time exists under the name `web` ---- */
bit l_ex[3];
bit l_del[3];
byte l_rec[3];         /* status.workload.targetUID: a Deployment incarnation, 0 none */
byte l_phase[3];
byte l_pods[3];        /* registered Pod slots, a bit each */
byte l_rv[3];          /* resourceVersion (status writes) */
bit held[3];           /* this cluster holds the central lease */
bit lost[3];           /* the activation's deadline passed */
bit other;             /* the other cluster holds the central lease */

/* ---- Deployments `web`, incarnations 1..2 ---- */
bit d_ex[3];
byte d_stamp[3];       /* the managed-lease annotations (a lease incarnation), also on the template */
bit d_gate[3];         /* the template carries the scheduling gate */
byte d_rep[3];
byte d_should[3];      /* ghost: the lease that targeted `web` when it was created */

/* ---- the ReplicaSet `web-abc` ---- */
bit rs_ex;
byte rs_owner;         /* a Deployment incarnation, 0: no controller */
byte rs_stamp;         /* its own annotations */
byte rs_tstamp;        /* its template's */
bit rs_gate;
byte rs_rep;

/* ---- Pods ---- */
bit p_ex[NP];
bit p_own[NP];         /* controlled by the ReplicaSet */
byte p_stamp[NP];
bit p_gate[NP];
bit p_del[NP];         /* deleting: its containers still run if it was ungated */
byte p_next;           /* the next free slot */

/* ---- the informer caches of the webhooks: lease incarnations they still (or already) see ---- */
bit cache[6];          /* cache[3 * view + l]; view 0 mutating, 1 validating */

/* ---- a stale operator replica (hole 5): its copy of the lease ---- */
byte w_l;              /* the lease it read, 0: none */
byte w_rv;
byte w_phase;
byte w_pods;
byte w_pod;            /* the Pod it is permitting, +1 */
bit w_reg;             /* its registration landed */

byte user = USER;
byte losses = LOSSES;
byte takeovers = TAKEOVERS;

/* ---- scratch of one review (reset after use) ---- */
byte r_out;            /* 0 unmanaged, 1 bound, 2 denied */
byte r_l;              /* the binding's lease */
byte r_t;              /* the binding's target (Deployment incarnation) */
byte r_n;
byte r_view;
byte i;
byte j;
bit ann;

/* who writes, in the events */
#define A_USER 0
#define A_RS 1
#define A_OPERATOR 2
#define A_REPLICA 3

#define OUT_FREE 0
#define OUT_BOUND 1
#define OUT_DENY 2

#define BIT(k) (1 << (k))
#define RUNNING(k) (p_ex[k] && !p_gate[k])
#define LIVE_ACTIVE(l) (l_ex[l] && !l_del[l] && l_phase[l] == PH_ACTIVE && !lost[l])

/* which lease incarnations a lookup sees: the live LIST, or a webhook's cache */
#define SEES(view, l) ((view) == 2 -> l_ex[l] : cache[3 * (view) + (l)])

/* the lookup of "which BerthLease targets Deployment web" (resolve.ts step 3), in view r_view */
inline leases_for_web() {
  r_n = 0;
  j = 1;
  do
  :: j <= 2 -> if :: SEES(r_view, j) -> r_n++; r_l = j :: else fi; j++
  :: j > 2 -> break
  od;
  j = 0;
  if
  :: r_n > 1 -> r_out = OUT_DENY                  /* multiple BerthLeases refer to the same target */
  :: r_n == 1 -> r_out = OUT_BOUND
  :: r_n == 0 -> r_out = OUT_FREE; r_l = 0
  fi
}

/* any BerthLease at all in the namespace (the LIST with limit=1), live */
#define ANY_LEASE (l_ex[1] || l_ex[2])

/*
 * §4.3 for a Pod whose controller is the ReplicaSet when `own`, with the annotations `stamp` (its own),
 * in view `view` for the lease lookup of an owned object. Result in r_out, r_l, r_t.
 */
inline resolve_pod(own, stamp, view) {
  r_out = OUT_FREE; r_l = 0; r_t = 0; ann = (stamp != 0);
  if
  :: !own ->
     /* nothing to follow and not a root kind: decided without a read */
     if :: ann -> r_out = OUT_DENY :: else fi
#ifdef HOLE_SKIP_WALK
  :: own && !ann && !ANY_LEASE -> skip             /* hole 1: no BerthLease in the namespace, no walk */
  :: own && (ann || ANY_LEASE) ->
#else
  :: own ->
#endif
     if
     :: !rs_ex -> r_out = OUT_DENY                 /* resolve controller owner: not found */
     :: rs_ex && rs_stamp != 0 && rs_owner != 0 ->
        /* the stamped ReplicaSet's Deployment is not read: matched on the reference */
        r_view = view; leases_for_web(); r_t = rs_owner;
        if :: r_out == OUT_FREE -> r_out = OUT_DENY :: else fi   /* the ReplicaSet is stamped */
     :: rs_ex && rs_owner != 0 && rs_stamp == 0 ->
        if
        :: !d_ex[rs_owner] -> r_out = OUT_DENY
        :: d_ex[rs_owner] ->
           r_view = view; leases_for_web(); r_t = rs_owner;
           if :: r_out == OUT_FREE && (ann || d_stamp[rs_owner] != 0) -> r_out = OUT_DENY :: else fi
        fi
     :: rs_ex && rs_owner == 0 ->
        /* the orphaned ReplicaSet is the root: no lease targets a ReplicaSet here */
        if :: ann || rs_stamp != 0 -> r_out = OUT_DENY :: else fi
     fi
  fi;
  if :: r_out != OUT_BOUND -> r_t = 0 :: else fi;
  ann = 0; r_view = 0
}

/* recordTarget's lease check for any bound CREATE (live): the lease exists, same UID, not deleting */
#define LEASE_OK(l) (l_ex[l] && !l_del[l])

/* a Pod of lease l: stamped for it, or under the ReplicaSet of a Deployment the lease targets */
#define IN_CHAIN(k, l) (p_own[k] && rs_ex && rs_owner != 0 && d_ex[rs_owner] && \
  (l_rec[l] == rs_owner || d_should[rs_owner] == l))
#define OF_LEASE(k, l) (l_ex[l] && (p_stamp[k] == l || IN_CHAIN(k, l)))

#if NP > 1
#define SLOT1(a) a[1]
#else
#define SLOT1(a) 0
#endif

/* the state the replay builds its objects from (printf only) */
inline snap() {
  printf("EV state lex=%d,%d ldel=%d,%d lrec=%d,%d lphase=%d,%d lpods=%d,%d held=%d,%d lost=%d,%d other=%d dex=%d,%d dstamp=%d,%d dgate=%d,%d drep=%d,%d dshould=%d,%d rsex=%d rsown=%d rsstamp=%d rststamp=%d rsgate=%d rsrep=%d pex=%d,%d pown=%d,%d pstamp=%d,%d pgate=%d,%d pdel=%d,%d pnext=%d cache=%d,%d,%d,%d\n",
    l_ex[1], l_ex[2], l_del[1], l_del[2], l_rec[1], l_rec[2], l_phase[1], l_phase[2], l_pods[1], l_pods[2],
    held[1], held[2], lost[1], lost[2], other,
    d_ex[1], d_ex[2], d_stamp[1], d_stamp[2], d_gate[1], d_gate[2], d_rep[1], d_rep[2], d_should[1], d_should[2],
    rs_ex, rs_owner, rs_stamp, rs_tstamp, rs_gate, rs_rep,
    p_ex[0], SLOT1(p_ex), p_own[0], SLOT1(p_own), p_stamp[0], SLOT1(p_stamp), p_gate[0], SLOT1(p_gate),
    p_del[0], SLOT1(p_del), p_next, cache[1], cache[2], cache[4], cache[5])
}

inline check() {
  i = 0;
  do
  :: i < NP ->
     if
     :: RUNNING(i) ->
        assert(!OF_LEASE(i, 1) || ((l_pods[1] & BIT(i)) && held[1]));
        assert(!OF_LEASE(i, 2) || ((l_pods[2] & BIT(i)) && held[2]))
     :: else
     fi;
     i++
  :: i >= NP -> break
  od;
  i = 0;
  snap()
}

/* the request (by, in slot p_next, owned, stamp, gate) and the verdicts: mutating, its stamp and gate, validating */
#define POD_EV(m, v) printf("EV podcreate by=%d slot=%d own=%d stamp=%d gate=%d mutating=%d mstamp=%d mgate=%d validating=%d\n", \
  by, p_next, own, stamp, gate, m, p_stamp[p_next], p_gate[p_next], v)

/* a Pod CREATE by `by` through both webhooks (mutating stamps, validating checks); created in slot p_next */
inline create_pod(by, own, stamp, gate) {
  resolve_pod(own, stamp, 0);
  if
  :: r_out == OUT_DENY -> POD_EV(0, 0)
  :: r_out == OUT_FREE || r_out == OUT_BOUND ->
     /* mutating: stamped and gated when bound */
     p_stamp[p_next] = (r_out == OUT_BOUND -> r_l : stamp);
     p_gate[p_next] = (r_out == OUT_BOUND -> 1 : gate);
     resolve_pod(own, p_stamp[p_next], 1);
     if
     :: r_out == OUT_DENY -> POD_EV(1, 0); p_stamp[p_next] = 0; p_gate[p_next] = 0
     :: r_out == OUT_FREE -> POD_EV(1, 1); p_ex[p_next] = 1; p_own[p_next] = own; p_next++
     :: r_out == OUT_BOUND ->
        /* 7b: the stamp and the gate; 7e: the lease by name, live */
        if
        :: p_stamp[p_next] == r_l && p_gate[p_next] && LEASE_OK(r_l) ->
           POD_EV(1, 1); p_ex[p_next] = 1; p_own[p_next] = own; p_next++
        :: else -> POD_EV(1, 0); p_stamp[p_next] = 0; p_gate[p_next] = 0
        fi
     fi
  fi;
  r_out = 0; r_l = 0; r_t = 0
}

/* the operator's drain of lease l (docs/behaviour.md §2.4): every Pod registered or stamped for it */
inline drain(l) {
  r_n = 0;
  i = 0;
  do
  :: i < NP ->
     if
     :: p_ex[i] && (p_stamp[i] == l || (l_pods[l] & BIT(i))) ->
        r_n++;
        if
        :: p_gate[i] -> p_ex[i] = 0      /* a gated Pod has nothing to stop */
        :: !p_gate[i] -> p_del[i] = 1
        fi
     :: else
     fi;
     i++
  :: i >= NP -> break
  od;
  i = 0
}

init {
  /* a managed Deployment under lease 1, admitted as WorkloadAdmission admits it, at 0 replicas */
  atomic {
    l_ex[1] = 1;
    d_ex[1] = 1; d_stamp[1] = 1; d_gate[1] = 1; d_rep[1] = 0; d_should[1] = 1; l_rec[1] = 1;
    rs_ex = 1; rs_owner = 1; rs_stamp = 1; rs_tstamp = 1; rs_gate = 1; rs_rep = 0;
    cache[1] = 1; cache[4] = 1;
    snap()
  }
end:
  do
  /* ================= the operator ================= */
  /* reconcile: activation (§2.3), when this cluster can hold the central lease */
  :: atomic { (l_ex[1] || l_ex[2]) ->
       r_l = (l_ex[1] -> 1 : 2);
       if
       :: !l_del[r_l] && l_phase[r_l] != PH_STOPPING && !lost[r_l] && !other &&
          l_rec[r_l] != 0 && d_ex[l_rec[r_l]] && d_stamp[l_rec[r_l]] == r_l ->
          held[r_l] = 1;
          if :: l_phase[r_l] != PH_ACTIVE -> l_phase[r_l] = PH_ACTIVE; l_rv[r_l]++ :: else fi;
          d_rep[l_rec[r_l]] = 1;
          printf("EV activate l=%d\n", r_l)
       /* stop (§2.4 step 1, first half): commit Stopping */
       :: l_phase[r_l] == PH_ACTIVE && (l_del[r_l] || lost[r_l]) ->
          l_phase[r_l] = PH_STOPPING; l_rv[r_l]++;
          printf("EV stopping l=%d\n", r_l)
       /* a lease that never activated and is deleted: nothing to drain or release */
       :: l_phase[r_l] == PH_NONE && l_del[r_l] && !held[r_l] ->
          l_ex[r_l] = 0; l_del[r_l] = 0;
          printf("EV finalized l=%d\n", r_l)
       :: else -> skip
       fi;
       r_l = 0;
       check() }
  /* stop (§2.4, second half): the target to 0, drain, and release only once drained */
  :: atomic { (l_ex[1] && l_phase[1] == PH_STOPPING) || (l_ex[2] && l_phase[2] == PH_STOPPING) ->
       r_l = (l_ex[1] && l_phase[1] == PH_STOPPING -> 1 : 2);
       if :: l_rec[r_l] != 0 && d_ex[l_rec[r_l]] -> d_rep[l_rec[r_l]] = 0 :: else fi;
       drain(r_l);
       printf("EV drain l=%d left=%d\n", r_l, r_n);
       if
       :: r_n == 0 ->
          held[r_l] = 0; lost[r_l] = 0;
          if
          :: l_del[r_l] -> l_ex[r_l] = 0; l_del[r_l] = 0; l_phase[r_l] = PH_NONE; l_pods[r_l] = 0
          :: else -> l_phase[r_l] = PH_NONE; l_pods[r_l] = 0; l_rv[r_l]++
          fi
       :: else -> skip
       fi;
       r_n = 0; r_l = 0;
       check() }
  /* managed-permits (§2.7): a gated Pod of an Active lease, whose live chain ends at the target */
  :: atomic { p_next > 0 ->
       r_l = (l_ex[1] -> 1 : 2);
       i = 0;
       do
       :: i < NP ->
          if
          :: LIVE_ACTIVE(r_l) && held[r_l] && p_ex[i] && !p_del[i] && p_gate[i] && p_stamp[i] == r_l &&
             p_own[i] && rs_ex && rs_owner == l_rec[r_l] && d_ex[rs_owner] ->
             l_pods[r_l] = l_pods[r_l] | BIT(i); l_rv[r_l]++;
             printf("EV register by=%d slot=%d l=%d ok=1\n", A_OPERATOR, i, r_l);
             snap();
             /* the webhook's gate removal: the live lease is Active and the Pod registered */
             assert(LIVE_ACTIVE(r_l));
             printf("EV podungate by=%d slot=%d validating=1\n", A_OPERATOR, i);
             p_gate[i] = 0
          :: else
          fi;
          i++
       :: i >= NP -> break
       od;
       i = 0; r_l = 0;
       check() }
  /* the activation's deadline passes (lease.pml: its stop then ends before the central expiry) */
  :: atomic { losses > 0 && ((l_ex[1] && l_phase[1] == PH_ACTIVE) || (l_ex[2] && l_phase[2] == PH_ACTIVE)) ->
       losses--;
       if
       :: l_ex[1] && l_phase[1] == PH_ACTIVE -> lost[1] = 1; printf("EV lost l=1\n")
       :: else -> lost[2] = 1; printf("EV lost l=2\n")
       fi;
       snap() }
  /* the other cluster takes the central lease (only once this one released it) or gives it up */
  :: atomic { takeovers > 0 && !other && !held[1] && !held[2] -> takeovers--; other = 1;
       printf("EV other holds=1\n"); check() }
  :: atomic { takeovers > 0 && other -> takeovers--; other = 0; printf("EV other holds=0\n"); snap() }

#ifdef STALE
  /* ================= a second replica with a stale copy (hole 5) ================= */
  :: atomic { w_l == 0 && w_pod == 0 && (l_ex[1] || l_ex[2]) ->
       w_l = (l_ex[1] -> 1 : 2);
       if
       :: l_phase[w_l] == PH_ACTIVE && !l_del[w_l] ->
          w_rv = l_rv[w_l]; w_phase = l_phase[w_l]; w_pods = l_pods[w_l];
          printf("EV replicaread l=%d\n", w_l)
       :: else -> w_l = 3; printf("EV replicaread l=0\n")   /* nothing to do: this replica is done */
       fi;
       snap() }
  /* its registration: guarded by the resourceVersion it read (HOLE_STALE_REGISTER: not guarded) */
  :: atomic { w_l > 0 && w_l < 3 && w_pod == 0 ->
       i = 0;
       do
       :: i < NP && p_ex[i] && !p_del[i] && p_gate[i] && p_stamp[i] == w_l && !(w_pods & BIT(i)) -> w_pod = i + 1; break
       :: i < NP && !(p_ex[i] && !p_del[i] && p_gate[i] && p_stamp[i] == w_l && !(w_pods & BIT(i))) -> i++
       :: i >= NP -> break
       od;
       i = 0;
       if
       :: w_pod > 0 && l_ex[w_l] ->
#ifdef HOLE_STALE_REGISTER
          /* the stale copy's status is written back whole: Active, with the Pod */
          l_phase[w_l] = w_phase; l_pods[w_l] = w_pods | BIT(w_pod - 1); l_rv[w_l]++; w_reg = 1;
          printf("EV register by=%d slot=%d l=%d ok=1\n", A_REPLICA, w_pod - 1, w_l)
#else
          if
          :: l_rv[w_l] == w_rv -> l_pods[w_l] = l_pods[w_l] | BIT(w_pod - 1); l_rv[w_l]++; w_reg = 1;
             printf("EV register by=%d slot=%d l=%d ok=1\n", A_REPLICA, w_pod - 1, w_l)
          :: else ->   /* 409: not registered, not ungated */
             printf("EV register by=%d slot=%d l=%d ok=0\n", A_REPLICA, w_pod - 1, w_l)
          fi
#endif
       :: else -> skip
       fi;
       snap() }
  /* its gate removal, through the webhook (HOLE_STALE_UNGATE: the webhook reads a cached copy) */
  :: atomic { w_pod > 0 && w_reg ->
       if
       :: p_ex[w_pod - 1] && p_gate[w_pod - 1] && !p_del[w_pod - 1] &&
#ifdef HOLE_STALE_UNGATE
          w_phase == PH_ACTIVE ->
#else
          LIVE_ACTIVE(w_l) && (l_pods[w_l] & BIT(w_pod - 1)) ->
#endif
          printf("EV podungate by=%d slot=%d validating=1\n", A_REPLICA, w_pod - 1);
          assert(LIVE_ACTIVE(w_l));
          p_gate[w_pod - 1] = 0
       :: else ->
          /* the webhook's denial, when the Pod is still there to ungate */
          if
          :: p_ex[w_pod - 1] && p_gate[w_pod - 1] && !p_del[w_pod - 1] ->
             printf("EV podungate by=%d slot=%d validating=0\n", A_REPLICA, w_pod - 1)
          :: else
          fi
       fi;
       w_l = 3; w_pod = 0; w_reg = 0;
       check() }
#endif

  /* ================= Kubernetes' controllers and the kubelet ================= */
  /* the ReplicaSet follows its Deployment's replicas */
  :: atomic { rs_ex && rs_owner != 0 && d_ex[rs_owner] && rs_rep != d_rep[rs_owner] -> rs_rep = d_rep[rs_owner];
       printf("EV rsscale rep=%d\n", rs_rep); snap() }
  /* the ReplicaSet creates a Pod from its template (through the webhooks) */
  :: atomic { rs_ex && rs_rep > 0 && p_next < NP &&
       !((p_ex[0] && p_own[0] && !p_del[0]) || (NP > 1 && p_ex[1] && p_own[1] && !p_del[1])) ->
       create_pod(A_RS, 1, rs_tstamp, rs_gate);
       check() }
  /* a ReplicaSet at 0 deletes its Pods (not waited for by anyone) */
  :: atomic { rs_ex && rs_rep == 0 && ((p_ex[0] && p_own[0] && !p_del[0]) || (NP > 1 && p_ex[1] && p_own[1] && !p_del[1])) ->
       if
       :: p_ex[0] && p_own[0] && !p_del[0] -> printf("EV rsdelete slot=0\n");
          if :: p_gate[0] -> p_ex[0] = 0 :: else -> p_del[0] = 1 fi
       :: NP > 1 && p_ex[1] && p_own[1] && !p_del[1] -> printf("EV rsdelete slot=1\n");
          if :: p_gate[1] -> p_ex[1] = 0 :: else -> p_del[1] = 1 fi
       fi;
       check() }
  /* the kubelet: a deleted Pod's containers end */
  :: atomic { (p_ex[0] && p_del[0]) || (NP > 1 && p_ex[1] && p_del[1]) ->
       if
       :: p_ex[0] && p_del[0] -> p_ex[0] = 0; printf("EV podgone slot=0\n")
       :: NP > 1 && p_ex[1] && p_del[1] -> p_ex[1] = 0; printf("EV podgone slot=1\n")
       fi;
       check() }
#ifdef ORPHANS
  /* the ReplicaSet controller adopts a Pod without controller that matches its selector: a Pod UPDATE */
  :: atomic { rs_ex && ((p_ex[0] && !p_own[0]) || (NP > 1 && p_ex[1] && !p_own[1])) ->
       /* the slot in i: resolve_pod's lease count overwrites r_n */
       i = (p_ex[0] && !p_own[0] -> 0 : 1);
       if
       :: p_stamp[i] != 0 ->   /* an admitted Pod keeps its binding (never the case here) */
          printf("EV podadopt slot=%d validating=0\n", i)
       :: p_stamp[i] == 0 ->
          resolve_pod(1, 0, 1);
          if
          :: r_out == OUT_FREE -> p_own[i] = 1;           /* an unmanaged update */
             printf("EV podadopt slot=%d validating=1\n", i)
          :: else ->                                      /* denied, or 7a: cannot adopt */
             printf("EV podadopt slot=%d validating=0\n", i)
          fi
       fi;
       r_out = 0; r_l = 0; r_t = 0; r_n = 0;
       check() }
  /* a Deployment adopts the orphaned ReplicaSet (its selector matches): a ReplicaSet UPDATE, allowed
     for a stamped ReplicaSet (its binding comes from its own annotations, nothing else changes) */
  :: atomic { rs_ex && rs_owner == 0 && rs_stamp != 0 && (d_ex[1] || d_ex[2]) ->
       rs_owner = (d_ex[1] -> 1 : 2);
       printf("EV rsadopt d=%d validating=1\n", rs_owner);
       check() }
#endif
#ifdef CACHE
  /* the webhooks' informer caches catch up with the live leases (each, at its own pace) */
  :: atomic { cache[1] != l_ex[1] -> cache[1] = l_ex[1]; printf("EV cache view=0 l=1\n"); snap() }
  :: atomic { cache[2] != l_ex[2] -> cache[2] = l_ex[2]; printf("EV cache view=0 l=2\n"); snap() }
  :: atomic { cache[4] != l_ex[1] -> cache[4] = l_ex[1]; printf("EV cache view=1 l=1\n"); snap() }
  :: atomic { cache[5] != l_ex[2] -> cache[5] = l_ex[2]; printf("EV cache view=1 l=2\n"); snap() }
#else
  :: atomic { cache[1] != l_ex[1] || cache[2] != l_ex[2] || cache[4] != l_ex[1] || cache[5] != l_ex[2] ->
       cache[1] = l_ex[1]; cache[2] = l_ex[2]; cache[4] = l_ex[1]; cache[5] = l_ex[2];
       printf("EV cache view=2 l=0\n"); snap() }
#endif

  /* ================= users ================= */
  /* a Pod naming the ReplicaSet as its controller, without gate or stamp */
  :: atomic { user > 0 && p_next < NP -> user--; create_pod(A_USER, 1, 0, 0); check() }
  /* a plain Pod with the ReplicaSet's labels, no controller (the ReplicaSet may adopt it) */
  :: atomic { user > 0 && p_next < NP -> user--; create_pod(A_USER, 0, 0, 0); check() }
  /* the gate off a Pod: only the operator may (validateManagedObject); an unstamped Pod has none */
  :: atomic { user > 0 && ((p_ex[0] && p_gate[0]) || (NP > 1 && p_ex[1] && p_gate[1])) -> user--;
       r_n = (p_ex[0] && p_gate[0] -> 0 : 1);
       if
       :: p_stamp[r_n] == 0 -> printf("EV podungate by=%d slot=%d validating=1\n", A_USER, r_n); p_gate[r_n] = 0
       :: else -> printf("EV podungate by=%d slot=%d validating=0\n", A_USER, r_n)
       fi;
       r_n = 0;
       check() }
  /* a Deployment's replicas up: only while its lease is Active (7d); its template gate off: never (7b) */
  :: atomic { user > 0 && (d_ex[1] || d_ex[2]) -> user--;
       r_n = (d_ex[1] -> 1 : 2);
       if
       :: d_stamp[r_n] == 0 ->   /* unmanaged: anything goes */
          printf("EV deployupdate d=%d validating=1\n", r_n); d_rep[r_n] = 1; d_gate[r_n] = 0
       :: d_stamp[r_n] != 0 && LIVE_ACTIVE(d_stamp[r_n]) -> printf("EV deployupdate d=%d validating=1\n", r_n); d_rep[r_n] = 1
       :: else -> printf("EV deployupdate d=%d validating=0\n", r_n)
       fi;
       r_n = 0;
       check() }
#ifdef ORPHANS
  /* the Deployment deleted with orphan propagation: its ReplicaSet stays, without controller */
  :: atomic { user > 0 && (d_ex[1] || d_ex[2]) -> user--;
       r_n = (d_ex[1] -> 1 : 2);
       printf("EV deploydelete d=%d\n", r_n);
       d_ex[r_n] = 0;
       /* the garbage collector takes its controller reference off the ReplicaSet: an UPDATE, allowed */
       if :: rs_owner == r_n -> printf("EV rsorphan d=%d validating=1\n", r_n); rs_owner = 0 :: else fi;
       r_n = 0;
       check() }
#endif
  /* the BerthLease deleted (behind its finalizer) */
  :: atomic { user > 0 && ((l_ex[1] && !l_del[1]) || (l_ex[2] && !l_del[2])) -> user--;
       if
       :: l_ex[1] && !l_del[1] -> l_del[1] = 1; printf("EV leasedelete l=1\n")
       :: else -> l_del[2] = 1; printf("EV leasedelete l=2\n")
       fi;
       check() }
  /* a new BerthLease `web` (the second incarnation), once the first is gone */
  :: atomic { user > 0 && !l_ex[1] && !l_ex[2] && l_rv[2] == 0 && !l_del[2] && !d_ex[2] -> user--;
       l_ex[2] = 1; l_rv[2] = 1;
       printf("EV leasecreate l=2\n");
       check() }
  /* a new Deployment `web` (the second incarnation), once the first is gone: a root CREATE */
  :: atomic { user > 0 && !d_ex[1] && !d_ex[2] && d_should[2] == 0 && d_stamp[2] == 0 -> user--;
       d_should[2] = (l_ex[1] -> 1 : (l_ex[2] -> 2 : 0));
#ifdef HOLE_CACHE_ROOT
       r_view = 0;
#else
       r_view = 2;
#endif
       leases_for_web();
       if
       :: r_out == OUT_DENY ->   /* refused: never created */
          printf("EV deploycreate d=2 mutating=0 mstamp=0 validating=0\n"); d_should[2] = 9
       :: r_out == OUT_FREE -> printf("EV deploycreate d=2 mutating=1 mstamp=0 validating=1\n"); d_ex[2] = 1; d_rep[2] = 1
       :: r_out == OUT_BOUND ->
          /* recordTarget: the live lease, same UID, not deleting, no cleanup responsibility */
          if
          :: LEASE_OK(r_l) && l_phase[r_l] == PH_NONE && l_pods[r_l] == 0 ->
             printf("EV deploycreate d=2 mutating=1 mstamp=%d validating=1\n", r_l);
             d_ex[2] = 1; d_stamp[2] = r_l; d_gate[2] = 1; d_rep[2] = 1; l_rec[r_l] = 2; l_rv[r_l]++
          :: else -> printf("EV deploycreate d=2 mutating=1 mstamp=%d validating=0\n", r_l); d_should[2] = 9
          fi
       fi;
       assert(!d_ex[2] || d_should[2] == 0 || d_stamp[2] == d_should[2]);
       r_out = 0; r_l = 0; r_view = 0;
       check() }
  od
}
