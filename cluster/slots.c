/* slots.c: key slots, the slot map and redirections (see slots.h). */
#include "cluster/slots.h"

#include <stdlib.h>
#include <string.h>

uint16_t fl_crc16(const char *buf, size_t len) {
  uint16_t crc = 0;
  for (size_t i = 0; i < len; i++) {
    crc ^= (uint16_t)((unsigned char)buf[i] << 8);
    for (int b = 0; b < 8; b++) crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

uint16_t fl_key_slot(const char *key, size_t len) {
  const char *open = memchr(key, '{', len);
  if (open) {
    size_t rest = len - (size_t)(open + 1 - key);
    const char *close = memchr(open + 1, '}', rest);
    if (close && close > open + 1) return fl_crc16(open + 1, (size_t)(close - open - 1)) & (FL_SLOTS - 1);
  }
  return fl_crc16(key, len) & (FL_SLOTS - 1);
}

void fl_slot_map_init(fl_slot_map *m) {
  memset(m, 0, sizeof *m);
  for (int i = 0; i < FL_SLOTS; i++) m->master[i] = -1;
}

int fl_slot_map_node(fl_slot_map *m, const char *host, size_t host_len, int port) {
  if (host_len >= sizeof m->nodes[0].host) return -1;
  for (int i = 0; i < m->n_nodes; i++)
    if (m->nodes[i].port == port && strlen(m->nodes[i].host) == host_len &&
        !memcmp(m->nodes[i].host, host, host_len))
      return i;
  if (m->n_nodes == FL_SLOTS_MAX_NODES) return -1;
  fl_node_addr *a = &m->nodes[m->n_nodes];
  memcpy(a->host, host, host_len);
  a->host[host_len] = '\0';
  a->port = port;
  return m->n_nodes++;
}

int fl_slot_map_set(fl_slot_map *m, const fl_slot_range *r, size_t n) {
  int16_t *master = malloc(sizeof m->master);
  if (!master) return -1;
  for (int i = 0; i < FL_SLOTS; i++) master[i] = -1;
  /* Nodes are added to m even when a later range fails: harmless, numbers
   * are never reused. */
  for (size_t k = 0; k < n; k++) {
    int node = fl_slot_map_node(m, r[k].host, r[k].host_len, r[k].port);
    if (node < 0 || r[k].start < 0 || r[k].end >= FL_SLOTS || r[k].start > r[k].end) {
      free(master);
      return -1;
    }
    for (int s = r[k].start; s <= r[k].end; s++) master[s] = (int16_t)node;
  }
  memcpy(m->master, master, sizeof m->master);
  free(master);
  return 0;
}

fl_redirect fl_redirect_parse(const char *err, size_t len) {
  fl_redirect r = {0};
  char buf[128];
  if (len >= sizeof buf) return r;
  memcpy(buf, err, len);
  buf[len] = '\0';
  fl_redirect_kind kind;
  const char *p;
  if (!strncmp(buf, "MOVED ", 6)) kind = FL_REDIRECT_MOVED, p = buf + 6;
  else if (!strncmp(buf, "ASK ", 4)) kind = FL_REDIRECT_ASK, p = buf + 4;
  else return r;
  char *end;
  long slot = strtol(p, &end, 10);
  if (end == p || *end != ' ' || slot < 0 || slot >= FL_SLOTS) return r;
  const char *addr = end + 1, *colon = strrchr(addr, ':');
  if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof r.host) return r;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port <= 0 || port > 65535) return r;
  memcpy(r.host, addr, (size_t)(colon - addr));
  r.host[colon - addr] = '\0';
  r.port = (int)port;
  r.slot = (int)slot;
  r.kind = kind;
  return r;
}
