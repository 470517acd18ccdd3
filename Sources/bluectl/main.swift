import BluectlCLI

await Bluectl.runMain()
