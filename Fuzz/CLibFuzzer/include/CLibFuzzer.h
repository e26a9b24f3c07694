#ifndef CLIBFUZZER_H
#define CLIBFUZZER_H
#include <stddef.h>
#include <stdint.h>

// libFuzzer's driver entry point (compiler-rt, FuzzerInterface.h). It exists only in binaries
// linked with -sanitize=fuzzer, so this target is part of the package only when scripts/fuzz
// builds it (LOCATIOND_FUZZ=1).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
