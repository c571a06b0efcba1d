"""What a presenced client must do with what it receives, as one pure
function with no I/O (examples/README.md states the rules; the same fold as
examples/js/presence-state.js, and the same lines):

- presence/users/{user}: keep the payload whose version is above the one
  held, drop any other (a stale or duplicate delivery); an empty payload
  means the broker forgot the user.
- presence/groups/{group}: a message with "members" is a snapshot and
  replaces what is held (unless it is older); a delta applies only when its
  "follows" is the version held; one at or below it is dropped; a gap
  (follows above it, or a delta with no snapshot held) means subscribing to
  the group topic again, which brings the retained snapshot first. Deltas
  that come meanwhile are dropped.
- presence/clock: the node's heartbeat, every interval_ms. Once one has
  come, a view that hears none for 2 x interval_ms is stale (the link or the
  node died silently): every user is shown unknown, not as last heard, until
  the next clock message. A broker with the clock off sends none, and the
  view is never stale.

State.handle(topic, payload, now) folds one message in and returns the
events it made: (line, resubscribe), where resubscribe is the topic to
subscribe to again on a gap, else None. State.tick(now), called on a timer,
returns the stale event when the clock went silent; State.shown(user) is
what to show: the status, or "unknown" while stale. now is in seconds
(time.monotonic() when left out): the state reads no clock of its own.
"""

import json
import time


class Group:
    def __init__(self, version=0, members=None, online=0, total=0, by_status=None, resyncing=False):
        self.version = version
        self.members = members if members is not None else {}
        self.online = online
        self.total = total
        self.by_status = by_status if by_status is not None else {}
        self.resyncing = resyncing


class State:
    def __init__(self, prefix="presence"):
        self.prefix = prefix
        self.users = {}  # user -> the presence/users/{user} payload (a dict)
        self.groups = {}  # group -> Group
        self.clock = None  # the last presence/clock (a dict), with "at": when it came
        self.stale = False  # no clock for 2 intervals since

    def handle(self, topic, payload, now=None):
        """Folds one message (payload: bytes or str) heard at now into the state."""
        if now is None:
            now = time.monotonic()
        if isinstance(payload, bytes):
            payload = payload.decode("utf-8")
        if topic == self.prefix + "/clock":
            return self._clock(payload, now)
        parts = topic.split("/")
        pre = self.prefix.split("/")
        if len(parts) != len(pre) + 2 or parts[: len(pre)] != pre:
            return []
        kind, name = parts[len(pre)], parts[len(pre) + 1]
        if kind == "users":
            return self._user(name, payload)
        if kind == "groups":
            return self._group(name, topic, payload)
        return []

    def _clock(self, text, now):
        c = json.loads(text)
        held = self.clock
        self.clock = dict(c, at=now)
        out = []
        if held is None or held["node"] != c["node"] or held["incarnation"] != c["incarnation"]:
            out.append(("clock node=%s interval=%dms" % (c["node"], c["interval_ms"]), None))
        if self.stale:
            self.stale = False
            out.append(("fresh node=%s seq=%d silent=%dms" % (c["node"], c["seq"], round((now - held["at"]) * 1000)), None))
        return out

    def tick(self, now=None):
        """The stale event, once, when the last clock is over 2 intervals old."""
        if now is None:
            now = time.monotonic()
        c = self.clock
        if c is None or self.stale or (now - c["at"]) * 1000 <= 2 * c["interval_ms"]:
            return []
        self.stale = True
        silent = round((now - c["at"]) * 1000)
        return [("stale node=%s silent=%dms: %d users unknown" % (c["node"], silent, len(self.users)), None)]

    def shown(self, user):
        """What to show for user: "unknown" while stale, else its status (None: not known)."""
        p = self.users.get(user)
        if p is None:
            return None
        return "unknown" if self.stale else p["status"]

    def _user(self, user, text):
        if text == "":
            if user not in self.users:
                return []
            del self.users[user]
            return [("user %s forgotten" % user, None)]
        p = json.loads(text)
        held = self.users.get(user)
        if held is not None and not p["version"] > held["version"]:
            return [("drop user %s v%d held v%d" % (user, p["version"], held["version"]), None)]
        self.users[user] = p
        return [("user %s %s v%d sessions=%d" % (user, p["status"], p["version"], len(p.get("sessions") or [])), None)]

    def _group(self, name, topic, text):
        if text == "":  # the group was deleted
            if name not in self.groups:
                return []
            del self.groups[name]
            return [("group %s deleted" % name, None)]
        m = json.loads(text)
        held = self.groups.get(name)
        if isinstance(m.get("members"), list):
            if held is not None and not held.resyncing and m["version"] < held.version:
                return [("drop group %s snapshot v%d held v%d" % (name, m["version"], held.version), None)]
            g = Group(m["version"], {mem["user"]: mem for mem in m["members"]}, m["online"], m["total"], m["by_status"])
            self.groups[name] = g
            listed = " ".join("%s=%s" % (mem["user"], mem["status"]) for mem in m["members"])
            line = "group %s snapshot v%d online=%d total=%d" % (name, g.version, g.online, g.total)
            return [(line + (" " + listed if listed else ""), None)]
        if held is not None and held.resyncing:
            return [("drop group %s v%d awaiting snapshot" % (name, m["version"]), None)]
        if held is not None and m["version"] <= held.version:
            return [("drop group %s v%d held v%d" % (name, m["version"], held.version), None)]
        if held is None or m["follows"] != held.version:
            if held is not None:
                held.resyncing = True
            else:
                self.groups[name] = Group(resyncing=True)
            line = "gap group %s follows v%d held v%d: resubscribe" % (name, m["follows"], held.version if held else 0)
            return [(line, topic)]
        out = []
        for mem in m.get("changes") or []:
            held.members[mem["user"]] = mem
            out.append(("group %s v%d %s %s" % (name, m["version"], mem["user"], mem["status"]), None))
        for user in m.get("removed") or []:
            held.members.pop(user, None)
            out.append(("group %s v%d %s removed" % (name, m["version"], user), None))
        held.version = m["version"]
        held.online, held.total, held.by_status = m["online"], m["total"], m["by_status"]
        out.append(("group %s v%d online=%d total=%d" % (name, held.version, held.online, held.total), None))
        return out
