"""The lab as a guest script sees it (Scripts/lab, "The contract a guest
script gets"): the adapters and addresses from the environment, the output
folder, and the peripherals' UUIDs."""
import os

ENV = os.environ
BLUECTL = ENV.get('BLUECTL', '')
CENTRAL = ENV.get('CENTRAL', 'hci1')
CENTRAL_ADDR = ENV.get('CENTRAL_ADDR', '')
PERIPH_ADDR = ENV.get('PERIPH_ADDR', '')
PERIPH2_ADDR = ENV.get('PERIPH2_ADDR', '')
PERIPH2_ADDR_TYPE = ENV.get('PERIPH2_ADDR_TYPE', '')
SERVER = ENV.get('SERVER', '')
SERVER_ADDR = ENV.get('SERVER_ADDR', '')
LAB_OUT = ENV.get('LAB_OUT', '/tmp')
REPO = ENV.get('REPO', os.getcwd())
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # Tests/Lab
PY = '/usr/bin/python3'

CHECK_DIR = os.path.join(LAB_OUT, 'checks')
BTD_LOG = os.path.join(LAB_OUT, 'bluetoothd.log')
SUPERVISOR_LOG = os.path.join(LAB_OUT, 'supervisor.log')
AGENT_LOG = os.path.join(LAB_OUT, 'agent.log')

# Options added to every command that names a device: bluectl's default
# adapter is the first powered one (hci0, the peripheral here).
DEV_OPTS = ('--adapter', CENTRAL)
SCAN_TIMEOUT = '30'   # the lab's advertiser shows up every ~1.5 s; be generous under TCG

# ---- the peripheral (hci0): BlueZ's example-gatt-server + example-advertisement,
# and the lab's own service (Scripts/lab.d/guest/periph.py)
DEV = PERIPH_ADDR
PERIPH_ADAPTER = 'hci0'   # the peripheral's side of the same bluetoothd
HR_SVC = '0000180d-0000-1000-8000-00805f9b34fb'
HR_MEAS = '00002a37-0000-1000-8000-00805f9b34fb'
BODY_LOC = '00002a38-0000-1000-8000-00805f9b34fb'
HR_CTRL = '00002a39-0000-1000-8000-00805f9b34fb'
BATT_SVC = '0000180f-0000-1000-8000-00805f9b34fb'
BATT_LVL = '00002a19-0000-1000-8000-00805f9b34fb'
TEST_SVC = '12345678-1234-5678-1234-56789abcdef0'
TEST_CHR = '12345678-1234-5678-1234-56789abcdef1'       # read, write
TEST_DESC = '12345678-1234-5678-1234-56789abcdef2'
TEST_ENC_CHR = '12345678-1234-5678-1234-56789abcdef3'   # encrypt-read, encrypt-write (pairing via the agent)
CUD = '00002901-0000-1000-8000-00805f9b34fb'
LAB_SVC = 'b1ec7100-0000-4000-8000-000000000000'
LAB_STREAM = 'b1ec7100-0000-4000-8000-000000000001'     # notify: uint32 LE seq + pattern, 20 bytes
LAB_CONTROL = 'b1ec7100-0000-4000-8000-000000000002'    # write uint32 LE N: burst of N
LAB_LONG = 'b1ec7100-0000-4000-8000-000000000003'       # 300 bytes, i & 0xff
LAB_SINK = 'b1ec7100-0000-4000-8000-000000000005'       # write-without-response: counts, logs a summary
PERIPH_LOG = os.path.join(LAB_OUT, 'periph.log')
ADV_NAME = 'TestAdvertisement'

# ---- the second peripheral (hci2): a static random address; the same lab
# service from periph.py's own ATT server, advertised as Periph2
DEV2 = PERIPH2_ADDR
PERIPH2_ADAPTER = ENV.get('PERIPHERAL2') or 'hci2'
ADV2_NAME = 'Periph2'

# ---- the server adapter ($SERVER, hci3) for bluectl serve/advertise
SRV = SERVER_ADDR
SRV_ADAPTER = SERVER


def dev_path(addr, adapter=None):
    """bluetoothd's object path of a device seen by ADAPTER (default: the central)."""
    return '/org/bluez/%s/dev_%s' % (adapter or CENTRAL, addr.replace(':', '_'))


def long_pattern(down=False):
    """The lab's 300-byte long value as hex: i & 0xff, or (255 - i) & 0xff."""
    return ''.join('%02x' % (((255 - i + 512) if down else i) % 256) for i in range(300))
