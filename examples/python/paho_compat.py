"""paho-mqtt 1.x and 2.x behind one small API.

paho-mqtt 2.0 changed the Client constructor (a CallbackAPIVersion comes
first) and the callbacks' signatures (reason codes and properties). Debian
bookworm ships 1.6.1 (python3-paho-mqtt), PyPI 2.x. This module detects
which one is installed and gives both the same shape: callbacks get plain
integers.
"""

from urllib.parse import urlsplit

import paho.mqtt
import paho.mqtt.client as mqtt

PAHO2 = hasattr(mqtt, "CallbackAPIVersion")
VERSION = paho.mqtt.__version__


def _code(rc):
    """A reason code (paho 2) or an int (paho 1) as an int."""
    return rc.value if hasattr(rc, "value") else int(rc)


def new_client(client_id, url, username=None, password=None):
    """A client for url (mqtt://host:port, ws://host:port/path), MQTT 3.1.1,
    clean session. Returns (client, host, port)."""
    u = urlsplit(url)
    if u.scheme not in ("mqtt", "tcp", "ws"):
        raise ValueError("url %r: want mqtt://host:port or ws://host:port/path" % url)
    transport = "websockets" if u.scheme == "ws" else "tcp"
    if PAHO2:
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True,
                        protocol=mqtt.MQTTv311, transport=transport)
    else:
        c = mqtt.Client(client_id=client_id, clean_session=True, protocol=mqtt.MQTTv311, transport=transport)
    if transport == "websockets":
        c.ws_set_options(path=u.path or "/mqtt")
    if username is not None:
        c.username_pw_set(username, password)
    c.reconnect_delay_set(min_delay=1, max_delay=10)
    return c, u.hostname or "127.0.0.1", u.port or (1882 if transport == "websockets" else 1883)


def on_connect(c, fn):
    """fn(rc): 0 is accepted."""
    if PAHO2:
        c.on_connect = lambda _c, _u, _flags, rc, _props=None: fn(_code(rc))
    else:
        c.on_connect = lambda _c, _u, _flags, rc: fn(rc)


def on_disconnect(c, fn):
    """fn(rc): 0 is a disconnect we asked for."""
    if PAHO2:
        c.on_disconnect = lambda _c, _u, _flags, rc, _props=None: fn(_code(rc))
    else:
        c.on_disconnect = lambda _c, _u, rc: fn(rc)


def on_subscribe(c, fn):
    """fn(mid, codes): a granted QoS (0-2) or a failure (128) per filter."""
    if PAHO2:
        c.on_subscribe = lambda _c, _u, mid, codes, _props=None: fn(mid, [_code(x) for x in codes])
    else:
        c.on_subscribe = lambda _c, _u, mid, granted: fn(mid, list(granted))


def on_message(c, fn):
    """fn(topic, payload bytes, retained)."""
    c.on_message = lambda _c, _u, msg: fn(msg.topic, msg.payload, bool(msg.retain))
