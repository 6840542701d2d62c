/* sim_heap.c: the indexed binary min-heap of keys (sim_policy.h). */
#include <string.h>

#include "tools/sim_policy.h"

int fl_sim_heap_init(fl_sim_heap *h, uint64_t cap, uint64_t n_keys) {
  h->size = 0;
  h->cap = cap;
  h->slot = malloc((cap ? cap : 1) * sizeof *h->slot);
  h->pos = malloc((n_keys ? n_keys : 1) * sizeof *h->pos);
  if (!h->slot || !h->pos) {
    fl_sim_heap_free(h);
    return -1;
  }
  memset(h->pos, 0xff, (n_keys ? n_keys : 1) * sizeof *h->pos); /* FL_SIM_NEVER */
  return 0;
}

void fl_sim_heap_free(fl_sim_heap *h) {
  free(h->slot);
  free(h->pos);
  memset(h, 0, sizeof *h);
}

static void place(fl_sim_heap *h, uint64_t i, fl_sim_heap_slot s) {
  h->slot[i] = s;
  h->pos[s.key] = (uint32_t)i;
}

/* Moves slot i's entry up or down until its parent is no greater and its
 * children no smaller. */
static void settle(fl_sim_heap *h, uint64_t i) {
  fl_sim_heap_slot s = h->slot[i];
  while (i > 0 && h->slot[(i - 1) / 2].prio > s.prio) {
    place(h, i, h->slot[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  for (;;) {
    uint64_t c = 2 * i + 1;
    if (c >= h->size) break;
    if (c + 1 < h->size && h->slot[c + 1].prio < h->slot[c].prio) c++;
    if (h->slot[c].prio >= s.prio) break;
    place(h, i, h->slot[c]);
    i = c;
  }
  place(h, i, s);
}

void fl_sim_heap_push(fl_sim_heap *h, uint32_t key, uint64_t prio) {
  fl_sim_heap_slot s = {prio, key};
  place(h, h->size++, s);
  settle(h, h->size - 1);
}

void fl_sim_heap_update(fl_sim_heap *h, uint32_t key, uint64_t prio) {
  uint64_t i = h->pos[key];
  h->slot[i].prio = prio;
  settle(h, i);
}

uint32_t fl_sim_heap_pop(fl_sim_heap *h) {
  uint32_t key = h->slot[0].key;
  h->pos[key] = FL_SIM_NEVER;
  if (--h->size > 0) {
    place(h, 0, h->slot[h->size]);
    settle(h, 0);
  }
  return key;
}
