/* SPDX-License-Identifier: MIT */
/* The library's version: fc_version() (compiled into the library) equals
 * the headers' FUCINA_VERSION_STRING, and fc_version_number() the macros. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "fucina/fucina.h"

Test(version, string_matches_headers)
{
    const char *v = fc_version();
    cr_assert_not_null(v);
    cr_assert_str_eq(v, FUCINA_VERSION_STRING);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", FUCINA_VERSION_MAJOR, FUCINA_VERSION_MINOR, FUCINA_VERSION_PATCH);
    cr_assert_str_eq(v, want);
}

Test(version, number_matches_headers)
{
    cr_assert_eq(fc_version_number(), FUCINA_VERSION_NUMBER);
    cr_assert_eq(fc_version_number(),
                 FUCINA_VERSION_MAJOR * 10000 + FUCINA_VERSION_MINOR * 100 + FUCINA_VERSION_PATCH);
}
