/* SPDX-License-Identifier: MIT */
/* Fucina: symbol visibility. The library is built with -fvisibility=hidden;
 * only declarations marked FC_API are exported from the shared object. */
#ifndef FUCINA_EXPORT_H
#define FUCINA_EXPORT_H

#if defined(FUCINA_STATIC_DEFINE)
#define FC_API
#elif defined(__GNUC__)
#define FC_API __attribute__((visibility("default")))
#else
#define FC_API
#endif

#endif
