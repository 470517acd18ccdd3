import Testing
@testable import BluectlCLI

/// The gateway's stalled-scan watchdog: when it asks for a recovery, and which (docs/gateway.md, "The scan").
@Suite("gateway: the stalled-scan watchdog's ladder")
struct ScanWatchdogTests {
    let start = ContinuousClock.now

    @Test("silent for the period: restart; silent again: power cycle; then only restarts, until something is heard")
    func ladder() {
        var watchdog = ScanWatchdog(silence: .seconds(60), now: start)
        #expect(watchdog.check(at: start + .seconds(59)) == nil)
        #expect(watchdog.check(at: start + .seconds(60))?.step == .restartDiscovery)
        #expect(watchdog.check(at: start + .seconds(61)) == nil, "the next one a further period later")
        #expect(watchdog.check(at: start + .seconds(120))?.step == .powerCycle)
        #expect(watchdog.check(at: start + .seconds(180))?.step == .restartDiscovery)
        #expect(watchdog.check(at: start + .seconds(240))?.step == .restartDiscovery, "one power cycle per silent spell")
        watchdog.heard(at: start + .seconds(250))
        #expect(watchdog.check(at: start + .seconds(309)) == nil)
        let next = watchdog.check(at: start + .seconds(310))
        #expect(next?.step == .restartDiscovery, "heard: the ladder starts again")
        #expect(next?.silent == .seconds(60))
    }

    @Test("an advertisement heard puts the recovery off; no recovery while the scan is lost, the silence counted from its return")
    func heardAndPaused() {
        var watchdog = ScanWatchdog(silence: .seconds(10), now: start)
        watchdog.heard(at: start + .seconds(8))
        #expect(watchdog.check(at: start + .seconds(17)) == nil)
        watchdog.paused()
        #expect(watchdog.check(at: start + .seconds(100)) == nil)
        watchdog.resumed(at: start + .seconds(100))
        #expect(watchdog.check(at: start + .seconds(109)) == nil)
        #expect(watchdog.check(at: start + .seconds(110))?.step == .restartDiscovery)
    }

    @Test("--scan-watchdog 0: never a recovery")
    func off() {
        var watchdog = ScanWatchdog(silence: nil, now: start)
        #expect(watchdog.check(at: start + .seconds(86_400)) == nil)
    }

    @Test("gaps and silences in tenths of a second")
    func tenths() {
        #expect(Duration.milliseconds(3_449).tenthsOfSeconds == 3.4)
        #expect(Duration.milliseconds(3_450).tenthsOfSeconds == 3.5)
        #expect(Duration.seconds(120).tenthsOfSeconds == 120)
    }
}
