// SwiftPM links an executable target with `--defsym main=<module>_main`, so libFuzzer's own
// main() is never used: this is the entry point instead, handing the command line to
// libFuzzer's driver with the Swift callback (Fuzz/Entry/FuzzEntry.swift).
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

int hearth_fuzz_main(int argc, char **argv) {
    return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
}
