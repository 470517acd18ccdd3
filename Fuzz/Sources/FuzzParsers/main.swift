import FuzzSupport

runFuzzer(fuzzOne, seeds: ParserSeeds.all)
