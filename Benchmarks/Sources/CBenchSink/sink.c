#include "CBenchSink.h"

void bluectl_bench_consume(const void *value) {
    (void)value;
}
