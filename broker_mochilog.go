package presenced

import (
	"context"
	"log/slog"

	"github.com/mochi-mqtt/server/v2/packets"
)

// packetSummary is a slog.Handler for mochi's log: mochi logs whole
// packets (payload included: "publish packet error" at error for every
// publish a hook refuses with a reason code, "publish packet rejected" at
// debug), so one client sending refused 1 MB publishes could write
// megabytes of log. It replaces a packets.Packet attribute by its type,
// topic, packet id and payload size.
type packetSummary struct{ slog.Handler }

// mochiLog returns log for mochi, with packets summarised.
func mochiLog(log *slog.Logger) *slog.Logger {
	return slog.New(packetSummary{log.Handler()}).With("component", "mochi")
}

// Handle implements slog.Handler.
func (h packetSummary) Handle(ctx context.Context, r slog.Record) error {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		_, found = a.Value.Any().(packets.Packet)
		return !found
	})
	if !found {
		return h.Handler.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if pk, ok := a.Value.Any().(packets.Packet); ok {
			a = slog.Group(a.Key, "type", packets.PacketNames[pk.FixedHeader.Type], "topic", pk.TopicName,
				"id", pk.PacketID, "qos", pk.FixedHeader.Qos, "payload_bytes", len(pk.Payload))
		}
		out.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h packetSummary) WithAttrs(as []slog.Attr) slog.Handler {
	return packetSummary{h.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h packetSummary) WithGroup(name string) slog.Handler {
	return packetSummary{h.Handler.WithGroup(name)}
}
