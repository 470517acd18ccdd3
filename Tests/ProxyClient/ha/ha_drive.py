"""Drives a running Home Assistant without a browser, as a user would through its UI:
onboarding (the first user) and a token, the ESPHome integration added by host,
port and key (its config flow), then prints what Home Assistant made of
`bluectl proxy`: the config entry, the device, the Bluetooth scanner, the
advertisements it heard through it, and a BTHome sensor set up from them.

Run with Home Assistant's own Python (aiohttp is its dependency):
    ha_drive.py URL PROXY_HOST PROXY_PORT [KEY] [--bthome MAC]
Each finding is one line `== TITLE` followed by its JSON; exit 1 if a step fails.
Manual check, not part of CI (Tests/ProxyClient/ha_try.sh, docs/proxy.md)."""
import ast
import asyncio
import json
import sys
import time

import aiohttp

CLIENT_ID = 'http://127.0.0.1:8123/'


def show(title, value):
    print('== %s' % title)
    print(json.dumps(value, indent=1, sort_keys=True, default=str))
    sys.stdout.flush()


async def wait_up(session, url, limit):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            async with session.get(url + '/api/onboarding') as r:
                if r.status == 200:
                    return await r.json()
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(5)
    raise SystemExit('Home Assistant did not answer on %s within %d s' % (url, limit))


async def token(session, url):
    async with session.post(url + '/api/onboarding/users', json={
            'client_id': CLIENT_ID, 'name': 'Lab', 'username': 'lab', 'password': 'lab-password-28',
            'language': 'en'}) as r:
        body = await r.json()
        if r.status != 200:
            raise SystemExit('onboarding refused: %s %s' % (r.status, body))
    async with session.post(url + '/auth/token', data={
            'grant_type': 'authorization_code', 'code': body['auth_code'], 'client_id': CLIENT_ID}) as r:
        return (await r.json())['access_token']


class WS:
    def __init__(self, ws):
        self.ws, self.next_id = ws, 1

    async def call(self, kind, **fields):
        self.next_id += 1
        await self.ws.send_json(dict(id=self.next_id, type=kind, **fields))
        while True:
            msg = await self.ws.receive_json(timeout=120)
            if msg.get('id') == self.next_id and msg.get('type') == 'result':
                if not msg.get('success'):
                    raise RuntimeError('%s: %s' % (kind, msg.get('error')))
                return msg['result']


async def answer_of(r):
    """The JSON of an answer; an error's status and text (Home Assistant answers a failed flow step 500, text/plain)."""
    text = await r.text()
    try:
        return json.loads(text)
    except ValueError:
        return {'type': 'http_error', 'status': r.status, 'text': text}


async def flow(session, url, headers, handler, steps):
    async with session.post(url + '/api/config/config_entries/flow', headers=headers,
                            json={'handler': handler, 'show_advanced_options': False}) as r:
        step = await answer_of(r)
    show('%s config flow: first step' % handler, step)
    for data in steps:
        if step.get('type') != 'form':
            break
        async with session.post(url + '/api/config/config_entries/flow/' + step['flow_id'], headers=headers,
                                json=data(step)) as r:
            step = await answer_of(r)
        show('%s config flow: then %s' % (handler, step.get('step_id') or step.get('type')), step)
    return step


