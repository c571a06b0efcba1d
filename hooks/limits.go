package hooks

import (
	"strings"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// bucket is a token bucket: rate tokens a second, at most burst at once.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// take takes one token at now, and reports whether there was one.
func (b *bucket) take(now time.Time, rate, burst float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() || now.After(b.last) {
		if !b.last.IsZero() {
			b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
		}
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// OnSubscribe refuses, with 0x8F (topic filter invalid), a topic filter
// longer than MaxTopicLength bytes, with more than MaxTopicLevels levels, or
// beyond the MaxSubscriptions filters a connection may hold. mochi has no
// way for a hook to refuse one filter but its ACL check, which another hook
// can overrule, so the filter is replaced by an empty one, which mochi
// refuses as invalid.
func (h *Presence) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if cl.Net.Inline {
		return pk
	}
	held := cl.State.Subscriptions.Len()
	var filters packets.Subscriptions
	for _, f := range pk.Filters {
		refused := (h.o.MaxTopicLength > 0 && len(f.Filter) > h.o.MaxTopicLength) ||
			(h.o.MaxTopicLevels > 0 && strings.Count(f.Filter, "/")+1 > h.o.MaxTopicLevels)
		if !refused && h.o.MaxSubscriptions > 0 {
			if _, ok := cl.State.Subscriptions.Get(f.Filter); !ok {
				if held >= h.o.MaxSubscriptions {
					refused = true
				} else {
					held++
				}
			}
		}
		if refused {
			h.Stats.FiltersRefused.Add(1)
			f.Filter = ""
		}
		filters = append(filters, f)
	}
	pk.Filters = filters
	return pk
}
