/* stress_rows.c: the stress run's tables and rows: the three table shapes,
 * each row's id, and the row encoding of stress.c's opening comment (a
 * version and a hash of (table, id, version), exact in fp16 and fp32). */
#include "common/half.h"
#include "tools/stress.h"

const shape shapes[3] = {
    {"dense fp32", 16384, 16, FL_FP32, FL_IDS_DENSE},
    {"dense fp16", 8192, 24, FL_FP16, FL_IDS_DENSE},
    {"hashed fp32", 8192, 8, FL_FP32, FL_IDS_HASHED},
};

uint64_t row_id(const table *t, uint64_t k) {
  /* Hashed tables: a bijection of (table, k), so ids are distinct and spread. */
  return t->shape->id_kind == FL_IDS_DENSE ? k : fl_mix64(((uint64_t)t->index << 32) | k);
}

static float element(const table *t, uint64_t id, uint64_t version, uint32_t j) {
  if (j < DIGITS) return (float)((version >> (10 * j)) & 1023u);
  uint64_t h = fl_hash2(fl_hash2(id, version), ((uint64_t)t->index << 32) | j);
  return (float)((int)(h % 2047u) - 1023);
}

void encode_row(const table *t, uint64_t id, uint64_t version, void *out) {
  for (uint32_t j = 0; j < t->shape->dim; j++) {
    float v = element(t, id, version, j);
    if (t->shape->dtype == FL_FP16)
      ((uint16_t *)out)[j] = fl_f32_to_f16(v);
    else
      ((float *)out)[j] = v;
  }
}

uint64_t decode_version(const table *t, const void *row) {
  uint64_t v = 0;
  for (uint32_t j = 0; j < DIGITS; j++) {
    float x = t->shape->dtype == FL_FP16 ? fl_f16_to_f32(((const uint16_t *)row)[j])
                                         : ((const float *)row)[j];
    if (!(x >= 0 && x <= 1023) || x != (float)(uint32_t)x) return 0;
    v |= (uint64_t)x << (10 * j);
  }
  return v;
}
