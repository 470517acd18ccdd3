/* Declarations only (see include/fuzz_driver.h); SwiftPM wants a source file. */
#include "fuzz_driver.h"
