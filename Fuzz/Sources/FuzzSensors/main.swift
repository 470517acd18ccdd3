import FuzzSupport

runFuzzer(fuzzOne, seeds: SensorSeeds.all)
