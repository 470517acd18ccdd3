'''org.bluez.AgentManager1: agents kept per client, and asking the caller's
agent during Device1.Pair as bluetoothd does.'''

import dbus
import dbus.lowlevel
import dbus.service

from . import bluez_object, common


# agent method → (in signature, args builder, answer signature)
AGENT_METHODS = {
    'RequestConfirmation': ('ou', lambda dev, v: [dbus.ObjectPath(dev), dbus.UInt32(v)]),
    'DisplayPasskey': ('ouq', lambda dev, v: [dbus.ObjectPath(dev), dbus.UInt32(v), dbus.UInt16(0)]),
    'RequestPasskey': ('o', lambda dev, v: [dbus.ObjectPath(dev)]),
    'RequestPinCode': ('o', lambda dev, v: [dbus.ObjectPath(dev)]),
    'DisplayPinCode': ('os', lambda dev, v: [dbus.ObjectPath(dev), dbus.String(str(v))]),
    'RequestAuthorization': ('o', lambda dev, v: [dbus.ObjectPath(dev)]),
}


# BR/EDR legacy PIN pairing asks the agent whatever its IO capability (the
# kernel's PIN Code Request → src/adapter.c pin_code_request →
# src/device.c device_request_pincode; no io_cap check)
PIN_METHODS = {'RequestPinCode', 'DisplayPinCode'}

# IO capability → agent methods a pairing can use with it (the SMP method
# tables: DisplayOnly can only show a passkey, KeyboardOnly only enter one,
# NoInputNoOutput nothing, i.e. Just Works).
IO_CAP_METHODS = {
    'DisplayOnly': {'DisplayPasskey', 'DisplayPinCode', 'RequestAuthorization'},
    'DisplayYesNo': {'RequestConfirmation', 'DisplayPasskey', 'DisplayPinCode',
                     'RequestAuthorization'},
    'KeyboardOnly': {'RequestPasskey', 'RequestPinCode', 'RequestAuthorization'},
    'KeyboardDisplay': set(AGENT_METHODS),
    'NoInputNoOutput': set(),
}


def _agent_client(sender):
    '''src/agent.c agent_get: the caller's agent, else the default agent.'''
    if sender in state.AGENTS:
        return sender
    if state.DEFAULT_AGENT and state.DEFAULT_AGENT[0][0] in state.AGENTS:
        return state.DEFAULT_AGENT[0][0]
    return None


def ask_agent(dev, sender, method, value, ok, err):
    '''Pair's conversation with an agent (bluetoothd: agent.c).'''
    client = _agent_client(sender)
    if client is None or client not in state.AGENTS:
        state.AGENT_LOG.append((method, dev.path, 'error:no agent'))
        err(common._err(common.ERR + 'AuthenticationFailed', 'Authentication Failed (no agent)'))
        return
    agent_path = state.AGENTS[client][0]
    sig, build = AGENT_METHODS[method]

    def on_reply(*answer):
        got = answer[0] if answer else None
        state.AGENT_LOG.append((method, dev.path, 'ok' if got is None else f'ok:{got}'))
        expected = {'RequestPasskey': value, 'RequestPinCode': str(value)}.get(method)
        if expected is not None and (got is None or type(expected)(got) != expected):
            err(common._err(common.ERR + 'AuthenticationFailed', 'Authentication Failed'))
            return
        dev.paired()
        ok()

    def on_error(e):
        name = e.get_dbus_name() or ''
        state.AGENT_LOG.append((method, dev.path, f'error:{name}: {e.get_dbus_message()}'))
        if name == common.ERR + 'Rejected':
            err(common._err(common.ERR + 'AuthenticationRejected', 'Authentication Rejected'))
        elif name == common.ERR + 'Canceled':
            err(common._err(common.ERR + 'AuthenticationCanceled', 'Authentication Canceled'))
        else:
            err(common._err(common.ERR + 'AuthenticationFailed', 'Authentication Failed'))

    common.log(f'Pair {dev.path}: {method} to agent {agent_path} of {client}')
    common._bus().call_async(client, agent_path, 'org.bluez.Agent1', method, sig, build(dev.path, value),
                      on_reply, on_error, timeout=60)


class AgentManagerObject(bluez_object.BluezObject):
    '''/org/bluez: AgentManager1 (agents per client, as bluetoothd keeps
    them) and ProfileManager1.'''

    CAPABILITIES = ('DisplayOnly', 'DisplayYesNo', 'KeyboardOnly', 'NoInputNoOutput',
                    'KeyboardDisplay', '')

    def __init__(self):
        super().__init__('/org/bluez', common.AGENT_MANAGER_IFACE, {})
        self.props['org.bluez.ProfileManager1'] = dbus.Dictionary({}, signature='sv')

    @dbus.service.method(common.AGENT_MANAGER_IFACE, in_signature='os', out_signature='',
                         sender_keyword='sender')
    def RegisterAgent(self, agent, capability, sender=None):
        common.log(f'RegisterAgent {agent} {capability} from {sender}')
        state._check_injected(self.path, 'RegisterAgent')
        if str(capability) not in self.CAPABILITIES:
            raise common._bluez_invalid()
        if sender in state.AGENTS:
            raise common._err(common.ERR + 'AlreadyExists', 'Already Exists')
        state.AGENTS[sender] = (str(agent), str(capability) or 'KeyboardDisplay')
        # src/agent.c agent_create: every agent joins default_agents; the
        # first one (into an empty queue) is the default
        state.DEFAULT_AGENT.append((sender, str(agent)))
        clients._watch_clients()

    @dbus.service.method(common.AGENT_MANAGER_IFACE, in_signature='o', out_signature='',
                         sender_keyword='sender')
    def UnregisterAgent(self, agent, sender=None):
        common.log(f'UnregisterAgent {agent} from {sender}')
        state._check_injected(self.path, 'UnregisterAgent')
        if state.AGENTS.get(sender, ('',))[0] != str(agent):
            raise common._err(common.ERR + 'DoesNotExist', 'Does Not Exist')
        client_gone_agent(sender)

    @dbus.service.method(common.AGENT_MANAGER_IFACE, in_signature='o', out_signature='',
                         sender_keyword='sender')
    def RequestDefaultAgent(self, agent, sender=None):
        state._check_injected(self.path, 'RequestDefaultAgent')
        if state.AGENTS.get(sender, ('',))[0] != str(agent):
            raise common._err(common.ERR + 'DoesNotExist', 'Does Not Exist')
        # src/agent.c add_default_agent: moved to the head of default_agents
        state.DEFAULT_AGENT[:] = [(sender, str(agent))] + [a for a in state.DEFAULT_AGENT if a[0] != sender]

    @dbus.service.method('org.bluez.ProfileManager1', in_signature='osa{sv}', out_signature='')
    def RegisterProfile(self, profile, uuid, options):
        pass

    @dbus.service.method('org.bluez.ProfileManager1', in_signature='o', out_signature='')
    def UnregisterProfile(self, profile):
        pass


def client_gone_agent(name):
    state.AGENTS.pop(name, None)
    state.DEFAULT_AGENT[:] = [a for a in state.DEFAULT_AGENT if a[0] != name]


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import clients, state  # noqa: E402 pylint: disable=wrong-import-position
