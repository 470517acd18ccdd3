import BluectlCLI

Bluectl.prepareProcess()   // first, on the main thread: no other thread exists yet
await Bluectl.runMain()
