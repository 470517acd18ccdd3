#ifndef CBENCHSINK_H
#define CBENCHSINK_H
/// Takes the address of a result so that the optimizer must compute it: a
/// call into C that Swift cannot see through (defined in sink.c, not here).
void bluectl_bench_consume(const void *value);
#endif
