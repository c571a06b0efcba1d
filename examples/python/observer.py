#!/usr/bin/env python3
"""observer.py: watches presenced with paho-mqtt and prints one line per change.

    python3 observer.py --url mqtt://127.0.0.1:1883 --group team
    python3 observer.py --user alice --user bob

It subscribes to presence/users/+ (or presence/users/{user} for each --user)
and presence/groups/{group} for each --group, again after every
reconnection (a clean session holds no subscription), and folds what comes
with presence_state.State: a version not above the one held is dropped, a
group delta applies only on its follows, a gap subscribes to the group topic
again (the retained snapshot comes first). It also subscribes to
presence/clock, the node's heartbeat: when none has come for two of its
intervals (the link or the node died silently) it prints "stale ..." and
every user as "unknown", and "fresh ..." and every user again at the next
one. Prints "ready" once the first
subscriptions are granted; SIGINT/SIGTERM sends a clean DISCONNECT.
Works with paho-mqtt 1.6 (Debian) and 2.x (PyPI).
"""

import argparse
import os
import signal
import threading

import paho_compat
from presence_state import State


def say(line):
    print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="mqtt://127.0.0.1:1883", help="mqtt://host:port or ws://host:port/mqtt")
    ap.add_argument("--username", help="an observer's account, where authentication is on")
    ap.add_argument("--password")
    ap.add_argument("--client-id", default="observer-py-%d" % os.getpid())
    ap.add_argument("--group", action="append", default=[], help="a group to watch (repeatable)")
    ap.add_argument("--user", action="append", default=[], help="a user to watch (repeatable); default all")
    ap.add_argument("--prefix", default="presence")
    a = ap.parse_args()

    filters = ["%s/users/%s" % (a.prefix, u) for u in a.user] or ["%s/users/+" % a.prefix]
    filters += ["%s/groups/%s" % (a.prefix, g) for g in a.group]
    filters += ["%s/clock" % a.prefix]
    state = State(a.prefix)
    lock = threading.Lock()  # the state: paho's thread and the staleness check

    def show_all():
        for u, p in state.users.items():
            say("user %s %s v%d" % (u, state.shown(u), p["version"]))
    c, host, port = paho_compat.new_client(a.client_id, a.url, a.username, a.password)
    first = {"mid": None, "ready": False}

    def connected(rc):
        if rc != 0:
            say("refused rc=%d" % rc)
            return
        say("connected paho-mqtt %s" % paho_compat.VERSION)
        _, mid = c.subscribe([(f, 1) for f in filters])
        first["mid"] = mid

    def subscribed(mid, codes):
        if any(code >= 128 for code in codes):
            say("error refused %s" % codes)
        elif mid == first["mid"] and not first["ready"]:
            first["ready"] = True
            say("ready")

    def message(topic, payload, _retained):
        with lock:
            try:
                events = state.handle(topic, payload)
            except (ValueError, KeyError, TypeError) as e:
                say("bad %s: %s" % (topic, e))
                return
            for line, _ in events:
                say(line)
                if line.startswith("fresh "):
                    show_all()
        for _, resubscribe in events:
            if resubscribe:
                # Subscribing again replaces the subscription and sends the
                # retained snapshot first.
                c.subscribe(resubscribe, 1)

    paho_compat.on_connect(c, connected)
    paho_compat.on_subscribe(c, subscribed)
    paho_compat.on_message(c, message)
    paho_compat.on_disconnect(c, lambda rc: say("disconnected rc=%d" % rc))

    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    c.connect_async(host, port, keepalive=30)
    c.loop_start()  # connects, and reconnects after a drop
    while not done.wait(0.1):  # the staleness check, on this process's clock
        with lock:
            for line, _ in state.tick():
                say(line)
                show_all()
    c.disconnect()
    c.loop_stop()
    say("end")


if __name__ == "__main__":
    main()
