/* libFuzzer's driver entry (compiler-rt, linked by -sanitize=fuzzer).
 * SwiftPM links every executable with main = <Target>_main, so libFuzzer's
 * own main never runs: each fuzz target's main.swift calls this instead. */
#ifndef BLUECTL_FUZZ_DRIVER_H
#define BLUECTL_FUZZ_DRIVER_H
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv,
                        int (*callback)(const uint8_t *data, size_t size));

#endif
