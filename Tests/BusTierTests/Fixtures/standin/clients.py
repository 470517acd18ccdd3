'''Bus clients: what goes when a client leaves the bus (its discovery,
agent, applications and advertisements), as bluetoothd's disconnect
watches do.'''

from dbusmock import mockobject


_WATCHING = False


def client_gone(name):
    agent_manager1.client_gone_agent(name)
    le_advertising_manager1.server_client_gone(name)
    advertisement_monitor_manager1.client_gone(name)
    for st in state.ADAPTERS.values():
        st.filters.pop(name, None)
        if name in st.sessions:
            common.log(f'client {name} left the bus: ending its discovery on {st.name}')
            del st.sessions[name]
            st.events.append(('ClientLeft', name))
            if not st.sessions:
                adapter1.end_discovery(st)
    for obj in list(mockobject.objects.values()):
        if isinstance(obj, gatt_client.GattCharacteristicObject) and name in obj.notify_clients:
            obj.drop_notify_client(name)


def _on_name_owner_changed(name, old_owner, new_owner):
    if str(name).startswith(':') and not new_owner:
        client_gone(str(name))


def _watch_clients():
    global _WATCHING  # pylint: disable=global-statement
    if _WATCHING:
        return
    common._bus().add_signal_receiver(_on_name_owner_changed, signal_name='NameOwnerChanged',
                               dbus_interface='org.freedesktop.DBus',
                               bus_name='org.freedesktop.DBus',
                               path='/org/freedesktop/DBus')
    _WATCHING = True


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import adapter1, advertisement_monitor_manager1, agent_manager1, common, gatt_client, le_advertising_manager1, state  # noqa: E402 pylint: disable=wrong-import-position
