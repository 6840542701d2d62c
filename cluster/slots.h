/* slots.h: Redis Cluster routing, the part hiredis 0.14 lacks: the key ->
 * hash slot function (CRC16/XMODEM of the key or of its {hash tag}), the
 * slot -> master map built from CLUSTER SLOTS, and the parsing of MOVED/ASK
 * redirections. Pure functions and plain data: no I/O, no locks (the client,
 * client.c, serializes access to the map). */
#ifndef FL_CLUSTER_SLOTS_H
#define FL_CLUSTER_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#define FL_SLOTS 16384
/* Nodes a map can name: plenty for the clusters this serves; a cluster that
 * names more fails the refresh with a message. */
#define FL_SLOTS_MAX_NODES 256

/* CRC16/XMODEM (poly 0x1021, init 0), as in the Redis Cluster spec. */
uint16_t fl_crc16(const char *buf, size_t len);
/* The hash slot of a key: the CRC of the part between the first '{' and the
 * next '}' when that part is non-empty, else of the whole key; mod 16384. */
uint16_t fl_key_slot(const char *key, size_t len);

typedef struct fl_node_addr {
  char host[64]; /* as the cluster announces it (an IP address here) */
  int port;
} fl_node_addr;

/* Which node serves each slot. Node numbers index `nodes` and never change
 * meaning once handed out (a map only appends), so a caller can keep one. */
typedef struct fl_slot_map {
  int16_t master[FL_SLOTS];                /* node serving the slot, -1: none */
  fl_node_addr nodes[FL_SLOTS_MAX_NODES];  /* known nodes */
  int n_nodes;                             /* entries of nodes in use */
} fl_slot_map;

void fl_slot_map_init(fl_slot_map *m);
/* The number of host:port, added when new; -1 when the map is full. */
int fl_slot_map_node(fl_slot_map *m, const char *host, size_t host_len, int port);

/* One slot range of a CLUSTER SLOTS reply: slots [start, end] served by the
 * master at host:port. */
typedef struct fl_slot_range {
  int start, end;
  const char *host;
  size_t host_len;
  int port;
} fl_slot_range;
/* Replaces the map's assignment with `n` ranges (slots in none: -1). 0, or
 * -1 when a range is malformed or the node table is full (map unchanged). */
int fl_slot_map_set(fl_slot_map *m, const fl_slot_range *r, size_t n);

/* A redirection error: "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>". */
typedef enum fl_redirect_kind { FL_REDIRECT_NONE = 0, FL_REDIRECT_MOVED, FL_REDIRECT_ASK } fl_redirect_kind;
typedef struct fl_redirect {
  fl_redirect_kind kind;
  int slot;
  char host[64];
  int port;
} fl_redirect;
/* Parses an error reply's text; kind NONE when it is not a redirection. */
fl_redirect fl_redirect_parse(const char *err, size_t len);

#endif
