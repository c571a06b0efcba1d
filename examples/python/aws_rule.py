#!/usr/bin/env python3
"""aws_rule.py: reacts to presenced's AWS IoT lifecycle events as an AWS IoT rule would.

    python3 aws_rule.py --url mqtt://127.0.0.1:1883 --username ops --password ...

An AWS IoT rule on $aws/events/presence/disconnected/+ must not act on a
disconnect at once: AWS warns that lifecycle events may come out of order
and twice, so the usual recipe parks each disconnect in a 5 s delay queue
and then asks whether the device came back. presenced sends, per client id,
each connected and disconnected once and in epoch order (versionNumber),
the disconnect of a session always before the next session's connect: this
rule acts on each event as it comes. It still drops anything at or below
the versionNumber it holds for the client id, as cheap insurance.

Prints one line per event ("online <clientId> v<version>", "offline
<clientId> <disconnectReason> v<version>" for an end the client did not ask
for, "left <clientId> v<version>" for a clean one, "refused <clientId>
<connectFailureReason>"), "stale ..." for a dropped one, and "ready" once
subscribed. Needs a service account (only those read the lifecycle topics).
Works with paho-mqtt 1.6 (Debian) and 2.x (PyPI).
"""

import argparse
import json
import os
import signal
import threading

import paho_compat


def say(line):
    print(line, flush=True)


class Rule:
    """The rule's state: the last versionNumber acted on per client id, and
    whether that event was a connect (open) or a disconnect."""

    def __init__(self):
        # (principalIdentifier, clientId) -> (versionNumber, "connected" | "disconnected"):
        # in presenced a client id is its user's, two users may share one
        self.seen = {}

    def handle(self, topic, payload):
        ev = json.loads(payload)
        kind, client = ev["eventType"], ev["clientId"]
        if kind == "connect_failed":
            return "refused %s %s" % (client, ev["connectFailureReason"])
        v = ev["versionNumber"]
        key = (ev["principalIdentifier"], client)
        last = self.seen.get(key)
        # A connected after the disconnected of the same version never
        # happens; anything older than what we hold is stale.
        if last is not None and (v < last[0] or (v == last[0] and (kind == last[1] or kind == "connected"))):
            return "stale %s %s v%d" % (kind, client, v)
        self.seen[key] = (v, kind)
        if kind == "connected":
            return "online %s v%d" % (client, v)
        if ev["clientInitiatedDisconnect"]:
            return "left %s v%d" % (client, v)
        return "offline %s %s v%d" % (client, ev["disconnectReason"], v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="mqtt://127.0.0.1:1883", help="mqtt://host:port or ws://host:port/mqtt")
    ap.add_argument("--username", help="a service account")
    ap.add_argument("--password")
    ap.add_argument("--client-id", default="aws-rule-py-%d" % os.getpid())
    ap.add_argument("--prefix", default="$aws/events/presence", help="lifecycle.aws.prefix")
    a = ap.parse_args()

    rule = Rule()
    c, host, port = paho_compat.new_client(a.client_id, a.url, a.username, a.password)
    filters = [("%s/%s/+" % (a.prefix, k), 1) for k in ("connected", "disconnected", "connect_failed")]

    def connected(rc):
        if rc != 0:
            say("refused rc=%d" % rc)
            return
        c.subscribe(filters)

    def subscribed(_mid, codes):
        say("error refused %s" % codes if any(code >= 128 for code in codes) else "ready")

    def message(topic, payload, _retained):
        try:
            say(rule.handle(topic, payload))
        except (ValueError, KeyError, TypeError) as e:
            say("bad %s: %s" % (topic, e))

    paho_compat.on_connect(c, connected)
    paho_compat.on_subscribe(c, subscribed)
    paho_compat.on_message(c, message)
    paho_compat.on_disconnect(c, lambda rc: say("disconnected rc=%d" % rc))

    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    c.connect_async(host, port, keepalive=30)
    c.loop_start()
    done.wait()
    c.disconnect()
    c.loop_stop()
    say("end")


if __name__ == "__main__":
    main()
