import FuzzSupport

runFuzzer(fuzzOne, seeds: ProxySeeds.all)
