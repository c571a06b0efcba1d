#!/usr/bin/env python3
"""device.py: one device of a user, online in presenced while it runs.

    python3 device.py --url mqtt://127.0.0.1:1883 --user alice --client-id alice-laptop \\
        --keepalive 10 --status away --text lunch --device laptop

It connects as the user (the MQTT username) with its client id and
keep-alive, which is the heartbeat: a device that goes silent is offline
1.5 x keep-alive later. After every connection, the first and each
reconnection, it publishes its status to presence/set: a status belongs to
a session, and a new connection is a new session that starts online. paho
reconnects on its own after a drop (1 s, then backing off to 10 s).

Each line on stdin is published to presence/set as it is, e.g.
{"status":"dnd","text":"focus"}, and kept for the next reconnection. The end
of stdin or SIGINT/SIGTERM sends a clean DISCONNECT: the user leaves.

Prints one line per event: connected, disconnected rc=N, set {...}, end.
Works with paho-mqtt 1.6 (Debian) and 2.x (PyPI).
"""

import argparse
import json
import signal
import sys
import threading

import paho_compat


def say(line):
    print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="mqtt://127.0.0.1:1883", help="mqtt://host:port or ws://host:port/mqtt")
    ap.add_argument("--user", required=True, help="the MQTT username: the user this device is")
    ap.add_argument("--password")
    ap.add_argument("--client-id", required=True, help="this device's client id (its session id)")
    ap.add_argument("--keepalive", type=int, default=30, help="seconds")
    ap.add_argument("--status", help="online, idle, away, busy or dnd, set after every connection")
    ap.add_argument("--text", help="a status text")
    ap.add_argument("--device", help="a device label (phone, laptop, desktop)")
    a = ap.parse_args()

    # What this session says about itself: sent after every connection.
    mine = {k: v for k, v in (("status", a.status), ("text", a.text), ("device", a.device)) if v is not None}
    lock = threading.Lock()
    c, host, port = paho_compat.new_client(a.client_id, a.url, a.user, a.password)

    def connected(rc):
        if rc != 0:
            say("refused rc=%d" % rc)
            return
        say("connected %s" % a.client_id)
        with lock:
            payload = json.dumps(mine, separators=(",", ":")) if mine else None
        if payload:
            c.publish("presence/set", payload, qos=1)
            say("set " + payload)

    paho_compat.on_connect(c, connected)
    paho_compat.on_disconnect(c, lambda rc: say("disconnected rc=%d" % rc))

    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())

    def read_stdin():
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                update = json.loads(line)
                if not isinstance(update, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                say("bad line: %s" % e)
                continue
            with lock:
                if update.get("scope", "session") == "session":
                    mine.update(update)  # kept for the next session
            c.publish("presence/set", line, qos=1)
            say("set " + line)
        done.set()

    c.connect_async(host, port, keepalive=a.keepalive)
    c.loop_start()  # connects, and reconnects after a drop
    threading.Thread(target=read_stdin, daemon=True).start()
    done.wait()
    c.disconnect()  # clean: the user leaves at once (after the debounce)
    c.loop_stop()
    say("end")


if __name__ == "__main__":
    main()