async def main():
    args = sys.argv[1:]
    bthome = None
    if '--bthome' in args:
        i = args.index('--bthome')
        bthome = args[i + 1].upper()
        del args[i:i + 2]
    url, host, port = args[0], args[1], int(args[2])
    key = args[3] if len(args) > 3 else None
    failed = []
    summary = {}   # the findings in brief, printed last (docs/proxy.md quotes it)
    async with aiohttp.ClientSession() as session:
        show('onboarding before', await wait_up(session, url, 1200))
        headers = {'Authorization': 'Bearer ' + await token(session, url)}
        # the rest of onboarding, as the UI's wizard does: once onboarded, a discovered device waits for the
        # user (before, BTHome and others add what they discover on their own)
        for step, body in (('core_config', {}), ('analytics', {}),
                           ('integration', {'client_id': CLIENT_ID, 'redirect_uri': CLIENT_ID + '?auth_callback=1'})):
            async with session.post(url + '/api/onboarding/' + step, headers=headers, json=body) as r:
                if r.status != 200:
                    failed.append('onboarding step %s: %s %s' % (step, r.status, await r.text()))
        async with session.get(url + '/api/onboarding') as r:
            show('onboarding after', await r.json())

        def answer(step):
            if step['step_id'] == 'user':
                return {'host': host, 'port': port}
            if step['step_id'] == 'encryption_key':
                return {'noise_psk': key}
            raise SystemExit('unexpected step %r' % step['step_id'])
        done = await flow(session, url, headers, 'esphome', [answer, answer, answer])
        if done.get('type') != 'create_entry':
            failed.append('the ESPHome config flow did not create an entry')
        entry_id = (done.get('result') or {}).get('entry_id')

        async with session.ws_connect(url + '/api/websocket') as raw:
            await raw.receive_json()
            await raw.send_json({'type': 'auth', 'access_token': headers['Authorization'][7:]})
            auth = await raw.receive_json()
            if auth.get('type') != 'auth_ok':
                raise SystemExit('websocket auth: %r' % auth)
            ws = WS(raw)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                entries = await ws.call('config_entries/get', domain='esphome')
                if entries and entries[0]['state'] in ('loaded', 'setup_error', 'setup_retry'):
                    break
                await asyncio.sleep(3)
            show('ESPHome config entries', entries)
            summary['esphome_entry'] = {k: entries[0][k] for k in ('title', 'source', 'state')} if entries else None
            if not entries or entries[0]['state'] != 'loaded':
                failed.append('the ESPHome entry is not loaded')
            # the entry is loaded before its device is registered: that waits for the integration's first
            # connection (under the lab's TCG, seconds later)
            mine, deadline = [], time.monotonic() + 120
            while time.monotonic() < deadline and not mine:
                mine = [d for d in await ws.call('config/device_registry/list') if entry_id in d['config_entries']]
                if not mine:
                    await asyncio.sleep(3)
            if not mine:
                failed.append('no device registered for the ESPHome entry')
            show('device registry (ESPHome)', mine)
            summary['esphome_device'] = [{k: d[k] for k in ('name', 'manufacturer', 'model', 'sw_version', 'connections')}
                                         for d in mine]
            # the scanner registers once the integration has read the device info; the advertisements
            # it forwards reach HA's Bluetooth manager, which keeps the latest of each address
            await asyncio.sleep(20)
            if entry_id:
                async with session.get(url + '/api/diagnostics/config_entry/' + entry_id, headers=headers) as r:
                    diag = await r.json()
                data = diag.get('data', {})
                show('ESPHome diagnostics: entry data and storage', {k: v for k, v in data.items() if k != 'bluetooth'})
                bt = data.get('bluetooth', {})
                show('ESPHome diagnostics: bluetooth', bt)
                sc = bt.get('scanner') or {}
                summary['scanner'] = {k: sc.get(k) for k in ('name', 'type', 'connectable', 'scanning')}
                summary['scanner'].update({k: bt.get(k) for k in ('connections_free', 'connections_limit')})
                # advertisement_data is bleak's AdvertisementData as a list; [2] the service data, whose bytes
                # the diagnostics write as their repr
                summary['scanner']['heard'] = {
                    d['address']: {u: ast.literal_eval(v['repr']).hex() for u, v in d['advertisement_data'][2].items()}
                    for d in sc.get('discovered_devices_and_advertisement_data', [])}
                summary['device_info'] = {k: v for k, v in data.get('storage_data', {}).get('device_info', {}).items()
                                          if k in ('bluetooth_proxy_feature_flags', 'legacy_bluetooth_proxy_version',
                                                   'esphome_version', 'friendly_name')}
                if not bt.get('scanner'):
                    failed.append('no Bluetooth scanner for the proxy in the diagnostics')

            if bthome:
                seen = None
                deadline = time.monotonic() + 300
                while time.monotonic() < deadline and not seen:
                    flows = await ws.call('config_entries/flow/progress')
                    seen = [f for f in flows if f['handler'] == 'bthome']
                    if not seen:
                        await asyncio.sleep(5)
                show('discovered flows (bthome)', seen)
                summary['discovered'] = [(f['handler'], f['context']['source'], f['step_id'],
                                          f['context'].get('title_placeholders')) for f in seen or []]
                if not seen:
                    failed.append('Home Assistant did not discover the BTHome device through the proxy')
                else:
                    async with session.post(url + '/api/config/config_entries/flow/' + seen[0]['flow_id'],
                                            headers=headers, json={}) as r:
                        show('bthome flow: confirmed', await r.json())
                    async def bthome_states():
                        ids = {e['entity_id'] for e in await ws.call('config/entity_registry/list')
                               if e['platform'] == 'bthome'}
                        async with session.get(url + '/api/states', headers=headers) as r:
                            return [s for s in await r.json() if s['entity_id'] in ids
                                    and s['state'] not in ('unknown', 'unavailable')]
                    states, deadline = [], time.monotonic() + 300
                    while time.monotonic() < deadline and not states:
                        states = await bthome_states()
                        if not states:
                            await asyncio.sleep(5)
                    show('BTHome sensor states (heard through the proxy)', states)
                    brief = lambda ss: [(x['entity_id'], x['state'], x['attributes'].get('unit_of_measurement'),
                                         x['last_updated']) for x in ss]
                    summary['bthome_states'] = brief(states)
                    if not states:
                        failed.append('no BTHome sensor with a value')
                    else:
                        await asyncio.sleep(15)   # the advertiser changes the temperature every 3 s
                        later = await bthome_states()
                        show('BTHome sensor states 15 s later', later)
                        summary['bthome_states_15s_later'] = brief(later)
                    bt_devices = await ws.call('config/device_registry/list')
                    theirs = [d for d in bt_devices if any(c[1].upper() == bthome for c in d['connections'])]
                    show('device registry (BTHome)', theirs)
                    summary['bthome_device'] = [{k: d[k] for k in ('name', 'model', 'connections')} for d in theirs]
    print('== summary')
    for k, v in summary.items():
        print('%s: %s' % (k, json.dumps(v, default=repr)))
    if failed:
        print('FAILED: ' + '; '.join(failed))
        sys.exit(1)
    print('OK')


asyncio.run(main())
