import FuzzSupport

runFuzzer(fuzzOne, seeds: DBusSeeds.all)
