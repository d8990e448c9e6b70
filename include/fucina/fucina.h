/* Fucina: the umbrella header. */
#ifndef FUCINA_H
#define FUCINA_H

#include "fucina/version.h"
#include "fucina/export.h"
#include "fucina/status.h"
#include "fucina/half.h"
#include "fucina/dispatch.h"

#endif
