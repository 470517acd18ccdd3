import FuzzSupport

runFuzzer(fuzzOne, seeds: AdvertisementSeeds.all)
