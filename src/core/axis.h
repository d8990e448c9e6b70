/* SPDX-License-Identifier: MIT */
/* Interned axis names.
 *
 * An axis name is interned once and compared by pointer afterwards. The
 * table only grows (names are few: a model uses tens); it is capped so a
 * program that makes names from data fails cleanly instead of growing
 * without bound. */
#ifndef FC_CORE_AXIS_H
#define FC_CORE_AXIS_H

#include <stddef.h>

#define FC_AXIS_TABLE_CAP 65536

/* The interned copy of `name`, or NULL when the name is invalid (empty,
 * longer than 31 bytes, a byte outside [A-Za-z0-9_.]) or the table is full;
 * `why` (may be NULL) then gets a static reason. Thread-safe. */
const char *fc_axis_intern(const char *name, const char **why);

/* The positional name _i (0 <= i < 8), pre-interned. */
const char *fc_axis_positional(int i);

/* Is `interned` one of the positional names? */
int fc_axis_is_positional(const char *interned);

#endif
