#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-baselines.h"

static void
set_size (KstaledDecision *d, guint64 new_kib, KstaledReason reason)
{
  d->reason = reason;
  if (new_kib == d->actual_kib)
    return;
  d->new_kib = new_kib;
  d->action = new_kib > d->actual_kib ? KSTALED_ACTION_DEFLATE
                                      : KSTALED_ACTION_INFLATE;
}

static double
mean (const guint64 *samples, guint n)
{
  double sum = 0;

  for (guint i = 0; i < n; i++)
    sum += (double) samples[i];
  return n ? sum / n : 0;
}

/* balloon.rules' change_big_enough. */
static gboolean
mom_change_big_enough (double new_kib, double cur_kib)
{
  return ABS (new_kib - cur_kib) > KSTALED_MOM_MIN_CHANGE * cur_kib;
}

/* vdsm's 02-balloon.policy, rule by rule.  MOM averages only the
 * statistics that give the guest's used memory (StatAvg of balloon_cur and
 * mem_unused, 10 samples in mom.conf's default; the agent takes one sample
 * per decision); every step, the free share and the dead band are taken
 * of the balloon's current size (guest.balloon_cur). */
void
kstaled_mom_decide (const KstaledPolicyConfig *config,
                    const KstaledPolicyInput *input,
                    KstaledPolicyState *state, KstaledDecision *d)
{
  guint slot = state->mom_samples % KSTALED_MOM_SAMPLES;
  guint n;
  double host_free, guest_free, cur, used, balloon_min, size;

  if (!input->stats.has_unused)
    {
      d->reason = KSTALED_REASON_NO_GUEST_STATS;
      return;
    }
  state->mom_actual[slot] = d->actual_kib;
  state->mom_unused[slot] = input->stats.unused;
  state->mom_samples++;
  n = MIN (state->mom_samples, KSTALED_MOM_SAMPLES);
  cur = (double) d->actual_kib;
  /* "used" is the balloon minus the guest's free memory: page cache counts
   * as used, as in MOM. */
  used = MAX (mean (state->mom_actual, n) - mean (state->mom_unused, n), 0);
  host_free = kstaled_host_free_permille (input->host) / 1000.0;
  d->has_estimate = TRUE;
  d->working_set_kib = (guint64) used;
  /* guest.balloon_min: the guaranteed memory (vdsm's guest_qos). */
  d->floor_kib = MIN (config->min_memory_kib, d->max_kib);

  /* Critical pressure makes the guest's free share negative, forcing it
   * to swap; otherwise the free share scales with the host's
   * (min_guest_free_percent * host_free / pressure_threshold).  Both
   * shrink_guest and grow_guest compute it so. */
  guest_free = host_free <= KSTALED_MOM_PRESSURE_CRITICAL
               ? host_free - KSTALED_MOM_PRESSURE_CRITICAL
               : KSTALED_MOM_MIN_GUEST_FREE *
                 (host_free / KSTALED_MOM_PRESSURE_THRESHOLD);
  balloon_min = MAX ((double) d->floor_kib, used + guest_free * cur);

  if (host_free < KSTALED_MOM_PRESSURE_THRESHOLD)
    {
      /* shrink_guest: 5 % of the balloon per run, down to balloon_min. */
      size = MAX (cur * (1 - KSTALED_MOM_MAX_CHANGE), balloon_min);
      d->target_kib = (guint64) balloon_min;
      if (size <= cur && mom_change_big_enough (size, cur))
        set_size (d, (guint64) size, KSTALED_REASON_SHRINK);
    }
  else if (d->actual_kib < d->max_kib)
    {
      /* grow_guest: 5 % of the balloon per run, at least to balloon_min,
       * at most to the maximum. */
      size = MIN (MAX (cur * (1 + KSTALED_MOM_MAX_CHANGE), balloon_min),
                  (double) d->max_kib);
      d->target_kib = d->max_kib;
      if (mom_change_big_enough (size, cur))
        set_size (d, (guint64) size, KSTALED_REASON_GROW);
    }
  /* guest_qos, run after the balloon rules: never below the guarantee. */
  if (d->actual_kib < d->floor_kib)
    set_size (d, d->floor_kib, KSTALED_REASON_GROW);
  if (d->action == KSTALED_ACTION_NONE)
    d->reason = KSTALED_REASON_HYSTERESIS;
}

void
kstaled_proxmox_decide (const KstaledPolicyConfig *config,
                        const KstaledPolicyInput *input, KstaledDecision *d)
{
  const KstaledVmRecord *last = NULL;
  KstaledVmRecord record = {
    .proxmox = TRUE,
    .actual_kib = d->actual_kib,
    .max_kib = d->max_kib,
    .min_kib = MIN (config->min_memory_kib, d->max_kib),
    .unused_kib = input->stats.unused,
    .shares = config->shares,
  };

  d->has_estimate = TRUE;
  d->floor_kib = record.min_kib;
  d->target_kib = d->actual_kib;
  if (input->host != NULL && input->domain != NULL)
    {
      last = kstaled_host_lookup (input->host, input->domain);
      kstaled_host_record (input->host, input->domain, &record);
    }
  /* The round's target was computed from the balloon as it was then; once
   * set, it is not repeated. */
  if (last == NULL || !last->has_proxmox_target ||
      last->proxmox_target_kib == last->actual_kib)
    {
      d->reason = KSTALED_REASON_HYSTERESIS;
      return;
    }
  d->target_kib = last->proxmox_target_kib;
  set_size (d, d->target_kib, d->target_kib > d->actual_kib
                              ? KSTALED_REASON_GROW : KSTALED_REASON_SHRINK);
  if (d->action == KSTALED_ACTION_NONE)
    d->reason = KSTALED_REASON_HYSTERESIS;
}

