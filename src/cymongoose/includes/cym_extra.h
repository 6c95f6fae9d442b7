/* Declarations cymongoose needs that mongoose.h does not export. */
#ifndef CYM_EXTRA_H
#define CYM_EXTRA_H
#include <stdint.h>
#include "mongoose.h"
/* The cym_* interface the build fixes add to mongoose.c (vendor/mongoose/cym_fixes.h). */
#include "cym_fixes.h"

/* Defined in mongoose.c (src/sntp.c): wall-clock milliseconds at mg_millis() == 0. */
extern uint64_t mg_boot_timestamp_ms;

#endif
