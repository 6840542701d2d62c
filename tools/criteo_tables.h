/* criteo_tables.h: the Criteo Kaggle set's 26 categorical tables and their rows. */
#ifndef FL_TOOLS_CRITEO_TABLES_H
#define FL_TOOLS_CRITEO_TABLES_H

#include <stdint.h>

/* The categorical columns C1..C26 of the Criteo Kaggle display-ads set
 * (Display Advertising Challenge): one table each. */
enum { FL_CRITEO_TABLES = 26 };

/* Rows of tables C1..C26: their distinct values after dictionary encoding
 * of the full data. */
static const uint64_t fl_criteo_rows[FL_CRITEO_TABLES] = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572};

#endif
