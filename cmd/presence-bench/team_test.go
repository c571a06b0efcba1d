package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/bench/result"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
)

// The group payloads are read as roster writes them: a snapshot, then a
// delta, each member entry becoming that member's state.
func TestParseGroup(t *testing.T) {
	seen := time.Date(2026, 11, 30, 3, 30, 0, 0, time.UTC)
	snap, _ := json.Marshal(roster.Snapshot{Group: "team", Version: 7, Members: []roster.Member{
		{User: "m000", Status: presence.Offline, LastSeen: &seen, Version: 3},
		{User: "m001", Status: presence.Offline},
	}, Counts: roster.Counts{Total: 2}})
	g, entries, ok := parseGroup(snap)
	if !ok || !g.snapshot || g.version != 7 || g.entries != 2 || g.online != 0 || g.bytes != len(snap) {
		t.Fatalf("snapshot: %+v %v", g, ok)
	}
	if len(entries) != 2 || entries[0].user != "m000" || entries[0].ob.Online || entries[0].ob.Version != 3 || entries[1].ob.Version != 0 {
		t.Fatalf("snapshot entries: %+v", entries)
	}
	delta, _ := json.Marshal(roster.Delta{Group: "team", Version: 8, Follows: 7, Changes: []roster.Member{
		{User: "m001", Status: presence.Away, Text: "t1", Version: 9},
	}, Counts: roster.Counts{Online: 1, Total: 2}})
	g, entries, ok = parseGroup(delta)
	if !ok || g.snapshot || g.version != 8 || g.follows != 7 || g.entries != 1 || g.online != 1 {
		t.Fatalf("delta: %+v %v", g, ok)
	}
	if len(entries) != 1 || !entries[0].ob.Online || entries[0].ob.Text != "t1" || entries[0].ob.Status != "away" {
		t.Fatalf("delta entries: %+v", entries)
	}
	for _, bad := range []string{`nope`, `{"version":1,"members":[{"status":"online"}]}`, `{"version":2,"follows":1,"changes":[{"user":"x"}]}`} {
		if _, _, ok := parseGroup([]byte(bad)); ok {
			t.Errorf("%s parsed", bad)
		}
	}

	// Through an observer: the member states land in its timeline.
	o := newObserver(parsePresenced)
	o.onPublish(groupTopicPrefix+"team", snap, 10)
	o.onPublish(groupTopicPrefix+"team", delta, 20)
	if n := o.count([]string{"m000", "m001"}, online); n != 1 {
		t.Fatalf("%d online, want 1", n)
	}
	if gaps, back, deltas := o.groupFaults(); gaps != 0 || back != 0 || deltas != 1 {
		t.Fatalf("faults %d %d %d", gaps, back, deltas)
	}
}

func TestGroupFaults(t *testing.T) {
	snap := func(v uint64) groupMsg { return groupMsg{snapshot: true, version: v} }
	delta := func(follows, v uint64) groupMsg { return groupMsg{follows: follows, version: v} }
	for _, c := range []struct {
		name            string
		msgs            []groupMsg
		gaps, back, dts int
	}{
		{"in order", []groupMsg{snap(3), delta(3, 4), delta(4, 5)}, 0, 0, 2},
		{"a missed delta", []groupMsg{snap(3), delta(4, 5)}, 1, 0, 1},
		{"a delta before the snapshot", []groupMsg{delta(2, 3), snap(3), delta(3, 4)}, 1, 0, 2},
		{"a skip in the version", []groupMsg{snap(3), delta(3, 5)}, 1, 0, 1},
		{"a resync snapshot", []groupMsg{snap(3), delta(4, 5), snap(6), delta(6, 7)}, 1, 0, 2},
		{"an older snapshot", []groupMsg{snap(3), delta(3, 4), snap(2), delta(4, 5)}, 0, 1, 2},
	} {
		gaps, back, dts := groupFaults(c.msgs)
		if gaps != c.gaps || back != c.back || dts != c.dts {
			t.Errorf("%s: gaps %d backward %d deltas %d, want %d %d %d", c.name, gaps, back, dts, c.gaps, c.back, c.dts)
		}
	}
}

func TestMemberNames(t *testing.T) {
	if got := strings.Join(memberNames(3), ","); got != "m000,m001,m002" {
		t.Fatal(got)
	}
	if got := memberNames(10000); got[9999] != "m9999" || got[0] != "m0000" {
		t.Fatal(got[0], got[9999])
	}
}

// The targets are judged on the presenced-group run, against the user
// topics' run of the same file.
func TestTeamCompare(t *testing.T) {
	runs := []result.Run{
		{System: result.SystemMemory, Scenario: scenarioTeam, Extra: map[string]float64{"msgs_total": 249500, "msgs_per_watcher": 499}},
		{System: result.SystemMosquitto, Scenario: scenarioTeam, Extra: map[string]float64{"msgs_total": 249500}},
		{System: systemGroup, Scenario: scenarioTeam, Params: map[string]any{"batch_ms": 250.0},
			Metrics: result.Metrics{Latency: &result.Summary{N: 500, P50: 150, P99: 290, Max: 295}},
			Extra:   map[string]float64{"msgs_total": 10000, "msgs_per_watcher": 20, "wrong_final": 0, "final_views_judged": 250000}},
		{System: result.SystemMemory, Scenario: result.ScenarioChurn},
	}
	teamCompare(runs, time.Second)
	g := runs[2]
	if g.Extra["msgs_ratio_vs_user_topics"] != 25 || g.Extra["msgs_ratio_vs_mosquitto"] != 25 {
		t.Fatalf("ratios: %v", g.Extra)
	}
	notes := strings.Join(g.Notes, "\n")
	for _, want := range []string{"25× (499 against 20 messages per watcher", "≤ batch window + 50 ms = 300 ms: p99 290 ms: met", "0 of 250000 (watcher, member) views not online"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "missed") {
		t.Errorf("a target missed:\n%s", notes)
	}
	// Too many messages, too slow, a wrong state: all missed.
	runs[2].Notes = nil
	runs[2].Extra["msgs_total"] = 20000
	runs[2].Metrics.Latency.P99 = 301
	runs[2].Extra["wrong_final"] = 1
	teamCompare(runs, time.Second)
	if n := strings.Count(strings.Join(runs[2].Notes, "\n"), ": missed"); n != 3 {
		t.Fatalf("%d missed:\n%s", n, strings.Join(runs[2].Notes, "\n"))
	}
	// No group run: nothing to judge, nothing changed.
	other := []result.Run{runs[0]}
	teamCompare(other, time.Second)
	if len(other[0].Notes) != 0 {
		t.Fatalf("notes on a user-topics run: %v", other[0].Notes)
	}
}
