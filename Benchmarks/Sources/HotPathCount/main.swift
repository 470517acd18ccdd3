// Runs one hot path a given number of times, for valgrind's callgrind
// (instructions per operation where the CPU's counters cannot be read):
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=bluectl_bench_measure \
//     HotPathCount NAME ITERATIONS
// counts exactly the ITERATIONS operations: not the set-up, not the warm-up
// before them (first-use costs: type metadata, lazy globals), not the exit.
// Scripts/bench micro divides by ITERATIONS.
// usage: HotPathCount --list | HotPathCount NAME ITERATIONS
import HotPathCases
#if canImport(Glibc)
import Glibc
#endif

/// The measured region (callgrind collects inside this symbol only).
@inline(never) @_silgen_name("bluectl_bench_measure")
func measure(_ operation: () -> Void, _ iterations: Int) {
    for _ in 0..<iterations { operation() }
}

let arguments = CommandLine.arguments
if arguments.count == 2, arguments[1] == "--list" {
    for path in HotPaths.all { print("\(path.name)\t\(path.about)") }
    exit(0)
}
guard arguments.count == 3, let path = HotPaths.named(arguments[1]), let iterations = Int(arguments[2]), iterations > 0 else {
    let names = HotPaths.all.map(\.name).joined(separator: ", ")
    let usage = "usage: HotPathCount --list | HotPathCount NAME ITERATIONS\n  NAME: \(names)\n"
    _ = usage.withCString { write(2, $0, strlen($0)) }
    exit(64)
}
let operation = path.prepare()
for _ in 0..<100 { operation() }
measure(operation, iterations)
