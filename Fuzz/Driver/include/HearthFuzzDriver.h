#ifndef HEARTH_FUZZ_DRIVER_H
#define HEARTH_FUZZ_DRIVER_H
// (empty: the driver only defines hearth_fuzz_main, see driver.c)
#endif
