/* sim_list.c: recency lists of keys over shared link arrays (sim_policy.h). */
#include <string.h>

#include "tools/sim_policy.h"

int fl_sim_links_init(fl_sim_links *l, uint64_t n_keys) {
  size_t n = n_keys ? n_keys : 1;
  l->prev = malloc(n * sizeof *l->prev);
  l->next = malloc(n * sizeof *l->next);
  l->on = calloc(n, sizeof *l->on);
  if (l->prev && l->next && l->on) return 0;
  fl_sim_links_free(l);
  return -1;
}

void fl_sim_links_free(fl_sim_links *l) {
  free(l->prev);
  free(l->next);
  free(l->on);
  memset(l, 0, sizeof *l);
}

void fl_sim_list_init(fl_sim_list *s, uint8_t id) {
  s->head = s->tail = FL_SIM_NEVER;
  s->size = 0;
  s->id = id;
}

void fl_sim_list_push(fl_sim_links *l, fl_sim_list *s, uint32_t key) {
  l->prev[key] = FL_SIM_NEVER;
  l->next[key] = s->head;
  if (s->head != FL_SIM_NEVER) l->prev[s->head] = key;
  else s->tail = key;
  s->head = key;
  l->on[key] = s->id;
  s->size++;
}

void fl_sim_list_remove(fl_sim_links *l, fl_sim_list *s, uint32_t key) {
  uint32_t p = l->prev[key], n = l->next[key];
  if (p != FL_SIM_NEVER) l->next[p] = n;
  else s->head = n;
  if (n != FL_SIM_NEVER) l->prev[n] = p;
  else s->tail = p;
  l->on[key] = 0;
  s->size--;
}

uint32_t fl_sim_list_pop_tail(fl_sim_links *l, fl_sim_list *s) {
  uint32_t key = s->tail;
  fl_sim_list_remove(l, s, key);
  return key;
}

void fl_sim_list_move(fl_sim_links *l, fl_sim_list *from, fl_sim_list *to, uint32_t key) {
  fl_sim_list_remove(l, from, key);
  fl_sim_list_push(l, to, key);
}