void
kstaled_static_decide (const KstaledPolicyInput *input, KstaledDecision *d)
{
  (void) input;
  d->target_kib = d->max_kib;
  set_size (d, d->max_kib, KSTALED_REASON_STATIC);
  if (d->action == KSTALED_ACTION_NONE)
    d->reason = KSTALED_REASON_HYSTERESIS;
}

/* compute_alg1's change_func: moves the domains in @ids toward their
 * share-proportional size by at most the maximum change each, until @bytes
 * are placed or nothing moves; returns what is left.  Sizes in KiB. */
static gint64
proxmox_change (const KstaledVmRecord *vms, gint64 *res, const guint *ids,
                guint n_ids, gint64 bytes)
{
  g_autofree gboolean *done = g_new0 (gboolean, MAX (n_ids, 1));
  gint64 rest = bytes;
  gboolean repeat = TRUE;
  gint64 progress = 1;

  while (rest != 0 && repeat && progress != 0)
    {
      gint64 shares_total = 0, alloc_old = 0, alloc_new, changes = 0;

      repeat = FALSE;
      progress = 0;
      for (guint i = 0; i < n_ids; i++)
        if (!done[i])
          {
            alloc_old += res[ids[i]] - (gint64) vms[ids[i]].min_kib;
            shares_total += vms[ids[i]].shares;
          }
      alloc_new = alloc_old + rest;
      for (guint i = 0; i < n_ids; i++)
        {
          const KstaledVmRecord *v = &vms[ids[i]];
          gint64 balloon = (gint64) v->actual_kib, desired, target;

          if (done[i])
            continue;
          desired = (gint64) v->min_kib +
                    (gint64) ((double) alloc_new / shares_total * v->shares);
          if (desired > (gint64) v->max_kib)
            desired = (gint64) v->max_kib, repeat = TRUE;
          else if (desired < (gint64) v->min_kib)
            desired = (gint64) v->min_kib, repeat = TRUE;
          if (bytes > 0 && desired > balloon)
            target = MIN (balloon + KSTALED_PROXMOX_MAX_CHANGE_KIB, desired);
          else if (desired < balloon)
            target = MAX (balloon - KSTALED_PROXMOX_MAX_CHANGE_KIB, desired);
          else
            {
              done[i] = TRUE;
              continue;
            }
          if (target != res[ids[i]])
            {
              changes += target - res[ids[i]];
              progress += ABS (target - balloon);
              res[ids[i]] = target;
              repeat = TRUE;
            }
        }
      rest -= changes;
    }
  return rest;
}

void
kstaled_proxmox_allocate (KstaledVmRecord *vms, guint n, guint64 total_kib,
                          guint64 used_kib)
{
  g_autofree gint64 *res = g_new (gint64, MAX (n, 1));
  g_autofree guint *all = g_new (guint, MAX (n, 1));
  g_autofree guint *pressed = g_new (guint, MAX (n, 1));
  g_autofree guint *comfortable = g_new (guint, MAX (n, 1));
  guint n_all = 0, n_pressed = 0, n_comfortable = 0;
  /* pvestatd: keep 80 % of the host's memory used. */
  gint64 goal = (gint64) (total_kib * KSTALED_PROXMOX_TARGET_USED) -
                (gint64) used_kib;
  gint64 rest;

  for (guint i = 0; i < n; i++)
    {
      const KstaledVmRecord *v = &vms[i];

      res[i] = (gint64) v->actual_kib;
      if (!v->proxmox || v->actual_kib == 0 || v->min_kib == 0 ||
          v->shares == 0)
        continue;
      all[n_all++] = i;
      /* Comfortable: the guest's free memory is above a quarter of its
       * minimum. */
      if (v->unused_kib > v->min_kib / 4 && v->actual_kib >= v->min_kib)
        comfortable[n_comfortable++] = i;
      else
        pressed[n_pressed++] = i;
    }
  if (goal > KSTALED_PROXMOX_DEAD_BAND_KIB)
    {
      /* Grow the pressed domains first, then all. */
      rest = proxmox_change (vms, res, pressed, n_pressed, goal);
      if (rest >= goal)
        proxmox_change (vms, res, all, n_all, rest);
    }
  else if (goal < -KSTALED_PROXMOX_DEAD_BAND_KIB)
    {
      /* Shrink the comfortable domains first, then all. */
      rest = proxmox_change (vms, res, comfortable, n_comfortable, goal);
      if (rest <= goal)
        proxmox_change (vms, res, all, n_all, rest);
    }
  for (guint i = 0; i < n_all; i++)
    {
      KstaledVmRecord *v = &vms[all[i]];

      if (res[all[i]] != (gint64) v->actual_kib)
        {
          v->has_proxmox_target = TRUE;
          v->proxmox_target_kib = (guint64) res[all[i]];
        }
    }
}
