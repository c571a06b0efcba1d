"""The client rules of presence_state.py on crafted messages (the broker
never sends a stale version or a group gap on its own):

    python3 -m unittest -v test_presence_state     (in examples/python)

TestExamplesPython runs it.
"""

import json
import unittest

from presence_state import State


def user(name, status, version, sessions=0):
    return json.dumps({"user": name, "status": status, "text": "", "version": version,
                       "since": "2026-11-30T03:30:00.000Z", "last_seen": None,
                       "sessions": [{}] * sessions}).encode()


def member(name, status, version):
    return {"user": name, "status": status, "last_seen": None, "version": version}


def snapshot(version, members):
    return json.dumps({"group": "team", "version": version, "members": members,
                       "online": sum(m["status"] != "offline" for m in members),
                       "total": len(members), "by_status": {}})


def delta(follows, changes, removed=None):
    d = {"group": "team", "version": follows + 1, "follows": follows, "changes": changes,
         "online": 0, "total": 0, "by_status": {}}
    if removed:
        d["removed"] = removed
    return json.dumps(d)


def lines(events):
    return [line for line, _ in events]


class UserRules(unittest.TestCase):
    def test_version_not_above_held_is_dropped(self):
        s = State()
        self.assertEqual(lines(s.handle("presence/users/alice", user("alice", "online", 10, 1))),
                         ["user alice online v10 sessions=1"])
        self.assertEqual(lines(s.handle("presence/users/alice", user("alice", "away", 10))),
                         ["drop user alice v10 held v10"])
        self.assertEqual(lines(s.handle("presence/users/alice", user("alice", "offline", 9))),
                         ["drop user alice v9 held v10"])
        self.assertEqual(s.users["alice"]["status"], "online")
        self.assertEqual(lines(s.handle("presence/users/alice", user("alice", "away", 11, 1))),
                         ["user alice away v11 sessions=1"])

    def test_empty_payload_forgets(self):
        s = State()
        s.handle("presence/users/alice", user("alice", "offline", 5))
        s.handle("presence/users/bob", user("bob", "online", 3, 1))
        self.assertEqual(lines(s.handle("presence/users/alice", b"")), ["user alice forgotten"])
        self.assertNotIn("alice", s.users)
        self.assertEqual(s.users["bob"]["version"], 3)
        self.assertEqual(s.handle("presence/users/alice", b""), [])


class GroupRules(unittest.TestCase):
    def test_snapshot_then_deltas(self):
        s = State()
        self.assertEqual(lines(s.handle("presence/groups/team",
                                        snapshot(7, [member("ann", "busy", 100), member("bob", "offline", 90)]))),
                         ["group team snapshot v7 online=1 total=2 ann=busy bob=offline"])
        self.assertEqual(lines(s.handle("presence/groups/team", delta(7, [member("bob", "online", 120)], ["ann"]))),
                         ["group team v8 bob online", "group team v8 ann removed", "group team v8 online=0 total=0"])
        g = s.groups["team"]
        self.assertEqual(g.version, 8)
        self.assertEqual(list(g.members), ["bob"])

    def test_duplicate_or_older_delta_dropped(self):
        s = State()
        s.handle("presence/groups/team", snapshot(7, [member("ann", "online", 100)]))
        s.handle("presence/groups/team", delta(7, [member("ann", "away", 110)]))
        self.assertEqual(lines(s.handle("presence/groups/team", delta(7, [member("ann", "dnd", 105)]))),
                         ["drop group team v8 held v8"])
        self.assertEqual(lines(s.handle("presence/groups/team", delta(6, [member("ann", "dnd", 99)]))),
                         ["drop group team v7 held v8"])
        self.assertEqual(s.groups["team"].members["ann"]["status"], "away")

    def test_gap_resubscribes_and_snapshot_heals(self):
        s = State()
        s.handle("presence/groups/team", snapshot(7, [member("ann", "online", 100)]))
        ev = s.handle("presence/groups/team", delta(8, [member("ann", "away", 120)]))  # v8 was missed
        self.assertEqual(ev, [("gap group team follows v8 held v7: resubscribe", "presence/groups/team")])
        self.assertEqual(s.groups["team"].members["ann"]["status"], "online")
        self.assertEqual(lines(s.handle("presence/groups/team", delta(9, [member("ann", "dnd", 130)]))),
                         ["drop group team v10 awaiting snapshot"])
        s.handle("presence/groups/team", snapshot(10, [member("ann", "dnd", 130)]))
        self.assertFalse(s.groups["team"].resyncing)
        self.assertEqual(lines(s.handle("presence/groups/team", delta(10, [member("ann", "online", 140)]))),
                         ["group team v11 ann online", "group team v11 online=0 total=0"])

    def test_delta_without_snapshot_is_gap_older_snapshot_dropped(self):
        s = State()
        ev = s.handle("presence/groups/team", delta(3, [member("ann", "online", 1)]))
        self.assertEqual(ev[0][1], "presence/groups/team")
        s.handle("presence/groups/team", snapshot(5, [member("ann", "online", 1)]))
        self.assertEqual(lines(s.handle("presence/groups/team", snapshot(4, []))),
                         ["drop group team snapshot v4 held v5"])
        self.assertEqual(s.groups["team"].version, 5)

    def test_other_prefix_and_topics(self):
        s = State("tenant/presence")
        self.assertEqual(len(s.handle("tenant/presence/users/alice", user("alice", "online", 1, 1))), 1)
        self.assertEqual(s.handle("presence/users/alice", user("alice", "online", 2, 1)), [])
        self.assertEqual(s.handle("tenant/presence/nodes/n1", "{}"), [])
        self.assertEqual(s.handle("tenant/presence/users/a/b", "{}"), [])


