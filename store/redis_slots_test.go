package store

import "testing"

// keySlot agrees with Redis Cluster's own examples (CLUSTER KEYSLOT), and
// every slot has a tag that hashes to it.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"foo": 12182, "bar": 5061, "123456789": 12739, "{user1000}.following": 3443,
		"{user1000}.followers": 3443, "foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061,
		"presenced:{alice}": keySlot("alice"),
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	for s := range slots {
		tag := slotTag(s)
		if tag == "" || keySlot("x{"+tag+"}") != s {
			t.Fatalf("slot %d: tag %q hashes to %d", s, tag, keySlot("x{"+tag+"}"))
		}
	}
	k := keys{prefix: "presenced:", cluster: true}
	for _, u := range []string{"alice", "bob", "ünïcode", "a}b"} {
		if a, b := keySlot(k.user(u)), keySlot(k.nodeUsers("n|i", u)); a != b {
			t.Errorf("user %q: record in slot %d, its set in %d", u, a, b)
		}
	}
}
