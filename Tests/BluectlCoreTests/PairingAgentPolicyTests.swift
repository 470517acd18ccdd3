import BluectlDBus
import Testing
@testable import BluectlCore

@Suite struct PairingAgentPolicyTests {
    let ours = ObjectPath("/org/bluez/hci1/dev_00_AA_01_00_00_00")!
    let other = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01")!

    func decide(_ member: String, _ args: [DBusValue], sender: String? = ":1.1", interface: String? = "org.bluez.Agent1") -> PairingAgent.Answer {
        PairingAgent.decide(member: member, interface: interface, arguments: args, sender: sender, bluetoothd: ":1.1",
                            allowed: [ours], capability: .noInputNoOutput)
    }

    @Test func acceptsJustWorksForItsDevice() {
        #expect(decide("RequestAuthorization", [.objectPath(ours)]) == .accept)
        #expect(decide("RequestConfirmation", [.objectPath(ours), .uint32(123456)]) == .accept)
        #expect(decide("AuthorizeService", [.objectPath(ours), .string("0000180f-0000-1000-8000-00805f9b34fb")]) == .accept)
        #expect(decide("Release", []) == .accept)
        #expect(decide("Cancel", []) == .accept)
    }

    @Test func rejectsOtherDevices() {
        guard case .reject = decide("RequestAuthorization", [.objectPath(other)]) else { Issue.record("accepted"); return }
        guard case .reject = decide("AuthorizeService", [.objectPath(other), .string("1800")]) else { Issue.record("accepted"); return }
        guard case .reject = decide("RequestConfirmation", [.objectPath(other), .uint32(1)]) else { Issue.record("accepted"); return }
    }

    @Test func rejectsInputItCannotGive() {
        guard case .reject = decide("RequestPinCode", [.objectPath(ours)]) else { Issue.record("accepted"); return }
        guard case .reject = decide("RequestPasskey", [.objectPath(ours)]) else { Issue.record("accepted"); return }
    }

    @Test func rejectsCallersOtherThanBluetoothd() {
        guard case .reject = decide("RequestAuthorization", [.objectPath(ours)], sender: ":1.99") else { Issue.record("accepted"); return }
        guard case .reject = decide("RequestAuthorization", [.objectPath(ours)], sender: nil) else { Issue.record("accepted"); return }
    }

    @Test func unknownMethodsAndInterfaces() {
        #expect(decide("Frobnicate", [.objectPath(ours)]) == .unknownMethod)
        #expect(decide("RequestAuthorization", [.objectPath(ours)], interface: "org.example.Other") == .unknownMethod)
    }

    func decideKD(_ member: String, _ args: [DBusValue], sender: String? = ":1.1") -> PairingAgent.Answer {
        PairingAgent.decide(member: member, interface: "org.bluez.Agent1", arguments: args, sender: sender, bluetoothd: ":1.1",
                            allowed: [ours], capability: .keyboardDisplay)
    }

    @Test func keyboardDisplayAsksAboutItsDeviceOnly() {
        #expect(decideKD("RequestConfirmation", [.objectPath(ours), .uint32(123456)]) == .ask(.confirmPasskey(123456)))
        #expect(decideKD("RequestPasskey", [.objectPath(ours)]) == .ask(.enterPasskey))
        #expect(decideKD("RequestPinCode", [.objectPath(ours)]) == .ask(.enterPinCode))
        #expect(decideKD("DisplayPasskey", [.objectPath(ours), .uint32(42), .uint16(2)]) == .ask(.displayPasskey(42, entered: 2)))
        #expect(decideKD("DisplayPinCode", [.objectPath(ours), .string("0000")]) == .ask(.displayPinCode("0000")))
        #expect(decideKD("AuthorizeService", [.objectPath(ours), .string("180f")]) == .ask(.authorizeService("180f")))
        #expect(decideKD("Cancel", []) == .accept)
        guard case .reject = decideKD("RequestPasskey", [.objectPath(other)]) else { Issue.record("asked about another device"); return }
        guard case .reject = decideKD("RequestConfirmation", [.objectPath(ours), .uint32(1)], sender: ":1.99") else {
            Issue.record("asked for a caller other than bluetoothd"); return
        }
        #expect(decideKD("RequestConfirmation", [.objectPath(ours)]) == .unknownMethod)  // malformed: no passkey
    }

    @Test func keyboardOnlyAsksForInputAboutItsDeviceOnly() {
        func decideKO(_ member: String, _ args: [DBusValue]) -> PairingAgent.Answer {
            PairingAgent.decide(member: member, interface: "org.bluez.Agent1", arguments: args, sender: ":1.1", bluetoothd: ":1.1",
                                allowed: [ours], capability: .keyboardOnly)
        }
        #expect(decideKO("RequestPasskey", [.objectPath(ours)]) == .ask(.enterPasskey))
        #expect(decideKO("RequestPinCode", [.objectPath(ours)]) == .ask(.enterPinCode))
        guard case .reject = decideKO("RequestPasskey", [.objectPath(other)]) else { Issue.record("asked about another device"); return }
    }

    @Test func secretsAnswerWithoutAPerson() {
        let secrets = PairingAgent.Secrets(passkey: 4321, pinCode: "0000")
        #expect(secrets.capability == .keyboardOnly)
        #expect(secrets.reply(to: .enterPasskey) == .passkey(4321))
        #expect(secrets.reply(to: .enterPinCode) == .pinCode("0000"))
        #expect(secrets.reply(to: .confirmPasskey(4321)) == .accept)
        #expect(secrets.reply(to: .confirmPasskey(4322)) == .reject("the passkey to confirm (004322) is not the one given"))
        #expect(secrets.reply(to: .authorizePairing) == nil, "for a person to answer, when there is one")
        let device = BluetoothAddress("00:AA:01:00:00:00")!
        #expect(secrets.prompter(.authorizePairing, device) == .accept)
        #expect(secrets.prompter(.displayPasskey(1, entered: 0), device) == .accept)
        let none = PairingAgent.Secrets()
        guard case .reject = none.prompter(.enterPasskey, device) else { Issue.record("entered a passkey it was not given"); return }
        guard case .reject = none.prompter(.enterPinCode, device) else { Issue.record("entered a PIN it was not given"); return }
        #expect(PairingAgent.Secrets(passkey: 1_000_000).passkey == nil, "not a passkey")
    }
}