def clock(seq, **kw):
    c = {"node": "node-a", "incarnation": "inc-1", "seq": seq, "version": 0,
         "time": "2026-12-02T07:00:00.000Z", "interval_ms": 1000}
    c.update(kw)
    return json.dumps(c)


class ClockTest(unittest.TestCase):
    """presence/clock on an injected clock (seconds)."""

    def test_never_stale_without_a_clock(self):
        s = State()
        s.handle("presence/users/alice", user("alice", "online", 1, 1), 0)
        self.assertEqual(s.tick(3600), [])
        self.assertEqual(s.shown("alice"), "online")
        self.assertIsNone(s.shown("nobody"))

    def test_stale_after_two_intervals_fresh_on_the_next(self):
        s = State()
        self.assertEqual(lines(s.handle("presence/clock", clock(1), 10.0)), ["clock node=node-a interval=1000ms"])
        s.handle("presence/users/alice", user("alice", "online", 1, 1), 10.1)
        s.handle("presence/users/bob", user("bob", "away", 2, 1), 10.2)
        self.assertEqual(s.handle("presence/clock", clock(2), 11.0), [])
        self.assertEqual(s.tick(13.0), [])  # exactly 2 intervals: not yet
        self.assertEqual(s.shown("alice"), "online")
        self.assertEqual(lines(s.tick(13.25)), ["stale node=node-a silent=2250ms: 2 users unknown"])
        self.assertEqual((s.shown("alice"), s.shown("bob")), ("unknown", "unknown"))
        self.assertEqual(s.tick(20.0), [])  # said once
        s.handle("presence/users/alice", user("alice", "busy", 3, 1), 20.1)
        self.assertEqual(s.shown("alice"), "unknown")  # only the clock makes it fresh
        self.assertEqual(lines(s.handle("presence/clock", clock(3), 21.0)), ["fresh node=node-a seq=3 silent=10000ms"])
        self.assertEqual((s.shown("alice"), s.shown("bob")), ("busy", "away"))
        self.assertEqual(s.tick(23.0), [])

    def test_interval_from_the_message_new_node_told(self):
        s = State("tenant/presence")
        self.assertEqual(s.handle("presence/clock", clock(1), 0), [])
        self.assertIsNone(s.clock)
        s.handle("tenant/presence/clock", clock(1, interval_ms=5000), 0)
        self.assertEqual(s.tick(10.0), [])
        self.assertEqual(len(s.tick(10.5)), 1)
        ev = s.handle("tenant/presence/clock", clock(1, node="node-b", incarnation="inc-9", interval_ms=2000), 30.0)
        self.assertEqual(lines(ev), ["clock node=node-b interval=2000ms", "fresh node=node-b seq=1 silent=30000ms"])
        self.assertEqual(s.tick(34.0), [])
        self.assertEqual(len(s.tick(34.5)), 1)

if __name__ == "__main__":
    unittest.main()
