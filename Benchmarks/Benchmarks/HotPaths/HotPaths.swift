// bluectl's hot paths under package-benchmark (`swift package benchmark`,
// or Scripts/bench micro): wall clock, CPU, mallocs (malloc-interposer) and
// throughput per operation. The cases — what is measured, on what — are in
// Sources/HotPathCases (shared with HotPathCount, the callgrind driver).
// Not among the metrics: `instructions` needs the CPU's performance counters,
// which this machine (a VM) does not expose (perf_event_open fails and the
// metric reads 0), so Scripts/bench micro counts instructions with callgrind
// instead; `cpuTotal` is read in clock ticks (10 ms) on Linux, coarser than a
// measurement here (a single-threaded loop: its wall clock is its CPU time).
import Benchmark
import HotPathCases

let benchmarks: @Sendable () -> Void = {
    // A measurement is 1,000 operations (.kilo); results are per operation.
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput],
        warmupIterations: 3,
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        maxIterations: 200
    )
    for path in HotPaths.all {
        Benchmark(path.name) { benchmark, operation in
            for _ in benchmark.scaledIterations { operation() }
        } setup: {
            path.prepare()
        }
    }
}
